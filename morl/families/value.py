"""Shared machinery of the value-based offline MORL families: TD3+BC(P), IQL(P), CQL(P) and CQL.

Each family module (:mod:`morl.families.td3bc`, :mod:`morl.families.iql`,
:mod:`morl.families.cql`) holds its settings and its update rule (a :class:`Learner`); what they
have in common lives here.

Transitions. A dataset becomes one row per step (:func:`prepare_transitions`): the state and the
next state normalised with the chosen statistics (``statistics_from``,
:mod:`morl.normalisation`) and clipped to ±:data:`~morl.normalisation.STATE_CLIP`; the action clipped to the
action bounds and mapped onto [-1, 1], the units every network here acts in; the raw reward
vector times ``reward_scale`` (one factor for all objectives, so the trade-off a preference
expresses is unchanged); ``not_done = 1 - terminal``, since only a termination ends the return
(a ``timeout`` step still bootstraps from its next observation, ``docs/data-format.md``); and the
trajectory's preference.

Batches. One ``torch.randint`` per batch from a seeded CPU ``torch.Generator`` draws the rows
uniformly. Families that relabel preferences (``relabel``) then replace the preference of the
first ``round(relabel * batch_size)`` rows with fresh draws from the uniform distribution on the
simplex, Dirichlet(1), from the same generator (:func:`relabel_preferences`): the reward vector
of a transition does not depend on the preference it was collected under, so every transition
is valid for every preference. Since the rows are drawn uniformly, the first rows are as good a
random subset as any.

Training runs in the training core (:mod:`morl.trainer`), with a family's learner built on
:class:`ValueLearner`: one step is one critic update; the curve's ``loss`` is the critic loss,
its ``lr`` the policy's learning rate, and its other columns the other losses each family reports
(the actor's, IQL's value function's, CQL's regulariser and entropy temperature). Training is float32 on every device. The final checkpoint
keeps the policy and, for analysis, the value functions (``critic_state_dict``).

Evaluation (:class:`ValueAgent`) runs the deterministic policy: the tanh of the actor's mean,
``pi(s, w)`` or ``pi(s)``, mapped from [-1, 1] back onto the env's action bounds.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from morl import settings as rules
from morl.checkpoints import CheckpointError, load_checkpoint
from morl.data import Dataset
from morl.families.base import CoreSettings, DeviceData, Dims, Learner, cpu_state_dict, device_tensor, setting
from morl.normalisation import normalise_actions, normalise_states, observation_stats
from morl.rollout import TrainedAgent

#: The checkpoint format version the value-based families write; 1 named the settings "hp" and
#: recorded PEDA's "returns_to_go" as None.
FORMAT_VERSION = 2
READS_VERSIONS = (1, 2)
#: What a value-based checkpoint holds beyond the core's keys.
CHECKPOINT_KEYS = ("critic_state_dict",)
#: The training definitions a checkpoint records and an evaluation must agree with.
DEFINITIONS = ("statistics_from",)

#: Log-std bounds of the Gaussian policies (IQL's and CQL's), as in CORL.
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class ValueSettings(CoreSettings):
    """What every value-based family sets; the defaults are those CORL and the TD3+BC and IQL papers
    share (a family gives its own where its source differs)."""

    steps: int = setting(1_000_000, "critic updates (1M in CORL and in the TD3+BC and IQL papers)")
    batch_size: int = setting(256, "transitions per batch (CORL and the papers)")
    checkpoint_every: int = setting(1000, "steps between resumable partial states (0: never); not the sources'")
    statistics_from: str = setting("dataset", "state statistics of the training dataset (the sources' code)")
    hidden: int = setting(256, "hidden width of every network (CORL and the papers)")
    depth: int = setting(2, "hidden layers (the TD3+BC and IQL papers: two of 256)")
    discount: float = setting(0.99, "discount factor (CORL and the papers)")
    tau: float = setting(0.005, "Polyak rate of the target critics (CORL and the papers)")
    reward_scale: float = setting(1.0, "one factor on every objective's reward (1: none, as CORL)")


#: Checks of the settings every value-based family has (beyond the core's).
COMMON_RULES: dict[str, rules.Rule] = {
    "hidden": rules.at_least(1),
    "depth": rules.at_least(1),
    "discount": rules.between(0.0, 1.0),
    "tau": rules.between(0.0, 1.0, open_low=True),
    "reward_scale": rules.positive(),
}


@dataclass(frozen=True)
class ActorCriticSettings(ValueSettings):
    """What the actor-critic families on relabelled preferences (TD3+BC, IQL) add to every
    value-based family's settings."""

    actor_lr: float = setting(3e-4, "actor learning rate (the TD3+BC and IQL papers; IQL decays it by a cosine)")
    critic_lr: float = setting(3e-4, "critic learning rate (the TD3+BC and IQL papers)")
    relabel: float = setting(
        0.5, "share of each batch with fresh Dirichlet(1) preferences (this project's, as its TD3 behavior policies)"
    )


#: Checks of :class:`ActorCriticSettings`.
ACTOR_CRITIC_RULES: dict[str, rules.Rule] = {
    **COMMON_RULES,
    "actor_lr": rules.positive(),
    "critic_lr": rules.positive(),
    "relabel": rules.between(0.0, 1.0),
}


# --------------------------------------------------------------------------- transitions
@dataclass
class Transitions(DeviceData):
    """The dataset as contiguous tensors on the training device, one row per step."""

    actions: torch.Tensor  # (N, act_dim) float32, in [-1, 1] units of the action bounds
    rewards: torch.Tensor  # (N, n_obj) float32, raw reward vector * reward_scale
    next_states: torch.Tensor  # (N, obs_dim) float32, normalised and clipped
    not_done: torch.Tensor  # (N, 1) float32, 0 where the episode terminated
    preferences: torch.Tensor  # (N, n_obj) float32, the trajectory's preference


def prepare_transitions(
    ds: Dataset,
    reward_scale: float = 1.0,
    device: torch.device | str = "cpu",
    *,
    stats: tuple[np.ndarray, np.ndarray] | None = None,
    act_low=None,
    act_high=None,
) -> Transitions:
    """The transitions of ``ds`` on ``device`` (module docstring). ``stats``: the (mean, std) to
    normalise states with, default :func:`~morl.normalisation.observation_stats` of ``ds``;
    ``act_low``/``act_high`` default to [-1, 1]."""
    mean, std = observation_stats(ds.observations) if stats is None else stats
    actions = normalise_actions(ds.actions, act_low, act_high)
    not_done = 1.0 - ds.terminals.astype(np.float32)[:, None]

    def to(x):
        return device_tensor(x, device)

    return Transitions(
        states=to(normalise_states(ds.observations, mean, std)),
        actions=to(actions),
        rewards=to(ds.rewards * np.float32(reward_scale)),
        next_states=to(normalise_states(ds.next_observations, mean, std)),
        not_done=to(not_done),
        preferences=to(ds.preferences),
        obs_mean=np.asarray(mean, np.float32),
        obs_std=np.asarray(std, np.float32),
    )


def sample_batch(generator: torch.Generator, data: Transitions, batch_size: int) -> dict[str, torch.Tensor]:
    """``batch_size`` rows drawn uniformly with one ``torch.randint`` from the CPU ``generator``."""
    idx = torch.randint(data.n_steps, (batch_size,), generator=generator).to(data.states.device)
    return data.rows(idx, "states", "actions", "rewards", "next_states", "not_done", "preferences")


def dirichlet(generator: torch.Generator, n: int, n_obj: int) -> torch.Tensor:
    """``n`` draws (CPU float32) from Dirichlet(1, ..., 1), the uniform distribution on the simplex:
    normalised Exp(1) variables, ``-log(1 - U)`` of uniforms from ``generator``."""
    e = -torch.log1p(-torch.rand((n, n_obj), generator=generator, dtype=torch.float64))
    e = e.clamp_min(1e-300)
    return (e / e.sum(-1, keepdim=True)).float()


def relabel_preferences(generator: torch.Generator, preferences: torch.Tensor, fraction: float) -> torch.Tensor:
    """``preferences`` (B, n_obj) with its first ``round(fraction * B)`` rows replaced by
    :func:`dirichlet` draws (made on the CPU, so every device gets the same ones)."""
    b, n_obj = preferences.shape
    k = int(round(fraction * b))
    if k == 0:
        return preferences
    fresh = dirichlet(generator, k, n_obj).to(preferences.device)
    return torch.cat([fresh, preferences[k:]], 0)


# --------------------------------------------------------------------------- networks
def mlp(in_dim: int, out_dim: int, hidden: int, depth: int) -> nn.Sequential:
    """``depth`` hidden layers of width ``hidden`` with ReLU, then a linear output layer."""
    layers: list[nn.Module] = []
    d = in_dim
    for _ in range(depth):
        layers += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    layers.append(nn.Linear(d, out_dim))
    return nn.Sequential(*layers)


def orthogonal_init(net: nn.Sequential, last_gain: float = 1e-2) -> nn.Sequential:
    """CORL's initialisation of CQL's networks: orthogonal hidden layers (gain sqrt 2, zero bias)
    and a small orthogonal output layer."""
    linears = [m for m in net if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        nn.init.orthogonal_(layer.weight, gain=last_gain if i == len(linears) - 1 else math.sqrt(2))
        nn.init.zeros_(layer.bias)
    return net


def _inputs(conditioned: bool, states: torch.Tensor, preferences: torch.Tensor | None, *rest: torch.Tensor):
    parts = [states, *rest]
    if conditioned:
        parts.append(preferences)
    return torch.cat(parts, -1) if len(parts) > 1 else states


#: What a policy's network outputs: a deterministic action (TD3+BC), the mean of a Gaussian with
#: a state-independent log std (IQL), or mean and log std of a tanh-squashed Gaussian (CQL).
POLICY_HEADS = ("deterministic", "gaussian", "tanh-gaussian")


class Policy(nn.Module):
    """A stateless actor ``pi(s, w)`` (``conditioned``) or ``pi(s)``, in [-1, 1] action units.

    ``forward`` gives the deterministic action, the tanh of the mean, in every head.
    """

    def __init__(self, dims: Dims, hidden: int, depth: int, *, conditioned: bool, head: str):
        super().__init__()
        if head not in POLICY_HEADS:
            raise ValueError(f"unknown policy head {head!r}")
        self.head = head
        self.conditioned = conditioned
        self.act_dim = dims.act_dim
        in_dim = dims.obs_dim + (dims.n_obj if conditioned else 0)
        self.net = mlp(in_dim, 2 * dims.act_dim if head == "tanh-gaussian" else dims.act_dim, hidden, depth)
        if head == "gaussian":
            self.log_std = nn.Parameter(torch.zeros(dims.act_dim))

    def _out(self, states, preferences):
        return self.net(_inputs(self.conditioned, states, preferences))

    def forward(self, states: torch.Tensor, preferences: torch.Tensor | None = None) -> torch.Tensor:
        out = self._out(states, preferences)
        return torch.tanh(out[..., : self.act_dim])

    def log_prob(self, states, preferences, actions) -> torch.Tensor:
        """``gaussian`` head: log density of ``actions`` under N(tanh(mean), exp(log_std)^2), summed
        over the action dimensions."""
        mean = torch.tanh(self._out(states, preferences))
        log_std = self.log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        z = (actions - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def sample(self, states, preferences) -> tuple[torch.Tensor, torch.Tensor]:
        """``tanh-gaussian`` head: a reparameterised sample ``tanh(u)``, ``u ~ N(mean, std^2)`` (noise
        from torch's global generator), and its log density after the squashing."""
        out = self._out(states, preferences)
        mean, log_std = out[..., : self.act_dim], out[..., self.act_dim :]
        log_std = (log_std - 1.0).clamp(LOG_STD_MIN, LOG_STD_MAX)  # CORL's log-std offset of -1
        eps = torch.randn_like(mean)
        u = mean + torch.exp(log_std) * eps
        log_prob = -0.5 * eps.pow(2) - log_std - 0.5 * math.log(2 * math.pi)
        # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u|
        log_prob = log_prob - 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))
        return torch.tanh(u), log_prob.sum(-1)


class TwinCritic(nn.Module):
    """Two critics ``Q_k(s, a[, w]) in R^out_dim`` (one value per objective, or one scalar)."""

    def __init__(self, dims: Dims, out_dim: int, hidden: int, depth: int, *, conditioned: bool):
        super().__init__()
        self.conditioned = conditioned
        in_dim = dims.obs_dim + dims.act_dim + (dims.n_obj if conditioned else 0)
        self.q1 = mlp(in_dim, out_dim, hidden, depth)
        self.q2 = mlp(in_dim, out_dim, hidden, depth)

    def forward(self, states, actions, preferences=None) -> tuple[torch.Tensor, torch.Tensor]:
        x = _inputs(self.conditioned, states, preferences, actions)
        return self.q1(x), self.q2(x)

    def first(self, states, actions, preferences=None) -> torch.Tensor:
        return self.q1(_inputs(self.conditioned, states, preferences, actions))


class StateValue(nn.Module):
    """``V(s[, w]) in R^out_dim``."""

    def __init__(self, dims: Dims, out_dim: int, hidden: int, depth: int, *, conditioned: bool):
        super().__init__()
        self.conditioned = conditioned
        self.net = mlp(dims.obs_dim + (dims.n_obj if conditioned else 0), out_dim, hidden, depth)

    def forward(self, states, preferences=None) -> torch.Tensor:
        return self.net(_inputs(self.conditioned, states, preferences))


class Scalar(nn.Module):
    """One learnable number (e.g. SAC's log entropy temperature)."""

    def __init__(self, value: float = 0.0):
        super().__init__()
        self.value = nn.Parameter(torch.tensor(float(value)))

    def forward(self) -> torch.Tensor:
        return self.value


def min_scalarised(q1: torch.Tensor, q2: torch.Tensor, preferences: torch.Tensor) -> torch.Tensor:
    """Per row, the vector of the twin critic whose scalarised value ``w . Q`` is smaller."""
    first = (q1 * preferences).sum(-1, keepdim=True) <= (q2 * preferences).sum(-1, keepdim=True)
    return torch.where(first, q1, q2)


def adam(module: nn.Module, lr: float, device: torch.device) -> torch.optim.Adam:
    """Adam with torch's fused kernel (the same update rule in one pass), on CPU and CUDA."""
    return torch.optim.Adam(module.parameters(), lr=lr, fused=True)


def minimise(opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """One step of ``opt`` down the gradient of ``loss``: the old gradients dropped (set to None),
    ``loss`` back-propagated, the parameters updated."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging ``target <- (1 - tau) target + tau source``."""
    for t, s in zip(target.parameters(), source.parameters()):
        t.lerp_(s, tau)


def target_of(source: nn.Module) -> nn.Module:
    """A target network: a copy of ``source`` without gradients, moved by :func:`soft_update`."""
    return copy.deepcopy(source).requires_grad_(False)


# --------------------------------------------------------------------------- learners
def prepare(ds: Dataset, settings: dict, device: torch.device, stats, facts: dict) -> Transitions:
    """The training core's view of a dataset for a value-based family: :func:`prepare_transitions`."""
    return prepare_transitions(
        ds, settings.get("reward_scale", 1.0), device, stats=stats, act_low=facts["act_low"], act_high=facts["act_high"]
    )


class ValueLearner(Learner):
    """A value-based family's learner: uniform batches of transitions, their preferences relabelled
    when the family has a ``relabel`` setting; the checkpoint keeps the value functions named in
    ``critics`` (the names in ``modules``) beside the policy."""

    critics: tuple[str, ...] = ()

    def __init__(self, data: Transitions, settings: dict):
        super().__init__()
        self.data = data
        self.settings = settings
        self.batch_size = settings["batch_size"]
        self.relabel = float(settings.get("relabel", 0.0))

    def add(self, name: str, module: nn.Module, device: torch.device, lr: float | None = None) -> nn.Module:
        """``module`` on ``device``, kept in ``modules`` as ``name`` and, given a learning rate ``lr``,
        trained by an :func:`adam` of the same name in ``optimizers``; returns the module on the device."""
        module = module.to(device)
        self.modules[name] = module
        if lr is not None:
            self.optimizers[name] = adam(module, lr, device)
        return module

    def sample(self, generator: torch.Generator) -> dict[str, torch.Tensor]:
        batch = sample_batch(generator, self.data, self.batch_size)
        if self.relabel > 0:
            batch["preferences"] = relabel_preferences(generator, batch["preferences"], self.relabel)
        return batch

    def checkpoint_entries(self) -> dict[str, Any]:
        return {"critic_state_dict": {k: cpu_state_dict(self.modules[k]) for k in self.critics}}


def dims_of(ckpt: dict) -> Dims:
    return Dims(ckpt["obs_dim"], ckpt["act_dim"], ckpt["n_obj"])


def check_critics(ckpt: dict) -> None:
    if not isinstance(ckpt["critic_state_dict"], dict):
        raise ValueError("'critic_state_dict' must be a dict of tensors")


def build_agent(policy: Policy, ckpt: dict, device: torch.device) -> ValueAgent:
    """The :class:`ValueAgent` of a checked checkpoint whose policy network is ``policy``."""
    return ValueAgent.from_checkpoint(policy, ckpt, device, act_low=ckpt["act_low"], act_high=ckpt["act_high"])


def load_critics(family, path, build_critics) -> dict[str, nn.Module]:
    """The value functions a final checkpoint of ``family`` keeps (eval mode, CPU), by name, built by
    ``build_critics(model_name, dims, settings)``; they take states normalised with the checkpoint's
    ``obs_mean``/``obs_std`` and actions in [-1, 1] units."""
    ckpt = load_checkpoint(family, path)
    try:
        check_critics(ckpt)
        nets = build_critics(ckpt["model_name"], dims_of(ckpt), ckpt["settings"])
        for name, net in nets.items():
            net.load_state_dict(ckpt["critic_state_dict"][name], strict=True)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(path, f"value-function weights do not fit the networks ({exc})") from exc
    return {name: net.eval() for name, net in nets.items()}


# --------------------------------------------------------------------------- evaluation
class ValueAgent(TrainedAgent):
    """A batched, deterministic, stateless policy for evaluation (eval mode, no gradients).

    The protocol of :class:`morl.rollout.Agent`: ``reset(preferences, target_returns)`` starts
    ``B`` episodes (the targets are checked but unused: value-based agents are conditioned on the
    preference alone), then ``act(obs)`` and ``observe(actions, rewards)`` alternate once per step.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        obs_mean: torch.Tensor,
        obs_std: torch.Tensor,
        act_low,
        act_high,
        n_obj: int,
        max_episode_steps: int,
        device: torch.device,
    ):
        act_low = torch.as_tensor(act_low, dtype=torch.float32, device=device)
        super().__init__(
            policy,
            obs_mean=obs_mean,
            obs_std=obs_std,
            n_obj=n_obj,
            act_dim=int(act_low.shape[0]),
            max_episode_steps=max_episode_steps,
            device=device,
        )
        self.act_low = act_low
        self.act_high = torch.as_tensor(act_high, dtype=torch.float32, device=device)
        self._center = (self.act_high + self.act_low) / 2
        self._half = (self.act_high - self.act_low) / 2

    def _act(self, s: torch.Tensor) -> torch.Tensor:
        """The policy's action in [-1, 1] mapped onto the action box, clipped to its bounds."""
        unit = self.model(s, self._w32)
        return torch.maximum(torch.minimum(self._center + self._half * unit, self.act_high), self.act_low)
