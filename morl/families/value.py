"""Shared machinery of the value-based offline MORL families: TD3+BC(P), IQL(P), CQL(P) and CQL.

Each family module (:mod:`morl.families.td3bc`, :mod:`morl.families.iql`,
:mod:`morl.families.cql`) holds its settings and its update rule (a :class:`Learner`); what they
have in common lives here.

Transitions. A dataset becomes one row per step (:func:`prepare_transitions`): the state and the
next state normalised with the chosen statistics (``statistics_from``, as in
:mod:`morl.training`) and clipped to ±:data:`~morl.models.STATE_CLIP`; the action clipped to the
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

Training (:func:`train_family`) follows :func:`morl.training.train`: all randomness comes from
the seed (the batch generator above; network initialisation and the algorithms' own noise use
torch's global generator, seeded inside ``torch.random.fork_rng`` so the caller's state is left
alone); every ``checkpoint_every`` steps the whole training state goes atomically to
``<checkpoint>.partial`` and a rerun of the same run (same model, seed, settings, dataset,
reference dataset, device type and package version) continues from it with bit-identical
results on the CPU; the same inputs give byte-identical checkpoint files. Training is float32
on every device. One step is one critic update; the curve's ``loss`` is the critic loss and its
``lr`` the policy's learning rate.

Evaluation (:class:`ValueAgent`) runs the deterministic policy: the tanh of the actor's mean,
``pi(s, w)`` or ``pi(s)``, mapped from [-1, 1] back onto the env's action bounds.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from morl import __version__
from morl.agents import CheckpointError, read_checkpoint_dict
from morl.data import Dataset, file_sha256, load_dataset
from morl.errors import InputError
from morl.models import STATE_CLIP, STATISTICS_FROM
from morl.progress import Progress
from morl.rollout import as_batch
from morl.runtime import resolve_device
from morl.torch_io import save_torch
from morl.training import (
    _cpu_state_dict,
    _dataset_facts,
    _load_partial,
    curve_interval,
    load_reference,
    observation_stats,
    provenance,
    resolve_reference,
    run_summary,
    write_curve,
)

log = logging.getLogger(__name__)

#: Keys every final checkpoint of a value-based family holds.
CHECKPOINT_KEYS = (
    "format",
    "format_version",
    "model_name",
    "display_name",
    "obs_dim",
    "act_dim",
    "n_obj",
    "hp",
    "seed",
    "state_dict",
    "critic_state_dict",
    "obs_mean",
    "obs_std",
    "statistics_from",
    "reference_dataset",
    "reference_dataset_sha256",
    "max_episode_steps",
    "act_low",
    "act_high",
    "env_id",
    "dataset_path",
    "dataset_sha256",
    "dataset_meta",
    "steps",
    "final_loss",
    "morl_version",
)

#: Log-std bounds of the Gaussian policies (IQL's and CQL's), as in CORL.
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Rule:
    """A range check of one setting: ``test(value)`` must hold; ``text`` says what is allowed."""

    test: Callable[[Any], bool]
    text: str


def positive() -> Rule:
    return Rule(lambda v: v > 0, "> 0")


def non_negative() -> Rule:
    return Rule(lambda v: v >= 0, ">= 0")


def at_least(n: int) -> Rule:
    return Rule(lambda v: v >= n, f">= {n}")


def between(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> Rule:
    lo, hi = "(" if open_low else "[", ")" if open_high else "]"
    return Rule(
        lambda v: (v > low if open_low else v >= low) and (v < high if open_high else v <= high),
        f"in {lo}{low:g}, {high:g}{hi}",
    )


def one_of(choices: tuple[str, ...]) -> Rule:
    return Rule(lambda v: v in choices, f"one of {', '.join(choices)}")


#: Checks of the settings every value-based family has.
COMMON_RULES: dict[str, Rule] = {
    "steps": at_least(1),
    "batch_size": at_least(1),
    "checkpoint_every": at_least(0),
    "hidden": at_least(1),
    "depth": at_least(1),
    "statistics_from": one_of(tuple(STATISTICS_FROM)),
    "discount": between(0.0, 1.0),
    "tau": between(0.0, 1.0, open_low=True),
    "reward_scale": positive(),
}


def resolve_settings_of(cls: type, values: dict | None, label: str, rules: dict[str, Rule]) -> dict[str, Any]:
    """``values`` with the defaults of the frozen dataclass ``cls`` filled in, as a plain dict in
    field order. Unknown keys, values of the wrong type (a bool is not a number; an integer
    setting takes whole numbers) and values outside their :class:`Rule` raise an
    :class:`~morl.errors.InputError` naming the key and ``label`` (the family's display name)."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise InputError(f"settings for {label} must be a mapping, got {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in values if k not in fields]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise InputError(
            f"unknown setting{'s' if len(unknown) > 1 else ''} {names} for {label}; known: {', '.join(fields)}"
        )
    defaults = cls()
    out: dict[str, Any] = {}
    for name in fields:
        default = getattr(defaults, name)
        value = values.get(name, default)
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise InputError(f"setting {name!r} of {label} must be true or false, got {value!r}")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"setting {name!r} of {label} must be an integer, got {value!r}")
            if int(value) != value:
                raise InputError(f"setting {name!r} of {label} must be an integer, got {value!r}")
            value = int(value)
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"setting {name!r} of {label} must be a finite number, got {value!r}")
            value = float(value)
        elif isinstance(default, str):
            if not isinstance(value, str):
                raise InputError(f"setting {name!r} of {label} must be a string, got {value!r}")
        rule = rules.get(name)
        if rule is not None and not rule.test(value):
            raise InputError(f"setting {name!r} of {label} must be {rule.text}, got {value!r}")
        out[name] = value
    return dataclasses.asdict(cls(**out))


# --------------------------------------------------------------------------- transitions
@dataclass
class Transitions:
    """The dataset as contiguous tensors on the training device, one row per step."""

    states: torch.Tensor  # (N, obs_dim) float32, normalised and clipped
    actions: torch.Tensor  # (N, act_dim) float32, in [-1, 1] units of the action bounds
    rewards: torch.Tensor  # (N, n_obj) float32, raw reward vector * reward_scale
    next_states: torch.Tensor  # (N, obs_dim) float32, normalised and clipped
    not_done: torch.Tensor  # (N, 1) float32, 0 where the episode terminated
    preferences: torch.Tensor  # (N, n_obj) float32, the trajectory's preference
    obs_mean: np.ndarray
    obs_std: np.ndarray

    @property
    def n_steps(self) -> int:
        return int(self.states.shape[0])


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
    normalise states with, default :func:`~morl.training.observation_stats` of ``ds``;
    ``act_low``/``act_high`` default to [-1, 1]."""
    mean, std = observation_stats(ds.observations) if stats is None else stats

    def normalise(obs):
        out = (obs - mean) / std
        np.clip(out, -STATE_CLIP, STATE_CLIP, out=out)
        return out

    low = np.asarray([-1.0] * ds.act_dim if act_low is None else act_low, np.float32)
    high = np.asarray([1.0] * ds.act_dim if act_high is None else act_high, np.float32)
    actions = np.clip(ds.actions, low, high)
    actions -= (high + low) / 2
    actions /= (high - low) / 2
    not_done = 1.0 - ds.terminals.astype(np.float32)[:, None]

    def to(x):
        return torch.from_numpy(np.require(x, np.float32, ["C", "W"])).to(device=device)

    return Transitions(
        states=to(normalise(ds.observations)),
        actions=to(actions),
        rewards=to(ds.rewards * np.float32(reward_scale)),
        next_states=to(normalise(ds.next_observations)),
        not_done=to(not_done),
        preferences=to(ds.preferences),
        obs_mean=np.asarray(mean, np.float32),
        obs_std=np.asarray(std, np.float32),
    )


def sample_batch(generator: torch.Generator, data: Transitions, batch_size: int) -> dict[str, torch.Tensor]:
    """``batch_size`` rows drawn uniformly with one ``torch.randint`` from the CPU ``generator``."""
    idx = torch.randint(data.n_steps, (batch_size,), generator=generator).to(data.states.device)
    return {
        "states": data.states[idx],
        "actions": data.actions[idx],
        "rewards": data.rewards[idx],
        "next_states": data.next_states[idx],
        "not_done": data.not_done[idx],
        "preferences": data.preferences[idx],
    }


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
@dataclass(frozen=True)
class Dims:
    obs_dim: int
    act_dim: int
    n_obj: int


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
    kwargs = {"fused": True} if device.type == "cuda" else {"foreach": True}
    return torch.optim.Adam(module.parameters(), lr=lr, **kwargs)


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging ``target <- (1 - tau) target + tau source``."""
    for t, s in zip(target.parameters(), source.parameters()):
        t.lerp_(s, tau)


# --------------------------------------------------------------------------- learners
class Learner:
    """A family's networks, optimisers and update rule; subclasses fill the dicts in ``__init__``.

    ``modules``: everything with weights (targets included); ``optimizers`` and ``schedulers``;
    ``policy``: the actor the final checkpoint keeps; ``critics``: the names in ``modules`` of the
    value functions the final checkpoint also keeps (for analysis, not needed to act).
    """

    policy: Policy
    critics: tuple[str, ...] = ()
    policy_optimizer: str = "actor"

    def __init__(self) -> None:
        self.modules: dict[str, nn.Module] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.schedulers: dict[str, Any] = {}

    def update(self, batch: dict[str, torch.Tensor], step: int) -> torch.Tensor:
        """One training step on ``batch`` (``step`` counts from 0); returns the critic loss (detached)."""
        raise NotImplementedError

    def lr(self) -> float:
        """The policy's current learning rate (the curve's ``lr`` column)."""
        return float(self.optimizers[self.policy_optimizer].param_groups[0]["lr"])

    def state_dict(self) -> dict[str, Any]:
        return {
            "modules": {k: _cpu_state_dict(m) for k, m in self.modules.items()},
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

    def critic_state_dict(self) -> dict[str, dict[str, torch.Tensor]]:
        return {k: _cpu_state_dict(self.modules[k]) for k in self.critics}


@dataclass(frozen=True)
class FamilySpec:
    """What :func:`train_family` and :func:`load_family_agent` need to know about a family."""

    name: str
    models: dict[str, str]
    checkpoint_format: str
    partial_format: str
    format_version: int
    definitions: tuple[str, ...]
    resolve_settings: Callable[[dict | None], dict]
    #: (model_name, dims, settings, device) -> Learner, its networks initialised from torch's
    #: global generator on the CPU and then moved to ``device``
    make_learner: Callable[[str, Dims, dict, torch.device], Learner]
    #: (model_name, dims, settings) -> the evaluation Policy
    build_policy: Callable[[str, Dims, dict], Policy]
    #: (model_name, dims, settings) -> the value functions the checkpoint keeps, by name
    build_critics: Callable[[str, Dims, dict], dict[str, nn.Module]]
    #: True when batches get relabelled preferences (the ``relabel`` setting)
    relabels: bool = False

    def check_model(self, model_name: str) -> str:
        if model_name not in self.models:
            raise InputError(
                f"unknown model {model_name!r} for the {self.name} family; known: {', '.join(self.models)}"
            )
        return model_name


# --------------------------------------------------------------------------- training
def _save_partial(path: Path, state: dict) -> None:
    """Write the resumable training state atomically (tests wrap this to simulate a kill)."""
    save_torch(path, state)


def train_family(
    family: FamilySpec,
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
) -> dict[str, Any]:
    """Train one model of ``family``; arguments, outputs and summary as :func:`morl.training.train`
    (``settings`` are the family's, see its ``Settings``)."""
    family.check_model(model_name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    hp = family.resolve_settings(settings)
    dev = resolve_device(device)
    dataset_path = Path(dataset_path)
    checkpoint_path = Path(checkpoint_path)
    partial_path = checkpoint_path.with_name(checkpoint_path.name + ".partial")
    display = family.models[model_name]

    ds = load_dataset(dataset_path, expect_env=expect_env)
    facts = _dataset_facts(ds, dataset_path)
    dataset_sha = file_sha256(dataset_path)
    reference_path = resolve_reference(hp["statistics_from"], ds, dataset_path, reference_dataset)
    stats, reference_sha = None, None
    if reference_path is not None:
        same = reference_path == dataset_path
        stats = observation_stats((ds if same else load_reference(reference_path, ds, dataset_path)).observations)
        reference_sha = dataset_sha if same else file_sha256(reference_path)
    data = prepare_transitions(ds, hp["reward_scale"], dev, stats=stats, act_low=facts["act_low"],
                               act_high=facts["act_high"])  # fmt: skip
    dims = Dims(ds.obs_dim, ds.act_dim, ds.n_obj)
    relabel = float(hp.get("relabel", 0.0)) if family.relabels else 0.0
    fingerprint = {
        "family": family.name,
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

    with torch.random.fork_rng(devices=rng_devices):
        torch.manual_seed(seed)
        learner = family.make_learner(model_name, dims, hp, dev)
        sampler = torch.Generator(device="cpu")
        sampler.manual_seed(seed)

        step = 0
        curve: list[list[float]] = []
        loss_sum = torch.zeros((), device=dev)
        loss_count = 0
        state = _load_partial(partial_path, fingerprint, family.partial_format)
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
            log.info("%s: resuming from step %d", partial_path, step)
        resumed_from = step

        bar = Progress(total, f"train {display}", unit="step", enabled=progress, initial=step)
        t0 = time.perf_counter()
        while step < total:
            batch = sample_batch(sampler, data, hp["batch_size"])
            if relabel > 0:
                batch["preferences"] = relabel_preferences(sampler, batch["preferences"], relabel)
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
                rate = hp["batch_size"] * (step - resumed_from) / max(time.perf_counter() - t0, 1e-9)
                bar.update(0, loss=f"{mean_loss:.4g}", samples_s=f"{rate:.0f}")
            if hp["checkpoint_every"] and step % hp["checkpoint_every"] == 0 and step < total:
                _save_partial(
                    partial_path,
                    {
                        "format": family.partial_format,
                        "fingerprint": fingerprint,
                        "step": step,
                        "learner": learner.state_dict(),
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
        "format": family.checkpoint_format,
        "format_version": family.format_version,
        "family": family.name,
        "model_name": model_name,
        "display_name": display,
        "obs_dim": ds.obs_dim,
        "act_dim": ds.act_dim,
        "n_obj": ds.n_obj,
        "hp": hp,
        "seed": seed,
        "state_dict": _cpu_state_dict(learner.policy),
        "critic_state_dict": learner.critic_state_dict(),
        "obs_mean": torch.from_numpy(data.obs_mean.copy()),
        "obs_std": torch.from_numpy(data.obs_std.copy()),
        "returns_to_go": None,
        "statistics_from": hp["statistics_from"],
        **provenance(ds, facts, dataset_path, dataset_sha, reference_path, reference_sha, step, final_loss, dev),
    }
    save_torch(checkpoint_path, checkpoint)
    if curve_path is not None:
        write_curve(curve_path, curve)
    if partial_path.exists():
        partial_path.unlink()
    return run_summary(final_loss, step, resumed_from, hp["batch_size"], seconds, dev, checkpoint_path)


# --------------------------------------------------------------------------- checkpoints
def load_checkpoint(family: FamilySpec, path: os.PathLike | str) -> dict[str, Any]:
    """Read and check a final checkpoint of ``family`` (``torch.load(weights_only=True)``).

    Raises :class:`~morl.agents.CheckpointError` naming the file when it is missing, unreadable,
    holds anything but plain types and tensors, is a partial training state, belongs to another
    family or format version, or lacks keys / has inconsistent ones.
    """
    path = Path(path)
    ckpt = read_checkpoint_dict(path)
    fmt = ckpt.get("format")
    if fmt != family.checkpoint_format:
        raise CheckpointError(
            path, f"not a {family.name} agent checkpoint (format {fmt!r}, expected {family.checkpoint_format!r})"
        )
    if ckpt.get("format_version") != family.format_version:
        raise CheckpointError(
            path,
            f"checkpoint format version {ckpt.get('format_version')!r} is not supported "
            f"(expected {family.format_version})",
        )
    missing = [k for k in CHECKPOINT_KEYS if k not in ckpt]
    if missing:
        raise CheckpointError(path, f"checkpoint lacks key(s) {', '.join(missing)}")
    if ckpt["model_name"] not in family.models:
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
    if not isinstance(ckpt["state_dict"], dict) or not isinstance(ckpt["critic_state_dict"], dict):
        raise CheckpointError(path, "'state_dict' and 'critic_state_dict' must be dicts of tensors")
    try:
        ckpt["hp"] = family.resolve_settings(ckpt["hp"])
    except InputError as exc:
        raise CheckpointError(path, f"invalid settings ({exc})") from exc
    if ckpt["statistics_from"] != ckpt["hp"]["statistics_from"]:
        raise CheckpointError(path, "'statistics_from' differs from the one in its settings")
    return ckpt


def _dims(ckpt: dict) -> Dims:
    return Dims(ckpt["obs_dim"], ckpt["act_dim"], ckpt["n_obj"])


def load_family_critics(family: FamilySpec, path: os.PathLike | str) -> dict[str, nn.Module]:
    """The value functions a final checkpoint keeps (eval mode, CPU), by name; they take states
    normalised with the checkpoint's ``obs_mean``/``obs_std`` and actions in [-1, 1] units."""
    ckpt = load_checkpoint(family, path)
    try:
        nets = family.build_critics(ckpt["model_name"], _dims(ckpt), ckpt["hp"])
        for name, net in nets.items():
            net.load_state_dict(ckpt["critic_state_dict"][name], strict=True)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(path, f"value-function weights do not fit the networks ({exc})") from exc
    return {name: net.eval() for name, net in nets.items()}


def load_family_agent(
    family: FamilySpec, checkpoint_path: os.PathLike | str, device: str = "cpu", definitions: dict | None = None
) -> ValueAgent:
    """Load a final checkpoint of ``family`` as a batched evaluation :class:`ValueAgent`.

    ``definitions``: the training definitions the caller's settings say (at least the family's
    ``definitions`` keys; others, e.g. PEDA's ``returns_to_go``, are ignored); a checkpoint trained
    under others is refused with a :class:`~morl.agents.CheckpointError`.
    """
    ckpt = load_checkpoint(family, checkpoint_path)
    if definitions is not None:
        absent = [k for k in family.definitions if k not in definitions]
        if absent:
            raise InputError(f"the training definitions to check lack {', '.join(absent)}")
        trained = {k: ckpt[k] for k in family.definitions}
        wanted = {k: definitions[k] for k in family.definitions}
        if trained != wanted:
            say = lambda d: ", ".join(f"{k}: {v}" for k, v in d.items())  # noqa: E731
            raise CheckpointError(
                checkpoint_path,
                f"trained with {say(trained)}, but the settings say {say(wanted)}; evaluate it with the "
                "settings it was trained with, or retrain it",
            )
    dev = resolve_device(device)
    try:
        policy = family.build_policy(ckpt["model_name"], _dims(ckpt), ckpt["hp"])
        policy.load_state_dict(ckpt["state_dict"], strict=True)
    except (RuntimeError, ValueError) as exc:
        raise CheckpointError(checkpoint_path, f"weights do not fit the model ({exc})") from exc
    return ValueAgent(
        policy,
        model_name=ckpt["model_name"],
        obs_mean=ckpt["obs_mean"],
        obs_std=ckpt["obs_std"],
        act_low=ckpt["act_low"],
        act_high=ckpt["act_high"],
        n_obj=ckpt["n_obj"],
        max_episode_steps=ckpt["max_episode_steps"],
        device=dev,
        source=str(checkpoint_path),
        seed=ckpt.get("seed"),
        training={
            "statistics_from": ckpt["statistics_from"],
            "returns_to_go": None,
            "reference_dataset": ckpt["reference_dataset"],
            "reference_dataset_sha256": ckpt["reference_dataset_sha256"],
            "dataset_path": ckpt["dataset_path"],
            "dataset_sha256": ckpt["dataset_sha256"],
            "env_id": ckpt.get("env_id"),
            "hp": ckpt["hp"],
        },
    )


# --------------------------------------------------------------------------- evaluation
class ValueAgent:
    """A batched, deterministic, stateless policy for evaluation (eval mode, no gradients).

    Same protocol as :class:`morl.agents.Agent`: ``reset(preferences, target_returns)`` starts
    ``B`` episodes (the targets are checked but unused: value-based agents are conditioned on the
    preference alone), then ``act(obs)`` and ``observe(actions, rewards)`` alternate once per step.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        model_name: str,
        obs_mean: torch.Tensor,
        obs_std: torch.Tensor,
        act_low,
        act_high,
        n_obj: int,
        max_episode_steps: int,
        device: torch.device,
        source: str | None = None,
        seed: int | None = None,
        training: dict | None = None,
    ):
        self.model = policy.to(device).eval()
        self.model_name = model_name
        self.device = device
        self.obs_mean = obs_mean.to(device=device, dtype=torch.float32)
        self.obs_std = obs_std.to(device=device, dtype=torch.float32)
        self.act_low = torch.as_tensor(act_low, dtype=torch.float32, device=device)
        self.act_high = torch.as_tensor(act_high, dtype=torch.float32, device=device)
        self._center = (self.act_high + self.act_low) / 2
        self._half = (self.act_high - self.act_low) / 2
        self.obs_dim = int(obs_mean.shape[0])
        self.act_dim = int(self.act_low.shape[0])
        self.n_obj = int(n_obj)
        self.max_episode_steps = int(max_episode_steps)
        self.source = source
        self.seed = seed
        self.training = dict(training or {})
        self.batch_size = 0
        self.timestep = 0
        self._awaiting_observe = False
        self._w: torch.Tensor | None = None

    def _as_batch(self, name: str, array, width: int, dtype=torch.float32) -> torch.Tensor:
        return as_batch(name, array, width, self.batch_size, self.device, dtype)

    def reset(self, preferences, target_returns) -> None:
        """Start a batch of episodes: preferences w (B, n_obj); ``target_returns`` (B, n_obj) is
        checked for shape and finiteness and otherwise ignored."""
        self.batch_size = 0
        w = self._as_batch("preferences", preferences, self.n_obj)
        self.batch_size = int(w.shape[0])
        if self.batch_size == 0:
            raise ValueError("preferences must hold at least one row")
        self._as_batch("target_returns", target_returns, self.n_obj, torch.float64)
        self._w = w
        self.timestep = 0
        self._awaiting_observe = False

    @torch.no_grad()
    def act(self, obs) -> np.ndarray:
        """Actions (B, act_dim) float32 within the action bounds for observations (B, obs_dim)."""
        if self._w is None:
            raise RuntimeError("call reset() before act()")
        if self._awaiting_observe:
            raise RuntimeError("act() called twice without observe() in between")
        s = (self._as_batch("obs", obs, self.obs_dim) - self.obs_mean) / self.obs_std
        s = s.clamp(-STATE_CLIP, STATE_CLIP)
        unit = self.model(s, self._w)
        actions = torch.maximum(torch.minimum(self._center + self._half * unit, self.act_high), self.act_low)
        self._awaiting_observe = True
        return actions.float().cpu().numpy()

    def observe(self, actions, rewards) -> None:
        """Record the step: the actions applied (B, act_dim) and the raw rewards (B, n_obj) received."""
        if not self._awaiting_observe:
            raise RuntimeError("observe() must follow act()")
        self._as_batch("actions", actions, self.act_dim)
        self._as_batch("rewards", rewards, self.n_obj, torch.float64)
        self.timestep += 1
        self._awaiting_observe = False


def entry_points(family: FamilySpec):
    """A family module's public ``train``, ``load_agent`` and ``load_critics``, bound to ``family``."""
    names = " or ".join(family.models.values())

    def train(dataset_path, model_name, seed, settings, checkpoint_path, curve_path=None, device="auto",
              progress=True, expect_env=None, reference_dataset=None) -> dict[str, Any]:  # fmt: skip
        return train_family(family, dataset_path, model_name, seed, settings, checkpoint_path, curve_path, device,
                            progress, expect_env, reference_dataset)  # fmt: skip

    def load_agent(checkpoint_path, device="cpu", definitions=None) -> ValueAgent:
        return load_family_agent(family, checkpoint_path, device, definitions)

    def load_critics(checkpoint_path) -> dict[str, nn.Module]:
        return load_family_critics(family, checkpoint_path)

    train.__doc__ = (f"Train {names} and write its final checkpoint; the arguments, files and summary of "
                     f":func:`morl.training.train`, with the family's ``Settings`` as ``settings``.")  # fmt: skip
    load_agent.__doc__ = f"The batched evaluation agent (:class:`ValueAgent`) of a final {names} checkpoint."
    load_critics.__doc__ = f"The value networks of a final {names} checkpoint, by name (CPU, eval mode)."
    return train, load_agent, load_critics
