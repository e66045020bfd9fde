"""Where a PGMORL run's time goes, generation by generation: the training iterations against the
work done at each generation boundary.

A PGMORL run alternates generations of PPO iterations (rollouts, the update, one evaluation
episode per task) with work between generations that grows with the run: the archive of every
policy seen is merged with the new ones, the population is rebuilt, the prediction-guided
selection fits a model per candidate, and the partial state (which holds the archive) is saved so
a killed run can resume. This script runs ``train_pgmorl`` unchanged on MO-HalfCheetah-v2 with
the same settings as the ``ppo`` loop of ``long_run_speed.py`` (4 envs x 512 steps per task and
iteration, 10 epochs of 8 minibatches, one torch thread) and times each of those functions where
``morl.behavior.pgmorl`` calls them. One row per generation:

- ``s / iteration``: wall time of the generation's iterations divided by their number; a training
  loop that keeps its speed keeps this flat;
- the boundary's phases in seconds, and the archive's size after the merge.

    python benchmarks/pgmorl_phases.py --iters 250

With ``--profile-selection G``, the selections of generation G onwards also run under cProfile, and
the functions that take their time are printed after the table (cumulative seconds, calls).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import os
import platform
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from morl.behavior import pgmorl  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="MO-HalfCheetah-v2", help="a D4MORL task")
    ap.add_argument("--iters", type=int, default=250, help="PPO iterations in all")
    ap.add_argument("--warmup", type=int, default=20, help="iterations of the warm-up generation")
    ap.add_argument("--num-steps", type=int, default=512, help="env steps per env and iteration")
    ap.add_argument(
        "--tiny", action="store_true", help="a few small iterations on MO-Swimmer-v2 (the test suite's check)"
    )
    ap.add_argument(
        "--profile-selection", type=int, default=0, metavar="G",
        help="profile the selections from generation G on (0: none)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    profiler = cProfile.Profile() if args.profile_selection else None

    rows: list[dict] = []  # one per generation, in order
    state = {"closed": 0, "after_close": False}

    def row() -> dict:
        """The generation a call belongs to: the open one, or, between a generation's close and
        the next one's first iteration, the boundary of the generation just closed."""
        i = state["closed"] - 1 if state["after_close"] else state["closed"]
        while len(rows) <= i:
            rows.append({"iters": 0, "tasks": 0, "archive": 0})
        return rows[i]

    def timed(name, fn, before=None, after=None):
        def wrapper(*a, **k):
            if before:
                before(a)
            r = row()
            t = time.perf_counter()
            out = fn(*a, **k)
            r[name] = r.get(name, 0.0) + time.perf_counter() - t
            if after:
                after(a, out, r)
            return out

        return wrapper

    def start_iterations(a):
        state["after_close"] = False

    def count_iterations(a, out, r):
        r["iters"] += len(out)
        r["tasks"] = len(a[1].weights)

    def closed(a, out, r):
        r["archive"] = len(a[1].archive_objs)
        state["closed"] += 1
        state["after_close"] = True

    pgmorl.run_generation = timed("iterations", pgmorl.run_generation, start_iterations, count_iterations)
    pgmorl._close_generation = timed("population", pgmorl._close_generation, after=closed)
    pgmorl.merge_archive = timed("merge", pgmorl.merge_archive)
    selection = pgmorl._select_next_tasks
    if profiler is not None:

        def selection(*a, _select=pgmorl._select_next_tasks, **k):
            on = state["closed"] >= args.profile_selection
            if on:
                profiler.enable()
            try:
                return _select(*a, **k)
            finally:
                if on:
                    profiler.disable()

    pgmorl._select_next_tasks = timed("selection", selection)
    pgmorl.save_torch = timed("save", pgmorl.save_torch)

    cfg = {"env_steps_per_task": args.iters * 4 * args.num_steps, "warmup_iters": min(args.warmup, args.iters),
           "update_iters": 10, "num_envs": 4, "num_steps": args.num_steps, "num_minibatches": 8,
           "ppo_epochs": 10, "seed": 0}  # fmt: skip
    if args.tiny:  # 2 tasks' worth of tiny networks, 2 warm-up iterations then 1-iteration generations
        args.env, args.iters = "MO-Swimmer-v2", 4
        cfg = {"env_steps_per_task": 4 * 2 * 64, "warmup_iters": 2, "update_iters": 1, "num_envs": 2, "num_steps": 64,
               "num_minibatches": 4, "ppo_epochs": 2, "hidden": 16, "seed": 0}  # fmt: skip
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        pgmorl.train_pgmorl(args.env, cfg, Path(tmp) / "behavior.pt", threads=1, progress=False)
    wall = time.perf_counter() - t0
    print(f"{datetime.date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, one thread; {args.env}, {args.iters} iterations, wall {wall:.0f} s; "
          "a generation's boundary is its merge, the population's rebuild, the selection and the save\n")  # fmt: skip
    print("| generation | iterations | tasks | archive | s / iteration | merge (s) | population (s) | "
          "selection (s) | save (s) | boundary / generation |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for g, r in enumerate(rows, 1):
        b = sum(r.get(k, 0.0) for k in ("merge", "population", "selection", "save"))
        total = b + r.get("iterations", 0.0)
        print(f"| {g} | {r['iters']} | {r['tasks']} | {r['archive']} | {r.get('iterations', 0.0) / max(r['iters'], 1):.3f} | "
              + " | ".join(f"{r.get(k, 0.0):.3f}" for k in ("merge", "population", "selection", "save"))
              + f" | {b / total if total else 0.0:.1%} |")  # fmt: skip
    if profiler is not None:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(15)
        print(f"\nThe selections from generation {args.profile_selection} on, by cumulative time:")
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
