"""The TD3 behavior method's settings (:class:`TD3Settings`): the keys at the top of a config's
``behavior`` section, every one required, and their ranges (:mod:`morl.settings`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from morl import settings as rules
from morl.settings import required

#: Where a config holds these settings; every error names it.
LABEL = "behavior"


@dataclass(frozen=True)
class TD3Settings:
    """TD3's settings. None has a default: a config says everything that shapes its behavior data."""

    total_steps: int = required("Environment steps summed over all parallel envs.")
    start_steps: int = required("Uniformly random actions before learning starts.")
    n_envs: int = required("Environments stepped together while training.")
    updates_per_step: float = required("Gradient updates per environment step.")
    batch_size: int = required("Transitions per gradient update.")
    hidden: int = required("Width of the two hidden layers of the actor and of each critic.")
    lr: float = required("Adam learning rate of the actor and the critics.")
    gamma: float = required("Discount.")
    tau: float = required("Soft-update rate of the target networks.")
    policy_noise: float = required("Std of the target policy's smoothing noise, in half action ranges.")
    noise_clip: float = required("Clip of the target policy's smoothing noise, in half action ranges.")
    policy_delay: int = required("Critic updates per actor and target update.")
    expl_noise: float = required("Std of the Gaussian exploration noise, in half action ranges.")
    buffer_size: int = required("Replay buffer rows (at most 1e8).")
    checkpoint_every: int = required("Environment steps between resumable checkpoints (0: none).")
    seed: int = required("Seed of the networks, the replay sampling, the preferences and the episodes.")

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> TD3Settings:
        """The settings among ``cfg``'s keys (a config's ``behavior`` settings for one env, which
        also hold ``method``, ``shipped`` and other methods' sections), checked."""
        values = {k: v for k, v in cfg.items() if k in cls.__dataclass_fields__}
        return cls(**rules.resolve(cls, values, LABEL, RULES))


#: The method's settings, by the name the behavior registry reads (:data:`morl.behavior.METHODS`).
Settings = TD3Settings

#: The range of each setting.
RULES: dict[str, rules.Rule] = {
    "total_steps": rules.count(),
    "start_steps": rules.count_or_zero(),
    "n_envs": rules.count(),
    "updates_per_step": rules.positive(),
    "batch_size": rules.batch(),
    "hidden": rules.width(),
    "lr": rules.learning_rate(),
    "gamma": rules.between(0.0, 1.0, open_low=True, open_high=True),
    "tau": rules.between(0.0, 1.0, open_low=True),
    "policy_noise": rules.non_negative(),
    "noise_clip": rules.non_negative(),
    "policy_delay": rules.count(),
    "expl_noise": rules.non_negative(),
    "buffer_size": rules.at_least(1, at_most=100_000_000),
    "checkpoint_every": rules.count_or_zero(),
    "seed": rules.seed(),
}
