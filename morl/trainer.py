"""The one training loop every agent family runs, and the final checkpoints it writes.

The loop knows no family: it talks to one through the contract of :mod:`morl.families.base`
(settings, ``prepare``, a ``Learner`` whose ``update`` returns its metrics, ``build_agent``).

What the loop does for every family (:func:`train`): the dataset is read and checked against
its env (:func:`morl.normalisation.dataset_facts`), the state statistics come from the dataset or
the env's expert-high dataset (``statistics_from``, :func:`morl.normalisation.resolve_reference`);
all randomness comes from the seed: a CPU ``torch.Generator`` draws the batches and the networks'
initialisation and the algorithms' own noise use torch's global generator, seeded inside
``torch.random.fork_rng`` so the caller's state is left alone. Every ``checkpoint_every`` steps the
whole training state (learner, both generators, step, curve) goes atomically to
``<checkpoint>.partial``; a rerun of the same run (same family, model, seed, settings, dataset,
reference dataset, device type and package version) continues from it and ends, on the CPU, with
bit-identical weights; the same inputs give byte-identical checkpoint files
(:func:`morl.torch_io.save_torch`). Reading checkpoints is :mod:`morl.checkpoints`'.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from morl import __version__
from morl.cpu import flush_subnormals
from morl.curves import curve_interval, write_curve
from morl.data import Dataset, check_env, file_sha256, load_dataset, load_observations, read_meta
from morl.errors import InputError
from morl.families.base import Dims, cpu_state_dict
from morl.normalisation import check_reference, dataset_facts, observation_stats, resolve_reference
from morl.progress import Progress
from morl.runtime import resolve_device
from morl.torch_io import TorchFileError, load_torch, save_torch

log = logging.getLogger(__name__)

#: The format of a partial training state (``<checkpoint>.partial``), for every family.
PARTIAL_FORMAT = "morl-training-state"


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


class IntervalMeans:
    """The sums of the metrics a learner's updates report over one curve interval, on the training
    device (no synchronisation per step): ``loss`` and the others, each averaged over the steps that
    reported it; ``names``: the others, in the order they were first reported (the curve's columns)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.loss_sum = torch.zeros((), device=device)
        self.loss_count = 0
        self.names: list[str] = []
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, int] = {}

    def add(self, metrics: Mapping[str, torch.Tensor]) -> None:
        if not isinstance(metrics, Mapping) or "loss" not in metrics:
            raise TypeError("a learner's update must return a dict of metrics with a 'loss'")
        self.loss_sum += metrics["loss"]
        self.loss_count += 1
        for name, value in metrics.items():
            if name == "loss":
                continue
            if name not in self.sums:
                if name not in self.names:
                    self.names.append(name)
                self.sums[name] = torch.zeros((), device=self.device)
                self.counts[name] = 0
            self.sums[name] += value
            self.counts[name] += 1

    def take(self) -> tuple[float, list[float | None]]:
        """The interval's mean loss and the mean of each other metric (None where none was
        reported), and a fresh interval."""
        loss = self.loss_sum.item() / self.loss_count
        others = [self.sums[k].item() / self.counts[k] if self.counts.get(k) else None for k in self.names]
        self.loss_sum.zero_()
        self.loss_count = 0
        self.sums, self.counts = {}, {}
        return loss, others

    def state(self) -> dict[str, Any]:
        return {
            "loss_sum": self.loss_sum.item(),
            "loss_count": self.loss_count,
            "metric_names": list(self.names),
            "metric_sums": {k: v.item() for k, v in self.sums.items()},
            "metric_counts": dict(self.counts),
        }

    def load(self, state: Mapping[str, Any]) -> None:
        self.loss_sum.fill_(float(state["loss_sum"]))
        self.loss_count = int(state["loss_count"])
        self.names = list(state.get("metric_names", []))
        self.sums = {k: torch.tensor(float(v), device=self.device) for k, v in state.get("metric_sums", {}).items()}
        self.counts = {k: int(v) for k, v in state.get("metric_counts", {}).items()}


def curve_rows(curve: list[list[Any]], names: list[str]) -> list[list[Any]]:
    """The curve's rows with an empty cell for every metric first reported after the row's interval."""
    return [row + [None] * (3 + len(names) - len(row)) for row in curve]


def _last_loss(curve: list) -> float:
    """The mean loss of the curve's last interval (NaN before its first)."""
    return float(curve[-1][1]) if curve else float("nan")


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def warn_single_trajectory(ds: Dataset, dataset_path: Path, reference_path: Path | None) -> None:
    """Warn (not refuse) when the training dataset holds one trajectory: the model sees one
    preference only, and the evaluation's target regression of return on preference, when fitted on
    this file (``reference_path`` None: no other expert-high dataset gives it), has one point to
    fit: its slope is undetermined, so it predicts that trajectory's return at every preference and
    the return-conditioned models start every preference from ``w * R`` with that one ``R``."""
    if ds.n_trajectories != 1:
        return
    if reference_path is None:
        targets = (
            "the evaluation's target regression of return on preference, fitted on it, is underdetermined: "
            "it predicts that trajectory's return at every preference, so the return-conditioned models' "
            "initial targets follow no trade-off between the objectives"
        )
    else:
        targets = (
            f"the evaluation's target regression is fitted on {reference_path}, but the model sees one preference only"
        )
    log.warning("%s: the dataset has one trajectory; %s; training goes on", dataset_path, targets)


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
    warn_single_trajectory(ds, dataset_path, None if same else reference_path)
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

    flush_subnormals()  # a long fit keeps its speed (morl.cpu)
    with torch.random.fork_rng(devices=rng_devices):
        torch.manual_seed(seed)
        learner = module.Learner(model_name, data, dims, settings, dev, facts)
        sampler = torch.Generator(device="cpu")
        sampler.manual_seed(seed)

        step = 0
        curve: list[list[float]] = []
        means = IntervalMeans(dev)
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
            means.load(state)
            kept = {int(k): v for k, v in state.get("kept", {}).items()}
            log.info("%s: resuming from step %d", partial_path, step)
        resumed_from = step

        bar = Progress(total, f"train {display}", unit="step", enabled=progress, initial=step)
        t0 = time.perf_counter()
        while step < total:
            batch = learner.sample(sampler)
            lr = learner.lr()
            means.add(learner.update(batch, step))
            step += 1
            bar.update(1)
            if step % every == 0 or step == total:
                mean_loss, others = means.take()
                if not math.isfinite(mean_loss):
                    raise FloatingPointError(f"training loss became {mean_loss} at step {step}")
                curve.append([step, mean_loss, lr, *others])
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
                        **means.state(),
                        "kept": kept,
                    },
                )
                if curve_path is not None:
                    write_curve(curve_path, curve_rows(curve, means.names), curve_run, tuple(means.names))
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
        write_curve(curve_path, curve_rows(curve, means.names), curve_run, tuple(means.names))
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
