"""Collection throughput: env-steps/s of :func:`morl.collect.collect_dataset`, inference included,
against the raw MuJoCo stepping floor, and what one 50,000-trajectory dataset costs.

In one run, interleaved over ``--repeats`` rounds (best round reported):

- **collect**: ``collect_dataset`` end to end (behavior-policy forward for every running slot at
  every step, the amateur perturbation, the batched stepper with auto-reset on ``--workers``
  threads, sorting the steps into trajectories and writing the Parquet file) for
  ``--trajectories`` MO-HalfCheetah-v2 trajectories of the amateur/high recipe with the paper's
  collection batch (500 slots).  The policy is a paper-size behavior actor (hidden 256, as in
  ``configs/paper.yaml``) after a few hundred TD3 steps: the work per step does not depend on
  how well it runs; HalfCheetah episodes last 500 steps unless the body flips.
- **floor**: ``mujoco.rollout`` with ``--workers`` threads stepping the same number of
  trajectories of 500 env steps (no Python per step, no rewards, no policy): the env benchmark's
  floor (``benchmarks/env_throughput.py``).

The time of one 50,000-trajectory dataset is extrapolated linearly from the measured rate (and
measured directly with ``--trajectories 50000``).  ``--policy`` collects with a trained behavior
checkpoint instead (a final ``policy.pt`` or a ``.partial`` one of a run in progress), whose
HalfCheetah episodes mostly last the full 500 steps.

    python benchmarks/collect_throughput.py [--trajectories 2000] [--workers 2] [--repeats 2] [--policy PATH]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from env_throughput import cpu_name, random_actions, time_floor  # noqa: E402

from morl.behavior import train_behavior  # noqa: E402
from morl.collect import collect_dataset  # noqa: E402
from morl.data import load_dataset  # noqa: E402
from morl.envs import get_spec, load_model  # noqa: E402

ENV = "MO-HalfCheetah-v2"
PAPER_BEHAVIOR = dict(total_steps=600, start_steps=400, n_envs=4, updates_per_step=0.5, batch_size=64, hidden=256,
                      lr=3e-4, gamma=0.99, tau=0.005, policy_noise=0.2, noise_clip=0.5, policy_delay=2,
                      expl_noise=0.1, buffer_size=10000, checkpoint_every=100000, seed=0)  # fmt: skip


def time_collect(policy: Path, out: Path, n: int, batch: int, workers: int) -> tuple[float, int, float]:
    start = time.perf_counter()
    collect_dataset(policy, "amateur", "high", n, out, batch_size=batch, seed=0, progress=False, workers=workers)
    elapsed = time.perf_counter() - start
    steps = load_dataset(out).n_steps
    return steps / elapsed, steps, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trajectories", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--policy", type=Path, default=None, help="a trained MO-HalfCheetah-v2 behavior checkpoint")
    args = ap.parse_args()
    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        policy = args.policy
        if policy is None:
            policy = tmp / "policy.pt"
            train_behavior(ENV, PAPER_BEHAVIOR, policy, progress=False)
        model = load_model(get_spec(ENV))
        # The floor steps as many 500-step trajectories as one collection round, `batch` at a time.
        floor_actions = random_actions(ENV, 500, min(args.batch, args.trajectories))
        best_collect, best_floor, steps, elapsed = 0.0, 0.0, 0, 0.0
        for _ in range(args.repeats):
            rate, steps, el = time_collect(policy, tmp / "data.parquet", args.trajectories, args.batch, args.workers)
            if rate > best_collect:
                best_collect, elapsed = rate, el
            best_floor = max(best_floor, time_floor(model, ENV, floor_actions, args.workers))
        size = (tmp / "data.parquet").stat().st_size

    per_traj = elapsed / args.trajectories
    print(
        f"# collection throughput, {datetime.date.today()}, {cpu_name()}, {os.cpu_count()} cores, "
        f"mujoco {mujoco.__version__}, torch {torch.__version__} (1 thread), best of {args.repeats}"
    )
    print()
    print("| what | env-steps/s | ratio to floor |")
    print("|---|---:|---:|")
    which = f"policy {args.policy}" if args.policy else "a barely trained policy"
    print(
        f"| collect_dataset, {ENV} amateur/high, {which}, {args.trajectories} trajectories ({steps:,} steps), "
        f"{args.batch} slots, {args.workers} workers | {best_collect:,.0f} | {best_collect / best_floor:.0%} |"
    )
    print(f"| floor: mujoco.rollout, {args.workers} threads | {best_floor:,.0f} | 100% |")
    print()
    print(f"- {args.trajectories} trajectories took {elapsed:.1f} s ({size / 2**20:.1f} MiB of Parquet).")
    print(
        f"- one 50,000-trajectory dataset at this rate: {50000 * per_traj / 60:.1f} min"
        + (" (measured)" if args.trajectories == 50000 else f" (extrapolated from {args.trajectories})")
    )


if __name__ == "__main__":
    main()
