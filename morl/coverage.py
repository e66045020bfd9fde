"""Coverage variants of a dataset: preference bands cut out of the data and held out at evaluation.

The idea comes from MODULI (Yuan, Zheng, Dong and Hao, "MODULI: Unlocking Preference Generalization
via Diffusion Models for Offline Multi-Objective Reinforcement Learning", arXiv 2408.15501, 2024;
ICML 2025): remove whole preference regions from a D4MORL dataset and score agents on preferences
their data never covered. The paper's ``Complete`` / ``Shattered`` / ``Narrow`` datasets are the
model for the three coverages below; the exact band positions and widths are this package's
definitions (the settings below), not a copy of the paper's processing code.

**Where the bands lie.** Bands are intervals of ``w_1 = w[0]``, the weight of the first objective,
for any number of objectives (for three objectives a band is a slab of the simplex between two
values of ``w_1``). Their ends are quantiles of the source dataset's per-trajectory ``w_1`` values
(``numpy.quantile``, linear interpolation), then recorded in preference space, so an evaluation
grid can be tagged without the data.

**Closed bands.** Every removed band is a closed interval ``[lo, hi]`` of ``w_1``: a trajectory is
removed, and an evaluation preference is held out, when ``lo <= w_1 <= hi`` for some band. One rule
for every band, so :func:`held_out` needs nothing but the recorded numbers.

- ``complete``: the dataset unchanged; no bands.
- ``shattered``: ``k`` bands (default three) centred at the quantiles ``centers`` (default 0.2, 0.5,
  0.8) of the trajectories' ``w_1``, together holding ``fraction`` of the trajectories (default
  0.3): band ``i`` runs from the quantile ``centers[i] - fraction / (2 k)`` to the quantile
  ``centers[i] + fraction / (2 k)``, so each holds ``fraction / k`` of them (0.1 by default).
  Every trajectory whose ``w_1`` lies in a band is removed. Ties in ``w_1`` can make a band hold more.
- ``narrow``: keep only the trajectories whose ``w_1`` lies strictly between the quantiles
  ``keep[0]`` and ``keep[1]`` (default 0.15 and 0.85); the removed bands are ``[0, q(keep[0])]`` and
  ``[q(keep[1]), 1]``. They reach the simplex edge (``w_1 = 0`` and ``w_1 = 1``), so evaluation
  preferences beyond the data's own ``w_1`` range are held out as well. ``keep[0] = 0`` (or
  ``keep[1] = 1``) drops that band: nothing is removed at that end.

Trajectories are kept or dropped whole, never cut. Everything that can be known before the data
exists (a band that removes every trajectory or none, or lies outside the simplex) is refused by
:func:`check_settings`, naming the key; what depends on the data (all ``w_1`` equal, bands that fall
between the data's values) is refused by :func:`derive`, naming the source and the coverage.

**Metadata.** A derived dataset carries the source file's metadata (env id, quality, behavior hash,
...) and, under the key ``coverage``, the record::

    {"coverage": "shattered", "objective": 0,
     "bands": [[lo, hi], ...],                       # removed w_1 intervals, closed at both ends
     "held_out_when": "lo <= w[objective] <= hi for some [lo, hi] in bands",
     "settings": {"centers": [...], "fraction": 0.3},  # this coverage's settings ({} for complete)
     "source_trajectories": T, "kept_trajectories": K, "removed_trajectories": T - K,
     "source_steps": N, "kept_steps": M}

A file written by :func:`derive_file` also has ``coverage_source`` (the source file's path) and
``coverage_source_sha256`` (its SHA-256) at the top level of its metadata; :func:`check_derived_from`
compares the hash with a source file. A ``complete`` file is a full copy of the source with its
record, so that every coverage is a file of the same kind.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from morl.data import (
    DataFileError,
    Dataset,
    FileMismatchError,
    file_sha256,
    load_dataset,
    read_meta,
    short_hash,
    write_dataset,
)
from morl.errors import InputError

COVERAGES = ("complete", "shattered", "narrow")
DEFAULTS = {"shattered": {"centers": [0.2, 0.5, 0.8], "fraction": 0.3}, "narrow": {"keep": [0.15, 0.85]}}
#: The key of the gradient steps of the front model behind MODULI's return deviation
#: (:mod:`morl.front_model`), fitted once per complete dataset that has variants; MODULI's 100,000.
FRONT_MODEL_STEPS = "front_model_steps"
DEFAULT_FRONT_MODEL_STEPS = 100_000

#: The preference coordinate the bands are defined on (the weight of the first objective).
OBJECTIVE = 0
#: Metadata key of the coverage record.
META_KEY = "coverage"
HELD_OUT_RULE = "lo <= w[objective] <= hi for some [lo, hi] in bands"
#: Metadata keys that write_dataset computes for the file it writes; a source's values are stale.
_WRITER_KEYS = ("format_version", "morl_version", "n_obj", "obs_dim", "act_dim", "n_trajectories", "n_steps")
#: Slack for float arithmetic on quantile levels (e.g. 0.05 - 0.05 computed as -1e-17).
_EPS = 1e-12


# ---------------------------------------------------------------------------------------- settings
def _number(value, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{key}: {value!r} is not a number")
    value = float(value)
    if not math.isfinite(value):
        raise InputError(f"{key}: {value!r} is not a finite number")
    return value


def _mapping(value, key: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{key}: must be a mapping of keys to values, got {type(value).__name__}")
    return value


def _no_unknown_keys(given: dict, known, key: str) -> None:
    unknown = sorted(str(k) for k in given if k not in known)
    if unknown:
        raise InputError(f"{key}.{unknown[0]}: unknown key; known: {', '.join(known)}")


def _check_shattered(given: dict, where: str) -> dict:
    key = f"{where}.shattered"
    _no_unknown_keys(given, tuple(DEFAULTS["shattered"]), key)
    fraction = _number(given.get("fraction", DEFAULTS["shattered"]["fraction"]), f"{key}.fraction")
    if not 0.0 < fraction < 1.0:
        raise InputError(f"{key}.fraction: {fraction:g} is outside (0, 1); it is the share of trajectories removed")
    raw = given.get("centers", DEFAULTS["shattered"]["centers"])
    if not isinstance(raw, list | tuple) or not raw:
        raise InputError(f"{key}.centers: must be a non-empty list of quantiles in [0, 1], got {raw!r}")
    centers = [_number(c, f"{key}.centers[{i}]") for i, c in enumerate(raw)]
    for i, c in enumerate(centers):
        if not 0.0 <= c <= 1.0:
            raise InputError(f"{key}.centers[{i}]: {c:g} is outside [0, 1]; a centre is a quantile of w_1")
        if i and c <= centers[i - 1]:
            raise InputError(f"{key}.centers[{i}]: {c:g} does not increase on centers[{i - 1}] ({centers[i - 1]:g})")
    half = fraction / (2 * len(centers))
    width = f"with fraction {fraction:g} and {len(centers)} band(s), each band is {2 * half:g} wide in quantiles"
    for i, c in enumerate(centers):
        if c - half < -_EPS or c + half > 1.0 + _EPS:
            raise InputError(f"{key}.centers[{i}]: its band [{c - half:g}, {c + half:g}] leaves [0, 1] ({width})")
        if i and (c - half) - (centers[i - 1] + half) <= _EPS:
            raise InputError(
                f"{key}.centers[{i}]: its band [{c - half:g}, {c + half:g}] overlaps or touches the band of "
                f"centers[{i - 1}] [{centers[i - 1] - half:g}, {centers[i - 1] + half:g}] ({width}; centres must "
                f"be more than {2 * half:g} apart)"
            )
    return {"centers": centers, "fraction": fraction}


def _check_narrow(given: dict, where: str) -> dict:
    key = f"{where}.narrow"
    _no_unknown_keys(given, tuple(DEFAULTS["narrow"]), key)
    raw = given.get("keep", DEFAULTS["narrow"]["keep"])
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        raise InputError(f"{key}.keep: must be a list of two quantiles [low, high], got {raw!r}")
    keep = [_number(q, f"{key}.keep[{i}]") for i, q in enumerate(raw)]
    for i, q in enumerate(keep):
        if not 0.0 <= q <= 1.0:
            raise InputError(f"{key}.keep[{i}]: {q:g} is outside [0, 1]; it is a quantile of w_1")
    low, high = keep
    if low >= high:
        what = "is empty" if low == high else "is reversed"
        raise InputError(f"{key}.keep: [{low:g}, {high:g}] {what}; it would remove every trajectory")
    if low == 0.0 and high == 1.0:
        raise InputError(f"{key}.keep: [0, 1] keeps every trajectory; narrow must remove at least one end")
    return {"keep": keep}


def _check_front_model_steps(value, where: str) -> int:
    key = f"{where}.{FRONT_MODEL_STEPS}"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{key}: {value!r} is not a whole number of gradient steps of at least 1")
    return value


def front_model_steps(settings: dict | None, where: str = "coverage") -> int:
    """The gradient steps of the front model (``front_model_steps`` of the config's coverage section,
    ``settings``; default MODULI's 100,000). Kept apart from :func:`check_settings`, so that the
    step count does not enter the settings a variant is derived with."""
    given = _mapping(settings, where)
    return _check_front_model_steps(given.get(FRONT_MODEL_STEPS, DEFAULT_FRONT_MODEL_STEPS), where)


def check_settings(settings: dict | None, where: str = "coverage") -> dict:
    """The coverage settings with defaults filled: ``{"shattered": {...}, "narrow": {...}}``.

    ``settings`` is the config's coverage section (``None`` or a missing entry: the defaults);
    ``where`` is its key, the prefix of every key an :class:`InputError` names (e.g.
    ``coverage.shattered.centers[1]``). The result holds plain floats and lists (JSON-able).
    ``front_model_steps`` is checked but not returned (:func:`front_model_steps` reads it).
    """
    given = _mapping(settings, where)
    _no_unknown_keys(given, (*DEFAULTS, FRONT_MODEL_STEPS), where)
    front_model_steps(given, where)  # checked here too, so a config's mistake shows up with the others
    return {
        "shattered": _check_shattered(_mapping(given.get("shattered"), f"{where}.shattered"), where),
        "narrow": _check_narrow(_mapping(given.get("narrow"), f"{where}.narrow"), where),
    }


def _check_coverage(coverage) -> str:
    if coverage not in COVERAGES:
        raise InputError(f"coverage: unknown coverage {coverage!r}; known: {', '.join(COVERAGES)}")
    return coverage


# ------------------------------------------------------------------------------------------- bands
def bands_for(traj_w1: np.ndarray, coverage: str, settings: dict | None) -> list[tuple[float, float]]:
    """The removed intervals of ``w_1`` (closed at both ends) for the trajectories' ``w_1`` values.

    ``settings``: as for :func:`check_settings` (checked again here). ``complete`` has no bands.
    """
    coverage = _check_coverage(coverage)
    settings = check_settings(settings)
    if coverage == "complete":
        return []
    w1 = np.asarray(traj_w1, dtype=np.float64)
    if w1.ndim != 1 or w1.size == 0:
        raise ValueError(f"traj_w1 must be a non-empty 1-D array of w_1 values, got shape {w1.shape}")
    if coverage == "shattered":
        centers, fraction = settings["shattered"]["centers"], settings["shattered"]["fraction"]
        half = fraction / (2 * len(centers))
        levels = np.clip([[c - half, c + half] for c in centers], 0.0, 1.0)
        ends = np.quantile(w1, levels.reshape(-1)).reshape(-1, 2)
        return [(float(lo), float(hi)) for lo, hi in ends]
    low, high = settings["narrow"]["keep"]
    q_low, q_high = (float(q) for q in np.quantile(w1, [low, high]))
    bands = []
    if low > 0.0:
        bands.append((0.0, q_low))
    if high < 1.0:
        bands.append((q_high, 1.0))
    return bands


def held_out(preferences: np.ndarray, bands) -> np.ndarray:
    """True for each preference (row of a ``(P, n_obj)`` array) whose ``w_1`` lies in a removed band.

    ``bands``: ``[(lo, hi), ...]`` from :func:`bands_for` or a coverage record's ``bands``.
    """
    prefs = np.asarray(preferences)
    if prefs.ndim != 2 or prefs.shape[1] < 2:
        raise ValueError(f"preferences must be a (P, n_obj) array with n_obj >= 2, got shape {prefs.shape}")
    w1 = prefs[:, OBJECTIVE].astype(np.float64)
    out = np.zeros(len(w1), dtype=bool)
    for lo, hi in bands:
        out |= (w1 >= float(lo)) & (w1 <= float(hi))
    return out


# ----------------------------------------------------------------------------------------- derive
def coverage_record(meta: dict, path: os.PathLike | str | None = None) -> dict | None:
    """The coverage record of a dataset's metadata, or ``None`` for a dataset that is no variant.

    A record that is not well formed raises :class:`~morl.data.DataFileError` naming ``path``.
    """
    record = meta.get(META_KEY)
    if record is None:
        return None
    where = "dataset metadata" if path is None else path
    if not isinstance(record, dict) or record.get("coverage") not in COVERAGES:
        raise DataFileError(where, f"'{META_KEY}' metadata is not a coverage record: {record!r}")
    bands = record.get("bands")
    if not isinstance(bands, list) or not all(
        isinstance(b, list | tuple) and len(b) == 2 and all(isinstance(x, int | float) for x in b) for b in bands
    ):
        raise DataFileError(where, f"coverage record has malformed bands {bands!r}; expected a list of [lo, hi]")
    return record


def derive(ds: Dataset, coverage: str, settings: dict | None, source: str | None = None) -> Dataset:
    """The coverage variant of ``ds``: its trajectories outside the removed bands, whole and in order.

    The result's ``meta`` is the source's (less the counts and widths the writer recomputes) plus the
    coverage record under ``coverage``. ``source`` names the dataset in error messages (its path).
    ``complete`` returns the same arrays (not copied) with the record.
    """
    coverage = _check_coverage(coverage)
    settings = check_settings(settings)
    name = source if source is not None else "the dataset"
    previous = coverage_record(ds.meta, source)
    if previous is not None:
        raise InputError(
            f"{name}: is already a {previous['coverage']!r} coverage variant; derive the "
            f"{coverage!r} variant from the source dataset instead"
        )
    w1 = ds.traj_preferences[:, OBJECTIVE].astype(np.float64)
    bands = bands_for(w1, coverage, settings)
    removed = held_out(ds.traj_preferences, bands)
    n_removed, n_total = int(removed.sum()), ds.n_trajectories
    span = f"w_1 from {w1.min():.6g} to {w1.max():.6g}"
    if coverage != "complete" and n_removed == 0:
        raise InputError(
            f"{name}: coverage {coverage!r} removes no trajectory: its bands "
            f"{_show(bands)} hold none of the {n_total} trajectories ({span})"
        )
    if n_removed == n_total:
        raise InputError(
            f"{name}: coverage {coverage!r} removes every one of the {n_total} trajectories: "
            f"its bands {_show(bands)} cover all of them ({span})"
        )
    keep = ~removed
    kept_lengths = ds.traj_lengths[keep]
    record = {
        "coverage": coverage,
        "objective": OBJECTIVE,
        "bands": [[lo, hi] for lo, hi in bands],
        "held_out_when": HELD_OUT_RULE,
        "settings": {k: list(v) if isinstance(v, list) else v for k, v in settings.get(coverage, {}).items()},
        "source_trajectories": n_total,
        "kept_trajectories": n_total - n_removed,
        "removed_trajectories": n_removed,
        "source_steps": ds.n_steps,
        "kept_steps": int(kept_lengths.sum()),
    }
    meta = {k: v for k, v in ds.meta.items() if k not in _WRITER_KEYS}
    meta[META_KEY] = record
    if n_removed == 0:
        return replace(ds, meta=meta)
    rows = np.repeat(keep, ds.traj_lengths)
    return Dataset.from_arrays(
        ds.observations[rows],
        ds.actions[rows],
        ds.rewards[rows],
        ds.traj_preferences[keep],
        kept_lengths,
        next_observations=ds.next_observations[rows],
        terminals=ds.terminals[rows],
        timeouts=ds.timeouts[rows],
        meta=meta,
    )


def _show(bands) -> str:
    return "[" + ", ".join(f"[{lo:.6g}, {hi:.6g}]" for lo, hi in bands) + "]"


def derive_file(
    source: os.PathLike | str, coverage: str, settings: dict | None, output: os.PathLike | str
) -> dict[str, Any]:
    """Load ``source``, derive its ``coverage`` variant and write it to ``output`` atomically.

    The output's metadata adds ``coverage_source`` and ``coverage_source_sha256`` (the source file's
    path and SHA-256) to the record of :func:`derive`; the record is returned.
    """
    coverage = _check_coverage(coverage)
    settings = check_settings(settings)
    if Path(output).resolve() == Path(source).resolve():
        raise InputError(f"{output}: the coverage variant would overwrite its source dataset {source}")
    ds = load_dataset(source)  # a missing or damaged source raises DataFileError naming it
    sha = file_sha256(source)
    derived = derive(ds, coverage, settings, source=str(source))
    derived.meta["coverage_source"] = str(source)
    derived.meta["coverage_source_sha256"] = sha
    write_dataset(output, derived)
    return derived.meta[META_KEY]


def check_derived_from(derived_path: os.PathLike | str, source_path: os.PathLike | str) -> dict:
    """Check that ``derived_path`` is a coverage variant of the file ``source_path`` (by SHA-256).

    Returns the coverage record; a file that is no variant, or one derived from other bytes, raises
    :class:`~morl.data.FileMismatchError` naming both files.
    """
    meta = read_meta(derived_path)
    record = coverage_record(meta, derived_path)
    if record is None:
        why = f"{derived_path} is no coverage variant (its metadata has no '{META_KEY}' record)"
        raise FileMismatchError(derived_path, source_path, [why])
    recorded = meta.get("coverage_source_sha256")
    actual = file_sha256(source_path)
    if recorded != actual:
        raise FileMismatchError(
            derived_path,
            source_path,
            [
                f"{derived_path} was derived from {meta.get('coverage_source')!r} with sha256 "
                f"{short_hash(recorded)}, but {source_path} has sha256 {short_hash(actual)}"
            ],
        )
    return record
