"""The units every family trains and acts in, and which dataset fixes them.

States are normalised with per-dimension statistics (:func:`observation_stats`) and clipped to
±:data:`STATE_CLIP` (:func:`normalise_states`), in training and in every rollout; actions are clipped to the env's bounds and
mapped onto [-1, 1] (:func:`normalise_actions`); an episode lasts at most the dataset's
``max_episode_steps`` (:func:`dataset_facts` reads and checks the cap and the bounds).

The statistics come from the training dataset or, as in PEDA's released code, from the env's
expert High-H dataset: the reference dataset (``statistics_from``). :func:`resolve_reference`
says which file that is and :func:`check_reference` refuses one that cannot be it. Training and
evaluation both apply these rules, so neither imports the other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from morl.data import Dataset, FileMismatchError, read_meta, short_hash
from morl.envs import get_spec
from morl.errors import InputError

#: D4MORL's episode cap, for datasets whose metadata does not say.
DEFAULT_MAX_EPISODE_STEPS = 500
#: Normalised states are clipped to [-STATE_CLIP, STATE_CLIP], in training and in rollouts.
STATE_CLIP = 10.0

#: Rows converted to float64 at a time by :func:`observation_stats`.
_STATS_BLOCK_ROWS = 65536


def observation_stats(observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension mean and std of the dataset states (float32); a constant dimension gets std 1.

    Computed in float64 a block of rows at a time, each block added onto the running sum in row
    order: the same sums as numpy's ``mean``/``std`` over the whole float64 array, without that
    array (at paper scale it would be twice the states' own size)."""
    obs = np.asarray(observations)
    n, width = obs.shape

    def total(term) -> np.ndarray:
        acc = np.zeros((1, width))
        for start in range(0, n, _STATS_BLOCK_ROWS):
            block = term(obs[start : start + _STATS_BLOCK_ROWS].astype(np.float64))
            acc = np.add.reduce(np.concatenate([acc, block]), axis=0, keepdims=True)
        return acc[0]

    mean = total(lambda block: block) / n
    std = np.sqrt(total(lambda block: np.square(block - mean)) / n)
    std = np.where(std < 1e-6, 1.0, std)
    return mean.astype(np.float32), std.astype(np.float32)


def normalise_states(observations: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """States normalised with the statistics ``mean``/``std`` and clipped to ±:data:`STATE_CLIP`
    (a new array), as every family trains on them."""
    out = (observations - mean) / std
    np.clip(out, -STATE_CLIP, STATE_CLIP, out=out)
    return out


def normalise_actions(actions: np.ndarray, low=None, high=None) -> np.ndarray:
    """Actions clipped to the bounds ``[low, high]`` and mapped onto [-1, 1] (float32, a new array);
    bounds left out are -1 and 1 in every dimension."""
    act_dim = np.shape(actions)[-1]
    low = np.asarray([-1.0] * act_dim if low is None else low, np.float32)
    high = np.asarray([1.0] * act_dim if high is None else high, np.float32)
    out = np.clip(actions, low, high)
    out -= (high + low) / 2
    out /= (high - low) / 2
    return out


def dataset_facts(ds: Dataset, path: Path) -> dict[str, Any]:
    """Episode cap and action bounds of the dataset's environment, checked against the data."""
    meta = ds.meta
    try:
        max_steps = int(meta.get("max_episode_steps", DEFAULT_MAX_EPISODE_STEPS))
    except (TypeError, ValueError) as exc:
        raise InputError(f"{path}: metadata 'max_episode_steps' is not an integer") from exc
    if max_steps < 1:
        raise InputError(f"{path}: metadata 'max_episode_steps' must be positive, got {max_steps}")
    if int(ds.steps.max()) >= max_steps:
        raise InputError(
            f"{path}: a trajectory has {int(ds.steps.max()) + 1} steps, more than max_episode_steps={max_steps}"
        )
    if "act_low" in meta and "act_high" in meta:
        low, high = meta["act_low"], meta["act_high"]
    else:
        env_id = meta.get("env_id")
        try:
            spec = get_spec(env_id)
        except (ImportError, ValueError, TypeError) as exc:
            raise InputError(
                f"{path}: metadata has no 'act_low'/'act_high' and the action bounds of env id "
                f"{env_id!r} are unknown ({exc})"
            ) from exc
        low, high = spec.act_low, spec.act_high
    low = [float(x) for x in np.asarray(low, dtype=np.float64).reshape(-1)]
    high = [float(x) for x in np.asarray(high, dtype=np.float64).reshape(-1)]
    if len(low) != ds.act_dim or len(high) != ds.act_dim:
        raise InputError(f"{path}: action bounds have {len(low)} entries but actions have {ds.act_dim}")
    tol = 1e-4
    if np.any(ds.actions < np.asarray(low) - tol) or np.any(ds.actions > np.asarray(high) + tol):
        raise InputError(f"{path}: dataset actions lie outside the action bounds {low} .. {high}")
    return {"max_episode_steps": max_steps, "act_low": low, "act_high": high}


def is_expert_high(meta: dict) -> bool:
    """True if a dataset's metadata names it the expert, High-H dataset of its env (its complete
    data: a coverage variant with preference bands cut out is not)."""
    return meta.get("quality") == "expert" and meta.get("entropy") == "high" and meta.get("coverage") is None


def check_reference(path: os.PathLike | str, meta: dict, dataset_path: os.PathLike | str) -> None:
    """Refuse a reference dataset (from its metadata alone) for the training dataset at
    ``dataset_path`` whose metadata is ``meta``: if it names another cell than expert-high, and,
    naming both files, if the two are for different envs or were collected by different behavior
    policies."""
    ref = read_meta(path)
    differences = []
    if ref.get("env_id") != meta.get("env_id"):
        differences.append(
            f"the reference dataset is for env {ref.get('env_id')!r}, the training dataset for {meta.get('env_id')!r}"
        )
    ours, theirs = ref.get("behavior_sha256"), meta.get("behavior_sha256")
    if ours and theirs and ours != theirs:  # imported D4MORL files record no behavior policy
        differences.append(
            f"the reference dataset was collected by behavior policy sha256 {short_hash(ours)}, the "
            f"training dataset by {short_hash(theirs)}"
        )
    if differences:
        raise FileMismatchError(path, dataset_path, differences)
    if "quality" in ref and not is_expert_high(ref):
        raise InputError(
            f"{path}: a reference dataset must be the env's expert-high dataset, but this is "
            f"{ref.get('quality')}-{ref.get('entropy')}"
            + (f" with coverage {ref['coverage'].get('coverage')!r}" if isinstance(ref.get("coverage"), dict) else "")
        )


def resolve_reference(
    statistics_from: str, meta: dict, dataset_path: os.PathLike | str, reference_dataset: os.PathLike | str | None
) -> Path | None:
    """The expert-high dataset ``statistics_from`` asks for: None for ``dataset`` (a reference is
    then refused), else ``reference_dataset``, or the training dataset (its metadata ``meta``) if it is
    the expert-high one."""
    if statistics_from == "dataset":
        if reference_dataset is not None:
            raise InputError("a reference dataset is used only with statistics_from 'expert-high', not 'dataset'")
        return None
    if reference_dataset is not None:
        return Path(reference_dataset)
    if not is_expert_high(meta):
        raise InputError(
            f"{dataset_path}: statistics_from 'expert-high' needs the env's expert-high dataset as the "
            "reference dataset (--reference-dataset), unless the dataset is that one itself"
        )
    return Path(dataset_path)
