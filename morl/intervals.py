"""The interval statistics tables: per-cell bootstrap intervals, the interquartile mean (IQM) and
the probability of improvement between models.

* :func:`interval_long` / :func:`interval_table` - per env, dataset and model: HV with a bootstrap
  interval over seeds, HV / B, EUM, IGD, cardinality and MODULI's ratio deviation, and for a
  coverage variant the held-out HV, MODULI's return deviation RD and the distance to the data front;
* :func:`normalised_scores` - HV / B per model as the ``(n_seeds, n_rows)`` arrays the
  across-dataset statistics need;
* :func:`iqm_table` and :func:`improvement_table` - the IQM of HV / B per model and the probability
  of improvement between every pair of models, with stratified-bootstrap intervals after Agarwal et
  al. (2021).

The bootstraps themselves are in :mod:`morl.stats`; every interval here has the coverage, size and
seed of :data:`CONFIDENCE`, :data:`REPS` and :data:`STATS_SEED`. Input is the ``metrics`` frame of
:func:`morl.metrics_frame.collect_metrics` and B of each dataset, as for :mod:`morl.tables`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from morl.paper import HV_UNITS
from morl.render import MISSING, Cell, Table
from morl.tables import (
    CELL_SCHEMA,
    Dataset,
    b_of,
    cell_columns,
    dataset_label,
    display_name,
    fmt_number,
    ordered_models,
    unit_label,
)

#: Coverage of every interval in the statistics tables, and the bootstrap's size and seed.
CONFIDENCE, REPS, STATS_SEED = 0.95, 2000, 0


#: The units RD is shown in, per env: MODULI's (``scale_wr`` of its table script), 1e3 and 1e2 for
#: Swimmer; other envs in raw returns. One unit per env, so every variant of a dataset reads alike.
RD_UNITS = {
    "MO-Ant-v2": 1e3,
    "MO-HalfCheetah-v2": 1e3,
    "MO-Hopper-v2": 1e3,
    "MO-Hopper-v3": 1e3,
    "MO-Walker2d-v2": 1e3,
    "MO-Swimmer-v2": 1e2,
}
#: MODULI's gradient steps for the front model of RD.
MODULI_FRONT_MODEL_STEPS = 100_000
#: The columns of an IQM frame: per model, the IQM with its interval and the rows and seeds it is over.
IQM_SCHEMA = {
    "model": pl.String,
    "iqm": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "n_rows": pl.Int64,
    "n_seeds": pl.Int64,
}


def _finite(frame: pl.DataFrame, key: str) -> np.ndarray:
    """The finite values of a column (nulls and NaN dropped; none if there is no such column), as float64."""
    if key not in frame.columns:
        return np.empty(0)
    arr = np.asarray([v for v in frame[key].to_list() if v is not None], dtype=np.float64)
    return arr[np.isfinite(arr)]


def _mean_std(values: np.ndarray) -> tuple[float | None, float | None]:
    if not len(values):
        return None, None
    with np.errstate(over="ignore"):  # finite values past the float range's square root: rescaled below
        mean, std = float(values.mean()), float(values.std())
    if not (math.isfinite(mean) and math.isfinite(std)):
        scale = float(np.abs(values).max())
        mean, std = float((values / scale).mean()) * scale, float((values / scale).std()) * scale
    return mean, std


def interval_long(
    metrics: pl.DataFrame, data_hv: Mapping[Dataset, float], datasets: Sequence[Dataset], models: Sequence[str]
) -> pl.DataFrame:
    """Per env, dataset and model: HV mean, std and 95% bootstrap interval over seeds (paper units),
    HV / B, the means of EUM, IGD, cardinality and the full-length share (:mod:`morl.stats`,
    :mod:`morl.metrics`), MODULI's
    ratio deviation (mean and std over seeds), and for a coverage variant the held-out HV with its
    interval, MODULI's RD (raw returns: mean and std over the seeds that have one; ``rd_unit`` is the
    unit the table shows it in) and the distance to the data front (mean)."""
    from morl.stats import cell_interval

    models = ordered_models(models, metrics)
    rows = []
    for env, quality, entropy in datasets:
        unit = HV_UNITS.get(env, 1.0)
        b_hv = b_of(data_hv, (env, quality, entropy))
        for m in models:
            runs = metrics.filter(
                (pl.col("env") == env)
                & (pl.col("quality") == quality)
                & (pl.col("entropy") == entropy)
                & (pl.col("model") == m)
            ).sort("seed")
            if not len(runs):
                continue
            hv = runs["hv"].to_numpy() / unit
            low, high = cell_interval(hv, CONFIDENCE, REPS, STATS_SEED)
            held = _finite(runs, "hv_held_out") / unit
            held_ci = cell_interval(held, CONFIDENCE, REPS, STATS_SEED) if len(held) else (None, None)
            ratio, rd, fd = (_finite(runs, k) for k in ("ratio_dev", "rd_held_out", "front_distance_held_out"))
            steps = sorted(set(runs["rd_front_model_steps"].drop_nulls().to_list())) if len(rd) else []
            hv_mean, hv_std = _mean_std(hv)
            rows.append(
                {
                    **cell_columns((env, quality, entropy), m, len(runs)),
                    "hv_mean": hv_mean,
                    "hv_std": hv_std,
                    "hv_ci_low": low,
                    "hv_ci_high": high,
                    "unit": unit,
                    "hv_over_b": hv_mean * unit / b_hv if b_hv else None,
                    "eum": runs["eum"].mean(),
                    "igd": runs["igd"].mean(),
                    "cardinality": runs["cardinality"].mean(),
                    "full_length": runs["full_length"].mean(),
                    **dict(zip(("ratio_dev_mean", "ratio_dev_std"), _mean_std(ratio), strict=True)),
                    "hv_held_out_mean": float(np.mean(held)) if len(held) else None,
                    "hv_held_out_ci_low": held_ci[0],
                    "hv_held_out_ci_high": held_ci[1],
                    **dict(zip(("rd_held_out_mean", "rd_held_out_std"), _mean_std(rd), strict=True)),
                    "rd_n_seeds": len(rd),
                    "rd_unit": RD_UNITS.get(env, 1.0),
                    "rd_front_model_steps": steps[0] if len(steps) == 1 else None,
                    "front_distance_held_out": float(fd.mean()) if len(fd) else None,
                }
            )
    schema = {
        **CELL_SCHEMA,
        "hv_mean": pl.Float64,
        "hv_std": pl.Float64,
        "hv_ci_low": pl.Float64,
        "hv_ci_high": pl.Float64,
        "unit": pl.Float64,
        "hv_over_b": pl.Float64,
        "eum": pl.Float64,
        "igd": pl.Float64,
        "cardinality": pl.Float64,
        "full_length": pl.Float64,
        "ratio_dev_mean": pl.Float64,
        "ratio_dev_std": pl.Float64,
        "hv_held_out_mean": pl.Float64,
        "hv_held_out_ci_low": pl.Float64,
        "hv_held_out_ci_high": pl.Float64,
        "rd_held_out_mean": pl.Float64,
        "rd_held_out_std": pl.Float64,
        "rd_n_seeds": pl.Int64,
        "rd_unit": pl.Float64,
        "rd_front_model_steps": pl.Int64,
        "front_distance_held_out": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def _mean_pm_std(mean: float | None, std: float | None, unit: float = 1.0, shown_unit: bool = False) -> str:
    if mean is None:
        return MISSING
    text = f"{fmt_number(mean / unit)[0]} ± {fmt_number(std / unit)[0]}"
    return text + (f" (×{unit_label(unit)})" if shown_unit else "")


def interval_table(long: pl.DataFrame) -> Table:
    """:func:`interval_long` as a table, one row per env, dataset and model; with coverage variants
    among the datasets, also the HV over the held-out preferences (with its interval), MODULI's
    return deviation there and the distance to the data front there."""
    held = long["hv_held_out_mean"].drop_nulls().len() > 0
    titles = [
        "env",
        "dataset",
        "model",
        "seeds",
        "HV (unit)",
        "HV 95% CI",
        "HV / B",
        "EUM",
        "IGD",
        "cardinality",
        "full length",
        "ratio dev.",
    ]
    if held:
        titles += ["HV held-out (unit)", "held-out 95% CI", "RD held-out (unit)", "front distance held-out"]
    rows = []
    any_rd_missing = False
    for r in long.iter_rows(named=True):
        unit = f" (×{unit_label(r['unit'])})"
        row = [
            Cell(r["env"]),
            Cell(dataset_label(r["quality"], r["entropy"])),
            Cell(display_name(r["model"])),
            Cell(str(r["n_seeds"])),
            Cell(f"{fmt_number(r['hv_mean'])[0]} ± {fmt_number(r['hv_std'])[0]}{unit}"),
            Cell(f"[{fmt_number(r['hv_ci_low'])[0]}, {fmt_number(r['hv_ci_high'])[0]}]"),
            Cell(MISSING if r["hv_over_b"] is None else fmt_number(r["hv_over_b"])[0]),
            Cell(f"{r['eum']:.4g}"),
            Cell(f"{r['igd']:.4g}"),
            Cell(f"{r['cardinality']:.1f}"),
            Cell(f"{r['full_length']:.2f}"),
            Cell(_mean_pm_std(r["ratio_dev_mean"], r["ratio_dev_std"])),
        ]
        if held:
            if r["hv_held_out_mean"] is None:
                row += [Cell(MISSING)] * 4
            else:
                any_rd_missing |= r["rd_held_out_mean"] is None
                rd = _mean_pm_std(r["rd_held_out_mean"], r["rd_held_out_std"], r["rd_unit"], shown_unit=True)
                if r["rd_held_out_mean"] is not None and r["rd_n_seeds"] < r["n_seeds"]:
                    rd += f" ({r['rd_n_seeds']} seeds)"
                fd = r["front_distance_held_out"]
                row += [
                    Cell(f"{fmt_number(r['hv_held_out_mean'])[0]}{unit}"),
                    Cell(f"[{fmt_number(r['hv_held_out_ci_low'])[0]}, {fmt_number(r['hv_held_out_ci_high'])[0]}]"),
                    Cell(rd),
                    Cell(MISSING if fd is None else f"{fd:.3f}"),
                ]
        rows.append(row)
    notes = [
        "HV: mean ± std over training seeds in the paper's unit; 95% CI: percentile bootstrap of that mean over the "
        f"seeds ({REPS} resamples; with 3 seeds an interval is coarse, and a single seed has none).",
        "EUM: expected utility over 100 evenly spread weights (morl-baselines); IGD: inverted generational distance "
        "to the union front of the behavior policy's grid evaluation and every model evaluated on the dataset (raw "
        "returns, lower is better); cardinality: distinct non-dominated points; full length: the share of the grid's "
        "episodes that ran to the task's step limit (the others ended by its termination rule). Means over seeds.",
        "Ratio dev.: MODULI's ratio deviation, the mean of ‖R / ΣR − w‖₂ over the grid points PEDA keeps (no negative "
        "objective, not dominated within the run's points); mean ± std over seeds, lower is better. metrics.csv "
        "also has ratio_dev_all, this project's variant over every point.",
    ]
    if held:
        steps = sorted(set(long["rd_front_model_steps"].drop_nulls().to_list()))
        fitted = ", ".join(f"{s:,}" for s in steps) if steps else "no front model given"
        departure = (
            ""
            if steps == [MODULI_FRONT_MODEL_STEPS]
            else (f" (MODULI: {MODULI_FRONT_MODEL_STEPS:,} steps)" if steps else "")
        )
        units = ", ".join(f"{e} ×{unit_label(u)}" for e, u in dict(zip(long["env"], long["rd_unit"])).items())
        notes.append(
            "Held-out: over the grid preferences inside the bands a coverage variant (shattered, narrow) removed from "
            "its data, with the HV of the returns achieved there and its bootstrap interval. RD held-out: MODULI's "
            "return deviation, the mean over those preferences of ‖g(w) − R(w)‖₂ in raw returns, g the front model "
            "(an MLP from preference to return) fitted on the complete dataset's non-negative non-dominated "
            f"trajectories with {fitted} gradient steps{departure}; mean ± std over seeds in the unit shown "
            f"({units}); lower is better. Front distance held-out (ours): the mean of ‖(R(w) − F(w)) / s‖₂, F(w) the "
            "complete data's trajectory return best at w and s per objective the largest |F| over the whole grid "
            f"(fixed per dataset); mean over seeds. {MISSING} for complete data, which holds nothing out."
        )
        if any_rd_missing:
            notes.append(
                f"{MISSING} in RD held-out of a variant row: no front model of its complete dataset was given, or "
                "none could be fitted (no trajectory of that dataset has a return with no negative objective that no "
                "other return dominates, so MODULI's RD is undefined there)."
            )
    return Table(
        "Per-cell statistics: HV with bootstrap intervals, EUM, IGD, cardinality, deviations",
        [Cell(t) for t in titles],
        rows,
        notes,
        n_label_columns=4,
    )


def normalised_scores(
    metrics: pl.DataFrame, data_hv: Mapping[Dataset, float], datasets: Sequence[Dataset], models: Sequence[str]
) -> tuple[dict[str, np.ndarray], list[Dataset]]:
    """HV / B per model as ``(n_seeds, n_rows)`` arrays over the dataset rows that have a B and where
    every model has the same number of seeds, the largest such number among the rows (the shape
    interval statistics need), and those rows."""
    per_row: dict[Dataset, dict[str, np.ndarray]] = {}
    for env, quality, entropy in datasets:
        b = b_of(data_hv, (env, quality, entropy))
        if not b:
            continue
        cell = metrics.filter((pl.col("env") == env) & (pl.col("quality") == quality) & (pl.col("entropy") == entropy))
        scores = {m: cell.filter(pl.col("model") == m).sort("seed")["hv"].to_numpy() / b for m in models}
        counts = {len(v) for v in scores.values()}
        if len(counts) == 1 and 0 not in counts:
            per_row[(env, quality, entropy)] = scores
    if not per_row:
        return {}, []
    # one array needs one seed count: while a grid runs, rows can have fewer seeds than others, and
    # only the rows with the most seeds enter
    most = max(len(next(iter(scores.values()))) for scores in per_row.values())
    rows = [r for r, scores in per_row.items() if len(next(iter(scores.values()))) == most]
    return {m: np.stack([per_row[r][m] for r in rows], axis=1) for m in models}, rows


def iqm_table(scores: Mapping[str, np.ndarray], rows: Sequence[Dataset]) -> tuple[Table, pl.DataFrame]:
    """Each model's interquartile mean of HV / B over every seed and row, with its 95% interval."""
    from morl.stats import iqm_intervals

    result = iqm_intervals(scores, CONFIDENCE, REPS, STATS_SEED) if scores else {}
    long = pl.DataFrame(
        [
            {
                "model": m,
                "iqm": v[0],
                "ci_low": v[1],
                "ci_high": v[2],
                "n_rows": len(rows),
                "n_seeds": int(scores[m].shape[0]),
            }
            for m, v in result.items()
        ],
        schema=IQM_SCHEMA,
    )
    header = [Cell("model"), Cell("IQM of HV / B"), Cell("95% CI")]
    body = [
        [Cell(display_name(r["model"])), Cell(f"{r['iqm']:.3f}"), Cell(f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]")]
        for r in long.iter_rows(named=True)
    ]
    notes = [
        f"Interquartile mean (IQM) of each run's HV / B over {len(rows)} dataset rows × the seeds, with a "
        f"stratified-bootstrap 95% interval ({REPS} resamples, seeds resampled within each row), after Agarwal et al. "
        "(2021). Rows enter only where every model has the same number of seeds.",
        "Two models whose intervals overlap are not shown apart by this experiment.",
    ]
    return Table("Interquartile mean of HV / B across datasets", header, body, notes, n_label_columns=1), long


def improvement_table(scores: Mapping[str, np.ndarray]) -> tuple[Table, pl.DataFrame]:
    """P(X > Y) of HV / B for every ordered pair of models, with 95% intervals, as a matrix."""
    from morl.stats import probability_of_improvement

    models = list(scores)
    result = probability_of_improvement(scores, CONFIDENCE, REPS, STATS_SEED) if len(models) > 1 else {}
    long = pl.DataFrame(
        [{"model": x, "other": y, "p": v[0], "ci_low": v[1], "ci_high": v[2]} for (x, y), v in result.items()],
        schema={"model": pl.String, "other": pl.String, "p": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64},
    )
    header = [Cell("P(row > column)"), *[Cell(display_name(m)) for m in models]]
    body = []
    for x in models:
        cells = [Cell(display_name(x))]
        for y in models:
            v = result.get((x, y))
            cells.append(
                Cell(MISSING if v is None else f"{v[0]:.2f} [{v[1]:.2f}, {v[2]:.2f}]", bold=bool(v) and v[1] > 0.5)
            )
        body.append(cells)
    notes = [
        "Probability of improvement: the chance that a random seed of the row's model has a higher HV / B than a "
        "random seed of the column's model on a random dataset row (ties count half), with a stratified-bootstrap "
        "95% interval (Agarwal et al. 2021). Bold: the interval lies above 0.5.",
    ]
    return Table("Probability of improvement (HV / B)", header, body, notes, n_label_columns=1), long
