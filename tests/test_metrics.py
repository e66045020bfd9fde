"""Tests for morl.metrics: Pareto front, hypervolume, sparsity, ratio and return deviation, distance to a
front, utility."""

import itertools
import math
import time

import numpy as np
import pytest
from pymoo.indicators.hv import HV

from morl.metrics import (
    front_distance,
    front_scale,
    hypervolume,
    mean_utility,
    pareto_front,
    peda_front,
    peda_front_mask,
    ratio_deviation,
    ratio_deviation_all,
    return_deviation,
    sparsity,
)
from morl.preferences import simplex_grid


def pymoo_hv(points, ref):
    """pymoo minimises: negate points and reference point."""
    points = np.asarray(points, dtype=float)
    ref = np.asarray(ref, dtype=float)
    return float(HV(ref_point=-ref)(-points))


def brute_force_front(points):
    """Unique non-dominated rows by the definition, O(N^2)."""
    p = np.unique(np.asarray(points, dtype=float), axis=0)
    keep = []
    for i, a in enumerate(p):
        dominated = any(np.all(b >= a) and np.any(b > a) for b in p)
        if not dominated:
            keep.append(i)
    return p[keep]


# ---------------------------------------------------------------------------------------------
# pareto_front
# ---------------------------------------------------------------------------------------------


def test_pareto_front_2d_hand():
    pts = [[1, 2], [2, 1], [1, 1], [2, 1], [0, 3], [0, 2.5], [2, 0.5]]
    np.testing.assert_array_equal(pareto_front(pts), [[0, 3], [1, 2], [2, 1]])


def test_pareto_front_ties_on_one_objective_are_dominated():
    np.testing.assert_array_equal(pareto_front([[1, 1, 0], [1, 1, 1], [1, 1, 1]]), [[1, 1, 1]])
    np.testing.assert_array_equal(pareto_front([[3, 1], [3, 2]]), [[3, 2]])
    np.testing.assert_array_equal(pareto_front([[1, 3], [2, 3]]), [[2, 3]])


def test_pareto_front_3d_hand():
    pts = [[2, 1, 1], [1, 2, 1], [1, 1, 2], [1, 1, 1], [0.5, 0.5, 0.5], [2, 1, 1]]
    np.testing.assert_array_equal(pareto_front(pts), [[1, 1, 2], [1, 2, 1], [2, 1, 1]])


def test_pareto_front_one_objective_and_empty():
    np.testing.assert_array_equal(pareto_front([[1.0], [3.0], [2.0], [3.0]]), [[3.0]])
    assert pareto_front([]).shape[0] == 0
    assert pareto_front(np.empty((0, 3))).shape == (0, 3)


@pytest.mark.parametrize("n_obj", [2, 3, 4])
def test_pareto_front_matches_brute_force(n_obj):
    rng = np.random.default_rng(n_obj)
    for trial in range(15):
        n = int(rng.integers(1, 120))
        # integer coordinates produce ties and duplicates
        pts = rng.integers(0, 6, size=(n, n_obj)) if trial % 2 else rng.random((n, n_obj))
        np.testing.assert_array_equal(pareto_front(pts), brute_force_front(pts))


def test_pareto_front_large_set_spanning_several_chunks():
    rng = np.random.default_rng(7)
    w = rng.dirichlet(np.ones(3), size=700)
    sphere = w / np.linalg.norm(w, axis=1, keepdims=True)  # all mutually non-dominated
    pts = np.concatenate([sphere, 0.9 * sphere[:300]])  # plus dominated copies
    front = pareto_front(pts)
    np.testing.assert_array_equal(front, np.unique(sphere, axis=0))


def test_pareto_front_rejects_bad_input():
    with pytest.raises(ValueError, match="non-finite"):
        pareto_front([[1.0, np.nan]])
    with pytest.raises(ValueError, match="2-D"):
        pareto_front([1.0, 2.0])


# ---------------------------------------------------------------------------------------------
# hypervolume: hand-computed cases
# ---------------------------------------------------------------------------------------------


def test_hv_2d_hand():
    assert hypervolume([[1, 2], [2, 1]]) == pytest.approx(3.0)
    assert hypervolume([[2, 3]]) == pytest.approx(6.0)
    assert hypervolume([[3, 1], [2, 2], [1, 3]]) == pytest.approx(6.0)
    # reference point shifts the boxes
    assert hypervolume([[3, 4]], ref_point=[1, 1]) == pytest.approx(6.0)
    assert hypervolume([[1, 2], [2, 1]], ref_point=[0.5, 0.5]) == pytest.approx(1.25)


def test_hv_3d_unit_cubes():
    assert hypervolume([[1, 1, 1]]) == pytest.approx(1.0)
    assert hypervolume([[1, 1, 1], [2, 2, 2]]) == pytest.approx(8.0)
    # three 2x1x1 boxes: 3*2 - 3*1 (pairwise overlaps) + 1 (triple overlap)
    assert hypervolume([[2, 1, 1], [1, 2, 1], [1, 1, 2]]) == pytest.approx(4.0)
    # L-shape of unit cubes in the z = 1 layer plus one cube on top
    assert hypervolume([[2, 1, 1], [1, 2, 1], [1, 1, 2]], ref_point=[0, 0, 0]) == pytest.approx(4.0)
    assert hypervolume([[2, 1, 1], [1, 2, 1]], ref_point=[0, 0, 0]) == pytest.approx(3.0)


def test_hv_3d_point_that_replaces_several_staircase_steps():
    # At z = 2 the (x, y) staircase is (1, 3), (2, 2), (3, 1); the point (3, 3, 1) dominates
    # all of them in (x, y) below z = 1.
    pts = [[1, 3, 2], [2, 2, 2], [3, 1, 2], [3, 3, 1]]
    # volume = 6 (staircase area) * (2 - 1) + 9 * 1
    assert hypervolume(pts) == pytest.approx(15.0)
    assert hypervolume(pts) == pytest.approx(pymoo_hv(pts, [0, 0, 0]))


def test_hv_1d_and_4d_hand():
    assert hypervolume([[3.0], [1.0]]) == pytest.approx(3.0)
    assert hypervolume([[1, 1, 1, 1], [2, 2, 2, 2]]) == pytest.approx(16.0)
    # two 4-D boxes 2x1x1x1 and 1x2x1x1 overlap in a unit box
    assert hypervolume([[2, 1, 1, 1], [1, 2, 1, 1]]) == pytest.approx(3.0)


def test_hv_ignores_dominated_and_duplicate_points():
    rng = np.random.default_rng(3)
    for n_obj in (2, 3, 4):
        pts = rng.random((30, n_obj)) + 0.1
        base = hypervolume(pts)
        extra = np.concatenate([pts, pts[:10], 0.5 * pts[:10], pts[:5] - 0.05])
        assert hypervolume(extra) == pytest.approx(base, rel=1e-12)
        assert hypervolume(pareto_front(pts)) == pytest.approx(base, rel=1e-12)


def test_hv_points_not_dominating_reference_contribute_nothing():
    assert hypervolume([[0, 5], [5, 0], [-1, -1]]) == 0.0
    assert hypervolume([[0, 5], [1, 1]]) == pytest.approx(1.0)
    assert hypervolume([[2, 2, 0], [1, 1, 1]]) == pytest.approx(1.0)
    assert hypervolume([[1, 2], [2, 1]], ref_point=[1, 1]) == 0.0
    assert hypervolume([[1, 2], [2, 1]], ref_point=[3, 3]) == 0.0


def test_hv_empty_input():
    assert hypervolume([]) == 0.0
    assert hypervolume(np.empty((0, 2))) == 0.0
    assert hypervolume(np.empty((0, 3)), ref_point=[0, 0, 0]) == 0.0
    assert hypervolume([], ref_point=[1.0, 1.0]) == 0.0


def test_hv_invariant_under_permuting_objectives_and_translation():
    rng = np.random.default_rng(11)
    pts = rng.random((60, 3))
    ref = np.array([0.1, 0.2, 0.05])
    base = hypervolume(pts, ref)
    for perm in itertools.permutations(range(3)):
        perm = list(perm)
        assert hypervolume(pts[:, perm], ref[perm]) == pytest.approx(base, rel=1e-12)
    shift = np.array([5.0, -3.0, 100.0])
    assert hypervolume(pts + shift, ref + shift) == pytest.approx(base, rel=1e-9)


def test_hv_rejects_bad_input():
    with pytest.raises(ValueError, match="non-finite"):
        hypervolume([[1.0, np.inf]])
    with pytest.raises(ValueError, match="objectives"):
        hypervolume([[1.0, 2.0]], ref_point=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="ref_point"):
        hypervolume([[1.0, 2.0]], ref_point=[[0.0, 0.0]])
    with pytest.raises(ValueError, match="ref_point"):
        hypervolume([[1.0, 2.0]], ref_point=[0.0, np.nan])


# ---------------------------------------------------------------------------------------------
# hypervolume: against pymoo
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_obj", [2, 3])
def test_hv_matches_pymoo_random(n_obj):
    rng = np.random.default_rng(100 + n_obj)
    for trial in range(40):
        n = int(rng.integers(1, 200))
        if trial % 3 == 0:
            pts = rng.integers(-2, 8, size=(n, n_obj)).astype(float)  # ties, duplicates
        else:
            pts = rng.normal(5.0, 3.0, size=(n, n_obj))
        ref = rng.uniform(-1.0, 2.0, size=n_obj)
        assert hypervolume(pts, ref) == pytest.approx(pymoo_hv(pts, ref), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("n_obj", [2, 3])
def test_hv_matches_pymoo_on_concave_fronts_over_the_lattice(n_obj):
    grid = simplex_grid(n_obj, 500 if n_obj == 2 else 24)
    rng = np.random.default_rng(5)
    pts = 1000.0 * grid / np.linalg.norm(grid, axis=1, keepdims=True)
    pts = pts + rng.normal(0.0, 20.0, size=pts.shape)  # some points become dominated
    ref = np.zeros(n_obj)
    assert hypervolume(pts) == pytest.approx(pymoo_hv(pts, ref), rel=1e-10)


@pytest.mark.parametrize("n_obj", [4, 5])
def test_hv_matches_pymoo_higher_dimensions(n_obj):
    rng = np.random.default_rng(200 + n_obj)
    for _ in range(5):
        n = int(rng.integers(1, 40))
        pts = rng.random((n, n_obj))
        ref = rng.uniform(0.0, 0.3, size=n_obj)
        assert hypervolume(pts, ref) == pytest.approx(pymoo_hv(pts, ref), rel=1e-10, abs=1e-14)


def test_hv_speed_on_evaluation_lattices():
    for n_obj, divisions, n_rows in ((2, 500, 501), (3, 24, 325)):
        grid = simplex_grid(n_obj, divisions)
        assert grid.shape[0] == n_rows
        pts = 1000.0 * (grid + 0.01) / np.linalg.norm(grid + 0.01, axis=1, keepdims=True)
        start = time.perf_counter()
        hypervolume(pts)
        assert time.perf_counter() - start < 0.5


# ---------------------------------------------------------------------------------------------
# sparsity
# ---------------------------------------------------------------------------------------------


def test_sparsity_hand():
    # objective 1 sorted 0, 1, 3 -> gaps^2 1 + 4; objective 2 sorted 0, 2, 3 -> 4 + 1; / (3 - 1)
    front = [[0, 3], [1, 2], [3, 0]]
    assert sparsity(front) == pytest.approx(5.0)
    # dominated points are not part of the front
    assert sparsity(front + [[0.5, 0.5], [0, 2]]) == pytest.approx(5.0)


def test_sparsity_keeps_duplicates_as_peda_does():
    # (1, 2) twice: objective 1 sorted 0, 1, 1, 3 -> 1 + 0 + 4; objective 2 sorted 0, 2, 2, 3 -> 4 + 0 + 1;
    # (5 + 5) / (4 - 1)
    pts = [[0, 3], [1, 2], [3, 0], [1, 2], [0.5, 0.5]]
    np.testing.assert_array_equal(peda_front(pts), [[0, 3], [1, 2], [3, 0], [1, 2]])
    assert sparsity(pts) == pytest.approx(10 / 3)
    assert sparsity([[2.0, 2.0], [1.0, 1.0], [2.0, 2.0]]) == 0.0  # two copies of one point: no gaps


def test_sparsity_drops_points_with_a_negative_coordinate():
    # (3, -0.5) and (-1, 5) are non-dominated but dropped; (0, 3) and (1, 2) remain: (1 + 1) / 1
    pts = [[0, 3], [3, -0.5], [1, 2], [-1, 5]]
    np.testing.assert_array_equal(peda_front(pts), [[0, 3], [1, 2]])
    assert sparsity(pts) == pytest.approx(2.0)
    assert sparsity([[-1.0, 4.0], [2.0, -3.0]]) == 0.0
    assert peda_front([[0.0, 0.0]]).shape == (1, 2)  # zero is not negative


def test_sparsity_3d_hand():
    pts = [[2, 1, 1], [1, 2, 1], [1, 1, 2]]
    # each objective sorted 1, 1, 2 -> gaps^2 0 + 1; three objectives; / 2
    assert sparsity(pts) == pytest.approx(1.5)


def test_sparsity_fewer_than_two_front_points_is_zero():
    assert sparsity([]) == 0.0
    assert sparsity([[1.0, 2.0]]) == 0.0
    assert sparsity([[2.0, 2.0], [1.0, 1.0], [2.0, 2.0]]) == 0.0


def test_sparsity_even_spacing():
    # N evenly spaced points on the line x + y = 1: 2 objectives * (N-1) gaps of (1/(N-1))^2 / (N-1)
    n = 11
    t = np.linspace(0.0, 1.0, n)
    assert sparsity(np.c_[t, 1 - t]) == pytest.approx(2.0 / (n - 1) ** 2)


# ---------------------------------------------------------------------------------------------
# ratio and return deviation, distance to a front, mean utility
# ---------------------------------------------------------------------------------------------


def test_ratio_deviation_all_hand():
    w = [[0.5, 0.5], [1.0, 0.0]]
    r = [[2.0, 2.0], [1.0, 3.0]]
    # ratios (0.5, 0.5) -> 0 and (0.25, 0.75) vs (1, 0) -> 0.75 * sqrt(2)
    assert ratio_deviation_all(w, r) == pytest.approx(0.375 * math.sqrt(2.0))
    assert ratio_deviation_all([[0.2, 0.3, 0.5]], [[2.0, 3.0, 5.0]]) == pytest.approx(0.0, abs=1e-15)


def test_ratio_deviation_all_skips_points_without_a_return_ratio_and_rejects_bad_shapes():
    # the second point sums to zero: it has no return ratio and is left out of the mean
    assert ratio_deviation_all([[0.5, 0.5], [0.5, 0.5]], [[1.0, 1.0], [1.0, -1.0]]) == pytest.approx(0.0)
    assert math.isnan(ratio_deviation_all([[0.5, 0.5]], [[1.0, -1.0]]))
    for fn in (ratio_deviation_all, ratio_deviation):
        with pytest.raises(ValueError, match="same shape"):
            fn([[0.5, 0.5]], [[1.0, 1.0, 1.0]])
        with pytest.raises(ValueError, match="sum to 1"):
            fn([[0.5, 0.6]], [[1.0, 1.0]])
        with pytest.raises(ValueError, match="non-empty"):
            fn(np.empty((0, 2)), np.empty((0, 2)))


# Five points: A = (3, 1) at w (1, 0), B = (1, 3) at (0.5, 0.5), C = (1, 1) at (0.5, 0.5), D = (4, -1) at
# (1, 0), E = (2, 2) at (0, 1). PEDA keeps A, B and E: C is dominated by A (and by E), D has a negative
# objective although nothing dominates it.
MV_PREFS = [[1.0, 0.0], [0.5, 0.5], [0.5, 0.5], [1.0, 0.0], [0.0, 1.0]]
MV_RETURNS = [[3.0, 1.0], [1.0, 3.0], [1.0, 1.0], [4.0, -1.0], [2.0, 2.0]]


def test_peda_front_mask_hand():
    np.testing.assert_array_equal(peda_front_mask(MV_RETURNS), [True, True, False, False, True])
    # a copy of a kept point is kept too (a point does not dominate its copy)
    np.testing.assert_array_equal(peda_front_mask([[1, 1], [1, 1], [0, 0]]), [True, True, False])
    # a point with a negative objective is dropped, but still removes what it dominates
    np.testing.assert_array_equal(peda_front_mask([[5, -1], [4, -2], [4, 0]]), [False, False, True])
    assert peda_front_mask(np.empty((0, 2))).shape == (0,)


def test_ratio_deviation_is_moduli_s_over_the_points_peda_keeps():
    # A: ratio (0.75, 0.25) vs (1, 0) -> 0.25 * sqrt(2); B: (0.25, 0.75) vs (0.5, 0.5) -> 0.25 * sqrt(2);
    # E: (0.5, 0.5) vs (0, 1) -> 0.5 * sqrt(2). Mean over the three: sqrt(2) / 3.
    assert ratio_deviation(MV_PREFS, MV_RETURNS) == pytest.approx(math.sqrt(2.0) / 3)
    # Over every point (ours), C (ratio 0.5, 0.5 at its preference: 0) and D (ratio (4/3, -1/3) vs
    # (1, 0): sqrt(2) / 3) count as well: (0.25 + 0.25 + 0 + 1/3 + 0.5) * sqrt(2) / 5 = 4 sqrt(2) / 15.
    assert ratio_deviation_all(MV_PREFS, MV_RETURNS) == pytest.approx(4 * math.sqrt(2.0) / 15)
    # Kept copies count as often as they occur: A twice -> (0.25 * 3 + 0.5) * sqrt(2) / 4 = 1.25 sqrt(2) / 4
    twice = ratio_deviation([*MV_PREFS, [1.0, 0.0]], [*MV_RETURNS, [3.0, 1.0]])
    assert twice == pytest.approx(1.25 * math.sqrt(2.0) / 4)
    # Three objectives: (1, 1, 2) has ratio (0.25, 0.25, 0.5); at (0.2, 0.3, 0.5) that is 0.05 * sqrt(2) away.
    assert ratio_deviation([[0.2, 0.3, 0.5]], [[1.0, 1.0, 2.0]]) == pytest.approx(0.05 * math.sqrt(2.0))


def test_ratio_deviation_without_a_kept_point_with_a_ratio_is_nan():
    assert math.isnan(ratio_deviation([[0.5, 0.5], [0.0, 1.0]], [[-1.0, 5.0], [2.0, -0.5]]))  # all negative
    # the origin is kept (nothing non-negative dominates it) but has no ratio
    assert math.isnan(ratio_deviation([[0.5, 0.5], [0.0, 1.0]], [[0.0, 0.0], [-1.0, 5.0]]))


def test_return_deviation_is_moduli_s_plain_distance_in_raw_returns():
    achieved = [[1.0, 2.0], [3.0, 4.0]]
    predicted = [[4.0, 6.0], [3.0, 4.0]]
    # distances 5 (a 3-4-5 triangle) and 0 -> 2.5; nothing is scaled, so objectives of different
    # sizes weigh as their raw numbers do
    assert return_deviation(achieved, predicted) == pytest.approx(2.5)
    assert return_deviation([[0.0, 1000.0], [1.0, 1.0]], [[0.0, 0.0], [1.0, 1.0]]) == pytest.approx(500.0)
    assert return_deviation([[1.0, 1.0, 1.0]], [[2.0, 3.0, 3.0]]) == pytest.approx(3.0)  # sqrt(1 + 4 + 4)
    assert math.isnan(return_deviation(np.empty((0, 2)), np.empty((0, 2))))
    with pytest.raises(ValueError, match="pair row by row"):
        return_deviation([[1.0, 2.0]], [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match="objectives"):
        return_deviation([[1.0, 2.0]], [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="non-finite"):
        return_deviation([[1.0, np.nan]], [[1.0, 2.0]])


def test_front_distance_uses_one_fixed_scale():
    # the scale is per objective the largest |value| of the reference over the whole grid (1 where 0)
    np.testing.assert_array_equal(front_scale([[2.0, -4.0, 0.0], [1.0, 0.0, 0.0]]), [2.0, 4.0, 1.0])
    # (1, 2) against (2, 4) with scale (2, 4): ||(-1/2, -2/4)|| = sqrt(0.5)
    assert front_distance([[1.0, 2.0]], [[2.0, 4.0]], [2.0, 4.0]) == pytest.approx(math.sqrt(0.5))
    # A subset of the grid whose own maxima are (1, 1) is still measured in the grid's units (2, 2):
    # (0, 0) against (1, 1) is ||(1/2, 1/2)|| = sqrt(2) / 2, not sqrt(2)
    grid_reference = [[2.0, 0.0], [1.0, 1.0], [0.0, 2.0]]
    scale = front_scale(grid_reference)
    assert front_distance([[0.0, 0.0]], [grid_reference[1]], scale) == pytest.approx(math.sqrt(2.0) / 2)
    assert math.isnan(front_distance(np.empty((0, 2)), np.empty((0, 2)), scale))
    with pytest.raises(ValueError, match="one positive finite value per objective"):
        front_distance([[1.0, 2.0]], [[2.0, 4.0]], [0.0, 4.0])
    with pytest.raises(ValueError, match="non-empty"):
        front_scale(np.empty((0, 2)))


def test_mean_utility_hand():
    w = [[0.5, 0.5], [1.0, 0.0]]
    r = [[2.0, 2.0], [1.0, 3.0]]
    assert mean_utility(w, r) == pytest.approx(1.5)
    assert mean_utility([[0.2, 0.3, 0.5]], [[10.0, -10.0, 4.0]]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="non-negative"):
        mean_utility([[-0.5, 1.5]], [[1.0, 1.0]])
