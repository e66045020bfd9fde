"""Preferences on the probability simplex: evaluation lattice, dataset samplers, spread.

A *preference* ``w`` is a vector of ``n_obj`` non-negative weights summing to one; an agent
conditioned on ``w`` should maximise the scalarised return ``w . R``.

This module holds the three preference ideas of D4MORL / PEDA (``docs/protocol.md``):

* :func:`simplex_grid` - the uniform evaluation lattice (501 points for two objectives,
  step 1/500; 325 points for three objectives, step 1/24).
* :func:`sample_preferences` - the High / Medium / Low entropy dataset distributions.
* :func:`preference_entropy` - a histogram estimate of the differential entropy of a set of
  preferences, used to order datasets by how widely their preferences spread.
"""

from __future__ import annotations

import itertools
import math
from numbers import Integral

import numpy as np

from morl.vocabulary import ENTROPIES

__all__ = [
    "ENTROPY_LEVELS",
    "MEDIUM_ALPHA_RANGE",
    "LOW_ALPHA_RANGE",
    "simplex_grid",
    "default_divisions",
    "sample_preferences",
    "preference_entropy",
    "knn_preference_entropy",
    "KNN_K",
]

#: Names of the three D4MORL preference distributions, widest first (:mod:`morl.vocabulary`).
ENTROPY_LEVELS: tuple[str, ...] = ENTROPIES

#: Medium entropy ("wide"): Dirichlet concentrations alpha_i ~ U(0, 1e7).
MEDIUM_ALPHA_RANGE: tuple[float, float] = (0.0, 1e7)

#: Low entropy ("narrow"): Dirichlet concentrations alpha_i ~ U(1e7/3, 2e7/3).
LOW_ALPHA_RANGE: tuple[float, float] = (1e7 / 3.0, 2e7 / 3.0)

_DEFAULT_DIVISIONS = {2: 500, 3: 24}

# simplex_grid refuses to build lattices larger than this (they would not fit an evaluation).
_MAX_GRID_ROWS = 10_000_000

# High-entropy rejection sampling: at most this many rounds of candidate draws ...
_MAX_REJECTION_ROUNDS = 100
# ... at most this many candidates per round (bounds the memory of one round) ...
_MAX_CANDIDATES_PER_ROUND = 2_000_000
# ... and at most this many candidates in all before giving up.
_MAX_CANDIDATES_TOTAL = 20_000_000


def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


# ---------------------------------------------------------------------------------------------
# Evaluation lattice
# ---------------------------------------------------------------------------------------------


def default_divisions(n_obj: int) -> int:
    """Lattice divisions of the D4MORL evaluation grid: 500 for 2 objectives, 24 for 3.

    ``simplex_grid(2, 500)`` has 501 points and ``simplex_grid(3, 24)`` has C(26, 2) = 325
    points (``docs/protocol.md``, "Evaluation"). Other objective counts have no published grid: pass ``divisions``
    explicitly to :func:`simplex_grid`.
    """
    n_obj = _check_int(n_obj, "n_obj", 1)
    try:
        return _DEFAULT_DIVISIONS[n_obj]
    except KeyError:
        raise ValueError(
            f"no default preference-grid divisions for n_obj={n_obj} (known: 2 -> 500, 3 -> 24); "
            "pass divisions explicitly"
        ) from None


def simplex_grid(n_obj: int, divisions: int) -> np.ndarray:
    """Uniform lattice on the preference simplex.

    Returns every vector ``k / divisions`` where ``k`` is a composition of ``divisions`` into
    ``n_obj`` non-negative integer parts, i.e. ``C(divisions + n_obj - 1, n_obj - 1)`` rows of
    shape ``(n_obj,)``, float64, each summing to one. Rows are in ascending lexicographic order
    of ``k`` (so for two objectives: ``(0, 1), (1/500, 499/500), ..., (1, 0)``).

    Examples: ``simplex_grid(2, 500)`` -> 501 rows, ``simplex_grid(3, 24)`` -> 325 rows.
    """
    n_obj = _check_int(n_obj, "n_obj", 1)
    divisions = _check_int(divisions, "divisions", 1)
    n_rows = math.comb(divisions + n_obj - 1, n_obj - 1)
    if n_rows > _MAX_GRID_ROWS:
        raise ValueError(
            f"simplex_grid(n_obj={n_obj}, divisions={divisions}) would have {n_rows} rows "
            f"(limit {_MAX_GRID_ROWS}); use fewer divisions"
        )
    if n_obj == 1:
        return np.ones((1, 1), dtype=np.float64)
    # Stars and bars: choose the positions of n_obj - 1 bars among divisions + n_obj - 1 slots;
    # the parts are the gaps between consecutive bars. itertools.combinations yields bar
    # positions in lexicographic order, which is the lexicographic order of the parts.
    n_bars = n_obj - 1
    bars = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(divisions + n_bars), n_bars)),
        dtype=np.int64,
        count=n_rows * n_bars,
    ).reshape(n_rows, n_bars)
    edges = np.empty((n_rows, n_obj + 1), dtype=np.int64)
    edges[:, 0] = -1
    edges[:, 1:-1] = bars
    edges[:, -1] = divisions + n_bars
    parts = np.diff(edges, axis=1) - 1
    return parts.astype(np.float64) / divisions


# ---------------------------------------------------------------------------------------------
# Dataset preference distributions
# ---------------------------------------------------------------------------------------------


def _check_bounds(low, high, n_obj: int) -> tuple[np.ndarray, np.ndarray]:
    low = np.zeros(n_obj) if low is None else np.asarray(low, dtype=np.float64)
    high = np.ones(n_obj) if high is None else np.asarray(high, dtype=np.float64)
    low = np.broadcast_to(low, (n_obj,)) if low.ndim == 0 else low
    high = np.broadcast_to(high, (n_obj,)) if high.ndim == 0 else high
    for name, arr in (("low", low), ("high", high)):
        if arr.shape != (n_obj,):
            raise ValueError(f"{name} must have shape ({n_obj},), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite, got {arr}")
        if np.any(arr < 0.0) or np.any(arr > 1.0):
            raise ValueError(f"{name} must lie in [0, 1], got {arr}")
    if np.any(low > high):
        raise ValueError(f"low must be <= high per objective, got low={low}, high={high}")
    if low.sum() > 1.0 + 1e-12 or high.sum() < 1.0 - 1e-12:
        raise ValueError(
            "the box [low, high] does not meet the simplex (need sum(low) <= 1 <= sum(high)), "
            f"got low={low}, high={high}"
        )
    return np.array(low, dtype=np.float64), np.array(high, dtype=np.float64)


def _dirichlet_ones(rng: np.random.Generator, m: int, n_obj: int) -> np.ndarray:
    """``m`` draws of Dirichlet(1, ..., 1): normalised Exp(1) draws (uniform on the simplex)."""
    e = rng.standard_exponential(size=(m, n_obj))
    s = e.sum(axis=1, keepdims=True)
    # A row of exact zeros has probability 0; guard anyway so no NaN can escape.
    bad = s[:, 0] <= 0.0
    if np.any(bad):
        e[bad] = 1.0
        s[bad] = n_obj
    return e / s


def _dirichlet_random_alpha(
    rng: np.random.Generator, n: int, n_obj: int, alpha_range: tuple[float, float]
) -> np.ndarray:
    """Per row: alpha_i ~ U(alpha_range), then w ~ Dirichlet(alpha) via normalised Gamma draws."""
    out = np.empty((n, n_obj), dtype=np.float64)
    todo = np.arange(n)
    for _ in range(_MAX_REJECTION_ROUNDS):
        if todo.size == 0:
            return out
        alpha = rng.uniform(alpha_range[0], alpha_range[1], size=(todo.size, n_obj))
        g = rng.standard_gamma(alpha)
        s = g.sum(axis=1)
        ok = s > 0.0  # all alphas ~0 could underflow every Gamma draw; redraw such rows
        out[todo[ok]] = g[ok] / s[ok, None]
        todo = todo[~ok]
    raise ValueError("Dirichlet sampling kept producing all-zero Gamma draws")  # pragma: no cover


def _map_into_box(w: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Affine map of simplex points into the box [low, high], then renormalise rows to sum 1."""
    mapped = low + w * (high - low)
    s = mapped.sum(axis=1, keepdims=True)
    # s == 0 only if low == 0 and w * high == 0: fall back to the uniform preference.
    zero = s[:, 0] <= 0.0
    if np.any(zero):
        mapped[zero] = 1.0
        s[zero] = mapped.shape[1]
    return mapped / s


def _sample_high(rng, n, n_obj, low, high) -> np.ndarray:
    """Dirichlet(1) rejection-sampled into the per-objective box [low_i, high_i]."""
    if n_obj > 1 and (np.any(low >= high) or low.sum() >= 1.0 or high.sum() <= 1.0):
        raise ValueError(
            "high-entropy sampling needs a box [low, high] that meets the simplex in a set of "
            "positive area (low_i < high_i for all i and sum(low) < 1 < sum(high)), "
            f"got low={low}, high={high}"
        )
    out = np.empty((n, n_obj), dtype=np.float64)
    filled = 0
    accepted_total = 0
    drawn_total = 0
    for _ in range(_MAX_REJECTION_ROUNDS):
        if filled == n or drawn_total >= _MAX_CANDIDATES_TOTAL:
            break
        need = n - filled
        # Size the round by the acceptance rate seen so far (with a safety margin).
        rate = (accepted_total + 1) / (drawn_total + 1)
        m = int(min(_MAX_CANDIDATES_PER_ROUND, max(need, 64, math.ceil(1.2 * need / rate) + 16)))
        cand = _dirichlet_ones(rng, m, n_obj)
        inside = np.all((cand >= low) & (cand <= high), axis=1)
        acc = cand[inside]
        drawn_total += m
        accepted_total += acc.shape[0]
        take = min(need, acc.shape[0])
        out[filled : filled + take] = acc[:take]
        filled += take
    if filled == n:
        return out
    raise ValueError(
        f"high-entropy rejection sampling accepted only {accepted_total} of {drawn_total} "
        f"Dirichlet(1) candidates for the box low={low}, high={high}; the box covers too little "
        "of the simplex"
    )


def sample_preferences(
    entropy: str,
    n: int,
    n_obj: int,
    rng: np.random.Generator,
    low=None,
    high=None,
) -> np.ndarray:
    """Draw ``n`` preferences from one of the D4MORL dataset distributions (``docs/protocol.md``, "Datasets").

    Parameters
    ----------
    entropy:
        ``"high"``, ``"medium"`` or ``"low"``.
    n, n_obj:
        Number of preferences and of objectives.
    rng:
        The generator all randomness comes from (same seed -> same preferences).
    low, high:
        Per-objective range ``[low_i, high_i]`` of preferences covered by the behavior
        policies (scalars broadcast). Default 0 and 1 (the whole simplex).

    Distributions
    -------------
    * **High** ("uniform"): ``w ~ Dirichlet(1, ..., 1)`` (normalised Exp(1) draws), rejection
      sampled until ``low_i <= w_i <= high_i`` for every objective.
    * **Medium** ("wide"): per preference ``alpha_i ~ U(0, 1e7)``, ``w ~ Dirichlet(alpha)``,
      then ``w <- low + w * (high - low)`` and renormalised to sum 1.
    * **Low** ("narrow"): per preference ``alpha_i ~ U(1e7/3, 2e7/3)``, ``w ~ Dirichlet(alpha)``,
      then ``w <- low + (high - low) / 3 + w * (high - low)``: scaled by the full width and
      shifted by a third of it, as D4MORL's data-generation code does (``docs/protocol.md``),
      and renormalised to sum 1.

    Returns ``(n, n_obj)`` float64 rows, non-negative, summing to one.
    """
    if not isinstance(entropy, str) or entropy.lower() not in ENTROPY_LEVELS:
        raise ValueError(f"entropy must be one of {ENTROPY_LEVELS}, got {entropy!r}")
    entropy = entropy.lower()
    n = _check_int(n, "n", 0)
    n_obj = _check_int(n_obj, "n_obj", 1)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    low, high = _check_bounds(low, high, n_obj)
    if n == 0:
        return np.empty((0, n_obj), dtype=np.float64)

    if entropy == "high":
        return _sample_high(rng, n, n_obj, low, high)
    if entropy == "medium":
        w = _dirichlet_random_alpha(rng, n, n_obj, MEDIUM_ALPHA_RANGE)
        return _map_into_box(w, low, high)
    # low entropy: the full width, shifted by a third of it
    width = high - low
    w = _dirichlet_random_alpha(rng, n, n_obj, LOW_ALPHA_RANGE)
    return _map_into_box(w, low + width / 3.0, high + width / 3.0)


# ---------------------------------------------------------------------------------------------
# Spread of a preference set
# ---------------------------------------------------------------------------------------------


def preference_entropy(prefs, bins: int = 20) -> float:
    """Histogram estimate of the differential entropy of a set of preferences (nats).

    The first ``n_obj - 1`` coordinates determine a point on the simplex, so they are binned
    on a fixed grid of ``bins`` equal cells per coordinate over ``[0, 1]`` (cell volume
    ``v = bins ** -(n_obj - 1)``), and with ``p_k`` the fraction of preferences in occupied
    cell ``k``::

        H = -sum_k p_k * log(p_k / v)

    Because the binning is fixed, values are comparable between datasets with the same number
    of objectives: wider spreads give larger values. For two objectives a uniform spread gives
    about 0 and concentrated sets give negative values (down to ``-log(bins)`` for a single
    cell). Used to order datasets: High > Medium > Low entropy.
    """
    bins = _check_int(bins, "bins", 1)
    p = np.asarray(prefs, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2:
        raise ValueError(f"prefs must be a non-empty (n, n_obj) array with n_obj >= 2, got shape {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("prefs contains non-finite values")
    tol = 1e-6
    if np.any(p < -tol) or np.any(p > 1.0 + tol):
        raise ValueError("prefs must lie in [0, 1] (they are points of the simplex)")
    coords = p[:, :-1]
    idx = np.clip(np.floor(coords * bins).astype(np.int64), 0, bins - 1)
    _, counts = np.unique(idx, axis=0, return_counts=True)
    prob = counts / counts.sum()
    log_cell_volume = -(p.shape[1] - 1) * math.log(bins)
    return float(-np.sum(prob * (np.log(prob) - log_cell_volume)))


#: Neighbour rank of the Kozachenko-Leonenko estimator (clipped to n - 1 for tiny sets).
KNN_K = 8
#: Distances below this are treated as this (exact duplicates would give log 0). Preferences are
#: stored as float32, whose resolution near 0.5 is ~3e-8.
_MIN_DISTANCE = 1e-7


def knn_preference_entropy(prefs, k: int = KNN_K) -> float:
    """Kozachenko-Leonenko k-nearest-neighbour estimate of the differential entropy (nats) of
    the distribution a set of preferences was drawn from.

    A preference ``w`` on the simplex is fixed by its first ``d = n_obj - 1`` coordinates, so the
    estimate is taken in that chart (the same one :func:`morl.preferences.preference_entropy`
    bins): with ``eps_i`` the Euclidean distance from point ``i`` to its ``k``-th nearest
    neighbour, ``c_d`` the volume of the unit ``d``-ball and ``psi`` the digamma function::

        H = psi(n) - psi(k) + log(c_d) + (d / n) * sum_i log(eps_i)

    On this scale the uniform distribution on the whole simplex has ``-log((n_obj - 1)!)``
    (0 for two objectives, -0.69 for three); narrower sets have lower values.

    Why this estimator: it is consistent (converges to the true entropy as n grows), needs no
    bin width, and does not saturate for narrow sets the way a fixed histogram does (the
    histogram cannot go below minus the log of the cell count once every point shares a cell).
    With a few dozen preferences it is noisy (std ~0.1 nats) and slightly biased upward near the
    simplex edges, so compare datasets of similar size. For two objectives D4MORL's High and
    Medium distributions are close (true values 0 and -0.08 nats; Low is -2.4), so telling those
    two apart takes hundreds of trajectories; for three objectives the gap is 0.22 nats.
    (The mean Shannon entropy ``-sum_i w_i log w_i`` of the individual preferences is *not* a
    spread measure: it rewards balanced preferences, and orders Low above High.)
    Exact duplicates are kept apart by a floor of 1e-7 on the distances.
    """
    p = np.asarray(prefs, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"prefs must be an (n, n_obj) array with n_obj >= 2, got shape {p.shape}")
    n, d = p.shape[0], p.shape[1] - 1
    if n < 2:
        raise ValueError(f"an entropy estimate needs at least 2 preferences, got {n}")
    from scipy.spatial import cKDTree
    from scipy.special import digamma, gammaln

    k = int(min(k, n - 1))
    x = p[:, :d]
    dist, _ = cKDTree(x).query(x, k=k + 1)  # column 0 is the point itself
    eps = np.maximum(dist[:, k], _MIN_DISTANCE)
    log_unit_ball = (d / 2) * math.log(math.pi) - gammaln(d / 2 + 1)
    return float(digamma(n) - digamma(k) + log_unit_ball + d * np.mean(np.log(eps)))
