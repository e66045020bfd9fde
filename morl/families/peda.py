"""PEDA's agents (Zhu, Dang and Grover, "Scaling Pareto-Efficient Decision Making via Offline
Multi-Objective RL", ICLR 2023; code github.com/baitingzbt/PEDA): MODT, MORvS and BC, each with
a (P) variant, as one family of the training core.

Every agent is trained by regressing the dataset's actions (MSE) from its inputs (see
:mod:`morl.families.peda_networks`). The definitions follow PEDA's released code (``docs/protocol.md``):

- states are normalised, ``(s_t - mean) / std``, and clipped to [-10, 10]; with
  ``statistics_from: expert-high`` mean and std come from the env's expert High-H dataset (a
  reference dataset), with ``dataset`` from the training dataset;
- actions are clipped to the action bounds and mapped onto [-1, 1] (``a / act_high`` for
  symmetric bounds), the units of the networks' tanh, in which the loss is computed;
- the return-to-go (the ``returns_to_go`` setting), scaled by ``return_scale``:

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

Seeds, resumes and checkpoints are the training core's (:mod:`morl.trainer`); MODT's training
runs in bfloat16 autocast on CUDA, float32 elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from morl import settings as rules
from morl.data import Dataset
from morl.errors import InputError
from morl.families.base import CoreSettings, DeviceData, Dims, device_tensor, setting
from morl.families.base import Learner as CoreLearner
from morl.families.peda_agent import Agent, build_agent, sequence_agent
from morl.families.peda_networks import NetworkEnv, build_env_model, is_transformer, window_length
from morl.normalisation import DEFAULT_MAX_EPISODE_STEPS, normalise_actions, normalise_states, observation_stats

#: The training definitions of the return-to-go (module docstring, ``docs/protocol.md``).
RETURNS_TO_GO = ("peda", "weighted")


@dataclass(frozen=True)
class RegressionSettings(CoreSettings):
    """What every family trained by PEDA's action regression sets (:class:`SequenceLearner`): the
    optimiser, PEDA's data definitions and the MLP's size; the defaults are PEDA's code's."""

    steps: int = setting(100_000, "optimiser steps; PEDA's MORvS/BC budget (its MODT budget is per task, in configs)")
    batch_size: int = setting(64, "trajectories' steps per batch (PEDA's code)")
    checkpoint_every: int = setting(1000, "steps between resumable partial states (0: never); not PEDA's")
    statistics_from: str = setting("expert-high", "state statistics of the env's expert High-H data, as PEDA's code")
    lr: float = setting(1e-4, "AdamW learning rate (PEDA's code)")
    weight_decay: float = setting(1e-3, "AdamW weight decay (PEDA's code)")
    warmup_steps: int = setting(10_000, "linear learning-rate warm-up (PEDA's code)")
    return_scale: float = setting(1e-3, "returns-to-go are multiplied by this (PEDA's code, D4MORL's scale)")
    hidden: int = setting(512, "MORvS/BC hidden width (PEDA's code)")
    depth: int = setting(3, "MORvS/BC hidden layers (PEDA's code)")
    dropout: float = setting(0.1, "dropout of every network (PEDA's code)")
    returns_to_go: str = setting("peda", "peda: the released code's definitions; weighted: w * R (module docstring)")


@dataclass(frozen=True)
class StepSettings(RegressionSettings):
    """What a family trained on single steps, as MORvS(P) is, sets: PEDA's MORvS budget and batches
    of single steps (the other families on MORvS's backbone, :mod:`morl.families.hyper` and
    :mod:`morl.families.manifold`)."""

    steps: int = setting(100_000, "optimiser steps; PEDA's MORvS budget (PEDA's code)")
    batch_size: int = setting(64, "single steps per batch (PEDA's code)")


@dataclass(frozen=True)
class WindowSettings(RegressionSettings):
    """What a family trained on windows of a trajectory sets beyond :class:`RegressionSettings`."""

    context_length: int = setting(20, "MODT's training window and BC's stacked states (PEDA's code)")
    eval_context_length: int = setting(5, "MODT's window in evaluation (PEDA's code)")
    grad_clip: float = setting(0.25, "MODT's global gradient-norm clip, 0 off; MORvS/BC are not clipped (PEDA's code)")


@dataclass(frozen=True)
class Settings(WindowSettings):
    """PEDA's settings; the defaults are its paper's and code's (``docs/protocol.md`` has every key)."""

    embed_dim: int = setting(512, "MODT token width (PEDA's code)")
    n_layer: int = setting(3, "MODT transformer blocks (PEDA's code)")
    n_head: int = setting(1, "MODT attention heads (PEDA's code)")


#: The ranges of the settings every family on PEDA's action regression shares.
REGRESSION_RULES = {
    "warmup_steps": rules.count_or_zero(),
    "lr": rules.learning_rate(),
    "weight_decay": rules.non_negative(),
    "return_scale": rules.positive(),
    "hidden": rules.width(),
    "depth": rules.layers(),
    "dropout": rules.between(0.0, 1.0, open_high=True),
    "returns_to_go": rules.one_of(RETURNS_TO_GO),
}
#: The ranges of the settings of :class:`WindowSettings`.
WINDOW_RULES = {
    **REGRESSION_RULES,
    "context_length": rules.at_least(1, at_most=100_000),
    "eval_context_length": rules.at_least(1, at_most=100_000),
    "grad_clip": rules.non_negative(),
}
RULES = {
    **WINDOW_RULES,
    "embed_dim": rules.width(),
    "n_layer": rules.layers(),
    "n_head": rules.layers(),
}


def check_window(settings: dict[str, Any]) -> None:
    """A window family is evaluated on at most the context it was trained on."""
    if settings["eval_context_length"] > settings["context_length"]:
        raise InputError(
            f"eval_context_length ({settings['eval_context_length']}) must be at most context_length "
            f"({settings['context_length']}): a model is evaluated on at most the context it was "
            "trained on"
        )


def check_settings(settings: dict[str, Any]) -> None:
    """What no single rule says: MODT's heads split its embedding evenly, and it is evaluated on at
    most the context it was trained on."""
    if settings["embed_dim"] % settings["n_head"]:
        raise InputError(
            f"embed_dim ({settings['embed_dim']}) must be divisible by n_head ({settings['n_head']}): "
            "each attention head takes an equal share of the embedding"
        )
    check_window(settings)


#: The training definitions a checkpoint records and an evaluation must agree with.
DEFINITIONS = ("returns_to_go", "statistics_from")
#: 3: the settings under "settings" (2 named them "hp"); 2: BC on stacked states, actions in [-1, 1]
#: units, clipped states, the training definitions.
FORMAT_VERSION = 3
READS_VERSIONS = (2, 3)
#: What a PEDA checkpoint holds beyond the core's keys (the agent applies the scale itself).
CHECKPOINT_KEYS = ("return_scale", "returns_to_go")


# --------------------------------------------------------------------------- dataset -> tensors
def returns_to_go(rewards: np.ndarray, traj_starts: np.ndarray, traj_lengths: np.ndarray) -> np.ndarray:
    """Raw multi-objective return-to-go per step, ``rtg_t = sum_{t' >= t} r_t'`` within each
    trajectory, as a float64 (N, n_obj) array (vectorised reverse cumulative sums)."""
    r = np.asarray(rewards, dtype=np.float64)
    suffix = np.zeros((r.shape[0] + 1, r.shape[1]), dtype=np.float64)
    suffix[:-1] = np.cumsum(r[::-1], axis=0)[::-1]  # suffix[i] = sum_{j >= i} r_j over the file
    ends = np.repeat(np.asarray(traj_starts) + np.asarray(traj_lengths), traj_lengths)
    return suffix[:-1] - suffix[ends]


@dataclass
class TrainingTensors(DeviceData):
    """The dataset as contiguous tensors on the training device, one row per step."""

    actions: torch.Tensor  # (N, act_dim) float32, in [-1, 1] units of the action bounds
    preferences: torch.Tensor  # (N, n_obj) float32
    returns_to_go: torch.Tensor  # (N, n_obj) float32, the scaled per-step g_t
    rewards: torch.Tensor | None  # (N, n_obj) float32 scaled raw rewards (``peda``: MODT's windows)
    timesteps: torch.Tensor  # (N,) int64, t within the trajectory
    traj_end: torch.Tensor  # (N,) int64, row after the last step of the row's trajectory


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
        raise ValueError(f"rtg_definition must be one of {', '.join(RETURNS_TO_GO)}, got {rtg_definition!r}")
    mean, std = observation_stats(ds.observations) if stats is None else stats
    states = normalise_states(ds.observations, mean, std)
    actions = normalise_actions(ds.actions, act_low, act_high)
    rtg = returns_to_go(ds.rewards, ds.traj_starts, ds.traj_lengths)
    if rtg_definition == "weighted":
        g = ds.preferences.astype(np.float64) * rtg
        rewards = None
    else:
        steps_left = np.repeat(ds.traj_lengths, ds.traj_lengths) - ds.steps
        g = rtg * ((max_episode_steps - ds.steps) / steps_left)[:, None]
        rewards = ds.rewards * np.float32(return_scale)
    g = g * float(return_scale)

    def to(x, dtype=np.float32):
        return device_tensor(x, device, dtype)

    return TrainingTensors(
        states=to(states),
        actions=to(actions),
        preferences=to(ds.preferences),
        returns_to_go=to(g),
        rewards=None if rewards is None else to(rewards),
        timesteps=to(ds.steps, np.int64),
        traj_end=to(np.repeat(ds.traj_starts + ds.traj_lengths, ds.traj_lengths), np.int64),
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
        return {**data.rows(start, "states", "actions", "preferences", "returns_to_go", "timesteps"), "mask": None}
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


# --------------------------------------------------------------------------- optimisation
def warmup_factor(warmup_steps: int):
    """Linear warm-up: the learning rate of step s (0-based) is lr * min(1, (s + 1) / warmup)."""
    if warmup_steps <= 0:
        return lambda step: 1.0
    return lambda step: min(1.0, (step + 1) / warmup_steps)


def make_optimizer(model: torch.nn.Module, settings: dict, device: torch.device):
    """AdamW over all parameters (torch's fused kernel: the same update rule in one pass over the
    parameters) with the linear warm-up schedule."""
    opt = torch.optim.AdamW(model.parameters(), lr=settings["lr"], weight_decay=settings["weight_decay"], fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_factor(settings["warmup_steps"]))
    return opt, sched


# --------------------------------------------------------------------------- the training core's hooks
def prepare(ds: Dataset, settings: dict, device: torch.device, stats, facts: dict) -> TrainingTensors:
    """The dataset as :class:`TrainingTensors` for the training core."""
    return prepare_tensors(
        ds,
        settings["return_scale"],
        device,
        rtg_definition=settings["returns_to_go"],
        stats=stats,
        act_low=facts["act_low"],
        act_high=facts["act_high"],
        max_episode_steps=facts["max_episode_steps"],
    )


class SequenceLearner(CoreLearner):
    """A policy network with PEDA's call signature, AdamW with the linear warm-up, and the supervised
    action regression (:func:`batch_loss`) on batches of :func:`gather_batch`: single steps when
    ``context_length`` is None (MORvS), windows otherwise; gradients clipped at ``clip`` (0: off).
    Other families on PEDA's backbone (:mod:`morl.families.hyper`, :mod:`morl.families.manifold`)
    learn with it too."""

    policy_optimizer = "model"

    def __init__(
        self,
        policy: torch.nn.Module,
        data: TrainingTensors,
        settings: dict,
        device: torch.device,
        *,
        context_length: int | None = None,
        clip: float = 0.0,
    ):
        super().__init__()
        self.data = data
        self.batch_size = settings["batch_size"]
        self.context_length = context_length
        self.clip = clip
        self.autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
        self.return_scale = settings["return_scale"]
        self.policy = policy
        opt, sched = make_optimizer(self.policy, settings, device)
        self.modules = {"model": self.policy}
        self.optimizers = {"model": opt}
        self.schedulers = {"model": sched}
        self.policy.train()

    def sample(self, generator: torch.Generator) -> dict[str, torch.Tensor]:
        start = sample_indices(generator, self.data.n_steps, self.batch_size)
        return gather_batch(self.data, start, self.context_length)

    def update(self, batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        opt = self.optimizers["model"]
        with self.autocast:
            loss = batch_loss(self.policy, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.clip, foreach=True)
        opt.step()
        self.schedulers["model"].step()
        return {"loss": loss.detach()}

    def checkpoint_entries(self) -> dict[str, Any]:
        return {"return_scale": self.return_scale}


class Learner(SequenceLearner):
    """One PEDA network trained by :class:`SequenceLearner`; only MODT's gradients are clipped."""

    def __init__(
        self, model_name: str, data: TrainingTensors, dims: Dims, settings: dict, device: torch.device, facts: dict
    ):
        policy = build_env_model(model_name, dims, settings, facts).to(device)
        super().__init__(
            policy,
            data,
            settings,
            device,
            context_length=window_length(model_name, settings),
            clip=settings["grad_clip"] if is_transformer(model_name) else 0.0,
        )


class SequenceNetwork(Protocol):
    """A network trained by :class:`SequenceLearner` and evaluated by :class:`~morl.families.peda_agent.Agent`:
    PEDA's call signature and action head.

    ``model(states, actions, preferences, returns_to_go, timesteps, mask=None)``: on single steps
    (MORvS's inputs) states (B, obs_dim), preferences and scaled returns-to-go (B, n_obj),
    timesteps (B,); on windows states (B, K, obs_dim), actions (B, K, act_dim) in [-1, 1] units,
    returns-to-go (B, K, n_obj), timesteps (B, K), ``mask`` (B, K) False on left padding, and
    preferences (B, K, n_obj) in training or (B, n_obj) in evaluation. It returns actions inside
    the env's bounds, (B, act_dim) or (B, K, act_dim); ``action_head.to_unit`` maps actions in
    the bounds onto [-1, 1] (:class:`~morl.families.peda_networks.ActionBox`).
    """

    action_head: Any

    def __call__(self, states, actions, preferences, returns_to_go, timesteps, mask=None) -> torch.Tensor: ...


def network_of(cls: type, *keys: str) -> Callable[[Dims, dict, Any, Any, int], SequenceNetwork]:
    """A family's ``network(dims, settings, act_low, act_high, max_episode_steps)`` for :func:`sequence_family`:
    ``cls(NetworkEnv(obs_dim, act_dim, n_obj, act_low, act_high, max_episode_steps), **{key: settings[key]})``."""

    def network(dims: Dims, settings: dict, act_low, act_high, max_episode_steps: int) -> SequenceNetwork:
        env = NetworkEnv(dims.obs_dim, dims.act_dim, dims.n_obj, act_low, act_high, max_episode_steps)
        return cls(env, **{key: settings[key] for key in keys})

    return network


def sequence_family(
    network: Callable[[Dims, dict, Any, Any, int], SequenceNetwork], *, window: bool = False
) -> tuple[type, Callable]:
    """The ``Learner`` and ``build_agent`` of a family whose network (a :class:`SequenceNetwork`)
    learns by PEDA's action regression on PEDA's data (``prepare``).

    ``network(dims, settings, act_low, act_high, max_episode_steps)`` builds it. Single steps
    (``window=False``): trained and evaluated as MORvS(P) is, settings :class:`RegressionSettings`.
    Windows (``window=True``): trained as MODT is, on windows of ``context_length`` steps with the
    gradients clipped at ``grad_clip``, and evaluated on its rolling window of the last
    ``eval_context_length`` steps, settings :class:`WindowSettings`."""

    class FamilyLearner(SequenceLearner):
        """The family's network trained by the action regression, on single steps or windows."""

        def __init__(
            self, model_name: str, data: TrainingTensors, dims: Dims, settings: dict, device: torch.device, facts: dict
        ):
            policy = network(dims, settings, facts["act_low"], facts["act_high"], facts["max_episode_steps"])
            super().__init__(
                policy.to(device),
                data,
                settings,
                device,
                context_length=settings["context_length"] if window else None,
                clip=settings["grad_clip"] if window else 0.0,
            )

    def build_family_agent(ckpt: dict[str, Any], device: torch.device) -> Agent:
        """The evaluation agent of a checked final checkpoint: a window or a step agent."""
        dims = Dims(ckpt["obs_dim"], ckpt["act_dim"], ckpt["n_obj"])
        model = network(dims, ckpt["settings"], ckpt["act_low"], ckpt["act_high"], ckpt["max_episode_steps"])
        if not window:
            return sequence_agent(model, ckpt, device, "step")
        return sequence_agent(model, ckpt, device, "window", ckpt["settings"]["eval_context_length"])

    return FamilyLearner, build_family_agent


__all__ = [
    "CHECKPOINT_KEYS",
    "DEFINITIONS",
    "FORMAT_VERSION",
    "READS_VERSIONS",
    "RULES",
    "Learner",
    "Settings",
    "build_agent",
    "check_settings",
    "prepare",
]
