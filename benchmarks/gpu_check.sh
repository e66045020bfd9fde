#!/usr/bin/env bash
# CUDA check for a GPU machine: trains each model at paper size for a few thousand steps on
# a synthetic HalfCheetah-sized dataset, checks that the loss falls (its last logged value below
# FALL times its first, default 0.5), and prints samples/s and peak GPU memory. It installs
# nothing: it uses the project's .venv if present, else python3.
#
#   bash benchmarks/gpu_check.sh            # 2000 steps per model
#   STEPS=5000 bash benchmarks/gpu_check.sh
#   DEVICE=cpu CONFIG=configs/smoke.yaml STEPS=300 FALL=0.8 BEHAVIOR_STEPS=500 bash benchmarks/gpu_check.sh
#       # exercises the script without a GPU in seconds: the smoke config's tiny models, and a fall
#       # that 300 steps reach (CQL's loss, mostly its conservative penalty, falls slowest)
#
# Compare MODT(P)'s samples/s with the CPU figure in docs/benchmarks.md (target: 20x or more).
# Then it trains the HalfCheetah behavior policy at configs/paper.yaml's settings for
# BEHAVIOR_STEPS env steps (default 30,000; the first 10,000 are random, without updates) and prints
# env-steps/s after the random phase: 1M steps take 1e6 / that rate seconds (docs/datasets.md has
# the CPU figure). CONFIG names another config for both parts (default configs/paper.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" - "${STEPS:-2000}" "${BEHAVIOR_STEPS:-30000}" "${CONFIG:-configs/paper.yaml}" <<'PYEOF'
import csv, os, sys, tempfile
from pathlib import Path

try:
    import torch
except ImportError:
    sys.exit("gpu_check: torch is not installed in this Python; install the project first (make install)")
device = os.environ.get("DEVICE", "cuda")
cuda = device.startswith("cuda")
if cuda and not torch.cuda.is_available():
    sys.exit("gpu_check: no CUDA device is visible (torch.cuda.is_available() is False)")

import yaml
sys.path.insert(0, "benchmarks")
from synthetic import synthetic_dataset
from morl.config import train_settings
from morl.families import model_order, train

steps, config_path = int(sys.argv[1]), sys.argv[3]
fall = float(os.environ.get("FALL", "0.5"))
config = yaml.safe_load(Path(config_path).read_text())
print(f"device: {torch.cuda.get_device_name(0) if cuda else device}, torch {torch.__version__}, {steps} steps per model, hyperparameters of {config_path}")
print("| model | samples/s | peak GPU memory (MiB) | loss first -> last | falls |")
print("|---|---|---|---|---|")
failed = []
with tempfile.TemporaryDirectory() as tmp:
    data = synthetic_dataset(Path(tmp) / "synthetic.parquet")
    for name in model_order():
        hp = dict(train_settings(config, "MO-HalfCheetah-v2", name), steps=steps, checkpoint_every=10**9)
        if "warmup_steps" in hp:
            hp["warmup_steps"] = min(1000, steps // 4)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        curve = Path(tmp) / f"{name}.csv"
        summary = train(data, name, 0, hp, Path(tmp) / f"{name}.pt", curve_path=curve, device=device, progress=False)
        rows = list(csv.DictReader(curve.open()))
        first, last = float(rows[0]["loss"]), float(rows[-1]["loss"])
        falls = last < fall * first
        failed += [] if falls else [name]
        peak = f"{torch.cuda.max_memory_allocated() / 2**20:.0f}" if cuda else "n/a"
        print(f"| {name} | {summary['samples_per_s']:.0f} | {peak} | {first:.4f} -> {last:.4f} | {'yes' if falls else 'NO'} |", flush=True)
if failed:
    sys.exit(f"gpu_check: loss did not fall below {fall:g} of its first value for {', '.join(failed)}")
print(f"gpu_check: all models trained on {device} and their loss fell")

from morl.behavior import train_behavior
from morl.config import behavior_settings

behavior_steps = int(sys.argv[2])
hp = behavior_settings(config, "MO-HalfCheetah-v2")
random_steps = min(hp["start_steps"], behavior_steps)
with tempfile.TemporaryDirectory() as tmp:
    # Two runs on the same settings: the random phase alone, then the whole length; their
    # difference is the cost of the steps that train.
    head = train_behavior("MO-HalfCheetah-v2", dict(hp, total_steps=random_steps, checkpoint_every=0),
                          Path(tmp) / "head.pt", progress=False, hv_every=0, device=device)
    full = train_behavior("MO-HalfCheetah-v2", dict(hp, total_steps=behavior_steps, checkpoint_every=0),
                          Path(tmp) / "full.pt", progress=False, hv_every=0, device=device)
trained = full["steps"] - head["steps"]
rate = trained / max(full["wall_s"] - head["wall_s"], 1e-9)
print(f"behavior (MO-HalfCheetah-v2, settings of {config_path}) on {full['device']}: {trained} training env-steps, "
      f"{full['updates']} updates, {rate:.0f} env-steps/s -> 1M steps in about {1e6 / rate / 3600:.2f} h")
PYEOF
