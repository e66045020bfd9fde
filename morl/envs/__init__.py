"""The tasks: D4MORL's multi-objective MuJoCo tasks, MO-Gymnasium's, and the batched stepper.

Where each part lives:

* :mod:`morl.envs.rewards`: the reward vectors, termination tests and observations of the D4MORL
  tasks, as functions on batches of states;
* :mod:`morl.envs.tasks`: the spec table (:data:`ENV_SPECS`, :class:`EnvSpec`, :func:`get_spec`),
  the physics versions files record, and the specs of MO-Gymnasium tasks;
* :mod:`morl.envs.physics`: the original D4MORL models compiled in current MuJoCo
  (:func:`load_model`), reset, stepping, and the batched reward / termination / observation calls;
* :mod:`morl.envs.gym_env`: the gymnasium environments (:class:`MOMujocoEnv`,
  :class:`MOGymnasiumTask`, :func:`make_env`) and their registration with gymnasium;
* :mod:`morl.envs.batched`: :class:`BatchedEnv`, many copies of one task stepped in lockstep, and
  the slot groups behind it.

This package exports what the rest of ``morl`` uses. Importing ``morl`` alone registers the D4MORL
ids with gymnasium without importing this package (:func:`morl.register_envs`); the ids' entry
point, ``morl.envs:MOMujocoEnv``, imports it on the first ``gymnasium.make``.
"""

from morl.envs.batched import BatchedEnv, GymSlots, MujocoSlots, make_slot_group
from morl.envs.gym_env import MOGymnasiumTask, MOMujocoEnv, make_env
from morl.envs.physics import (
    START_TOLERANCE,
    assets_dir,
    clip_actions,
    compute_observations,
    compute_rewards,
    compute_terminated,
    control_timestep,
    load_model,
    reset_physics,
    rest_observation,
    sample_initial_state,
    simulate,
    terminated_observations,
)
from morl.envs.rewards import ALIVE_BONUS
from morl.envs.tasks import (
    ENV_SPECS,
    MO_GYMNASIUM_ID,
    MO_GYMNASIUM_INSTALL,
    PHYSICS_VERSIONS,
    EnvSpec,
    ExternalEnvSpec,
    MissingExtraError,
    ModelEdits,
    check_file_identity,
    check_physics_version,
    get_spec,
    is_d4morl_task,
    mo_gymnasium_ids,
    physics_version,
)

__all__ = [
    "ALIVE_BONUS",
    "ENV_SPECS",
    "MO_GYMNASIUM_ID",
    "MO_GYMNASIUM_INSTALL",
    "PHYSICS_VERSIONS",
    "START_TOLERANCE",
    "BatchedEnv",
    "EnvSpec",
    "ExternalEnvSpec",
    "GymSlots",
    "MOGymnasiumTask",
    "MOMujocoEnv",
    "MissingExtraError",
    "ModelEdits",
    "MujocoSlots",
    "assets_dir",
    "check_file_identity",
    "check_physics_version",
    "clip_actions",
    "compute_observations",
    "compute_rewards",
    "compute_terminated",
    "control_timestep",
    "get_spec",
    "is_d4morl_task",
    "load_model",
    "make_env",
    "make_slot_group",
    "mo_gymnasium_ids",
    "physics_version",
    "reset_physics",
    "rest_observation",
    "terminated_observations",
    "sample_initial_state",
    "simulate",
]
