"""morl-baselines' PGMORL, timed: env-steps/s of its training iterations beside the physics floor
of its own environment. Runs in a separate virtual environment that has morl-baselines (it pins
its own gymnasium and MO-Gymnasium); ``pgmorl_throughput.py --peer-python`` calls it.

    python benchmarks/peer_pgmorl.py mo-hopper-2obj-v5 --iters 2

Its PGMORL (``morl_baselines.multi_policy.pgmorl``) is run at PGMORL's settings (6 tasks, 4
environments x 2048 steps per iteration, 10 epochs of 32 minibatches, gamma 0.995), one torch
thread, CPU, no logging. Only the PPO iterations are timed (the method that trains all agents
once), not its evaluations; each counts tasks x environments x steps env steps. The floor is
``mujoco.rollout`` stepping the same number of copies of that environment's model, one thread,
with uniform random actions held for its frame skip, from the model's initial state.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import mujoco
import numpy as np
import torch
from mujoco import rollout as mj_rollout

try:
    import gymnasium as gym
    import mo_gymnasium  # noqa: F401 - registers the mo-* ids
    from morl_baselines.multi_policy.pgmorl.pgmorl import PGMORL
except ImportError as e:  # the peer's own environment is missing: say so on the last line of stderr
    sys.exit(f"peer_pgmorl: {e.name} is not installed in {sys.executable}; run this script with the python of a "
             "virtual environment that has morl-baselines (pip install morl-baselines)")  # fmt: skip


def floor(env_id: str, batch: int, steps: int) -> float:
    env = gym.make(env_id)
    model = env.unwrapped.model
    frame_skip = env.unwrapped.frame_skip
    data = mujoco.MjData(model)
    state = np.zeros(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    low, high = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    ctrl = np.random.default_rng(0).uniform(low, high, size=(batch, steps, model.nu))
    control = np.repeat(ctrl, frame_skip, axis=1)
    best = 0.0
    for _ in range(2):
        with mj_rollout.Rollout(nthread=0) as runner:
            t = time.perf_counter()
            runner.rollout(model, [mujoco.MjData(model)], np.tile(state, (batch, 1)), control)
            best = max(best, batch * steps / (time.perf_counter() - t))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("env_id")
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--floor-steps", type=int, default=500)
    args = ap.parse_args()
    torch.set_num_threads(1)
    pop, n_envs, steps = 6, 4, 2048
    algo = PGMORL(env_id=args.env_id, origin=np.zeros(2), num_envs=n_envs, pop_size=pop, warmup_iterations=args.iters,
                  steps_per_iteration=steps, evolutionary_iterations=1, gamma=0.995, log=False, seed=0,
                  device="cpu")  # fmt: skip
    timed = {"s": 0.0, "calls": 0}
    inner = algo._PGMORL__train_all_agents

    def train_all(iteration, max_iterations):
        t = time.perf_counter()
        inner(iteration, max_iterations)
        timed["s"] += time.perf_counter() - t
        timed["calls"] += 1

    algo._PGMORL__train_all_agents = train_all
    eval_env = gym.make(args.env_id)
    total = (args.iters + 1) * pop * n_envs * steps
    algo.train(total_timesteps=total, eval_env=eval_env, ref_point=np.zeros(2))
    env_steps = timed["calls"] * pop * n_envs * steps
    print(json.dumps({"env": args.env_id, "env_steps": env_steps, "seconds": timed["s"],
                      "rate": env_steps / timed["s"], "floor": floor(args.env_id, pop * n_envs, args.floor_steps)}))  # fmt: skip


if __name__ == "__main__":
    main()
