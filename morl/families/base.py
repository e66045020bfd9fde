"""The contract between the training core and an agent family, written down.

A family is one module (listed by a :class:`morl.families.Family` line in the registry) that
satisfies :class:`FamilyModule`. The training core (:mod:`morl.trainer`), the checkpoint reader
(:mod:`morl.checkpoints`) and the evaluator (:mod:`morl.evaluate`) talk to a family through that
protocol only; :func:`check_family_module` says, naming the attribute, what a module lacks.

What the core gives a family:

- its settings, resolved: a frozen dataclass deriving from :class:`CoreSettings` (the four
  settings the loop itself reads), every field made with :func:`setting` so that it says what it
  is (``docs`` and the config schema read that text);
- the dataset, as the family's ``prepare`` turns it into tensors on the training device, in the
  units of :mod:`morl.normalisation`;
- a seeded CPU ``torch.Generator`` for every batch a :class:`Learner` draws, and torch's global
  generator, seeded, for network initialisation and an algorithm's own noise;
- at evaluation, a seeded ``torch.Generator`` in every ``reset`` of its agent, for an agent that
  samples (:class:`morl.rollout.Controller`).

What a family gives the core:

- a :class:`Learner`, whose ``update`` returns a dict of metrics: ``loss`` (the curve's loss
  column) and any others, each a column of the training curve;
- ``build_agent``: the evaluation agent of a checked final checkpoint;
- optionally ``initial_targets``: the target returns its agents start from at each preference of
  the grid; without it, the least-squares regression of return on preference
  (:func:`morl.conditioning.regression_targets`).

Learners come in three styles: transitions (:class:`morl.families.value.ValueLearner`, the
value-based families), single steps and windows of a trajectory
(:class:`morl.families.peda.SequenceLearner`, PEDA's models and the families on their backbone;
:func:`morl.families.peda.sequence_family` makes a family's learner and agent from a network).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from morl import settings as rules_core

#: What every family module defines; ``check_settings`` and ``initial_targets`` are optional.
REQUIRED = (
    "Settings",
    "RULES",
    "DEFINITIONS",
    "FORMAT_VERSION",
    "READS_VERSIONS",
    "CHECKPOINT_KEYS",
    "prepare",
    "Learner",
    "build_agent",
)
OPTIONAL = ("check_settings", "initial_targets")


@dataclass(frozen=True)
class Dims:
    """The sizes of a dataset's env: observation, action and objective counts."""

    obs_dim: int
    act_dim: int
    n_obj: int


#: A settings field (its default and what it is) and the docs of a settings dataclass: those of
#: :mod:`morl.settings`, which every stage's settings are made with.
setting = rules_core.setting
setting_docs = rules_core.setting_docs


@dataclass(frozen=True)
class CoreSettings:
    """The settings the training loop itself reads; a family's ``Settings`` derives from this and
    may give them other defaults (a field declared again keeps its place, first)."""

    steps: int = setting(100_000, "optimiser steps of the run")
    batch_size: int = setting(64, "rows per batch")
    checkpoint_every: int = setting(1000, "steps between resumable partial states (0: never)")
    statistics_from: str = setting(
        "expert-high", "state statistics from the env's expert High-H data (expert-high) or the training data (dataset)"
    )


@dataclass
class DeviceData:
    """What a family's ``prepare`` gives the training core, the base of a family's own data class:
    the dataset as tensors on the training device, one row per step, beginning with the states,
    and the statistics ``obs_mean``/``obs_std`` they were normalised with (the final checkpoint
    records them)."""

    states: torch.Tensor  # (N, obs_dim) float32, normalised and clipped
    obs_mean: np.ndarray
    obs_std: np.ndarray

    @property
    def n_steps(self) -> int:
        return int(self.states.shape[0])

    def rows(self, idx: torch.Tensor, *names: str) -> dict[str, torch.Tensor]:
        """The rows ``idx`` of the tensors ``names``, by name."""
        return {name: getattr(self, name)[idx] for name in names}


def device_tensor(x: np.ndarray, device: torch.device | str, dtype: type = np.float32) -> torch.Tensor:
    """``x`` as a tensor of ``dtype`` on ``device``. np.require copies only arrays that are not
    contiguous, writable (Arrow-backed) or of ``dtype``, so on the CPU the tensor shares the memory."""
    return torch.from_numpy(np.require(x, dtype, ["C", "W"])).to(device=device)


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

    def update(self, batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        """One training step on ``batch`` (``step`` counts from 0). Returns the step's metrics,
        detached scalars by name: ``loss``, the curve's loss column, and any others, each averaged
        over the steps of a curve interval that report it and written as a column of its own."""
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


#: ``initial_targets(preferences, traj_preferences, traj_returns)``: the raw target returns
#: (n, n_obj) for the grid's ``preferences`` (n, n_obj) given the reference data's trajectories,
#: and what the evaluation records of how they were made (a dict of JSON values).
InitialTargets = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, dict[str, Any]]]


@runtime_checkable
class FamilyModule(Protocol):
    """What a family module defines (module docstring). ``Settings`` is a frozen dataclass deriving
    from :class:`CoreSettings`; ``RULES`` maps a setting to its :class:`morl.settings.Rule`;
    ``DEFINITIONS`` names the training definitions its checkpoints record and an evaluation must
    agree with (at least ``statistics_from``); ``FORMAT_VERSION`` is the checkpoint format version
    it writes and ``READS_VERSIONS`` those it reads; ``CHECKPOINT_KEYS`` the keys its checkpoints
    hold beyond :data:`morl.checkpoints.CHECKPOINT_KEYS`."""

    Settings: type
    RULES: Mapping[str, rules_core.Rule]
    DEFINITIONS: tuple[str, ...]
    FORMAT_VERSION: int
    READS_VERSIONS: tuple[int, ...]
    CHECKPOINT_KEYS: tuple[str, ...]

    def prepare(self, ds: Any, settings: dict, device: torch.device, stats: Any, facts: dict) -> DeviceData:
        """The dataset on the training device, a :class:`DeviceData` with the ``obs_mean``/``obs_std``
        the states were normalised with (``stats``); ``facts``: the episode cap and action bounds."""
        ...

    def Learner(  # noqa: N802 (a class in the module)
        self, model_name: str, data: Any, dims: Dims, settings: dict, device: torch.device, facts: dict
    ) -> Learner:
        """The learner of ``model_name``, its networks initialised from torch's global generator."""
        ...

    def build_agent(self, ckpt: dict, device: torch.device) -> Any:
        """The batched evaluation agent (:class:`morl.rollout.Agent`) of a checked final checkpoint."""
        ...


def check_family_module(module: ModuleType) -> None:
    """Refuse, naming the module and what is wrong, a family module that breaks the contract."""
    name = getattr(module, "__name__", repr(module))
    missing = [a for a in REQUIRED if not hasattr(module, a)]
    if missing:
        raise TypeError(f"family module {name} lacks {', '.join(missing)}")
    settings = module.Settings
    if not (dataclasses.is_dataclass(settings) and issubclass(settings, CoreSettings)):
        raise TypeError(f"family module {name}: Settings must be a dataclass deriving from CoreSettings")
    if not settings.__dataclass_params__.frozen:
        raise TypeError(f"family module {name}: Settings must be frozen")
    silent = [k for k, doc in setting_docs(settings).items() if not doc.strip()]
    if silent:
        raise TypeError(f"family module {name}: setting(s) {', '.join(silent)} say nothing (use setting(default, doc))")
    unknown = [k for k in module.RULES if k not in setting_docs(settings)]
    if unknown:
        raise TypeError(f"family module {name}: RULES names unknown setting(s) {', '.join(unknown)}")
    if "statistics_from" not in module.DEFINITIONS:
        raise TypeError(f"family module {name}: DEFINITIONS must include statistics_from")
    if module.FORMAT_VERSION not in module.READS_VERSIONS:
        raise TypeError(f"family module {name}: it must read the checkpoint format version it writes")
    if not (isinstance(module.Learner, type) and issubclass(module.Learner, Learner)):
        raise TypeError(f"family module {name}: Learner must be a subclass of morl.families.base.Learner")
