"""Result tables and Pareto plots from evaluation files.

Reads every per-point evaluation file given, recomputes the metrics from the achieved returns,
and writes

* ``metrics.csv``: raw numbers, one row per (env, quality, entropy, model, seed);
* ``results.md``: HV and SP tables in the paper's layout (rows env x dataset, columns B and the
  six models, cells mean +- std over seeds in the paper's units), and the behavior front next to
  the trivial zero-action and random-action policies;
* one Pareto plot per env x dataset (PNG).

Missing cells are shown as "—", so the tables can be built while an experiment is running.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import numpy as np
import polars as pl

from morl.data import atomic_write
from morl.envs import ENV_SPECS, get_spec
from morl.evaluate import read_evaluation, summarize
from morl.metrics import pareto_front
from morl.models import DISPLAY_NAMES
from morl.progress import log

MODEL_ORDER = ("dt-p", "rvs-p", "bc-p", "dt", "rvs", "bc")
DISPLAY = {"B": "B", **DISPLAY_NAMES}
# Paper units (reference §5): HV and SP are reported divided by these.
HV_UNITS = {"MO-Ant-v2": 1e6, "MO-HalfCheetah-v2": 1e6, "MO-Walker2d-v2": 1e6, "MO-Hopper-v2": 1e7,
            "MO-Hopper-v3": 1e10, "MO-Swimmer-v2": 1e4}  # fmt: skip
SP_UNITS = {"MO-Ant-v2": 1e4, "MO-HalfCheetah-v2": 1e4, "MO-Walker2d-v2": 1e4, "MO-Hopper-v2": 1e5,
            "MO-Hopper-v3": 1e5, "MO-Swimmer-v2": 1.0}  # fmt: skip
MISSING = "—"


def _unit_label(x: float) -> str:
    return "1" if x == 1 else f"1e{int(round(np.log10(x)))}"


def collect_metrics(model_evals: Iterable[str | os.PathLike], behavior_evals: Iterable[str | os.PathLike]):
    """One row per evaluation: env, quality, entropy, model, seed, hv, sp, rd, eu, n_nondominated."""
    rows = []
    for path in model_evals:
        meta, arr = read_evaluation(path)
        s = summarize(arr["preference"], arr["return"])
        rows.append({"env": meta["env_id"], "quality": meta["quality"], "entropy": meta["entropy"],
                     "model": meta["model"], "seed": meta["train_seed"], **s, "file": str(path)})  # fmt: skip
    baselines = []
    for path in behavior_evals:
        meta, arr = read_evaluation(path)
        for policy in ("behavior", "zero", "random"):
            sel = arr["policy"] == policy
            s = summarize(arr["preference"][sel], arr["return"][sel])
            baselines.append({"env": meta["env_id"], "policy": policy, **s, "file": str(path)})
    schema = {"env": pl.String, "quality": pl.String, "entropy": pl.String, "model": pl.String, "seed": pl.Int64,
              "hv": pl.Float64, "sp": pl.Float64, "rd": pl.Float64, "eu": pl.Float64,
              "n_nondominated": pl.Int64, "n_points": pl.Int64, "file": pl.String}  # fmt: skip
    bschema = {"env": pl.String, "policy": pl.String, **{k: schema[k] for k in list(schema)[5:]}}
    return pl.DataFrame(rows, schema=schema), pl.DataFrame(baselines, schema=bschema)


def _cell(values: list[float], unit: float) -> str:
    if not values:
        return MISSING
    v = np.asarray(values) / unit
    if len(v) == 1:
        return f"{v[0]:.2f}"
    return f"{v.mean():.2f} ± {v.std():.2f}"


def metric_table(metrics: pl.DataFrame, baselines: pl.DataFrame, datasets, metric: str, units: dict) -> str:
    """A Markdown table of ``metric`` (hv or sp): rows env x dataset, columns B and the models."""
    models = [m for m in MODEL_ORDER if m in set(metrics["model"].to_list())] or list(MODEL_ORDER)
    header = ["env", "dataset", "unit", "B", *[DISPLAY[m] for m in models]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    any_missing = False
    for env, quality, entropy in datasets:
        unit = units.get(env, 1.0)
        b = baselines.filter((pl.col("env") == env) & (pl.col("policy") == "behavior"))[metric].to_list()
        cells = [_cell(b, unit)]
        for m in models:
            sel = metrics.filter((pl.col("env") == env) & (pl.col("quality") == quality)
                                 & (pl.col("entropy") == entropy) & (pl.col("model") == m))  # fmt: skip
            cells.append(_cell(sel.sort("seed")[metric].to_list(), unit))
        any_missing |= MISSING in cells
        lines.append(f"| {env} | {quality} {entropy}-H | ×{_unit_label(unit)} | " + " | ".join(cells) + " |")
    if any_missing:
        lines.append("\n— : not evaluated yet.")
    return "\n".join(lines)


def baseline_table(baselines: pl.DataFrame) -> str:
    lines = ["| env | B (behavior) | zero actions | random actions | B / better trivial |", "|---|---|---|---|---|"]
    for env in sorted(set(baselines["env"].to_list())):
        hv = {r["policy"]: r["hv"] for r in baselines.filter(pl.col("env") == env).iter_rows(named=True)}
        unit = HV_UNITS.get(env, 1.0)
        ratio = hv["behavior"] / max(hv["zero"], hv["random"], 1e-12)
        lines.append(f"| {env} | {hv['behavior'] / unit:.3f} | {hv['zero'] / unit:.3f} | {hv['random'] / unit:.3f}"
                     f" | {ratio:.2f}× |")  # fmt: skip
    return "\n".join(lines) + "\n\nHV in the paper's units (×1e6 for HalfCheetah, ×1e10 for Hopper-v3)."


def pareto_plot(path: Path, title: str, model_points: dict[str, list[np.ndarray]], behavior: np.ndarray | None,
                objectives: tuple[str, ...] | None = None):  # fmt: skip
    """Scatter every model's achieved returns (all seeds) and draw each one's non-dominated front."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_obj = (behavior if behavior is not None else next(iter(model_points.values()))[0]).shape[1]
    pairs = [(0, 1)] if n_obj == 2 else [(0, 1), (0, 2), (1, 2)]
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.5 * len(pairs), 4.5), squeeze=False)
    colors = plt.get_cmap("tab10")
    series = ([("B", [behavior])] if behavior is not None else []) + list(model_points.items())
    for ax, (i, j) in zip(axes[0], pairs):
        for k, (name, runs) in enumerate(series):
            pts = np.concatenate(runs)
            color = "black" if name == "B" else colors(k)
            ax.scatter(pts[:, i], pts[:, j], s=6, alpha=0.25, color=color)
            front = pareto_front(pts)
            front = front[np.argsort(front[:, i])]
            ax.plot(front[:, i], front[:, j], "-o" if n_obj == 2 else "o", ms=3, lw=1.2, color=color,
                    label=DISPLAY.get(name, name))  # fmt: skip
        names = objectives or tuple(f"objective {k}" for k in range(n_obj))
        ax.set_xlabel(f"return: {names[i]}")
        ax.set_ylabel(f"return: {names[j]}")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


def aggregate(
    model_evals: list[str | os.PathLike],
    behavior_evals: list[str | os.PathLike],
    out_dir: str | os.PathLike,
    datasets: list[tuple[str, str, str]] | None = None,
) -> dict[str, Path]:
    """Write ``metrics.csv``, ``results.md`` and the Pareto plots into ``out_dir``; return their paths."""
    out_dir = Path(out_dir)
    metrics, baselines = collect_metrics(model_evals, behavior_evals)
    if datasets is None:
        datasets = sorted(set(metrics.select("env", "quality", "entropy").iter_rows()))
    metrics_path = out_dir / "metrics.csv"
    atomic_write(metrics_path, lambda tmp: metrics.drop("file").write_csv(tmp))
    if len(baselines):
        atomic_write(out_dir / "baselines.csv", lambda tmp: baselines.drop("file").write_csv(tmp))
    md = [
        "# Results",
        "",
        "## Hypervolume (higher is better)",
        "",
        metric_table(metrics, baselines, datasets, "hv", HV_UNITS),
        "",
        "## Sparsity (lower is better)",
        "",
        metric_table(metrics, baselines, datasets, "sp", SP_UNITS),
        "",
        "Cells: mean ± std (population std) over training seeds, divided by the unit. "
        "B: the behavior policy evaluated on the same preference grid.",
    ]
    if len(baselines):
        md += ["", "## Behavior front against trivial policies (HV)", "", baseline_table(baselines)]
    results_path = out_dir / "results.md"
    atomic_write(results_path, lambda tmp: Path(tmp).write_text("\n".join(md) + "\n"))

    behavior_points = {}
    for path in behavior_evals:
        meta, arr = read_evaluation(path)
        behavior_points[meta["env_id"]] = arr["return"][arr["policy"] == "behavior"]
    per_cell: dict[tuple, dict[str, list[np.ndarray]]] = {}
    for row in metrics.iter_rows(named=True):
        _, arr = read_evaluation(row["file"])
        per_cell.setdefault((row["env"], row["quality"], row["entropy"]), {}).setdefault(row["model"], []).append(
            arr["return"]
        )
    plots = {}
    for env, quality, entropy in datasets:
        cell = per_cell.get((env, quality, entropy), {})
        cell = {m: cell[m] for m in MODEL_ORDER if m in cell}
        if not cell and env not in behavior_points:
            continue
        path = out_dir / "plots" / f"pareto_{env}_{quality}-{entropy}.png"
        pareto_plot(path, f"{env}, {quality} {entropy}-entropy data", cell, behavior_points.get(env),
                    objectives=get_spec(env).objectives if env in ENV_SPECS else None)  # fmt: skip
        plots[f"{env}/{quality}-{entropy}"] = path
    log.info("wrote %s, %s and %d plots", results_path, metrics_path, len(plots))
    return {"results": results_path, "metrics": metrics_path, **{f"plot:{k}": v for k, v in plots.items()}}
