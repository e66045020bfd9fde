"""Tests for morl.stats: IQM, probability of improvement and their bootstrap intervals
(Agarwal et al. 2021, with rliable's definitions)."""

import numpy as np
import pytest
import scipy.stats

from morl import stats
from morl.stats import cell_interval, iqm_intervals, probability_of_improvement

REPS = 300


def poi_double_loop(x, y):
    """P(X > Y) by the definition, in plain Python: per task, the share of (run of X, run of Y)
    pairs that X wins, ties counting 1/2; then the mean over tasks."""
    x, y = np.asarray(x).tolist(), np.asarray(y).tolist()
    n_tasks = len(x[0])
    per_task = []
    for m in range(n_tasks):
        total = 0.0
        for row_x in x:
            for row_y in y:
                a, b = row_x[m], row_y[m]
                total += 1.0 if a > b else 0.5 if a == b else 0.0
        per_task.append(total / (len(x) * len(y)))
    return sum(per_task) / n_tasks


# ---------------------------------------------------------------------------------------------
# point estimates


def test_iqm_hand_computed():
    # 8 runs x 1 task: sorted 1 2 | 3 4 5 6 | 7 1000; the middle four average to 4.5 and the
    # outlier does not count
    x = np.array([[5.0], [1.0], [1000.0], [3.0], [7.0], [2.0], [6.0], [4.0]])
    (point, low, high) = iqm_intervals({"m": x}, reps=REPS)["m"]
    assert point == pytest.approx(4.5, abs=1e-12)
    assert low <= point <= high
    # 4 runs x 2 tasks pool into the same 8 scores: the IQM does not care how they are arranged
    assert iqm_intervals({"m": x.reshape(4, 2)}, reps=REPS)["m"][0] == pytest.approx(4.5, abs=1e-12)
    # fewer than 4 scores: nothing is trimmed
    assert iqm_intervals({"m": np.array([[1.0], [2.0], [9.0]])}, reps=REPS)["m"][0] == pytest.approx(4.0)


def test_iqm_matches_trim_mean():
    rng = np.random.default_rng(1)
    scores = {"a": rng.normal(size=(5, 3)), "b": rng.gamma(2.0, size=(7, 3)), "c": rng.normal(size=(4, 3))}
    out = iqm_intervals(scores, reps=REPS)
    assert list(out) == ["a", "b", "c"]
    for name, x in scores.items():
        assert out[name][0] == pytest.approx(scipy.stats.trim_mean(x.ravel(), 0.25), abs=1e-12)


def test_poi_dominance_and_identical():
    x = np.array([[10.0, 20.0], [11.0, 25.0], [12.0, 21.0]])
    y = np.array([[1.0, 2.0], [3.0, 4.0]])
    out = probability_of_improvement({"x": x, "y": y}, reps=REPS)
    assert out[("x", "y")] == (1.0, 1.0, 1.0)  # every resample still has X beating Y everywhere
    assert out[("y", "x")] == (0.0, 0.0, 0.0)

    same = probability_of_improvement({"a": x, "b": x.copy()}, reps=REPS)
    assert same[("a", "b")][0] == pytest.approx(0.5)
    assert same[("b", "a")][0] == pytest.approx(0.5)
    low, high = same[("a", "b")][1:]
    assert low <= 0.5 <= high


def test_poi_hand_computed_with_ties():
    # one task, X = [1, 2], Y = [2, 3]. The four pairs (x, y):
    #   (1, 2) -> 0, (1, 3) -> 0, (2, 2) -> 1/2 (a tie), (2, 3) -> 0;  P(X > Y) = 0.5 / 4 = 0.125
    # and the other way round (2, 1) -> 1, (3, 1) -> 1, (2, 2) -> 1/2, (3, 2) -> 1: 3.5 / 4 = 0.875
    x = np.array([[1.0], [2.0]])
    y = np.array([[2.0], [3.0]])
    out = probability_of_improvement({"x": x, "y": y}, reps=REPS)
    assert out[("x", "y")][0] == pytest.approx(0.125, abs=1e-12)
    assert out[("y", "x")][0] == pytest.approx(0.875, abs=1e-12)
    # a second task, X = [3, 3], Y = [1, 3]: (3, 1) -> 1, (3, 3) -> 1/2, twice over: 3 / 4 = 0.75;
    # the average over the two tasks is (0.125 + 0.75) / 2 = 0.4375
    x2 = np.array([[1.0, 3.0], [2.0, 3.0]])
    y2 = np.array([[2.0, 1.0], [3.0, 3.0]])
    out2 = probability_of_improvement({"x": x2, "y": y2}, reps=REPS)
    assert out2[("x", "y")][0] == pytest.approx(0.4375, abs=1e-12)
    assert out2[("y", "x")][0] == pytest.approx(0.5625, abs=1e-12)


def test_poi_matches_double_loop_with_unequal_runs():
    rng = np.random.default_rng(2)
    # small integers: plenty of ties; different numbers of runs per model
    scores = {
        "a": rng.integers(0, 4, size=(5, 4)).astype(float),
        "b": rng.integers(0, 4, size=(3, 4)).astype(float),
        "c": rng.integers(1, 5, size=(6, 4)).astype(float),
    }
    out = probability_of_improvement(scores, reps=REPS)
    names = list(scores)
    assert list(out) == [(p, q) for p in names for q in names if p != q]
    for (p, q), (point, low, high) in out.items():
        assert point == pytest.approx(poi_double_loop(scores[p], scores[q]), abs=1e-12)
        # the two directions are complements, interval ends included
        other = out[(q, p)]
        assert point + other[0] == pytest.approx(1.0, abs=1e-12)
        assert low == pytest.approx(1.0 - other[2], abs=1e-12)
        assert high == pytest.approx(1.0 - other[1], abs=1e-12)
        assert 0.0 <= low <= high <= 1.0


def test_poi_replicates_equal_the_definition_on_the_same_resamples():
    """The vectorised replicates are P(X > Y) of each resample, computed with scipy's Mann-Whitney U
    per task, drawn as rliable's StratifiedIndependentBootstrap draws them (X's indices, then Y's)."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, size=(4, 3)).astype(float)
    y = rng.integers(0, 5, size=(3, 3)).astype(float)
    reps = 15
    mine = stats._poi_replicates(x, y, reps, np.random.RandomState(11))
    draws = np.random.RandomState(11)
    tasks = np.arange(3)
    for r in range(reps):
        ix = draws.choice(4, size=x.shape)
        iy = draws.choice(3, size=y.shape)
        xs, ys = x[ix, tasks], y[iy, tasks]
        expected = np.mean(
            [scipy.stats.mannwhitneyu(xs[:, t], ys[:, t]).statistic / (len(xs) * len(ys)) for t in range(3)]
        )
        assert mine[r] == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# intervals


def test_cell_interval_basics():
    values = [0.8, 1.1, 0.95, 1.3, 0.7]
    low, high = cell_interval(values, reps=REPS)
    assert low <= np.mean(values) <= high
    assert min(values) <= low < high <= max(values)
    assert cell_interval([0.42], reps=REPS) == (0.42, 0.42)
    assert cell_interval(np.full(4, 2.5), reps=REPS) == (2.5, 2.5)
    # higher confidence, wider interval (same resamples)
    low99, high99 = cell_interval(values, confidence=0.99, reps=REPS)
    assert low99 <= low and high <= high99


def test_intervals_contain_point_estimates():
    rng = np.random.default_rng(4)
    scores = {"a": rng.normal(1.0, 0.2, size=(6, 3)), "b": rng.normal(0.9, 0.2, size=(6, 3))}
    for point, low, high in iqm_intervals(scores, reps=REPS).values():
        assert low <= point <= high
    for point, low, high in probability_of_improvement(scores, reps=REPS).values():
        assert low <= point <= high


def test_intervals_shrink_with_the_spread():
    rng = np.random.default_rng(5)
    base = rng.normal(size=(6, 3))
    wide = 1.0 + base
    narrow = 1.0 + 0.1 * base
    # the same seed draws the same resamples, and the mean and the IQM are affine-equivariant,
    # so the widths scale exactly with the spread
    lo_w, hi_w = cell_interval(wide[:, 0], reps=REPS)
    lo_n, hi_n = cell_interval(narrow[:, 0], reps=REPS)
    assert hi_n - lo_n == pytest.approx(0.1 * (hi_w - lo_w), rel=1e-9)
    _, lo_w, hi_w = iqm_intervals({"m": wide}, reps=REPS)["m"]
    _, lo_n, hi_n = iqm_intervals({"m": narrow}, reps=REPS)["m"]
    assert hi_n - lo_n == pytest.approx(0.1 * (hi_w - lo_w), rel=1e-9)
    assert hi_n - lo_n < hi_w - lo_w
    # and with more seeds (the same values, repeated), the interval of the mean tightens
    lo_more, hi_more = cell_interval(np.tile(wide[:, 0], 4), reps=REPS)
    assert hi_more - lo_more < hi_w - lo_w


def test_same_seed_same_intervals_and_global_state_untouched():
    rng = np.random.default_rng(6)
    values = rng.normal(size=6)
    scores = {"a": rng.normal(size=(5, 2)), "b": rng.normal(size=(4, 2))}

    np.random.seed(1234)
    before = np.random.get_state()
    first = (
        cell_interval(values, reps=REPS, seed=3),
        iqm_intervals(scores, reps=REPS, seed=3),
        probability_of_improvement(scores, reps=REPS, seed=3),
    )
    after = np.random.get_state()
    assert before[0] == after[0]
    assert np.array_equal(before[1], after[1])
    assert before[2:] == after[2:]
    np.random.seed(1234)
    expected_next = np.random.random_sample()
    np.random.seed(1234)
    cell_interval(values, reps=REPS, seed=3)
    iqm_intervals(scores, reps=REPS, seed=3)
    probability_of_improvement(scores, reps=REPS, seed=3)
    assert np.random.random_sample() == expected_next

    # disturbing the global state does not change the results
    np.random.seed(99)
    np.random.random_sample(17)
    second = (
        cell_interval(values, reps=REPS, seed=3),
        iqm_intervals(scores, reps=REPS, seed=3),
        probability_of_improvement(scores, reps=REPS, seed=3),
    )
    assert second == first
    assert cell_interval(values, reps=REPS, seed=4) != first[0]


def test_results_do_not_depend_on_the_other_models_or_their_order():
    rng = np.random.default_rng(7)
    a, b, c = rng.normal(size=(5, 3)), rng.normal(size=(4, 3)), rng.normal(size=(6, 3))
    iqm_ab = iqm_intervals({"a": a, "b": b}, reps=REPS)
    iqm_cba = iqm_intervals({"c": c, "b": b, "a": a}, reps=REPS)
    assert iqm_ab["a"] == iqm_cba["a"] and iqm_ab["b"] == iqm_cba["b"]
    poi_ab = probability_of_improvement({"a": a, "b": b}, reps=REPS)
    poi_cba = probability_of_improvement({"c": c, "b": b, "a": a}, reps=REPS)
    assert poi_ab[("a", "b")] == poi_cba[("a", "b")]
    assert poi_ab[("b", "a")] == poi_cba[("b", "a")]
    assert list(poi_cba)[:2] == [("c", "b"), ("c", "a")]
    assert probability_of_improvement({"a": a}, reps=REPS) == {}


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "values, match",
    [
        ([], "empty"),
        (np.array([]), "empty"),
        ([1.0, float("nan")], "NaN or infinite"),
        ([1.0, float("inf")], "NaN or infinite"),
        ([[1.0, 2.0]], "1-D"),
        (["a", "b"], "real numbers"),
        ([1.0, None], "real numbers"),
        ([1 + 2j, 3.0], "real numbers"),
    ],
)
def test_cell_interval_bad_values(values, match):
    with pytest.raises(ValueError, match=match):
        cell_interval(values, reps=REPS)


@pytest.mark.parametrize("func", [iqm_intervals, probability_of_improvement])
@pytest.mark.parametrize(
    "scores, match",
    [
        ({}, "empty"),
        ({"a": np.zeros((0, 3))}, "empty"),
        ({"a": np.zeros((3, 0))}, "empty"),
        ({"a": np.array([[1.0, np.nan], [2.0, 3.0]])}, "NaN or infinite"),
        ({"a": np.ones((3, 2)), "b": np.array([[1.0, -np.inf], [2.0, 3.0]])}, "NaN or infinite"),
        ({"a": np.ones((3, 2)), "b": np.ones((3, 3))}, "same tasks"),
        ({"a": np.ones(3)}, "2-D"),
        ({"a": np.ones((2, 2, 2))}, "2-D"),
        ({1: np.ones((3, 2))}, "strings"),
        ([np.ones((3, 2))], "mapping"),
    ],
)
def test_bad_scores(func, scores, match):
    with pytest.raises(ValueError, match=match):
        func(scores, reps=REPS)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"confidence": 0.0}, "confidence"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 95}, "confidence"),
        ({"confidence": float("nan")}, "confidence"),
        ({"reps": 0}, "reps"),
        ({"reps": 2.5}, "reps"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**32}, "seed"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cell_interval([1.0, 2.0], **{"reps": REPS, **kwargs})
    with pytest.raises(ValueError, match=match):
        iqm_intervals({"a": np.ones((2, 2))}, **{"reps": REPS, **kwargs})
    with pytest.raises(ValueError, match=match):
        probability_of_improvement({"a": np.ones((2, 2)), "b": np.ones((2, 2))}, **{"reps": REPS, **kwargs})
