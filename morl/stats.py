"""Interval statistics for the results tables, after Agarwal et al. (2021).

The statistics are those of R. Agarwal, M. Schwarzer, P. S. Castro, A. Courville and M. G.
Bellemare, "Deep Reinforcement Learning at the Edge of the Statistical Precipice" (NeurIPS 2021),
with the definitions of their reference library ``rliable``:

* :func:`cell_interval` - a bootstrap confidence interval of the mean of one table cell's
  per-seed values;
* :func:`iqm_intervals` - the interquartile mean (IQM) of each model's normalised scores over all
  runs and tasks, with a stratified-bootstrap confidence interval;
* :func:`probability_of_improvement` - for each ordered pair of models (X, Y), the average
  probability of improvement P(X > Y), with a stratified-bootstrap confidence interval.

Shapes follow rliable: a model's scores form an ``(n_runs, n_tasks)`` array, ``scores[n, m]``
being the score of run (seed) ``n`` on task ``m``. In the results tables a task is one
(env, dataset) row and a score is a normalised value such as HV / B.

Definitions, and why rliable is not called
------------------------------------------
The definitions are rliable's: the IQM is the 25% trimmed mean of all runs and tasks pooled
(``scipy.stats.trim_mean(x, 0.25, axis=None)``, which rliable's ``aggregate_iqm`` calls); P(X > Y)
is, per task, the Mann-Whitney U statistic of X's runs against Y's divided by the number of
pairs (ties count 1/2), averaged over tasks. The bootstrap is rliable's "stratified bootstrap":
runs are resampled with replacement within each task, tasks stay fixed (its default,
``task_bootstrap=False``), and the interval is the percentile interval its
``get_interval_estimates`` returns by default. The resampling is written out here with numpy and
scipy because rliable 1.2.0 cannot serve it with the rest of the stack: its bootstrap module
imports ``arch``, rliable requires ``arch<8``, which fails to import with pandas 3, and ``arch>=8``
no longer takes the ``random_state`` argument rliable passes. rliable also draws its indices from
numpy's global random state, which would disturb other code's random numbers.

Every function takes a ``seed``. Each bootstrap draws from its own
``numpy.random.RandomState(seed)``, in the order rliable's ``StratifiedBootstrap`` and
``StratifiedIndependentBootstrap`` draw from the global state, so the intervals are the ones
rliable's ``get_interval_estimates(..., reps=reps, confidence_interval_size=confidence)`` gives
right after ``np.random.seed(seed)`` (checked, up to floating-point rounding, with rliable 1.2.0
on pandas 2.3). The same seed always gives the same intervals, and numpy's global random state
is neither used nor changed. P(X > Y) replicates come from one table of pairwise comparisons per
pair of models rather than a Mann-Whitney test per replicate, which gives the same numbers much
faster.

A percentile interval is not guaranteed to contain its point estimate (it usually does for
these statistics), and with few seeds it is narrower than its nominal coverage suggests: with
``n`` runs a task only ever sees those ``n`` values.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import trim_mean

__all__ = ["cell_interval", "iqm_intervals", "probability_of_improvement"]

#: Bootstrap replicates resampled at once (bounds the memory of the index arrays).
_CHUNK = 1024

#: The largest seed ``numpy.random.RandomState`` accepts.
_MAX_SEED = 2**32 - 1


def cell_interval(
    values: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    reps: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """A bootstrap confidence interval of the mean of one table cell's per-seed values.

    ``values`` holds one number per seed (run) for a single task, e.g. the HV of one model on one
    (env, dataset) row. Each of ``reps`` bootstrap replicates draws ``len(values)`` values with
    replacement and takes their mean; the interval runs from the ``(1 - confidence) / 2`` to the
    ``(1 + confidence) / 2`` quantile of those means (the percentile bootstrap).

    This is the stratified bootstrap of Agarwal et al. (2021), as rliable implements it, applied
    to scores of shape ``(n_seeds, 1)``: with a single task (stratum) it reduces to resampling
    the seeds. It equals ``rliable.library.get_interval_estimates({"cell": values[:, None]},
    func=lambda s: np.array([np.mean(s)]), reps=reps, confidence_interval_size=confidence)``
    after ``np.random.seed(seed)``, without touching numpy's global random state.

    Args:
        values: the per-seed values, a non-empty 1-D sequence of finite numbers.
        confidence: the interval's nominal coverage, strictly between 0 and 1.
        reps: the number of bootstrap replicates (at least 1).
        seed: seeds the resampling (0 to 2**32 - 1); the same seed gives the same interval.

    Returns:
        ``(low, high)``. With a single value ``v`` there is nothing to resample: ``(v, v)``.

    Raises:
        ValueError: ``values`` is empty, not 1-D, or holds something other than finite numbers;
            or ``confidence``, ``reps`` or ``seed`` is out of range.
    """
    _check_options(confidence, reps, seed)
    x = _finite_array(values, "values")
    if x.ndim != 1:
        raise ValueError(f"values must be a 1-D sequence of per-seed values, got shape {x.shape}")
    if x.size == 0:
        raise ValueError("values is empty: a cell needs at least one per-seed value")
    if x.size == 1:
        return float(x[0]), float(x[0])

    n = x.size
    rng = np.random.RandomState(seed)
    means = np.empty(reps)
    for start in range(0, reps, _CHUNK):
        m = min(_CHUNK, reps - start)
        # rliable's draw for an (n, 1) score array: n run indices per replicate, one task
        idx = rng.choice(n, size=(m, n, 1))
        means[start : start + m] = x[idx[:, :, 0]].mean(axis=1)
    return percentile_interval(means, confidence)


def iqm_intervals(
    scores: Mapping[str, np.ndarray],
    confidence: float = 0.95,
    reps: int = 2000,
    seed: int = 0,
) -> dict[str, tuple[float, float, float]]:
    """Each model's interquartile mean (IQM) with a stratified-bootstrap confidence interval.

    The IQM of Agarwal et al. (2021) is the mean of the middle 50% of a model's scores, pooled
    over all runs and tasks, as rliable's ``aggregate_iqm`` computes it,
    ``scipy.stats.trim_mean(scores, 0.25, axis=None)``: of the ``N = n_runs * n_tasks`` scores,
    the ``floor(N / 4)`` lowest and the ``floor(N / 4)`` highest are dropped and the rest are
    averaged (so nothing is dropped when ``N < 4``).

    The interval is the percentile interval of the stratified bootstrap: each replicate
    resamples, for every task separately, ``n_runs`` runs with replacement from that task's runs
    (tasks are kept, not resampled), and takes the IQM of the result; the interval runs from the
    ``(1 - confidence) / 2`` to the ``(1 + confidence) / 2`` quantile of the replicates. This is
    what ``rliable.library.get_interval_estimates`` computes with
    ``func=lambda s: np.array([aggregate_iqm(s)])`` and its defaults (``method="percentile"``,
    ``task_bootstrap=False``). With one run per task every replicate is the data itself, and the
    interval is the point.

    Every model is resampled from a fresh ``numpy.random.RandomState(seed)``, so a model's
    interval depends neither on the other models in ``scores`` nor on their order. Models may
    have different numbers of runs.

    Args:
        scores: model name -> ``(n_runs, n_tasks)`` array of finite normalised scores (e.g.
            HV / B), ``scores[name][n, m]`` being run (seed) ``n`` on task ``m``. Every model must
            have the same tasks (the same ``n_tasks``, in the same order).
        confidence: the interval's nominal coverage, strictly between 0 and 1.
        reps: the number of bootstrap replicates (at least 1).
        seed: seeds the resampling (0 to 2**32 - 1); the same seed gives the same intervals.

    Returns:
        model name -> ``(iqm, low, high)``, in the order of ``scores``.

    Raises:
        ValueError: ``scores`` is empty, a name is not a string, an array is not 2-D, has no runs
            or no tasks, or holds something other than finite numbers; the models' task counts
            differ; or ``confidence``, ``reps`` or ``seed`` is out of range.
    """
    _check_options(confidence, reps, seed)
    arrays = _check_scores(scores)
    out: dict[str, tuple[float, float, float]] = {}
    for name, x in arrays.items():
        point = _iqm(x)
        replicates = _iqm_replicates(x, reps, np.random.RandomState(seed))
        low, high = percentile_interval(replicates, confidence)
        out[name] = (point, low, high)
    return out


def probability_of_improvement(
    scores: Mapping[str, np.ndarray],
    confidence: float = 0.95,
    reps: int = 2000,
    seed: int = 0,
) -> dict[tuple[str, str], tuple[float, float, float]]:
    """The probability of improvement P(X > Y) for every ordered pair of models, with intervals.

    Agarwal et al. (2021) define the average probability of improvement of X over Y on tasks
    ``m = 1..M`` as

        P(X > Y) = (1 / M) * sum_m P(X_m > Y_m),
        P(X_m > Y_m) = (1 / (N * K)) * sum_i sum_j S(x_{m,i}, y_{m,j}),

    where ``x_{m,1..N}`` and ``y_{m,1..K}`` are the runs of X and Y on task ``m`` and
    ``S(a, b)`` is 1 if ``a > b``, 1/2 if ``a == b`` and 0 otherwise: the Mann-Whitney U
    statistic of task ``m`` divided by ``N * K``, averaged over tasks. It is the chance that a
    random run of X beats a random run of Y on a random task, ties counting half (rliable's
    ``probability_of_improvement``).

    The interval is the percentile interval of rliable's stratified independent bootstrap
    (``StratifiedIndependentBootstrap``, which ``rliable.library.get_interval_estimates`` uses
    when a model's entry is a list ``[scores_x, scores_y]``): each replicate resamples, for every
    task separately, the runs of X and, independently, the runs of Y, each with replacement and
    keeping their counts, and recomputes P(X > Y).

    Because P(Y > X) = 1 - P(X > Y), each unordered pair is bootstrapped once: the pair is taken
    with its names in sorted order, (X, Y) say, and the entry for (Y, X) is the complement of
    the entry for (X, Y), ``(1 - p, 1 - high, 1 - low)``, from the same replicates. Every pair
    is resampled from a fresh ``numpy.random.RandomState(seed)``, so a pair's numbers depend
    neither on the other models in ``scores`` nor on their order.

    The two models must have the same tasks; their numbers of runs may differ (rliable's
    definition and its bootstrap allow that).

    Args and errors are those of :func:`iqm_intervals`, except that ``n_runs`` may differ between
    models.

    Returns:
        ``(X, Y) -> (P(X > Y), low, high)`` for every ordered pair of different models, X in the
        order of ``scores`` and, for each X, Y in that order. With a single model there is no
        pair and the result is empty.
    """
    _check_options(confidence, reps, seed)
    arrays = _check_scores(scores)
    results: dict[tuple[str, str], tuple[float, float, float]] = {}
    for a, b in itertools.combinations(sorted(arrays), 2):
        x, y = arrays[a], arrays[b]
        point = _poi(x, y)
        replicates = _poi_replicates(x, y, reps, np.random.RandomState(seed))
        low, high = percentile_interval(replicates, confidence)
        results[(a, b)] = (point, low, high)
        results[(b, a)] = (1.0 - point, 1.0 - high, 1.0 - low)
    names = list(arrays)
    return {(x, y): results[(x, y)] for x in names for y in names if x != y}


# ---------------------------------------------------------------------------------------------
# bootstrap replicates


def _iqm_replicates(x: np.ndarray, reps: int, rng: np.random.RandomState) -> np.ndarray:
    """``reps`` stratified-bootstrap replicates of the IQM of ``x`` (``(n_runs, n_tasks)``).

    Draws as rliable's ``StratifiedBootstrap`` does, one ``(n_runs, n_tasks)`` array of run
    indices per replicate (a run index for every cell, so every task is resampled on its own);
    one call for ``m`` replicates gives the same indices as ``m`` calls in a row.
    """
    n_runs, n_tasks = x.shape
    tasks = np.arange(n_tasks)
    out = np.empty(reps)
    for start in range(0, reps, _CHUNK):
        m = min(_CHUNK, reps - start)
        idx = rng.choice(n_runs, size=(m, n_runs, n_tasks))
        resampled = x[idx, tasks]
        for r in range(m):
            out[start + r] = _iqm(resampled[r])
    return out


def _poi_replicates(x: np.ndarray, y: np.ndarray, reps: int, rng: np.random.RandomState) -> np.ndarray:
    """``reps`` stratified independent bootstrap replicates of P(X > Y).

    Draws as rliable's ``StratifiedIndependentBootstrap`` does: per replicate, an ``x.shape``
    array of run indices for X, then a ``y.shape`` array for Y. A replicate's value is P(X > Y)
    of the resampled arrays, computed without re-ranking: with ``S[m, i, j]`` the comparison of run ``i`` of X with run ``j`` of Y
    on task ``m`` (1, 1/2 or 0) and ``cx[m, i]``, ``cy[m, j]`` how often the replicate drew
    those runs, task ``m``'s U statistic is ``cx[m] @ S[m] @ cy[m]``. Every term is a multiple
    of 1/2, so the sums are exact.
    """
    n_x, n_tasks = x.shape
    n_y = y.shape[0]
    wins = _win_table(x, y)
    out = np.empty(reps)
    for start in range(0, reps, _CHUNK):
        m = min(_CHUNK, reps - start)
        idx_x = np.empty((m, n_x, n_tasks), dtype=np.int64)
        idx_y = np.empty((m, n_y, n_tasks), dtype=np.int64)
        for r in range(m):
            idx_x[r] = rng.choice(n_x, size=(n_x, n_tasks))
            idx_y[r] = rng.choice(n_y, size=(n_y, n_tasks))
        counts_x = _run_counts(idx_x, n_x)
        counts_y = _run_counts(idx_y, n_y)
        u = np.einsum("rti,tij,rtj->rt", counts_x, wins, counts_y)
        out[start : start + m] = (u / (n_x * n_y)).mean(axis=1)
    return out


def _run_counts(idx: np.ndarray, n_runs: int) -> np.ndarray:
    """``(m, n_draws, n_tasks)`` run indices -> ``(m, n_tasks, n_runs)``: how often each run was drawn."""
    m, _, n_tasks = idx.shape
    cell = np.arange(m)[:, None, None] * n_tasks + np.arange(n_tasks)[None, None, :]
    flat = (cell * n_runs + idx).ravel()
    counts = np.bincount(flat, minlength=m * n_tasks * n_runs)
    return counts.reshape(m, n_tasks, n_runs).astype(np.float64)


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile bootstrap interval, as ``arch``'s ``conf_int(method="percentile")`` takes it."""
    alpha = (1.0 - confidence) / 2
    low, high = np.percentile(replicates, [100 * alpha, 100 * (1.0 - alpha)])
    return float(low), float(high)


# ---------------------------------------------------------------------------------------------
# input checks


def _check_options(confidence: float, reps: int, seed: int) -> None:
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, numbers.Real)
        or not math.isfinite(confidence)
        or not 0.0 < confidence < 1.0
    ):
        raise ValueError(f"confidence must be a number strictly between 0 and 1, got {confidence!r}")
    if isinstance(reps, bool) or not isinstance(reps, numbers.Integral) or reps < 1:
        raise ValueError(f"reps (the number of bootstrap replicates) must be an integer >= 1, got {reps!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= _MAX_SEED:
        raise ValueError(f"seed must be an integer from 0 to 2**32 - 1, got {seed!r}")


def _finite_array(values: object, what: str) -> np.ndarray:
    """``values`` as a float64 array; refuses non-numbers, NaN and infinities."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as e:  # e.g. ragged nested sequences
        raise ValueError(f"{what} must be an array of numbers: {e}") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{what} must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{what} holds {bad} NaN or infinite value(s); every score must be a finite number")
    return arr


def _check_scores(scores: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Checked ``(n_runs, n_tasks)`` float64 arrays, one per model, all with the same tasks."""
    if not isinstance(scores, Mapping):
        raise ValueError(f"scores must be a mapping model name -> (n_runs, n_tasks) array, got {type(scores).__name__}")
    if not scores:
        raise ValueError("scores is empty: give at least one model's (n_runs, n_tasks) array")
    arrays: dict[str, np.ndarray] = {}
    for name, values in scores.items():
        if not isinstance(name, str):
            raise ValueError(f"model names must be strings, got {name!r}")
        x = _finite_array(values, f"scores[{name!r}]")
        if x.ndim != 2:
            raise ValueError(
                f"scores[{name!r}] must be a 2-D (n_runs, n_tasks) array, got shape {x.shape}"
                " (for one task use an (n_runs, 1) array)"
            )
        if x.shape[0] == 0 or x.shape[1] == 0:
            raise ValueError(f"scores[{name!r}] is empty (shape {x.shape}): it needs at least one run and one task")
        arrays[name] = x
    tasks = {name: x.shape[1] for name, x in arrays.items()}
    if len(set(tasks.values())) > 1:
        listing = ", ".join(f"{name}: {n}" for name, n in tasks.items())
        raise ValueError(f"every model must be scored on the same tasks, but the task counts differ ({listing})")
    return arrays


def _iqm(x: np.ndarray) -> float:
    """Interquartile mean of all entries: the mean after dropping the lowest and highest quarter."""
    return float(trim_mean(x, 0.25, axis=None))


def _win_table(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(n_tasks, n_x, n_y)``: 1 where run ``i`` of X beats run ``j`` of Y on a task, 1/2 on a tie, else 0."""
    xt = x.T[:, :, None]
    yt = y.T[:, None, :]
    return (xt > yt).astype(np.float64) + 0.5 * (xt == yt)


def _poi(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y): per task, the share of (run of X, run of Y) pairs X wins, ties 1/2; mean over tasks."""
    return float(_win_table(x, y).mean(axis=(1, 2)).mean())
