"""The dataset file format: one Parquet file per dataset, one row per environment step.

Columns (one row per step, trajectories contiguous and in order):

=================  ================================  ===========================================
column             Arrow type                        meaning
=================  ================================  ===========================================
``traj_id``        int64                             trajectory index, 0..T-1
``step``           int32                             step index within the trajectory, from 0
``observation``    fixed_size_list<float32>[obs]     state before the action
``action``         fixed_size_list<float32>[act]     action actually applied (clipped to bounds)
``next_observation`` fixed_size_list<float32>[obs]   state after the action
``reward``         fixed_size_list<float32>[n_obj]   raw (unweighted) reward vector
``preference``     fixed_size_list<float32>[n_obj]   the trajectory's preference (constant within it)
``terminal``       bool                              the environment terminated the episode here
``timeout``        bool                              the episode was cut by the time limit here
=================  ================================  ===========================================

The file's key-value metadata holds one key, ``morl``, whose value is a JSON object describing
where the file came from (env id, n_obj, quality, entropy, seed, behavior checkpoint hash, package
version, ...). Any Parquet reader can open the file without this package::

    import polars as pl
    df = pl.read_parquet("dataset.parquet")   # vector columns arrive as polars Arrays
    returns = df.group_by("traj_id").agg(pl.col("reward").arr.get(0).sum())  # objective 0
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from morl import __version__

META_KEY = b"morl"
FORMAT_VERSION = 1

_VECTOR_COLUMNS = ("observation", "action", "next_observation", "reward", "preference")
_REQUIRED_COLUMNS = ("traj_id", "step", *_VECTOR_COLUMNS, "terminal", "timeout")


class DataFileError(ValueError):
    """A data file is missing, unreadable or does not follow the expected format."""

    def __init__(self, path: os.PathLike | str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def atomic_write(path: os.PathLike | str, write_fn) -> None:
    """Call ``write_fn(tmp_path)`` and rename the result onto ``path``.

    A killed process leaves at most a hidden temporary file, never a half-written ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write_fn(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def file_sha256(path: os.PathLike | str, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True, eq=False)
class Dataset:
    """A dataset held as contiguous numpy arrays, one row per step.

    Build one with :meth:`from_arrays` (derives the per-trajectory fields) or :func:`load_dataset`.
    """

    observations: np.ndarray  # (N, obs_dim) float32
    actions: np.ndarray  # (N, act_dim) float32
    next_observations: np.ndarray  # (N, obs_dim) float32
    rewards: np.ndarray  # (N, n_obj) float32
    preferences: np.ndarray  # (N, n_obj) float32
    terminals: np.ndarray  # (N,) bool
    timeouts: np.ndarray  # (N,) bool
    traj_ids: np.ndarray  # (N,) int64
    steps: np.ndarray  # (N,) int64
    traj_starts: np.ndarray  # (T,) int64
    traj_lengths: np.ndarray  # (T,) int64
    traj_preferences: np.ndarray  # (T, n_obj) float32
    traj_returns: np.ndarray  # (T, n_obj) float64
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return int(self.observations.shape[0])

    @property
    def n_trajectories(self) -> int:
        return int(self.traj_lengths.shape[0])

    @property
    def obs_dim(self) -> int:
        return int(self.observations.shape[1])

    @property
    def act_dim(self) -> int:
        return int(self.actions.shape[1])

    @property
    def n_obj(self) -> int:
        return int(self.rewards.shape[1])

    @classmethod
    def from_arrays(
        cls,
        observations,
        actions,
        rewards,
        preferences,
        traj_lengths,
        next_observations=None,
        terminals=None,
        timeouts=None,
        meta: dict | None = None,
    ) -> "Dataset":
        """Assemble a dataset from per-step arrays and the length of each trajectory.

        ``preferences`` may be per step ``(N, n_obj)`` or per trajectory ``(T, n_obj)``.
        ``next_observations`` defaults to the following observation within the trajectory
        (the last step of a trajectory repeats its own observation).
        """
        obs = np.ascontiguousarray(observations, dtype=np.float32)
        act = np.ascontiguousarray(actions, dtype=np.float32)
        rew = np.ascontiguousarray(rewards, dtype=np.float32)
        lengths = np.asarray(traj_lengths, dtype=np.int64)
        n = obs.shape[0]
        if lengths.ndim != 1 or np.any(lengths <= 0) or int(lengths.sum()) != n:
            raise ValueError(f"trajectory lengths must be positive and sum to the {n} steps")
        if act.shape[0] != n or rew.shape[0] != n:
            raise ValueError("observations, actions and rewards must have one row per step")
        if rew.ndim != 2:
            raise ValueError("rewards must be a (steps, n_obj) array")
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        traj_ids = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        steps = np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)
        prefs = np.asarray(preferences, dtype=np.float32)
        if prefs.shape == (len(lengths), rew.shape[1]):
            traj_prefs = np.ascontiguousarray(prefs)
            prefs = np.repeat(traj_prefs, lengths, axis=0)
        elif prefs.shape == rew.shape:
            traj_prefs = np.ascontiguousarray(prefs[starts])
            if not np.array_equal(prefs, np.repeat(traj_prefs, lengths, axis=0)):
                raise ValueError("the preference must be constant within each trajectory")
        else:
            raise ValueError(f"preferences have shape {prefs.shape}; expected per step or per trajectory")
        if next_observations is None:
            nxt = np.empty_like(obs)
            nxt[:-1] = obs[1:]
            ends = starts + lengths - 1
            nxt[ends] = obs[ends]
        else:
            nxt = np.ascontiguousarray(next_observations, dtype=np.float32)
        term = np.zeros(n, bool) if terminals is None else np.asarray(terminals, dtype=bool)
        tout = np.zeros(n, bool) if timeouts is None else np.asarray(timeouts, dtype=bool)
        returns = np.add.reduceat(rew.astype(np.float64), starts, axis=0)
        return cls(
            observations=obs,
            actions=act,
            next_observations=nxt,
            rewards=rew,
            preferences=np.ascontiguousarray(prefs),
            terminals=term,
            timeouts=tout,
            traj_ids=traj_ids,
            steps=steps,
            traj_starts=starts,
            traj_lengths=lengths,
            traj_preferences=traj_prefs,
            traj_returns=returns,
            meta=dict(meta or {}),
        )


def fixed_size_list(arr: np.ndarray, dtype: pa.DataType = pa.float32()) -> pa.FixedSizeListArray:
    """A ``(rows, width)`` array as an Arrow fixed-size-list column (one list per row)."""
    arr = np.ascontiguousarray(arr)
    return pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1), dtype), arr.shape[1])


def to_table(ds: Dataset) -> pa.Table:
    meta = {
        "format_version": FORMAT_VERSION,
        "morl_version": __version__,
        "n_obj": ds.n_obj,
        "obs_dim": ds.obs_dim,
        "act_dim": ds.act_dim,
        "n_trajectories": ds.n_trajectories,
        "n_steps": ds.n_steps,
        **ds.meta,
    }
    table = pa.table(
        {
            "traj_id": pa.array(ds.traj_ids, pa.int64()),
            "step": pa.array(ds.steps.astype(np.int32), pa.int32()),
            "observation": fixed_size_list(ds.observations),
            "action": fixed_size_list(ds.actions),
            "next_observation": fixed_size_list(ds.next_observations),
            "reward": fixed_size_list(ds.rewards),
            "preference": fixed_size_list(ds.preferences),
            "terminal": pa.array(ds.terminals, pa.bool_()),
            "timeout": pa.array(ds.timeouts, pa.bool_()),
        }
    )
    return table.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True).encode()})


def write_dataset(path: os.PathLike | str, ds: Dataset) -> None:
    """Write ``ds`` to ``path`` atomically (zstd-compressed Parquet)."""
    table = to_table(ds)
    atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def read_meta(path: os.PathLike | str) -> dict[str, Any]:
    """The ``morl`` key-value metadata of a Parquet file written by this package."""
    path = Path(path)
    if not path.exists():
        raise DataFileError(path, "file does not exist")
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise DataFileError(path, f"not a readable Parquet file ({exc})") from exc
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise DataFileError(path, "Parquet file has no 'morl' metadata; was it written by morl?")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise DataFileError(path, f"'morl' metadata is not valid JSON ({exc})") from exc


def _vector_column(table: pa.Table, name: str, width: int, path) -> np.ndarray:
    col = table.column(name).combine_chunks()
    if not pa.types.is_fixed_size_list(col.type) or col.type.list_size != width:
        raise DataFileError(path, f"column {name!r} has type {col.type}; expected fixed_size_list[{width}]")
    values = col.flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(values, dtype=np.float32).reshape(-1, width)


def load_dataset(path: os.PathLike | str) -> Dataset:
    """Read a dataset file into contiguous arrays, checking it is well formed."""
    meta = read_meta(path)
    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise DataFileError(path, f"could not read Parquet data ({exc})") from exc
    missing = [c for c in _REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise DataFileError(path, f"missing column(s) {', '.join(missing)}")
    if table.num_rows == 0:
        raise DataFileError(path, "dataset has no steps")
    try:
        widths = {
            "observation": int(meta["obs_dim"]),
            "next_observation": int(meta["obs_dim"]),
            "action": int(meta["act_dim"]),
            "reward": int(meta["n_obj"]),
            "preference": int(meta["n_obj"]),
        }
    except KeyError as exc:
        raise DataFileError(path, f"metadata lacks {exc.args[0]!r}") from exc
    arrays = {name: _vector_column(table, name, widths[name], path) for name in _VECTOR_COLUMNS}
    traj_ids = table.column("traj_id").to_numpy().astype(np.int64)
    if np.any(np.diff(traj_ids) < 0) or traj_ids[0] != 0:
        raise DataFileError(path, "rows are not grouped by trajectory in increasing traj_id order")
    _, lengths = np.unique(traj_ids, return_counts=True)
    try:
        ds = Dataset.from_arrays(
            arrays["observation"],
            arrays["action"],
            arrays["reward"],
            arrays["preference"],
            lengths,
            next_observations=arrays["next_observation"],
            terminals=table.column("terminal").to_numpy(zero_copy_only=False),
            timeouts=table.column("timeout").to_numpy(zero_copy_only=False),
            meta=meta,
        )
    except ValueError as exc:
        raise DataFileError(path, str(exc)) from exc
    if not np.array_equal(ds.steps, table.column("step").to_numpy().astype(np.int64)):
        raise DataFileError(path, "step indices are not 0..len-1 within each trajectory")
    for name in ("observations", "actions", "rewards", "preferences"):
        if not np.all(np.isfinite(getattr(ds, name))):
            raise DataFileError(path, f"column {name!r} contains NaN or infinite values")
    return ds
