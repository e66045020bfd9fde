"""The generalisation tables: how well a model trained on a coverage variant of a dataset (one
that had a band of preferences cut out) does at the preferences it never saw.

* :func:`held_out_scores` - one model's runs on one variant row, scored at the held-out
  preferences, beside the same model and seeds trained on the complete data;
* :func:`generalisation_long` / :func:`generalisation_table` - per variant row and model, the
  HV / B reached there trained on the variant and trained on the complete data, and their paired
  difference, each with a bootstrap interval over seeds;
* :func:`generalisation_iqm_table` - the interquartile mean of both per model and coverage kind,
  with stratified-bootstrap intervals.

Here B is the behavior policy's HV at the same held-out preferences (``b_held_out`` of the metrics
frame of :func:`morl.metrics_frame.collect_metrics`). The intervals share the settings of
:mod:`morl.intervals`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from morl.intervals import CONFIDENCE, IQM_SCHEMA, REPS, STATS_SEED
from morl.paper import HV_UNITS
from morl.render import MISSING, Cell, Table
from morl.tables import Dataset, dataset_label, display_name, fmt_number, model_order, ordered_models, unit_label


def is_variant(entropy: str) -> bool:
    """Whether a dataset row's entropy label names a coverage variant (``high-shattered``)."""
    return "-" in entropy


def held_out_scores(metrics: pl.DataFrame, dataset: Dataset, model: str) -> pl.DataFrame:
    """One model's runs on one variant row, by seed, with its held-out HV as a share of B's HV at the
    same preferences (``variant``) and the same for the run of that model and seed on the complete
    data (``complete``, null where that run is not among the evaluations). Runs whose B there is 0
    or unknown have no score and are left out."""
    env, quality, entropy = dataset
    runs = metrics.filter(
        (pl.col("env") == env)
        & (pl.col("quality") == quality)
        & (pl.col("entropy") == entropy)
        & (pl.col("model") == model)
        & pl.col("hv_held_out").is_not_null()
        & pl.col("b_held_out").is_not_null()
        & (pl.col("b_held_out") > 0)
    ).sort("seed")
    return runs.select(
        "seed",
        (pl.col("hv_held_out") / pl.col("b_held_out")).alias("variant"),
        (pl.col("hv_held_out_complete") / pl.col("b_held_out")).alias("complete"),
    )


def generalisation_long(metrics: pl.DataFrame, datasets: Sequence[Dataset], models: Sequence[str]) -> pl.DataFrame:
    """Per coverage-variant row and model, on the held-out preferences: B's HV there (paper units);
    the HV / B of the runs trained on the variant and of the same model and seeds trained on the
    complete data, each with its mean and 95% bootstrap interval over seeds; and their paired
    difference (variant − complete, per seed) with its interval. A run has no score where B's HV
    at the held-out preferences is 0 (``n_seeds`` counts those scored)."""
    from morl.stats import cell_interval

    def stat(values: np.ndarray) -> tuple:
        if not len(values):
            return None, None, None
        return float(values.mean()), *cell_interval(values, CONFIDENCE, REPS, STATS_SEED)

    models = ordered_models(models, metrics)
    rows = []
    for env, quality, entropy in datasets:
        if not is_variant(entropy) or "b_held_out" not in metrics.columns:
            continue
        b_rows = metrics.filter(
            (pl.col("env") == env) & (pl.col("quality") == quality) & (pl.col("entropy") == entropy)
        )["b_held_out"].drop_nulls()
        for m in models:
            scores = held_out_scores(metrics, (env, quality, entropy), m)
            if not len(scores):
                continue
            paired = scores.drop_nulls()
            v, c = scores["variant"].to_numpy(), scores["complete"].drop_nulls().to_numpy()
            d = (paired["variant"] - paired["complete"]).to_numpy()
            rows.append(
                {
                    "env": env,
                    "quality": quality,
                    "entropy": entropy,
                    "coverage": entropy.partition("-")[2],
                    "model": m,
                    "n_seeds": len(scores),
                    "n_paired": len(paired),
                    "unit": HV_UNITS.get(env, 1.0),
                    "b_held_out": float(b_rows[0] / HV_UNITS.get(env, 1.0)) if len(b_rows) else None,
                    **dict(zip(("variant", "variant_ci_low", "variant_ci_high"), stat(v), strict=True)),
                    **dict(zip(("complete", "complete_ci_low", "complete_ci_high"), stat(c), strict=True)),
                    **dict(zip(("difference", "difference_ci_low", "difference_ci_high"), stat(d), strict=True)),
                }
            )
    schema = {
        "env": pl.String,
        "quality": pl.String,
        "entropy": pl.String,
        "coverage": pl.String,
        "model": pl.String,
        "n_seeds": pl.Int64,
        "n_paired": pl.Int64,
        "unit": pl.Float64,
        "b_held_out": pl.Float64,
        **{
            f"{k}{suffix}": pl.Float64
            for k in ("variant", "complete", "difference")
            for suffix in ("", "_ci_low", "_ci_high")
        },
    }
    return pl.DataFrame(rows, schema=schema)


def _mean_ci(r: dict, key: str, signed: bool = False) -> Cell:
    if r[key] is None:
        return Cell(MISSING)
    f = "{:+.2f}" if signed else "{:.2f}"

    def show(x: float) -> str:
        return f.format(round(x, 2) + 0.0)  # + 0.0: no "-0.00" for a difference that rounds to zero

    return Cell(f"{show(r[key])} [{show(r[key + '_ci_low'])}, {show(r[key + '_ci_high'])}]")


def generalisation_table(long: pl.DataFrame) -> Table:
    """:func:`generalisation_long` as a table, one row per env, variant and model."""
    header = [
        Cell(t)
        for t in (
            "env",
            "dataset",
            "model",
            "seeds",
            "B held-out (unit)",
            "HV / B, variant",
            "HV / B, complete data",
            "variant − complete",
        )
    ]
    rows = []
    for r in long.iter_rows(named=True):
        seeds = str(r["n_seeds"]) + (f" ({r['n_paired']} paired)" if r["n_paired"] != r["n_seeds"] else "")
        b = MISSING if r["b_held_out"] is None else f"{fmt_number(r['b_held_out'])[0]} (×{unit_label(r['unit'])})"
        rows.append(
            [
                Cell(r["env"]),
                Cell(dataset_label(r["quality"], r["entropy"])),
                Cell(display_name(r["model"])),
                Cell(seeds),
                Cell(b),
                _mean_ci(r, "variant"),
                _mean_ci(r, "complete"),
                _mean_ci(r, "difference", signed=True),
            ]
        )
    notes = [
        "On the held-out preferences only: the grid points whose w₁ lies in a band the variant removed from its data. "
        "HV / B there: the HV of the returns a run reached at those points divided by the HV of the behavior policy's "
        "returns at the same points (its evaluation on the grid: the data's own front, B elsewhere, has no returns "
        "per preference point). Variant: runs trained on the variant; complete data: the same model and seeds trained on the "
        "complete data, evaluated on the same grid.",
        f"Mean over seeds [95% percentile-bootstrap interval, {REPS} resamples]; variant − complete is paired by seed. "
        "A difference whose interval contains 0 is not resolved by this experiment; with 3 seeds intervals are coarse.",
    ]
    return Table(
        "Generalisation to held-out preferences: HV / B there, trained on the variant vs. the complete data",
        header,
        rows,
        notes,
        n_label_columns=4,
    )


def generalisation_iqm_table(metrics: pl.DataFrame, long: pl.DataFrame) -> tuple[Table, pl.DataFrame]:
    """Per coverage (each variant kind, then all together) and model: the interquartile mean over
    rows and seeds of the held-out HV / B of the runs trained on the variant and of those trained on
    the complete data, each with its stratified-bootstrap interval. A row enters only where every
    model has the same number of seeds with both scores (the shape :func:`morl.stats.iqm_intervals`
    needs)."""
    from morl.stats import iqm_intervals

    models = model_order(long["model"].unique().to_list()) if len(long) else []
    kinds = sorted(long["coverage"].unique().to_list()) if len(long) else []
    records = []
    for kind in [*kinds, "all"] if len(kinds) > 1 else kinds:
        part = long if kind == "all" else long.filter(pl.col("coverage") == kind)
        keys = part.select("env", "quality", "entropy").unique(maintain_order=True).iter_rows()
        per_row = {k: {m: held_out_scores(metrics, k, m).drop_nulls() for m in models} for k in keys}
        kept = [
            k
            for k, by_model in per_row.items()
            if len({len(v) for v in by_model.values()}) == 1 and len(next(iter(by_model.values())))
        ]
        if not kept:
            continue
        for data in ("variant", "complete"):
            scores = {m: np.stack([per_row[k][m][data].to_numpy() for k in kept], axis=1) for m in models}
            for m, (point, low, high) in iqm_intervals(scores, CONFIDENCE, REPS, STATS_SEED).items():
                records.append(
                    {
                        "coverage": kind,
                        "data": data,
                        "model": m,
                        "iqm": point,
                        "ci_low": low,
                        "ci_high": high,
                        "n_rows": len(kept),
                        "n_seeds": int(scores[m].shape[0]),
                    }
                )
    frame = pl.DataFrame(
        records,
        schema={"coverage": pl.String, "data": pl.String, **IQM_SCHEMA},
    )
    shown = [k for k in [*kinds, "all"] if k in set(frame["coverage"].to_list())]
    header = [Cell("model")] + [Cell(f"{k}: {data}") for k in shown for data in ("complete", "variant")]
    body = []
    for m in models:
        cells = [Cell(display_name(m))]
        for k in shown:
            for data in ("complete", "variant"):
                r = frame.filter((pl.col("coverage") == k) & (pl.col("data") == data) & (pl.col("model") == m))
                cells.append(
                    Cell(MISSING)
                    if not len(r)
                    else Cell(f"{r['iqm'][0]:.2f} [{r['ci_low'][0]:.2f}, {r['ci_high'][0]:.2f}]")
                )
        body.append(cells)
    counts = "; ".join(f"{k}: {frame.filter(pl.col('coverage') == k)['n_rows'][0]} rows" for k in shown)
    notes = [
        "Interquartile mean over variant rows and seeds of the HV / B reached at the held-out preferences, by runs "
        "trained on the complete data and by the same models and seeds trained on the variant, with stratified-"
        f"bootstrap 95% intervals ({REPS} resamples), after Agarwal et al. (2021). {counts or 'No rows yet'}. A row "
        "enters only where every model has the same number of seeds with both scores.",
        "A model generalises where its variant interval matches its complete one; where the two intervals overlap, "
        "this experiment does not show a cost of the cut.",
    ]
    return Table(
        "Generalisation to held-out preferences: IQM of HV / B there, complete data vs. variant",
        header,
        body,
        notes,
        n_label_columns=1,
    ), frame
