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

import math
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
    """IQL's settings; the defaults are the paper's (Kostrikov et al.) and its code's."""

    reward_scale: float = setting(
        1.0, "one factor on every objective's reward (the paper rescales per task; here one factor)"
    )
    value_lr: float = setting(3e-4, "value-function learning rate (the paper)")
    expectile: float = setting(0.7, "expectile of the value loss (the paper's MuJoCo setting)")
    temperature: float = setting(3.0, "inverse beta of the advantage weights (the paper's MuJoCo setting)")
    adv_clip: float = setting(100.0, "cap of the exponentiated advantages (the paper's code)")
    cosine_schedule: bool = setting(True, "the actor's cosine learning-rate decay (the paper's code)")


RULES = {
    **value.ACTOR_CRITIC_RULES,
    "value_lr": rules.positive(),
    "expectile": rules.between(0.0, 1.0, open_low=True, open_high=True),
    "temperature": rules.non_negative(),
    "adv_clip": rules.positive(),
}


def _policy(model_name: str, dims: Dims, settings: dict) -> value.Policy:
    return value.Policy(dims, settings["hidden"], settings["depth"], conditioned=True, head="gaussian")


def _critics(model_name: str, dims: Dims, settings: dict) -> dict[str, torch.nn.Module]:
    return {
        "critic": value.TwinCritic(dims, dims.n_obj, settings["hidden"], settings["depth"], conditioned=True),
        "value": value.StateValue(dims, dims.n_obj, settings["hidden"], settings["depth"], conditioned=True),
    }


def cosine_factor(total: int):
    """The actor's learning-rate factor of step s (0-based): 0.5 (1 + cos(pi s / total))."""
    return lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step, total) / total))


class Learner(value.ValueLearner):
    critics = ("critic", "value")

    def __init__(
        self, model_name: str, data: value.Transitions, dims: Dims, settings: dict, device: torch.device, facts: dict
    ):
        super().__init__(data, settings)
        self.policy = self.add("actor", _policy(model_name, dims, settings), device, settings["actor_lr"])
        nets = _critics(model_name, dims, settings)
        self.critic = self.add("critic", nets["critic"], device, settings["critic_lr"])
        self.vf = self.add("value", nets["value"], device, settings["value_lr"])
        self.critic_target = self.add("critic_target", value.target_of(self.critic), device)
        if settings["cosine_schedule"]:
            self.schedulers = {
                "actor": torch.optim.lr_scheduler.LambdaLR(self.optimizers["actor"], cosine_factor(settings["steps"]))
            }

    def update(self, batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        settings = self.settings
        s, a, r = batch["states"], batch["actions"], batch["rewards"]
        s2, not_done, w = batch["next_states"], batch["not_done"], batch["preferences"]
        with torch.no_grad():
            target_q = value.min_scalarised(*self.critic_target(s, a, w), w)
            next_v = self.vf(s2, w)

        v = self.vf(s, w)
        diff = target_q - v
        u = (w * diff).sum(-1).detach()
        weight = torch.abs(settings["expectile"] - (u < 0).float())
        value_loss = (weight * diff.pow(2).sum(-1)).mean()
        value.minimise(self.optimizers["value"], value_loss)

        y = r + settings["discount"] * not_done * next_v
        q1, q2 = self.critic(s, a, w)
        critic_loss = (F.mse_loss(q1, y) + F.mse_loss(q2, y)) / 2
        value.minimise(self.optimizers["critic"], critic_loss)

        weights = torch.exp(settings["temperature"] * u).clamp(max=settings["adv_clip"])
        actor_loss = -(weights * self.policy.log_prob(s, w, a)).mean()
        value.minimise(self.optimizers["actor"], actor_loss)
        for sched in self.schedulers.values():
            sched.step()
        value.soft_update(self.critic_target, self.critic, settings["tau"])
        return {"loss": critic_loss.detach(), "value_loss": value_loss.detach(), "actor_loss": actor_loss.detach()}


def build_agent(ckpt: dict, device: torch.device) -> value.ValueAgent:
    """The batched evaluation agent of a checked checkpoint (:func:`morl.checkpoints.load_agent`)."""
    return value.build_agent(_policy(ckpt["model_name"], value.dims_of(ckpt), ckpt["settings"]), ckpt, device)


def load_critics(path) -> dict[str, torch.nn.Module]:
    """The value networks of a final checkpoint of this family, by name (CPU, eval mode)."""
    return value.load_critics(family("iql"), path, _critics)
