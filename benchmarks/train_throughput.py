"""Training throughput of every model at paper size, and the share of batch sampling.

For each PEDA model, times optimiser steps (sample + gather a batch, forward, backward, AdamW) on a
synthetic HalfCheetah-sized dataset (100,000 steps) at the paper's hyperparameters
(configs/paper.yaml), and separately the sampling + gathering alone, in the same run. For each
value-based model, runs its family's trainer for ``--value-steps`` updates at its paper's settings
(actor and critic updates, target networks; no checkpoints) and reports updates/s as the trainer
measures them.

    python benchmarks/train_throughput.py [--threads 2] [--mlp-steps 200] [--dt-steps 6] [--value-steps 40] [--warmup 2]
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_dataset  # noqa: E402

from morl.config import train_settings  # noqa: E402
from morl.data import load_dataset  # noqa: E402
from morl.families import family_of, model_order, train  # noqa: E402
from morl.families.peda import batch_loss, gather_batch, make_optimizer, prepare_tensors, sample_indices  # noqa: E402
from morl.families.peda_networks import MODEL_NAMES, build_model, is_transformer, window_length  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def time_model(name: str, data, ds, hp: dict, steps: int, warmup: int = 2) -> dict:
    torch.manual_seed(0)
    model = build_model(name, ds.obs_dim, ds.act_dim, ds.n_obj, hp, act_low=[-1.0] * ds.act_dim,
                        act_high=[1.0] * ds.act_dim)  # fmt: skip
    opt, sched = make_optimizer(model, hp, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    K = window_length(name, hp)

    def step():
        batch = gather_batch(data, sample_indices(gen, data.n_steps, hp["batch_size"]), K)
        loss = batch_loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if is_transformer(name):
            torch.nn.utils.clip_grad_norm_(model.parameters(), hp["grad_clip"])
        opt.step()
        sched.step()

    model.train()
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    step_s = (time.perf_counter() - t0) / steps
    t0 = time.perf_counter()
    reps = max(steps, 50)
    for _ in range(reps):
        gather_batch(data, sample_indices(gen, data.n_steps, hp["batch_size"]), K)
    sample_s = (time.perf_counter() - t0) / reps
    return {"model": name, "step_ms": 1e3 * step_s, "samples_per_s": hp["batch_size"] / step_s,
            "sampling_ms": 1e3 * sample_s, "sampling_share": sample_s / step_s}  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mlp-steps", type=int, default=200)
    p.add_argument("--dt-steps", type=int, default=6)
    p.add_argument("--value-steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=2, help="untimed optimiser steps of each PEDA model first")
    p.add_argument("--env", default="MO-HalfCheetah-v2")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = yaml.safe_load((ROOT / "configs/paper.yaml").read_text())
    tmp_dir = tempfile.TemporaryDirectory()
    tmp = Path(tmp_dir.name)
    data_path = synthetic_dataset(tmp / "synthetic.parquet")
    ds = load_dataset(data_path)
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} threads, "
          f"dataset {ds.n_steps} steps; paper hyperparameters from configs/paper.yaml ({args.env})\n")  # fmt: skip
    print("| model | step (ms) | samples/s | batch sampling (ms) | sampling share of step |")
    print("|---|---|---|---|---|")
    for name in MODEL_NAMES:
        hp = train_settings(config, args.env, name)
        data = prepare_tensors(ds, hp["return_scale"], rtg_definition=hp["returns_to_go"])
        r = time_model(name, data, ds, hp, args.dt_steps if is_transformer(name) else args.mlp_steps, args.warmup)
        print(f"| {name} | {r['step_ms']:.1f} | {r['samples_per_s']:.0f} | {r['sampling_ms']:.2f} "
              f"| {100 * r['sampling_share']:.1f}% |", flush=True)  # fmt: skip
    print("\n| model | updates/s | samples/s | batch |")
    print("|---|---|---|---|")
    for name in (m for m in model_order() if family_of(m).name != "peda"):
        settings = dict(train_settings(config, args.env, name), steps=args.value_steps, checkpoint_every=0)
        summary = train(data_path, name, 0, settings, tmp / f"{name}.pt", device="cpu", progress=False)
        print(f"| {name} | {summary['steps_per_s']:.1f} | {summary['samples_per_s']:.0f} | {settings['batch_size']} |",
              flush=True)  # fmt: skip
    tmp_dir.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
