"""Behavior quality: B (the behavior policy's hypervolume on the protocol's preference grid) of
behavior checkpoints, against the published B, as the Markdown rows of ``docs/datasets.md``.

For each checkpoint (a final ``policy.pt``, a ``.partial`` one, or a policy snapshot of a run in
progress), the deterministic policy runs one episode at each point of the evaluation grid (501
points for 2 objectives, 325 for 3; the evaluation seed of ``--config``), exactly as the
``behavior_front`` stage does for its behavior rows. Printed per checkpoint: the env-steps it
was trained for, B, B as a fraction of the published B (PEDA paper, expert High-H), how many
grid points are non-dominated, the mean episode length and the seconds the evaluation took.

    python benchmarks/behavior_quality.py results/paper-behavior/*/policy.pt [--workers 2]
    python benchmarks/behavior_quality.py results/paper-behavior/MO-Hopper-v2/steps/*.pt

The zero-action and random-action baselines are left out (``morl behavior-front`` has them).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from morl.behavior import load_behavior
from morl.config import load_config
from morl.evaluate import evaluate_agent
from morl.metrics import hypervolume, pareto_front
from morl.paper import HV_UNITS, published_hv
from morl.rollout import BehaviorAgent


def quality_row(path: str, divisions, seed: int, workers: int) -> str:
    policy = load_behavior(path)
    t = time.perf_counter()
    res = evaluate_agent(policy.env_id, BehaviorAgent(policy), divisions, 1, seed, progress=False,
                         workers=workers)  # fmt: skip
    seconds = time.perf_counter() - t
    returns = np.asarray(res["returns"], float)
    b = hypervolume(returns)
    published = published_hv(policy.env_id, "expert", "high", "B")  # in the paper's units
    published = published * HV_UNITS[policy.env_id] if published else float("nan")
    share = f"{b / published:.0%}" if np.isfinite(published) else "n/a"
    front = len(pareto_front(returns))
    steps = policy.meta.get("steps", policy.meta.get("env_steps"))
    steps = f"{steps // 1000}k" if isinstance(steps, int) else "?"
    return (
        f"| {policy.env_id} | {steps} | {b:.3g} | {published:.3g} | {share} | {front} of {len(returns)} "
        f"| {np.mean(res['lengths']):.0f} | {seconds:.0f} s |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--config", default="configs/paper.yaml", help="its evaluate section gives grid and seed")
    ap.add_argument("--workers", type=int, default=1, help="cores stepping the physics")
    args = ap.parse_args()
    ev = load_config(args.config)["evaluate"]
    print("| env | steps | B | published B | B / published | non-dominated points | mean episode length | eval time |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for path in args.checkpoints:
        print(quality_row(path, ev["divisions"], ev["seed"], args.workers), flush=True)


if __name__ == "__main__":
    main()
