"""The tasks as gymnasium environments with a vector reward, and their gymnasium registration.

:class:`MOMujocoEnv` is one D4MORL task (physics of :mod:`morl.envs.physics`),
:class:`MOGymnasiumTask` an MO-Gymnasium task with the same conventions, and :func:`make_env`
makes either from an id.

Importing ``morl`` registers every task with gymnasium under its D4MORL id
(:func:`morl.register_envs`), so ``gymnasium.make("MO-HalfCheetah-v2")`` works (without a
``TimeLimit`` wrapper, because the environment truncates itself, and without gymnasium's passive
checker, which expects scalar rewards).  ``MO-Hopper-v2`` and ``MO-Hopper-v3`` are two different
D4MORL tasks, but gymnasium reads the ids as two versions of one environment, so
``gymnasium.make("MO-Hopper-v2")`` emits a harmless "out of date ... upgrading to version `v3`"
DeprecationWarning; ``MOMujocoEnv`` does not.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium
import mujoco
import numpy as np
from gymnasium import spaces

from morl import register_envs
from morl.envs import physics
from morl.envs.tasks import ENV_SPECS, EnvSpec, get_spec, import_mo_gymnasium, is_d4morl_task


class MOMujocoEnv(gymnasium.Env):
    """One D4MORL task as a gymnasium environment with a vector reward.

    ``step(action)`` returns ``(obs float32 (obs_dim,), reward float32 (n_obj,), terminated,
    truncated, info)`` with ``info["obj"]`` a copy of the reward vector; ``truncated`` becomes
    True at step ``max_episode_steps`` (500).  Rendering is not supported.

    Args:
        env_id: a key of :data:`~morl.envs.tasks.ENV_SPECS`.
        render_mode: must be None.
    """

    metadata = {"render_modes": []}

    def __init__(self, env_id: str, render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"{env_id}: rendering is not supported (render_mode={render_mode!r})")
        self.render_mode = None
        self.spec_morl: EnvSpec = get_spec(env_id)
        spec = self.spec_morl
        self.model = physics.load_model(spec)
        self.data = mujoco.MjData(self.model)
        self.dt = physics.control_timestep(spec, self.model)
        self.init_qpos = self.model.qpos0.copy()
        self.metadata = {"render_modes": [], "render_fps": int(round(1.0 / self.dt))}
        self.action_space = spaces.Box(
            low=np.asarray(spec.act_low, dtype=np.float32),
            high=np.asarray(spec.act_high, dtype=np.float32),
            dtype=np.float32,
        )
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(spec.obs_dim,), dtype=np.float32)
        self.reward_space = spaces.Box(-np.inf, np.inf, shape=(spec.n_obj,), dtype=np.float32)
        self.reward_dim = spec.n_obj
        # (1, n) views of the MuJoCo state, so the batched reward/observation functions apply.
        self._qpos = self.data.qpos[None, :]
        self._qvel = self.data.qvel[None, :]
        self._qpos_before = np.empty((1, self.model.nq))
        self._elapsed_steps: int | None = None

    @property
    def elapsed_steps(self) -> int:
        """Steps taken in the current episode."""
        return 0 if self._elapsed_steps is None else self._elapsed_steps

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        physics.reset_physics(self.spec_morl, self.model, self.data, self.np_random)
        self._elapsed_steps = 0
        return physics.compute_observations(self.spec_morl, self._qpos, self._qvel)[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, np.ndarray, bool, bool, dict[str, Any]]:
        if self._elapsed_steps is None:
            raise RuntimeError(f"{self.spec_morl.id}: call reset() before step()")
        spec = self.spec_morl
        clipped = physics.clip_actions(spec, action)
        if clipped.shape != (spec.act_dim,):
            raise ValueError(f"{spec.id}: action must have shape ({spec.act_dim},), got {np.shape(action)}")
        self._qpos_before[:] = self._qpos
        physics.simulate(spec, self.model, self.data, clipped)
        self._elapsed_steps += 1
        reward = physics.compute_rewards(
            spec, self._qpos_before, self._qpos, self._qvel, clipped[None, :], self.dt, self.init_qpos
        )[0]
        terminated = bool(physics.compute_terminated(spec, self._qpos, self._qvel)[0])
        truncated = self._elapsed_steps >= spec.max_episode_steps
        obs = physics.compute_observations(spec, self._qpos, self._qvel)[0]
        return obs, reward, terminated, truncated, {"obj": reward.copy()}

    def __repr__(self) -> str:
        return f"MOMujocoEnv({self.spec_morl.id!r})"


class MOGymnasiumTask(gymnasium.Wrapper):
    """An MO-Gymnasium task with the conventions of :class:`MOMujocoEnv`: actions clipped to the
    action bounds, float32 observations and reward vectors, ``info["obj"]`` a copy of the vector."""

    def __init__(self, env_id: str) -> None:
        mo_gym = import_mo_gymnasium()
        self.spec_morl = get_spec(env_id)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            super().__init__(mo_gym.make(env_id))
        self.reward_space = self.env.unwrapped.reward_space
        self._low = np.asarray(self.spec_morl.act_low)
        self._high = np.asarray(self.spec_morl.act_high)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return np.asarray(obs, np.float32), info

    def step(self, action):
        action = np.clip(np.asarray(action, np.float64), self._low, self._high).astype(self.action_space.dtype)
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward = np.asarray(reward, np.float32)
        info = dict(info)
        info["obj"] = reward.copy()
        return np.asarray(obs, np.float32), reward, bool(terminated), bool(truncated), info


def make_env(env_id: str) -> gymnasium.Env:
    """One environment of ``env_id`` with a vector reward: :class:`MOMujocoEnv` for the D4MORL
    tasks, :class:`MOGymnasiumTask` for MO-Gymnasium ids."""
    if is_d4morl_task(env_id):
        return MOMujocoEnv(env_id)
    get_spec(env_id)  # clear errors for unknown ids or a missing extra
    return MOGymnasiumTask(env_id)


# `import morl` has registered the D4MORL ids already (morl/__init__.py); a task added to ENV_SPECS
# is registered here too, and tests/test_envs.py asks for it to be added to morl.D4MORL_IDS.
register_envs(ENV_SPECS)
