"""TD3+BC(P): TD3+BC (Fujimoto and Gu, "A Minimalist Approach to Offline Reinforcement Learning",
NeurIPS 2021) conditioned on the preference, with vector critics.

- Actor ``pi(s, w)`` (tanh, [-1, 1] action units) and twin critics ``Q_k(s, a, w) in R^n_obj``,
  one value per objective, trained on the raw reward vector (times ``reward_scale``).
- Critic target ``y = r + discount (1 - terminal) Q'_j(s', a~, w)``, ``a~ = pi'(s', w)`` plus
  clipped Gaussian noise (``policy_noise``, ``noise_clip``) clipped to [-1, 1]; ``j`` is, per
  sample, the target critic with the smaller scalarised value ``w . Q'_j`` (TD3's clipped double
  Q on the quantity the policy maximises). Critic loss: the mean squared error over the batch
  and the objectives, summed over the two critics.
- Every ``policy_freq`` steps the actor maximises ``lambda w . Q_1(s, pi(s, w), w) - (pi(s, w) - a)^2``
  with ``lambda = alpha / mean |w . Q_1|`` (detached), TD3+BC's normalisation made scalar by the
  preference, then the targets move by ``tau``.
- Preferences: ``relabel`` of each batch gets fresh Dirichlet(1) preferences
  (:mod:`morl.families.value`). The default 0.5 is the share the behavior policies of this
  project were trained with (:mod:`morl.behavior`): half the batch keeps the data's own
  preference, where the behavior-cloning term is informative (those actions were chosen for that
  preference), half teaches the critic and the actor every other part of the simplex.

Defaults (:class:`Settings`) are the paper's hyperparameters (its Table of TD3 and TD3+BC
hyperparameters, Appendix C): learning rate 3e-4 for actor and critic, batch 256, 1M steps,
discount 0.99, tau 0.005, policy noise 0.2, noise clip 0.5, policy frequency 2, alpha 2.5,
two hidden layers of 256 with ReLU. States are normalised as the paper does (mean and std, here
from ``statistics_from``); rewards are not.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from morl.families import value
from morl.families.value import Dims, Policy, TwinCritic

NAME = "td3bc"
MODELS = {"td3bc-p": "TD3+BC(P)"}
CHECKPOINT_FORMAT = "morl-td3bc-agent"
PARTIAL_FORMAT = "morl-td3bc-training-state"
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
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    policy_freq: int = 2
    alpha: float = 2.5
    relabel: float = 0.5


RULES = {
    **value.COMMON_RULES,
    "actor_lr": value.positive(),
    "critic_lr": value.positive(),
    "policy_noise": value.non_negative(),
    "noise_clip": value.non_negative(),
    "policy_freq": value.at_least(1),
    "alpha": value.non_negative(),
    "relabel": value.between(0.0, 1.0),
}


def resolve_settings(values: dict | None = None) -> dict[str, Any]:
    """``values`` with the :class:`Settings` defaults filled in and checked (InputError naming the key)."""
    return value.resolve_settings_of(Settings, values, "TD3+BC(P)", RULES)


def _policy(model_name: str, dims: Dims, hp: dict) -> Policy:
    return Policy(dims, hp["hidden"], hp["depth"], conditioned=True, head="deterministic")


def _critics(model_name: str, dims: Dims, hp: dict) -> dict[str, torch.nn.Module]:
    return {"critic": TwinCritic(dims, dims.n_obj, hp["hidden"], hp["depth"], conditioned=True)}


class TD3BCLearner(value.Learner):
    critics = ("critic",)

    def __init__(self, model_name: str, dims: Dims, hp: dict, device: torch.device):
        super().__init__()
        self.hp = hp
        self.policy = _policy(model_name, dims, hp).to(device)
        self.critic = _critics(model_name, dims, hp)["critic"].to(device)
        self.policy_target = copy.deepcopy(self.policy).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.modules = {
            "actor": self.policy,
            "critic": self.critic,
            "actor_target": self.policy_target,
            "critic_target": self.critic_target,
        }
        self.optimizers = {
            "actor": value.adam(self.policy, hp["actor_lr"], device),
            "critic": value.adam(self.critic, hp["critic_lr"], device),
        }

    def update(self, batch: dict[str, torch.Tensor], step: int) -> torch.Tensor:
        hp = self.hp
        s, a, r = batch["states"], batch["actions"], batch["rewards"]
        s2, not_done, w = batch["next_states"], batch["not_done"], batch["preferences"]
        with torch.no_grad():
            noise = (torch.randn_like(a) * hp["policy_noise"]).clamp(-hp["noise_clip"], hp["noise_clip"])
            a2 = (self.policy_target(s2, w) + noise).clamp(-1.0, 1.0)
            target_q = value.min_scalarised(*self.critic_target(s2, a2, w), w)
            y = r + hp["discount"] * not_done * target_q
        q1, q2 = self.critic(s, a, w)
        critic_loss = F.mse_loss(q1, y) + F.mse_loss(q2, y)
        opt = self.optimizers["critic"]
        opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        opt.step()

        if (step + 1) % hp["policy_freq"] == 0:
            pi = self.policy(s, w)
            q = (self.critic.first(s, pi, w) * w).sum(-1)
            lam = hp["alpha"] / q.abs().mean().detach().clamp_min(1e-6)
            actor_loss = -lam * q.mean() + F.mse_loss(pi, a)
            opt = self.optimizers["actor"]
            opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            opt.step()
            value.soft_update(self.policy_target, self.policy, hp["tau"])
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
    make_learner=TD3BCLearner,
    build_policy=_policy,
    build_critics=_critics,
    relabels=True,
)


train, load_agent, load_critics = value.entry_points(FAMILY)
