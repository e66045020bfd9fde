"""Weight-conditioned agents against input-conditioned ones at held-out preferences.

Reads the ``metrics.csv`` of an unseen-preference run (``configs/unseen.yaml``: the aggregate rule's
tables, or ``morl merge-slices`` of its slices) and compares MORvS-HN and MORvS-PML with
MORvS(P) and BC(P) on the coverage variants (narrow, shattered and both), where each variant row
holds the held-out preferences the variant's data lacks:

* HV / B at the held-out preferences, of the runs trained on the variant and of the same models
  and seeds trained on the complete data: interquartile mean over rows and seeds with a
  stratified-bootstrap 95% interval (``morl.stats.iqm_intervals``);
* the probability that a run of MORvS-HN (MORvS-PML) beats a run of MORvS(P) on a random row, with
  its interval (``morl.stats.probability_of_improvement``): the paired view the IQMs' overlap
  may hide;
* EUM over the whole grid and MODULI's RD at the held-out preferences, each divided per row by
  MORvS(P)'s mean over seeds on that row (EUM above 1 and RD below 1 are better than MORvS(P)),
  IQM with intervals.

* with ``--runs`` (the run's slices folder, or its results folder): each run's training loss at
  the end (the mean of the last five logged values of its ``curve.csv``), divided per row by
  MORvS(P)'s mean: whether a model fits the data's actions less well, or as well and still scores
  less.

docs/weight-conditioning.md shows the output::

    python benchmarks/weight_conditioning_study.py docs/unseen/metrics.csv --runs docs/unseen/runs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import polars as pl

from morl.families import display_names
from morl.stats import iqm_intervals, probability_of_improvement

MODELS = ("rvs-p", "bc-p", "rvs-hn", "rvs-pml")
CHALLENGERS = ("rvs-hn", "rvs-pml")
REFERENCE = "rvs-p"
KINDS = {"narrow": ("narrow",), "shattered": ("shattered",), "both": ("narrow", "shattered")}


def score_arrays(runs: pl.DataFrame, column: str, kinds: tuple[str, ...]) -> dict[str, np.ndarray]:
    """model -> (seeds, rows) array of ``column`` on the variant rows of ``kinds``."""
    rows = runs.filter(pl.col("coverage").is_in(kinds))
    out = {}
    for model in present(runs):
        wide = (
            rows.filter(pl.col("model") == model)
            .with_columns(pl.concat_str("env", "quality", "entropy", "coverage", separator="/").alias("row"))
            .pivot(on="row", index="seed", values=column)
            .sort("seed")
        )
        out[model] = wide.select(sorted(c for c in wide.columns if c != "seed")).to_numpy()
    return out


def present(runs: pl.DataFrame) -> list[str]:
    """The models of :data:`MODELS` that ``runs`` has, in that order."""
    have = set(runs["model"])
    return [m for m in MODELS if m in have]


def relative_to_reference(runs: pl.DataFrame, column: str) -> pl.DataFrame:
    """``column`` divided, per dataset row, by MORvS(P)'s mean over seeds on that row."""
    keys = ["env", "quality", "entropy", "coverage"]
    ref = runs.filter(pl.col("model") == REFERENCE).group_by(keys).agg(pl.col(column).mean().alias("_ref"))
    return runs.join(ref, on=keys).with_columns((pl.col(column) / pl.col("_ref")).alias(f"{column}_rel")).drop("_ref")


def final_losses(runs_dir: Path) -> pl.DataFrame:
    """One row per run found under ``runs_dir`` (``<env>/<quality>-<entropy>[-<coverage>]/<model>/seed<n>/curve.csv``):
    its keys and the mean of the last five logged training losses."""
    rows = []
    for curve in sorted(runs_dir.glob("*/*/*/seed*/curve.csv")):
        model, dataset, env = curve.parent.parent.name, curve.parent.parent.parent.name, curve.parents[3].name
        if model not in MODELS:
            continue
        quality, entropy, *rest = dataset.split("-")
        loss = pl.read_csv(curve)["loss"].tail(5).mean()
        rows.append({"env": env, "quality": quality, "entropy": entropy, "coverage": rest[0] if rest else "complete",
                     "model": model, "seed": int(curve.parent.name.removeprefix("seed")), "loss": loss})  # fmt: skip
    return pl.DataFrame(rows)


def print_table(title: str, columns: list[str], rows: list[tuple[str, list[str]]]) -> None:
    """A Markdown table under ``title``: a model column, then ``columns``."""
    print(f"\n{title}\n")
    print("| model | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, cells in rows:
        print(f"| {name} | " + " | ".join(cells) + " |")


def fmt(t: tuple[float, float, float]) -> str:
    return f"{t[0]:.2f} [{t[1]:.2f}, {t[2]:.2f}]"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("metrics", type=Path, help="metrics.csv of a configs/unseen.yaml run")
    p.add_argument("--runs", type=Path, help="the run's slices (or results) folder, for the training losses")
    p.add_argument("--env", help="only this env's rows")
    p.add_argument("--quality", help="only the rows of data of this quality (expert or amateur)")
    p.add_argument("--reps", type=int, default=2000, help="bootstrap replicates of every interval")
    args = p.parse_args(argv)

    def selected(frame: pl.DataFrame) -> pl.DataFrame:
        for column in ("env", "quality"):
            if getattr(args, column) is not None:
                frame = frame.filter(pl.col(column) == getattr(args, column))
        return frame

    runs = selected(pl.read_csv(args.metrics).filter(pl.col("model").is_in(MODELS)))
    variants = runs.filter(pl.col("coverage") != "complete").with_columns(
        (pl.col("hv_held_out") / pl.col("b_held_out")).alias("variant"),
        (pl.col("hv_held_out_complete") / pl.col("b_held_out")).alias("complete"),
    )
    variants = relative_to_reference(relative_to_reference(variants, "eum"), "rd_held_out")
    names = display_names()
    n_rows = {k: variants.filter(pl.col("coverage").is_in(v)).select("env", "quality", "coverage").unique().height
              for k, v in KINDS.items()}  # fmt: skip

    complete_or_variant = {k: {c: iqm_intervals(score_arrays(variants, c, v), reps=args.reps)
                               for c in ("complete", "variant")}
                           for k, v in KINDS.items()}  # fmt: skip
    print_table(
        "HV / B at the held-out preferences: IQM over rows and seeds [95% interval]",
        [f"{k} ({n_rows[k]} rows): {c}" for k in KINDS for c in ("complete data", "variant")],
        [
            (names[m], [fmt(complete_or_variant[k][c][m]) for k in KINDS for c in ("complete", "variant")])
            for m in present(variants)
        ],
    )

    def improvement(model: str, column: str, kinds: tuple[str, ...]) -> str:
        pair = {m: a for m, a in score_arrays(variants, column, kinds).items() if m in (model, REFERENCE)}
        return fmt(probability_of_improvement(pair, reps=args.reps)[(model, REFERENCE)])

    print_table(
        f"P(run of the model > run of {names[REFERENCE]}) at the held-out preferences [95% interval]",
        [f"{k}: {c}" for k in KINDS for c in ("complete data", "variant")],
        [
            (names[m], [improvement(m, c, v) for v in KINDS.values() for c in ("complete", "variant")])
            for m in CHALLENGERS
        ],
    )

    relative = {k: {c: iqm_intervals(score_arrays(variants, c, v), reps=args.reps)
                    for c in ("eum_rel", "rd_held_out_rel")}
                for k, v in KINDS.items()}  # fmt: skip
    print_table(
        f"EUM and MODULI's RD on the variant rows, each divided by {names[REFERENCE]}'s mean on the row: "
        "IQM [95% interval] (EUM: higher is better; RD: lower is better)",
        [f"{k}: {c}" for k in KINDS for c in ("EUM", "RD")],
        [
            (names[m], [fmt(relative[k][c][m]) for k in KINDS for c in ("eum_rel", "rd_held_out_rel")])
            for m in present(variants)
        ],
    )
    if args.runs is not None:
        losses = relative_to_reference(selected(final_losses(args.runs)), "loss")
        kinds = {"complete": ("complete",), **KINDS}
        loss = {k: iqm_intervals(score_arrays(losses, "loss_rel", v), reps=args.reps) for k, v in kinds.items()}
        print_table(
            f"Training loss at the end (mean of the last five logged values), divided by {names[REFERENCE]}'s "
            "mean on the row: IQM [95% interval] (lower fits the data's actions better)",
            list(kinds),
            [(names[m], [fmt(loss[k][m]) for k in kinds]) for m in present(variants)],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
