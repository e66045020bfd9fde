"""Tests for morl.metrics: expected utility metric (EUM), IGD and cardinality."""

import math

import numpy as np
import pytest
from pymoo.indicators.igd import IGD

import morl.metrics as metrics
from morl.metrics import _eum_weights, cardinality, eum, igd, pareto_front


def random_points(seed, n, n_obj, low=-1.0, high=3.0):
    return np.random.default_rng(seed).uniform(low, high, size=(n, n_obj))


def loop_eum(points, weights):
    """EUM by its definition, one weight and one point at a time."""
    best = []
    for w in weights:
        values = [sum(float(w[j]) * float(r[j]) for j in range(len(r))) for r in points]
        best.append(max(values))
    return sum(best) / len(best)


def brute_force_cardinality(points):
    """Distinct points that no other point dominates (maximisation), O(N^2)."""
    unique = {tuple(map(float, r)) for r in np.asarray(points, dtype=float)}
    count = 0
    for a in unique:
        dominated = any(
            all(b_i >= a_i for a_i, b_i in zip(a, b)) and any(b_i > a_i for a_i, b_i in zip(a, b)) for b in unique
        )
        count += not dominated
    return count


# ---------------------------------------------------------------------------------------------
# eum
# ---------------------------------------------------------------------------------------------


def test_eum_uses_pymoo_energy_directions_and_leaves_global_rng_alone(monkeypatch):
    # Spy on pymoo's factory (each call takes about a second, so it is computed once here): the
    # weights must be exactly what get_reference_directions("energy", 2, 100, seed=42) returns.
    import pymoo.util.ref_dirs as ref_dirs

    real = ref_dirs.get_reference_directions
    calls = []

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append((args, kwargs, out.copy()))
        return out

    monkeypatch.setattr(ref_dirs, "get_reference_directions", spy)
    _eum_weights.cache_clear()
    p = random_points(3, 40, 2)
    np.random.seed(123)
    expected_draw = np.random.random(3)
    np.random.seed(123)
    value = eum(p)
    np.testing.assert_array_equal(np.random.random(3), expected_draw)

    assert len(calls) == 1
    args, kwargs, direct = calls[0]
    assert args == ("energy", 2, 100) and kwargs == {"seed": 42}
    w = _eum_weights(2, 100)
    assert len(calls) == 1  # cached
    np.testing.assert_array_equal(w, direct)
    assert w.shape == (100, 2) and not w.flags.writeable
    assert np.all(w >= 0.0)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    assert value == pytest.approx(loop_eum(p, direct), rel=1e-12)


def test_eum_hand_two_objectives_corner_weights():
    # With as many weights as objectives pymoo returns exactly the corners (0, 1) and (1, 0),
    # so EUM is the mean over objectives of the best value reached in that objective.
    np.testing.assert_array_equal(_eum_weights(2, 2), [[0.0, 1.0], [1.0, 0.0]])
    assert eum([[1.0, 3.0], [2.0, 1.0]], n_weights=2) == 2.5
    assert eum([[4.0, 0.0], [0.0, 2.0], [1.0, 1.0]], n_weights=2) == 3.0
    assert eum([[-1.0, -3.0]], n_weights=2) == -2.0


def test_eum_hand_independent_of_the_weight_set():
    # (c, ..., c) scores c under every weight summing to 1 and dominates the other points.
    assert eum([[2.0, 2.0], [1.0, 1.0], [2.0, 0.0], [0.0, 2.0]]) == pytest.approx(2.0, abs=1e-12)
    pts3 = [[1.0, 1.0, 1.0], [0.5, 1.0, 0.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0]]
    assert eum(pts3, n_weights=10) == pytest.approx(1.0, abs=1e-12)


def test_eum_shifts_with_a_constant_added_to_every_objective():
    p = random_points(0, 30, 2)
    assert eum(p + 5.0) == pytest.approx(eum(p) + 5.0, rel=1e-12)


def test_eum_dominated_and_duplicated_points_do_not_change_it():
    rng = np.random.default_rng(1)
    front = pareto_front(random_points(1, 200, 2))
    dominated = front[rng.integers(0, len(front), 20)] - rng.uniform(0.01, 1.0, size=(20, 2))
    padded = np.concatenate([front, dominated, front[:3]])
    rng.shuffle(padded)
    base = eum(front)
    assert eum(padded) == pytest.approx(base, rel=1e-12)
    raw = random_points(2, 100, 2)
    assert eum(raw) == pytest.approx(eum(pareto_front(raw)), rel=1e-12)


@pytest.mark.parametrize("n_obj, n_weights, n_points", [(2, 100, 40), (3, 10, 25)])
def test_eum_matches_plain_loop(n_obj, n_weights, n_points):
    p = random_points(10 + n_obj, n_points, n_obj)
    w = _eum_weights(n_obj, n_weights)
    assert eum(p, n_weights=n_weights) == pytest.approx(loop_eum(p, w), rel=1e-12, abs=1e-12)


def test_eum_blocks_give_the_same_value(monkeypatch):
    p = random_points(7, 45, 3)
    whole = eum(p, n_weights=10)
    monkeypatch.setattr(metrics, "_IGD_BLOCK", 10 * 4)  # 4 points a block
    assert eum(p, n_weights=10) == pytest.approx(whole, rel=1e-12)
    assert whole == pytest.approx(loop_eum(p, _eum_weights(3, 10)), rel=1e-12)


def test_eum_rejects_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        eum([1.0, 2.0])
    with pytest.raises(ValueError, match="non-finite"):
        eum([[1.0, np.nan], [0.0, 1.0]])
    with pytest.raises(ValueError, match="non-finite"):
        eum([[1.0, np.inf]])
    with pytest.raises(ValueError, match="non-empty"):
        eum(np.empty((0, 2)))
    with pytest.raises(ValueError, match="at least 2 objectives"):
        eum([[1.0], [2.0]])
    with pytest.raises(ValueError, match="at least the number of objectives"):
        eum([[1.0, 2.0]], n_weights=1)
    with pytest.raises(ValueError, match="at least the number of objectives"):
        eum([[1.0, 2.0, 3.0]], n_weights=2)
    for bad in (2.5, True, "10", None):
        with pytest.raises(ValueError, match="integer"):
            eum([[1.0, 2.0]], n_weights=bad)


# ---------------------------------------------------------------------------------------------
# igd
# ---------------------------------------------------------------------------------------------


def test_igd_hand():
    # Reference (3, 4) is 5 from (0, 0); reference (0, 1) is 1 from it.
    assert igd([[0.0, 0.0]], [[3.0, 4.0], [0.0, 1.0]]) == 3.0
    # Not symmetric: now the single reference point (0, 0) is 1 from its nearest point (0, 1).
    assert igd([[3.0, 4.0], [0.0, 1.0]], [[0.0, 0.0]]) == 1.0
    # Each reference point picks its own nearest point.
    assert igd([[0.0, 0.0], [2.0, 2.0]], [[1.0, 0.0], [2.0, 3.0]]) == 1.0
    assert igd([[0.0, 0.0, 0.0]], [[1.0, 2.0, 2.0]]) == 3.0


@pytest.mark.parametrize("n_obj", [2, 3])
def test_igd_of_front_against_itself_is_zero(n_obj):
    front = pareto_front(random_points(20 + n_obj, 300, n_obj))
    assert igd(front, front) == 0.0
    superset = np.concatenate([random_points(30, 50, n_obj), front])
    assert igd(superset, front) == 0.0
    assert igd(front[:1], front) > 0.0


@pytest.mark.parametrize("n_obj", [2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_igd_matches_pymoo(n_obj, seed):
    rng = np.random.default_rng(100 + seed)
    reference = pareto_front(rng.uniform(0.0, 1.0, size=(400, n_obj)))
    approx = pareto_front(rng.uniform(0.0, 0.9, size=(60, n_obj)))
    expected = float(IGD(reference)(approx))
    assert igd(approx, reference) == pytest.approx(expected, rel=1e-12)
    raw = rng.normal(size=(37, n_obj))
    assert igd(raw, reference) == pytest.approx(float(IGD(reference)(raw)), rel=1e-12)


def test_igd_chunking_gives_the_same_value(monkeypatch):
    reference = random_points(40, 53, 3)
    approx = random_points(41, 11, 3)
    whole = igd(approx, reference)
    monkeypatch.setattr(metrics, "_IGD_BLOCK", 7 * 11 * 3)  # 7 reference rows a block
    assert igd(approx, reference) == pytest.approx(whole, rel=1e-12)
    assert whole == pytest.approx(float(IGD(reference)(approx)), rel=1e-12)


def test_igd_rejects_bad_input():
    ok = [[1.0, 2.0], [2.0, 1.0]]
    with pytest.raises(ValueError, match="2-D"):
        igd([1.0, 2.0], ok)
    with pytest.raises(ValueError, match="2-D"):
        igd(ok, [1.0, 2.0])
    with pytest.raises(ValueError, match="non-finite"):
        igd([[np.nan, 1.0]], ok)
    with pytest.raises(ValueError, match="non-finite"):
        igd(ok, [[1.0, np.inf]])
    with pytest.raises(ValueError, match="objectives"):
        igd(ok, [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="non-empty"):
        igd(np.empty((0, 2)), ok)
    with pytest.raises(ValueError, match="non-empty"):
        igd(ok, np.empty((0, 2)))


# ---------------------------------------------------------------------------------------------
# cardinality
# ---------------------------------------------------------------------------------------------


def test_cardinality_hand():
    pts = [[1, 2], [2, 1], [1, 2], [1, 1], [0, 3], [2, 1], [0, 2.5]]
    # Front: (0, 3), (1, 2), (2, 1); duplicates count once, (1, 1) and (0, 2.5) are dominated.
    n = cardinality(pts)
    assert n == 3 and isinstance(n, int)
    # (2, 1, 1) is dominated by (2, 2, 1) (better in one objective, tied in the others).
    pts3 = [[2, 2, 1], [2, 2, 1], [1, 1, 2], [1, 1, 1], [2, 1, 1]]
    assert cardinality(pts3) == 2
    assert cardinality([[5.0, 5.0]] * 4) == 1
    assert cardinality([[1.0, 0.0]]) == 1
    assert cardinality(np.empty((0, 3))) == 0


@pytest.mark.parametrize("n_obj", [2, 3, 4])
def test_cardinality_matches_definition(n_obj):
    rng = np.random.default_rng(50 + n_obj)
    p = rng.integers(0, 6, size=(80, n_obj)).astype(float)  # many ties and duplicates
    assert cardinality(p) == brute_force_cardinality(p)


def test_cardinality_rejects_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        cardinality([1.0, 2.0])
    with pytest.raises(ValueError, match="non-finite"):
        cardinality([[1.0, math.nan]])
