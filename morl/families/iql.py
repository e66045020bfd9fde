"""IQL(P): Implicit Q-Learning (Kostrikov, Nair and Levine, "Offline Reinforcement Learning with
Implicit Q-Learning", ICLR 2022) conditioned on the preference, with vector value functions.

- Twin critics ``Q_k(s, a, w) in R^n_obj`` (with Polyak-averaged targets) and a value function
  ``V(s, w) in R^n_obj``, one value per objective, on the raw reward vector (times ``reward_scale``).
- Value: with ``Q_t`` the target critics' vector of smaller scalarised value ``w . Q'_k`` and the
  scalarised advantage ``u = w . (Q_t(s, a, w) - V(s, w))``, the expectile loss
  ``E[|expectile - 1(u < 0)| * ||Q_t - V||^2]``: the preference decides which side of the
  expectile a transition is on, the squared error is over every objective.
- Critics: mean squared error to ``r + discount (1 - terminal) V(s', w)`` (``V`` before this
  step's update, as in the paper's code), averaged over the two critics.
- Actor: advantage-weighted regression with weights ``min(exp(temperature * u), adv_clip)``. The
  actor is the paper's Gaussian policy: mean ``tanh(f(s, w))`` in [-1, 1] action units and a
  learned state-independent log std (clipped to [-20, 2]); the loss is the weighted negative
  log-likelihood of the data action. Evaluation acts with the mean.
- The actor's learning rate follows a cosine decay to 0 over ``steps`` (the paper's schedule);
  the critics' and the value function's are constant.
- Preferences: ``relabel`` of each batch gets fresh Dirichlet(1) preferences (default 0.5, as
  for TD3+BC(P), :mod:`morl.families.td3bc`); the advantage, and so the actor's weights, use
  the relabelled preference.

Defaults (:class:`Settings`) are the paper's for the MuJoCo locomotion tasks (Appendix,
hyperparameter table and text): Adam with learning rate 3e-4 for all networks, batch 256, 1M
steps, two hidden layers of 256, discount 0.99, tau 0.005, expectile 0.7, temperature (its
inverse beta) 3.0, exponentiated advantages clipped at 100, cosine actor schedule. The paper
also rescales MuJoCo rewards by 1000 / (max return - min return); here ``reward_scale`` is one
factor set by the config (default 1), never per objective.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from morl.families import value
from morl.families.value import Dims, Policy, StateValue, TwinCritic

NAME = "iql"
MODELS = {"iql-p": "IQL(P)"}
CHECKPOINT_FORMAT = "morl-iql-agent"
PARTIAL_FORMAT = "morl-iql-training-state"
CHECKPOINT_FORMAT_VERSION = 1
DEFINITIONS = ("statistics_from",)


@dataclass(frozen=True)
class Settings:
    steps: int = 1_000_000
    batch_size: int = 256
    checkpoint_every: int = 1000
    hidden: int = 256
    depth: int = 2
    statistics_from: str = "dataset"
    discount: float = 0.99
    tau: float = 0.005
    reward_scale: float = 1.0
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    value_lr: float = 3e-4
    expectile: float = 0.7
    temperature: float = 3.0
    adv_clip: float = 100.0
    cosine_schedule: bool = True
    relabel: float = 0.5


RULES = {
    **value.COMMON_RULES,
    "actor_lr": value.positive(),
    "critic_lr": value.positive(),
    "value_lr": value.positive(),
    "expectile": value.between(0.0, 1.0, open_low=True, open_high=True),
    "temperature": value.non_negative(),
    "adv_clip": value.positive(),
    "relabel": value.between(0.0, 1.0),
}


def resolve_settings(values: dict | None = None) -> dict[str, Any]:
    """``values`` with the :class:`Settings` defaults filled in and checked (InputError naming the key)."""
    return value.resolve_settings_of(Settings, values, "IQL(P)", RULES)


def _policy(model_name: str, dims: Dims, hp: dict) -> Policy:
    return Policy(dims, hp["hidden"], hp["depth"], conditioned=True, head="gaussian")


def _critics(model_name: str, dims: Dims, hp: dict) -> dict[str, torch.nn.Module]:
    return {
        "critic": TwinCritic(dims, dims.n_obj, hp["hidden"], hp["depth"], conditioned=True),
        "value": StateValue(dims, dims.n_obj, hp["hidden"], hp["depth"], conditioned=True),
    }


def cosine_factor(total: int):
    """The actor's learning-rate factor of step s (0-based): 0.5 (1 + cos(pi s / total))."""
    return lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step, total) / total))


class IQLLearner(value.Learner):
    critics = ("critic", "value")

    def __init__(self, model_name: str, dims: Dims, hp: dict, device: torch.device):
        super().__init__()
        self.hp = hp
        self.policy = _policy(model_name, dims, hp).to(device)
        nets = _critics(model_name, dims, hp)
        self.critic = nets["critic"].to(device)
        self.vf = nets["value"].to(device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.modules = {
            "actor": self.policy,
            "critic": self.critic,
            "value": self.vf,
            "critic_target": self.critic_target,
        }
        self.optimizers = {
            "actor": value.adam(self.policy, hp["actor_lr"], device),
            "critic": value.adam(self.critic, hp["critic_lr"], device),
            "value": value.adam(self.vf, hp["value_lr"], device),
        }
        if hp["cosine_schedule"]:
            self.schedulers = {
                "actor": torch.optim.lr_scheduler.LambdaLR(self.optimizers["actor"], cosine_factor(hp["steps"]))
            }

    @staticmethod
    def _step(opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def update(self, batch: dict[str, torch.Tensor], step: int) -> torch.Tensor:
        hp = self.hp
        s, a, r = batch["states"], batch["actions"], batch["rewards"]
        s2, not_done, w = batch["next_states"], batch["not_done"], batch["preferences"]
        with torch.no_grad():
            target_q = value.min_scalarised(*self.critic_target(s, a, w), w)
            next_v = self.vf(s2, w)

        v = self.vf(s, w)
        diff = target_q - v
        u = (w * diff).sum(-1).detach()
        weight = torch.abs(hp["expectile"] - (u < 0).float())
        value_loss = (weight * diff.pow(2).sum(-1)).mean()
        self._step(self.optimizers["value"], value_loss)

        y = r + hp["discount"] * not_done * next_v
        q1, q2 = self.critic(s, a, w)
        critic_loss = (F.mse_loss(q1, y) + F.mse_loss(q2, y)) / 2
        self._step(self.optimizers["critic"], critic_loss)

        weights = torch.exp(hp["temperature"] * u).clamp(max=hp["adv_clip"])
        actor_loss = -(weights * self.policy.log_prob(s, w, a)).mean()
        self._step(self.optimizers["actor"], actor_loss)
        for sched in self.schedulers.values():
            sched.step()
        value.soft_update(self.critic_target, self.critic, hp["tau"])
        return critic_loss.detach()


FAMILY = value.FamilySpec(
    name=NAME,
    models=MODELS,
    checkpoint_format=CHECKPOINT_FORMAT,
    partial_format=PARTIAL_FORMAT,
    format_version=CHECKPOINT_FORMAT_VERSION,
    definitions=DEFINITIONS,
    resolve_settings=resolve_settings,
    make_learner=IQLLearner,
    build_policy=_policy,
    build_critics=_critics,
    relabels=True,
)


train, load_agent, load_critics = value.entry_points(FAMILY)
