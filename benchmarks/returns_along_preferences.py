"""Each objective's return along the preference line, for a few models on complete and cut data.

Reads the evaluation files of a finished run (``<results>/<env>/<quality>-<entropy>[-<coverage>]/
<model>/seed*/eval.parquet``) of a two-objective task and draws one panel per coverage variant
(rows) and objective (columns): the return each model reaches at every grid preference ``w_1``,
the mean over seeds as a line and the seeds' range as a band. Preferences a variant held out are
shaded, and the complete data's front at each preference (``data_front_return``, what MODULI's
return deviation compares with) is the dashed line. It shows where along the preference line a
model follows the preference and where it stops doing so.

    python benchmarks/returns_along_preferences.py --results results/unseen --env MO-HalfCheetah-v2 \\
        --quality expert --models rvs-p,rvs-hn,rvs-pml --output docs/weight-conditioning.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from morl.envs import get_spec  # noqa: E402
from morl.families import colors, display_names  # noqa: E402


def runs(folder: Path) -> list[pl.DataFrame]:
    """The evaluation table of every seed under ``folder``, sorted by grid point."""
    files = sorted(folder.glob("seed*/eval.parquet"))
    if not files:
        raise SystemExit(f"{folder}: no seed*/eval.parquet")
    return [pl.read_parquet(f).sort("point") for f in files]


def spans(mask: np.ndarray, x: np.ndarray) -> list[tuple[float, float]]:
    """The runs of consecutive True entries of ``mask`` as (first x, last x)."""
    out, start = [], None
    for i, flag in enumerate(mask):
        if flag and start is None:
            start = i
        if not flag and start is not None:
            out.append((x[start], x[i - 1]))
            start = None
    if start is not None:
        out.append((x[start], x[-1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--env", required=True)
    ap.add_argument("--quality", default="expert")
    ap.add_argument("--entropy", default="high")
    ap.add_argument("--coverages", default="complete,shattered,narrow")
    ap.add_argument("--models", default="rvs-p,rvs-hn,rvs-pml")
    ap.add_argument("--output", type=Path, required=True)
    args = ap.parse_args()
    spec = get_spec(args.env)
    if spec.n_obj != 2:
        raise SystemExit(f"{args.env} has {spec.n_obj} objectives; this figure draws two-objective tasks")
    coverages, models = args.coverages.split(","), args.models.split(",")
    names, palette = display_names(), colors()
    fig, axes = plt.subplots(len(coverages), 2, figsize=(9, 2.6 * len(coverages)), squeeze=False, sharex=True)
    for row, coverage in enumerate(coverages):
        dataset = f"{args.quality}-{args.entropy}" + ("" if coverage == "complete" else f"-{coverage}")
        for model in models:
            tables = runs(args.results / args.env / dataset / model)
            x = np.stack(tables[0]["preference"].to_numpy())[:, 0]
            returns = np.stack([np.stack(t["return"].to_numpy()) for t in tables])  # (seeds, points, 2)
            for k in range(2):
                ax = axes[row, k]
                color = palette.get(model)
                ax.plot(x, returns[:, :, k].mean(0), color=color, lw=1.2, label=names.get(model, model))
                ax.fill_between(x, returns[:, :, k].min(0), returns[:, :, k].max(0), color=color, alpha=0.2, lw=0)
        first = tables[0]
        if "data_front_return" in first.columns:
            front = np.stack(first["data_front_return"].to_numpy())
            for k in range(2):
                axes[row, k].plot(x, front[:, k], "k--", lw=0.8, label="complete data's front")
        if "held_out" in first.columns:
            for lo, hi in spans(first["held_out"].to_numpy(), x):
                for k in range(2):
                    axes[row, k].axvspan(lo, hi, color="0.85", zorder=0, lw=0)
        for k in range(2):
            axes[row, k].set_title(f"{dataset}: objective {k + 1}", fontsize=9)
            axes[row, k].set_ylabel("return", fontsize=8)
            axes[row, k].tick_params(labelsize=7)
    for k in range(2):
        axes[-1, k].set_xlabel("preference $w_1$ (grey: held out)", fontsize=8)
    axes[0, 0].legend(fontsize=7, loc="best")
    fig.suptitle(f"{args.env}, {args.quality} {args.entropy}-entropy data", fontsize=10)
    fig.tight_layout()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
