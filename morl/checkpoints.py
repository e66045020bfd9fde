"""Final checkpoints of every family: the keys they all hold, reading one safely, checking it
against its family, and the evaluation agent it gives.

A final checkpoint is a dict of plain types and tensors (read with ``weights_only=True``,
:mod:`morl.torch_io`) written by :func:`morl.trainer.train`. Its family is told by its
``format``; what a family adds is listed in its module (:mod:`morl.families.base`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from morl.errors import InputError
from morl.runtime import resolve_device
from morl.torch_io import TorchFileError, load_torch

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
    agent.family = family.name  # whose module says how its episodes start (initial_targets)
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
