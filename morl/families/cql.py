"""CQL(P) and CQL: conservative Q-learning (Kumar, Zhou, Tucker and Levine, "Conservative
Q-Learning for Offline Reinforcement Learning", NeurIPS 2020), PEDA's value-based baseline.

Both learn from the scalar reward ``w . r`` of the trajectory's own preference ``w`` (times
``reward_scale``); the preference is never relabelled. CQL(P) (``cql-p``) gives the actor and
the twin critics the preference as input, ``pi(a | s, w)`` and ``Q_k(s, a, w)``; CQL (``cql``)
gives them the state only, one policy for every preference, like naive BC.

The update follows CORL's single-file implementation of CQL (Tarasov et al., "CORL: Research-
oriented Deep Offline Reinforcement Learning Library", NeurIPS 2023 Datasets and Benchmarks;
itself a port of a reimplementation by one of the CQL authors), with its default configuration:

- SAC backbone: a tanh-squashed Gaussian policy (network output: mean and log std, log std
  offset by -1 and clipped to [-20, 2]) and twin scalar critics with Polyak-averaged targets;
  automatic entropy tuning towards the target entropy ``-act_dim``, the temperature's learning
  rate that of the policy; the critic target ``w . r + discount (1 - terminal) min_k Q'_k(s', a')``,
  ``a' ~ pi(s')``, without the entropy term; policy loss ``alpha log pi(a~|s) - min_k Q_k(s, a~)``.
- CQL(H) regulariser, weight ``cql_alpha`` (fixed, no Lagrangian), per critic:
  ``cql_temp * logsumexp(Q / cql_temp)`` over ``cql_n_actions`` uniform random actions,
  ``cql_n_actions`` policy actions at ``s`` and ``cql_n_actions`` policy actions at ``s'`` (all
  evaluated at ``s``), importance-weighted by their densities, minus ``Q(s, a_data)``.
- Networks initialised as CORL does: orthogonal critic layers, a small output layer for the policy.

Each step updates the critics first, then the temperature and the policy (SAC's order; CORL
updates the policy first, on the same batch), then the targets. CORL's optional BC warm-up
(``bc_steps``, 0 by default) is not implemented.

Defaults (:class:`Settings`), from CORL's ``TrainConfig``: batch 256, 1M steps, discount 0.99,
tau 0.005, policy learning rate 3e-5, critic learning rate 3e-4, ``cql_alpha`` 10,
``cql_n_actions`` 10, ``cql_temp`` 1, three hidden layers of 256 (``depth`` 3). Kumar et al.
(Appendix F) use the same network sizes and learning rates of 1e-4 (policy) and 3e-4 (critics)
with ``cql_alpha`` 5 on the Gym tasks.
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
class Settings(value.ValueSettings):
    """CQL's settings; the defaults are CORL's (Kumar et al.'s where CORL follows them)."""

    depth: int = setting(3, "hidden layers (CORL: three of 256)")
    policy_lr: float = setting(3e-5, "actor and entropy-temperature learning rate (CORL: 3e-5; Kumar et al.: 1e-4)")
    q_lr: float = setting(3e-4, "critic learning rate (CORL; Kumar et al.)")
    cql_alpha: float = setting(10.0, "weight of the CQL(H) regulariser, fixed (CORL: 10; Kumar et al. 5 on Gym)")
    cql_n_actions: int = setting(10, "actions sampled per state for the log-sum-exp, of each kind (CORL)")
    cql_temp: float = setting(1.0, "temperature of the log-sum-exp (CORL)")


RULES = {
    **value.COMMON_RULES,
    "policy_lr": rules.positive(),
    "q_lr": rules.positive(),
    "cql_alpha": rules.non_negative(),
    "cql_n_actions": rules.at_least(1),
    "cql_temp": rules.positive(),
}


def _conditioned(model_name: str) -> bool:
    return model_name.endswith("-p")


def _policy(model_name: str, dims: Dims, settings: dict) -> value.Policy:
    return value.Policy(
        dims, settings["hidden"], settings["depth"], conditioned=_conditioned(model_name), head="tanh-gaussian"
    )


def _critics(model_name: str, dims: Dims, settings: dict) -> dict[str, torch.nn.Module]:
    return {
        "critic": value.TwinCritic(dims, 1, settings["hidden"], settings["depth"], conditioned=_conditioned(model_name))
    }


class Learner(value.ValueLearner):
    critics = ("critic",)

    def __init__(
        self, model_name: str, data: value.Transitions, dims: Dims, settings: dict, device: torch.device, facts: dict
    ):
        super().__init__(data, settings)
        self.act_dim = dims.act_dim
        policy = _policy(model_name, dims, settings)
        last = policy.net[-1]
        torch.nn.init.xavier_uniform_(last.weight, gain=1e-2)
        torch.nn.init.zeros_(last.bias)
        critic = _critics(model_name, dims, settings)["critic"]
        value.orthogonal_init(critic.q1)
        value.orthogonal_init(critic.q2)
        self.policy = self.add("actor", policy, device, settings["policy_lr"])
        self.critic = self.add("critic", critic, device, settings["q_lr"])
        self.critic_target = self.add("critic_target", value.target_of(self.critic), device)
        self.log_alpha = self.add("log_alpha", value.Scalar(0.0), device, settings["policy_lr"])
        self.target_entropy = -float(dims.act_dim)

    def update(self, batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        settings = self.settings
        s, a, w = batch["states"], batch["actions"], batch["preferences"]
        s2, not_done = batch["next_states"], batch["not_done"]
        reward = (w * batch["rewards"]).sum(-1)
        b, n, d = s.shape[0], settings["cql_n_actions"], self.act_dim

        with torch.no_grad():
            a2, _ = self.policy.sample(s2, w)
            target_q = torch.min(*self.critic_target(s2, a2, w)).squeeze(-1)
            y = reward + settings["discount"] * not_done.squeeze(-1) * target_q
            # n uniform actions, n policy actions at s and n at s', all scored at s
            s_rep, s2_rep, w_rep = (x.repeat_interleave(n, 0) for x in (s, s2, w))
            random_actions = torch.rand(b * n, d, device=s.device) * 2 - 1
            current_actions, current_logp = self.policy.sample(s_rep, w_rep)
            next_actions, next_logp = self.policy.sample(s2_rep, w_rep)
            log_density = torch.cat(
                [
                    torch.full((b, n), d * math.log(0.5), device=s.device),
                    current_logp.view(b, n),
                    next_logp.view(b, n),
                ],
                1,
            )
        q1, q2 = (q.squeeze(-1) for q in self.critic(s, a, w))
        td_loss = F.mse_loss(q1, y) + F.mse_loss(q2, y)
        sampled = torch.cat(
            [random_actions.view(b, n, d), current_actions.view(b, n, d), next_actions.view(b, n, d)], 1
        )
        three = 3 * n
        s_all = s.repeat_interleave(three, 0)
        w_all = w.repeat_interleave(three, 0)
        sq1, sq2 = (q.view(b, three) for q in self.critic(s_all, sampled.view(b * three, d), w_all))
        temp = settings["cql_temp"]
        penalty = 0.0
        for sq, q in ((sq1, q1), (sq2, q2)):
            ood = torch.logsumexp((sq - log_density) / temp, 1) * temp
            penalty = penalty + (ood - q).mean()
        critic_loss = td_loss + settings["cql_alpha"] * penalty
        value.minimise(self.optimizers["critic"], critic_loss)

        new_actions, logp = self.policy.sample(s, w)
        alpha_loss = -(self.log_alpha() * (logp.detach() + self.target_entropy)).mean()
        value.minimise(self.optimizers["log_alpha"], alpha_loss)
        alpha = self.log_alpha().detach().exp()
        q_new = torch.min(*self.critic(s, new_actions, w)).squeeze(-1)
        actor_loss = (alpha * logp - q_new).mean()
        value.minimise(self.optimizers["actor"], actor_loss)
        value.soft_update(self.critic_target, self.critic, settings["tau"])
        return {
            "loss": critic_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "alpha": alpha,
            "cql_penalty": penalty.detach(),
        }


def build_agent(ckpt: dict, device: torch.device) -> value.ValueAgent:
    """The batched evaluation agent of a checked checkpoint (:func:`morl.checkpoints.load_agent`)."""
    return value.build_agent(_policy(ckpt["model_name"], value.dims_of(ckpt), ckpt["settings"]), ckpt, device)


def load_critics(path) -> dict[str, torch.nn.Module]:
    """The value networks of a final checkpoint of this family, by name (CPU, eval mode)."""
    return value.load_critics(family("cql"), path, _critics)
