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

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from morl import settings as rules
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
from morl.settings import section, setting
from morl.vocabulary import COMPLETE, COVERAGES


@dataclass(frozen=True)
class ShatteredSettings:
    """Where the bands of the ``shattered`` variant lie."""

    centers: tuple[float, ...] = setting(
        (0.2, 0.5, 0.8), "Quantiles of the trajectories' w_1 at which the bands are centred, increasing."
    )
    fraction: float = setting(0.3, "Share of the trajectories the bands hold together (each band: fraction / k).")


@dataclass(frozen=True)
class NarrowSettings:
    """Where the cut ends of the ``narrow`` variant lie."""

    keep: tuple[float, float] = setting(
        (0.15, 0.85), "Quantiles of w_1 strictly between which trajectories are kept (0 or 1: no cut at that end)."
    )


#: The key of the gradient steps of the front model behind MODULI's return deviation
#: (:mod:`morl.front_model`), fitted once per complete dataset that has variants; MODULI's 100,000.
FRONT_MODEL_STEPS = "front_model_steps"
DEFAULT_FRONT_MODEL_STEPS = 100_000


@dataclass(frozen=True)
class CoverageSettings:
    """A config's ``coverage`` section: the bands of the variants (quantiles of the dataset's
    trajectory preferences w_1) and the front model's budget; only the keys that differ need be given."""

    shattered: ShatteredSettings = section(
        ShatteredSettings,
        "The shattered variant: three bands of 0.1 each around the quantiles 0.2, 0.5 and 0.8 by default.",
        {
            "centers": rules.numbers(rules.between(0.0, 1.0), min_length=1),
            "fraction": rules.between(0.0, 1.0, open_low=True, open_high=True),
        },
    )
    narrow: NarrowSettings = section(
        NarrowSettings,
        "The narrow variant: everything below the first and above the second quantile is cut.",
        {"keep": rules.numbers(rules.between(0.0, 1.0), length=2)},
    )
    front_model_steps: int = setting(
        DEFAULT_FRONT_MODEL_STEPS,
        "Gradient steps of the front model that MODULI's return deviation compares held-out returns with, "
        "fitted once per complete dataset that has variants (MODULI's).",
    )


#: The range of each top-level coverage setting (the bands' ranges sit with their sections).
RULES: dict[str, rules.Rule] = {FRONT_MODEL_STEPS: rules.count()}


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
def _resolved(settings: dict | None, where: str) -> dict:
    """The whole coverage section resolved (:func:`morl.settings.resolve`), every refusal one line
    that starts with the dotted key (e.g. ``coverage.shattered.centers[1]: ...``)."""
    try:
        return rules.resolve(CoverageSettings, settings, where, RULES)
    except rules.SettingError as exc:
        raise exc.keyed() from None


def _check_shattered(shattered: dict, where: str) -> None:
    """What no single rule says of the shattered bands: centres increase, and each band lies in
    [0, 1] without touching the next."""
    key = f"{where}.shattered"
    centers, fraction = shattered["centers"], shattered["fraction"]
    for i, c in enumerate(centers):
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


def _check_narrow(narrow: dict, where: str) -> None:
    """What no single rule says of the narrow cut: it keeps some trajectories and cuts some."""
    key = f"{where}.narrow"
    low, high = narrow["keep"]
    if low >= high:
        what = "is empty" if low == high else "is reversed"
        raise InputError(f"{key}.keep: [{low:g}, {high:g}] {what}; it would remove every trajectory")
    if low == 0.0 and high == 1.0:
        raise InputError(f"{key}.keep: [0, 1] keeps every trajectory; narrow must remove at least one end")


def front_model_steps(settings: dict | None, where: str = "coverage") -> int:
    """The gradient steps of the front model (``front_model_steps`` of the config's coverage section,
    ``settings``; default MODULI's 100,000). Kept apart from :func:`check_settings`, so that the
    step count does not enter the settings a variant is derived with."""
    return _resolved(settings, where)[FRONT_MODEL_STEPS]


def check_settings(settings: dict | None, where: str = "coverage") -> dict:
    """The coverage settings with defaults filled: ``{"shattered": {...}, "narrow": {...}}``.

    ``settings`` is the config's coverage section (``None`` or a missing entry: the defaults);
    ``where`` is its key, the prefix of every key an :class:`InputError` names (e.g.
    ``coverage.shattered.centers[1]``). The result holds plain floats and lists (JSON-able).
    ``front_model_steps`` is checked but not returned (:func:`front_model_steps` reads it).
    """
    resolved = _resolved(settings, where)
    _check_shattered(resolved["shattered"], where)
    _check_narrow(resolved["narrow"], where)
    return {name: resolved[name] for name in ("shattered", "narrow")}


#: The band settings of the variants when a config gives none.
DEFAULTS = check_settings(None)


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
    if coverage == COMPLETE:
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
    if coverage != COMPLETE and n_removed == 0:
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
