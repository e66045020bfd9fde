"""Supervised training of the PEDA agents on a D4MORL-style dataset.

Every agent is trained by regressing the dataset's actions (MSE) from its inputs (see
:mod:`morl.models`). The definitions follow PEDA's released code (``docs/protocol.md``):

- states are normalised, ``(s_t - mean) / std``, and clipped to [-10, 10]; with
  ``statistics_from: expert-high`` mean and std come from the env's expert High-H dataset (a
  reference dataset), with ``dataset`` from the training dataset;
- actions are clipped to the action bounds and mapped onto [-1, 1] (``a / act_high`` for
  symmetric bounds), the units of the networks' tanh, in which the loss is computed;
- the return-to-go (``returns_to_go`` in ``hp``), scaled by ``return_scale``:

  * ``peda``: MODT sees the raw, unweighted reward vectors summed from each step of its window
    to the end of the window (not of the episode); MORvS sees the unweighted mean reward vector
    over the rest of the episode, ``sum_{t' >= t} r_t' / (L - t)`` for a trajectory of ``L``
    steps (fed as ``g_t = (T - t) * mean`` so that the network's ``g_t / (T - t)`` is that mean);
  * ``weighted``: both see ``g_t = w * sum_{t' >= t} r_t'`` over the rest of the episode, the
    quantity the agents are conditioned on at evaluation.

Batches: a start step is drawn uniformly from all ``N`` dataset steps (a trajectory with
probability proportional to its length, then a uniform step within it), one ``torch.randint``
per batch. MORvS trains on that step. MODT and BC take the window of ``context_length`` steps
that starts there, cut at the end of the episode and then padded on the left (masked out of
MODT's attention and loss; zero for BC). MODT is trained on every unpadded step of the window,
BC on the window's last action; only MODT's gradients are clipped (``grad_clip``). The dataset
lives on the training device as contiguous tensors and batches are gathered by vectorised
indexing.

Reproducibility: all randomness comes from ``seed``: a ``torch.Generator`` draws the batches,
and the model initialisation and dropout use torch's global generator, seeded inside a
``torch.random.fork_rng`` block so the caller's RNG state is untouched. Every
``checkpoint_every`` steps the full training state (weights, optimiser, scheduler, both RNG
states, step, curve) goes atomically to ``<checkpoint_path>.partial``; a rerun with the same
dataset/model/seed/hp continues from it and, on CPU, ends with bit-identical weights. The same
inputs and seed give byte-identical checkpoint files (:func:`morl.torch_io.save_torch`).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from morl import __version__
from morl.agents import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_FORMAT_VERSION,
    PARTIAL_FORMAT,
)
from morl.data import Dataset, FileMismatchError, atomic_write, file_sha256, load_dataset, read_meta, short_hash
from morl.errors import InputError
from morl.models import (
    DISPLAY_NAMES,
    RETURNS_TO_GO,
    STATE_CLIP,
    build_model,
    check_model_name,
    is_transformer,
    resolve_hp,
    window_length,
)
from morl.progress import Progress
from morl.runtime import resolve_device
from morl.torch_io import TorchFileError, load_torch, save_torch

log = logging.getLogger(__name__)

DEFAULT_MAX_EPISODE_STEPS = 500


# --------------------------------------------------------------------------- dataset -> tensors
def returns_to_go(rewards: np.ndarray, traj_starts: np.ndarray, traj_lengths: np.ndarray) -> np.ndarray:
    """Raw multi-objective return-to-go per step, ``rtg_t = sum_{t' >= t} r_t'`` within each
    trajectory, as a float64 (N, n_obj) array (vectorised reverse cumulative sums)."""
    r = np.asarray(rewards, dtype=np.float64)
    suffix = np.zeros((r.shape[0] + 1, r.shape[1]), dtype=np.float64)
    suffix[:-1] = np.cumsum(r[::-1], axis=0)[::-1]  # suffix[i] = sum_{j >= i} r_j over the file
    ends = np.repeat(np.asarray(traj_starts) + np.asarray(traj_lengths), traj_lengths)
    return suffix[:-1] - suffix[ends]


def observation_stats(observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension mean and std of the dataset states (float32); a constant dimension gets std 1."""
    obs = np.asarray(observations, dtype=np.float64)
    mean = obs.mean(axis=0)
    std = obs.std(axis=0)
    std = np.where(std < 1e-6, 1.0, std)
    return mean.astype(np.float32), std.astype(np.float32)


@dataclass
class TrainingTensors:
    """The dataset as contiguous tensors on the training device, one row per step."""

    states: torch.Tensor  # (N, obs_dim) float32, normalised and clipped
    actions: torch.Tensor  # (N, act_dim) float32, in [-1, 1] units of the action bounds
    preferences: torch.Tensor  # (N, n_obj) float32
    returns_to_go: torch.Tensor  # (N, n_obj) float32, the scaled per-step g_t
    rewards: torch.Tensor | None  # (N, n_obj) float32 scaled raw rewards (``peda``: MODT's windows)
    timesteps: torch.Tensor  # (N,) int64, t within the trajectory
    traj_end: torch.Tensor  # (N,) int64, row after the last step of the row's trajectory
    obs_mean: np.ndarray
    obs_std: np.ndarray

    @property
    def n_steps(self) -> int:
        return int(self.states.shape[0])


def prepare_tensors(
    ds: Dataset,
    return_scale: float,
    device: torch.device | str = "cpu",
    *,
    rtg_definition: str = "peda",
    stats: tuple[np.ndarray, np.ndarray] | None = None,
    act_low=None,
    act_high=None,
    max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
) -> TrainingTensors:
    """Normalise and clip states, scale actions, compute the conditioning returns and move
    everything to ``device``.

    ``stats``: the (mean, std) to normalise with; default :func:`observation_stats` of ``ds``.
    ``act_low``/``act_high`` default to [-1, 1]. ``rtg_definition`` is ``peda`` or ``weighted``
    (module docstring); ``max_episode_steps`` is MORvS's ``T``.
    """
    if rtg_definition not in RETURNS_TO_GO:
        raise InputError(f"rtg_definition must be one of {', '.join(RETURNS_TO_GO)}, got {rtg_definition!r}")
    mean, std = observation_stats(ds.observations) if stats is None else stats
    states = (ds.observations - mean) / std
    np.clip(states, -STATE_CLIP, STATE_CLIP, out=states)
    low = np.asarray([-1.0] * ds.act_dim if act_low is None else act_low, np.float32)
    high = np.asarray([1.0] * ds.act_dim if act_high is None else act_high, np.float32)
    actions = np.clip(ds.actions, low, high)
    actions -= (high + low) / 2
    actions /= (high - low) / 2
    rtg = returns_to_go(ds.rewards, ds.traj_starts, ds.traj_lengths)
    if rtg_definition == "weighted":
        g = ds.preferences.astype(np.float64) * rtg
        rewards = None
    else:
        steps_left = np.repeat(ds.traj_lengths, ds.traj_lengths) - ds.steps
        g = rtg * ((max_episode_steps - ds.steps) / steps_left)[:, None]
        rewards = ds.rewards * np.float32(return_scale)
    g = g * float(return_scale)

    def to(x, dtype):
        # np.require copies only arrays that are not contiguous, writable (Arrow-backed) or of the
        # right dtype, so torch.from_numpy can share the memory on CPU.
        np_dtype = {torch.float32: np.float32, torch.long: np.int64}[dtype]
        return torch.from_numpy(np.require(x, np_dtype, ["C", "W"])).to(device=device)

    return TrainingTensors(
        states=to(states, torch.float32),
        actions=to(actions, torch.float32),
        preferences=to(ds.preferences, torch.float32),
        returns_to_go=to(g, torch.float32),
        rewards=None if rewards is None else to(rewards, torch.float32),
        timesteps=to(ds.steps, torch.long),
        traj_end=to(np.repeat(ds.traj_starts + ds.traj_lengths, ds.traj_lengths), torch.long),
        obs_mean=np.asarray(mean, np.float32),
        obs_std=np.asarray(std, np.float32),
    )


def sample_indices(generator: torch.Generator, n_steps: int, batch_size: int) -> torch.Tensor:
    """Start steps (CPU int64): trajectory ~ length, then a uniform step within it."""
    return torch.randint(n_steps, (batch_size,), generator=generator)


def gather_batch(data: TrainingTensors, start: torch.Tensor, context_length: int | None) -> dict[str, torch.Tensor]:
    """Model inputs and targets for the start steps ``start`` (B,).

    ``context_length=None`` gives single steps (MORvS): tensors (B, dim). Otherwise the window
    of steps ``[start, start + context_length)`` cut at the end of the trajectory and padded on
    the left to ``context_length`` (MODT, BC): tensors (B, K, dim) with ``mask`` (B, K) False on
    the padding, whose entries are zero. With per-step rewards in ``data`` (``peda``), the
    window's return-to-go is the reward summed from each step to the end of the window.
    """
    start = start.to(data.states.device)
    if context_length is None:
        return {
            "states": data.states[start],
            "actions": data.actions[start],
            "preferences": data.preferences[start],
            "returns_to_go": data.returns_to_go[start],
            "timesteps": data.timesteps[start],
            "mask": None,
        }
    k = context_length
    length = torch.clamp(data.traj_end[start] - start, max=k)
    offset = torch.arange(k, device=start.device)[None, :] - (k - length)[:, None]  # (B, K), < 0 on padding
    mask = offset >= 0
    idx = start[:, None] + offset.clamp(min=0)
    m = mask[..., None]
    if data.rewards is None:
        rtg = data.returns_to_go[idx] * m
    else:
        rtg = (data.rewards[idx] * m).flip(1).cumsum(1).flip(1) * m
    return {
        "states": data.states[idx] * m,
        "actions": data.actions[idx] * m,
        "preferences": data.preferences[idx] * m,
        "returns_to_go": rtg,
        "timesteps": data.timesteps[idx] * mask,
        "mask": mask,
    }


def predict(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's action predictions (in the action bounds) for a batch from :func:`gather_batch`."""
    return model(
        batch["states"],
        batch["actions"],
        batch["preferences"],
        batch["returns_to_go"],
        batch["timesteps"],
        batch["mask"],
    )


def action_loss(predicted: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean squared error between predicted and dataset actions, both in [-1, 1] units.

    One prediction per window (BC) is compared with the window's last action; predictions per
    step (MODT) are compared over the unpadded steps.
    """
    target, mask = batch["actions"], batch["mask"]
    if predicted.dim() < target.dim():
        target, mask = target[:, -1], None
    err = (predicted.float() - target).pow(2).mean(dim=-1)
    if mask is None:
        return err.mean()
    mask = mask.to(err.dtype)
    return (err * mask).sum() / mask.sum()


def batch_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The training loss of a batch: :func:`action_loss` of the model's actions mapped to [-1, 1]."""
    return action_loss(model.action_head.to_unit(predict(model, batch).float()), batch)


# --------------------------------------------------------------------------- dataset metadata
def _dataset_facts(ds: Dataset, path: Path) -> dict[str, Any]:
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
            from morl.envs import get_spec

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


def load_reference(path: os.PathLike | str, ds: Dataset, dataset_path: os.PathLike | str) -> Dataset:
    """The expert-high dataset at ``path`` for the training dataset ``ds`` (read from ``dataset_path``):
    refused if its metadata names another cell than expert-high, and, naming both files, if the two
    are for different envs or were collected by different behavior policies."""
    meta = read_meta(path)  # checked before the (possibly large) file is read
    differences = []
    if meta.get("env_id") != ds.meta.get("env_id"):
        differences.append(f"the reference dataset is for env {meta.get('env_id')!r}, the training dataset for "
                           f"{ds.meta.get('env_id')!r}")  # fmt: skip
    ours, theirs = meta.get("behavior_sha256"), ds.meta.get("behavior_sha256")
    if ours and theirs and ours != theirs:  # imported D4MORL files record no behavior policy
        differences.append(f"the reference dataset was collected by behavior policy sha256 {short_hash(ours)}, the "
                           f"training dataset by {short_hash(theirs)}")  # fmt: skip
    if differences:
        raise FileMismatchError(path, dataset_path, differences)
    if "quality" in meta and not is_expert_high(meta):
        raise InputError(
            f"{path}: a reference dataset must be the env's expert-high dataset, but this is "
            f"{meta.get('quality')}-{meta.get('entropy')}"
            + (f" with coverage {meta['coverage'].get('coverage')!r}" if isinstance(meta.get("coverage"), dict) else "")
        )
    return load_dataset(path)


def resolve_reference(statistics_from: str, ds: Dataset, dataset_path: os.PathLike | str,
                      reference_dataset: os.PathLike | str | None) -> Path | None:  # fmt: skip
    """The expert-high dataset ``statistics_from`` asks for: None for ``dataset`` (a reference is
    then refused), else ``reference_dataset``, or the training dataset if it is the expert-high one."""
    if statistics_from == "dataset":
        if reference_dataset is not None:
            raise InputError("a reference dataset is used only with statistics_from 'expert-high', not 'dataset'")
        return None
    if reference_dataset is not None:
        return Path(reference_dataset)
    if not is_expert_high(ds.meta):
        raise InputError(
            f"{dataset_path}: statistics_from 'expert-high' needs the env's expert-high dataset as the "
            "reference dataset (--reference-dataset), unless the dataset is that one itself"
        )
    return Path(dataset_path)


# --------------------------------------------------------------------------- optimisation
def warmup_factor(warmup_steps: int):
    """Linear warm-up: the learning rate of step s (0-based) is lr * min(1, (s + 1) / warmup)."""
    if warmup_steps <= 0:
        return lambda step: 1.0
    return lambda step: min(1.0, (step + 1) / warmup_steps)


def make_optimizer(model: torch.nn.Module, hp: dict, device: torch.device):
    """AdamW over all parameters with the linear warm-up schedule."""
    kwargs = {"fused": True} if device.type == "cuda" else {"foreach": True}
    opt = torch.optim.AdamW(model.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"], **kwargs)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_factor(hp["warmup_steps"]))
    return opt, sched


def curve_interval(steps: int) -> int:
    """How many optimiser steps one row of the training curve averages (100, fewer for short runs)."""
    return max(1, min(100, steps // 100))


def write_curve(path: os.PathLike | str, rows: list[list[float]]) -> None:
    """Write the training curve CSV (step, loss, lr) atomically."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["step", "loss", "lr"])
    for step, loss, lr in rows:
        writer.writerow([int(step), repr(float(loss)), repr(float(lr))])
    text = buf.getvalue()

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)

    atomic_write(path, write)


def _cpu_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _save_partial(path: Path, state: dict) -> None:
    """Write the resumable training state atomically (tests wrap this to simulate a kill)."""
    save_torch(path, state)


def _load_partial(path: Path, fingerprint: dict, partial_format: str = PARTIAL_FORMAT) -> dict | None:
    """The partial state at ``path`` if it exists, is of ``partial_format`` and belongs to this exact
    run (its ``fingerprint``), else None (with a warning saying why it is ignored)."""
    if not path.exists():
        return None
    try:
        state = load_torch(path, "partial training state")
    except TorchFileError as exc:
        log.warning("ignoring it: %s", exc)
        return None
    if not isinstance(state, dict) or state.get("format") != partial_format:
        log.warning("%s: ignoring a file that is not a partial training state of this model", path)
        return None
    if state.get("fingerprint") != fingerprint:
        log.warning("%s: partial state is from a different run (dataset/model/seed/settings); starting afresh", path)
        return None
    return state


# --------------------------------------------------------------------------- the loop
def train(
    dataset_path: os.PathLike | str,
    model_name: str,
    seed: int,
    hp: dict,
    checkpoint_path: os.PathLike | str,
    curve_path: os.PathLike | str | None = None,
    device: str = "auto",
    progress: bool = True,
    expect_env: str | None = None,
    reference_dataset: os.PathLike | str | None = None,
) -> dict[str, Any]:
    """Train one PEDA agent and write its final checkpoint atomically to ``checkpoint_path``.

    ``expect_env``: if given, a dataset made for another env id is refused.

    ``hp`` keys (missing ones take :data:`morl.models.DEFAULT_HP`): steps, batch_size, lr,
    weight_decay, warmup_steps, return_scale, checkpoint_every (0 = never), hidden, depth,
    embed_dim, n_layer, n_head, dropout, context_length (MODT's training window and BC's stacked
    states), eval_context_length, grad_clip (MODT's global-norm clipping, 0 = off),
    returns_to_go (``peda`` or ``weighted``) and statistics_from (``expert-high`` or ``dataset``).

    ``reference_dataset``: the env's expert-high dataset, whose state statistics normalise the
    states when ``statistics_from`` is ``expert-high``. It may be left out only when the training
    dataset is itself the expert-high one; with ``dataset`` it must be left out.

    Returns a summary: ``final_loss`` (mean loss of the last curve interval), ``steps``,
    ``resumed_from`` (step the run continued from, 0 if fresh), ``samples_per_s`` and
    ``steps_per_s`` (of this invocation), ``seconds``, ``device``, ``checkpoint``.
    """
    check_model_name(model_name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    hp = resolve_hp(hp)
    dev = resolve_device(device)
    dataset_path = Path(dataset_path)
    checkpoint_path = Path(checkpoint_path)
    partial_path = checkpoint_path.with_name(checkpoint_path.name + ".partial")

    ds = load_dataset(dataset_path, expect_env=expect_env)
    facts = _dataset_facts(ds, dataset_path)
    dataset_sha = file_sha256(dataset_path)
    reference_path = resolve_reference(hp["statistics_from"], ds, dataset_path, reference_dataset)
    stats, reference_sha = None, None
    if reference_path is not None:
        same = reference_path == dataset_path
        stats = observation_stats((ds if same else load_reference(reference_path, ds, dataset_path)).observations)
        reference_sha = dataset_sha if same else file_sha256(reference_path)
    data = prepare_tensors(ds, hp["return_scale"], dev, rtg_definition=hp["returns_to_go"], stats=stats,
                           act_low=facts["act_low"], act_high=facts["act_high"],
                           max_episode_steps=facts["max_episode_steps"])  # fmt: skip
    context_length = window_length(model_name, hp)
    clip = hp["grad_clip"] if is_transformer(model_name) else 0.0
    fingerprint = {
        "model_name": model_name,
        "seed": seed,
        "hp": hp,
        "dataset_sha256": dataset_sha,
        "reference_sha256": reference_sha,
        "device_type": dev.type,
        "morl_version": __version__,
    }

    total = hp["steps"]
    every = curve_interval(total)
    rng_devices = [dev.index if dev.index is not None else torch.cuda.current_device()] if dev.type == "cuda" else []
    autocast = torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")

    with torch.random.fork_rng(devices=rng_devices):
        torch.manual_seed(seed)
        model = build_model(
            model_name,
            ds.obs_dim,
            ds.act_dim,
            ds.n_obj,
            hp,
            act_low=facts["act_low"],
            act_high=facts["act_high"],
            max_episode_steps=facts["max_episode_steps"],
        ).to(dev)
        opt, sched = make_optimizer(model, hp, dev)
        sampler = torch.Generator(device="cpu")
        sampler.manual_seed(seed)

        step = 0
        curve: list[list[float]] = []
        loss_sum = torch.zeros((), device=dev)
        loss_count = 0
        state = _load_partial(partial_path, fingerprint)
        if state is not None:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            sampler.set_state(state["sampler_rng"])
            torch.set_rng_state(state["torch_rng"])
            if dev.type == "cuda":
                torch.cuda.set_rng_state(state["cuda_rng"], rng_devices[0])
            step = int(state["step"])
            curve = [list(row) for row in state["curve"]]
            loss_sum.fill_(float(state["loss_sum"]))
            loss_count = int(state["loss_count"])
            log.info("%s: resuming from step %d", partial_path, step)
        resumed_from = step

        model.train()
        bar = Progress(total, f"train {DISPLAY_NAMES[model_name]}", unit="step", enabled=progress, initial=step)
        t0 = time.perf_counter()
        while step < total:
            batch = gather_batch(data, sample_indices(sampler, data.n_steps, hp["batch_size"]), context_length)
            with autocast:
                loss = batch_loss(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            lr = opt.param_groups[0]["lr"]
            opt.step()
            sched.step()
            step += 1
            loss_sum += loss.detach()
            loss_count += 1
            bar.update(1)
            if step % every == 0 or step == total:
                mean_loss = loss_sum.item() / loss_count
                if not math.isfinite(mean_loss):
                    raise FloatingPointError(f"training loss became {mean_loss} at step {step}")
                curve.append([step, mean_loss, lr])
                loss_sum.zero_()
                loss_count = 0
                rate = hp["batch_size"] * (step - resumed_from) / max(time.perf_counter() - t0, 1e-9)
                bar.update(0, loss=f"{mean_loss:.4g}", samples_s=f"{rate:.0f}")
            if hp["checkpoint_every"] and step % hp["checkpoint_every"] == 0 and step < total:
                _save_partial(
                    partial_path,
                    {
                        "format": PARTIAL_FORMAT,
                        "fingerprint": fingerprint,
                        "step": step,
                        "model": _cpu_state_dict(model),
                        "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(),
                        "sampler_rng": sampler.get_state(),
                        "torch_rng": torch.get_rng_state(),
                        "cuda_rng": torch.cuda.get_rng_state(rng_devices[0]) if dev.type == "cuda" else None,
                        "curve": curve,
                        "loss_sum": loss_sum.item(),
                        "loss_count": loss_count,
                    },
                )
                if curve_path is not None:
                    write_curve(curve_path, curve)
        bar.close()
        seconds = time.perf_counter() - t0

    final_loss = float(curve[-1][1]) if curve else float("nan")
    checkpoint = {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_FORMAT_VERSION,
        "model_name": model_name,
        "display_name": DISPLAY_NAMES[model_name],
        "obs_dim": ds.obs_dim,
        "act_dim": ds.act_dim,
        "n_obj": ds.n_obj,
        "hp": hp,
        "seed": seed,
        "state_dict": _cpu_state_dict(model),
        "obs_mean": torch.from_numpy(data.obs_mean.copy()),
        "obs_std": torch.from_numpy(data.obs_std.copy()),
        "return_scale": hp["return_scale"],
        "returns_to_go": hp["returns_to_go"],
        "statistics_from": hp["statistics_from"],
        **provenance(ds, facts, dataset_path, dataset_sha, reference_path, reference_sha, step, final_loss, dev),
    }
    save_torch(checkpoint_path, checkpoint)
    if curve_path is not None:
        write_curve(curve_path, curve)
    if partial_path.exists():
        partial_path.unlink()
    return run_summary(final_loss, step, resumed_from, hp["batch_size"], seconds, dev, checkpoint_path)


def provenance(ds: Dataset, facts: dict, dataset_path: Path, dataset_sha: str, reference_path: Path | None,
               reference_sha: str | None, step: int, final_loss: float, dev) -> dict[str, Any]:  # fmt: skip
    """The keys every final checkpoint records about how it was made: the reference dataset, the env's
    facts, the training dataset (path, hash, metadata), the steps, the final loss and the versions."""
    return {
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


def run_summary(final_loss: float, step: int, resumed_from: int, batch_size: int, seconds: float, dev,
                checkpoint_path) -> dict[str, Any]:  # fmt: skip
    """What a trainer returns: the final loss, the step reached and the one resumed from, the rate of
    this invocation (samples and steps per second), its seconds, the device and the checkpoint path."""
    done_here = step - resumed_from
    return {
        "final_loss": final_loss,
        "steps": step,
        "resumed_from": resumed_from,
        "samples_per_s": batch_size * done_here / seconds if seconds > 0 else float("nan"),
        "steps_per_s": done_here / seconds if seconds > 0 else float("nan"),
        "seconds": seconds,
        "device": str(dev),
        "checkpoint": str(checkpoint_path),
    }
