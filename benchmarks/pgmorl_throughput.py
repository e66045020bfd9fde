"""PGMORL throughput: env-steps/s of a PGMORL iteration beside the bare physics floor.

For each task, one generation of ``--iters`` PPO iterations at the task's settings in
``configs/paper.yaml`` (K tasks x ``num_envs`` x ``num_steps`` env steps per iteration, the PPO
update, and the per-iteration evaluation episode of every task), timed as a whole on one torch
thread. Beside it, in the same run:

- **physics inside the run**: the time ``mujoco.rollout`` itself took during that generation
  (every physics step the iteration needed, training and evaluation), so ``physics / total`` is
  the share of the wall time the simulator had; the rest is Python, the networks and the update;
- **floor**: ``mujoco.rollout`` alone, one thread, stepping the same number of slots (K x
  num_envs) for ``--floor-steps`` env steps from reset states with uniform random actions: what
  any stepper of that many environments can reach on this core, with no rewards, observations,
  resets or networks.

With ``--peer-python`` (a Python whose environment has morl-baselines), morl-baselines' PGMORL
runs at the same settings on MO-Gymnasium's version of each task (``benchmarks/peer_pgmorl.py``:
its training iterations timed, beside the floor of its own model), in the same run, right after
ours: the peer a user would otherwise pick.

Env-steps/s count one environment step (``frame_skip`` physics steps) per slot, training and
evaluation steps alike. The iteration's rate over the floor's is the ratio the project aims to
keep high; the breakdown says where the rest goes (rollout: stepping plus the per-step forward;
update: the 10 epochs of 32 minibatches; evaluation: one deterministic episode per task).

    python benchmarks/pgmorl_throughput.py [--envs MO-Hopper-v2,MO-Ant-v2] [--iters 2] [--peer-python PY]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import mujoco
import numpy as np
import torch
from mujoco import rollout as mj_rollout

sys.path.insert(0, str(Path(__file__).resolve().parent))
from env_throughput import cpu_name, random_actions, time_floor  # noqa: E402

from morl.behavior import pgmorl  # noqa: E402
from morl.config import behavior_settings, load_config  # noqa: E402
from morl.envs import get_spec, load_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: MO-Gymnasium's versions of the D4MORL tasks (other model files, rewards and episode caps).
PEER_IDS = {"MO-HalfCheetah-v2": "mo-halfcheetah-v5", "MO-Hopper-v2": "mo-hopper-2obj-v5",
            "MO-Walker2d-v2": "mo-walker2d-v5", "MO-Ant-v2": "mo-ant-2obj-v5", "MO-Swimmer-v2": "mo-swimmer-v5"}  # fmt: skip


class _TimedRollout(mj_rollout.Rollout):
    """``mujoco.rollout.Rollout`` that adds the time of every ``rollout`` call to ``seconds``."""

    seconds = 0.0
    steps = 0

    def rollout(self, *args, **kwargs):
        t = time.perf_counter()
        out = super().rollout(*args, **kwargs)
        _TimedRollout.seconds += time.perf_counter() - t
        return out


def _fresh(env_id: str, s: pgmorl.PGMORLSettings) -> pgmorl.TaskBatch:
    spec = get_spec(env_id)
    w = pgmorl.weight_grid(spec.n_obj, s.min_weight, s.max_weight, s.delta_weight)
    k, n_obj = len(w), spec.n_obj
    params = pgmorl.init_params(k, spec.obs_dim, spec.act_dim, n_obj, s.hidden, torch.Generator().manual_seed(s.seed))
    return pgmorl.TaskBatch(
        params, pgmorl.StackedAdam(params, s.adam_eps).state, np.zeros((k, spec.obs_dim)), np.ones((k, spec.obs_dim)),
        np.full(k, 1e-4), np.ones((k, n_obj)), np.zeros((k, n_obj)), np.full(k, 1e-4), w / w.sum(1, keepdims=True),
        np.zeros(k, np.int64),
    )  # fmt: skip


def measure(env_id: str, iters: int, floor_steps: int, config: dict) -> dict:
    s = pgmorl.PGMORLSettings.from_config(behavior_settings(config, env_id)["pgmorl"])
    tb = _fresh(env_id, s)
    k = len(tb.weights)
    parts = {"rollout": 0.0, "update": 0.0, "evaluation": 0.0}
    # Time the three parts by wrapping the functions run_generation calls.
    real_eval = pgmorl.evaluate_tasks
    eval_steps = [0]

    def timed_eval(env_id_, tb_, s_, seed):
        t = time.perf_counter()
        lengths: list[int] = []
        out = real_eval(env_id_, tb_, s_, seed, lengths=lengths)
        parts["evaluation"] += time.perf_counter() - t
        eval_steps[0] += sum(lengths)
        return out

    real_adam = pgmorl.StackedAdam.step
    update_marks = []

    def marked_step(self, lr):
        update_marks.append(time.perf_counter())
        return real_adam(self, lr)

    pgmorl.evaluate_tasks = timed_eval
    pgmorl.StackedAdam.step = marked_step
    mj_rollout.Rollout, original = _TimedRollout, mj_rollout.Rollout
    _TimedRollout.seconds = 0.0
    try:
        torch.set_num_threads(1)
        t0 = time.perf_counter()
        pgmorl.run_generation(env_id, tb, s, 0, iters, env_seed=1, eval_seed=0)
        total = time.perf_counter() - t0
    finally:
        pgmorl.evaluate_tasks = real_eval
        pgmorl.StackedAdam.step = real_adam
        mj_rollout.Rollout = original
    physics = _TimedRollout.seconds
    steps = iters * k * s.num_envs * s.num_steps + eval_steps[0]
    updates = iters * s.ppo_epochs * s.num_minibatches
    # The update phase of each iteration runs from its first to its last Adam step (plus one step's time).
    per_iter_marks = np.array(update_marks).reshape(iters, updates // iters)
    update_time = float(np.sum(per_iter_marks[:, -1] - per_iter_marks[:, 0]) * (1 + 1 / (updates // iters - 1)))
    parts["update"] = update_time
    parts["rollout"] = total - parts["evaluation"] - update_time
    model = load_model(get_spec(env_id))
    actions = random_actions(env_id, floor_steps, k * s.num_envs)
    floor = max(time_floor(model, env_id, actions, 1) for _ in range(2))
    return {"env": env_id, "k": k, "slots": k * s.num_envs, "iters": iters, "steps": steps, "total": total,
            "rate": steps / total, "physics": physics, "floor": floor, **parts}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", default="MO-Hopper-v2,MO-Ant-v2")
    ap.add_argument("--iters", type=int, default=2, help="PPO iterations per task")
    ap.add_argument("--floor-steps", type=int, default=500, help="env steps per slot of the floor")
    ap.add_argument("--config", default=str(ROOT / "configs" / "paper.yaml"))
    ap.add_argument("--peer-python", default=None, help="a python with morl-baselines, to time its PGMORL too")
    args = ap.parse_args()
    config = load_config(args.config)
    print(f"# PGMORL throughput, {datetime.date.today()}, {cpu_name()}, {os.cpu_count()} cores, one torch thread, "
          f"torch {torch.__version__}, mujoco {mujoco.__version__}, {args.iters} iterations per task")  # fmt: skip
    print()
    print("| task | tasks x envs | env steps | wall (s) | env-steps/s | floor env-steps/s | of floor | "
          "physics share | rollout / update / evaluation (s) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for env_id in args.envs.split(","):
        r = measure(env_id, args.iters, args.floor_steps, config)
        print(f"| {env_id} | {r['k']} x {r['slots'] // r['k']} | {r['steps']:,} | {r['total']:.1f} | {r['rate']:,.0f} | "
              f"{r['floor']:,.0f} | {r['rate'] / r['floor']:.0%} | {r['physics'] / r['total']:.0%} | "
              f"{r['rollout']:.1f} / {r['update']:.1f} / {r['evaluation']:.1f} |", flush=True)  # fmt: skip
        if args.peer_python and env_id in PEER_IDS:
            res = subprocess.run([args.peer_python, str(ROOT / "benchmarks" / "peer_pgmorl.py"), PEER_IDS[env_id],
                                  "--iters", str(args.iters), "--floor-steps", str(args.floor_steps)],
                                 capture_output=True, text=True)  # fmt: skip
            if res.returncode != 0:
                why = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
                print(f"| morl-baselines {PEER_IDS[env_id]} | failed: {why} |")
                continue
            q = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"| morl-baselines PGMORL, {q['env']} | 6 x 4 | {q['env_steps']:,} | {q['seconds']:.1f} | "
                  f"{q['rate']:,.0f} | {q['floor']:,.0f} | {q['rate'] / q['floor']:.0%} | | training iterations only |",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
