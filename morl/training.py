"""Supervised training of the PEDA agents on a D4MORL-style dataset.

Every agent is trained by regressing the dataset's actions (MSE) from its inputs (see
:mod:`morl.models`). Per step ``t`` of a trajectory with preference ``w`` the inputs are

- the normalised state ``(s_t - mean) / std`` (mean/std over all dataset observations),
- the preference ``w``,
- the scaled preference-weighted return-to-go ``g_t = w * rtg_t * return_scale`` with
  ``rtg_t = sum_{t' >= t} r_t'`` the raw reward vector summed to the trajectory's end,
- the timestep ``t``.

Batches: a trajectory is drawn with probability proportional to its length and a step
uniformly within it, which is the same as drawing a step uniformly from all ``N`` dataset
steps; that is how it is implemented (one ``torch.randint`` per batch). MLP agents train on
that step; MODT trains on the window of ``context_length`` steps that ends at it, padded on the
left (and masked out of attention and loss) when the trajectory starts less than
``context_length - 1`` steps earlier. The dataset lives on the training device as contiguous
tensors and batches are gathered by vectorised indexing.

Reproducibility: all randomness comes from ``seed``: a ``torch.Generator`` draws the batches,
and the model initialisation and dropout use torch's global generator, seeded inside a
``torch.random.fork_rng`` block so the caller's RNG state is untouched. Every
``checkpoint_every`` steps the full training state (weights, optimiser, scheduler, both RNG
states, step, curve) goes atomically to ``<checkpoint_path>.partial``; a rerun with the same
dataset/model/seed/hp continues from it and, on CPU, ends with bit-identical weights.
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
from morl.data import Dataset, atomic_write, file_sha256, load_dataset
from morl.progress import Progress
from morl.models import (
    DISPLAY_NAMES,
    build_model,
    check_model_name,
    is_transformer,
    resolve_device,
    resolve_hp,
)

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

    states: torch.Tensor  # (N, obs_dim) float32, normalised
    actions: torch.Tensor  # (N, act_dim) float32
    preferences: torch.Tensor  # (N, n_obj) float32
    returns_to_go: torch.Tensor  # (N, n_obj) float32, g_t = w * rtg_t * return_scale
    timesteps: torch.Tensor  # (N,) int64, t within the trajectory
    traj_start: torch.Tensor  # (N,) int64, row of the first step of the row's trajectory
    obs_mean: np.ndarray
    obs_std: np.ndarray

    @property
    def n_steps(self) -> int:
        return int(self.states.shape[0])


def prepare_tensors(ds: Dataset, return_scale: float, device: torch.device | str = "cpu") -> TrainingTensors:
    """Normalise states, compute the conditioning returns and move everything to ``device``."""
    mean, std = observation_stats(ds.observations)
    states = (ds.observations - mean) / std
    rtg = returns_to_go(ds.rewards, ds.traj_starts, ds.traj_lengths)
    g = ds.preferences.astype(np.float64) * rtg * float(return_scale)

    def to(x, dtype):
        # np.require copies only arrays that are not contiguous, writable (Arrow-backed) or of the
        # right dtype, so torch.from_numpy can share the memory on CPU.
        np_dtype = {torch.float32: np.float32, torch.long: np.int64}[dtype]
        return torch.from_numpy(np.require(x, np_dtype, ["C", "W"])).to(device=device)

    return TrainingTensors(
        states=to(states, torch.float32),
        actions=to(ds.actions, torch.float32),
        preferences=to(ds.preferences, torch.float32),
        returns_to_go=to(g, torch.float32),
        timesteps=to(ds.steps, torch.long),
        traj_start=to(np.repeat(ds.traj_starts, ds.traj_lengths), torch.long),
        obs_mean=mean,
        obs_std=std,
    )


def sample_indices(generator: torch.Generator, n_steps: int, batch_size: int) -> torch.Tensor:
    """Step indices (CPU int64): trajectory ~ length, then a uniform step within it."""
    return torch.randint(n_steps, (batch_size,), generator=generator)


def gather_batch(data: TrainingTensors, end: torch.Tensor, context_length: int | None) -> dict[str, torch.Tensor]:
    """Model inputs and targets for the steps ``end`` (B,).

    ``context_length=None`` gives single steps (MLP agents): tensors (B, dim). Otherwise the
    window of ``context_length`` steps ending at each index (MODT): tensors (B, K, dim) with
    ``mask`` (B, K) False on the left padding, whose entries are zero.
    """
    end = end.to(data.states.device)
    if context_length is None:
        return {
            "states": data.states[end],
            "actions": data.actions[end],
            "preferences": data.preferences[end],
            "returns_to_go": data.returns_to_go[end],
            "timesteps": data.timesteps[end],
            "mask": None,
        }
    offsets = torch.arange(1 - context_length, 1, device=end.device)
    idx = end[:, None] + offsets  # (B, K)
    start = data.traj_start[end][:, None]
    mask = idx >= start
    idx = torch.maximum(idx, start)
    m = mask[..., None]
    return {
        "states": data.states[idx] * m,
        "actions": data.actions[idx] * m,
        "preferences": data.preferences[idx] * m,
        "returns_to_go": data.returns_to_go[idx] * m,
        "timesteps": data.timesteps[idx] * mask,
        "mask": mask,
    }


def predict(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's action predictions for a batch from :func:`gather_batch`."""
    return model(
        batch["states"],
        batch["actions"],
        batch["preferences"],
        batch["returns_to_go"],
        batch["timesteps"],
        batch["mask"],
    )


def action_loss(predicted: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean squared error between predicted and dataset actions over the unpadded steps."""
    err = (predicted.float() - batch["actions"]).pow(2).mean(dim=-1)
    if batch["mask"] is None:
        return err.mean()
    mask = batch["mask"].to(err.dtype)
    return (err * mask).sum() / mask.sum()


# --------------------------------------------------------------------------- dataset metadata
def _dataset_facts(ds: Dataset, path: Path) -> dict[str, Any]:
    """Episode cap and action bounds of the dataset's environment, checked against the data."""
    meta = ds.meta
    try:
        max_steps = int(meta.get("max_episode_steps", DEFAULT_MAX_EPISODE_STEPS))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: metadata 'max_episode_steps' is not an integer") from exc
    if max_steps < 1:
        raise ValueError(f"{path}: metadata 'max_episode_steps' must be positive, got {max_steps}")
    if int(ds.steps.max()) >= max_steps:
        raise ValueError(
            f"{path}: a trajectory has {int(ds.steps.max()) + 1} steps, more than "
            f"max_episode_steps={max_steps}"
        )
    if "act_low" in meta and "act_high" in meta:
        low, high = meta["act_low"], meta["act_high"]
    else:
        env_id = meta.get("env_id")
        try:
            from morl.envs import get_spec

            spec = get_spec(env_id)
        except (ImportError, ValueError, TypeError) as exc:
            raise ValueError(
                f"{path}: metadata has no 'act_low'/'act_high' and the action bounds of env id "
                f"{env_id!r} are unknown ({exc})"
            ) from exc
        low, high = spec.act_low, spec.act_high
    low = [float(x) for x in np.asarray(low, dtype=np.float64).reshape(-1)]
    high = [float(x) for x in np.asarray(high, dtype=np.float64).reshape(-1)]
    if len(low) != ds.act_dim or len(high) != ds.act_dim:
        raise ValueError(f"{path}: action bounds have {len(low)} entries but actions have {ds.act_dim}")
    tol = 1e-4
    if np.any(ds.actions < np.asarray(low) - tol) or np.any(ds.actions > np.asarray(high) + tol):
        raise ValueError(f"{path}: dataset actions lie outside the action bounds {low} .. {high}")
    return {"max_episode_steps": max_steps, "act_low": low, "act_high": high}


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


def _save_torch(path: Path, obj: dict) -> None:
    atomic_write(path, lambda tmp: torch.save(obj, tmp))


def _cpu_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _save_partial(path: Path, state: dict) -> None:
    """Write the resumable training state atomically (tests wrap this to simulate a kill)."""
    _save_torch(path, state)


def _load_partial(path: Path, fingerprint: dict) -> dict | None:
    """The partial state at ``path`` if it exists and belongs to this exact run, else None."""
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        log.warning("%s: ignoring unreadable partial training state (%s)", path, exc)
        return None
    if not isinstance(state, dict) or state.get("format") != PARTIAL_FORMAT:
        log.warning("%s: ignoring a file that is not a partial training state", path)
        return None
    if state.get("fingerprint") != fingerprint:
        log.warning("%s: partial state is from a different run (dataset/model/seed/hp); starting afresh", path)
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
) -> dict[str, Any]:
    """Train one PEDA agent and write its final checkpoint atomically to ``checkpoint_path``.

    ``expect_env``: if given, a dataset made for another env id is refused.

    ``hp`` keys (missing ones take :data:`morl.models.DEFAULT_HP`): steps, batch_size, lr,
    weight_decay, warmup_steps, return_scale, checkpoint_every (0 = never), hidden, depth,
    embed_dim, n_layer, n_head, dropout, context_length, eval_context_length, grad_clip
    (global-norm clipping, 0 = off).

    Returns a summary: ``final_loss`` (mean loss of the last curve interval), ``steps``,
    ``resumed_from`` (step the run continued from, 0 if fresh), ``samples_per_s`` and
    ``steps_per_s`` (of this invocation), ``seconds``, ``device``, ``checkpoint``.
    """
    check_model_name(model_name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    hp = resolve_hp(hp)
    dev = resolve_device(device)
    dataset_path = Path(dataset_path)
    checkpoint_path = Path(checkpoint_path)
    partial_path = checkpoint_path.with_name(checkpoint_path.name + ".partial")

    ds = load_dataset(dataset_path, expect_env=expect_env)
    facts = _dataset_facts(ds, dataset_path)
    dataset_sha = file_sha256(dataset_path)
    data = prepare_tensors(ds, hp["return_scale"], dev)
    context_length = hp["context_length"] if is_transformer(model_name) else None
    fingerprint = {
        "model_name": model_name,
        "seed": seed,
        "hp": hp,
        "dataset_sha256": dataset_sha,
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
                predicted = predict(model, batch)
            loss = action_loss(predicted, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if hp["grad_clip"] > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), hp["grad_clip"])
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
    _save_torch(checkpoint_path, checkpoint)
    if curve_path is not None:
        write_curve(curve_path, curve)
    if partial_path.exists():
        partial_path.unlink()
    done_here = step - resumed_from
    return {
        "final_loss": final_loss,
        "steps": step,
        "resumed_from": resumed_from,
        "samples_per_s": hp["batch_size"] * done_here / seconds if seconds > 0 else float("nan"),
        "steps_per_s": done_here / seconds if seconds > 0 else float("nan"),
        "seconds": seconds,
        "device": str(dev),
        "checkpoint": str(checkpoint_path),
    }
