"""HV along training: has a model converged at the budget it was trained for?

Training keeps snapshots of the model at the steps the config lists under ``evaluate.at_steps``
(:func:`morl.trainer.train`'s ``keep``); each is evaluated on the same preference grid, with the
same seed, as the final checkpoint. This module reads those evaluations (and the final ones, whose
step is the run's budget) and writes

* ``convergence.csv``: one row per run and step: env, quality, entropy, model, seed, step, hv,
  hv_over_b (B: the HV of the dataset's own front, from its card) and full_length (the share of
  the grid's episodes that ran to the task's step limit, the share that did not fall);
* ``convergence.md``: the same as a table to read, one line per dataset row and model: HV / B
  (HV for a row without B) at every step, the mean over the seeds evaluated there; the final
  checkpoints' mean [min, max] and their share of full-length episodes; and the paper's HV / B of
  the model where it publishes one (:func:`morl.paper.published_fraction`);
* ``plots/convergence/<env>_<quality>-<entropy>.{png,pdf}``: per dataset row, HV / B against the
  training step on a logarithmic axis, one line per model (the mean over seeds, each seed faint).

A run's rows must come from one training run: the evaluations of one (env, dataset, model, seed)
must name the same dataset, settings and evaluation grid, and differ only in their step; two
evaluations of one run at one step are refused, as is an evaluation that does not record its step
(written before evaluations recorded it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from morl.aggregate import read_data_fronts
from morl.data import atomic_write
from morl.envs import get_spec
from morl.errors import InputError
from morl.evaluate import read_evaluation, summarize
from morl.paper import published_fraction
from morl.plots import save_figure
from morl.tables import display_name, model_order, sort_datasets

SCHEMA = {
    "env": pl.String,
    "quality": pl.String,
    "entropy": pl.String,
    "model": pl.String,
    "seed": pl.Int64,
    "step": pl.Int64,
    "hv": pl.Float64,
    "hv_over_b": pl.Float64,
    "full_length": pl.Float64,
}

# What every evaluation of one run along its training must share (its step apart).
SHARED = ("dataset_sha256", "train_settings", "eval_seed", "episodes", "returns_to_go", "statistics_from")


def convergence_rows(evaluations: Sequence[str | os.PathLike], data_cards: Sequence[str | os.PathLike]) -> pl.DataFrame:
    """The rows of ``convergence.csv`` from evaluation files of snapshots and final checkpoints."""
    data_hv = read_data_fronts(data_cards)
    rows, seen, shared = [], {}, {}
    for path in evaluations:
        meta, arr = read_evaluation(path)
        step = meta.get("train_steps")
        if isinstance(step, bool) or not isinstance(step, int):
            raise InputError(
                f"{path}: the evaluation does not record the step its checkpoint was taken at (train_steps); "
                "evaluate the checkpoint again with this version"
            )
        entropy = meta.get("entropy")
        if meta.get("coverage"):
            entropy = f"{entropy}-{meta['coverage']}"
        run = (meta["env_id"], meta["quality"], entropy, meta["model"], meta["train_seed"])
        if (run, step) in seen:
            raise InputError(
                f"{path}: {'/'.join(map(str, run))} at step {step} is evaluated twice (also in {seen[run, step]})"
            )
        seen[run, step] = str(path)
        facts = {k: meta.get(k) for k in SHARED} | {"points": len(arr["preference"])}
        if run in shared and shared[run][0] != facts:
            other = shared[run][1]
            keys = [k for k in facts if facts[k] != shared[run][0].get(k)]
            raise InputError(
                f"{path}: not the same training run as {other} ({', '.join(keys)} differ): the evaluations of "
                "one run along its training may differ in their step only"
            )
        shared.setdefault(run, (facts, str(path)))
        hv = summarize(arr["preference"], arr["return"])["hv"]
        b = data_hv.get(run[:3])
        limit = get_spec(run[0]).max_episode_steps
        rows.append(
            {
                "env": run[0],
                "quality": run[1],
                "entropy": run[2],
                "model": run[3],
                "seed": run[4],
                "step": step,
                "hv": hv,
                "hv_over_b": hv / b if b else None,
                "full_length": float(np.mean(arr["length"] >= limit)),
            }
        )
    if not rows:
        raise InputError("no evaluation files given: there is nothing to tabulate along training")
    frame = pl.DataFrame(rows, schema=SCHEMA)
    row_of = {d: i for i, d in enumerate(sort_datasets(frame.select("env", "quality", "entropy").unique().iter_rows()))}
    order = {m: i for i, m in enumerate(model_order(frame["model"].unique().to_list()))}
    return (
        frame.with_columns(
            pl.struct("env", "quality", "entropy")
            .map_elements(lambda r: row_of[(r["env"], r["quality"], r["entropy"])], return_dtype=pl.Int64)
            .alias("_row"),
            pl.col("model").replace_strict(order, return_dtype=pl.Int64).alias("_column"),
        )
        .sort("_row", "_column", "seed", "step")
        .drop("_row", "_column")
    )


def convergence_table(frame: pl.DataFrame) -> str:
    """``convergence.md``: the rows of :func:`convergence_rows` as one markdown line per dataset row
    and model (see the module's docstring)."""
    steps = sorted(frame["step"].unique().to_list())
    head = ["row", "model", "seeds", *(f"{s:,}" for s in steps), "final (step)", "final full length", "paper"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = ["env", "quality", "entropy", "model"]
    for (env, quality, entropy, model), runs in frame.group_by(keys, maintain_order=True):
        has_b = runs["hv_over_b"].null_count() == 0
        column = "hv_over_b" if has_b else "hv"

        def fmt(x: float, has_b: bool = has_b) -> str:
            return f"{x:.2f}" if has_b else f"{x:.3g}"

        by_step = runs.group_by("step").agg(pl.col(column).mean(), pl.len().alias("n"))
        cells = dict(zip(by_step["step"].to_list(), by_step[column].to_list()))
        final = runs.sort("step").group_by("seed", maintain_order=True).last()
        final_steps = sorted(set(final["step"].to_list()))
        paper = published_fraction(env, quality, entropy, model) if has_b else None
        line = [
            f"{env} {quality}-{entropy}",
            display_name(model),
            str(final.height),
            *(fmt(cells[s]) if s in cells else "" for s in steps),
            f"**{fmt(final[column].mean())}** [{fmt(final[column].min())}, {fmt(final[column].max())}] "
            f"({', '.join(f'{s:,}' for s in final_steps)})",
            f"{final['full_length'].mean():.2f}",
            "" if paper is None else f"{paper:.2f}",
        ]
        lines.append("| " + " | ".join(line) + " |")
    return "\n".join(lines) + "\n"


def plot_convergence(frame: pl.DataFrame, plot_dir: str | os.PathLike) -> dict[str, Path]:
    """One figure per dataset row: HV / B (or HV, for a row without B) against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_dir = Path(plot_dir)
    plot_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for (env, quality, entropy), part in frame.group_by(["env", "quality", "entropy"], maintain_order=True):
        has_b = part["hv_over_b"].null_count() == 0
        column = "hv_over_b" if has_b else "hv"
        fig, ax = plt.subplots(figsize=(6.0, 4.0))
        for i, (model,) in enumerate(part.select("model").unique(maintain_order=True).iter_rows()):
            runs = part.filter(pl.col("model") == model)
            color = f"C{i % 10}"
            for (_,), seed_rows in runs.group_by(["seed"], maintain_order=True):
                ax.plot(seed_rows["step"], seed_rows[column], color=color, alpha=0.25, linewidth=0.8)
            mean = runs.group_by("step").agg(pl.col(column).mean()).sort("step")
            ax.plot(mean["step"], mean[column], color=color, marker="o", markersize=3, label=display_name(model))
        ax.set_xscale("log")
        ax.set_xlabel("training step")
        ax.set_ylabel("HV / B" if has_b else "HV")
        ax.set_title(f"{env} {quality}-{entropy}: HV along training")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        png, _ = save_figure(fig, plot_dir / f"{env}_{quality}-{entropy}")
        out[f"convergence:{env}_{quality}-{entropy}"] = png
    return out


def write_convergence(
    evaluations: Sequence[str | os.PathLike],
    data_cards: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    plots: bool = True,
) -> dict[str, Path]:
    """``convergence.csv``, ``convergence.md`` and, with ``plots``, the figures into ``out_dir``;
    returns their paths."""
    frame = convergence_rows(evaluations, data_cards)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path, table = out_dir / "convergence.csv", out_dir / "convergence.md"
    atomic_write(path, lambda tmp: frame.write_csv(tmp))
    atomic_write(table, lambda tmp: Path(tmp).write_text(convergence_table(frame), encoding="utf-8"))
    out = {"convergence": path, "convergence_table": table}
    if plots:
        out.update(plot_convergence(frame, out_dir / "plots" / "convergence"))
    return out
