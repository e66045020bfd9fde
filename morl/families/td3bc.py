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

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from morl import settings as rules
from morl.families import family, value
from morl.families.base import Dims, setting

# the value families share their checkpoint format and their view of the data (the contract of
# morl.families.base)
from morl.families.value import CHECKPOINT_KEYS, DEFINITIONS, FORMAT_VERSION, READS_VERSIONS, prepare  # noqa: F401


@dataclass(frozen=True)
class Settings(value.ActorCriticSettings):
    """TD3+BC's settings; the defaults are the paper's (Fujimoto and Gu)."""

    policy_noise: float = setting(0.2, "std of the target policy's smoothing noise (the paper)")
    noise_clip: float = setting(0.5, "clip of that noise (the paper)")
    policy_freq: int = setting(2, "critic updates per actor update (the paper)")
    alpha: float = setting(2.5, "weight of the Q term against behavior cloning (the paper)")


RULES = {
    **value.ACTOR_CRITIC_RULES,
    "policy_noise": rules.non_negative(),
    "noise_clip": rules.non_negative(),
    "policy_freq": rules.at_least(1),
    "alpha": rules.non_negative(),
}


def _policy(model_name: str, dims: Dims, settings: dict) -> value.Policy:
    return value.Policy(dims, settings["hidden"], settings["depth"], conditioned=True, head="deterministic")


def _critics(model_name: str, dims: Dims, settings: dict) -> dict[str, torch.nn.Module]:
    return {"critic": value.TwinCritic(dims, dims.n_obj, settings["hidden"], settings["depth"], conditioned=True)}


class Learner(value.ValueLearner):
    critics = ("critic",)

    def __init__(
        self, model_name: str, data: value.Transitions, dims: Dims, settings: dict, device: torch.device, facts: dict
    ):
        super().__init__(data, settings)
        self.policy = self.add("actor", _policy(model_name, dims, settings), device, settings["actor_lr"])
        self.critic = self.add("critic", _critics(model_name, dims, settings)["critic"], device, settings["critic_lr"])
        self.policy_target = self.add("actor_target", value.target_of(self.policy), device)
        self.critic_target = self.add("critic_target", value.target_of(self.critic), device)

    def update(self, batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        settings = self.settings
        s, a, r = batch["states"], batch["actions"], batch["rewards"]
        s2, not_done, w = batch["next_states"], batch["not_done"], batch["preferences"]
        with torch.no_grad():
            noise = (torch.randn_like(a) * settings["policy_noise"]).clamp(
                -settings["noise_clip"], settings["noise_clip"]
            )
            a2 = (self.policy_target(s2, w) + noise).clamp(-1.0, 1.0)
            target_q = value.min_scalarised(*self.critic_target(s2, a2, w), w)
            y = r + settings["discount"] * not_done * target_q
        q1, q2 = self.critic(s, a, w)
        critic_loss = F.mse_loss(q1, y) + F.mse_loss(q2, y)
        value.minimise(self.optimizers["critic"], critic_loss)

        if (step + 1) % settings["policy_freq"] == 0:
            pi = self.policy(s, w)
            q = (self.critic.first(s, pi, w) * w).sum(-1)
            lam = settings["alpha"] / q.abs().mean().detach().clamp_min(1e-6)
            actor_loss = -lam * q.mean() + F.mse_loss(pi, a)
            value.minimise(self.optimizers["actor"], actor_loss)
            value.soft_update(self.policy_target, self.policy, settings["tau"])
            value.soft_update(self.critic_target, self.critic, settings["tau"])
            return {"loss": critic_loss.detach(), "actor_loss": actor_loss.detach()}
        return {"loss": critic_loss.detach()}


def build_agent(ckpt: dict, device: torch.device) -> value.ValueAgent:
    """The batched evaluation agent of a checked checkpoint (:func:`morl.checkpoints.load_agent`)."""
    return value.build_agent(_policy(ckpt["model_name"], value.dims_of(ckpt), ckpt["settings"]), ckpt, device)


def load_critics(path) -> dict[str, torch.nn.Module]:
    """The value networks of a final checkpoint of this family, by name (CPU, eval mode)."""
    return value.load_critics(family("td3bc"), path, _critics)
