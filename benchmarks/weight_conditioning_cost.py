"""What putting the preference into the weights costs: training updates/s of MORvS(P), MORvS-HN and
MORvS-PML side by side.

Each model is trained by the training core (``morl.families.train``: batch sampling, forward,
backward, AdamW; no partial checkpoints) at its settings in ``configs/unseen.yaml`` on a synthetic
HalfCheetah-sized dataset (100,000 steps, ``benchmarks/synthetic.py``). The models take turns,
``--rounds`` times ``--steps`` updates each, so that a load change on a shared machine hits all of
them; the table gives the median updates/s over the rounds and its ratio to MORvS(P)'s, with each
network's parameter count.

    python benchmarks/weight_conditioning_cost.py [--threads 1] [--steps 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_dataset  # noqa: E402

from morl.config import train_settings  # noqa: E402
from morl.data import load_dataset  # noqa: E402
from morl.families import display_names, load_agent, train  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("rvs-p", "rvs-hn", "rvs-pml")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=300, help="updates per model and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--env", default="MO-HalfCheetah-v2")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = yaml.safe_load((ROOT / "configs/unseen.yaml").read_text())
    names = display_names()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        data_path = synthetic_dataset(tmp / "synthetic.parquet", env_id=args.env)
        ds = load_dataset(data_path)
        settings = {m: dict(train_settings(config, args.env, m), steps=args.steps, checkpoint_every=0) for m in MODELS}
        print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} thread(s); "
              f"synthetic {args.env}-sized dataset of {ds.n_steps} steps (obs {ds.obs_dim}, act {ds.act_dim}, "
              f"{ds.n_obj} objectives); configs/unseen.yaml settings; {args.rounds} rounds of {args.steps} "
              "updates per model\n")  # fmt: skip
        rates: dict[str, list[float]] = {m: [] for m in MODELS}
        params = {}
        for _ in range(args.rounds):
            for m in MODELS:
                summary = train(data_path, m, 0, settings[m], tmp / f"{m}.pt", device="cpu", progress=False)
                rates[m].append(summary["steps_per_s"])
                if m not in params:
                    params[m] = sum(v.numel() for v in load_agent(tmp / f"{m}.pt").model.parameters())
        base = statistics.median(rates["rvs-p"])
        print("| model | hidden x depth | batch | parameters | updates/s (median) | samples/s | ratio to MORvS(P) |")
        print("|---|---|---|---|---|---|---|")
        for m in MODELS:
            s, rate = settings[m], statistics.median(rates[m])
            print(f"| {names[m]} | {s['hidden']} x {s['depth']} | {s['batch_size']} | {params[m]:,} | {rate:.0f} "
                  f"| {rate * s['batch_size']:.0f} | {rate / base:.2f} |")  # fmt: skip
        print("\nupdates/s of each round: " + "; ".join(f"{m}: " + ", ".join(f"{r:.0f}" for r in rates[m])
                                                        for m in MODELS))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
