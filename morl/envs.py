"""Multi-objective MuJoCo locomotion tasks of the D4MORL benchmark.

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

Implementation notes:

* The tasks are built directly on the ``mujoco`` Python bindings, not on gymnasium's
  ``MujocoEnv`` classes, so
  that the single environment (:class:`MOMujocoEnv`) and the batched stepper
  (:class:`morl.vector.BatchedEnv`) share the same module-level functions for the reset noise
  (:func:`sample_initial_state`), the physics step (:func:`simulate`), the reward vector
  (:func:`compute_rewards`), the termination test (:func:`compute_terminated`) and the
  observation (:func:`compute_observations`).  The last three work on batches of states
  (arrays with a leading batch axis), so one code path serves one or many environments and
  the results are bit-identical.
* The physics are those of the original D4MORL model files (PEDA's
  ``data_generation/environments/assets``, the same files as PGMORL's).  Those files no longer
  all compile in current MuJoCo, so each task starts from gymnasium's file of the same robot,
  which has the same geometry, and :func:`load_model` writes the original file's physical
  parameters into it before compiling (:class:`ModelEdits`): Hopper joint damping 40, no joint
  limits and foot gear 300; Walker2d joint damping 3.0 and geom density 1500; Ant gear 100;
  Swimmer gear 300.  HalfCheetah's files agree.  Every compiled parameter then equals the
  original's, and an open-loop action sequence gives the same returns on both (docs/environments.md).
  Timesteps: HalfCheetah 0.01 s (dt = 0.05 s), Hopper 0.002 s with RK4 (dt = 0.01 s), Walker2d
  0.002 s with RK4 (dt = 0.008 s), Ant 0.01 s with RK4 (dt = 0.05 s), Swimmer 0.01 s with RK4
  (dt = 0.04 s).  Gymnasium's own physics of these robots stay available through MO-Gymnasium's
  ids (``mo-hopper-v5``, ...).
* Actions are clipped to the D4MORL bounds before use (Hopper: [-2, 2] x [-2, 2] x [-4, 4], all
  other tasks [-1, 1]) and the energy terms use the clipped action.  gymnasium's ``hopper.xml``
  declares ``ctrlrange="-1 1"`` for its motors, which would make MuJoCo clamp the controls a
  second time; after loading a model we therefore overwrite ``model.actuator_ctrlrange`` with the
  D4MORL bounds of the task (a no-op for HalfCheetah, Walker2d, Ant and Swimmer, whose XML files
  already declare [-1, 1]), so the clipped action is exactly the control MuJoCo applies.
* Reset as PEDA's environment code resets: ``qpos = init_qpos + U(-1e-3, 1e-3)``, then qvel
  noise, ``1e-3 * N(0, 1)`` for HalfCheetah and Ant and ``U(-1e-3, 1e-3)`` for Hopper, Walker2d
  and Swimmer, drawn (in that order) from the environment's ``np_random`` generator, which
  ``reset(seed=...)`` seeds the gymnasium way.  ``init_qpos`` is the model's ``qpos0`` and
  ``init_qvel`` zero.  Both Hopper tasks keep ``qpos[1]`` exactly at ``h0``.  For the Ant,
  ``qpos0`` is the torso at height 0.75 with identity orientation and all leg joints at 0; the
  noise is also added to the torso quaternion, which is not renormalised (MuJoCo normalises it
  during integration).
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

Adding a task is one :class:`EnvSpec` entry in :data:`ENV_SPECS` pointing to small named
reward / termination / observation functions (all of the form ``f(qpos, qvel, ...)`` on batches).

Importing ``morl`` registers every task with gymnasium under its D4MORL id
(:func:`morl.register_envs`), so ``gymnasium.make("MO-HalfCheetah-v2")`` works (without a
``TimeLimit`` wrapper, because the environment truncates itself, and without gymnasium's passive
checker, which expects scalar rewards).  ``MO-Hopper-v2`` and ``MO-Hopper-v3`` are two different
D4MORL tasks, but gymnasium reads the ids as two versions of one environment, so
``gymnasium.make("MO-Hopper-v2")`` emits a harmless "out of date ... upgrading to version `v3`"
DeprecationWarning; ``MOMujocoEnv`` does not.
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import mujoco
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from morl import register_envs
from morl.errors import InputError

__all__ = [
    "ALIVE_BONUS",
    "ENV_SPECS",
    "EnvSpec",
    "MOMujocoEnv",
    "assets_dir",
    "check_physics_version",
    "clip_actions",
    "compute_observations",
    "compute_rewards",
    "compute_terminated",
    "control_timestep",
    "get_spec",
    "load_model",
    "physics_version",
    "reset_physics",
    "sample_initial_state",
    "simulate",
]

#: Constant added to every shifted objective so that rewards stay positive ("alive" bonus).
ALIVE_BONUS = 1.0

# Signatures of the per-task functions an EnvSpec points to.  All work on batches: qpos (B, nq),
# qvel (B, nv), action (B, act_dim) float64 (already clipped); they return new arrays.
RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, np.ndarray], np.ndarray]
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


def forward_velocity(qpos_before: np.ndarray, qpos: np.ndarray, dt: float) -> np.ndarray:
    """Root x velocity ``(qpos[0] - qpos_before[0]) / dt`` per row."""
    return (qpos[:, 0] - qpos_before[:, 0]) / dt


def lateral_velocity(qpos_before: np.ndarray, qpos: np.ndarray, dt: float) -> np.ndarray:
    """Root y velocity ``(qpos[1] - qpos_before[1]) / dt`` per row (Ant)."""
    return (qpos[:, 1] - qpos_before[:, 1]) / dt


def energy_reward(action: np.ndarray) -> np.ndarray:
    """D4MORL energy objective ``4 - sum(a^2) + 1`` (HalfCheetah, Hopper-v3, Walker2d)."""
    return 4.0 - squared_action_norm(action) + ALIVE_BONUS


# --------------------------------------------------------------------------------------------
# Per-task reward vectors
# --------------------------------------------------------------------------------------------


def halfcheetah_rewards(
    qpos_before: np.ndarray,
    qpos: np.ndarray,
    qvel: np.ndarray,
    action: np.ndarray,
    dt: float,
    init_qpos: np.ndarray,
) -> np.ndarray:
    """MO-HalfCheetah-v2: ``[run, energy]`` with run = min(4, dx/dt) + 1, energy = 4 - |a|^2 + 1."""
    run = np.minimum(4.0, forward_velocity(qpos_before, qpos, dt)) + ALIVE_BONUS
    return np.stack([run, energy_reward(action)], axis=1)


def hopper_v3_rewards(
    qpos_before: np.ndarray,
    qpos: np.ndarray,
    qvel: np.ndarray,
    action: np.ndarray,
    dt: float,
    init_qpos: np.ndarray,
) -> np.ndarray:
    """MO-Hopper-v3: ``[run, jump, energy]``.

    run = 1.5 dx/dt + 1, jump = 12 (h - h0) + 1 with h = qpos[1] after the step and
    h0 = init_qpos[1], energy = 4 - |a|^2 + 1.
    """
    run = 1.5 * forward_velocity(qpos_before, qpos, dt) + ALIVE_BONUS
    jump = 12.0 * (qpos[:, 1] - init_qpos[1]) + ALIVE_BONUS
    return np.stack([run, jump, energy_reward(action)], axis=1)


def hopper_v2_rewards(
    qpos_before: np.ndarray,
    qpos: np.ndarray,
    qvel: np.ndarray,
    action: np.ndarray,
    dt: float,
    init_qpos: np.ndarray,
) -> np.ndarray:
    """MO-Hopper-v2: ``[run, jump]``.

    run = 1.5 dx/dt + 1 - 2e-4 |a|^2, jump = 12 (h - h0) + 1 - 2e-4 |a|^2 with h = qpos[1] after
    the step and h0 = init_qpos[1].
    """
    others = ALIVE_BONUS - 2e-4 * squared_action_norm(action)
    run = 1.5 * forward_velocity(qpos_before, qpos, dt) + others
    jump = 12.0 * (qpos[:, 1] - init_qpos[1]) + others
    return np.stack([run, jump], axis=1)


def walker2d_rewards(
    qpos_before: np.ndarray,
    qpos: np.ndarray,
    qvel: np.ndarray,
    action: np.ndarray,
    dt: float,
    init_qpos: np.ndarray,
) -> np.ndarray:
    """MO-Walker2d-v2: ``[speed, energy]`` with speed = dx/dt + 1, energy = 4 - |a|^2 + 1."""
    speed = forward_velocity(qpos_before, qpos, dt) + ALIVE_BONUS
    return np.stack([speed, energy_reward(action)], axis=1)


def ant_rewards(
    qpos_before: np.ndarray,
    qpos: np.ndarray,
    qvel: np.ndarray,
    action: np.ndarray,
    dt: float,
    init_qpos: np.ndarray,
) -> np.ndarray:
    """MO-Ant-v2: ``[vx, vy]`` with vx = dx/dt - 0.5 |a|^2 + 1 and vy = dy/dt - 0.5 |a|^2 + 1,
    (dx, dy) the torso's change of ``qpos[0:2]`` over the step."""
    others = ALIVE_BONUS - 0.5 * squared_action_norm(action)
    vx = forward_velocity(qpos_before, qpos, dt) + others
    vy = lateral_velocity(qpos_before, qpos, dt) + others
    return np.stack([vx, vy], axis=1)


def swimmer_rewards(
    qpos_before: np.ndarray,
    qpos: np.ndarray,
    qvel: np.ndarray,
    action: np.ndarray,
    dt: float,
    init_qpos: np.ndarray,
) -> np.ndarray:
    """MO-Swimmer-v2: ``[forward, energy]`` with forward = dx/dt (no alive bonus) and
    energy = 0.3 - 0.15 |a|^2."""
    forward = forward_velocity(qpos_before, qpos, dt)
    energy = 0.3 - 0.15 * squared_action_norm(action)
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


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelEdits:
    """Where the original D4MORL model file of a robot differs physically from gymnasium's file.

    The D4MORL data was generated with the model files of PEDA's ``data_generation/environments/
    assets`` (the same files as PGMORL's). Gymnasium's files of the same robots share their
    geometry but not all of their physics. :func:`load_model` applies these values to gymnasium's
    file before compiling it, so the compiled model carries the original parameters (the list was
    made by comparing every compiled parameter of both files; docs/environments.md).

    Attributes:
        limb_damping: damping of every joint below the root body (the root joints keep 0).
        limb_limited: False: the limb joints have no range limits.
        geom_density: density of every geom of the robot (its masses and inertias follow).
        gear: motor gear of each actuator, in actuator order.
    """

    limb_damping: float | None = None
    limb_limited: bool = True
    geom_density: float | None = None
    gear: tuple[float, ...] | None = None


@dataclass(frozen=True)
class EnvSpec:
    """Everything that defines one D4MORL task.

    Attributes:
        id: D4MORL id, e.g. ``"MO-HalfCheetah-v2"``.
        xml: model file name inside gymnasium's ``envs/mujoco/assets`` directory.
        frame_skip: MuJoCo steps per environment step.
        n_obj: number of objectives (length of the reward vector).
        objectives: objective names, in reward-vector order.
        obs_dim: observation size.
        act_low, act_high: D4MORL action bounds (actions are clipped to them).
        max_episode_steps: episode cap; the environment truncates itself.
        reward_fn: ``f(qpos_before, qpos, qvel, action, dt, init_qpos) -> (B, n_obj) float64``.
        terminated_fn: ``f(qpos, qvel) -> (B,) bool``.
        observation_fn: ``f(qpos, qvel) -> (B, obs_dim) float32``.
        reset_qpos_noise: half-width of the uniform noise added to ``init_qpos`` at reset.
        reset_qvel_noise: scale of the noise added to ``init_qvel`` at reset.
        reset_qvel_normal: True: the qvel noise is ``reset_qvel_noise * N(0, 1)``; False: it is
            uniform in ``[-reset_qvel_noise, reset_qvel_noise]``.
        reset_exact_qpos: qpos indices kept exactly at their initial value at reset.
        model_edits: the original model file's physical parameters where they differ from
            gymnasium's file of the same robot (None: the files agree).
        physics_version: raised whenever the task's dynamics change (model, reset, stepping);
            files made by an older version are refused (:func:`check_physics_version`).
    """

    id: str
    xml: str
    frame_skip: int
    n_obj: int
    objectives: tuple[str, ...]
    obs_dim: int
    act_low: tuple[float, ...]
    act_high: tuple[float, ...]
    max_episode_steps: int = 500
    reward_fn: RewardFn = field(default=halfcheetah_rewards, repr=False)
    terminated_fn: TerminationFn = field(default=halfcheetah_terminated, repr=False)
    observation_fn: ObservationFn = field(default=observe_without_x, repr=False)
    reset_qpos_noise: float = 1e-3
    reset_qvel_noise: float = 1e-3
    reset_qvel_normal: bool = True
    reset_exact_qpos: tuple[int, ...] = ()
    model_edits: ModelEdits | None = None
    physics_version: int = 1

    def __post_init__(self) -> None:
        if len(self.objectives) != self.n_obj:
            raise ValueError(f"EnvSpec {self.id!r}: {len(self.objectives)} objective names for n_obj={self.n_obj}")
        if len(self.act_low) != len(self.act_high):
            raise ValueError(f"EnvSpec {self.id!r}: act_low and act_high differ in length")
        if any(lo >= hi for lo, hi in zip(self.act_low, self.act_high)):
            raise ValueError(f"EnvSpec {self.id!r}: every act_low must be below act_high")
        if self.frame_skip < 1 or self.max_episode_steps < 1:
            raise ValueError(f"EnvSpec {self.id!r}: frame_skip and max_episode_steps must be >= 1")

    @property
    def act_dim(self) -> int:
        """Action size."""
        return len(self.act_low)


# Hopper-v2 and -v3 share one robot: its original file has forty times the joint damping, a
# stronger foot motor and no joint limits.
_HOPPER_EDITS = ModelEdits(limb_damping=40.0, limb_limited=False, gear=(200.0, 200.0, 300.0))

ENV_SPECS: dict[str, EnvSpec] = {
    spec.id: spec
    for spec in (
        EnvSpec(
            id="MO-HalfCheetah-v2",
            xml="half_cheetah.xml",
            frame_skip=5,
            n_obj=2,
            objectives=("run", "energy"),
            obs_dim=17,
            act_low=(-1.0,) * 6,
            act_high=(1.0,) * 6,
            reward_fn=halfcheetah_rewards,
            terminated_fn=halfcheetah_terminated,
            observation_fn=observe_without_x,
        ),
        EnvSpec(
            id="MO-Hopper-v3",
            xml="hopper.xml",
            frame_skip=5,
            n_obj=3,
            objectives=("run", "jump", "energy"),
            obs_dim=11,
            act_low=(-2.0, -2.0, -4.0),
            act_high=(2.0, 2.0, 4.0),
            reward_fn=hopper_v3_rewards,
            terminated_fn=hopper_terminated,
            observation_fn=observe_without_x_clip_qvel,
            reset_exact_qpos=(1,),
            reset_qvel_normal=False,
            model_edits=_HOPPER_EDITS,
            physics_version=2,
        ),
        EnvSpec(
            id="MO-Hopper-v2",
            xml="hopper.xml",
            frame_skip=5,
            n_obj=2,
            objectives=("run", "jump"),
            obs_dim=11,
            act_low=(-2.0, -2.0, -4.0),
            act_high=(2.0, 2.0, 4.0),
            reward_fn=hopper_v2_rewards,
            terminated_fn=hopper_terminated,
            observation_fn=observe_without_x_clip_qvel,
            reset_exact_qpos=(1,),
            reset_qvel_normal=False,
            model_edits=_HOPPER_EDITS,
            physics_version=2,
        ),
        EnvSpec(
            id="MO-Walker2d-v2",
            xml="walker2d.xml",
            frame_skip=4,
            n_obj=2,
            objectives=("speed", "energy"),
            obs_dim=17,
            act_low=(-1.0,) * 6,
            act_high=(1.0,) * 6,
            reward_fn=walker2d_rewards,
            terminated_fn=walker2d_terminated,
            observation_fn=observe_without_x_clip_qvel,
            reset_qvel_normal=False,
            model_edits=ModelEdits(limb_damping=3.0, geom_density=1500.0),
            physics_version=2,
        ),
        EnvSpec(
            id="MO-Ant-v2",
            xml="ant.xml",
            frame_skip=5,
            n_obj=2,
            objectives=("vx", "vy"),
            obs_dim=27,
            act_low=(-1.0,) * 8,
            act_high=(1.0,) * 8,
            reward_fn=ant_rewards,
            terminated_fn=nonfinite_terminated,
            observation_fn=observe_without_xy,
            model_edits=ModelEdits(gear=(100.0,) * 8),
            physics_version=2,
        ),
        EnvSpec(
            id="MO-Swimmer-v2",
            xml="swimmer.xml",
            frame_skip=4,
            n_obj=2,
            objectives=("forward", "energy"),
            obs_dim=8,
            act_low=(-1.0,) * 2,
            act_high=(1.0,) * 2,
            reward_fn=swimmer_rewards,
            terminated_fn=never_terminated,
            observation_fn=observe_without_xy,
            reset_qvel_normal=False,
            model_edits=ModelEdits(gear=(300.0, 300.0)),
            physics_version=2,
        ),
    )
}


# --------------------------------------------------------------------------------------------
# MO-Gymnasium tasks (optional extra ``morl[mo-gymnasium]``)
# --------------------------------------------------------------------------------------------

#: How MO-Gymnasium names its tasks (``mo-halfcheetah-v5``, ``mo-hopper-2obj-v5``, ...).
MO_GYMNASIUM_ID = re.compile(r"^mo-[a-z0-9][a-z0-9-]*-v\d+$")
MO_GYMNASIUM_INSTALL = "pip install 'morl[mo-gymnasium]'  (in a checkout: pip install -e '.[mo-gymnasium]')"


@dataclass(frozen=True)
class ExternalEnvSpec:
    """Sizes and bounds of a task that another package defines (an MO-Gymnasium id).

    It carries what the pipeline needs to know about a task (the same attribute names as
    :class:`EnvSpec`); the dynamics and rewards are the other package's.
    """

    id: str
    n_obj: int
    objectives: tuple[str, ...]
    obs_dim: int
    act_low: tuple[float, ...]
    act_high: tuple[float, ...]
    max_episode_steps: int

    @property
    def act_dim(self) -> int:
        return len(self.act_low)


class MissingExtraError(InputError):
    """An MO-Gymnasium id was asked for, but the ``mo-gymnasium`` extra is not installed."""


def _import_mo_gymnasium():
    try:
        import mo_gymnasium  # noqa: F401 - registers the mo-* ids with gymnasium
    except ImportError as exc:
        raise MissingExtraError(
            f"MO-Gymnasium is not installed ({exc}); install it with: {MO_GYMNASIUM_INSTALL}"
        ) from exc
    return mo_gymnasium


def mo_gymnasium_ids() -> list[str]:
    """The continuous-action MO-Gymnasium ids usable as ``env`` (empty without the extra)."""
    try:
        _import_mo_gymnasium()
    except MissingExtraError:
        return []
    ids = []
    for env_id, entry in gymnasium.registry.items():
        if not MO_GYMNASIUM_ID.match(env_id):
            continue
        module = entry.entry_point if isinstance(entry.entry_point, str) else ""
        if "mujoco" in module:  # MO-Gymnasium's continuous control suite
            ids.append(env_id)
    return sorted(ids)


@functools.cache
def _external_spec(env_id: str) -> ExternalEnvSpec:
    mo_gym = _import_mo_gymnasium()
    if env_id not in gymnasium.registry:
        raise InputError(f"unknown MO-Gymnasium id {env_id!r}; available: {', '.join(mo_gymnasium_ids())}")
    with warnings.catch_warnings():  # deprecation notices for the v4 tasks, float64 Box bounds
        warnings.simplefilter("ignore")
        env = mo_gym.make(env_id)
    try:
        act, obs = env.action_space, env.observation_space
        reward_space = getattr(env.unwrapped, "reward_space", None)
        if not isinstance(act, spaces.Box):
            raise InputError(f"{env_id}: only continuous (Box) action spaces are supported; this task has {act}")
        if not isinstance(obs, spaces.Box) or len(obs.shape) != 1:
            raise InputError(f"{env_id}: only flat Box observations are supported; this task has {obs}")
        if reward_space is None or len(reward_space.shape) != 1:
            raise InputError(f"{env_id}: no vector reward_space; not a multi-objective task")
        if env.spec is None or env.spec.max_episode_steps is None:
            raise InputError(f"{env_id}: the task has no episode cap (max_episode_steps)")
        n_obj = int(reward_space.shape[0])
        return ExternalEnvSpec(
            id=env_id, n_obj=n_obj, objectives=tuple(f"objective {k + 1}" for k in range(n_obj)),
            obs_dim=int(obs.shape[0]), act_low=tuple(float(x) for x in act.low),
            act_high=tuple(float(x) for x in act.high), max_episode_steps=int(env.spec.max_episode_steps),
        )  # fmt: skip
    finally:
        env.close()


def get_spec(env_id: str) -> EnvSpec | ExternalEnvSpec:
    """The spec of ``env_id``: a D4MORL task of :data:`ENV_SPECS`, or an MO-Gymnasium id (needs the
    ``mo-gymnasium`` extra; :class:`MissingExtraError` says what to install).  ValueError otherwise."""
    try:
        return ENV_SPECS[env_id]
    except (KeyError, TypeError):
        pass
    if isinstance(env_id, str) and MO_GYMNASIUM_ID.match(env_id):
        return _external_spec(env_id)
    known = ", ".join(sorted(ENV_SPECS))
    raise InputError(f"unknown environment id {env_id!r}; known ids: {known}, or an MO-Gymnasium id "
                     f"such as mo-halfcheetah-v5") from None  # fmt: skip


def is_d4morl_task(env_id: str) -> bool:
    """True for the tasks this module defines (as opposed to MO-Gymnasium's)."""
    return env_id in ENV_SPECS


#: What each physics version of a D4MORL task means (docs/environments.md).
PHYSICS_VERSIONS = {
    1: "gymnasium's model files and normal qvel reset noise",
    2: "the original D4MORL model files' parameters and PEDA's reset noise",
}


def physics_version(env_id: str) -> int | None:
    """The physics version files made for ``env_id`` record (None for MO-Gymnasium tasks)."""
    spec = ENV_SPECS.get(env_id)
    return None if spec is None else spec.physics_version


def check_physics_version(env_id: str, recorded: Any) -> None:
    """Raise ValueError unless ``recorded`` (a file's ``physics_version``; None or absent in
    files written before versions were recorded, which means version 1) is the version this
    code simulates for ``env_id``.  The caller adds the file name."""
    current = physics_version(env_id)
    if current is None:
        return
    recorded = 1 if recorded is None else recorded
    if recorded != current:
        made = PHYSICS_VERSIONS.get(recorded, "unknown")
        now = PHYSICS_VERSIONS[current]
        raise InputError(
            f"made under physics version {recorded} of {env_id} ({made}), but this morl simulates "
            f"version {current} ({now}); rebuild it"
        )


def check_file_identity(path: Any, st: Any, kind: str, expect_env: str | None, name: str, subject: str) -> dict:
    """``st``, a loaded policy file, after checking that it is a dict of ``kind``, made for
    ``expect_env`` (if given) under the physics this morl simulates; :class:`InputError` names
    ``path``. ``name`` is the kind of file in words ("behavior checkpoint"), ``subject`` how the
    env mismatch calls it ("checkpoint")."""
    if not isinstance(st, dict) or st.get("kind") != kind:
        raise InputError(f"{path}: not a morl {name} (missing kind={kind!r})")
    if expect_env is not None and st.get("env_id") != expect_env:
        raise InputError(f"{path}: {subject} is for env {st.get('env_id')!r}, not {expect_env!r}")
    try:
        check_physics_version(st.get("env_id"), st.get("physics_version"))
    except ValueError as exc:
        raise InputError(f"{path}: {name} {exc}") from None
    return st


# --------------------------------------------------------------------------------------------
# Shared physics functions (used by MOMujocoEnv and morl.vector.BatchedEnv)
# --------------------------------------------------------------------------------------------


def assets_dir() -> str:
    """gymnasium's bundled MuJoCo model directory (found without importing
    ``gymnasium.envs.mujoco``, whose rendering imports need optional packages)."""
    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")


_SETTOTALMASS = re.compile(r'(<compiler\b[^>]*?)\s+settotalmass\s*=\s*"([^"]*)"')


def _compile_xml(path: str) -> mujoco.MjModel:
    """Compile an MJCF file.

    MuJoCo >= 3.3 deprecates the ``<compiler settotalmass=...>`` attribute (used by
    gymnasium's ``half_cheetah.xml``) and warns on every load, on stdout and in a
    ``MUJOCO_LOG.TXT`` file in the working directory.  For such files we drop the attribute
    and apply the replacement MuJoCo recommends (``mj_setTotalmass`` then ``mj_setConst``),
    which gives a bit-identical model (checked in tests/test_envs.py).
    """
    with open(path, encoding="utf-8") as f:
        xml = f.read()
    match = _SETTOTALMASS.search(xml)
    if match is None:
        return mujoco.MjModel.from_xml_path(path)
    try:
        total_mass = float(match.group(2))
    except ValueError:
        raise ValueError(f"{path}: settotalmass={match.group(2)!r} is not a number") from None
    model = mujoco.MjModel.from_xml_string(xml[: match.start()] + match.group(1) + xml[match.end() :])
    if total_mass > 0:  # MuJoCo's compiler ignores non-positive values
        mujoco.mj_setTotalmass(model, total_mass)
        mujoco.mj_setConst(model, mujoco.MjData(model))
    return model


def _compile_edited(path: str, edits: ModelEdits) -> mujoco.MjModel:
    """Compile ``path`` with ``edits`` applied to its elements (not to the compiled arrays), so
    that everything the compiler derives from them (masses and inertias from densities, the
    actuators' effective strength) follows, as it did when the original file was compiled."""
    mj = mujoco.MjSpec.from_file(path)
    root = mj.worldbody.first_body()
    for body in mj.bodies:
        if body.name == "world":
            continue
        for geom in body.geoms:
            if edits.geom_density is not None:
                geom.density = edits.geom_density
        if body.name == root.name:
            continue
        for joint in body.joints:
            if edits.limb_damping is not None:
                joint.damping[0] = edits.limb_damping
            if not edits.limb_limited:
                joint.limited = mujoco.mjtLimited.mjLIMITED_FALSE
    if edits.gear is not None:
        if len(edits.gear) != len(mj.actuators):
            raise ValueError(f"{path}: {len(mj.actuators)} actuators, but {len(edits.gear)} gears to apply")
        for actuator, gear in zip(mj.actuators, edits.gear):
            actuator.gear[0] = gear
    return mj.compile()


def load_model(spec: EnvSpec) -> mujoco.MjModel:
    """Compile the task's model: gymnasium's XML file with the original file's physical
    parameters (``spec.model_edits``), the actuator control range set to the D4MORL action bounds
    and the constraint solver's warm start turned off."""
    path = os.path.join(assets_dir(), spec.xml)
    if not os.path.isfile(path):
        raise InputError(f"{spec.id}: model file {path} not found (is gymnasium installed?)")
    model = _compile_xml(path) if spec.model_edits is None else _compile_edited(path, spec.model_edits)
    if model.nu != spec.act_dim:
        raise ValueError(f"{spec.id}: {path} has {model.nu} actuators but the spec has {spec.act_dim} action dims")
    # MuJoCo clamps ctrl to actuator_ctrlrange; make that range the D4MORL bounds so the action
    # clipped by clip_actions() is exactly the control that is applied.
    model.actuator_ctrlrange[:, 0] = spec.act_low
    model.actuator_ctrlrange[:, 1] = spec.act_high
    # Without warm start a step depends only on the full-physics state (qpos, qvel, time), not
    # on the previous step's accelerations, which that state does not hold.  This is what lets
    # the batched stepper run slots through mujoco.rollout, which takes and returns exactly that
    # state, and still match MOMujocoEnv bit for bit (docs/environments.md).
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_WARMSTART
    return model


def control_timestep(spec: EnvSpec, model: mujoco.MjModel) -> float:
    """``dt`` of one environment step: MuJoCo timestep times frame skip."""
    return float(model.opt.timestep) * spec.frame_skip


def clip_actions(spec: EnvSpec, actions: Any) -> np.ndarray:
    """Actions as float64 clipped to the D4MORL bounds (any leading shape, last axis act_dim)."""
    actions = np.asarray(actions, dtype=np.float64)
    if actions.shape[-1:] != (spec.act_dim,):
        raise ValueError(f"{spec.id}: actions must have last dimension {spec.act_dim}, got shape {actions.shape}")
    if not np.all(np.isfinite(actions)):
        raise ValueError(f"{spec.id}: actions contain NaN or infinite values")
    return np.clip(actions, spec.act_low, spec.act_high)


def sample_initial_state(
    spec: EnvSpec,
    init_qpos: np.ndarray,
    init_qvel: np.ndarray,
    np_random: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Reset state ``(qpos, qvel)``: uniform +-1e-3 qpos noise, then the qvel noise (1e-3 * N(0, 1)
    or uniform +-1e-3, ``spec.reset_qvel_normal``), drawn in that order from ``np_random``;
    ``spec.reset_exact_qpos`` entries stay at init (as PEDA's environment code resets)."""
    c = spec.reset_qpos_noise
    qpos = init_qpos + np_random.uniform(low=-c, high=c, size=init_qpos.shape[0])
    c = spec.reset_qvel_noise
    if spec.reset_qvel_normal:
        qvel = init_qvel + c * np_random.standard_normal(init_qvel.shape[0])
    else:
        qvel = init_qvel + np_random.uniform(low=-c, high=c, size=init_qvel.shape[0])
    for i in spec.reset_exact_qpos:
        qpos[i] = init_qpos[i]
    return qpos, qvel


def reset_physics(
    spec: EnvSpec,
    model: mujoco.MjModel,
    data: mujoco.MjData,
    np_random: np.random.Generator,
) -> None:
    """Reset ``data`` to a noisy initial state (see :func:`sample_initial_state`).

    ``mj_resetData`` clears everything (time, controls, solver warm start), so the same seed
    gives the same episode regardless of what the MjData was used for before.
    """
    qpos, qvel = sample_initial_state(spec, model.qpos0, np.zeros(model.nv), np_random)
    mujoco.mj_resetData(model, data)
    data.qpos[:] = qpos
    data.qvel[:] = qvel
    mujoco.mj_forward(model, data)


def simulate(spec: EnvSpec, model: mujoco.MjModel, data: mujoco.MjData, action: np.ndarray) -> None:
    """Apply the (already clipped) action and advance the physics by ``frame_skip`` MuJoCo steps."""
    data.ctrl[:] = action
    mujoco.mj_step(model, data, nstep=spec.frame_skip)


def compute_rewards(
    spec: EnvSpec,
    qpos_before: np.ndarray,
    qpos: np.ndarray,
    qvel: np.ndarray,
    action: np.ndarray,
    dt: float,
    init_qpos: np.ndarray,
) -> np.ndarray:
    """Reward vectors (B, n_obj) float32 of a batch of transitions (states after the step,
    ``qpos_before`` the positions before it, ``action`` the clipped actions)."""
    return spec.reward_fn(qpos_before, qpos, qvel, action, dt, init_qpos).astype(np.float32)


def compute_terminated(spec: EnvSpec, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """(B,) bool: which states end the episode."""
    return spec.terminated_fn(qpos, qvel)


def compute_observations(spec: EnvSpec, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """(B, obs_dim) float32 observations of a batch of states."""
    return spec.observation_fn(qpos, qvel)


# --------------------------------------------------------------------------------------------
# Single environment
# --------------------------------------------------------------------------------------------


class MOMujocoEnv(gymnasium.Env):
    """One D4MORL task as a gymnasium environment with a vector reward.

    ``step(action)`` returns ``(obs float32 (obs_dim,), reward float32 (n_obj,), terminated,
    truncated, info)`` with ``info["obj"]`` a copy of the reward vector; ``truncated`` becomes
    True at step ``max_episode_steps`` (500).  Rendering is not supported.

    Args:
        env_id: a key of :data:`ENV_SPECS`.
        render_mode: must be None.
    """

    metadata = {"render_modes": []}

    def __init__(self, env_id: str, render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"{env_id}: rendering is not supported (render_mode={render_mode!r})")
        self.render_mode = None
        self.spec_morl: EnvSpec = get_spec(env_id)
        spec = self.spec_morl
        self.model = load_model(spec)
        self.data = mujoco.MjData(self.model)
        self.dt = control_timestep(spec, self.model)
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
        reset_physics(self.spec_morl, self.model, self.data, self.np_random)
        self._elapsed_steps = 0
        return compute_observations(self.spec_morl, self._qpos, self._qvel)[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, np.ndarray, bool, bool, dict[str, Any]]:
        if self._elapsed_steps is None:
            raise RuntimeError(f"{self.spec_morl.id}: call reset() before step()")
        spec = self.spec_morl
        clipped = clip_actions(spec, action)
        if clipped.shape != (spec.act_dim,):
            raise ValueError(f"{spec.id}: action must have shape ({spec.act_dim},), got {np.shape(action)}")
        self._qpos_before[:] = self._qpos
        simulate(spec, self.model, self.data, clipped)
        self._elapsed_steps += 1
        reward = compute_rewards(
            spec, self._qpos_before, self._qpos, self._qvel, clipped[None, :], self.dt, self.init_qpos
        )[0]
        terminated = bool(compute_terminated(spec, self._qpos, self._qvel)[0])
        truncated = self._elapsed_steps >= spec.max_episode_steps
        obs = compute_observations(spec, self._qpos, self._qvel)[0]
        return obs, reward, terminated, truncated, {"obj": reward.copy()}

    def __repr__(self) -> str:
        return f"MOMujocoEnv({self.spec_morl.id!r})"


class MOGymnasiumTask(gymnasium.Wrapper):
    """An MO-Gymnasium task with the conventions of :class:`MOMujocoEnv`: actions clipped to the
    action bounds, float32 observations and reward vectors, ``info["obj"]`` a copy of the vector."""

    def __init__(self, env_id: str) -> None:
        mo_gym = _import_mo_gymnasium()
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


# --------------------------------------------------------------------------------------------
# Slot groups: the per-slot state behind morl.vector.BatchedEnv
# --------------------------------------------------------------------------------------------


class MujocoSlots:
    """Slots ``slots`` (a range of batch rows) of a D4MORL task, stepped by ``mujoco.rollout``.

    Each slot is one row of :attr:`state`, MuJoCo's ``mjSTATE_FULLPHYSICS`` vector (time, qpos,
    qvel, ...).  A step hands the rows of the running slots and their actions (each held for
    ``frame_skip`` physics steps) to one ``mujoco.rollout`` call, which runs them in C++ on
    ``threads`` threads with no Python per slot; rewards, termination and observations are then
    computed for all of them at once with the functions :class:`MOMujocoEnv` uses.  Because
    :func:`load_model` turns off the solver's warm start, the full-physics state is all a step
    depends on, so a slot follows exactly the trajectory of a :class:`MOMujocoEnv` fed the same
    actions, whichever thread steps it.

    ``buffers`` holds the batch arrays ``actions`` (clipped, float64), ``obs``, ``rewards``,
    ``terminated`` and ``truncated``; :meth:`reset` and :meth:`step` write the rows of the slots
    they are given.
    """

    def __init__(self, spec: EnvSpec, slots: range, buffers: Any, threads: int = 1) -> None:
        from mujoco import rollout  # imported here: only the batched stepper needs it

        self.spec, self.buffers, self.lo = spec, buffers, slots.start
        model = self.model = load_model(spec)
        self.dt = control_timestep(spec, model)
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
            reset_physics(self.spec, self.model, self._scratch, rng)
            mujoco.mj_getState(self.model, self._scratch, self.state[k], self._full)
        self.buffers.obs[np.asarray(slots)] = compute_observations(self.spec, self.qpos[rows], self.qvel[rows])

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
        buf.rewards[slots] = compute_rewards(spec, qpos_before, qpos, qvel, actions, self.dt, self.init_qpos)
        buf.terminated[slots] = compute_terminated(spec, qpos, qvel)
        buf.truncated[slots] = False
        buf.obs[slots] = compute_observations(spec, qpos, qvel)

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


# `import morl` has registered the D4MORL ids already (morl/__init__.py); a task added to ENV_SPECS
# is registered here too, and tests/test_envs.py asks for it to be added to morl.D4MORL_IDS.
register_envs(ENV_SPECS)
