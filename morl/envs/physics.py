"""The tasks' physics: the original D4MORL models compiled in current MuJoCo, reset and stepping.

The tasks are built directly on the ``mujoco`` Python bindings, not on gymnasium's ``MujocoEnv``
classes, so that the single environment (:class:`morl.envs.gym_env.MOMujocoEnv`) and the slots of
the batched stepper (:class:`morl.envs.batched.BatchedEnv`) share these module-level functions for the model
(:func:`load_model`), the reset noise (:func:`sample_initial_state`), the physics step
(:func:`simulate`), the reward vector (:func:`compute_rewards`), the termination test
(:func:`compute_terminated`) and the observation (:func:`compute_observations`).  The last three
work on batches of states, so one code path serves one or many environments and the results are
bit-identical.

* The physics are those of the original D4MORL model files (PEDA's
  ``data_generation/environments/assets``, the same files as PGMORL's).  Those files no longer
  all compile in current MuJoCo, so each task starts from gymnasium's file of the same robot,
  which has the same geometry, and :func:`load_model` writes the original file's physical
  parameters into it before compiling (:class:`~morl.envs.tasks.ModelEdits`): Hopper joint damping 40, no joint
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
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

import gymnasium
import mujoco
import numpy as np

from morl.envs.rewards import Steps
from morl.envs.tasks import EnvSpec, ModelEdits
from morl.errors import InputError


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
    return spec.reward_fn(Steps(qpos_before, qpos, qvel, action, dt, init_qpos)).astype(np.float32)


def compute_terminated(spec: EnvSpec, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """(B,) bool: which states end the episode."""
    return spec.terminated_fn(qpos, qvel)


def compute_observations(spec: EnvSpec, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """(B, obs_dim) float32 observations of a batch of states."""
    return spec.observation_fn(qpos, qvel)


#: How far (in any entry) the first observation of a trajectory collected on a task may lie from
#: the task's rest observation: the reset noise is 1e-3 in every entry, this allows fifty times it;
#: two tasks' rest observations differ by far more (HalfCheetah's torso z 0 against Walker2d's
#: height 1.25, the only pair of tasks with the same sizes).
START_TOLERANCE = 0.05


def terminated_observations(spec: EnvSpec, observations: np.ndarray) -> np.ndarray:
    """(B,) bool: which observed states end the episode by the task's termination rule. An
    observation holds ``qpos`` without its first one or two root coordinates (x; x and y), which no
    rule reads, and ``qvel`` (clipped to +-10 where the observation clips it; only Ant's rule, any
    non-finite entry, reads it)."""
    model = load_model(spec)
    obs = np.asarray(observations, np.float64).reshape(-1, spec.obs_dim)
    skip = model.nq + model.nv - spec.obs_dim
    qpos = np.concatenate([np.zeros((len(obs), skip)), obs[:, : model.nq - skip]], axis=1)
    return compute_terminated(spec, qpos, obs[:, model.nq - skip :])


@functools.cache
def rest_observation(spec: EnvSpec) -> np.ndarray:
    """(obs_dim,) float32 observation of the task's initial state without reset noise
    (``model.qpos0``, zero velocities): every reset lies within the noise of it."""
    model = load_model(spec)
    return compute_observations(spec, model.qpos0[None].copy(), np.zeros((1, model.nv)))[0]
