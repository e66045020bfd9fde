"""PGMORL's settings (:class:`PGMORLSettings`): the ``behavior.pgmorl`` config section, with
PGMORL's own defaults and their ranges (:mod:`morl.settings`), read and checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from morl import settings as rules
from morl.errors import InputError
from morl.settings import required, setting

#: Where a config holds these settings; every error names it.
LABEL = "behavior.pgmorl"


@dataclass(frozen=True)
class PGMORLSettings:
    """PGMORL's settings; the defaults are those of its code's arguments and run script. The
    per-task ones (env_steps_per_task, warmup_iters, update_iters; delta_weight, num_tasks,
    pbuffer_num and sparsity for Hopper-v3) come from its per-task scripts, through the config
    (docs/protocol.md, "Behavior policies")."""

    env_steps_per_task: int = required(
        "PGMORL's --num-env-steps, per lineage (iterations = this // (num_steps * num_envs)); its scripts: "
        "5M HalfCheetah/Walker2d, 8M Hopper/Ant, 2M Swimmer."
    )
    warmup_iters: int = required(
        "PPO iterations of the warm-up generation (--warmup-iter: 80, 200 Hopper/Ant, 40 Swimmer)."
    )
    update_iters: int = required(
        "PPO iterations of every later generation (--update-iter: 20, 40 Hopper/Ant, 10 Swimmer)."
    )
    delta_weight: float = setting(0.2, "Step of the warm-up weight grid (--delta-weight; 0.25 for Hopper-v3).")
    min_weight: float = setting(0.0, "Least weight of an objective in the weight grids (--min-weight).")
    max_weight: float = setting(1.0, "Greatest weight of an objective in the weight grids (--max-weight).")
    num_tasks: int = setting(6, "Tasks selected per generation (--num-tasks; 15 for Hopper-v3).")
    weight_candidates: int = setting(7, "Candidate weights per policy in task selection (--num-weight-candidates).")
    pbuffer_num: int = setting(
        100, "Performance buffers of the selection (--pbuffer-num; 20 for Hopper-v3, 210 in 3-D)."
    )
    pbuffer_size: int = setting(2, "Policies per performance buffer (--pbuffer-size).")
    sparsity: float = setting(1.0, "The selection's weight on sparsity (--sparsity; 1e6 for Hopper-v3).")
    num_envs: int = setting(4, "Environments per task (--num-processes).")
    num_steps: int = setting(2048, "Steps per environment and iteration (--num-steps).")
    lr: float = setting(3e-4, "Adam learning rate, decayed linearly (--lr, --use-linear-lr-decay).")
    gamma: float = setting(0.995, "Discount (--gamma).")
    gae_lambda: float = setting(0.95, "GAE lambda (--gae-lambda).")
    ppo_epochs: int = setting(10, "PPO epochs per iteration (--ppo-epoch).")
    num_minibatches: int = setting(
        32, "Minibatches per PPO epoch (--num-mini-batch); must divide num_envs * num_steps."
    )
    clip: float = setting(0.2, "PPO's ratio clip, also the value clip (--clip-param).")
    value_loss_coef: float = setting(0.5, "Weight of the value loss (--value-loss-coef).")
    entropy_coef: float = setting(0.0, "Weight of the entropy bonus (--entropy-coef).")
    max_grad_norm: float = setting(0.5, "Global gradient-norm clip (--max-grad-norm).")
    adam_eps: float = setting(1e-5, "Adam's epsilon (its warm-up's Adam(eps=1e-5)).")
    hidden: int = setting(64, "Width of the policy's and the value network's hidden layers (its MLPBase).")
    obs_clip: float = setting(10.0, "Clip of the normalised observations (baselines' VecNormalize clipob).")
    reward_clip: float = setting(10.0, "Clip of the normalised rewards (baselines' VecNormalize cliprew).")
    seed: int = setting(0, "Seed of the run.")

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None) -> PGMORLSettings:
        """The settings of a config's ``behavior.pgmorl`` section (with an env's overrides laid
        over it), defaults filled in and checked: an :class:`~morl.errors.InputError` names the key."""
        return cls(**rules.resolve(cls, cfg, LABEL, RULES, check_settings))

    def check(self) -> PGMORLSettings:
        """Raise :class:`InputError` for settings that cannot run; return self."""
        try:
            check_settings(vars(self))
        except InputError as exc:
            raise InputError(f"{LABEL}: {exc}") from None
        return self

    @property
    def total_iters(self) -> int:
        """PPO iterations each lineage runs (PGMORL's ``total_num_updates``)."""
        return int(self.env_steps_per_task) // int(self.num_steps) // int(self.num_envs)


#: The method's settings, by the name the behavior registry reads (:data:`morl.behavior.METHODS`).
Settings = PGMORLSettings

#: The range of each setting.
RULES: dict[str, rules.Rule] = {
    "env_steps_per_task": rules.count(),
    "warmup_iters": rules.count(),
    "update_iters": rules.count(),
    "delta_weight": rules.positive(at_most=1),
    "min_weight": rules.between(0.0, 1.0),
    "max_weight": rules.between(0.0, 1.0),
    "num_tasks": rules.at_least(1, at_most=1000),
    "weight_candidates": rules.at_least(2, at_most=100),
    "pbuffer_num": rules.at_least(2, at_most=10_000),
    "pbuffer_size": rules.at_least(1, at_most=1000),
    "sparsity": rules.non_negative(),
    "num_envs": rules.at_least(1, at_most=1024),
    "num_steps": rules.at_least(1, at_most=1_000_000),
    "lr": rules.learning_rate(),
    "gamma": rules.between(0.0, 1.0, open_low=True, open_high=True),
    "gae_lambda": rules.between(0.0, 1.0),
    "ppo_epochs": rules.at_least(1, at_most=1000),
    "num_minibatches": rules.at_least(1, at_most=100_000),
    "clip": rules.positive(at_most=10),
    "value_loss_coef": rules.non_negative(),
    "entropy_coef": rules.non_negative(),
    "max_grad_norm": rules.positive(),
    "adam_eps": rules.positive(),
    "hidden": rules.width(),
    "obs_clip": rules.positive(),
    "reward_clip": rules.positive(),
    "seed": rules.seed(),
}


def check_settings(s: dict[str, Any]) -> None:
    """What no single rule says: a lineage runs at least one iteration, the minibatches split an
    iteration's steps evenly, and the weight range is not reversed."""
    iteration = s["num_steps"] * s["num_envs"]
    if s["env_steps_per_task"] // s["num_steps"] // s["num_envs"] < 1:
        raise InputError(
            f"env_steps_per_task ({s['env_steps_per_task']}) is less than one iteration "
            f"({s['num_steps']} x {s['num_envs']} steps)"
        )
    if iteration % s["num_minibatches"]:
        raise InputError(f"num_minibatches ({s['num_minibatches']}) does not divide an iteration's {iteration} steps")
    if s["min_weight"] > s["max_weight"]:
        raise InputError(f"min_weight ({s['min_weight']}) is above max_weight ({s['max_weight']})")
