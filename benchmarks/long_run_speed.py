"""Does a training loop keep its speed over a long run? Steps/s per window, start against end.

Each loop runs for ``--steps`` training steps in a fresh process, and each step is timestamped:
the families' loops through their learner's ``sample``/``update`` (the training core's inner loop,
without its bookkeeping), the front model through torch's global optimiser-step hook, so it runs
unchanged. The report gives, per loop, the rate of the first window (``--window`` steps after
``--skip`` warm-up steps) and of the last window, their ratio, and the share of the optimisers'
Adam moments that are subnormal at the end (what made long runs slow: arithmetic on subnormal
floats is many times slower on x86 CPUs).

``--code DIR`` (repeatable) runs the same loops with another checkout's ``morl`` (e.g. the commit
before a change: ``git worktree add /tmp/before HEAD~1``), so a before/after comparison is made side
by side in one run; the processes take turns, loop by loop. A checkout's loops run the way its
``morl train`` runs them: the runtime set up by ``morl.cpu.configure`` where the checkout has it.

Loops: the PEDA MLP (MORvS(P) at PEDA's size: 3 x 512, batch 64), MODT(P) at configs/paper-cpu.yaml's
size, CQL(P), TD3+BC(P), IQL(P), MORvS-HN and MORvS-PML at configs/unseen.yaml's settings, and
MODULI's front model. All train on the synthetic HalfCheetah-sized dataset (benchmarks/synthetic.py).
The behavior trainers run whole, on MO-HalfCheetah-v2, with their environment steps between the
optimiser steps: ``td3``, configs/paper.yaml's TD3 behavior for as many critic updates as
``--steps`` (its actor's steps are stamped too), and ``ppo``, PGMORL's batched PPO (6 tasks x 4
envs x 512 steps per iteration, 10 epochs of 8 minibatches, its own stacked Adam).

    python benchmarks/long_run_speed.py --loops rvs-p,front --steps 100000 --code /tmp/before --code .
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LOOPS = ("rvs-p", "dt-p", "cql-p", "td3bc-p", "iql-p", "rvs-hn", "rvs-pml", "front", "td3", "ppo")

# Run in a child process with one checkout's `morl` first on sys.path; prints one JSON line.
CHILD = r"""
import json, sys, time
code, loop, steps, data_path, front_from = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
sys.path.insert(0, code)
# an editable install of another checkout would fill in modules this one lacks: only this checkout's
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in str(getattr(f, "__module__", ""))]
import numpy as np, torch, yaml
from torch.optim.optimizer import register_optimizer_step_post_hook
try:
    from morl.cpu import configure
    configure()  # what `morl train` does in that checkout
    setup = "morl.cpu.configure"
except ImportError:
    setup = "none"
torch.set_num_threads(1)
stamps = []
opts = []
register_optimizer_step_post_hook(lambda opt, a, k: stamps.append(time.perf_counter()))
_init = torch.optim.Optimizer.__init__
def _track(self, *a, **k):
    _init(self, *a, **k)
    opts.append(self)
torch.optim.Optimizer.__init__ = _track
from morl.data import load_dataset
stacked = []
if loop == "ppo":  # PGMORL's own Adam over the stacked task networks: stamp its steps
    from morl.behavior import pgmorl_networks
    _sinit, _sstep = pgmorl_networks.StackedAdam.__init__, pgmorl_networks.StackedAdam.step
    def _sinit2(self, *a, **k):
        _sinit(self, *a, **k)
        stacked.append(self)
    def _sstep2(self, lr):
        _sstep(self, lr)
        stamps.append(time.perf_counter())
    pgmorl_networks.StackedAdam.__init__, pgmorl_networks.StackedAdam.step = _sinit2, _sstep2
if loop in ("td3", "ppo"):
    import tempfile
    from pathlib import Path
    out = Path(tempfile.mkdtemp()) / "behavior.pt"
    if loop == "td3":  # configs/paper.yaml's TD3 on HalfCheetah: critic updates = steps
        from morl.behavior.td3 import train_td3
        cfg = dict(yaml.safe_load(open(Path(code) / "configs/paper.yaml"))["behavior"])
        cfg = {k: v for k, v in cfg.items() if k not in ("method", "overrides", "pgmorl", "shipped")}
        per_step = cfg["updates_per_step"]
        cfg.update(total_steps=cfg["start_steps"] + int(steps / per_step) + cfg["n_envs"], checkpoint_every=0)
        train_td3("MO-HalfCheetah-v2", cfg, out, threads=1, progress=False, hv_every=0)
    else:  # PGMORL's PPO on HalfCheetah, 6 tasks x 4 envs x 512 steps, 10 epochs of 8 minibatches
        from morl.behavior.pgmorl import train_pgmorl
        per_iter = 10 * 8
        iters = steps // per_iter + 1
        cfg = {"env_steps_per_task": iters * 4 * 512, "warmup_iters": min(20, iters), "update_iters": 10, "num_envs": 4,
               "num_steps": 512, "num_minibatches": 8, "ppo_epochs": 10, "seed": 0}
        train_pgmorl("MO-HalfCheetah-v2", cfg, out, threads=1, progress=False)
elif loop == "front":
    from morl.front_model import fit_front_model
    if front_from:  # the points a committed front model was fitted on
        saved = torch.load(front_from, weights_only=True)
        fit_front_model(saved["points_preference"].numpy(), saved["points_return"].numpy(), steps=steps, seed=0)
    else:
        ds = load_dataset(data_path)
        fit_front_model(ds.traj_preferences, ds.traj_returns, steps=steps, seed=0)
else:
    from pathlib import Path
    from morl.config import train_settings
    from morl.families import family_of
    try:  # the checkout's own layout: older ones kept these in the trainer
        from morl.families.base import Dims
        from morl.normalisation import dataset_facts, observation_stats
    except ImportError:
        from morl.trainer import Dims, dataset_facts, observation_stats
    config = "configs/paper-cpu.yaml" if loop in ("dt-p",) else "configs/unseen.yaml"
    settings = train_settings(yaml.safe_load(open(Path(code) / config)), "MO-HalfCheetah-v2", loop)
    if loop == "rvs-p":  # PEDA's size and batch (configs/paper.yaml)
        settings = train_settings(yaml.safe_load(open(Path(code) / "configs/paper.yaml")), "MO-HalfCheetah-v2", loop)
    fam = family_of(loop)
    settings = fam.resolve_settings(dict(settings, steps=steps))
    module = fam.load()
    ds = load_dataset(data_path)
    dev = torch.device("cpu")
    facts = dataset_facts(ds, Path(data_path))
    data = module.prepare(ds, settings, dev, observation_stats(ds.observations), facts)
    torch.manual_seed(0)
    learner = module.Learner(loop, data, Dims(ds.obs_dim, ds.act_dim, ds.n_obj), settings, dev, facts)
    gen = torch.Generator().manual_seed(0)
    stamps.clear()
    ends = []
    for step in range(steps):
        learner.update(learner.sample(gen), step)
        ends.append(time.perf_counter())
    stamps[:] = ends
import morl
assert all(str(getattr(m, "__file__", code)).startswith(code) for k, m in sys.modules.items()
           if k.split(".")[0] == "morl"), "morl modules from outside " + code
tiny = torch.finfo(torch.float32).tiny
sub = n = 0
for opt in opts:
    for st in opt.state.values():
        for key, v in st.items():
            if torch.is_tensor(v) and v.is_floating_point() and v.dim() > 0:
                a = v.abs()
                sub += int(((a > 0) & (a < tiny)).sum())
                n += a.numel()
for adam in stacked:
    for v in [*adam.state["m"].values(), *adam.state["v"].values()]:
        a = v.abs()
        sub += int(((a > 0) & (a < tiny)).sum())
        n += a.numel()
print(json.dumps({"setup": setup, "stamps": stamps, "subnormal": sub / max(n, 1)}))
"""


def rate(stamps: list[float], start: int, window: int) -> float:
    """Steps/s over ``window`` steps from step ``start``."""
    return window / (stamps[start + window - 1] - stamps[start - 1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loops", default=",".join(LOOPS), help=f"comma-separated, from {', '.join(LOOPS)}")
    p.add_argument("--steps", type=int, default=100_000, help="optimiser steps per loop")
    p.add_argument("--window", type=int, default=1000, help="steps per timed window")
    p.add_argument("--skip", type=int, default=100, help="warm-up steps before the first window")
    p.add_argument("--code", action="append", type=Path, default=[], help="a checkout to run (default: this one)")
    p.add_argument("--trajectories", type=int, default=200, help="of the synthetic dataset (500 steps each)")
    p.add_argument("--front-from", type=Path, default=None,
                   help="fit the front model on the points this front model file was fitted on (e.g. a slice's "
                        "data/<dataset>.front_model.pt) instead of the synthetic dataset")  # fmt: skip
    args = p.parse_args(argv)
    loops = [x for x in args.loops.split(",") if x]
    unknown = [x for x in loops if x not in LOOPS]
    if unknown:
        p.error(f"unknown loop(s) {', '.join(unknown)}; choose from {', '.join(LOOPS)}")
    if args.steps < args.skip + 2 * args.window:
        p.error(f"--steps must be at least --skip + 2 x --window ({args.skip + 2 * args.window})")
    codes = [c.resolve() for c in (args.code or [ROOT])]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch
    from synthetic import synthetic_dataset

    with tempfile.TemporaryDirectory() as tmp:
        data = synthetic_dataset(Path(tmp) / "synthetic.parquet", n_traj=args.trajectories)
        print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, 1 thread; {args.steps} steps "
              f"per loop, windows of {args.window} steps\n")  # fmt: skip
        print("| loop | checkout | runtime setup | first window (steps/s) | last window (steps/s) | last / first "
              "| wall (s) | subnormal share of the optimiser state at the end |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        along = []
        for loop in loops:
            for code in codes:
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(code), loop, str(args.steps), str(data),
                     str(args.front_from.resolve()) if args.front_from else ""],
                    cwd=code, capture_output=True, text=True,
                )  # fmt: skip
                if out.returncode != 0:
                    print(f"| {loop} | {code} | failed: {out.stderr.strip().splitlines()[-1]} | | | | | |", flush=True)
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                stamps = r["stamps"]
                first = rate(stamps, args.skip, args.window)
                last = rate(stamps, len(stamps) - args.window, args.window)
                print(f"| {loop} | {code.name} | {r['setup']} | {first:.1f} | {last:.1f} | {last / first:.2f} "
                      f"| {stamps[-1] - stamps[0]:.0f} | {r['subnormal']:.1%} |", flush=True)  # fmt: skip
                starts = np.linspace(args.skip, len(stamps) - args.window, 11).round().astype(int)
                along.append(f"| {loop} | {code.name} | "
                             + " | ".join(f"{rate(stamps, int(s), args.window) / first:.2f}" for s in starts) + " |")  # fmt: skip
        print("\nSpeed along the run, each window's rate over the first's, at 0%, 10%, ..., 100% of the run:\n")
        print("| loop | checkout | " + " | ".join(f"{p}%" for p in range(0, 101, 10)) + " |")
        print("|---|---|" + "---|" * 11)
        print("\n".join(along))
    return 0


if __name__ == "__main__":
    sys.exit(main())
