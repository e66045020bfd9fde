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
``preference``     fixed_size_list<float32>[n_obj]   the trajectory's preference (constant within it,
                                                     entries >= 0 summing to 1)
``terminal``       bool                              the environment terminated the episode here
``timeout``        bool                              the episode was cut by the time limit here
=================  ================================  ===========================================

The file's key-value metadata holds one key, ``morl``, whose value is a JSON object describing
where the file came from (env id, n_obj, quality, entropy, seed, behavior checkpoint hash, package
version, ...). Data pages carry CRC32 page checksums, so :func:`load_dataset` detects damaged
bytes. Any Parquet reader can open the file without this package::

    import polars as pl
    df = pl.read_parquet("dataset.parquet")   # vector columns arrive as polars Arrays
    returns = df.group_by("traj_id").agg(pl.col("reward").arr.get(0).sum())  # objective 0
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from morl import __version__
from morl.envs import START_TOLERANCE, check_physics_version, get_spec, is_d4morl_task, rest_observation
from morl.errors import InputError, OutputError

META_KEY = b"morl"
FORMAT_VERSION = 1
#: How far a preference's entries may sum from 1 (float32 storage of an exact simplex point).
PREFERENCE_SUM_TOLERANCE = 1e-4
_PARQUET_MAGIC = b"PAR1"

_VECTOR_COLUMNS = ("observation", "action", "next_observation", "reward", "preference")
_REQUIRED_COLUMNS = ("traj_id", "step", *_VECTOR_COLUMNS, "terminal", "timeout")


class DataFileError(InputError):
    """A data file is missing, unreadable or does not follow the expected format."""

    def __init__(self, path: os.PathLike | str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


class FileMismatchError(InputError):
    """Two files that must belong together (a checkpoint and its dataset, a dataset and its behavior
    front, ...) disagree on what they are; the message names both files and every difference."""

    def __init__(self, first: os.PathLike | str, second: os.PathLike | str, differences: list[str]):
        super().__init__(f"{first} and {second} do not belong together: {'; '.join(differences)}")
        self.paths = (str(first), str(second))
        self.differences = list(differences)


def short_hash(sha: str | None) -> str:
    """The first 12 hex digits of a SHA-256, as the messages show it."""
    return str(sha)[:12]


def atomic_write(path: os.PathLike | str, write_fn) -> None:
    """Call ``write_fn(tmp_path)`` and rename the result onto ``path``.

    A killed process leaves at most a hidden temporary file, never a half-written ``path``. A write
    that fails (a full disk, no permission) raises :class:`~morl.errors.OutputError` naming ``path``
    and leaves ``path`` as it was. The temporary file is created with mode 0666 less the umask, as ``open(path, "w")`` would create
    ``path``; the rename keeps that mode.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _create_temporary(path)
        write_fn(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
            # a full disk, a permission, a folder in the way: name the file that was not written
            why = exc.strerror or str(exc) or type(exc).__name__
            raise OutputError(path, f"could not be written: {why}; nothing was changed there") from exc
        raise


def _create_temporary(path: Path) -> str:
    """A new, empty hidden file beside ``path`` (``tempfile.mkstemp`` would make it mode 0600)."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"{path.parent}: no free temporary file name for {path.name}")


def file_sha256(path: os.PathLike | str, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def file_identity(path: os.PathLike | str) -> list[int] | None:
    """What says, without reading it, that the file at ``path`` may have other bytes than before:
    its size, modification and status-change times (ns) and inode; None if it does not exist.

    A file replaced by a copy that keeps an older modification time (``cp -p``, ``rsync -a``,
    unpacking an archive) gets a new status-change time, which no tool sets back, and mostly a new
    inode. A ``chmod`` or a hard link changes it too: it tells that the bytes must be checked
    (:func:`file_sha256`), not that they changed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


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
    ) -> Dataset:
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
        starts = trajectory_starts(lengths)
        traj_ids = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        steps = np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)
        prefs = np.asarray(preferences, dtype=np.float32)
        if prefs.shape == (len(lengths), rew.shape[1]):
            traj_prefs = np.ascontiguousarray(prefs)
            prefs = np.repeat(traj_prefs, lengths, axis=0)
        elif prefs.shape == rew.shape:
            traj_prefs = per_trajectory_preferences(prefs, starts, lengths)
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
        returns = trajectory_returns(rew, starts)
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


def trajectory_starts(lengths: np.ndarray) -> np.ndarray:
    """The first row of each trajectory, from the trajectories' lengths (int64)."""
    return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


def per_trajectory_preferences(prefs: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each trajectory's preference from per-step ones (rows grouped by trajectory); a ValueError
    if a preference changes within a trajectory."""
    traj_prefs = np.ascontiguousarray(prefs[starts])
    if not np.array_equal(prefs, np.repeat(traj_prefs, lengths, axis=0)):
        raise ValueError("the preference must be constant within each trajectory")
    return traj_prefs


def trajectory_returns(rewards: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each trajectory's undiscounted return vector, summed in float64."""
    return np.add.reduceat(rewards.astype(np.float64), starts, axis=0)


def fixed_size_list(arr: np.ndarray, dtype: pa.DataType | None = None) -> pa.FixedSizeListArray:
    """A ``(rows, width)`` array as an Arrow fixed-size-list column (one list per row); float32
    unless ``dtype`` says otherwise."""
    arr = np.ascontiguousarray(arr)
    dtype = pa.float32() if dtype is None else dtype
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
    # Page checksums (CRC32) let load_dataset detect bytes damaged inside the data pages.
    atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd", write_page_checksum=True))


def read_meta(path: os.PathLike | str) -> dict[str, Any]:
    """The ``morl`` key-value metadata of a Parquet file written by this package."""
    path = Path(path)
    if not path.exists():
        raise DataFileError(path, "file does not exist")
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise DataFileError(path, f"not a readable Parquet file: {_why_unreadable(path)} ({exc})") from exc
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise DataFileError(path, "Parquet file has no 'morl' metadata; was it written by morl?")
    try:
        meta = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataFileError(path, f"'morl' metadata is not valid JSON ({exc})") from exc
    if not isinstance(meta, dict):
        raise DataFileError(path, f"'morl' metadata is a JSON {type(meta).__name__}, not an object")
    return meta


def _why_unreadable(path: Path) -> str:
    """A plain-words guess at why pyarrow cannot open ``path`` (from its magic bytes)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(max(0, size - 4))
        tail = f.read(4)
    if head != _PARQUET_MAGIC:
        return f"not a Parquet file (it does not start with {_PARQUET_MAGIC!r}; {size} bytes)"
    if tail != _PARQUET_MAGIC or size < 12:
        return f"the file is truncated: it starts like Parquet but its footer is missing ({size} bytes)"
    return "the Parquet footer is corrupt"


def _is_vector(width: int):
    def ok(t):
        return pa.types.is_fixed_size_list(t) and t.list_size == width and pa.types.is_floating(t.value_type)

    return ok


# column -> (what the type must be, check of the Arrow type); vector widths come from the metadata
_SCALAR_TYPES = {
    "traj_id": ("an integer type", pa.types.is_integer, np.int64),
    "step": ("an integer type", pa.types.is_integer, np.int64),
    "terminal": ("bool", pa.types.is_boolean, np.bool_),
    "timeout": ("bool", pa.types.is_boolean, np.bool_),
}


#: Rows decoded at a time by load_dataset (bounds Arrow's share of the peak memory).
_READ_BATCH_ROWS = 65536


def _read_columns(pf: pq.ParquetFile, out: dict[str, np.ndarray], path) -> None:
    """Copy the columns named by ``out`` into its preallocated arrays, a batch of rows at a time.

    Arrow holds only one batch (``_READ_BATCH_ROWS`` rows) at any moment, so loading needs little
    more memory than the final arrays (``benchmarks/data_format.py`` measures it; reading the
    whole table first and converting it needed 2-3x). Vector columns land in ``(rows, width)``
    arrays, scalar columns in ``(rows,)`` arrays.
    """
    names = list(out)
    n_rows = pf.metadata.num_rows
    nulls = dict.fromkeys(names, 0)
    inner_nulls = dict.fromkeys(names, 0)
    batches = pf.iter_batches(batch_size=_READ_BATCH_ROWS, columns=names)
    start = 0
    while True:
        try:
            batch = next(batches, None)
        except Exception as exc:  # pyarrow raises several types for damaged pages
            raise DataFileError(path, f"could not read Parquet data; the file is corrupt ({exc})") from exc
        if batch is None:
            break
        n = batch.num_rows
        if start + n > n_rows:
            raise DataFileError(
                path,
                f"could not read Parquet data; the file is corrupt (it has more than "
                f"the {n_rows} rows its footer says)",
            )
        for name in names:
            col, dest = batch.column(name), out[name]
            if col.null_count:
                nulls[name] += col.null_count
            elif dest.ndim == 1:
                dest[start : start + n] = col.to_numpy(zero_copy_only=False)
            else:
                values = col.flatten()
                if values.null_count:
                    inner_nulls[name] += values.null_count
                    continue
                block = dest[start : start + n]
                block[...] = values.to_numpy(zero_copy_only=False).reshape(block.shape)
                if not np.isfinite(block).all():
                    raise DataFileError(path, f"column {name!r} contains NaN or infinite values")
        start += n
        del batch
    for name in names:
        if nulls[name]:
            raise DataFileError(path, f"column {name!r} has {nulls[name]} null value(s)")
        if inner_nulls[name]:
            raise DataFileError(path, f"column {name!r} has {inner_nulls[name]} null value(s) inside its vectors")
    if start != n_rows:  # a damaged page header can make pages look shorter than they are
        raise DataFileError(
            path, f"could not read Parquet data; the file is corrupt (it has {start} rows; its footer says {n_rows})"
        )


def check_env(path: os.PathLike | str, meta: dict[str, Any], expect_env: str | None) -> None:
    """Refuse the dataset file at ``path`` (metadata ``meta``) if it is not for ``expect_env``."""
    if expect_env is not None and meta.get("env_id") != expect_env:
        raise DataFileError(
            path, f"dataset is for env {meta.get('env_id')!r}, but {expect_env!r} was expected (env mismatch)"
        )


@dataclass(frozen=True)
class _OpenFile:
    """A dataset file whose metadata, sizes and column types have been checked, ready to read."""

    path: os.PathLike | str
    meta: dict[str, Any]
    widths: dict[str, int]  # vector column -> width
    parquet: pq.ParquetFile
    n_rows: int

    def empty(self, names) -> dict[str, np.ndarray]:
        """Preallocated arrays for the columns ``names`` (vectors float32 (rows, width))."""
        return {
            name: np.empty((self.n_rows, self.widths[name]), np.float32)
            if name in self.widths
            else np.empty(self.n_rows, _SCALAR_TYPES[name][2])
            for name in names
        }

    def read(self, names) -> dict[str, np.ndarray]:
        """The columns ``names``, checked for nulls and non-finite values."""
        arrays = self.empty(names)
        _read_columns(self.parquet, arrays, self.path)
        return arrays


def _open_dataset(path: os.PathLike | str, expect_env: str | None) -> _OpenFile:
    """Check a dataset file's metadata, sizes, physics version and column types (reading no data)."""
    meta = read_meta(path)
    check_env(path, meta, expect_env)
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
    except (TypeError, ValueError) as exc:
        raise DataFileError(path, f"metadata obs_dim/act_dim/n_obj are not integers ({exc})") from exc
    _check_sizes_fit_env(meta, path)
    try:
        check_physics_version(meta.get("env_id"), meta.get("physics_version"))
    except ValueError as exc:
        raise DataFileError(path, f"dataset {exc}") from None
    try:
        # pre_buffer=False: do not fetch whole row groups ahead (it held the compressed file in memory)
        pf = pq.ParquetFile(path, page_checksum_verification=True, pre_buffer=False, buffer_size=1 << 20)
        schema = pf.schema_arrow
    except Exception as exc:
        raise DataFileError(path, f"could not read Parquet data; the file is corrupt ({exc})") from exc
    missing = [c for c in _REQUIRED_COLUMNS if c not in schema.names]
    if missing:
        raise DataFileError(path, f"missing column(s) {', '.join(missing)}")
    n = pf.metadata.num_rows
    if n == 0:
        raise DataFileError(path, "dataset has no steps")
    for name in _REQUIRED_COLUMNS:  # every type is checked before any data is read
        t = schema.field(name).type
        if name in widths:
            expected, ok = f"fixed_size_list<float>[{widths[name]}]", _is_vector(widths[name])
        else:
            expected, ok, _ = _SCALAR_TYPES[name]
        if not ok(t):
            raise DataFileError(path, f"column {name!r} has type {t}; expected {expected}")
    return _OpenFile(path, meta, widths, pf, n)


def _trajectory_lengths(traj_ids: np.ndarray, path) -> np.ndarray:
    """Each trajectory's number of rows, from the ``traj_id`` column (refused unless grouped in order)."""
    if traj_ids[0] != 0 or np.any(traj_ids[1:] < traj_ids[:-1]):
        raise DataFileError(path, "rows are not grouped by trajectory in increasing traj_id order")
    # trajectory boundaries: where the (sorted) id changes
    bounds = np.concatenate([[0], np.flatnonzero(traj_ids[1:] != traj_ids[:-1]) + 1, [len(traj_ids)]])
    return np.diff(bounds)


def load_dataset(path: os.PathLike | str, expect_env: str | None = None) -> Dataset:
    """Read a dataset file into contiguous arrays, checking it is well formed.

    ``expect_env``: the env id the caller needs (e.g. the workflow's ``{env}``); a file made for
    another environment is refused. Every problem raises :class:`DataFileError` naming the file.

    Columns are decoded a batch of rows at a time straight into preallocated arrays, so the peak
    memory stays close to the size of the result (no second, Arrow-side copy of the whole table).
    """
    opened = _open_dataset(path, expect_env)
    arrays = opened.read(_REQUIRED_COLUMNS)
    traj_ids = arrays.pop("traj_id")
    lengths = _trajectory_lengths(traj_ids, path)
    try:
        ds = Dataset.from_arrays(
            arrays["observation"],
            arrays["action"],
            arrays["reward"],
            arrays["preference"],
            lengths,
            next_observations=arrays["next_observation"],
            terminals=arrays["terminal"],
            timeouts=arrays["timeout"],
            meta=opened.meta,
        )
    except ValueError as exc:
        raise DataFileError(path, str(exc)) from exc
    if not np.array_equal(ds.steps, arrays["step"]):
        raise DataFileError(path, "step indices are not 0..len-1 within each trajectory")
    _check_within_trajectories(ds, traj_ids, path)
    _check_preferences(ds.traj_preferences, path)
    check_starts_at_reset(ds.observations[ds.traj_starts], opened.meta.get("env_id"), path)
    return ds


def _check_within_trajectories(ds: Dataset, traj_ids: np.ndarray, path) -> None:
    """Refuse a trajectory that ends before its last row: a ``terminal`` or ``timeout`` flag set
    before its last step (the value-based families would cut their bootstrap there); and one whose
    steps do not follow one another (:func:`check_next_observations`)."""
    inner = inner_rows(ds)

    def refuse(row: int, problem: str) -> None:
        raise DataFileError(path, f"trajectory {int(traj_ids[row])}, step {int(ds.steps[row])}: {problem}")

    for flags, name in ((ds.terminals, "terminal"), (ds.timeouts, "timeout")):
        early = np.flatnonzero(flags & inner)
        if len(early):
            row = int(early[0])
            last = int(ds.traj_lengths[np.searchsorted(ds.traj_starts, row, side="right") - 1]) - 1
            refuse(row, f"the {name} flag is set before the trajectory's last step ({last})")
    check_next_observations(ds, path, traj_ids)


def inner_rows(ds: Dataset) -> np.ndarray:
    """``(N,)`` bool: the rows that have a following row in their trajectory (all but each last step)."""
    inner = np.ones(ds.n_steps, bool)
    inner[ds.traj_starts + ds.traj_lengths - 1] = False
    return inner


#: Rows compared at a time by check_next_observations (bounds its temporary (rows, obs_dim) array).
_COMPARE_ROWS = 1 << 18


def check_next_observations(ds: Dataset, path, traj_ids: np.ndarray | None = None) -> None:
    """Within every trajectory, each step's ``next_observation`` is the next step's ``observation``,
    exactly (equal float32 values): the collector writes both from the same state, and D4MORL's
    pickles hold both as copies of the same array. A file where they differ has rows from different
    episodes joined, rows reordered, or damaged values; the value-based families would bootstrap
    from states the trajectory never reached. Refused with a :class:`DataFileError` naming the
    trajectory (``traj_ids``: its id per row, default ``ds.traj_ids``) and the step. The last step
    of a trajectory is not compared (its next state begins no row).

    Vectorised a block of rows at a time: about 20 ms per million rows of 17 observations."""
    obs, nxt = ds.observations, ds.next_observations
    differs = np.zeros(ds.n_steps, bool)  # row t differs from row t + 1
    for start in range(0, ds.n_steps - 1, _COMPARE_ROWS):
        stop = min(start + _COMPARE_ROWS, ds.n_steps - 1)
        differs[start:stop] = np.any(nxt[start:stop] != obs[start + 1 : stop + 1], axis=1)
    bad = np.flatnonzero(differs & inner_rows(ds))
    if not bad.size:
        return
    row = int(bad[0])
    entry = int(np.flatnonzero(nxt[row] != obs[row + 1])[0])
    ids = ds.traj_ids if traj_ids is None else traj_ids
    step = int(ds.steps[row])
    raise DataFileError(
        path,
        f"trajectory {int(ids[row])}, step {step}: next_observation differs from the observation of "
        f"step {step + 1} (entry {entry}: {nxt[row, entry]:.9g} against {obs[row + 1, entry]:.9g}; "
        f"{bad.size} step(s) affected); within a trajectory each step must start from the state the "
        "previous one ended in (rows of different episodes joined, reordered, or damaged)",
    )


@dataclass(frozen=True)
class Trajectories:
    """What a dataset file says per trajectory, without its per-step states and actions: the
    metadata, the sizes, and each trajectory's preference and return (as :class:`Dataset` has them)."""

    meta: dict[str, Any]
    obs_dim: int
    act_dim: int
    n_obj: int
    traj_lengths: np.ndarray  # (T,) int64
    traj_preferences: np.ndarray  # (T, n_obj) float32
    traj_returns: np.ndarray  # (T, n_obj) float64


def load_trajectories(path: os.PathLike | str, expect_env: str | None = None) -> Trajectories:
    """Each trajectory's preference and return from a dataset file, reading only the ``traj_id``,
    ``step``, ``reward`` and ``preference`` columns (about a sixth of a MuJoCo dataset's bytes).

    The file passes the checks :func:`load_dataset` makes of those columns and of the metadata and
    column types; the refusals read the same."""
    opened = _open_dataset(path, expect_env)
    arrays = opened.read(("traj_id", "step", "reward", "preference"))
    lengths = _trajectory_lengths(arrays.pop("traj_id"), path)
    starts = trajectory_starts(lengths)
    if not np.array_equal(arrays.pop("step"), np.arange(opened.n_rows) - np.repeat(starts, lengths)):
        raise DataFileError(path, "step indices are not 0..len-1 within each trajectory")
    try:
        traj_prefs = per_trajectory_preferences(arrays.pop("preference"), starts, lengths)
    except ValueError as exc:
        raise DataFileError(path, str(exc)) from exc
    _check_preferences(traj_prefs, path)
    return Trajectories(
        meta=opened.meta,
        obs_dim=opened.widths["observation"],
        act_dim=opened.widths["action"],
        n_obj=opened.widths["reward"],
        traj_lengths=lengths,
        traj_preferences=traj_prefs,
        traj_returns=trajectory_returns(arrays["reward"], starts),
    )


def load_observations(path: os.PathLike | str, expect_env: str | None = None) -> np.ndarray:
    """The ``observation`` column of a dataset file, ``(steps, obs_dim)`` float32, reading no other
    column (the metadata and column types are checked as :func:`load_dataset` checks them)."""
    return _open_dataset(path, expect_env).read(("observation",))["observation"]


def _check_sizes_fit_env(meta: dict, path) -> None:
    """The file's observation, action and objective sizes are those of the env it names (when
    this morl knows the env)."""
    env_id = meta.get("env_id")
    try:
        spec = get_spec(env_id)
    except (ValueError, TypeError):
        return  # an env this morl does not simulate: training and evaluation say so when they need it
    for key, what, want in (
        ("obs_dim", "observations", spec.obs_dim),
        ("act_dim", "actions", spec.act_dim),
        ("n_obj", "objectives", spec.n_obj),
    ):
        have = meta.get(key)
        if have is not None and str(have) != str(want):
            raise DataFileError(
                path,
                f"dataset has {have} {what} per step, but {env_id} has {want} "
                f"(a file of another env, or a damaged one)",
            )


def check_starts_at_reset(first: np.ndarray, env_id: Any, path) -> None:
    """Every trajectory's first observation is a reset state of the D4MORL task the file names.

    The sizes alone cannot tell MO-HalfCheetah-v2 from MO-Walker2d-v2 (17 observations, 6 actions,
    2 objectives each), so a file relabelled from one to the other would train and evaluate
    without complaint; their reset states differ by 1.25 in the first entry, far outside the reset
    noise. (MO-Gymnasium tasks are not checked: this morl does not know their reset.)"""
    if not is_d4morl_task(env_id) or len(first) == 0:
        return
    rest = rest_observation(get_spec(env_id))  # the callers have checked the observation width
    distance = np.abs(first.astype(np.float64) - rest)
    bad = np.flatnonzero(distance.max(axis=1) > START_TOLERANCE)
    if bad.size:
        traj = int(bad[0])
        entry = int(np.argmax(distance[traj]))
        raise DataFileError(
            path,
            f"{bad.size} of {len(first)} trajectories do not start at a reset state of {env_id} "
            f"(trajectory {traj}: observation[{entry}] = {first[traj, entry]:.4g}, every reset of {env_id} "
            f"gives {rest[entry]:.4g} +- {START_TOLERANCE}); the rows were not collected on {env_id} "
            "(a file of another env relabelled, or damaged observations)",
        )


def _check_preferences(prefs: np.ndarray, path) -> None:
    """Each trajectory's preference lies on the simplex: entries >= 0 summing to 1."""
    negative = np.flatnonzero(np.any(prefs < 0, axis=1))
    if negative.size:
        i = int(negative[0])
        raise DataFileError(
            path,
            f"preference of trajectory {i} has a negative entry {prefs[i].tolist()} "
            f"({negative.size} trajectories affected)",
        )
    sums = prefs.astype(np.float64).sum(axis=1)
    off = np.flatnonzero(np.abs(sums - 1.0) > PREFERENCE_SUM_TOLERANCE)
    if off.size:
        i = int(off[0])
        raise DataFileError(
            path,
            f"preferences do not sum to 1: trajectory {i} sums to {sums[i]:.6g} "
            f"(tolerance {PREFERENCE_SUM_TOLERANCE:g}; {off.size} trajectories affected)",
        )
