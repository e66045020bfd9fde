"""Pareto-front metrics for multi-objective returns (all objectives are maximised).

Given the return vectors an agent achieves across a grid of preferences (the evaluation
protocol of ``docs/protocol.md``), this module computes:

* :func:`pareto_front` - the unique non-dominated return vectors;
* :func:`hypervolume` (HV) - the volume dominated by the points and bounded by a reference
  point (default: the origin). Exact: a sort-and-sweep for 2 objectives, the dimension sweep of
  Beume et al. (2009) for 3, and slicing along the last objective down to the 3-objective sweep
  for more (Hypervolume by Slicing Objectives);
* :func:`sparsity` (SP) - the mean squared gap between neighbouring front points, per objective,
  on the points PEDA keeps (:func:`peda_front`);
* :func:`ratio_deviation` - MODULI's ratio deviation ("mv"): how far the achieved return ratios
  are from the preferences, over the points PEDA keeps; :func:`ratio_deviation_all` is this
  project's variant over every point;
* :func:`return_deviation` (RD) - MODULI's return deviation: the mean L2 distance between the
  achieved returns and the returns a front model (:mod:`morl.front_model`) predicts at the same
  preferences, in raw return units;
* :func:`front_distance` - this project's distance to a data front, e.g. what :func:`front_at`
  reads off a dataset's front at the same preferences, each objective divided by a fixed scale
  (:func:`front_scale`);
* :func:`mean_utility` - the mean scalarised return ``w . R`` of each point at its own preference;
* :func:`eum` (EUM) - the expected utility metric of morl-baselines: for each weight of a fixed,
  evenly spread set, the best scalarised return over the points, averaged over the weights;
* :func:`igd` (IGD) - the inverted generational distance to a reference front;
* :func:`cardinality` - the number of distinct non-dominated points.

Points are rows of an ``(N, n_obj)`` array; computations are in float64.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import lru_cache

import numpy as np

__all__ = [
    "pareto_front",
    "peda_front",
    "peda_front_mask",
    "hypervolume",
    "sparsity",
    "ratio_deviation",
    "ratio_deviation_all",
    "return_deviation",
    "front_at",
    "front_scale",
    "front_distance",
    "mean_utility",
    "eum",
    "igd",
    "cardinality",
    "trivial_ratio_text",
]

# pareto_front for >= 3 objectives compares this many candidate points at a time.
_FRONT_CHUNK = 256

# igd and eum work in blocks of about this many float64 values (32 MiB), however many points
# there are.
_IGD_BLOCK = 1 << 22

# The seed morl-baselines passes when it builds its evaluation weights.
_EUM_WEIGHTS_SEED = 42


# ---------------------------------------------------------------------------------------------
# Input checking
# ---------------------------------------------------------------------------------------------


def _as_points(points, name: str = "points", n_obj: int | None = None) -> np.ndarray:
    """``points`` as a float64 ``(N, n_obj)`` array; an empty input gives ``(0, n_obj)``."""
    arr = np.asarray(points, dtype=np.float64)
    if arr.size == 0:
        if arr.ndim == 2 and arr.shape[1] > 0:
            n_obj = arr.shape[1] if n_obj is None else n_obj
            if arr.shape[1] != n_obj:
                raise ValueError(f"{name} has {arr.shape[1]} objectives, expected {n_obj}")
        return np.empty((0, 0 if n_obj is None else n_obj), dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (N, n_obj), got shape {arr.shape}")
    if n_obj is not None and arr.shape[1] != n_obj:
        raise ValueError(f"{name} has {arr.shape[1]} objectives, expected {n_obj}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return arr


def _as_paired(preferences, returns) -> tuple[np.ndarray, np.ndarray]:
    w = _as_points(preferences, "preferences")
    r = _as_points(returns, "returns")
    if w.shape[0] == 0 or r.shape[0] == 0:
        raise ValueError("preferences and returns must be non-empty")
    if w.shape != r.shape:
        raise ValueError(f"preferences and returns must have the same shape, got {w.shape} and {r.shape}")
    if np.any(w < 0.0):
        raise ValueError("preferences must be non-negative")
    sums = w.sum(axis=1)
    if np.any(np.abs(sums - 1.0) > 1e-4):
        raise ValueError(
            f"preferences must sum to 1 per row (within 1e-4), got row sums in [{sums.min():.6g}, {sums.max():.6g}]"
        )
    return w, r


# ---------------------------------------------------------------------------------------------
# Pareto front
# ---------------------------------------------------------------------------------------------


def _front_mask_2d(p: np.ndarray) -> np.ndarray:
    """Mask of the non-dominated rows of unique 2-objective points ``p``."""
    order = np.lexsort((-p[:, 1], -p[:, 0]))  # x descending, ties: y descending
    y = p[order, 1]
    best_before = np.concatenate(([-np.inf], np.maximum.accumulate(y)[:-1]))
    mask = np.zeros(p.shape[0], dtype=bool)
    mask[order[y > best_before]] = True
    return mask


def _dominated_by(c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """For each row of ``c``: is it dominated by some row of ``s``? (``(len(c),)`` bool)"""
    if c.shape[0] == 0 or s.shape[0] == 0:
        return np.zeros(c.shape[0], dtype=bool)
    ge = np.all(s[None, :, :] >= c[:, None, :], axis=2)
    gt = np.any(s[None, :, :] > c[:, None, :], axis=2)
    return np.any(ge & gt, axis=1)


def _front_mask_nd(p: np.ndarray) -> np.ndarray:
    """Mask of the non-dominated rows of unique points ``p`` (any number of objectives).

    A point can only be dominated by a point with a strictly larger coordinate sum, and any
    dominated point is dominated by some front point. So candidates are visited in order of
    decreasing sum, a chunk at a time, and each is compared with the front found so far and with
    the earlier points of its own chunk.
    """
    order = np.argsort(-p.sum(axis=1), kind="stable")
    front_idx: list[np.ndarray] = []
    front = np.empty((0, p.shape[1]))
    for start in range(0, order.size, _FRONT_CHUNK):
        idx = order[start : start + _FRONT_CHUNK]
        # First against the front found so far (usually removes most candidates) ...
        idx = idx[~_dominated_by(p[idx], front)]
        # ... then against the other survivors of this chunk.
        c = p[idx]
        keep = idx[~_dominated_by(c, c)]
        if keep.size:
            front_idx.append(keep)
            front = np.concatenate([front, p[keep]])
    mask = np.zeros(p.shape[0], dtype=bool)
    if front_idx:
        mask[np.concatenate(front_idx)] = True
    return mask


def pareto_front(points) -> np.ndarray:
    """Unique non-dominated rows of ``points`` (maximisation).

    Point ``a`` dominates ``b`` if ``a_i >= b_i`` for every objective and ``a_i > b_i`` for at
    least one. Duplicated rows are kept once. The result is sorted lexicographically ascending
    (first objective, then second, ...). An empty input gives an empty ``(0, n_obj)`` array.
    """
    p = _as_points(points)
    if p.shape[0] == 0:
        return p
    p = np.unique(p, axis=0)  # also sorts lexicographically
    return p[_front_mask(p)]


def _front_mask(u: np.ndarray) -> np.ndarray:
    """Mask of the non-dominated rows of unique, lexicographically sorted points ``u``."""
    if u.shape[1] == 1:
        return np.arange(u.shape[0]) == u.shape[0] - 1
    return _front_mask_2d(u) if u.shape[1] == 2 else _front_mask_nd(u)


# ---------------------------------------------------------------------------------------------
# Hypervolume
# ---------------------------------------------------------------------------------------------


def _hv2(q: np.ndarray) -> float:
    """Area dominated by positive 2-D points ``q`` with the origin as reference.

    Sweep in order of decreasing first objective: point i adds the strip of heights between the
    best second objective seen so far and its own, of width ``x_i``.
    """
    order = np.lexsort((-q[:, 1], -q[:, 0]))
    x, y = q[order, 0], q[order, 1]
    best_before = np.concatenate(([0.0], np.maximum.accumulate(y)[:-1]))
    return float(np.sum(x * np.maximum(y - best_before, 0.0)))


def _hv3(q: np.ndarray) -> float:
    """Volume dominated by positive 3-D points ``q`` with the origin as reference.

    Dimension sweep (Beume, Fonseca, Lopez-Ibanez, Paquete, Vahrenhold 2009): visit points in
    order of decreasing third objective while keeping the 2-D staircase of the (x, y) of the
    points visited so far, and its area A. Between consecutive z levels the dominated volume is
    A times the z gap. The staircase is kept as lists sorted by x ascending (so y descending),
    and each insertion updates A by exactly the area the new point adds.
    """
    order = np.argsort(-q[:, 2], kind="stable")
    pts = q[order]
    z_next = np.append(pts[1:, 2], 0.0)
    xs: list[float] = []  # staircase x, ascending
    neg_ys: list[float] = []  # staircase -y, ascending (y descending)
    area = 0.0
    volume = 0.0
    for (x, y, z), zn in zip(pts.tolist(), z_next.tolist()):
        i = bisect_left(xs, x)  # staircase points with x' >= x are i, i+1, ...
        if not (i < len(xs) and -neg_ys[i] >= y):  # else (x, y) is weakly dominated
            k = bisect_left(neg_ys, -y)  # first staircase point with y' <= y
            j = bisect_right(xs, x)  # staircase points with x' <= x are ..., j-1
            # Points k..j-1 are dominated by (x, y) and leave the staircase. Over abscissae
            # t in (x_left, x] the new point raises the covered height from the old staircase
            # height to y.
            x_prev = xs[k - 1] if k > 0 else 0.0
            added = 0.0
            for m in range(k, j):
                added += (xs[m] - x_prev) * (y + neg_ys[m])
                x_prev = xs[m]
            y_right = -neg_ys[j] if j < len(xs) else 0.0
            added += (x - x_prev) * (y - y_right)
            area += added
            xs[k:j] = [x]
            neg_ys[k:j] = [-y]
        volume += area * (z - zn)
    return volume


def _hv_slicing(q: np.ndarray) -> float:
    """Exact hypervolume of positive points ``q`` (>= 4 objectives), origin as reference.

    Hypervolume by Slicing Objectives: sort by the last objective descending; the slab between
    consecutive last-objective values z_k > z_{k+1} is the (n-1)-dimensional hypervolume of the
    first k points (projected, restricted to their non-dominated set) times the slab height.
    The recursion ends in the exact 3-objective sweep.
    """
    order = np.argsort(-q[:, -1], kind="stable")
    pts = q[order]
    z_next = np.append(pts[1:, -1], 0.0)
    volume = 0.0
    for k in range(pts.shape[0]):
        height = pts[k, -1] - z_next[k]
        if height > 0.0:
            volume += height * _hv_positive(pareto_front(pts[: k + 1, :-1]))
    return volume


def _hv_positive(q: np.ndarray) -> float:
    """Hypervolume of points with all coordinates > 0, reference at the origin."""
    if q.shape[0] == 0:
        return 0.0
    n_obj = q.shape[1]
    if n_obj == 1:
        return float(q.max())
    if n_obj == 2:
        return _hv2(q)
    if n_obj == 3:
        return _hv3(q)
    return _hv_slicing(q)


def hypervolume(points, ref_point=None) -> float:
    """Exact hypervolume of ``points`` (maximisation) with respect to ``ref_point``.

    The volume of the union of the boxes ``[ref, p]`` over the points ``p`` that strictly
    dominate the reference (``p_i > ref_i`` for every objective); other points contribute
    nothing, as do dominated and duplicated points. ``ref_point`` defaults to the origin, as in
    D4MORL (all its rewards are shifted positive). An empty input has hypervolume 0.

    Exact for any number of objectives: a sort-and-sweep for 2, a dimension sweep for 3
    (O(N log N) plus list updates), and slicing along the last objective down to the 3-objective
    sweep for more (cost grows like N^(n_obj-2); fine for lattice-sized sets in 4-5 objectives).
    """
    ref = None if ref_point is None else np.asarray(ref_point, dtype=np.float64)
    if ref is not None:
        if ref.ndim != 1 or ref.size == 0:
            raise ValueError(f"ref_point must be a 1-D vector, got shape {ref.shape}")
        if not np.all(np.isfinite(ref)):
            raise ValueError("ref_point contains non-finite values")
    p = _as_points(points, n_obj=None if ref is None else ref.size)
    if p.shape[0] == 0:
        return 0.0
    if ref is None:
        ref = np.zeros(p.shape[1])
    q = p[np.all(p > ref, axis=1)] - ref
    return _hv_positive(q)


# ---------------------------------------------------------------------------------------------
# Sparsity, ratio and return deviation, distance to a front, mean utility
# ---------------------------------------------------------------------------------------------


def peda_front_mask(points) -> np.ndarray:
    """For each row of ``points``: does PEDA keep it (``docs/protocol.md``)? A point is kept when
    none of its coordinates is negative and no row of ``points`` dominates it.

    This is PEDA's ``undominated_indices`` with tolerance 0 as a mask: every row is compared with
    every row, those with a negative coordinate included; duplicates are all kept (a point does not
    dominate its copy). An empty input gives an empty mask.
    """
    p = _as_points(points)
    if p.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    unique, inverse = np.unique(p, axis=0, return_inverse=True)
    keep = _front_mask(unique) & np.all(unique >= 0.0, axis=1)
    return keep[inverse.reshape(-1)]


def peda_front(points) -> np.ndarray:
    """The points PEDA's sparsity is computed on (``docs/protocol.md``): every point with no
    negative coordinate that no point dominates (:func:`peda_front_mask`).

    Unlike :func:`pareto_front`, duplicates are all kept (a point does not dominate its copy);
    points with a negative coordinate are dropped even when nothing dominates them. Rows keep
    their input order.
    """
    p = _as_points(points)
    return p[peda_front_mask(p)] if p.shape[0] else p


def sparsity(points) -> float:
    """Sparsity (SP) of ``points`` as PEDA computes it (``docs/protocol.md``; lower is better).

    With ``F`` the points :func:`peda_front` keeps (non-dominated, no negative coordinate,
    duplicates kept) and ``N = |F|``: for each objective ``j`` sort ``F[:, j]`` into ``s_j`` and
    sum the squared gaps between neighbours; then sum over objectives and divide by ``N - 1``::

        SP = 1 / (N - 1) * sum_j sum_{i=1}^{N-1} (s_j[i+1] - s_j[i])^2

    Zero when fewer than two points are kept.
    """
    front = peda_front(points)
    n = front.shape[0]
    if n < 2:
        return 0.0
    s = np.sort(front, axis=0)
    return float(np.sum(np.diff(s, axis=0) ** 2) / (n - 1))


def _ratio_distances(w: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``|| R_i / sum(R_i) - w_i ||_2`` for the rows whose return sums to more than 0."""
    totals = r.sum(axis=1)
    ok = totals > 0.0
    return np.linalg.norm(r[ok] / totals[ok, None] - w[ok], axis=1)


def ratio_deviation(preferences, returns) -> float:
    """MODULI's ratio deviation ("mv"): the mean L2 distance between the achieved return ratio and
    the preference, over the points PEDA keeps (lower is better).

    With ``K`` the rows :func:`peda_front_mask` keeps (no negative coordinate, dominated by no row of
    the whole set, duplicates kept), each with preference ``w_i`` and raw return vector ``R_i``::

        ratio deviation = mean_{i in K} || R_i / sum_j R_ij  -  w_i ||_2

    0 means every kept point split its return between objectives exactly as its preference asks.
    Points that are dominated or have a negative coordinate do not count, however far their ratio
    is from their preference. A kept point whose return is all zeros has no ratio and is left out
    (MODULI's code would divide by zero); the result is NaN when no point is left.

    Source: MODULI's ``compute_matchvalue``, fed with PEDA's ``undominated_indices`` (tolerance 0),
    in ``dev/visualize/tex_table_generator_together_mvwr_oodonly.py`` of github.com/pickxiguapi/MODULI
    (``docs/protocol.md``).
    """
    w, r = _as_paired(preferences, returns)
    keep = peda_front_mask(r)
    d = _ratio_distances(w[keep], r[keep])
    return float(np.mean(d)) if d.size else float("nan")


def ratio_deviation_all(preferences, returns) -> float:
    """This project's ratio deviation: as :func:`ratio_deviation`, but over every point.

    For each point ``i`` with preference ``w_i`` (non-negative, summing to 1) and achieved raw
    return vector ``R_i`` (with ``sum(R_i) > 0``)::

        ratio deviation (all) = mean_i || R_i / sum_j R_ij  -  w_i ||_2

    It scores how each point follows its preference, dominated points included. Points whose
    return vector does not have a positive sum have no return ratio (a policy with large energy
    penalties can get there); they are left out of the mean, and the result is NaN when no point
    is left.
    """
    w, r = _as_paired(preferences, returns)
    d = _ratio_distances(w, r)
    return float(np.mean(d)) if d.size else float("nan")


def _paired_returns(returns, other, other_name: str) -> tuple[np.ndarray, np.ndarray]:
    r = _as_points(returns, "returns")
    f = _as_points(other, other_name, r.shape[1] if r.shape[1] else None)
    if len(f) != len(r):
        raise ValueError(f"returns ({len(r)}) and {other_name} ({len(f)}) must pair row by row")
    return r, f


def return_deviation(returns, predicted_returns) -> float:
    """MODULI's return deviation (RD): the mean Euclidean distance, in raw return units, between
    each achieved return and the return a front model predicts at the same preference (lower is
    better).

    ``returns`` (``G(w_i)``, what the agent achieved at preference ``w_i``) and ``predicted_returns``
    (``g(w_i)``, e.g. :meth:`morl.front_model.FrontModel.predict` at the same preferences) are
    ``(N, n_obj)`` arrays paired by row::

        RD = mean_i || g(w_i) - G(w_i) ||_2

    No objective is scaled, no point is filtered: every objective counts in its own units, so RD
    is comparable between runs scored against the same front model (one per complete dataset),
    and not between tasks. NaN for no points (e.g. no held-out preference).

    Source: the RD row of MODULI's out-of-distribution table,
    ``dev/visualize/tex_table_generator_together_mvwr_oodonly.py`` of github.com/pickxiguapi/MODULI
    (``docs/protocol.md``).
    """
    r, g = _paired_returns(returns, predicted_returns, "predicted_returns")
    if len(r) == 0:
        return float("nan")
    return float(np.mean(np.linalg.norm(g - r, axis=1)))


def front_at(preferences, front) -> np.ndarray:
    """For each preference ``w`` (rows of ``(P, n_obj)``), the point of ``front`` that maximises
    ``w . r``: the return a front of (e.g. a dataset's) achieved returns offers at that preference.
    Ties go to the first such point of ``pareto_front(front)``."""
    z = pareto_front(_as_points(front, "front"))
    w = _as_points(preferences, "preferences", z.shape[1])
    return z[np.argmax(w @ z.T, axis=1)]


def front_scale(reference_returns) -> np.ndarray:
    """The per-objective scale :func:`front_distance` divides by: the largest absolute value each
    objective takes in ``reference_returns`` (1 where that is 0).

    Give it the reference returns of the whole preference grid (e.g. :func:`front_at` of a complete
    dataset at every grid point), not of a subset: then every subset scored against that dataset
    (each coverage variant's held-out preferences) is measured in the same units.
    """
    f = _as_points(reference_returns, "reference_returns")
    if f.shape[0] == 0:
        raise ValueError("reference_returns must be non-empty")
    scale = np.abs(f).max(axis=0)
    scale[scale == 0] = 1.0
    return scale


def front_distance(returns, reference_returns, scale) -> float:
    """This project's distance to a data front: the mean distance between each achieved return
    and a reference return, each objective divided by a fixed ``scale`` (lower is better).

    ``returns`` and ``reference_returns`` are ``(N, n_obj)`` arrays paired by row; in the tables the
    reference of a preference is :func:`front_at` of the complete dataset's trajectory returns, and
    ``scale`` is :func:`front_scale` of that front over the whole grid, fixed per dataset::

        front distance = mean_i || (R_i - F_i) / s ||_2

    Unlike :func:`return_deviation` it needs no fitted model, and objectives of different sizes
    weigh alike. 0 means every point reached its reference exactly; NaN for no points.
    """
    r, f = _paired_returns(returns, reference_returns, "reference_returns")
    s = np.asarray(scale, dtype=np.float64)
    if s.shape != (r.shape[1],) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"scale must hold one positive finite value per objective ({r.shape[1]}), got {s!r}")
    if len(r) == 0:
        return float("nan")
    return float(np.mean(np.linalg.norm((r - f) / s, axis=1)))


def mean_utility(preferences, returns) -> float:
    """The mean over points of the scalarised return ``w_i . R_i`` at each point's own preference.

    ``preferences`` (non-negative rows summing to 1) and raw ``returns`` are ``(N, n_obj)``
    arrays paired by row; with the preferences on a uniform simplex grid this estimates the
    expected utility over uniformly drawn linear preferences.
    """
    w, r = _as_paired(preferences, returns)
    return float(np.mean(np.sum(w * r, axis=1)))


# ---------------------------------------------------------------------------------------------
# Expected utility metric, inverted generational distance, cardinality
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=32)
def _eum_weights(n_obj: int, n_weights: int) -> np.ndarray:
    """The ``(n_weights, n_obj)`` weight set of :func:`eum` (read-only, cached).

    Built exactly as morl-baselines' ``equally_spaced_weights(n_obj, n_weights)`` builds it:
    pymoo's Riesz s-energy reference directions, ``get_reference_directions("energy", n_obj,
    n_weights, seed=42)``, with no further scaling or normalisation. Every row is non-negative
    and sums to 1.

    pymoo versions before 0.6.2 apply ``seed`` by re-seeding numpy's global random generator;
    that generator's state is saved and restored around the call so that computing a metric does
    not change the random numbers the rest of the program draws. (pymoo 0.6.2 ignores ``seed``
    and draws from its own fixed-seed generator, so the set can differ slightly between pymoo
    versions, exactly as it does in morl-baselines.)
    """
    from pymoo.util.ref_dirs import get_reference_directions

    state = np.random.get_state()
    try:
        w = get_reference_directions("energy", n_obj, n_weights, seed=_EUM_WEIGHTS_SEED)
    finally:
        np.random.set_state(state)
    w = np.array(w, dtype=np.float64)
    w.setflags(write=False)
    return w


def eum(points, n_weights: int = 100) -> float:
    """Expected Utility Metric (EUM) of a set of return vectors (higher is better).

    The definition of morl-baselines (``expected_utility`` in its performance indicators, fed
    with the weights of ``equally_spaced_weights``; after Zintgraf et al., 2015, "Quality
    Assessment of MORL Algorithms: A Utility-Based Approach"). With ``W`` a fixed set of
    ``n_weights`` linear preferences spread evenly over the simplex (pymoo's Riesz s-energy
    reference directions, ``get_reference_directions("energy", n_obj, n_weights, seed=42)``)::

        EUM = mean_{w in W} max_i  w . R_i

    That is, for each preference the best scalarised return any point offers, averaged over the
    preferences. Unlike :func:`mean_utility`, which scores each point only under the
    preference it was produced for, a point here counts for every preference it is best at.
    Dominated and duplicated points never change the result (the weights are non-negative), so
    the value equals morl-baselines' EUM of the Pareto-filtered set.

    Parameters
    ----------
    points : array_like, shape (N, n_obj)
        Return vectors, one per row; at least one row and at least 2 objectives, all finite.
    n_weights : int, default 100
        Size of the weight set; at least ``n_obj`` (the smallest set pymoo builds, which is then
        exactly the corners of the simplex).

    Returns
    -------
    float
        The expected utility metric.

    Raises
    ------
    ValueError
        If ``points`` is not a non-empty 2-D array with at least 2 objectives, contains NaN or
        inf, or ``n_weights`` is not an integer of at least ``n_obj``.
    """
    p = _as_points(points)
    if p.shape[0] == 0:
        raise ValueError("points must be non-empty")
    n_obj = p.shape[1]
    if n_obj < 2:
        raise ValueError(f"points must have at least 2 objectives, got {n_obj}")
    if isinstance(n_weights, (bool, np.bool_)) or not isinstance(n_weights, (int, np.integer)):
        raise ValueError(f"n_weights must be an integer, got {n_weights!r}")
    if n_weights < n_obj:
        raise ValueError(f"n_weights must be at least the number of objectives ({n_obj}), got {n_weights}")
    w = _eum_weights(int(n_obj), int(n_weights))
    rows = max(1, _IGD_BLOCK // w.shape[0])
    best = np.full(w.shape[0], -np.inf)
    for start in range(0, p.shape[0], rows):
        best = np.maximum(best, np.max(w @ p[start : start + rows].T, axis=1))
    return float(np.mean(best))


def igd(points, reference_front) -> float:
    """Inverted Generational Distance (IGD) of ``points`` to ``reference_front`` (lower is
    better).

    For each point of the reference front (typically the true or best known Pareto front), the
    Euclidean distance to the nearest row of ``points``; then the mean over the reference
    front::

        IGD = mean_{z in Z} min_i || z - R_i ||_2

    This is pymoo's ``IGD`` with no normalisation, which morl-baselines' ``igd`` uses. All of
    ``points`` are considered: morl-baselines passes only the non-dominated points, so apply
    :func:`pareto_front` first to match it (a dominated point can be nearer to a reference point
    than any front point). 0 when every reference point is among ``points``.

    Parameters
    ----------
    points : array_like, shape (N, n_obj)
        The approximation being scored; at least one row, all finite.
    reference_front : array_like, shape (M, n_obj)
        The reference points; at least one row, all finite, same number of objectives.

    Returns
    -------
    float
        The inverted generational distance.

    Raises
    ------
    ValueError
        If either input is not a non-empty 2-D array, contains NaN or inf, or the two have
        different numbers of objectives.
    """
    p = _as_points(points)
    if p.shape[0] == 0:
        raise ValueError("points must be non-empty")
    z = _as_points(reference_front, "reference_front")
    if z.shape[0] == 0:
        raise ValueError("reference_front must be non-empty")
    if z.shape[1] != p.shape[1]:
        raise ValueError(f"reference_front has {z.shape[1]} objectives but points have {p.shape[1]}")
    rows = max(1, _IGD_BLOCK // p.size)
    total = 0.0
    for start in range(0, z.shape[0], rows):
        diff = z[start : start + rows, None, :] - p[None, :, :]
        total += float(np.sum(np.sqrt(np.min(np.sum(diff * diff, axis=2), axis=1))))
    return total / z.shape[0]


def cardinality(points) -> int:
    """Number of distinct non-dominated rows of ``points`` (maximisation; higher is better).

    The size of :func:`pareto_front`: dominated points do not count and duplicated rows count
    once. This matches morl-baselines' ``cardinality``, which it applies to the Pareto-filtered,
    duplicate-free front. An empty input gives 0.

    Parameters
    ----------
    points : array_like, shape (N, n_obj)
        Return vectors, one per row, all finite.

    Returns
    -------
    int
        The number of distinct non-dominated points.

    Raises
    ------
    ValueError
        If ``points`` is not a 2-D array or contains NaN or inf.
    """
    return int(pareto_front(points).shape[0])


def trivial_ratio_text(behavior_hv: float, zero_hv: float, random_hv: float) -> str:
    """How many times the behavior front's HV exceeds the better of the two trivial policies'
    (all-zero actions, uniform random actions), as ``"3.09x"`` text.

    Where both trivial policies score an HV of 0 (their returns lie below the reference point, as
    on Hopper), no ratio exists and the text says so instead of dividing by zero.
    """
    better = max(float(zero_hv), float(random_hv))
    if better <= 0.0:
        return "no ratio (both 0)"
    return f"{float(behavior_hv) / better:.2f}\u00d7"
