"""Check our D4MORL task models against the original model files, parameter by parameter and by
an open-loop rollout.

The D4MORL data was generated with the XML files of PEDA's ``data_generation/environments/assets``
(the same files as PGMORL's). They are not part of this project; point the script at a folder
that holds them:

    python benchmarks/original_models.py /path/to/assets

For every task it prints (1) each compiled physical parameter that differs between our model
(``morl.envs.physics.load_model``: gymnasium's file with the original parameters applied) and the
original file, and (2) the return vector and length of one fixed open-loop action sequence
(uniform actions, ``--seed``, 500 steps, from the rest state, no reset noise) on both models,
under the installed MuJoCo, with our reward code and the solver's warm start off on both sides.

Two of the original files need help to load in current MuJoCo:
- ``hopper.xml`` and ``walker2d.xml`` use ``coordinate="global"``, which MuJoCo 2.3.4 removed.
  Convert them by loading and saving them with ``mujoco==2.3.3`` (``mujoco.MjModel.from_xml_path``
  then ``mujoco.mj_saveLastXML``). The saved file writes joint ranges in radians to six digits, so
  the Walker2d's ranges then differ from ours by about 4e-6 rad.
- ``swimmer.xml`` sets ``collision="predefined"`` (an option removed in MuJoCo 2.3.4) and defines no
  contact pairs, so it has no contacts at all. This script loads it with that attribute removed
  and every geom's contype and conaffinity set to 0, which is the same thing (and what gymnasium's
  file does).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import mujoco
import numpy as np

from morl.envs import ENV_SPECS, compute_rewards, compute_terminated, control_timestep, load_model
from morl.envs.physics import _compile_xml

# Compiled model arrays that shape the dynamics (geometry is compared through the kinematics at
# the rest pose below, because the two files place body frames differently).
PHYSICAL = (
    "body_mass", "body_inertia", "dof_damping", "dof_armature", "dof_frictionloss", "jnt_stiffness",
    "jnt_limited", "jnt_solref", "jnt_solimp", "geom_friction", "geom_solref", "geom_solimp",
    "geom_margin", "geom_gap", "geom_condim", "geom_contype", "geom_conaffinity", "geom_size",
    "actuator_gear", "actuator_ctrlrange", "actuator_forcerange", "actuator_gainprm", "actuator_biasprm",
)  # fmt: skip
KINEMATIC = ("xanchor", "xaxis", "xipos", "ximat", "geom_xpos", "geom_xmat", "M")
OPTIONS = ("timestep", "integrator", "gravity", "viscosity", "density", "wind", "cone", "impratio", "solver",
           "iterations", "tolerance", "disableflags")  # fmt: skip
_PREDEFINED = re.compile(r'\s+collision\s*=\s*"predefined"')


def original_model(spec, assets: str) -> mujoco.MjModel:
    """The original file of ``spec``'s robot, compiled as this script's docstring says."""
    path = os.path.join(assets, spec.xml)
    with open(path, encoding="utf-8") as f:
        xml = f.read()
    if _PREDEFINED.search(xml) and "<contact" not in xml:
        model = mujoco.MjModel.from_xml_string(_PREDEFINED.sub("", xml))
        model.geom_contype[:] = 0  # no geom takes part in collisions: what "predefined" without pairs meant
        model.geom_conaffinity[:] = 0
    else:
        model = _compile_xml(path)
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_WARMSTART
    return model


def _limits(model: mujoco.MjModel) -> np.ndarray:
    """Joint ranges where a joint is limited (a range that is not enforced does not count)."""
    return np.where(model.jnt_limited[:, None].astype(bool), model.jnt_range, 0.0)


def differences(ours: mujoco.MjModel, theirs: mujoco.MjModel, tol: float = 1e-5) -> list[str]:
    """The physical parameters, options and rest-pose kinematics in which the models differ."""
    out = []

    def compare(name, x, y):
        x, y = np.asarray(x, float), np.asarray(y, float)
        if x.shape != y.shape:
            out.append(f"{name}: shape {x.shape} against {y.shape}")
        elif not np.allclose(x, y, rtol=tol, atol=tol):
            out.append(f"{name}: ours {np.round(x, 4).tolist()}, original {np.round(y, 4).tolist()}")

    for name in PHYSICAL:
        x, y = getattr(ours, name), getattr(theirs, name)
        if name == "geom_size":  # a plane's size only sets how it is drawn: leave the floor out
            x, y = x[ours.geom_type != mujoco.mjtGeom.mjGEOM_PLANE], y[theirs.geom_type != mujoco.mjtGeom.mjGEOM_PLANE]
        compare(name, x, y)
    compare("jnt_range (limited joints)", _limits(ours), _limits(theirs))
    for name in OPTIONS:
        compare(f"opt.{name}", getattr(ours.opt, name), getattr(theirs.opt, name))
    da, db = mujoco.MjData(ours), mujoco.MjData(theirs)
    mujoco.mj_forward(ours, da)
    mujoco.mj_forward(theirs, db)
    for name in KINEMATIC:
        compare(f"rest pose {name}", getattr(da, name), getattr(db, name))
    return out


def open_loop_return(spec, model: mujoco.MjModel, actions: np.ndarray) -> tuple[np.ndarray, int]:
    """Return vector and length of one episode of ``actions`` from the model's rest state."""
    data = mujoco.MjData(model)
    mujoco.mj_resetData(model, data)
    mujoco.mj_forward(model, data)
    dt = control_timestep(spec, model)
    init_qpos = data.qpos.copy()
    total = np.zeros(spec.n_obj)
    for t, a in enumerate(actions):
        before = data.qpos.copy()
        data.ctrl[:] = a
        mujoco.mj_step(model, data, nstep=spec.frame_skip)
        qpos, qvel = data.qpos.copy()[None], data.qvel.copy()[None]
        total += compute_rewards(spec, before[None], qpos, qvel, a[None], dt, init_qpos)[0]
        if compute_terminated(spec, qpos, qvel)[0]:
            return total, t + 1
    return total, len(actions)


def open_loop_actions(spec, seed: int) -> np.ndarray:
    """The fixed action sequence of the comparison (also used by tests/test_envs.py)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(spec.act_low, spec.act_high, size=(spec.max_episode_steps, spec.act_dim))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("assets", help="folder with the original model files (see above)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    missing = sorted(
        {spec.xml for spec in ENV_SPECS.values() if not os.path.isfile(os.path.join(args.assets, spec.xml))}
    )
    if missing:
        sys.exit(f"original_models: the original model files {', '.join(missing)} are missing from {args.assets}: "
                 "point the script at PEDA's data_generation/environments/assets (see --help)")  # fmt: skip
    print(f"mujoco {mujoco.__version__}; open-loop uniform actions, seed {args.seed}, 500 steps, no reset noise\n")
    rows = []
    for env_id, spec in ENV_SPECS.items():
        ours_model, theirs_model = load_model(spec), original_model(spec, args.assets)
        print(f"{env_id}: parameters that differ from the original file:")
        for line in differences(ours_model, theirs_model) or ["none"]:
            print(f"  {line}")
        actions = open_loop_actions(spec, args.seed)
        ours, n_ours = open_loop_return(spec, ours_model, actions)
        theirs, n_theirs = open_loop_return(spec, theirs_model, actions)
        rows.append(
            f"| {env_id} | {np.round(ours, 1).tolist()} ({n_ours}) | {np.round(theirs, 1).tolist()} ({n_theirs}) |"
        )
    print("\n| env | ours: return vector (length) | original file: return vector (length) |")
    print("|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
