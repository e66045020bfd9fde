"""The D4MORL reward vectors, termination tests and observations, as batched functions.

Each task returns a *reward vector* (one entry per objective) instead of a scalar, exactly as
defined by D4MORL's environment code (docs/protocol.md, docs/environments.md):

==================  ==========  ====================================================  =====================================
D4MORL id           frame skip  objectives (per-step reward vector)                   termination
==================  ==========  ====================================================  =====================================
MO-HalfCheetah-v2   5           run = min(4, dx/dt) + 1; energy = 4 - sum(a^2) + 1    body angle qpos[2] leaves (-50, 50) deg
MO-Hopper-v2        5           run = 1.5 dx/dt + 1 - 2e-4 sum(a^2);                  as MO-Hopper-v3
                                jump = 12 (h - h0) + 1 - 2e-4 sum(a^2)
MO-Hopper-v3        5           run = 1.5 dx/dt + 1; jump = 12 (h - h0) + 1;          height qpos[1] <= 0.4 or any of
                                energy = 4 - sum(a^2) + 1                             qpos[2..5] outside (-90, 90) deg
MO-Walker2d-v2      4           speed = dx/dt + 1; energy = 4 - sum(a^2) + 1          unless 0.8 < qpos[1] < 2.0 and
                                                                                      -1 < qpos[2] < 1 (rad)
MO-Ant-v2           5           vx = dx/dt - 0.5 sum(a^2) + 1;                        only a non-finite qpos or qvel
                                vy = dy/dt - 0.5 sum(a^2) + 1
MO-Swimmer-v2       4           forward = dx/dt; energy = 0.3 - 0.15 sum(a^2)         never (time limit only)
==================  ==========  ====================================================  =====================================

``dt`` is the MuJoCo timestep times the frame skip, ``dx`` the change of the root x position
``qpos[0]`` over one environment step, ``h = qpos[1]`` the torso height and ``h0`` its initial
value (``model.qpos0[1] = 1.25`` for the Hopper).  For the Ant, ``dx``/``dy`` are the changes of
the torso (free joint) position ``qpos[0]``/``qpos[1]``.  Episodes are truncated by the environment
itself after ``max_episode_steps = 500`` steps.

Every function here works on a batch of states (arrays with a leading batch axis), so that one
code path serves :class:`morl.envs.gym_env.MOMujocoEnv` (a batch of one) and the slots of
:class:`morl.envs.batched.BatchedEnv` with bit-identical results; :data:`morl.envs.tasks.ENV_SPECS`
points each task to its three functions.

* Observations exclude the root x position (Ant and Swimmer also the y position); Hopper and
  Walker2d observations clip ``qvel`` to [-10, 10]: HalfCheetah 17 = qpos[1:] (8) + qvel (9);
  Hopper 11 = qpos[1:] (5) + clip(qvel) (6); Walker2d 17 = qpos[1:] (8) + clip(qvel) (9);
  Ant 27 = qpos[2:] (13) + qvel (14), no contact forces; Swimmer 8 = qpos[2:] (3) + qvel (5).
* Ant: the velocities are the torso's free-joint position change ``qpos[0:2]`` over the step
  divided by ``dt``.  D4MORL's code reads the torso's ``xpos`` (``get_body_com``), which mujoco-py
  leaves one MuJoCo substep behind ``qpos`` after ``mj_step``; both measure the same body, the
  difference is that time shift only.  The Ant terminates only when the state (qpos or qvel)
  stops being finite, as in D4MORL's code (no torso height check, unlike gymnasium's Ant).  Note
  that MuJoCo itself resets an ``MjData`` (with a warning) when ``mj_step`` meets NaN or huge
  values in qpos, qvel or qacc, so in practice this test rarely fires.
* Swimmer: no alive bonus and no termination at all (not even on a non-finite state), as in
  D4MORL's code; only the 500-step truncation ends an episode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Constant added to every shifted objective so that rewards stay positive ("alive" bonus).
ALIVE_BONUS = 1.0


@dataclass(frozen=True)
class Steps:
    """A batch of ``B`` environment steps, what a reward function reads.

    Attributes:
        qpos_before: (B, nq) positions before the step.
        qpos, qvel: (B, nq), (B, nv) state after the step.
        action: (B, act_dim) float64, the clipped actions.
        dt: duration of one environment step (MuJoCo timestep times frame skip).
        init_qpos: (nq,) the model's initial positions ``qpos0``.
    """

    qpos_before: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    action: np.ndarray
    dt: float
    init_qpos: np.ndarray

    def forward_velocity(self) -> np.ndarray:
        """Root x velocity ``(qpos[0] - qpos_before[0]) / dt`` per row."""
        return (self.qpos[:, 0] - self.qpos_before[:, 0]) / self.dt

    def lateral_velocity(self) -> np.ndarray:
        """Root y velocity ``(qpos[1] - qpos_before[1]) / dt`` per row (Ant)."""
        return (self.qpos[:, 1] - self.qpos_before[:, 1]) / self.dt

    def height_gain(self) -> np.ndarray:
        """Torso height above its initial value, ``qpos[1] - init_qpos[1]`` per row (Hopper)."""
        return self.qpos[:, 1] - self.init_qpos[1]


# Signatures of the per-task functions an EnvSpec points to.  All work on batches: qpos (B, nq),
# qvel (B, nv); they return new arrays.
RewardFn = Callable[[Steps], np.ndarray]
TerminationFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
ObservationFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


# --------------------------------------------------------------------------------------------
# Small building blocks shared by the reward definitions
# --------------------------------------------------------------------------------------------


def squared_action_norm(action: np.ndarray) -> np.ndarray:
    """``sum_j a_j^2`` per row of ``action`` (B, act_dim), summed in a fixed left-to-right order.

    numpy's reductions may change their summation order with the array shape (pairwise blocks
    for longer rows), which would make a batch of B environments differ in the last bit from B
    single environments; an explicit loop over the few action dimensions avoids that.
    """
    total = action[:, 0] * action[:, 0]
    for j in range(1, action.shape[1]):
        total = total + action[:, j] * action[:, j]
    return total


def energy_reward(action: np.ndarray) -> np.ndarray:
    """D4MORL energy objective ``4 - sum(a^2) + 1`` (HalfCheetah, Hopper-v3, Walker2d)."""
    return 4.0 - squared_action_norm(action) + ALIVE_BONUS


# --------------------------------------------------------------------------------------------
# Per-task reward vectors
# --------------------------------------------------------------------------------------------


def halfcheetah_rewards(steps: Steps) -> np.ndarray:
    """MO-HalfCheetah-v2: ``[run, energy]`` with run = min(4, dx/dt) + 1, energy = 4 - |a|^2 + 1."""
    run = np.minimum(4.0, steps.forward_velocity()) + ALIVE_BONUS
    return np.stack([run, energy_reward(steps.action)], axis=1)


def hopper_v3_rewards(steps: Steps) -> np.ndarray:
    """MO-Hopper-v3: ``[run, jump, energy]``.

    run = 1.5 dx/dt + 1, jump = 12 (h - h0) + 1 with h = qpos[1] after the step and
    h0 = init_qpos[1], energy = 4 - |a|^2 + 1.
    """
    run = 1.5 * steps.forward_velocity() + ALIVE_BONUS
    jump = 12.0 * steps.height_gain() + ALIVE_BONUS
    return np.stack([run, jump, energy_reward(steps.action)], axis=1)


def hopper_v2_rewards(steps: Steps) -> np.ndarray:
    """MO-Hopper-v2: ``[run, jump]``.

    run = 1.5 dx/dt + 1 - 2e-4 |a|^2, jump = 12 (h - h0) + 1 - 2e-4 |a|^2 with h = qpos[1] after
    the step and h0 = init_qpos[1].
    """
    others = ALIVE_BONUS - 2e-4 * squared_action_norm(steps.action)
    run = 1.5 * steps.forward_velocity() + others
    jump = 12.0 * steps.height_gain() + others
    return np.stack([run, jump], axis=1)


def walker2d_rewards(steps: Steps) -> np.ndarray:
    """MO-Walker2d-v2: ``[speed, energy]`` with speed = dx/dt + 1, energy = 4 - |a|^2 + 1."""
    speed = steps.forward_velocity() + ALIVE_BONUS
    return np.stack([speed, energy_reward(steps.action)], axis=1)


def ant_rewards(steps: Steps) -> np.ndarray:
    """MO-Ant-v2: ``[vx, vy]`` with vx = dx/dt - 0.5 |a|^2 + 1 and vy = dy/dt - 0.5 |a|^2 + 1,
    (dx, dy) the torso's change of ``qpos[0:2]`` over the step."""
    others = ALIVE_BONUS - 0.5 * squared_action_norm(steps.action)
    vx = steps.forward_velocity() + others
    vy = steps.lateral_velocity() + others
    return np.stack([vx, vy], axis=1)


def swimmer_rewards(steps: Steps) -> np.ndarray:
    """MO-Swimmer-v2: ``[forward, energy]`` with forward = dx/dt (no alive bonus) and
    energy = 0.3 - 0.15 |a|^2."""
    forward = steps.forward_velocity()
    energy = 0.3 - 0.15 * squared_action_norm(steps.action)
    return np.stack([forward, energy], axis=1)


# --------------------------------------------------------------------------------------------
# Per-task termination tests (True = the episode ends)
# --------------------------------------------------------------------------------------------

_MAX_CHEETAH_ANGLE = np.deg2rad(50.0)
_MAX_HOPPER_ANGLE = np.deg2rad(90.0)
_MIN_HOPPER_HEIGHT = 0.4
_WALKER_HEIGHT_RANGE = (0.8, 2.0)
_WALKER_ANGLE_RANGE = (-1.0, 1.0)


def halfcheetah_terminated(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """True where the body angle ``qpos[2]`` has left the open interval (-50 deg, 50 deg).

    Written as ``not (|angle| < limit)`` so that a non-finite angle also ends the episode.
    """
    return ~(np.abs(qpos[:, 2]) < _MAX_CHEETAH_ANGLE)


def hopper_terminated(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """Standard Hopper health check: healthy iff height ``qpos[1] > 0.4`` and each of the
    angles ``qpos[2..5]`` lies in (-90 deg, 90 deg); terminated = not healthy (NaN is unhealthy)."""
    healthy = (qpos[:, 1] > _MIN_HOPPER_HEIGHT) & np.all(np.abs(qpos[:, 2:6]) < _MAX_HOPPER_ANGLE, axis=1)
    return ~healthy


def walker2d_terminated(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """Walker2d health check: healthy iff ``0.8 < qpos[1] < 2.0`` (height) and
    ``-1 < qpos[2] < 1`` (torso angle, rad); terminated = not healthy (NaN is unhealthy)."""
    height, angle = qpos[:, 1], qpos[:, 2]
    healthy = (
        (_WALKER_HEIGHT_RANGE[0] < height)
        & (height < _WALKER_HEIGHT_RANGE[1])
        & (_WALKER_ANGLE_RANGE[0] < angle)
        & (angle < _WALKER_ANGLE_RANGE[1])
    )
    return ~healthy


def nonfinite_terminated(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """True where any entry of ``qpos`` or ``qvel`` is NaN or infinite (Ant)."""
    return ~(np.all(np.isfinite(qpos), axis=1) & np.all(np.isfinite(qvel), axis=1))


def never_terminated(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """All False: the episode only ends by truncation (Swimmer)."""
    return np.zeros(qpos.shape[0], dtype=bool)


# --------------------------------------------------------------------------------------------
# Per-task observations
# --------------------------------------------------------------------------------------------


def observe_without_x(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """``[qpos[1:], qvel]`` as float32 (HalfCheetah)."""
    return np.concatenate([qpos[:, 1:], qvel], axis=1, dtype=np.float32)


def observe_without_x_clip_qvel(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """``[qpos[1:], clip(qvel, -10, 10)]`` as float32 (Hopper, Walker2d)."""
    return np.concatenate([qpos[:, 1:], np.clip(qvel, -10.0, 10.0)], axis=1, dtype=np.float32)


def observe_without_xy(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """``[qpos[2:], qvel]`` as float32 (Ant without contact forces, Swimmer)."""
    return np.concatenate([qpos[:, 2:], qvel], axis=1, dtype=np.float32)
