"""Import of the original D4MORL datasets (pickles) into this project's Parquet format.

An original D4MORL file is a pickled list with one dict per trajectory::

    {"observations":      (T, obs_dim)  state before the action
     "actions":           (T, act_dim)  action taken
     "next_observations": (T, obs_dim)  state after the action
     "raw_rewards":       (T, n_obj)    unweighted reward vector
     "terminals":         (T,)          the environment terminated the episode at this step
     "preference":        (T, n_obj) per step (constant) or one (n_obj,) vector}

:func:`import_d4morl` checks every trajectory against the environment's
:class:`~morl.envs.tasks.EnvSpec`, converts it and writes one Parquet file (see :mod:`morl.data`) that
can stand in for a collected dataset. A trajectory that reaches the episode cap (500 steps)
is marked as a timeout, and as terminated only if its final state ends the episode by the task's
termination rule: D4MORL's collector stored gym's ``done`` as the terminal flag (PEDA's
``data_generation/collect_env_new.py``), which the 500-step ``TimeLimit`` of its registered envs
sets as well, so every full-length original trajectory carries the flag. As in collected data, an
episode that terminates on its 500th step has both flags.
Actions are clipped to the env's bounds (the
format stores the action actually applied) and the number of clipped entries is recorded. Within a
trajectory, ``next_observations[t]`` must equal ``observations[t + 1]`` exactly: D4MORL's collector
appended both from the same array (:func:`morl.data.check_next_observations`).

Pickles can run arbitrary code when loaded, so the file is read by :class:`RestrictedUnpickler`,
which admits only what numpy arrays, numpy scalars, dtypes and plain containers need.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from morl import __version__
from morl.data import (
    PREFERENCE_SUM_TOLERANCE,
    DataFileError,
    Dataset,
    check_next_observations,
    check_starts_at_reset,
    file_sha256,
    write_dataset,
)
from morl.envs import get_spec, physics_version, terminated_observations
from morl.errors import InputError
from morl.preferences import ENTROPY_LEVELS
from morl.progress import Progress, log
from morl.vocabulary import D4MORL_ENTROPIES

REQUIRED_FIELDS = ("observations", "actions", "next_observations", "raw_rewards", "terminals", "preference")
#: D4MORL's names of the preference distributions, mapped to this project's entropy levels.
ENTROPY_ALIASES = D4MORL_ENTROPIES


# --------------------------------------------------------------------------- restricted unpickling
def _latin1_encode(text, encoding="latin1", errors="strict"):
    """``_codecs.encode`` as protocol-0..2 pickles use it (bytes stored as latin-1 text), and nothing else."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1") or errors != "strict":
        raise pickle.UnpicklingError("_codecs.encode is admitted only for latin-1 encoded bytes")
    return text.encode("latin1")


def _allowed_globals() -> dict[tuple[str, str], Any]:
    try:  # numpy >= 2 (and the forward-compatibility aliases of numpy 1.26)
        from numpy._core import multiarray, numeric
    except ImportError:  # pragma: no cover - older numpy
        from numpy.core import multiarray, numeric
    allowed: dict[tuple[str, str], Any] = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype}
    # Pickles written by numpy 1.x name numpy.core, those written by numpy 2 numpy._core.
    for core in ("numpy.core", "numpy._core"):
        allowed[(f"{core}.multiarray", "_reconstruct")] = multiarray._reconstruct
        allowed[(f"{core}.multiarray", "scalar")] = multiarray.scalar
        allowed[(f"{core}.numeric", "_frombuffer")] = numeric._frombuffer  # protocol 5 arrays
    # Containers without their own opcode in older protocols ("__builtin__": Python 2 / protocol < 3).
    for module in ("builtins", "__builtin__"):
        for cls in (set, frozenset, bytearray, complex):
            allowed[(module, cls.__name__)] = cls
    allowed[("_codecs", "encode")] = _latin1_encode  # bytes in protocol 0..2 pickles
    return allowed


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds only numpy arrays/scalars/dtypes and plain containers.

    Any other global the pickle names (a function to call, a class to instantiate) is refused
    with a :class:`~morl.data.DataFileError` naming the file and the global, before it is imported.
    """

    def __init__(self, file, path: os.PathLike | str):
        super().__init__(file)
        self.path = str(path)
        self._allowed = _allowed_globals()

    def find_class(self, module: str, name: str):
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise DataFileError(
                self.path,
                f"refused to load the global {module}.{name}: only numpy arrays, numpy scalars, "
                "dtypes and plain containers (dict, list, tuple, set, numbers, strings) are allowed "
                "in a D4MORL pickle; this file may try to run code",
            ) from None

    def persistent_load(self, pid):
        raise DataFileError(self.path, "refused a persistent id: not allowed in a D4MORL pickle")


def load_restricted_pickle(path: os.PathLike | str) -> Any:
    """Unpickle ``path`` through :class:`RestrictedUnpickler`; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise DataFileError(path, "file does not exist")
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f, path).load()
    except DataFileError:
        raise
    except Exception as exc:  # truncated or corrupt pickles raise many types
        raise DataFileError(path, f"not a readable pickle ({type(exc).__name__}: {exc})") from exc


# --------------------------------------------------------------------------- checking one trajectory
def _bad(path, index: int, name: str, problem: str) -> DataFileError:
    return DataFileError(path, f"trajectory {index}, field {name!r}: {problem}")


def _numeric(traj: dict, name: str, path, index: int, kinds: str = "iuf") -> np.ndarray:
    try:
        arr = np.asarray(traj[name])
    except KeyError:
        has = sorted(map(str, traj))
        raise DataFileError(path, f"trajectory {index} has no field {name!r} (it has {has})") from None
    except ValueError as exc:  # ragged nested lists
        raise _bad(path, index, name, f"not an array ({exc})") from exc
    if arr.dtype.kind not in kinds:
        raise _bad(path, index, name, f"has dtype {arr.dtype}; expected numbers")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise _bad(path, index, name, "contains NaN or infinite values")
    # The dataset stores float32: a value beyond its range would be written as infinity.
    if arr.size and np.max(np.abs(arr)) > np.finfo(np.float32).max:
        raise _bad(
            path,
            index,
            name,
            f"holds {np.max(np.abs(arr)):.3g} in magnitude, beyond float32's range "
            f"({np.finfo(np.float32).max:.3g}), which the dataset stores",
        )
    return arr


def _expect_shape(arr: np.ndarray, shape: tuple[int, ...], path, index: int, name: str, meaning: str) -> None:
    if arr.shape != shape:
        raise _bad(path, index, name, f"has shape {arr.shape}; expected {shape} ({meaning})")


def _check_trajectory(traj: Any, index: int, path, spec) -> tuple[int, np.ndarray, bool]:
    """Validate one trajectory; return its length, its preference (n_obj,) and its terminal flag."""
    if not isinstance(traj, dict):
        raise DataFileError(path, f"trajectory {index} is a {type(traj).__name__}; expected a dict")
    obs = _numeric(traj, "observations", path, index)
    if obs.ndim != 2 or obs.shape[0] == 0 or obs.shape[1] != spec.obs_dim:
        raise _bad(
            path, index, "observations", f"has shape {obs.shape}; expected (T >= 1, {spec.obs_dim}) for {spec.id}"
        )
    T = obs.shape[0]
    if T > spec.max_episode_steps:
        raise _bad(
            path, index, "observations", f"has {T} steps; {spec.id} episodes last at most {spec.max_episode_steps}"
        )
    steps = f"T={T} steps"
    for name, dim_name, dim in (
        ("next_observations", "obs_dim", spec.obs_dim),
        ("actions", "act_dim", spec.act_dim),
        ("raw_rewards", "n_obj", spec.n_obj),
    ):
        arr = _numeric(traj, name, path, index)
        _expect_shape(arr, (T, dim), path, index, name, f"{steps}, {dim_name}={dim}")
    term = _numeric(traj, "terminals", path, index, kinds="biuf")
    if term.shape == (T, 1):
        term = term[:, 0]
    _expect_shape(term, (T,), path, index, "terminals", f"one flag per step, {steps}")
    if not np.all((term == 0) | (term == 1)):
        raise _bad(path, index, "terminals", "holds values other than 0/1")
    early = np.flatnonzero(term[:-1])
    if early.size:
        raise _bad(path, index, "terminals", f"set at step {int(early[0])}, before the last step {T - 1}")
    pref = _numeric(traj, "preference", path, index)
    if pref.shape in ((spec.n_obj,), (1, spec.n_obj)):
        pref = pref.reshape(spec.n_obj)
    elif pref.shape == (T, spec.n_obj):
        if not np.allclose(pref, pref[0], rtol=0.0, atol=1e-6):
            raise _bad(path, index, "preference", "changes within the trajectory; D4MORL has one per trajectory")
        pref = pref[0]
    else:
        raise _bad(
            path,
            index,
            "preference",
            f"has shape {pref.shape}; expected ({T}, {spec.n_obj}) per step or ({spec.n_obj},) per trajectory",
        )
    pref = pref.astype(np.float64)
    if np.any(pref < 0):
        raise _bad(path, index, "preference", f"has a negative entry {pref.tolist()}")
    if abs(pref.sum() - 1.0) > PREFERENCE_SUM_TOLERANCE:
        raise _bad(
            path, index, "preference", f"sums to {pref.sum():.6g}, not 1 (tolerance {PREFERENCE_SUM_TOLERANCE:g})"
        )
    return T, pref, bool(term[-1])


# --------------------------------------------------------------------------- the import
def _check_names(env_id: str, quality: str, entropy: str):
    from morl.collect import QUALITIES  # here: morl.collect imports torch, which importing a pickle never needs

    spec = get_spec(env_id)
    if quality not in QUALITIES:
        raise InputError(f"unknown quality {quality!r}; expected one of {QUALITIES}")
    entropy = ENTROPY_ALIASES.get(entropy, entropy)
    if entropy not in ENTROPY_LEVELS:
        names = (*ENTROPY_LEVELS, *ENTROPY_ALIASES)
        raise InputError(f"unknown entropy {entropy!r}; expected one of {names}")
    return spec, entropy


def import_d4morl(
    pkl_path: os.PathLike | str,
    env_id: str,
    quality: str,
    entropy: str,
    out_path: os.PathLike | str,
    progress: bool = True,
) -> dict[str, Any]:
    """Convert an original D4MORL pickle into a Parquet dataset written atomically to ``out_path``.

    ``entropy`` is ``high``/``medium``/``low`` or D4MORL's ``uniform``/``wide``/``narrow``.
    Every trajectory is checked against ``env_id``'s spec; a problem raises
    :class:`~morl.data.DataFileError` naming the file, the trajectory index and the field, and
    nothing is written. Returns a summary of the imported dataset.
    """
    spec, entropy = _check_names(env_id, quality, entropy)
    pkl_path = Path(pkl_path)
    trajs = load_restricted_pickle(pkl_path)
    if not isinstance(trajs, (list, tuple)):
        raise DataFileError(pkl_path, f"holds a {type(trajs).__name__}; expected a list of trajectory dicts")
    if not trajs:
        raise DataFileError(pkl_path, "holds no trajectories")
    trajs = list(trajs)

    # Pass 1: check everything and size the arrays; pass 2 copies into them, freeing each
    # trajectory's original arrays as it goes so peak memory stays near one copy of the data.
    n_traj = len(trajs)
    lengths = np.empty(n_traj, np.int64)
    prefs = np.empty((n_traj, spec.n_obj), np.float64)
    terminal_end = np.empty(n_traj, bool)
    for i, traj in enumerate(trajs):
        lengths[i], prefs[i], terminal_end[i] = _check_trajectory(traj, i, pkl_path, spec)

    n = int(lengths.sum())
    obs = np.empty((n, spec.obs_dim), np.float32)
    nxt = np.empty((n, spec.obs_dim), np.float32)
    act = np.empty((n, spec.act_dim), np.float32)
    rew = np.empty((n, spec.n_obj), np.float32)
    ends = np.cumsum(lengths)
    bar = Progress(n_traj, f"import {pkl_path.name}", unit="traj", enabled=progress)
    for i in range(n_traj):
        a, b = int(ends[i] - lengths[i]), int(ends[i])
        traj = trajs[i]
        obs[a:b] = traj["observations"]
        nxt[a:b] = traj["next_observations"]
        act[a:b] = traj["actions"]
        rew[a:b] = traj["raw_rewards"]
        trajs[i] = None
        bar.update(1)
    bar.close()
    del trajs

    low = np.asarray(spec.act_low, np.float32)
    high = np.asarray(spec.act_high, np.float32)
    n_clipped = int(np.count_nonzero((act < low) | (act > high)))
    np.clip(act, low, high, out=act)

    terminals = np.zeros(n, bool)
    timeouts = np.zeros(n, bool)
    last = ends - 1
    # a flag at the cap is gym's TimeLimit unless the final state breaks the termination rule
    at_cap = lengths == spec.max_episode_steps
    flagged = np.flatnonzero(terminal_end & at_cap)
    if flagged.size:
        terminal_end[flagged] = terminated_observations(spec, nxt[last[flagged]])
    terminals[last[terminal_end]] = True
    is_timeout = at_cap  # as in collected data, an episode that terminates on its 500th step has both
    timeouts[last[is_timeout]] = True

    meta = {
        "env_id": spec.id,
        # the original data was made with the original model files, which our ids now simulate
        "physics_version": physics_version(spec.id),
        "quality": quality,
        "entropy": entropy,
        "origin": "d4morl",
        "source_file": pkl_path.name,
        "source_sha256": file_sha256(pkl_path),
        "max_episode_steps": spec.max_episode_steps,
        "actions_clipped": n_clipped,
        "morl_version": __version__,
    }
    ds = Dataset.from_arrays(
        obs,
        act,
        rew,
        prefs.astype(np.float32),
        lengths,
        next_observations=nxt,
        terminals=terminals,
        timeouts=timeouts,
        meta=meta,
    )
    check_starts_at_reset(obs[ds.traj_starts], spec.id, pkl_path)
    # D4MORL's collector stored observations[t + 1] and next_observations[t] as copies of the
    # same array, so they agree exactly, also once both are rounded to float32
    check_next_observations(ds, pkl_path)
    write_dataset(out_path, ds)
    summary = {
        "env_id": spec.id,
        "quality": quality,
        "entropy": entropy,
        "trajectories": ds.n_trajectories,
        "steps": ds.n_steps,
        "mean_length": float(lengths.mean()),
        "terminated": int(terminal_end.sum()),
        "timeouts": int(is_timeout.sum()),
        "actions_clipped": n_clipped,
        "mean_return": ds.traj_returns.mean(0).round(1).tolist(),
        "source_sha256": meta["source_sha256"],
        "output": str(out_path),
    }
    log.info("imported %s", summary)
    return summary
