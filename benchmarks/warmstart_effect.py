"""What turning off MuJoCo's solver warm start changes in the D4MORL tasks.

``morl.envs.physics.load_model`` sets ``mjDSBL_WARMSTART`` so that one env step depends only on the
full-physics state, which is what lets the batched stepper run slots through ``mujoco.rollout``
and still match the single env bit for bit.  This script measures the price, per task, in one
run:

- the return vector and length of the fixed open-loop sequence of ``original_models.py``
  (uniform actions, seed 0, 500 steps, no reset noise), with and without warm start;
- over ``--episodes`` further seeded sequences, the mean return vector both ways, with its
  standard error (where the dynamics are chaotic, as when HalfCheetah or Ant flip over, single
  episodes part ways after a while, so only the distribution can be compared);
- raw stepping speed (``mujoco.rollout``, 1 thread, B trajectories), both ways, interleaved.

    python benchmarks/warmstart_effect.py [--episodes 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from env_throughput import random_actions, time_floor  # noqa: E402
from original_models import open_loop_return  # noqa: E402

from morl.envs import ENV_SPECS, load_model  # noqa: E402


def with_warmstart(model: mujoco.MjModel) -> mujoco.MjModel:
    """A copy of ``model`` with the solver's warm start back on (MuJoCo's default)."""
    on = copy.copy(model)
    on.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)
    return on


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()
    print(f"mujoco {mujoco.__version__}; open-loop uniform actions, 500 steps, no reset noise")
    print()
    print(
        f"| env | seed 0, off (ours) | seed 0, on | mean return over seeds 1-{args.episodes}, off (ours) "
        "| mean return, on | identical episodes | steps/s off / on |"
    )
    print("|---|---|---|---|---|---:|---:|")
    for env_id, spec in ENV_SPECS.items():
        off = load_model(spec)
        on = with_warmstart(off)
        assert off.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_WARMSTART
        rows = {}
        returns = {"off": [], "on": []}
        same = 0
        for seed in range(args.episodes + 1):
            rng = np.random.default_rng(seed)
            actions = rng.uniform(spec.act_low, spec.act_high, size=(spec.max_episode_steps, len(spec.act_low)))
            r_off, n_off = open_loop_return(spec, off, actions)
            r_on, n_on = open_loop_return(spec, on, actions)
            if seed == 0:
                rows = {
                    "off": f"{np.round(r_off, 1).tolist()} ({n_off})",
                    "on": f"{np.round(r_on, 1).tolist()} ({n_on})",
                }
            else:
                returns["off"].append(r_off)
                returns["on"].append(r_on)
                same += int(n_off == n_on and np.array_equal(r_off, r_on))
        mean = {}
        for key, values in returns.items():
            values = np.asarray(values)
            sem = values.std(axis=0, ddof=1) / np.sqrt(len(values))
            mean[key] = ", ".join(f"{m:.0f} ± {e:.0f}" for m, e in zip(values.mean(axis=0), sem))
        speed = {"off": 0.0, "on": 0.0}
        floor_actions = random_actions(env_id, 100, args.batch)
        for _ in range(args.repeats):
            for key, model in (("off", off), ("on", on)):
                speed[key] = max(speed[key], time_floor(model, env_id, floor_actions, 1))
        print(
            f"| {env_id} | {rows['off']} | {rows['on']} | {mean['off']} | {mean['on']} | "
            f"{same}/{args.episodes} | {speed['off'] / speed['on']:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
