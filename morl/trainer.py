"""The one training loop every agent family runs, and the checkpoint files it writes and reads.

The loop knows no family. A family (a plugin module, listed in :mod:`morl.families`) hands it:

- ``Settings``, ``RULES`` and optionally ``check_settings``: its settings (:mod:`morl.settings`);
- ``DEFINITIONS``: the training definitions its checkpoints record and an evaluation must agree
  with (at least ``statistics_from``);
- ``prepare(ds, settings, device, stats, facts)``: the dataset as tensors on the device, an
  object with the ``obs_mean``/``obs_std`` the states were normalised with;
- ``Learner(model_name, data, dims, settings, device, facts)``: a :class:`Learner`, its networks
  initialised from torch's global generator;
- ``FORMAT_VERSION`` and ``READS_VERSIONS``: the checkpoint format version it writes and those it
  still reads; ``CHECKPOINT_KEYS``: the keys its checkpoints hold beyond :data:`CHECKPOINT_KEYS`;
- ``build_agent(ckpt, device)``: the batched evaluation agent of a checked checkpoint.

What the loop does for every family (:func:`train`): the dataset is read and checked against
its env (:func:`dataset_facts`), the state statistics come from the dataset or the env's
expert-high dataset (``statistics_from``, :func:`resolve_reference`); all randomness comes from
the seed: a CPU ``torch.Generator`` draws the batches and the networks' initialisation and the
algorithms' own noise use torch's global generator, seeded inside ``torch.random.fork_rng`` so
the caller's state is left alone. Every ``checkpoint_every`` steps the whole training state
(learner, both generators, step, curve) goes atomically to ``<checkpoint>.partial``; a rerun of
the same run (same family, model, seed, settings, dataset, reference dataset, device type and
package version) continues from it and ends, on the CPU, with bit-identical weights; the same
inputs give byte-identical checkpoint files (:func:`morl.torch_io.save_torch`).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from morl import __version__
from morl.cpu import flush_subnormals
from morl.data import (
    Dataset,
    FileMismatchError,
    atomic_write,
    check_env,
    file_sha256,
    load_dataset,
    load_observations,
    read_meta,
    short_hash,
)
from morl.envs import get_spec
from morl.errors import InputError
from morl.progress import Progress
from morl.runtime import resolve_device
from morl.torch_io import TorchFileError, load_torch, save_torch

log = logging.getLogger(__name__)

#: D4MORL's episode cap, for datasets whose metadata does not say.
DEFAULT_MAX_EPISODE_STEPS = 500
#: Normalised states are clipped to [-STATE_CLIP, STATE_CLIP], in training and in rollouts.
STATE_CLIP = 10.0
#: The format of a partial training state (``<checkpoint>.partial``), for every family.
PARTIAL_FORMAT = "morl-training-state"

#: Keys every final checkpoint holds, whatever its family (a family adds its own).
CHECKPOINT_KEYS = (
    "format",
    "format_version",
    "model_name",
    "obs_dim",
    "act_dim",
    "n_obj",
    "settings",
    "state_dict",
    "obs_mean",
    "obs_std",
    "statistics_from",
    "reference_dataset",
    "reference_dataset_sha256",
    "max_episode_steps",
    "act_low",
    "act_high",
    "dataset_path",
    "dataset_sha256",
    "morl_version",
)


class CheckpointError(InputError):
    """A checkpoint file is missing, unreadable, foreign or inconsistent."""

    def __init__(self, path: os.PathLike | str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


@dataclass(frozen=True)
class Dims:
    """The sizes of a dataset's env: observation, action and objective counts."""

    obs_dim: int
    act_dim: int
    n_obj: int


# --------------------------------------------------------------------------- the dataset
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


def normalise_actions(actions: np.ndarray, low, high) -> np.ndarray:
    """Actions clipped to the bounds ``[low, high]`` and mapped onto [-1, 1] (float32, a new array)."""
    low = np.asarray(low, np.float32)
    high = np.asarray(high, np.float32)
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


# --------------------------------------------------------------------------- the learner
def cpu_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s weights on the CPU."""
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}


class Learner:
    """A family's networks, optimisers and update rule; a family's subclass fills the dicts in
    ``__init__`` and sets ``policy``.

    ``modules``: everything with weights (targets included); ``optimizers`` and ``schedulers``;
    ``policy``: the network the final checkpoint keeps to act (its ``state_dict``);
    ``policy_optimizer``: the optimiser whose learning rate the curve's ``lr`` column shows.
    """

    policy: nn.Module
    policy_optimizer: str = "actor"

    def __init__(self) -> None:
        self.modules: dict[str, nn.Module] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.schedulers: dict[str, Any] = {}

    def sample(self, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """One batch of ``batch_size`` rows, every draw from the CPU ``generator``."""
        raise NotImplementedError

    def update(self, batch: dict[str, torch.Tensor], step: int) -> torch.Tensor:
        """One training step on ``batch`` (``step`` counts from 0); returns the curve's loss (detached)."""
        raise NotImplementedError

    def lr(self) -> float:
        """The current learning rate of ``policy_optimizer`` (the curve's ``lr`` column)."""
        return float(self.optimizers[self.policy_optimizer].param_groups[0]["lr"])

    def checkpoint_entries(self) -> dict[str, Any]:
        """What the family's final checkpoint holds beyond the loop's keys (e.g. the critics)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {
            "modules": {k: cpu_state_dict(m) for k, m in self.modules.items()},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k, m in self.modules.items():
            m.load_state_dict(state["modules"][k])
        for k, o in self.optimizers.items():
            o.load_state_dict(state["optimizers"][k])
        for k, s in self.schedulers.items():
            s.load_state_dict(state["schedulers"][k])


# --------------------------------------------------------------------------- curves and partials
def curve_interval(steps: int) -> int:
    """How many optimiser steps one row of the training curve averages (100, fewer for short runs)."""
    return max(1, min(100, steps // 100))


#: The columns a training curve names its run by, repeated on every row (so that any CSV reader
#: reads the file as before): the model, the training seed and the dataset's SHA-256, as an
#: evaluation of the run records them (``model``, ``train_seed``, ``dataset_sha256``). A curve
#: written before these columns existed has step, loss and lr only.
CURVE_RUN_COLUMNS = ("model", "seed", "dataset_sha256")


def write_curve(path: os.PathLike | str, rows: list[list[float]], run: dict | None = None) -> None:
    """Write the training curve CSV (step, loss, lr; then the run's ``model``, ``seed`` and
    ``dataset_sha256`` on each row when ``run`` gives them) atomically."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    names = [] if run is None else [str(run[k]) for k in CURVE_RUN_COLUMNS]
    writer.writerow(["step", "loss", "lr", *(CURVE_RUN_COLUMNS if run is not None else ())])
    for step, loss, lr in rows:
        writer.writerow([int(step), repr(float(loss)), repr(float(lr)), *names])
    text = buf.getvalue()

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)

    atomic_write(path, write)


def read_curve_run(path: os.PathLike | str) -> dict | None:
    """The run a training curve names (``model``, ``seed``, ``dataset_sha256``), or None for a curve
    that names none (one written before curves named their run, or a curve with no rows). A curve
    whose rows name different runs, or that names only part of one, is refused with one line."""
    from morl.errors import InputError

    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            fields = reader.fieldnames or []
            present = [c for c in CURVE_RUN_COLUMNS if c in fields]
            if not present:
                return None
            if len(present) != len(CURVE_RUN_COLUMNS):
                missing = ", ".join(c for c in CURVE_RUN_COLUMNS if c not in fields)
                raise InputError(f"{path}: a training curve that names its run needs the column(s) {missing} too")
            runs = {tuple(row.get(c) for c in CURVE_RUN_COLUMNS) for row in reader}
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: not a readable training curve CSV ({exc})") from None
    if not runs:
        return None
    if len(runs) > 1 or None in next(iter(runs)):
        raise InputError(f"{path}: the rows of this training curve do not all name one run (model, seed, dataset)")
    model, seed, sha = next(iter(runs))
    try:
        seed = int(seed)
    except ValueError:
        raise InputError(f"{path}: the training curve's seed {seed!r} is not a whole number") from None
    return {"model": model, "seed": seed, "dataset_sha256": sha}


def save_partial(path: Path, state: dict) -> None:
    """Write the resumable training state atomically (tests wrap this to simulate a kill)."""
    save_torch(path, state)


def load_partial(path: Path, fingerprint: dict) -> dict | None:
    """The partial state at ``path`` if it exists, is a training state and belongs to this exact run
    (its ``fingerprint``), else None (with a warning saying why it is ignored)."""
    if not path.exists():
        return None
    try:
        state = load_torch(path, "partial training state")
    except TorchFileError as exc:
        log.warning("ignoring it: %s", exc)
        return None
    if not isinstance(state, dict) or state.get("format") != PARTIAL_FORMAT:
        log.warning("%s: ignoring a file that is not a partial training state of this version; starting afresh", path)
        return None
    if state.get("fingerprint") != fingerprint:
        log.warning("%s: partial state is from a different run (dataset/model/seed/settings); starting afresh", path)
        return None
    return state


# --------------------------------------------------------------------------- the loop
def check_keep(keep: Mapping[int, Any] | None, total: int, checkpoint_path: Path) -> dict[int, Path]:
    """The snapshots to keep, checked: whole steps from 1 to the run's ``total``, each to its own
    path, none of them the final checkpoint's."""
    out: dict[int, Path] = {}
    for at, path in (keep or {}).items():
        if isinstance(at, bool) or not isinstance(at, (int, np.integer)) or not 1 <= at <= total:
            raise InputError(f"a snapshot step must be a whole number from 1 to the run's {total} steps, got {at!r}")
        path = Path(path)
        if path == checkpoint_path or path in out.values():
            raise InputError(f"snapshot path {path} is given twice (or is the final checkpoint's)")
        out[int(at)] = path
    return out


def _last_loss(curve: list) -> float:
    """The mean loss of the curve's last interval (NaN before its first)."""
    return float(curve[-1][1]) if curve else float("nan")


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def train(
    family: Any,
    dataset_path: os.PathLike | str,
    model_name: str,
    seed: int,
    settings: dict | None,
    checkpoint_path: os.PathLike | str,
    curve_path: os.PathLike | str | None = None,
    device: str = "auto",
    progress: bool = True,
    expect_env: str | None = None,
    reference_dataset: os.PathLike | str | None = None,
    keep: Mapping[int, os.PathLike | str] | None = None,
) -> dict[str, Any]:
    """Train ``model_name`` of ``family`` (a :class:`morl.families.Family`) on one dataset and write its
    final checkpoint atomically to ``checkpoint_path`` (and the curve CSV to ``curve_path``).

    ``settings``: the family's (missing keys take its defaults). ``expect_env``: a dataset made for
    another env id is refused. ``reference_dataset``: the env's expert-high dataset, whose state
    statistics normalise the states under ``statistics_from: expert-high``; it may be left out
    when the training dataset is that one itself, and must be with ``statistics_from: dataset``.
    ``keep``: step -> path; the model as it was after that many steps is written there as a final
    checkpoint of its own (its ``steps`` says which), for HV along training. The snapshots travel
    in the partial state, so a killed run that resumes still writes every one, and they are written
    when the run finishes (a path Snakemake declares as an output is removed when a job restarts).

    Returns a summary: ``final_loss`` (mean loss of the last curve interval), ``steps``,
    ``resumed_from`` (step the run continued from, 0 if fresh), ``samples_per_s`` and
    ``steps_per_s`` (of this invocation), ``seconds``, ``device``, ``checkpoint``.
    """
    module = family.load()
    display = family.display(family.check_model(model_name))
    seed = check_seed(seed)
    settings = family.resolve_settings(settings)
    dev = resolve_device(device)
    dataset_path = Path(dataset_path)
    checkpoint_path = Path(checkpoint_path)
    partial_path = checkpoint_path.with_name(checkpoint_path.name + ".partial")
    keep = check_keep(keep, settings["steps"], checkpoint_path)

    # the reference dataset is checked from the metadata before any (possibly large) file is read
    meta = read_meta(dataset_path)
    check_env(dataset_path, meta, expect_env)
    reference_path = resolve_reference(settings["statistics_from"], meta, dataset_path, reference_dataset)
    same = reference_path == dataset_path
    if reference_path is not None and not same:
        check_reference(reference_path, meta, dataset_path)
    ds = load_dataset(dataset_path, expect_env=expect_env)
    facts = dataset_facts(ds, dataset_path)
    dataset_sha = file_sha256(dataset_path)
    stats, reference_sha = None, None
    if reference_path is not None:  # only the reference's states are read
        stats = observation_stats(ds.observations if same else load_observations(reference_path))
        reference_sha = dataset_sha if same else file_sha256(reference_path)
    if stats is None:
        stats = observation_stats(ds.observations)
    data = module.prepare(ds, settings, dev, stats, facts)
    dims = Dims(ds.obs_dim, ds.act_dim, ds.n_obj)
    fingerprint = {
        "family": family.name,
        "model_name": model_name,
        "seed": seed,
        "settings": settings,
        "dataset_sha256": dataset_sha,
        "reference_sha256": reference_sha,
        "device_type": dev.type,
        "morl_version": __version__,
        "keep": sorted(keep),  # a resumed run must have kept the snapshots it is asked for
    }
    # the run the training curve names, as its evaluations record it
    curve_run = {"model": model_name, "seed": seed, "dataset_sha256": dataset_sha}

    total = settings["steps"]
    every = curve_interval(total)
    rng_devices = [dev.index if dev.index is not None else torch.cuda.current_device()] if dev.type == "cuda" else []

    flush_subnormals()  # a long fit keeps its speed (morl.runtime)
    with torch.random.fork_rng(devices=rng_devices):
        torch.manual_seed(seed)
        learner = module.Learner(model_name, data, dims, settings, dev, facts)
        sampler = torch.Generator(device="cpu")
        sampler.manual_seed(seed)

        step = 0
        curve: list[list[float]] = []
        loss_sum = torch.zeros((), device=dev)
        loss_count = 0
        kept: dict[int, dict] = {}  # step -> the policy's state_dict then, and the curve's last loss
        state = load_partial(partial_path, fingerprint)
        if state is not None:
            learner.load_state_dict(state["learner"])
            sampler.set_state(state["sampler_rng"])
            torch.set_rng_state(state["torch_rng"])
            if dev.type == "cuda":
                torch.cuda.set_rng_state(state["cuda_rng"], rng_devices[0])
            step = int(state["step"])
            curve = [list(row) for row in state["curve"]]
            loss_sum.fill_(float(state["loss_sum"]))
            loss_count = int(state["loss_count"])
            kept = {int(k): v for k, v in state.get("kept", {}).items()}
            log.info("%s: resuming from step %d", partial_path, step)
        resumed_from = step

        bar = Progress(total, f"train {display}", unit="step", enabled=progress, initial=step)
        t0 = time.perf_counter()
        while step < total:
            batch = learner.sample(sampler)
            lr = learner.lr()
            loss = learner.update(batch, step)
            step += 1
            loss_sum += loss
            loss_count += 1
            bar.update(1)
            if step % every == 0 or step == total:
                mean_loss = loss_sum.item() / loss_count
                if not math.isfinite(mean_loss):
                    raise FloatingPointError(f"training loss became {mean_loss} at step {step}")
                curve.append([step, mean_loss, lr])
                loss_sum.zero_()
                loss_count = 0
                rate = settings["batch_size"] * (step - resumed_from) / max(time.perf_counter() - t0, 1e-9)
                bar.update(0, loss=f"{mean_loss:.4g}", samples_s=f"{rate:.0f}")
            if step in keep and step < total:
                kept[step] = {"state_dict": cpu_state_dict(learner.policy), "final_loss": _last_loss(curve)}
            if step < total and (
                (settings["checkpoint_every"] and step % settings["checkpoint_every"] == 0) or step in keep
            ):
                save_partial(
                    partial_path,
                    {
                        "format": PARTIAL_FORMAT,
                        "fingerprint": fingerprint,
                        "step": step,
                        "learner": learner.state_dict(),
                        "sampler_rng": sampler.get_state(),
                        "torch_rng": torch.get_rng_state(),
                        "cuda_rng": torch.cuda.get_rng_state(rng_devices[0]) if dev.type == "cuda" else None,
                        "curve": curve,
                        "loss_sum": loss_sum.item(),
                        "loss_count": loss_count,
                        "kept": kept,
                    },
                )
                if curve_path is not None:
                    write_curve(curve_path, curve, curve_run)
        bar.close()
        seconds = time.perf_counter() - t0

    final_loss = _last_loss(curve)
    checkpoint = {
        "format": family.checkpoint_format,
        "format_version": module.FORMAT_VERSION,
        "family": family.name,
        "model_name": model_name,
        "display_name": display,
        "obs_dim": ds.obs_dim,
        "act_dim": ds.act_dim,
        "n_obj": ds.n_obj,
        "settings": settings,
        "seed": seed,
        "state_dict": cpu_state_dict(learner.policy),
        "obs_mean": torch.from_numpy(np.array(data.obs_mean, np.float32)),
        "obs_std": torch.from_numpy(np.array(data.obs_std, np.float32)),
        **{k: settings[k] for k in module.DEFINITIONS},
        **learner.checkpoint_entries(),
        "reference_dataset": None if reference_path is None else str(reference_path.resolve()),
        "reference_dataset_sha256": reference_sha,
        "max_episode_steps": facts["max_episode_steps"],
        "act_low": facts["act_low"],
        "act_high": facts["act_high"],
        "env_id": ds.meta.get("env_id"),
        "dataset_path": str(dataset_path.resolve()),
        "dataset_sha256": dataset_sha,
        "dataset_meta": dict(ds.meta),
        "steps": step,
        "final_loss": final_loss,
        "morl_version": __version__,
        "torch_version": str(torch.__version__),
        "device": str(dev),
    }
    for at, path in sorted(keep.items()):
        snapshot = kept[at] if at < step else {"state_dict": checkpoint["state_dict"], "final_loss": final_loss}
        path.parent.mkdir(parents=True, exist_ok=True)
        save_torch(path, {**checkpoint, **snapshot, "steps": at})
    save_torch(checkpoint_path, checkpoint)
    if curve_path is not None:
        write_curve(curve_path, curve, curve_run)
    if partial_path.exists():
        partial_path.unlink()
    done_here = step - resumed_from
    return {
        "final_loss": final_loss,
        "steps": step,
        "resumed_from": resumed_from,
        "samples_per_s": settings["batch_size"] * done_here / seconds if seconds > 0 else float("nan"),
        "steps_per_s": done_here / seconds if seconds > 0 else float("nan"),
        "seconds": seconds,
        "device": str(dev),
        "checkpoint": str(checkpoint_path),
    }


# --------------------------------------------------------------------------- checkpoints
def read_checkpoint_dict(path: os.PathLike | str) -> dict[str, Any]:
    """The dict a final checkpoint file of any family holds, read with ``weights_only=True``; a
    missing or unreadable file, one that holds no dict, or a partial training state (whose format
    ends in ``-training-state``) raises :class:`CheckpointError` naming the file."""
    if not Path(path).is_file():
        raise CheckpointError(path, "checkpoint file does not exist")
    try:
        ckpt = load_torch(path, "torch checkpoint of plain types and tensors")
    except TorchFileError as exc:
        raise CheckpointError(path, exc.problem) from exc.__cause__
    if not isinstance(ckpt, dict):
        raise CheckpointError(path, f"expected a checkpoint dict, found {type(ckpt).__name__}")
    fmt = ckpt.get("format")
    if isinstance(fmt, str) and fmt.endswith("-training-state"):
        raise CheckpointError(path, "this is a partial training state, not a final agent checkpoint")
    return ckpt


def load_checkpoint(family: Any, path: os.PathLike | str) -> dict[str, Any]:
    """Read and check a final checkpoint of ``family`` (``torch.load(weights_only=True)``); its
    settings come back resolved under ``settings``.

    Raises :class:`CheckpointError` naming the file when it is missing, unreadable, holds anything
    but plain types and tensors, is a partial training state, belongs to another family or to a
    format version this one does not read, or lacks keys / has inconsistent ones.
    """
    path = Path(path)
    module = family.load()
    ckpt = read_checkpoint_dict(path)
    fmt = ckpt.get("format")
    if fmt != family.checkpoint_format:
        raise CheckpointError(
            path, f"not a {family.name} agent checkpoint (format {fmt!r}, expected {family.checkpoint_format!r})"
        )
    version = ckpt.get("format_version")
    if version not in module.READS_VERSIONS:
        raise CheckpointError(
            path,
            f"checkpoint format version {version!r} is not supported (this version of morl reads "
            f"{', '.join(map(str, module.READS_VERSIONS))}; retrain it, or read it with the morl version that wrote it, "
            f"{ckpt.get('morl_version', 'unknown')})",
        )
    if "settings" not in ckpt and "hp" in ckpt:  # the name the first format versions used
        ckpt["settings"] = ckpt.pop("hp")
    missing = [k for k in (*CHECKPOINT_KEYS, *module.CHECKPOINT_KEYS) if k not in ckpt]
    if missing:
        raise CheckpointError(path, f"checkpoint lacks key(s) {', '.join(missing)}")
    if ckpt["model_name"] not in {m.name for m in family.models}:
        raise CheckpointError(path, f"unknown model {ckpt['model_name']!r} in a {family.name} checkpoint")
    for key in ("obs_dim", "act_dim", "n_obj", "max_episode_steps"):
        if isinstance(ckpt[key], bool) or not isinstance(ckpt[key], int) or ckpt[key] < 1:
            raise CheckpointError(path, f"{key!r} must be a positive integer, found {ckpt[key]!r}")
    for key in ("obs_mean", "obs_std"):
        if not isinstance(ckpt[key], torch.Tensor) or tuple(ckpt[key].shape) != (ckpt["obs_dim"],):
            raise CheckpointError(path, f"{key!r} must be a tensor of shape ({ckpt['obs_dim']},)")
    for key in ("act_low", "act_high"):
        if not isinstance(ckpt[key], (list, tuple)) or len(ckpt[key]) != ckpt["act_dim"]:
            raise CheckpointError(path, f"{key!r} must have act_dim={ckpt['act_dim']} entries")
    if not all(h > l for l, h in zip(ckpt["act_low"], ckpt["act_high"])):
        raise CheckpointError(path, "'act_high' must exceed 'act_low' in every dimension")
    if not isinstance(ckpt["state_dict"], dict):
        raise CheckpointError(path, "'state_dict' is not a dict of tensors")
    try:
        ckpt["settings"] = family.resolve_settings(ckpt["settings"])
    except InputError as exc:
        raise CheckpointError(path, f"invalid settings ({exc})") from exc
    for key in module.DEFINITIONS:
        if ckpt[key] != ckpt["settings"][key]:
            raise CheckpointError(path, f"{key!r} differs from the one in its settings")
    return ckpt


def load_agent(family: Any, path: os.PathLike | str, device: str = "cpu", definitions: dict | None = None):
    """The batched evaluation agent (:class:`morl.rollout.Agent`) of a final checkpoint of ``family``.

    ``definitions``: the training definitions the caller's settings say (at least the family's
    ``DEFINITIONS``; others, e.g. PEDA's ``returns_to_go`` for a value-based model, are ignored); a
    checkpoint trained under others is refused with a :class:`CheckpointError`.
    """
    module = family.load()
    ckpt = load_checkpoint(family, path)
    if definitions is not None:
        absent = [k for k in module.DEFINITIONS if k not in definitions]
        if absent:
            raise InputError(f"the training definitions to check lack {', '.join(absent)}")
        trained = {k: ckpt[k] for k in module.DEFINITIONS}
        wanted = {k: definitions[k] for k in module.DEFINITIONS}
        if trained != wanted:
            say = lambda d: ", ".join(f"{k}: {v}" for k, v in d.items())  # noqa: E731
            raise CheckpointError(
                path,
                f"trained with {say(trained)}, but the settings say {say(wanted)}; evaluate it with the "
                "settings it was trained with, or retrain it",
            )
    dev = resolve_device(device)
    try:
        agent = module.build_agent(ckpt, dev)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(path, f"weights do not fit the model ({exc})") from exc
    agent.model_name = ckpt["model_name"]
    agent.seed = ckpt.get("seed")
    agent.source = str(path)
    agent.training = {
        **{k: ckpt[k] for k in module.DEFINITIONS},
        "reference_dataset": ckpt["reference_dataset"],
        "reference_dataset_sha256": ckpt["reference_dataset_sha256"],
        "dataset_path": ckpt["dataset_path"],
        "dataset_sha256": ckpt["dataset_sha256"],
        "env_id": ckpt.get("env_id"),
        "settings": ckpt["settings"],
        "steps": ckpt.get("steps"),
    }
    return agent
