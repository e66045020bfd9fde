"""Tests of the D4MORL MuJoCo tasks (morl.envs) and the batched stepper (morl.envs.batched)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import gymnasium
import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from morl.envs import (
    ENV_SPECS,
    BatchedEnv,
    MOMujocoEnv,
    assets_dir,
    compute_observations,
    compute_terminated,
    control_timestep,
    get_spec,
    load_model,
)

ENV_IDS = [
    "MO-HalfCheetah-v2",
    "MO-Hopper-v2",
    "MO-Hopper-v3",
    "MO-Walker2d-v2",
    "MO-Ant-v2",
    "MO-Swimmer-v2",
]

_HOPPER_LOW, _HOPPER_HIGH = (-2.0, -2.0, -4.0), (2.0, 2.0, 4.0)
# Reference section 1: id -> (xml, frame skip, objectives, obs size, action low, action high, dt).
REFERENCE_FACTS = {
    "MO-HalfCheetah-v2": ("half_cheetah.xml", 5, ("run", "energy"), 17, (-1.0,) * 6, (1.0,) * 6, 0.05),
    "MO-Hopper-v2": ("hopper.xml", 5, ("run", "jump"), 11, _HOPPER_LOW, _HOPPER_HIGH, 0.01),
    "MO-Hopper-v3": ("hopper.xml", 5, ("run", "jump", "energy"), 11, _HOPPER_LOW, _HOPPER_HIGH, 0.01),
    "MO-Walker2d-v2": ("walker2d.xml", 4, ("speed", "energy"), 17, (-1.0,) * 6, (1.0,) * 6, 0.008),
    "MO-Ant-v2": ("ant.xml", 5, ("vx", "vy"), 27, (-1.0,) * 8, (1.0,) * 8, 0.05),
    "MO-Swimmer-v2": ("swimmer.xml", 4, ("forward", "energy"), 8, (-1.0,) * 2, (1.0,) * 2, 0.04),
}


# ------------------------------------------------------------------------------ registry


def test_registry_holds_the_six_tasks():
    assert sorted(ENV_SPECS) == sorted(ENV_IDS) == sorted(REFERENCE_FACTS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_registry_entry_has_reference_facts(env_id):
    xml, frame_skip, objectives, obs_dim, low, high, dt = REFERENCE_FACTS[env_id]
    spec = get_spec(env_id)
    assert (spec.xml, spec.frame_skip, spec.objectives, spec.n_obj, spec.obs_dim) == (
        xml,
        frame_skip,
        objectives,
        len(objectives),
        obs_dim,
    )
    assert spec.act_low == low and spec.act_high == high
    assert spec.max_episode_steps == 500
    assert control_timestep(spec, load_model(spec)) == pytest.approx(dt)


@pytest.mark.parametrize("order", ["import morl, gymnasium", "import gymnasium, morl"])
def test_importing_morl_registers_the_tasks_with_gymnasium(order):
    """As the README says: `import morl` is enough for gymnasium.make, in either import order, and
    does not load MuJoCo (or gymnasium) before they are needed."""
    first, second = order.removeprefix("import ").split(", ")
    code = f"""
import sys
import {first}
assert "mujoco" not in sys.modules and "morl.envs" not in sys.modules
import {second}
ids = [i for i in gymnasium.registry if i.startswith("MO-") and i[3:4].isupper()]
env = gymnasium.make("MO-Hopper-v3")
obs, _ = env.reset(seed=0)
reward = env.step(env.action_space.sample() * 0)[1]
print(sorted(ids), obs.shape, reward.shape)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"{sorted(ENV_IDS)} (11,) (3,)"
    alone = subprocess.run([sys.executable, "-c", "import sys, morl; print('gymnasium' in sys.modules)"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert alone.stdout.strip() == "False", alone.stderr


def test_registered_ids_are_the_tasks():
    import morl

    assert sorted(morl.D4MORL_IDS) == sorted(ENV_SPECS)


def test_unknown_id_lists_known_ids():
    with pytest.raises(ValueError, match="MO-HalfCheetah-v2.*MO-Hopper-v3"):
        get_spec("MO-Cheetah-v9")
    with pytest.raises(ValueError, match="unknown environment id"):
        MOMujocoEnv("nope")
    with pytest.raises(ValueError, match="unknown environment id"):
        BatchedEnv("nope", 2)


@pytest.mark.parametrize("env_id", sorted(ENV_SPECS))
def test_every_spec_matches_its_model(env_id):
    """Holds for every registry entry, including ones added later."""
    spec = get_spec(env_id)
    env = MOMujocoEnv(env_id)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (spec.obs_dim,) and obs.dtype == np.float32
    assert env.model.nu == spec.act_dim
    np.testing.assert_array_equal(env.model.actuator_ctrlrange[:, 0], spec.act_low)
    np.testing.assert_array_equal(env.model.actuator_ctrlrange[:, 1], spec.act_high)
    _, reward, _, _, info = env.step(np.zeros(spec.act_dim))
    assert reward.shape == (spec.n_obj,) and reward.dtype == np.float32
    assert env.reward_space.shape == (spec.n_obj,)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_model_equals_mujoco_compiled_xml_and_loads_without_warnings(env_id, tmp_path, monkeypatch):
    """HalfCheetah's deprecated settotalmass attribute is replaced by mj_setTotalmass +
    mj_setConst: same model, but no warning (and no MUJOCO_LOG.TXT) on every load.  The other
    tasks equal gymnasium's file compiled with the original parameters written into it."""
    monkeypatch.chdir(tmp_path)
    spec = get_spec(env_id)
    model = load_model(spec)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    path = os.path.join(assets_dir(), spec.xml)
    if spec.model_edits is None:
        reference = mujoco.MjModel.from_xml_path(path)
    else:  # the same edits made by hand in the XML text
        reference = mujoco.MjModel.from_xml_string(_xml_with_original_parameters(env_id, path))
    if spec.xml != "hopper.xml":  # the XML already declares the D4MORL bounds: overwriting is a no-op
        np.testing.assert_array_equal(reference.actuator_ctrlrange[:, 0], spec.act_low)
        np.testing.assert_array_equal(reference.actuator_ctrlrange[:, 1], spec.act_high)
    reference.actuator_ctrlrange[:, 0] = spec.act_low
    reference.actuator_ctrlrange[:, 1] = spec.act_high
    reference.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_WARMSTART
    compared = 0
    for name in dir(reference):
        value = getattr(reference, name, None) if not name.startswith("_") else None
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(model, name), value, err_msg=name)
            compared += 1
    assert compared > 100
    if env_id == "MO-HalfCheetah-v2":
        assert model.body_mass.sum() == pytest.approx(14.0)


def _xml_with_original_parameters(env_id: str, path: str) -> str:
    """gymnasium's XML text with the original files' values written in, attribute by attribute
    (an independent route to the model that load_model builds through MjSpec)."""
    with open(path, encoding="utf-8") as f:
        xml = f.read()
    robot = env_id.split("-")[1]
    if robot == "Hopper":
        xml = xml.replace(
            '<joint armature="1" damping="1" limited="true"/>', '<joint armature="1" damping="40" limited="false"/>'
        )
        head, tail = xml.split("<actuator>")
        tail = tail.replace('gear="200.0" joint="foot_joint"', 'gear="300.0" joint="foot_joint"')
        xml = head + "<actuator>" + tail
    elif robot == "Walker2d":
        xml = xml.replace('damping=".1" limited="true"', 'damping="3.0" limited="true"')
        xml = xml.replace(
            '<geom conaffinity="0" condim="3" contype="1" density="1000"',
            '<geom conaffinity="0" condim="3" contype="1" density="1500"',
        )
    elif robot == "Ant":
        xml = xml.replace('gear="150"', 'gear="100"')
    elif robot == "Swimmer":
        xml = xml.replace('gear="150.0"', 'gear="300.0"')
    return xml


# Figures read from the original D4MORL model files (PEDA's data_generation/environments/assets),
# compiled in MuJoCo 4: limb joint damping, whether limb joints are limited, motor gears, total mass.
ORIGINAL_PARAMETERS = {
    "MO-HalfCheetah-v2": ((6.0, 4.5, 3.0, 4.5, 3.0, 1.5), True, (120, 90, 60, 120, 60, 30), 14.0),
    "MO-Hopper-v3": ((40.0,) * 3, False, (200, 200, 300), 15.8200),
    "MO-Hopper-v2": ((40.0,) * 3, False, (200, 200, 300), 15.8200),
    "MO-Walker2d-v2": ((3.0,) * 6, True, (100,) * 6, 35.5157),
    "MO-Ant-v2": ((1.0,) * 8, True, (100,) * 8, 0.9109),
    "MO-Swimmer-v2": ((0.0,) * 2, True, (300, 300), 106.8142),
}

# Return vector and length of the open-loop sequence of benchmarks/original_models.py (uniform
# actions, seed 0, from the rest state) on the ORIGINAL model files, measured with that script
# (mujoco 4.0.0, warm start off).  Ours must give the same.
ORIGINAL_OPEN_LOOP = {
    "MO-HalfCheetah-v2": ((386.378, 1496.270), 500),
    "MO-Hopper-v3": ((39.002, -1.472, -459.414), 103),
    "MO-Hopper-v2": ((38.808, -1.667), 103),
    "MO-Walker2d-v2": ((154.509, 418.140), 139),
    "MO-Ant-v2": ((-162.544, -145.245), 500),
    "MO-Swimmer-v2": ((-6.632, 101.235), 500),
}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_models_carry_the_original_physical_parameters(env_id):
    damping, limited, gear, mass = ORIGINAL_PARAMETERS[env_id]
    model = load_model(get_spec(env_id))
    limbs = model.jnt_bodyid != model.jnt_bodyid[0]  # joints below the root body
    limb_dofs = model.jnt_dofadr[limbs]
    np.testing.assert_allclose(model.dof_damping[limb_dofs], damping)
    assert np.all(model.jnt_limited[limbs] == limited)
    np.testing.assert_array_equal(model.actuator_gear[:, 0], gear)
    assert model.body_mass.sum() == pytest.approx(mass, abs=1e-3)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_open_loop_returns_equal_the_original_model_files(env_id):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    try:
        from original_models import open_loop_actions, open_loop_return
    finally:
        sys.path.pop(0)
    spec = get_spec(env_id)
    returns, length = open_loop_return(spec, load_model(spec), open_loop_actions(spec, 0))
    expected, expected_length = ORIGINAL_OPEN_LOOP[env_id]
    assert length == expected_length
    np.testing.assert_allclose(returns, expected, atol=2e-3)


# --------------------------------------------------------------------------- gymnasium API


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env_passes(env_id):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gymnasium.make(env_id)
    # gymnasium reads MO-Hopper-v2/-v3 as two versions of one environment (documented in morl.envs).
    expected_make = ["out of date"] if env_id == "MO-Hopper-v2" else []
    assert [w for w in caught if not any(e in str(w.message) for e in expected_make)] == []
    # The environment truncates itself: no TimeLimit wrapper is added.
    assert env.spec.max_episode_steps is None
    assert isinstance(env.unwrapped, MOMujocoEnv)
    expected = ("infinity", "reward returned by `step()` must be a float", "symmetric and normalized")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    unexpected = [str(w.message) for w in caught if not any(e in str(w.message) for e in expected)]
    assert unexpected == []


def test_render_mode_rejected():
    with pytest.raises(ValueError, match="rendering is not supported"):
        MOMujocoEnv("MO-HalfCheetah-v2", render_mode="human")


def test_step_before_reset_and_bad_actions():
    env = MOMujocoEnv("MO-Hopper-v3")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(3))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([0.0, np.nan, 0.0]))


# --------------------------------------------------------------------------------- rewards


def test_halfcheetah_rewards_match_mujoco_state():
    env = MOMujocoEnv("MO-HalfCheetah-v2")
    env.reset(seed=1)
    action = np.array([1.5, -0.5, 0.25, -2.0, 0.0, 0.75], dtype=np.float32)
    clipped = np.clip(action.astype(np.float64), -1.0, 1.0)
    for _ in range(3):
        x_before = env.data.qpos[0]
        _, reward, _, _, info = env.step(action)
        np.testing.assert_array_equal(env.data.ctrl, clipped)
        dt = env.model.opt.timestep * 5
        assert dt == pytest.approx(0.05)
        run = min(4.0, (env.data.qpos[0] - x_before) / dt) + 1.0
        energy = 4.0 - np.sum(clipped**2) + 1.0
        np.testing.assert_allclose(reward, [run, energy], rtol=1e-6, atol=1e-5)
        np.testing.assert_array_equal(info["obj"], reward)
    assert energy == pytest.approx(5.0 - (1 + 0.25 + 0.0625 + 1 + 0 + 0.5625))


def test_halfcheetah_run_reward_is_capped_at_speed_4():
    env = MOMujocoEnv("MO-HalfCheetah-v2")
    env.reset(seed=2)
    env.data.qvel[0] = 20.0  # far faster than 4 m/s
    x_before = env.data.qpos[0]
    _, reward, _, _, _ = env.step(np.zeros(6))
    assert (env.data.qpos[0] - x_before) / 0.05 > 4.0
    assert reward[0] == pytest.approx(5.0)
    assert reward[1] == pytest.approx(5.0)  # zero action: energy = 4 - 0 + 1


def test_hopper_rewards_match_mujoco_state_and_use_d4morl_bounds():
    env = MOMujocoEnv("MO-Hopper-v3")
    env.reset(seed=4)
    h0 = env.model.qpos0[1]
    assert h0 == 1.25
    action = np.array([3.0, -3.0, 3.5])  # clipped to (2, -2, 3.5), not to gymnasium's [-1, 1]
    clipped = np.array([2.0, -2.0, 3.5])
    for _ in range(3):
        x_before = env.data.qpos[0]
        _, reward, _, _, _ = env.step(action)
        np.testing.assert_array_equal(env.data.ctrl, clipped)
        # MuJoCo applied the full control (no second clamp to [-1, 1]): the actuator force is the
        # control and the joint torque is the gear (original file: 200, 200, 300) times it.
        np.testing.assert_array_equal(env.data.actuator_force, clipped)
        np.testing.assert_allclose(env.data.qfrc_actuator[3:6], [200.0, 200.0, 300.0] * clipped)
        dt = env.model.opt.timestep * 5
        assert dt == pytest.approx(0.01)
        run = 1.5 * (env.data.qpos[0] - x_before) / dt + 1.0
        jump = 12.0 * (env.data.qpos[1] - h0) + 1.0
        energy = 4.0 - np.sum(clipped**2) + 1.0
        np.testing.assert_allclose(reward, [run, jump, energy], rtol=1e-6, atol=1e-5)
    assert energy == pytest.approx(5.0 - 20.25)


def test_hopper_v2_rewards_match_mujoco_state_and_share_hopper_v3_physics():
    v2, v3 = MOMujocoEnv("MO-Hopper-v2"), MOMujocoEnv("MO-Hopper-v3")
    v2.reset(seed=4)
    v3.reset(seed=4)
    h0 = v2.model.qpos0[1]
    assert h0 == 1.25
    action = np.array([3.0, -1.0, -5.0])
    clipped = np.array([2.0, -1.0, -4.0])  # Hopper bounds, as for MO-Hopper-v3
    ctrl_cost = 2e-4 * np.sum(clipped**2)
    assert ctrl_cost == pytest.approx(2e-4 * 21.0)
    for _ in range(3):
        x_before = v2.data.qpos[0]
        _, r2, te2, _, _ = v2.step(action)
        _, r3, te3, _, _ = v3.step(action)
        np.testing.assert_array_equal(v2.data.ctrl, clipped)
        np.testing.assert_array_equal(v2.data.actuator_force, clipped)
        np.testing.assert_array_equal(v2.data.qpos, v3.data.qpos)  # identical physics
        assert te2 == te3
        run = 1.5 * (v2.data.qpos[0] - x_before) / 0.01 + 1.0 - ctrl_cost
        jump = 12.0 * (v2.data.qpos[1] - h0) + 1.0 - ctrl_cost
        assert r2.shape == (2,)
        np.testing.assert_allclose(r2, [run, jump], rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(r2, r3[:2] - ctrl_cost, rtol=1e-6, atol=1e-5)


def test_walker2d_rewards_match_mujoco_state():
    env = MOMujocoEnv("MO-Walker2d-v2")
    env.reset(seed=5)
    action = np.array([1.5, -0.5, 0.25, -2.0, 0.0, 0.75])
    clipped = np.clip(action, -1.0, 1.0)
    for _ in range(3):
        x_before = env.data.qpos[0]
        _, reward, _, _, _ = env.step(action)
        np.testing.assert_array_equal(env.data.ctrl, clipped)
        np.testing.assert_array_equal(env.data.actuator_force, clipped)
        np.testing.assert_allclose(env.data.qfrc_actuator[3:9], 100.0 * clipped)  # gear 100
        dt = env.model.opt.timestep * 4
        assert dt == pytest.approx(0.008)
        speed = (env.data.qpos[0] - x_before) / dt + 1.0
        energy = 4.0 - np.sum(clipped**2) + 1.0
        np.testing.assert_allclose(reward, [speed, energy], rtol=1e-6, atol=1e-5)
    assert energy == pytest.approx(5.0 - (1 + 0.25 + 0.0625 + 1 + 0 + 0.5625))


def test_ant_rewards_use_torso_displacement_in_x_and_y():
    env = MOMujocoEnv("MO-Ant-v2")
    env.reset(seed=6)
    torso = env.model.body("torso").id
    assert env.model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE and env.model.jnt_bodyid[0] == torso
    scratch = mujoco.MjData(env.model)
    action = np.array([1.5, -0.5, 0.25, -2.0, 0.0, 0.75, -1.2, 0.3])
    clipped = np.clip(action, -1.0, 1.0)
    others = 1.0 - 0.5 * np.sum(clipped**2)
    moved = np.zeros(2)
    for _ in range(5):
        xy_before = env.data.qpos[:2].copy()
        _, reward, terminated, _, _ = env.step(action)
        np.testing.assert_array_equal(env.data.ctrl, clipped)
        np.testing.assert_array_equal(env.data.actuator_force, clipped)
        # qpos[0:2] is the torso's position (the body MuJoCo places at the free joint's qpos).
        scratch.qpos[:] = env.data.qpos
        mujoco.mj_kinematics(env.model, scratch)
        np.testing.assert_array_equal(scratch.xpos[torso, :2], env.data.qpos[:2])
        dt = env.model.opt.timestep * 5
        assert dt == pytest.approx(0.05)
        v = (env.data.qpos[:2] - xy_before) / dt
        np.testing.assert_allclose(reward, v + others, rtol=1e-6, atol=1e-5)
        moved += np.abs(v)
        assert not terminated
    assert np.all(moved > 1e-3)  # both objectives really respond to motion
    assert others == pytest.approx(1.0 - 0.5 * (1 + 0.25 + 0.0625 + 1 + 0 + 0.5625 + 1 + 0.09))


def test_swimmer_rewards_match_mujoco_state():
    env = MOMujocoEnv("MO-Swimmer-v2")
    env.reset(seed=7)
    action = np.array([1.7, -0.4])
    clipped = np.array([1.0, -0.4])
    for _ in range(3):
        x_before = env.data.qpos[0]
        _, reward, _, _, _ = env.step(action)
        np.testing.assert_array_equal(env.data.ctrl, clipped)
        dt = env.model.opt.timestep * 4
        assert dt == pytest.approx(0.04)
        forward = (env.data.qpos[0] - x_before) / dt  # no alive bonus
        energy = 0.3 - 0.15 * np.sum(clipped**2)
        np.testing.assert_allclose(reward, [forward, energy], rtol=1e-6, atol=1e-5)
    assert energy == pytest.approx(0.3 - 0.15 * 1.16)
    env.reset(seed=7)
    _, reward, _, _, _ = env.step(np.zeros(2))
    assert reward[1] == pytest.approx(0.3) and abs(reward[0]) < 0.1


# ----------------------------------------------------------------------------- termination


def _step_from_state(env, qpos_edits):
    for i, value in qpos_edits.items():
        env.data.qpos[i] = value
    mujoco.mj_forward(env.model, env.data)
    return env.step(np.zeros(env.spec_morl.act_dim))


def test_halfcheetah_terminates_on_body_angle():
    env = MOMujocoEnv("MO-HalfCheetah-v2")
    env.reset(seed=0)
    assert not _step_from_state(env, {})[2]
    for angle in (np.deg2rad(60.0), np.deg2rad(-60.0)):
        env.reset(seed=0)
        _, _, terminated, truncated, _ = _step_from_state(env, {2: angle})
        assert abs(env.data.qpos[2]) > np.deg2rad(50.0)
        assert terminated and not truncated
    spec = get_spec("MO-HalfCheetah-v2")
    qpos = np.zeros((4, 9))
    qpos[:, 2] = [np.deg2rad(49.9), np.deg2rad(50.1), -np.deg2rad(50.1), np.nan]
    np.testing.assert_array_equal(compute_terminated(spec, qpos, np.zeros((4, 9))), [False, True, True, True])


def test_hopper_terminates_on_height_and_angles():
    env = MOMujocoEnv("MO-Hopper-v3")
    env.reset(seed=0)
    assert not _step_from_state(env, {})[2]
    env.reset(seed=0)
    _, _, terminated, _, _ = _step_from_state(env, {1: 0.2})
    assert env.data.qpos[1] < 0.4 and terminated
    for joint in (2, 3, 4, 5):
        env.reset(seed=0)
        _, _, terminated, _, _ = _step_from_state(env, {joint: np.deg2rad(-100.0)})
        assert abs(env.data.qpos[joint]) > np.deg2rad(90.0) and terminated
    spec = get_spec("MO-Hopper-v3")
    qpos = np.tile([0.0, 1.25, 0.0, 0.0, 0.0, 0.0], (5, 1))
    qpos[1, 1] = 0.41
    qpos[2, 1] = 0.39
    qpos[3, 5] = np.deg2rad(89.0)
    qpos[4, 3] = np.deg2rad(91.0)
    np.testing.assert_array_equal(compute_terminated(spec, qpos, np.zeros((5, 6))), [False, False, True, False, True])


def test_walker2d_terminates_outside_healthy_height_and_angle():
    env = MOMujocoEnv("MO-Walker2d-v2")
    env.reset(seed=0)
    assert not _step_from_state(env, {})[2]
    for edits in ({1: 0.7}, {1: 2.1}, {2: 1.2}, {2: -1.2}):
        env.reset(seed=0)
        _, _, terminated, truncated, _ = _step_from_state(env, edits)
        height, angle = env.data.qpos[1], env.data.qpos[2]
        assert not (0.8 < height < 2.0 and -1.0 < angle < 1.0)
        assert terminated and not truncated
    spec = get_spec("MO-Walker2d-v2")
    qpos = np.tile([0.0, 1.25] + [0.0] * 7, (8, 1))
    qpos[1:5, 1] = [0.81, 0.8, 1.99, 2.0]
    qpos[5:8, 2] = [0.99, -1.0, np.nan]
    np.testing.assert_array_equal(
        compute_terminated(spec, qpos, np.zeros((8, 9))), [False, False, True, False, True, False, True, True]
    )


def test_ant_terminates_only_on_non_finite_state():
    env = MOMujocoEnv("MO-Ant-v2")
    env.reset(seed=0)
    # High in the air and upside down (gymnasium's own Ant would end here): keeps running.
    _, _, terminated, _, _ = _step_from_state(env, {2: 3.0, 3: 0.0, 4: 1.0})
    assert env.data.qpos[2] > 1.0 and not terminated
    spec = get_spec("MO-Ant-v2")
    qpos = np.tile(env.model.qpos0, (6, 1))
    qvel = np.zeros((6, 14))
    qpos[1, 2] = np.nan
    qvel[2, 3] = np.inf
    qpos[3, 2] = -5.0  # far below the floor, but finite
    qvel[4, 0] = 1e6
    qpos[5, 0] = -np.inf
    np.testing.assert_array_equal(compute_terminated(spec, qpos, qvel), [False, True, True, False, False, True])


def test_swimmer_never_terminates():
    spec = get_spec("MO-Swimmer-v2")
    qpos = np.array([[0.0] * 5, [np.nan] * 5, [1e9, -1e9, 100.0, 3.0, -3.0]])
    result = compute_terminated(spec, qpos, np.zeros((3, 5)))
    assert result.dtype == bool and result.tolist() == [False, False, False]


@pytest.mark.parametrize(
    "env_id,action_scale", [("MO-HalfCheetah-v2", 0.0), ("MO-Ant-v2", 1.0), ("MO-Swimmer-v2", 1.0)]
)
def test_truncation_at_500_steps(env_id, action_scale):
    env = MOMujocoEnv(env_id)
    env.reset(seed=5)
    act_dim = env.spec_morl.act_dim
    actions = action_scale * np.random.default_rng(5).uniform(-1, 1, size=(500, act_dim))
    for t, action in enumerate(actions, start=1):
        _, _, terminated, truncated, _ = env.step(action)
        assert not terminated
        assert truncated == (t == 500)
    assert env.elapsed_steps == 500


# ------------------------------------------------------------------- observations and reset


# id -> (observation size, first qpos index observed, qvel clipped to [-10, 10])
OBSERVATION_LAYOUT = {
    "MO-HalfCheetah-v2": (17, 1, False),
    "MO-Hopper-v2": (11, 1, True),
    "MO-Hopper-v3": (11, 1, True),
    "MO-Walker2d-v2": (17, 1, True),
    "MO-Ant-v2": (27, 2, False),  # qpos[2:] (13) + qvel (14), no contact forces
    "MO-Swimmer-v2": (8, 2, False),
}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_observation_is_state_without_root_position(env_id):
    obs_dim, first, clipped = OBSERVATION_LAYOUT[env_id]
    env = MOMujocoEnv(env_id)
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape == (obs_dim,)
    assert env.model.nq - first + env.model.nv == obs_dim
    env.data.qvel[0] = 30.0  # make a velocity large enough for clipping to matter
    obs, _, _, _, _ = env.step(np.zeros(env.spec_morl.act_dim))
    qpos, qvel = env.data.qpos.copy(), env.data.qvel.copy()
    assert np.any(np.abs(qvel) > 10.0) and env.data.time > 0  # (no MuJoCo instability reset)
    if clipped:
        qvel = np.clip(qvel, -10.0, 10.0)
    np.testing.assert_array_equal(obs, np.concatenate([qpos[first:], qvel]).astype(np.float32))
    assert obs.dtype == np.float32 and obs in env.observation_space


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_noise_follows_seeded_generator(env_id):
    env = MOMujocoEnv(env_id)
    env.reset(seed=123)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(123)))
    nq, nv = env.model.nq, env.model.nv
    qpos = env.model.qpos0 + rng.uniform(-1e-3, 1e-3, size=nq)
    # PEDA's reset: normal qvel noise for HalfCheetah and Ant, uniform for the others
    if env_id in ("MO-HalfCheetah-v2", "MO-Ant-v2"):
        qvel = 1e-3 * rng.standard_normal(nv)
    else:
        qvel = rng.uniform(-1e-3, 1e-3, size=nv)
    if env_id.startswith("MO-Hopper"):
        qpos[1] = 1.25
        assert env.data.qpos[1] == 1.25  # torso height exactly h0
    np.testing.assert_array_equal(env.data.qpos, qpos)
    np.testing.assert_array_equal(env.data.qvel, qvel)
    assert np.all(np.abs(env.data.qpos - env.model.qpos0) <= 1e-3)
    assert 0 < np.abs(env.data.qvel).max() < 1e-2


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_episode_different_seed_different(env_id):
    env = MOMujocoEnv(env_id)
    actions = np.random.default_rng(0).uniform(-1, 1, size=(40, env.spec_morl.act_dim))

    def rollout(env, seed):
        obs, _ = env.reset(seed=seed)
        observations, rewards = [obs], []
        for a in actions:
            obs, r, terminated, truncated, _ = env.step(a)
            observations.append(obs)
            rewards.append(r)
            if terminated or truncated:
                break
        return np.array(observations), np.array(rewards)

    first = rollout(env, 7)
    second = rollout(env, 7)  # same MjData reused after an episode: reset clears everything
    third = rollout(MOMujocoEnv(env_id), 7)
    for a, b, c in zip(first, second, third):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    assert not np.array_equal(rollout(env, 8)[0][0], first[0][0])


# ------------------------------------------------------------------------------ batched


def _single_rollouts(env_id, seeds, actions):
    """Per seed: observations after reset + each step, rewards, terminated, truncated."""
    results = []
    env = MOMujocoEnv(env_id)
    for slot, seed in enumerate(seeds):
        obs, _ = env.reset(seed=seed)
        obs_list, rew, term, trunc = [obs], [], [], []
        for a in actions[:, slot]:
            obs, r, te, tr, _ = env.step(a)
            obs_list.append(obs)
            rew.append(r)
            term.append(te)
            trunc.append(tr)
            if te or tr:
                break
        results.append((np.array(obs_list), np.array(rew), np.array(term), np.array(trunc)))
    return results


def _check_batched_matches_single(env_id, seeds, actions, num_workers=1):
    singles = _single_rollouts(env_id, seeds, actions)
    with BatchedEnv(env_id, len(seeds), num_workers=num_workers) as benv:
        obs = benv.reset(seeds)
        for slot, (s_obs, *_rest) in enumerate(singles):
            np.testing.assert_array_equal(obs[slot], s_obs[0])
        assert benv.active.all() and not benv.done
        for t in range(actions.shape[0]):
            if benv.done:
                break
            was_active = benv.active
            last_obs = benv.observations
            obs, rewards, terminated, truncated = benv.step(actions[t])
            assert obs.dtype == np.float32 and rewards.dtype == np.float32
            for slot, (s_obs, s_rew, s_term, s_trunc) in enumerate(singles):
                if t < len(s_rew):
                    assert was_active[slot]
                    np.testing.assert_array_equal(obs[slot], s_obs[t + 1])
                    np.testing.assert_array_equal(rewards[slot], s_rew[t])
                    assert terminated[slot] == s_term[t] and truncated[slot] == s_trunc[t]
                else:  # finished slot: untouched, reward 0, flags False
                    assert not was_active[slot]
                    np.testing.assert_array_equal(obs[slot], last_obs[slot])
                    assert not rewards[slot].any() and not terminated[slot] and not truncated[slot]
        lengths = np.array([len(s[1]) for s in singles])
        np.testing.assert_array_equal(benv.lengths, lengths)
        np.testing.assert_allclose(benv.returns, [s[1].astype(np.float64).sum(axis=0) for s in singles], rtol=1e-12)
        return benv.done, lengths


@pytest.mark.parametrize("env_id,action_scale", [("MO-Hopper-v3", 4.0), ("MO-Hopper-v2", 4.0), ("MO-Walker2d-v2", 1.5)])
def test_batched_matches_single_envs_including_early_termination(env_id, action_scale):
    seeds = [0, 1, 2, 11]
    act_dim = get_spec(env_id).act_dim
    # Large random actions make the robots fall at different times.
    actions = (
        np.random.default_rng(1)
        .uniform(-action_scale, action_scale, size=(500, len(seeds), act_dim))
        .astype(np.float32)
    )
    done, lengths = _check_batched_matches_single(env_id, seeds, actions)
    assert done and len(set(lengths.tolist())) > 1 and lengths.max() < 500


@pytest.mark.parametrize(
    "env_id,action_scale", [("MO-HalfCheetah-v2", 0.4), ("MO-Ant-v2", 1.0), ("MO-Swimmer-v2", 1.0)]
)
def test_batched_matches_single_envs_until_truncation(env_id, action_scale):
    seeds = [3, 4]
    act_dim = get_spec(env_id).act_dim
    actions = np.random.default_rng(2).uniform(-action_scale, action_scale, size=(501, len(seeds), act_dim))
    done, lengths = _check_batched_matches_single(env_id, seeds, actions)
    assert done and lengths.tolist() == [500, 500]


@pytest.mark.parametrize("env_id", ["MO-HalfCheetah-v2", "MO-Ant-v2"])
def test_batched_worker_processes_give_identical_results(env_id):
    seeds = list(range(6))
    act_dim = get_spec(env_id).act_dim
    actions = np.random.default_rng(3).uniform(-1.5, 1.5, size=(30, len(seeds), act_dim))
    _check_batched_matches_single(env_id, seeds, actions, num_workers=2)


def test_batched_finished_env_keeps_reporting_nothing():
    with BatchedEnv("MO-Hopper-v3", 2) as benv:
        benv.reset([0, 1])
        # Knock slot 1 over: its next step terminates, slot 0 keeps running.
        slots = benv._group
        slots.qpos[1, 2] = np.deg2rad(120.0)
        _, rewards, terminated, _ = benv.step(np.zeros((2, 3)))
        assert terminated.tolist() == [False, True]
        assert benv.active.tolist() == [True, False] and not benv.done
        frozen_state = slots.state[1].copy()
        actions = np.zeros((2, 3))
        actions[1] = np.nan  # rows of finished slots are ignored
        _, rewards, terminated, truncated = benv.step(actions)
        assert not rewards[1].any() and not terminated[1] and not truncated[1]
        assert rewards[0].any()
        np.testing.assert_array_equal(slots.state[1], frozen_state)
        np.testing.assert_array_equal(benv.lengths, [2, 1])


def test_batched_bad_input():
    benv = BatchedEnv("MO-HalfCheetah-v2", 3)
    with pytest.raises(RuntimeError, match="reset"):
        benv.step(np.zeros((3, 6)))
    with pytest.raises(ValueError, match="3 seeds"):
        benv.reset([0, 1])
    with pytest.raises(ValueError, match="non-negative integers"):
        benv.reset([0, 1, -2])
    benv.reset([0, 1, 2])
    with pytest.raises(ValueError, match=r"shape \(3, 6\)"):
        benv.step(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="NaN"):
        benv.step(np.full((3, 6), np.nan))
    with pytest.raises(ValueError, match="batch_size"):
        BatchedEnv("MO-HalfCheetah-v2", 0)


def test_compute_observations_is_batched():
    spec = get_spec("MO-Hopper-v3")
    qpos = np.arange(12.0).reshape(2, 6)
    qvel = np.array([[-20.0, 0, 1, 2, 3, 30.0], [0.5] * 6])
    obs = compute_observations(spec, qpos, qvel)
    assert obs.shape == (2, 11) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs[0], [1, 2, 3, 4, 5, -10, 0, 1, 2, 3, 10])


@pytest.mark.parametrize("env_id", ["MO-Ant-v2", "MO-Swimmer-v2"])
def test_compute_observations_without_xy_is_batched_and_unclipped(env_id):
    spec = get_spec(env_id)
    model = load_model(spec)
    rng = np.random.default_rng(0)
    qpos = 20.0 * rng.standard_normal((3, model.nq))
    qvel = 20.0 * rng.standard_normal((3, model.nv))
    obs = compute_observations(spec, qpos, qvel)
    assert obs.shape == (3, spec.obs_dim) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs, np.concatenate([qpos[:, 2:], qvel], axis=1).astype(np.float32))
    assert np.abs(obs).max() > 10.0
