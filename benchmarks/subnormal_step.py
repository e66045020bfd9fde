"""One Adam/AdamW update on a parameter whose optimiser state is subnormal, as a long fit leaves it
for units that stopped receiving gradient: torch's `foreach` and `fused` kernels, with IEEE
subnormals and with them flushed to zero (:func:`morl.cpu.flush_subnormals`), side by side in one
run, each in a fresh process (the floating-point mode is per thread and sticky).

    python benchmarks/subnormal_step.py [--size 512] [--steps 200] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys

CHILD = r"""
import json, sys, time, torch
size, steps, threads, kernel, flush = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
torch.set_num_threads(threads)
if flush == "flushed":
    from morl.cpu import flush_subnormals
    flush_subnormals()
p = torch.nn.Parameter(torch.randn(size, size))
opt = torch.optim.AdamW([p], lr=1e-4, **{kernel: True})
p.grad = torch.zeros_like(p)
opt.step()
state = opt.state[p]
best = float("inf")
for _ in range(3):
    state["exp_avg"].fill_(1e-40)  # subnormal in float32 (below 1.18e-38)
    state["exp_avg_sq"].fill_(1e-40)
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.step()
    best = min(best, (time.perf_counter() - t0) / steps)
print(json.dumps({"ms": 1e3 * best}))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=512, help="the parameter is size x size (PEDA's MLP layers: 512)")
    p.add_argument("--steps", type=int, default=200, help="updates per timing (the best of 3 timings is kept)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    import torch

    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} thread(s); "
          f"one AdamW update of a {args.size} x {args.size} parameter whose moments are subnormal\n")  # fmt: skip
    print("| kernel | subnormals | update (ms) | ratio to foreach with IEEE subnormals |")
    print("|---|---|---|---|")
    base = None
    for kernel in ("foreach", "fused"):
        for flush in ("IEEE", "flushed"):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.size), str(args.steps), str(args.threads), kernel, flush],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            ms = json.loads(out.stdout.strip().splitlines()[-1])["ms"]
            base = base or ms
            print(f"| {kernel} | {flush} | {ms:.3f} | {ms / base:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
