"""Torch threads against training speed: each model at 1, 2 and 4 threads, on an idle machine and
beside another busy job, side by side in one run.

Each measurement is a fresh process that sets up the runtime as ``morl train --threads N`` does
(``morl.cpu.configure`` with the threads ``morl.cpu.usable_threads`` allows: at most the cores
idle at the start) and times ``--steps`` training steps of one model (the
learner's ``sample``/``update``, the training core's inner loop) on the synthetic HalfCheetah-sized
dataset. "Beside a busy job" starts one single-threaded process doing float work for the whole
measurement, as a second Snakemake job does on a 2-core machine. The idle column is only idle if
nothing else runs on the machine: the script says how many cores it sees, and the load average
before it starts.

Models and sizes: MORvS(P) and BC(P) at PEDA's size (configs/paper.yaml), MODT(P) at
configs/paper-cpu.yaml's, the value-based and weight-conditioned models at configs/unseen.yaml's.

    python benchmarks/threads.py [--models rvs-p,dt-p] [--threads 1,2,4] [--steps 400]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("rvs-p", "bc-p", "dt-p", "cql-p", "td3bc-p", "iql-p", "rvs-hn", "rvs-pml")
CONFIG = {"rvs-p": "configs/paper.yaml", "bc-p": "configs/paper.yaml", "dt-p": "configs/paper-cpu.yaml"}

CHILD = r"""
import json, sys, time
from pathlib import Path
model, threads, steps, data_path, config = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
import torch
from morl.cpu import configure, usable_threads
configure(threads=usable_threads(threads)[0])  # what `morl train --threads N` computes with
sys.path.insert(0, "benchmarks")
from step_floor import learner_of
learner, _ = learner_of(model, config, Path(data_path))
gen = torch.Generator().manual_seed(0)
for step in range(10):
    learner.update(learner.sample(gen), step)
t0 = time.perf_counter()
for step in range(steps):
    learner.update(learner.sample(gen), step)
print(json.dumps({"steps_per_s": steps / (time.perf_counter() - t0), "threads": torch.get_num_threads()}))
"""

BUSY = r"""
import time, torch
torch.set_num_threads(1)
a = torch.randn(256, 256)
print("busy", flush=True)
while True:
    a = torch.tanh(a @ a) * 0.5
"""


def measure(model: str, threads: int, steps: int, data: Path) -> tuple[float, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, model, str(threads), str(steps), str(data),
         str(ROOT / CONFIG.get(model, "configs/unseen.yaml"))],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"{model} at {threads} threads failed: {out.stderr.strip().splitlines()[-1]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["steps_per_s"], r["threads"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--threads", default="1,2,4", help="comma-separated thread counts")
    p.add_argument("--steps", type=int, default=400, help="timed training steps per measurement")
    p.add_argument("--trajectories", type=int, default=200, help="of the synthetic dataset (500 steps each)")
    args = p.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    counts = [int(t) for t in args.threads.split(",") if t]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from synthetic import synthetic_dataset

    with tempfile.TemporaryDirectory() as tmp:
        data = synthetic_dataset(Path(tmp) / "synthetic.parquet", n_traj=args.trajectories)
        print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.2f} before the run; {args.steps} steps per measurement; steps/s asking for "
              "N threads, and in brackets the ratio to 1 thread in the same condition and the threads the "
              "runtime used (morl.cpu.configure: never more than the cores idle at the start)\n")  # fmt: skip
        head = " | ".join(f"{t} thread{'s' * (t > 1)}" for t in counts)
        print(f"| model | condition | {head} |")
        print("|---|---|" + "---|" * len(counts))
        for model in models:
            for condition in ("idle", "beside a busy job"):
                busy = None
                if condition != "idle":  # spinning before the measurement starts and counts idle cores
                    busy = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
                    busy.stdout.readline()
                try:
                    rates = [measure(model, t, args.steps, data) for t in counts]
                finally:
                    if busy is not None:
                        busy.kill()
                        busy.wait()
                cells = " | ".join(f"{r:.1f} ({r / rates[0][0]:.2f}, {n} used)" for r, n in rates)
                print(f"| {model} | {condition} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
