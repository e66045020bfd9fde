"""PGMORL's settings (:class:`PGMORLSettings`): the ``behavior.pgmorl`` config section, with
PGMORL's own defaults, read and checked."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from morl.errors import InputError


@dataclass
class PGMORLSettings:
    """PGMORL's settings; the defaults are those of its ``morl/arguments.py`` and ``morl/run.py``
    (the per-task ones, from its ``scripts/<task>.py``, come from the config)."""

    env_steps_per_task: int  # scripts/<task>.py --num-env-steps: 5M HalfCheetah/Walker2d, 8M Hopper/Ant, 2M Swimmer
    warmup_iters: int  # --warmup-iter: 80 HalfCheetah/Walker2d, 200 Hopper/Ant, 40 Swimmer
    update_iters: int  # --update-iter: 20 / 40 / 10 (iterations per generation)
    delta_weight: float = 0.2  # --delta-weight: 0.2 for two objectives, 0.25 for Hopper-v3
    min_weight: float = 0.0  # --min-weight
    max_weight: float = 1.0  # --max-weight
    num_tasks: int = 6  # --num-tasks: tasks selected per generation (15 for Hopper-v3)
    weight_candidates: int = 7  # --num-weight-candidates
    pbuffer_num: int = 100  # --pbuffer-num (Hopper-v3: 20, which makes 210 buffers in 3-D)
    pbuffer_size: int = 2  # --pbuffer-size
    sparsity: float = 1.0  # --sparsity, the selection's weight on sparsity (Hopper-v3: 1e6)
    num_envs: int = 4  # run.py --num-processes: environments per task
    num_steps: int = 2048  # run.py --num-steps: steps per environment and iteration
    lr: float = 3e-4  # run.py --lr, decayed linearly (--use-linear-lr-decay)
    gamma: float = 0.995  # run.py --gamma
    gae_lambda: float = 0.95  # run.py --gae-lambda
    ppo_epochs: int = 10  # run.py --ppo-epoch
    num_minibatches: int = 32  # run.py --num-mini-batch
    clip: float = 0.2  # arguments.py --clip-param (also the value clip)
    value_loss_coef: float = 0.5  # run.py --value-loss-coef
    entropy_coef: float = 0.0  # run.py --entropy-coef
    max_grad_norm: float = 0.5  # arguments.py --max-grad-norm
    adam_eps: float = 1e-5  # warm_up.py: Adam(eps=1e-5)
    hidden: int = 64  # a2c_ppo_acktr/model.py MLPBase hidden_size
    obs_clip: float = 10.0  # baselines VecNormalize clipob
    reward_clip: float = 10.0  # baselines VecNormalize cliprew
    seed: int = 0

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> PGMORLSettings:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise InputError(f"behavior.pgmorl: unknown settings {unknown}")
        return cls(**{k: v for k, v in cfg.items() if k in known})

    def check(self) -> PGMORLSettings:
        """Raise :class:`InputError` for settings that cannot run; return self."""
        if self.total_iters < 1:
            raise InputError(
                f"behavior.pgmorl.env_steps_per_task: {self.env_steps_per_task} is less than one "
                f"iteration ({self.num_steps} x {self.num_envs} steps)"
            )
        if (self.num_envs * self.num_steps) % self.num_minibatches:
            raise InputError(
                f"behavior.pgmorl.num_minibatches: {self.num_minibatches} does not divide an "
                f"iteration's {self.num_envs * self.num_steps} steps"
            )
        if self.min_weight > self.max_weight:
            raise InputError(f"behavior.pgmorl: min_weight {self.min_weight} is above max_weight {self.max_weight}")
        return self

    @property
    def total_iters(self) -> int:
        """PPO iterations each lineage runs (PGMORL's ``total_num_updates``)."""
        return int(self.env_steps_per_task) // int(self.num_steps) // int(self.num_envs)
