"""HV~ of PGMORL populations against env steps: one panel per task, from the files' own history.

A PGMORL file (final ``<env-id>.pt`` or a run's ``.partial``) records, after every generation, the
iteration reached, the env steps taken by all lineages together, and the hypervolume of its
archive's objective vectors (each policy's one deterministic training-time evaluation episode,
reference point 0): the population's own progress signal (``HV~``). The published B of the task
(PEDA paper, expert High-H) is drawn as a line; the protocol's B of a shipped file (501/325-point
grid, nearest-policy rule) is ``morl behavior-front``'s number, not this curve.

    python benchmarks/behavior_curves.py behaviors/*.pt --output behaviors/hv_curves.png
"""

from __future__ import annotations

import argparse
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from morl.paper import HV_UNITS, published_hv  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    runs = []
    for path in args.files:
        st = torch.load(path, map_location="cpu", weights_only=True)
        if "history" not in st or not str(st.get("kind", "")).startswith("morl-behavior-population"):
            print(f"{path}: not a PGMORL population; skipped")
            continue
        runs.append((st["env_id"], st["history"]))
    if not runs:
        raise SystemExit("behavior_curves: none of the files is a PGMORL population; nothing to draw")
    cols = min(3, len(runs))
    rows = math.ceil(len(runs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, (env_id, hist) in zip(axes.flat, runs):
        steps = [h[1] / 1e6 for h in hist]
        ax.plot(steps, [h[2] for h in hist], marker=".", label="archive HV~")
        pub = published_hv(env_id, "expert", "high", "B")
        if pub:
            ax.axhline(pub * HV_UNITS[env_id], color="k", ls="--", lw=1, label="published B")
        ax.set_title(env_id)
        ax.set_xlabel("env steps (millions, all lineages)")
        ax.set_ylabel("hypervolume")
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(runs) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
