"""Batched stepping of many copies of one task (evaluation and data collection), and its slots.

:class:`BatchedEnv` steps ``B`` slots in lockstep: one call to :meth:`BatchedEnv.step` takes a
``(B, act_dim)`` array of actions and returns ``(B, obs_dim)`` observations, ``(B, n_obj)``
reward vectors and ``(B,)`` done flags.

**Same trajectories as single environments.** For a D4MORL task the slots are rows of MuJoCo
full-physics state, stepped by ``mujoco.rollout``, and use the same module-level functions as :class:`morl.envs.gym_env.MOMujocoEnv` (reset noise,
physics step, reward vector, termination, observation), so slot ``i`` reset with seed ``s`` and
fed the same actions follows exactly the trajectory of ``MOMujocoEnv(env_id)`` reset with
``seed=s``.  Other tasks (MO-Gymnasium ids) hold one gymnasium environment per slot.

**Episode ends.** :meth:`BatchedEnv.reset` takes one seed per slot and, optionally, an iterable
``next_seeds``:

* without ``next_seeds`` (evaluation) every slot runs one episode; once it has terminated or been
  truncated it stops, and later steps leave it untouched (its observation stays the last one)
  and report reward 0, ``terminated=False`` and ``truncated=False`` for it;
* with ``next_seeds`` (collection) a slot whose episode ends starts the next episode at once,
  seeded with the next value of ``next_seeds`` (slots that end in the same step take them in
  slot order).  The step returns the first observation of the new episode in that row, and
  :attr:`BatchedEnv.final_observations` holds the observation the finished episode ended in.
  When ``next_seeds`` runs out, slots stop as in evaluation.  :attr:`BatchedEnv.episode_ids`
  numbers episodes in the order they start (``0 .. B-1`` for the first ones).

**Every core.**  ``num_workers = W`` says how many cores step the slots.  For a D4MORL task all
slots live in this process as rows of MuJoCo full-physics state, and each step is one
``mujoco.rollout`` call that runs them on W C++ threads with no Python per slot
(:class:`MujocoSlots`).  Other tasks (MO-Gymnasium ids) are split into W contiguous
blocks: the calling process steps the first, and W - 1 worker processes one each; actions and
results travel through shared memory, one message per worker and step.  Each slot's computation
is the same wherever it runs, so W changes the speed, never the results.  The workers are
started with "spawn", which imports the caller's main script in each of them: a script that makes
a ``BatchedEnv`` for such a task with ``num_workers > 1`` must keep its top-level work under
``if __name__ == "__main__":`` (as ``workflow_scripts/`` do).  (For D4MORL tasks, worker processes
reached 54-74% of the raw ``mujoco.rollout`` floor with 2 cores, threads inside one rollout
call 72-89%; Python threads around ``mj_step`` 1.2x one thread: ``docs/benchmarks.md``.)
"""

from __future__ import annotations

import multiprocessing as mp
import numbers
import traceback
from collections.abc import Iterable, Iterator, Sequence
from multiprocessing import shared_memory
from typing import Any

import mujoco
import numpy as np
from gymnasium.utils import seeding

from morl.envs import physics
from morl.envs.gym_env import make_env
from morl.envs.tasks import EnvSpec, get_spec, is_d4morl_task

__all__ = ["BatchedEnv", "GymSlots", "MujocoSlots", "make_slot_group"]


# --------------------------------------------------------------------------------------------
# Slot groups: the per-slot state behind BatchedEnv
# --------------------------------------------------------------------------------------------


class MujocoSlots:
    """Slots ``slots`` (a range of batch rows) of a D4MORL task, stepped by ``mujoco.rollout``.

    Each slot is one row of :attr:`state`, MuJoCo's ``mjSTATE_FULLPHYSICS`` vector (time, qpos,
    qvel, ...).  A step hands the rows of the running slots and their actions (each held for
    ``frame_skip`` physics steps) to one ``mujoco.rollout`` call, which runs them in C++ on
    ``threads`` threads with no Python per slot; rewards, termination and observations are then
    computed for all of them at once with the functions
    :class:`~morl.envs.gym_env.MOMujocoEnv` uses.  Because :func:`~morl.envs.physics.load_model`
    turns off the solver's warm start, the full-physics state is all a step depends on, so a slot
    follows exactly the trajectory of a :class:`~morl.envs.gym_env.MOMujocoEnv` fed the same
    actions, whichever thread steps it.

    ``buffers`` holds the batch arrays ``actions`` (clipped, float64), ``obs``, ``rewards``,
    ``terminated`` and ``truncated``; :meth:`reset` and :meth:`step` write the rows of the slots
    they are given.
    """

    def __init__(self, spec: EnvSpec, slots: range, buffers: Any, threads: int = 1) -> None:
        from mujoco import rollout  # imported here: only the batched stepper needs it

        self.spec, self.buffers, self.lo = spec, buffers, slots.start
        model = self.model = physics.load_model(spec)
        self.dt = physics.control_timestep(spec, model)
        self.init_qpos = model.qpos0.copy()
        n = len(slots)
        self._full = mujoco.mjtState.mjSTATE_FULLPHYSICS
        nstate = mujoco.mj_stateSize(model, self._full)
        # The state layout is time, qpos, qvel, ...
        start = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_TIME)
        self._qpos_cols = slice(start, start + model.nq)
        self._qvel_cols = slice(start + model.nq, start + model.nq + model.nv)
        self.state = np.zeros((n, nstate))
        self.qpos, self.qvel = self.state[:, self._qpos_cols], self.state[:, self._qvel_cols]  # writable views
        self.threads = max(1, min(int(threads), n))
        self._scratch = mujoco.MjData(model)  # resets are computed here, then stored in `state`
        self._datas = [mujoco.MjData(model) for _ in range(self.threads)]
        self._models = [model] * n
        self._control = np.zeros((n, spec.frame_skip, model.nu))
        self._out = np.zeros((n, spec.frame_skip, nstate))
        # nthread=0: no pool, rollouts run on the calling thread.
        self._runner = rollout.Rollout(nthread=self.threads if self.threads > 1 else 0)

    def reset(self, slots: Sequence[int], seeds: Sequence[int]) -> None:
        rows = np.asarray(slots, dtype=np.int64) - self.lo
        for k, seed in zip(rows.tolist(), seeds):
            rng, _ = seeding.np_random(int(seed))
            physics.reset_physics(self.spec, self.model, self._scratch, rng)
            mujoco.mj_getState(self.model, self._scratch, self.state[k], self._full)
        self.buffers.obs[np.asarray(slots)] = physics.compute_observations(self.spec, self.qpos[rows], self.qvel[rows])

    def step(self, slots: np.ndarray) -> None:
        spec, buf = self.spec, self.buffers
        rows = slots - self.lo
        k = rows.size
        everyone = k == self.state.shape[0]  # all rows, in order: no gather needed
        actions = buf.actions[slots]
        qpos_before = self.qpos[rows]
        control, out = self._control[:k], self._out[:k]
        control[...] = actions[:, None, :]
        self._runner.rollout(
            self._models if everyone else self._models[:k],
            self._datas,
            self.state if everyone else self.state[rows],
            control,
            nstep=spec.frame_skip,
            state=out,
            skip_checks=True,
        )
        new = out[:, -1]
        self.state[rows] = new
        qpos, qvel = new[:, self._qpos_cols], new[:, self._qvel_cols]
        buf.rewards[slots] = physics.compute_rewards(spec, qpos_before, qpos, qvel, actions, self.dt, self.init_qpos)
        buf.terminated[slots] = physics.compute_terminated(spec, qpos, qvel)
        buf.truncated[slots] = False
        buf.obs[slots] = physics.compute_observations(spec, qpos, qvel)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None


class GymSlots:
    """Slots of any task made by :func:`make_env` (one environment per slot, stepped in turn)."""

    def __init__(self, spec: Any, slots: range, buffers: Any) -> None:
        self.spec, self.buffers, self.lo = spec, buffers, slots.start
        self.envs = [make_env(spec.id) for _ in slots]

    def reset(self, slots: Sequence[int], seeds: Sequence[int]) -> None:
        for slot, seed in zip(slots, seeds):
            self.buffers.obs[slot] = self.envs[slot - self.lo].reset(seed=int(seed))[0]

    def step(self, slots: np.ndarray) -> None:
        buf = self.buffers
        for slot in slots.tolist():
            obs, reward, terminated, truncated, _ = self.envs[slot - self.lo].step(buf.actions[slot])
            buf.obs[slot], buf.rewards[slot] = obs, reward
            buf.terminated[slot], buf.truncated[slot] = terminated, truncated

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_slot_group(env_id: str, slots: range, buffers: Any, threads: int = 1) -> MujocoSlots | GymSlots:
    """The slot group for ``env_id``: ``mujoco.rollout`` on ``threads`` threads for D4MORL tasks,
    else one environment per slot stepped in turn (``threads`` is ignored)."""
    spec = get_spec(env_id)
    if is_d4morl_task(env_id):
        return MujocoSlots(spec, slots, buffers, threads=threads)
    return GymSlots(spec, slots, buffers)


def _check_positive_int(value: Any, what: str, env_id: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{env_id}: {what} must be a positive integer, got {value!r}")
    return int(value)


class _Buffers:
    """The arrays slots read and write: in this process's memory, or in shared memory."""

    FIELDS = ("actions", "obs", "rewards", "terminated", "truncated", "active")

    def __init__(
        self, batch_size: int, obs_dim: int, act_dim: int, n_obj: int, shared: bool, names: dict[str, str] | None = None
    ):
        self.layout = {
            "actions": ((batch_size, act_dim), np.float64),
            "obs": ((batch_size, obs_dim), np.float32),
            "rewards": ((batch_size, n_obj), np.float32),
            "terminated": ((batch_size,), np.bool_),
            "truncated": ((batch_size,), np.bool_),
            "active": ((batch_size,), np.bool_),
        }
        self._shm: list[shared_memory.SharedMemory] = []
        self.names: dict[str, str] = {}
        for key, (shape, dtype) in self.layout.items():
            nbytes = max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize)
            if not shared:
                arr = np.zeros(shape, dtype)
            else:
                if names is None:
                    shm = shared_memory.SharedMemory(create=True, size=nbytes)
                else:
                    shm = shared_memory.SharedMemory(name=names[key])
                self._shm.append(shm)
                self.names[key] = shm.name
                arr = np.ndarray(shape, dtype, buffer=shm.buf)
                if names is None:
                    arr[...] = 0
            setattr(self, key, arr)

    def close(self, unlink: bool) -> None:
        for key in self.layout:
            setattr(self, key, None)
        for shm in self._shm:
            shm.close()
            if unlink:
                shm.unlink()
        self._shm = []


def _worker_main(
    env_id: str, slots: tuple[int, int], sizes: tuple[int, int, int, int], names: dict[str, str], conn
) -> None:
    """A worker process: owns slots ``range(*slots)``; answers reset/step/close messages."""
    buffers = None
    try:
        buffers = _Buffers(*sizes, shared=True, names=names)
        group = make_slot_group(env_id, range(*slots), buffers)
        conn.send(("ok", None))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        conn.send(("error", traceback.format_exc()))
        return
    lo, hi = slots
    try:
        while True:
            msg = conn.recv()
            kind = msg[0]
            if kind == "close":
                break
            try:
                if kind == "step":
                    active = np.flatnonzero(buffers.active[lo:hi]) + lo
                    if active.size:
                        group.step(active)
                elif kind == "reset":
                    group.reset(msg[1], msg[2])
                conn.send(("ok", None))
            except BaseException:  # noqa: BLE001
                conn.send(("error", traceback.format_exc()))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        group.close()
        buffers.close(unlink=False)


class BatchedEnv:
    """``batch_size`` copies of the task ``env_id`` stepped together.

    Args:
        env_id: a D4MORL id (:data:`morl.envs.tasks.ENV_SPECS`) or an MO-Gymnasium id.
        batch_size: number of slots B (>= 1).
        num_workers: cores that step the slots: C++ threads for a D4MORL task, processes for
            other tasks (1 = all on the calling thread).  Capped at ``batch_size``.

    Attributes:
        spec: the task's spec (sizes, bounds, episode cap).
        obs_dim, act_dim, n_obj: sizes.
    """

    def __init__(self, env_id: str, batch_size: int, *, num_workers: int = 1) -> None:
        self.spec = get_spec(env_id)
        self.batch_size = _check_positive_int(batch_size, "batch_size", env_id)
        num_workers = _check_positive_int(num_workers, "num_workers", env_id)
        self.num_workers = min(num_workers, self.batch_size)
        spec = self.spec
        self.obs_dim, self.act_dim, self.n_obj = spec.obs_dim, spec.act_dim, spec.n_obj
        B = self.batch_size
        sizes = (B, spec.obs_dim, spec.act_dim, spec.n_obj)
        # D4MORL tasks: every slot in this process, stepped by mujoco.rollout's C++ threads.
        # Other tasks: worker processes, one block of slots each, through shared memory.
        use_processes = self.num_workers > 1 and not is_d4morl_task(env_id)
        self._buf = _Buffers(*sizes, shared=use_processes)
        self._lengths = np.zeros(B, dtype=np.int64)
        self._returns = np.zeros((B, spec.n_obj), dtype=np.float64)
        self._final_obs = np.zeros((B, spec.obs_dim), dtype=np.float32)
        self._episode_ids = np.full(B, -1, dtype=np.int64)
        self._next_episode = 0
        self._next_seeds: Iterator[int] | None = None
        self._was_reset = False
        self._closed = False
        self._workers: list[tuple[Any, Any, range]] = []
        # With processes, block 0 is stepped in this process and the others by workers: with W
        # blocks on W cores every core works, and each step costs W - 1 messages, not W.
        blocks = self.num_workers if use_processes else 1
        bounds = np.linspace(0, B, blocks + 1).astype(int)
        self._local = range(0, int(bounds[1]))
        self._group = None
        try:
            self._start_workers(env_id, sizes, bounds[1:])
            self._group = make_slot_group(env_id, self._local, self._buf, threads=self.num_workers)
        except BaseException:
            self.close()
            raise

    def _start_workers(self, env_id: str, sizes: tuple[int, int, int, int], bounds: np.ndarray) -> None:
        # "spawn": the children import only numpy, mujoco and morl.envs, whatever threads
        # (torch's, say) the parent runs.
        ctx = mp.get_context("spawn")
        if len(bounds) > 1:
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                parent, child = ctx.Pipe()
                proc = ctx.Process(
                    target=_worker_main, args=(env_id, (int(lo), int(hi)), sizes, self._buf.names, child), daemon=True
                )
                proc.start()
                child.close()
                self._workers.append((proc, parent, range(int(lo), int(hi))))
            self._gather(range(len(self._workers)))

    # ---------------------------------------------------------------- state of the episodes

    @property
    def active(self) -> np.ndarray:
        """(B,) bool: slots whose episode is still running."""
        return self._buf.active.copy()

    @property
    def lengths(self) -> np.ndarray:
        """(B,) int64: steps taken by each slot in its current (or last) episode."""
        return self._lengths.copy()

    @property
    def done(self) -> bool:
        """True when no slot is running (also before the first reset)."""
        return not self._buf.active.any()

    @property
    def returns(self) -> np.ndarray:
        """(B, n_obj) float64: sum of each slot's (float32) reward vectors in its current episode."""
        return self._returns.copy()

    @property
    def observations(self) -> np.ndarray:
        """(B, obs_dim) float32: each slot's latest observation."""
        return self._buf.obs.copy()

    @property
    def final_observations(self) -> np.ndarray:
        """(B, obs_dim) float32: the observation each slot reached by its latest step, before any
        automatic reset (equal to :attr:`observations` where no episode ended)."""
        return self._final_obs.copy()

    @property
    def episode_ids(self) -> np.ndarray:
        """(B,) int64: the episode each slot runs (numbered in the order episodes start)."""
        return self._episode_ids.copy()

    # ---------------------------------------------------------------------------- stepping

    def reset(self, seeds: Sequence[int], *, next_seeds: Iterable[int] | None = None) -> np.ndarray:
        """Start one episode in every slot; slot i is seeded with ``seeds[i]`` exactly like
        ``MOMujocoEnv(env_id).reset(seed=seeds[i])``.  With ``next_seeds``, slots whose episode
        ends restart at once with the next of these seeds.  Returns observations (B, obs_dim)."""
        self._check_open()
        seeds = [self._check_seed(s, i) for i, s in enumerate(seeds)]
        if len(seeds) != self.batch_size:
            raise ValueError(f"{self.spec.id}: reset needs {self.batch_size} seeds (one per slot), got {len(seeds)}")
        self._reset_slots(np.arange(self.batch_size), seeds)
        self._buf.active[:] = True
        self._final_obs[:] = self._buf.obs
        self._episode_ids[:] = np.arange(self.batch_size)
        self._next_episode = self.batch_size
        self._next_seeds = iter(next_seeds) if next_seeds is not None else None
        self._was_reset = True
        return self._buf.obs.copy()

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Advance every running slot by one environment step.

        Args:
            actions: (B, act_dim); rows of finished slots are ignored (they may hold anything).

        Returns:
            ``(obs (B, obs_dim) float32, rewards (B, n_obj) float32, terminated (B,) bool,
            truncated (B,) bool)``; finished slots report their last observation, reward 0 and
            False/False.  Where an episode ended and the slot restarted, ``obs`` holds the new
            episode's first observation (see :attr:`final_observations`).
        """
        spec, buf = self.spec, self._buf
        self._check_open()
        if not self._was_reset:
            raise RuntimeError(f"{spec.id}: call reset(seeds) before step()")
        actions = np.asarray(actions)
        if actions.shape != (self.batch_size, spec.act_dim):
            raise ValueError(
                f"{spec.id}: actions must have shape ({self.batch_size}, {spec.act_dim}), got {actions.shape}"
            )
        idx = np.flatnonzero(buf.active)
        buf.rewards[:] = 0.0
        buf.terminated[:] = False
        buf.truncated[:] = False
        if idx.size == 0:
            return buf.obs.copy(), buf.rewards.copy(), buf.terminated.copy(), buf.truncated.copy()
        buf.actions[idx] = physics.clip_actions(spec, actions[idx])
        for _, conn, _ in self._workers:
            conn.send(("step",))
        local = idx[idx < self._local.stop]
        if local.size:
            self._group.step(local)
        self._gather(range(len(self._workers)))
        self._lengths[idx] += 1
        buf.truncated[idx] |= self._lengths[idx] >= spec.max_episode_steps
        self._returns[idx] += buf.rewards[idx]
        ended = idx[buf.terminated[idx] | buf.truncated[idx]]
        self._final_obs[idx] = buf.obs[idx]
        obs, rewards = buf.obs.copy(), buf.rewards.copy()
        terminated, truncated = buf.terminated.copy(), buf.truncated.copy()
        if ended.size:
            self._restart_or_stop(ended)
            obs[ended] = buf.obs[ended]
        return obs, rewards, terminated, truncated

    def _restart_or_stop(self, ended: np.ndarray) -> None:
        restart, seeds = [], []
        for slot in ended:
            seed = next(self._next_seeds, None) if self._next_seeds is not None else None
            if seed is None:
                self._buf.active[slot] = False
                self._episode_ids[slot] = -1
                continue
            restart.append(int(slot))
            seeds.append(self._check_seed(seed, int(slot)))
        if restart:
            slots = np.asarray(restart)
            self._reset_slots(slots, seeds)
            self._episode_ids[slots] = self._next_episode + np.arange(len(slots))
            self._next_episode += len(slots)

    def _reset_slots(self, slots: np.ndarray, seeds: list[int]) -> None:
        self._lengths[slots] = 0
        self._returns[slots] = 0.0
        busy = []
        for w, (_, conn, owned) in enumerate(self._workers):
            mine = [k for k, s in enumerate(slots) if owned.start <= s < owned.stop]
            if mine:
                conn.send(("reset", slots[mine], [seeds[k] for k in mine]))
                busy.append(w)
        local = [k for k, s in enumerate(slots) if s < self._local.stop]
        if local:
            self._group.reset(slots[local], [seeds[k] for k in local])
        self._gather(busy)

    def _gather(self, workers: Iterable[int]) -> None:
        errors = []
        for w in workers:
            proc, conn, owned = self._workers[w]
            try:
                status, detail = conn.recv()
            except EOFError:
                status, detail = "error", f"worker process exited with code {proc.exitcode}"
            if status != "ok":
                errors.append(f"worker for slots {owned.start}..{owned.stop - 1}: {detail}")
        if errors:
            raise RuntimeError(f"{self.spec.id}: " + "\n".join(errors))

    def _check_seed(self, seed: Any, slot: int) -> int:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"{self.spec.id}: seeds must be non-negative integers, got {seed!r} at slot {slot}")
        return int(seed)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self.spec.id}: this BatchedEnv is closed")

    # ------------------------------------------------------------------------------ cleanup

    def close(self) -> None:
        """Stop the workers (if any) and free shared memory.  Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self._group is not None:
            self._group.close()
        for _, conn, _ in self._workers:
            try:
                conn.send(("close",))
            except (BrokenPipeError, OSError):
                pass
        for proc, conn, _ in self._workers:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join()
            conn.close()
        self._workers = []
        self._buf.close(unlink=bool(self._buf.names))

    def __enter__(self) -> BatchedEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"BatchedEnv({self.spec.id!r}, batch_size={self.batch_size}, num_workers={self.num_workers})"
