"""The result figures (matplotlib, written as PNG and PDF).

* :func:`pareto_figure` - every model's achieved return vectors on one env x dataset, each
  model's non-dominated points highlighted, and B's front;
* :func:`preference_figure` - target preference against achieved return ratio, per model, with
  the diagonal a perfectly preference-following agent would sit on;
* :func:`hv_bars_figure` - HV by dataset quality and preference entropy, grouped bars per model,
  error bars over seeds;
* :func:`curves_figure` - training loss against optimiser step, per model (mean over seeds,
  shaded min-max).

Each ``*_figure`` function returns the figure; :func:`save_figure` writes it atomically. Every
drawn series has a legend entry, so :func:`legend_labels` says what a figure shows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from morl.data import atomic_write
from morl.families import colors
from morl.metrics import pareto_front
from morl.tables import display_name, model_order

OBJECTIVE_COLORS = ("tab:blue", "tab:red", "tab:green", "tab:purple")


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, stem: str | os.PathLike, dpi: int = 110) -> tuple[Path, Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` (each atomically) and close the figure."""
    stem = Path(stem)
    png, pdf = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    try:
        atomic_write(png, lambda tmp: fig.savefig(tmp, dpi=dpi, format="png"))
        # no creation date: the same figure gives the same bytes, whenever and from whichever files it is drawn
        atomic_write(pdf, lambda tmp: fig.savefig(tmp, format="pdf", metadata={"CreationDate": None}))
    finally:
        pyplot().close(fig)
    return png, pdf


def legend_labels(fig) -> list[list[str]]:
    """The legend entries of every axes that has a legend (or of the figure legend)."""
    out = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes if ax.get_legend() is not None]
    out += [[t.get_text() for t in leg.get_texts()] for leg in fig.legends]
    return out


def _objective_pairs(n_obj: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n_obj) for j in range(i + 1, n_obj)]


def pareto_figure(
    title: str,
    model_points: Mapping[str, Sequence[np.ndarray]],
    behavior: np.ndarray | None,
    objectives: Sequence[str] | None = None,
):
    """Scatter of every model's achieved returns (all seeds; faint), its non-dominated points
    (over all its seeds; large, outlined, joined for two objectives) and the behavior policy's
    front on the same grid (black; ``behavior``).

    With three objectives there is one panel per pair of objectives; the highlighted points are
    non-dominated in all three. Legend: the behavior policy (if given), then one entry per model.
    """
    plt = pyplot()
    some = behavior if behavior is not None else next(pts for runs in model_points.values() for pts in runs)
    n_obj = some.shape[1]
    pairs = _objective_pairs(n_obj)
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.2 * len(pairs) + 1.2, 4.4), squeeze=False)
    names = tuple(objectives) if objectives else tuple(f"objective {k}" for k in range(n_obj))
    series = ([("B", [behavior])] if behavior is not None else []) + [(m, list(r)) for m, r in model_points.items()]
    for ax, (i, j) in zip(axes[0], pairs):
        for name, runs in series:
            pts = np.concatenate(runs)
            color = colors().get(name, "gray")
            front = pareto_front(pts)
            front = front[np.argsort(front[:, i])]
            ax.scatter(pts[:, i], pts[:, j], s=7, alpha=0.25, color=color, linewidths=0)
            shown = "behavior policy" if name == "B" else display_name(name)
            style = dict(color=color, label=f"{shown} ({len(front)} non-dominated)")
            if name == "B":
                ax.plot(
                    front[:, i], front[:, j], "-" if n_obj == 2 else "", marker="s", ms=4, lw=1.6, zorder=3, **style
                )
            else:
                ax.plot(
                    front[:, i],
                    front[:, j],
                    "-" if n_obj == 2 else "",
                    marker="o",
                    ms=6,
                    lw=1.0,
                    mec="black",
                    mew=0.6,
                    zorder=4,
                    **style,
                )
        ax.set_xlabel(f"return: {names[i]}")
        ax.set_ylabel(f"return: {names[j]}")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def return_ratio(returns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Achieved return ratio ``R / sum(R)`` of the points whose return sum is positive, and that mask."""
    returns = np.asarray(returns, np.float64)
    total = returns.sum(axis=1)
    ok = total > 0
    return returns[ok] / total[ok, None], ok


def preference_figure(
    title: str,
    model_runs: Mapping[str, Sequence[tuple[np.ndarray, np.ndarray]]],
    objectives: Sequence[str] | None = None,
):
    """One panel per model: for each objective k, the target preference w_k (x) against the
    achieved return ratio R_k / sum(R) (y), all seeds pooled, with the diagonal y = x.

    ``model_runs[model]`` holds (preferences, returns) of each seed. Points whose returns do not
    sum to a positive number have no ratio and are left out (counted in the panel title).
    Each panel's legend has one entry per objective shown: all of them for three or more
    objectives, the first for two (the second is its mirror image, w_2 = 1 - w_1).
    """
    plt = pyplot()
    models = list(model_runs)
    ncols = min(3, max(1, len(models)))
    nrows = int(np.ceil(len(models) / ncols)) or 1
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.4 * nrows), squeeze=False)
    for ax in axes.flat[len(models) :]:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models):
        prefs = np.concatenate([w for w, _ in model_runs[model]])
        rets = np.concatenate([r for _, r in model_runs[model]])
        ratio, ok = return_ratio(rets)
        w = prefs[ok]
        n_obj = prefs.shape[1]
        names = tuple(objectives) if objectives else tuple(f"objective {k}" for k in range(n_obj))
        ax.plot([0, 1], [0, 1], "--", color="gray", lw=1, label="_diagonal")
        # with two objectives the second point is the first mirrored through (0.5, 0.5): show one
        for k in range(1 if n_obj == 2 else n_obj):
            ax.scatter(
                w[:, k],
                ratio[:, k],
                s=10,
                alpha=0.6,
                color=OBJECTIVE_COLORS[k % len(OBJECTIVE_COLORS)],
                linewidths=0,
                label=names[k],
            )
        deviation = float(np.mean(np.linalg.norm(ratio - w, axis=1))) if len(w) else float("nan")
        dropped = int((~ok).sum())
        ax.set_title(
            f"{display_name(model)}  ratio dev. {deviation:.3f}" + (f"  ({dropped} pts w/o ratio)" if dropped else ""),
            fontsize=9,
        )
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_aspect("equal")
        ax.set_xlabel("target preference $w_k$", fontsize=8)
        ax.set_ylabel("achieved ratio $R_k / \\sum R$", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def hv_bars_figure(title: str, stats: pl.DataFrame, unit_label: str):
    """Grouped bars of mean HV (paper units): one panel per quality, one group per entropy level,
    one bar per column (B, then the models), error bars = std over seeds.

    ``stats`` has columns quality, entropy, model, mean, std, n (one row per cell that exists).
    The figure legend has one entry per column.
    """
    from morl.preferences import ENTROPY_LEVELS
    from morl.vocabulary import QUALITIES

    plt = pyplot()
    qualities = [q for q in QUALITIES if q in set(stats["quality"].to_list())]
    entropies = [h for h in ENTROPY_LEVELS if h in set(stats["entropy"].to_list())]
    present = set(stats["model"].to_list())
    columns = ["B", *model_order(present - {"B"})] if "B" in present else model_order(present)
    cell = {(r["quality"], r["entropy"], r["model"]): r for r in stats.iter_rows(named=True)}
    panel_width = 1.0 + 0.32 * len(columns) * len(entropies)
    fig, axes = plt.subplots(
        1, len(qualities), figsize=(2.2 + panel_width * len(qualities), 4.0), squeeze=False, sharey=True
    )
    width = 0.8 / max(1, len(columns))
    x = np.arange(len(entropies))
    handles = {}
    for ax, q in zip(axes[0], qualities):
        for k, m in enumerate(columns):
            rows = [cell.get((q, h, m)) for h in entropies]
            heights = [r["mean"] if r else np.nan for r in rows]
            errs = [r["std"] if r and r["n"] > 1 else 0.0 for r in rows]
            bars = ax.bar(
                x - 0.4 + width * (k + 0.5),
                heights,
                width,
                yerr=errs,
                capsize=2,
                color=colors().get(m, "gray"),
                alpha=0.55 if m == "B" else 0.9,
                hatch="//" if m == "B" else None,
                edgecolor="black",
                linewidth=0.4,
                error_kw={"elinewidth": 0.8},
                label=display_name(m),
            )
            handles.setdefault(m, bars)
        ax.set_xticks(x, [f"{h}-H" for h in entropies])
        ax.set_title(f"{q} data", fontsize=10)
        ax.set_xlabel("preference entropy of the dataset")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(f"HV (×{unit_label})")
    fig.legend([handles[m] for m in columns], [display_name(m) for m in columns], fontsize=8, loc="center right")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1 - 1.3 / fig.get_figwidth(), 1))
    return fig


def curves_figure(title: str, curves: Mapping[str, Sequence[pl.DataFrame]]):
    """Training loss against optimiser step, one line per model: the mean over seeds, shaded
    between the lowest and highest seed. ``curves[model]`` holds each seed's curve (step, loss, lr).
    Legend: one entry per model."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.4, 4.2))
    for m in model_order(curves):
        runs = [c.select(pl.col("step").cast(pl.Int64), pl.col("loss").cast(pl.Float64)) for c in curves[m] if len(c)]
        if not runs:
            continue
        agg = (
            pl.concat(runs)
            .group_by("step")
            .agg(
                pl.col("loss").mean().alias("mean"), pl.col("loss").min().alias("lo"), pl.col("loss").max().alias("hi")
            )
            .sort("step")
        )
        step = agg["step"].to_numpy()
        color = colors().get(m, "gray")
        ax.plot(
            step,
            agg["mean"].to_numpy(),
            color=color,
            lw=1.4,
            label=f"{display_name(m)} ({len(runs)} seed{'s' if len(runs) > 1 else ''})",
        )
        if len(runs) > 1:
            ax.fill_between(step, agg["lo"].to_numpy(), agg["hi"].to_numpy(), color=color, alpha=0.2, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("training loss (action MSE, mean per curve interval)")
    ax.grid(alpha=0.3, which="both")
    if ax.lines:
        ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def _interval_rows(ax, frame: pl.DataFrame, xlabel: str) -> None:
    """Each model of ``frame`` (model, iqm, ci_low, ci_high) as a point with its interval as a bar,
    in table order from the top, with a dashed line at 1."""
    models = model_order(frame["model"].to_list())
    row = {r["model"]: r for r in frame.iter_rows(named=True)}
    for k, m in enumerate(reversed(models)):
        r = row[m]
        ax.plot(
            [r["ci_low"], r["ci_high"]], [k, k], color=colors().get(m, "gray"), lw=6, alpha=0.5, solid_capstyle="butt"
        )
        ax.plot([r["iqm"]], [k], "|", color="black", ms=14, mew=2)
    ax.set_yticks(range(len(models)), [display_name(m) for m in reversed(models)])
    ax.axvline(1.0, color="gray", ls="--", lw=1)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)


def iqm_figure(iqm: pl.DataFrame):
    """Each model's IQM of HV / B as a point with its 95% interval as a bar (``iqm``: the frame of
    :func:`morl.intervals.iqm_table`: model, iqm, ci_low, ci_high, n_rows, n_seeds)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 0.9 + 0.42 * iqm["model"].n_unique()))
    _interval_rows(ax, iqm, "IQM of HV / B (bar: 95% stratified-bootstrap interval)")
    first = iqm.row(0, named=True)
    ax.set_title(f"Interquartile mean over {first['n_rows']} datasets × {first['n_seeds']} seeds", fontsize=10)
    fig.tight_layout()
    return fig


def generalisation_figure(frame: pl.DataFrame):
    """One panel per coverage (``frame``: the frame of :func:`morl.generalisation.generalisation_iqm_table`):
    for each model, the IQM of HV / B at the held-out preferences with its 95% interval, trained on
    the complete data (gray, upper) and on the variant (the model's color, lower)."""
    plt = pyplot()
    kinds = list(dict.fromkeys(frame["coverage"].to_list()))
    models = model_order(frame["model"].unique().to_list())
    fig, axes = plt.subplots(
        1, len(kinds), figsize=(4.2 * len(kinds), 1.2 + 0.55 * len(models)), sharey=True, squeeze=False
    )
    for ax, kind in zip(axes[0], kinds, strict=True):
        part = frame.filter(pl.col("coverage") == kind)
        for k, m in enumerate(reversed(models)):
            for data, dy, color in (("complete", 0.17, "gray"), ("variant", -0.17, colors().get(m, "gray"))):
                r = part.filter((pl.col("model") == m) & (pl.col("data") == data))
                if not len(r):
                    continue
                ax.plot(
                    [r["ci_low"][0], r["ci_high"][0]],
                    [k + dy, k + dy],
                    color=color,
                    lw=5,
                    alpha=0.6,
                    solid_capstyle="butt",
                )
                ax.plot([r["iqm"][0]], [k + dy], "|", color="black", ms=10, mew=2)
        ax.set_yticks(range(len(models)), [display_name(m) for m in reversed(models)])
        ax.set_xlabel("held-out HV / B (gray: complete data; color: variant)")
        ax.set_title(f"{kind}: IQM over {part['n_rows'][0]} rows × {part['n_seeds'][0]} seeds", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def improvement_figure(improvement: pl.DataFrame):
    """The probability-of-improvement matrix P(row > column) as a heat map, each cell labelled with
    its value and 95% interval (``improvement``: model, other, p, ci_low, ci_high)."""
    plt = pyplot()
    models = model_order(set(improvement["model"].to_list()) | set(improvement["other"].to_list()))
    index = {m: i for i, m in enumerate(models)}
    grid = np.full((len(models), len(models)), np.nan)
    labels = {}
    for r in improvement.iter_rows(named=True):
        i, j = index[r["model"]], index[r["other"]]
        grid[i, j] = r["p"]
        labels[(i, j)] = f"{r['p']:.2f}\n[{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
    size = 1.2 + 0.95 * len(models)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    image = ax.imshow(grid, cmap="RdBu", vmin=0.0, vmax=1.0)
    for (i, j), text in labels.items():
        ax.text(j, i, text, ha="center", va="center", fontsize=7)
    names = [display_name(m) for m in models]
    ax.set_xticks(range(len(models)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(models)), names)
    ax.set_xlabel("Y")
    ax.set_ylabel("X")
    ax.set_title("P(X > Y) of HV / B, with 95% intervals", fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    return fig
