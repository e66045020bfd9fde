"""Peak memory of collect, train and evaluate at paper scale (50,000 trajectories per dataset).

Runs the project's own commands, each in its own process under ``/usr/bin/time -v``, and reports
each one's peak resident memory (the figure SLURM's ``--mem`` must cover) and wall time:

1. ``morl collect``: the expert High-H dataset of ``--env`` with the shipped behavior policy, at
   ``--trajectories`` (default: the paper's 50,000) and the paper's collection batch.
2. ``morl train`` of each ``--models`` entry, in the worst case of the paper grid: a training
   dataset other than the expert-high one, whose state statistics come, for PEDA's models, from
   the expert-high file (``statistics_from: expert-high``; the value-based models use their own). The training dataset is a copy of the collected file under
   another name, so both are full size. The peak is reached once the data are prepared and the
   first batches drawn, so training runs ``--steps`` updates (default 200), not the paper's budget;
   everything else is ``configs/paper.yaml``'s.
3. ``morl evaluate`` of each trained model on the protocol grid (501 points for 2 objectives).

``--config`` scales another config instead of ``configs/paper.yaml`` (with ``configs/smoke.yaml``
and a few trajectories, a run of seconds that checks the script, not the paper's memory).

``--code DIR`` runs the same commands with the code of another checkout (e.g. a ``git worktree``
of an older commit) beside this one, for a side-by-side comparison on the same files. Files are
kept in ``--workdir``, and a rerun reuses the collected dataset.

    python benchmarks/paper_scale_memory.py --env MO-HalfCheetah-v2 --workdir /tmp/scale \\
        [--trajectories 50000] [--models dt-p,rvs-p,cql-p] [--steps 200] [--code OLD_CHECKOUT [--only-other]]
        [--config configs/paper.yaml]
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from morl.config import load_config, reference_cell

ROOT = Path(__file__).resolve().parent.parent
TIME = "/usr/bin/time"  # GNU time: -v reports the peak resident set


def measured(cmd: list[str], code: Path, log: Path) -> tuple[float, float]:
    """Run ``cmd`` with the package at ``code``; its peak resident memory (GiB) and wall time (s)."""
    env = dict(os.environ, PYTHONPATH=str(code), OMP_NUM_THREADS="1")
    start = time.perf_counter()
    with open(log, "w") as err:
        # run from the checkout itself: python puts the working folder first on sys.path
        done = subprocess.run([TIME, "-v", *cmd], env=env, cwd=code, stdout=err, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    text = log.read_text()
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {done.returncode}); see {log}")
    kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    return kib / 2**20, wall


def scaled_config(work: Path, steps: int, base: Path = ROOT / "configs" / "paper.yaml") -> Path:
    """``base`` (configs/paper.yaml) with every family's training cut to ``steps`` updates."""
    cfg = yaml.safe_load(base.read_text())
    cfg["results_dir"] = str(work / "results")
    train = cfg["train"]
    train.pop("overrides", None)
    train["peda"] |= {
        "steps": steps,
        "warmup_steps": min(steps, train["peda"]["warmup_steps"]),
        "checkpoint_every": steps,
    }
    for family in ("cql", "td3bc", "iql", "hyper", "manifold"):
        train[family] = dict(train.get(family) or {}) | {"steps": steps, "checkpoint_every": steps}
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="MO-HalfCheetah-v2")
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--trajectories", type=int, default=50000)
    ap.add_argument("--models", default="dt-p,rvs-p,cql-p")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--code", type=Path, action="append", default=[], help="another checkout to compare")
    ap.add_argument("--only-other", action="store_true", help="train and evaluate with the --code checkouts only")
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "paper.yaml", help="the config to scale")
    args = ap.parse_args()
    if not os.access(TIME, os.X_OK):
        sys.exit(f"paper_scale_memory: needs GNU time at {TIME} to measure peak memory (apt-get install time)")
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    config = scaled_config(work, args.steps, args.config.resolve())
    cfg = load_config(config)
    morl = [sys.executable, "-m", "morl.cli"]
    expert, other = work / "expert-high.parquet", work / "training.parquet"
    rows = []
    if not expert.exists():
        gib, wall = measured(
            [*morl, "collect", "--config", str(config), "--policy", str(ROOT / "behaviors" / f"{args.env}.pt"),
             "--quality", "expert", "--entropy", "high", "--n-trajectories", str(args.trajectories),
             "--workers", str(args.workers), "--output", str(expert)],
            ROOT, work / "collect.log",
        )  # fmt: skip
        rows.append(("this checkout", "collect", f"{args.trajectories:,} trajectories", gib, wall))
        shutil.copyfile(expert, other)
    size = expert.stat().st_size / 2**30
    for code in ([] if args.only_other else [ROOT]) + [c.resolve() for c in args.code]:
        where = subprocess.run(
            [sys.executable, "-c", "import morl; print(morl.__file__)"],
            env=dict(os.environ, PYTHONPATH=str(code)), cwd=code, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        if not where.startswith(str(code)):
            sys.exit(f"{code}: python imports morl from {where}, not from this checkout")
        label = "this checkout" if code == ROOT else str(code)
        tag = "this" if code == ROOT else code.name
        for model in args.models.split(","):
            # the expert-high file only where the model's statistics come from it (PEDA's models)
            reference = ["--reference-dataset", str(expert)] if reference_cell(cfg, args.env, model) else []
            ckpt = work / f"{tag}-{model}.pt"
            ckpt.unlink(missing_ok=True)
            gib, wall = measured(
                [*morl, "train", "--config", str(config), "--dataset", str(other), *reference,
                 "--model", model, "--seed", "0", "--device", "cpu", "--output", str(ckpt)],
                code, work / f"train-{tag}-{model}.log",
            )  # fmt: skip
            rows.append((label, f"train {model}", f"{args.steps} updates", gib, wall))
            out = work / f"{tag}-{model}-eval.parquet"
            out.unlink(missing_ok=True)
            gib, wall = measured(
                [*morl, "evaluate", "--config", str(config), "--checkpoint", str(ckpt), "--dataset", str(other),
                 *reference, "--workers", str(args.workers), "--output", str(out)],
                code, work / f"evaluate-{tag}-{model}.log",
            )  # fmt: skip
            rows.append((label, f"evaluate {model}", "protocol grid", gib, wall))
    print(f"# Paper-scale memory, {args.env}, {datetime.date.today()}, dataset files {size:.2f} GiB each\n")
    print("| code | command | size | peak resident memory (GiB) | wall (s) |")
    print("|---|---|---|---:|---:|")
    for label, what, n, gib, wall in rows:
        print(f"| {label} | {what} | {n} | {gib:.2f} | {wall:.0f} |")


if __name__ == "__main__":
    main()
