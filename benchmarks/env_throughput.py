"""Environment throughput: one env, the batched stepper, and raw multi-threaded MuJoCo (the floor).

For each task, in one run and interleaved (``--repeats`` rounds; the best round of each is
reported, so a busy moment on a shared machine does not count against one side only):

- **single**: one ``gymnasium.make(env_id)`` env stepped with random actions, reset when an
  episode ends: what a per-env Python loop gets;
- **batched**: :class:`morl.envs.batched.BatchedEnv` with B slots (default 501, the size of the
  two-objective preference grid) in collection mode (slots restart when their episode ends), with
  1 worker and with ``--workers`` workers (default: every core; MuJoCo threads for these tasks);
- **floor**: ``mujoco.rollout`` (C++ threads, no Python per step) running the same B
  trajectories of the same number of physics steps from reset states with the same controls,
  with 1 and with ``--workers`` threads.  It computes no rewards or observations and never
  resets, so it bounds what any Python stepper can reach.

Env-steps/s count one environment step (``frame_skip`` physics steps) per slot.  Start-up
(compiling the model, starting threads) is timed apart and not counted.

    python benchmarks/env_throughput.py [--envs MO-HalfCheetah-v2,...] [--batch 501] [--steps 100]
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import subprocess
import time

import gymnasium
import mujoco
import numpy as np
from mujoco import rollout as mj_rollout

import morl  # noqa: F401 - registers the tasks with gymnasium
from morl.envs import ENV_SPECS, BatchedEnv, get_spec, load_model


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown CPU"


def random_actions(env_id: str, steps: int, batch: int, seed: int = 0) -> np.ndarray:
    spec = get_spec(env_id)
    rng = np.random.default_rng(seed)
    return rng.uniform(spec.act_low, spec.act_high, size=(steps, batch, spec.act_dim))


def time_single(env_id: str, actions: np.ndarray) -> float:
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    n = actions.shape[0] * actions.shape[1]
    flat = actions.reshape(n, -1)
    start = time.perf_counter()
    for k in range(n):
        _, _, term, trunc, _ = env.step(flat[k])
        if term or trunc:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return n / elapsed


def time_batched(env: BatchedEnv, actions: np.ndarray) -> float:
    B = env.batch_size
    env.reset(list(range(B)), next_seeds=itertools.count(B))
    start = time.perf_counter()
    for a in actions:
        env.step(a)
    return actions.shape[0] * B / (time.perf_counter() - start)


def time_floor(model: mujoco.MjModel, env_id: str, actions: np.ndarray, threads: int) -> float:
    spec = get_spec(env_id)
    steps, B, _ = actions.shape
    data = mujoco.MjData(model)
    state = np.zeros(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    initial = np.tile(state, (B, 1))
    # (B, steps * frame_skip, nu): each env step's control held for frame_skip physics steps.
    control = np.repeat(np.swapaxes(actions, 0, 1), spec.frame_skip, axis=1)
    datas = [mujoco.MjData(model) for _ in range(threads)]
    with mj_rollout.Rollout(nthread=threads) as runner:
        start = time.perf_counter()
        runner.rollout(model, datas, initial, control)
        elapsed = time.perf_counter() - start
    return steps * B / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", default=",".join(ENV_SPECS))
    ap.add_argument("--batch", type=int, default=501)
    ap.add_argument("--steps", type=int, default=100, help="env steps per slot per measurement")
    ap.add_argument("--single-steps", type=int, default=5000, help="env steps of the single-env measurement")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    W = args.workers

    print(
        f"# env throughput, {datetime.date.today()}, {cpu_name()}, {os.cpu_count()} cores, "
        f"mujoco {mujoco.__version__}, B = {args.batch}, {args.steps} steps per slot, best of {args.repeats}"
    )
    print()
    print(
        f"| task | single env | batched, 1 worker | batched, {W} workers | floor, 1 thread | "
        f"floor, {W} threads | batched / floor (1) | batched / floor ({W}) | start-up |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for env_id in args.envs.split(","):
        spec = get_spec(env_id)
        model = load_model(spec)
        actions = random_actions(env_id, args.steps, args.batch)
        single_actions = random_actions(env_id, args.single_steps, 1, seed=1)
        t0 = time.perf_counter()
        env_n = BatchedEnv(env_id, args.batch, num_workers=W)
        startup = time.perf_counter() - t0
        env_1 = BatchedEnv(env_id, args.batch)
        best = {k: 0.0 for k in ("single", "b1", "bn", "f1", "fn")}
        try:
            for _ in range(args.repeats):
                best["single"] = max(best["single"], time_single(env_id, single_actions))
                best["b1"] = max(best["b1"], time_batched(env_1, actions))
                best["f1"] = max(best["f1"], time_floor(model, env_id, actions, 1))
                best["bn"] = max(best["bn"], time_batched(env_n, actions))
                best["fn"] = max(best["fn"], time_floor(model, env_id, actions, W))
        finally:
            env_n.close()
            env_1.close()
        print(
            f"| {env_id} | {best['single']:,.0f} | {best['b1']:,.0f} | {best['bn']:,.0f} | {best['f1']:,.0f} | "
            f"{best['fn']:,.0f} | {best['b1'] / best['f1']:.0%} | {best['bn'] / best['fn']:.0%} | "
            f"{startup:.1f} s |",
            flush=True,
        )


if __name__ == "__main__":
    main()
