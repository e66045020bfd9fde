"""Batched stepping of many copies of one D4MORL task (evaluation and data collection).

:class:`BatchedEnv` holds one compiled ``MjModel`` and ``B`` ``MjData`` (one per slot) and steps
all running slots in lockstep with the same module-level functions as the single environment
:class:`morl.envs.MOMujocoEnv` (reset noise, physics step, reward vector, termination,
observation), so slot ``i`` reset with seed ``s`` and fed the same actions follows exactly the
trajectory of ``MOMujocoEnv(env_id)`` reset with ``seed=s``.

Evaluation semantics: every slot runs one episode.  Once a slot has terminated or been
truncated it stops; later calls to :meth:`BatchedEnv.step` leave it untouched (its observation
stays the last one) and report reward 0, ``terminated=False`` and ``truncated=False`` for it.

The physics of the running slots is advanced one slot after another; with ``num_threads > 1``
the slots are split into contiguous chunks stepped by a thread pool (``mujoco.mj_step``
releases the GIL, and each slot owns its ``MjData``), which changes the speed but not the
results.
"""

from __future__ import annotations

import numbers
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import mujoco
import numpy as np
from gymnasium.utils import seeding

from morl.envs import (
    EnvSpec,
    clip_actions,
    compute_observations,
    compute_rewards,
    compute_terminated,
    control_timestep,
    get_spec,
    load_model,
    reset_physics,
    simulate,
)

__all__ = ["BatchedEnv"]


class BatchedEnv:
    """``batch_size`` copies of the task ``env_id`` stepped together.

    Args:
        env_id: a key of :data:`morl.envs.ENV_SPECS`.
        batch_size: number of slots B (>= 1).
        num_threads: threads used to advance the physics (1 = plain loop in the caller's thread).

    Attributes:
        spec: the task's :class:`~morl.envs.EnvSpec`.
        model: the shared ``MjModel``; ``datas`` the per-slot ``MjData``.
        dt: duration of one environment step.
        obs_dim, act_dim, n_obj: sizes; ``action_low``/``action_high`` (act_dim,) float32 bounds.
    """

    def __init__(self, env_id: str, batch_size: int, *, num_threads: int = 1) -> None:
        self.spec: EnvSpec = get_spec(env_id)
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise ValueError(f"{env_id}: batch_size must be a positive integer, got {batch_size!r}")
        if isinstance(num_threads, bool) or not isinstance(num_threads, numbers.Integral) or num_threads < 1:
            raise ValueError(f"{env_id}: num_threads must be a positive integer, got {num_threads!r}")
        spec = self.spec
        self.batch_size = int(batch_size)
        self.num_threads = int(num_threads)
        self.model = load_model(spec)
        self.dt = control_timestep(spec, self.model)
        self.init_qpos = self.model.qpos0.copy()
        self.obs_dim = spec.obs_dim
        self.act_dim = spec.act_dim
        self.n_obj = spec.n_obj
        self.action_low = np.asarray(spec.act_low, dtype=np.float32)
        self.action_high = np.asarray(spec.act_high, dtype=np.float32)

        B = self.batch_size
        self.datas = [mujoco.MjData(self.model) for _ in range(B)]
        # Views into each MjData, created once (attribute access builds a new view each time).
        self._qpos_views = [d.qpos for d in self.datas]
        self._qvel_views = [d.qvel for d in self.datas]
        # Copies of the state of every slot after its latest reset/step, shape (B, nq) / (B, nv).
        self._qpos = np.zeros((B, self.model.nq))
        self._qvel = np.zeros((B, self.model.nv))
        self._obs = np.zeros((B, spec.obs_dim), dtype=np.float32)
        self._active = np.zeros(B, dtype=bool)
        self._lengths = np.zeros(B, dtype=np.int64)
        self._returns = np.zeros((B, spec.n_obj), dtype=np.float64)
        self._was_reset = False
        self._pool = ThreadPoolExecutor(self.num_threads) if self.num_threads > 1 else None

    # ---------------------------------------------------------------- state of the episodes

    @property
    def active(self) -> np.ndarray:
        """(B,) bool: slots whose episode is still running."""
        return self._active.copy()

    @property
    def lengths(self) -> np.ndarray:
        """(B,) int64: steps taken by each slot in its episode."""
        return self._lengths.copy()

    @property
    def done(self) -> bool:
        """True when no slot is running (also before the first reset)."""
        return not self._active.any()

    @property
    def returns(self) -> np.ndarray:
        """(B, n_obj) float64: sum of each slot's (float32) reward vectors in this episode."""
        return self._returns.copy()

    @property
    def observations(self) -> np.ndarray:
        """(B, obs_dim) float32: each slot's latest observation."""
        return self._obs.copy()

    # ---------------------------------------------------------------------------- stepping

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        """Start one episode in every slot; slot i is seeded with ``seeds[i]`` exactly like
        ``MOMujocoEnv(env_id).reset(seed=seeds[i])``.  Returns observations (B, obs_dim) float32."""
        seeds = list(seeds)
        if len(seeds) != self.batch_size:
            raise ValueError(
                f"{self.spec.id}: reset needs {self.batch_size} seeds (one per slot), got {len(seeds)}"
            )
        for i, seed in enumerate(seeds):
            if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
                raise ValueError(
                    f"{self.spec.id}: seeds must be non-negative integers, got {seed!r} at slot {i}"
                )
        for i, seed in enumerate(seeds):
            rng, _ = seeding.np_random(int(seed))
            reset_physics(self.spec, self.model, self.datas[i], rng)
            self._qpos[i] = self._qpos_views[i]
            self._qvel[i] = self._qvel_views[i]
        self._obs = compute_observations(self.spec, self._qpos, self._qvel)
        self._active[:] = True
        self._lengths[:] = 0
        self._returns[:] = 0.0
        self._was_reset = True
        return self._obs.copy()

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Advance every running slot by one environment step.

        Args:
            actions: (B, act_dim); rows of finished slots are ignored (they may hold anything).

        Returns:
            ``(obs (B, obs_dim) float32, rewards (B, n_obj) float32, terminated (B,) bool,
            truncated (B,) bool)``; finished slots report their last observation, reward 0 and
            False/False.
        """
        spec = self.spec
        if not self._was_reset:
            raise RuntimeError(f"{spec.id}: call reset(seeds) before step()")
        actions = np.asarray(actions)
        if actions.shape != (self.batch_size, spec.act_dim):
            raise ValueError(
                f"{spec.id}: actions must have shape ({self.batch_size}, {spec.act_dim}), "
                f"got {actions.shape}"
            )
        rewards = np.zeros((self.batch_size, spec.n_obj), dtype=np.float32)
        terminated = np.zeros(self.batch_size, dtype=bool)
        truncated = np.zeros(self.batch_size, dtype=bool)
        idx = np.flatnonzero(self._active)
        if idx.size == 0:
            return self._obs.copy(), rewards, terminated, truncated

        clipped = clip_actions(spec, actions[idx])
        qpos_before = self._qpos[idx]
        self._advance(idx.tolist(), clipped)
        qpos = self._qpos[idx]
        qvel = self._qvel[idx]

        step_rewards = compute_rewards(spec, qpos_before, qpos, qvel, clipped, self.dt, self.init_qpos)
        step_terminated = compute_terminated(spec, qpos, qvel)
        self._obs[idx] = compute_observations(spec, qpos, qvel)
        self._lengths[idx] += 1
        step_truncated = self._lengths[idx] >= spec.max_episode_steps

        rewards[idx] = step_rewards
        terminated[idx] = step_terminated
        truncated[idx] = step_truncated
        self._returns[idx] += step_rewards
        self._active[idx] = ~(step_terminated | step_truncated)
        return self._obs.copy(), rewards, terminated, truncated

    def _advance_slots(self, slots: list[int], actions: np.ndarray, rows: range) -> None:
        """Physics step of ``slots[k]`` with ``actions[k]`` for k in ``rows``; copies the new state."""
        spec, model = self.spec, self.model
        datas, qpos_views, qvel_views = self.datas, self._qpos_views, self._qvel_views
        qpos_buf, qvel_buf = self._qpos, self._qvel
        for k in rows:
            i = slots[k]
            simulate(spec, model, datas[i], actions[k])
            qpos_buf[i] = qpos_views[i]
            qvel_buf[i] = qvel_views[i]

    def _advance(self, slots: list[int], actions: np.ndarray) -> None:
        n = len(slots)
        if self._pool is None or n < 2 * self.num_threads:
            self._advance_slots(slots, actions, range(n))
            return
        bounds = np.linspace(0, n, self.num_threads + 1).astype(int)
        futures = [
            self._pool.submit(self._advance_slots, slots, actions, range(lo, hi))
            for lo, hi in zip(bounds[:-1], bounds[1:])
        ]
        for future in futures:
            future.result()

    # ------------------------------------------------------------------------------ cleanup

    def close(self) -> None:
        """Stop the thread pool (if any).  Safe to call more than once."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> "BatchedEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BatchedEnv({self.spec.id!r}, batch_size={self.batch_size}, num_threads={self.num_threads})"
