"""Measure how our task models differ from the original PGMORL/D4MORL ones.

Runs one fixed open-loop action sequence (seeded uniform actions, 500 steps, no reset noise) on
our model of each task and on the original PGMORL XML file of the same task, both under the
installed MuJoCo and with our reward code, and prints the return vectors side by side.

PGMORL's XML files are not part of this project. Point the script at a checkout's assets:

    python benchmarks/original_models.py /path/to/PGMORL/environments/assets

Original files that the installed MuJoCo can no longer compile (e.g. global coordinates,
removed attributes) are reported as such.
"""

from __future__ import annotations

import argparse
import os
import sys

import mujoco
import numpy as np

from morl.envs import ENV_SPECS, compute_rewards, compute_terminated, control_timestep, load_model


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


def original_model(spec, assets: str) -> mujoco.MjModel:
    model = mujoco.MjModel.from_xml_path(os.path.join(assets, spec.xml))
    # the same control range as ours, so both apply the clipped action unchanged
    model.actuator_ctrlrange[:] = np.stack([spec.act_low, spec.act_high], axis=1)
    return model


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("assets", help="PGMORL's environments/assets folder")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(f"mujoco {mujoco.__version__}; open-loop uniform actions, seed {args.seed}, 500 steps, no reset noise\n")
    print("| env | ours: return (length) | original XML: return (length) |")
    print("|---|---|---|")
    for env_id, spec in ENV_SPECS.items():
        rng = np.random.default_rng(args.seed)
        actions = rng.uniform(spec.act_low, spec.act_high, size=(spec.max_episode_steps, len(spec.act_low)))
        ours, n_ours = open_loop_return(spec, load_model(spec), actions)
        try:
            theirs, n_theirs = open_loop_return(spec, original_model(spec, args.assets), actions)
            cell = f"{np.round(theirs, 1).tolist()} ({n_theirs})"
        except ValueError as exc:
            cell = f"does not compile: {str(exc).splitlines()[0]}"
        print(f"| {env_id} | {np.round(ours, 1).tolist()} ({n_ours}) | {cell} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
