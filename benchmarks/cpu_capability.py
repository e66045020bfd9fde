"""Does the CPU's instruction set change the numbers? Same code, same seed, same thread count.

PyTorch picks its CPU kernels by the instruction set the processor offers (AVX-512 on recent Intel
Xeons, AVX2 on AMD EPYC Zen 3), and the kernels sum floats in different orders. This script trains
one small behavior policy and one MODT(P) on its data, each in a fresh process, under torch's
default kernels and under kernels capped at AVX2 (``ATEN_CPU_CAPABILITY``, MKL's
``MKL_ENABLE_INSTRUCTIONS``), twice each, and prints the SHA-256 of every checkpoint with the last
training loss. Every run works in the same folder, emptied first (datasets and checkpoints record
the paths of their inputs). Equal hashes within a setting show a run repeats on
one machine; unequal hashes across settings show what moving to another CPU family does.

    python benchmarks/cpu_capability.py [--steps 300] [--behavior-steps 3000] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, torch
from morl.behavior import train_behavior
from morl.collect import collect_dataset
from morl.config import load_config, train_settings
from morl.data import file_sha256
from morl.families import train

torch.set_num_threads(1)
out, steps, behavior_steps = ".", int(sys.argv[2]), int(sys.argv[3])  # relative paths: files record them
config = load_config(sys.argv[4])
env = "MO-HalfCheetah-v2"
b = dict(config["behavior"], total_steps=behavior_steps, start_steps=behavior_steps // 3)
train_behavior(env, b, f"{out}/policy.pt", progress=False, hv_every=0, device="cpu")
collect_dataset(f"{out}/policy.pt", "expert", "high", 8, f"{out}/data.parquet", batch_size=4, seed=0, progress=False)
hp = dict(train_settings(config, env, "dt-p"), steps=steps, checkpoint_every=steps,
          statistics_from="dataset")
summary = train(f"{out}/data.parquet", "dt-p", 0, hp, f"{out}/model.pt", curve_path=f"{out}/curve.csv",
                progress=False, device="cpu")
last = open(f"{out}/curve.csv").read().strip().splitlines()[-1]
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(),
                  "behavior_sha256": file_sha256(f"{out}/policy.pt"),
                  "data_sha256": file_sha256(f"{out}/data.parquet"),
                  "model_sha256": file_sha256(f"{out}/model.pt"), "last_curve_row": last}))
"""

SETTINGS = {
    "default": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}


def run(env_extra: dict[str, str], steps: int, behavior_steps: int, base: Path) -> dict:
    # One fixed folder, emptied before each run: a model checkpoint records its dataset's absolute path.
    out = base / "run"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")}
    env.update(env_extra, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", CHILD, str(out), str(steps), str(behavior_steps),
                          str(ROOT / "configs/smoke.yaml")], env=env, capture_output=True, text=True,
                         cwd=out)  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300, help="MODT(P) training steps")
    p.add_argument("--behavior-steps", type=int, default=3000, help="behavior policy environment steps")
    p.add_argument("--runs", type=int, default=2, help="runs per setting")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "morl-cpu-capability")
    args = p.parse_args(argv)
    print(
        "| kernels | run | torch capability | behavior policy sha256 | dataset sha256 | MODT(P) sha256 | last curve row |"
    )
    print("|---|---:|---|---|---|---|---|")
    for name, extra in SETTINGS.items():
        for i in range(1, args.runs + 1):
            r = run(extra, args.steps, args.behavior_steps, args.workdir)
            print(f"| {name} | {i} | {r['capability']} | {r['behavior_sha256'][:12]} | {r['data_sha256'][:12]} | "
                  f"{r['model_sha256'][:12]} | `{r['last_curve_row']}` |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
