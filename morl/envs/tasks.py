"""The spec table of the tasks: what defines each D4MORL task, and MO-Gymnasium tasks' sizes.

:data:`ENV_SPECS` holds one :class:`EnvSpec` per D4MORL task: its model file and the original
physics' edits to it (:class:`ModelEdits`, applied by :func:`morl.envs.physics.load_model`), frame
skip, sizes, action bounds, reset noise and the reward / termination / observation functions of
:mod:`morl.envs.rewards`.  :func:`get_spec` also answers for MO-Gymnasium ids (the optional extra
``morl[mo-gymnasium]``), with an :class:`ExternalEnvSpec` of sizes and bounds read from the task.
Files made for a task record its physics version (:func:`physics_version`), which
:func:`check_physics_version` and :func:`check_file_identity` check when they are read.

Adding a task is one :class:`EnvSpec` entry in :data:`ENV_SPECS` pointing to small named
functions on batches: a reward function ``f(steps)`` of a :class:`~morl.envs.rewards.Steps`, and
termination and observation functions ``f(qpos, qvel)``.
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium
from gymnasium import spaces

from morl.envs.rewards import (
    ObservationFn,
    RewardFn,
    TerminationFn,
    ant_rewards,
    halfcheetah_rewards,
    halfcheetah_terminated,
    hopper_terminated,
    hopper_v2_rewards,
    hopper_v3_rewards,
    never_terminated,
    nonfinite_terminated,
    observe_without_x,
    observe_without_x_clip_qvel,
    observe_without_xy,
    swimmer_rewards,
    walker2d_rewards,
    walker2d_terminated,
)
from morl.errors import InputError


@dataclass(frozen=True)
class ModelEdits:
    """Where the original D4MORL model file of a robot differs physically from gymnasium's file.

    The D4MORL data was generated with the model files of PEDA's ``data_generation/environments/
    assets`` (the same files as PGMORL's). Gymnasium's files of the same robots share their
    geometry but not all of their physics. :func:`morl.envs.physics.load_model` applies these values to gymnasium's
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
        reward_fn: ``f(steps) -> (B, n_obj) float64`` of a batch of steps (:class:`~morl.envs.rewards.Steps`).
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


_HOPPER_V3 = EnvSpec(
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
    # The original Hopper file has forty times the joint damping, a stronger foot motor and no
    # joint limits.
    model_edits=ModelEdits(limb_damping=40.0, limb_limited=False, gear=(200.0, 200.0, 300.0)),
    physics_version=2,
)

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
        _HOPPER_V3,
        # The same robot, bounds, reset and termination as MO-Hopper-v3; only the objectives differ.
        replace(_HOPPER_V3, id="MO-Hopper-v2", n_obj=2, objectives=("run", "jump"), reward_fn=hopper_v2_rewards),
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


def import_mo_gymnasium():
    """MO-Gymnasium, which registers the mo-* ids with gymnasium (a MissingExtraError saying how to
    install the optional extra when it is absent)."""
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
        import_mo_gymnasium()
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
    mo_gym = import_mo_gymnasium()
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
            id=env_id,
            n_obj=n_obj,
            objectives=tuple(f"objective {k + 1}" for k in range(n_obj)),
            obs_dim=int(obs.shape[0]),
            act_low=tuple(float(x) for x in act.low),
            act_high=tuple(float(x) for x in act.high),
            max_episode_steps=int(env.spec.max_episode_steps),
        )
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
    raise InputError(
        f"unknown environment id {env_id!r}; known ids: {known}, or an MO-Gymnasium id such as mo-halfcheetah-v5"
    ) from None


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
