"""The paper's result tables from the per-evaluation metrics: HV, SP and the paper comparison.

Input is the ``metrics`` frame of :func:`morl.metrics_frame.collect_metrics` (one row per
evaluation file: env, quality, entropy, model, seed, hv, sp, ...) and ``data_hv``, B of each
dataset: the HV of the data's own front (its card's "data HV", :func:`morl.dataset_info.read_card`),
as the PEDA paper's tables define B. A coverage variant's rows use the B of the complete dataset it
was cut from (:func:`b_of`). Polars does the grouping.

* :func:`metric_long` - one row per table cell and seed, raw and in the paper's units (the CSV);
* :func:`metric_table` - HV or SP in the paper's layout: rows env x dataset, columns the models
  (and B in the HV table), cells mean ± std over seeds in the paper's units, best model per row
  in bold;
* :func:`comparison_long` / :func:`comparison_table` - each model's HV as a fraction of our B,
  beside the same fraction from the published numbers (:mod:`morl.paper`);
* the labels, orders and number formats every table shares (:func:`display_name`,
  :func:`model_order`, :func:`sort_datasets`, :func:`dataset_label`, :func:`fmt_number`, ...).

The per-cell interval, IQM and probability-of-improvement tables are in :mod:`morl.intervals`,
the held-out generalisation tables in :mod:`morl.generalisation`; :mod:`morl.render` shows any of
them as Markdown, LaTeX or HTML.

A cell without any evaluation is shown as "—" and explained in a footnote, so the tables can be
built while an experiment is still running.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from morl.families import display_names
from morl.families import model_order as registry_order
from morl.paper import HV_UNITS, PUBLISHED_ENTROPY, SP_UNITS, published_fraction, published_hv
from morl.preferences import ENTROPY_LEVELS
from morl.render import MISSING, PARTIAL_MARK, Cell, Table
from morl.vocabulary import QUALITIES


def model_order(models: Iterable[str]) -> list[str]:
    """``models`` in the paper's column order, then any model that order does not list, by name:
    a model that was evaluated always gets a column."""
    present = set(models)
    order = registry_order()
    return [m for m in order if m in present] + sorted(present - set(order))


def display_name(model: str) -> str:
    return display_names().get(model, model)


#: Decimals of a number in the tables, as the paper prints them.
DIGITS = 2

Dataset = tuple[str, str, str]  # (env, quality, entropy)

#: The leading columns of every per-cell frame: the cell (env, dataset, model) and its seed count.
CELL_SCHEMA = {"env": pl.String, "quality": pl.String, "entropy": pl.String, "model": pl.String, "n_seeds": pl.Int64}


def cell_columns(dataset: Dataset, model: str, n_seeds: int) -> dict:
    """The leading columns (:data:`CELL_SCHEMA`) of one row of a per-cell frame."""
    env, quality, entropy = dataset
    return {"env": env, "quality": quality, "entropy": entropy, "model": model, "n_seeds": n_seeds}


def b_of(data_hv: Mapping[Dataset, float], dataset: Dataset) -> float | None:
    """B of a table row: the data HV of its dataset; a coverage variant (entropy ``high-shattered``)
    takes the B of the complete dataset it was cut from, so that its runs and those on the
    complete data are divided by the same number. None when no card gave it."""
    env, quality, entropy = dataset
    return data_hv.get((env, quality, entropy.partition("-")[0]))


@dataclass(frozen=True)
class Metric:
    key: str  # column of the metrics frame
    title: str
    units: dict[str, float]
    higher_is_better: bool


HV = Metric("hv", "Hypervolume (HV, higher is better)", HV_UNITS, True)
SP = Metric("sp", "Sparsity (SP, lower is better)", SP_UNITS, False)
METRICS = {"hv": HV, "sp": SP}


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def unit_label(unit: float) -> str:
    return "1" if unit == 1 else f"1e{int(round(math.log10(unit)))}"


def unit_latex(unit: float) -> str:
    return "$1$" if unit == 1 else f"$\\times 10^{{{int(round(math.log10(unit)))}}}$"


def dataset_label(quality: str, entropy: str) -> str:
    """``expert high-H``; a coverage variant's entropy ``high-shattered`` reads ``expert high-H shattered``."""
    level, _, coverage = entropy.partition("-")
    return f"{quality} {level}-H" + (f" {coverage}" if coverage else "")


def sort_datasets(datasets: Iterable[Dataset]) -> list[Dataset]:
    """Env, then expert before amateur, then high, medium, low entropy (the paper's order), then the
    complete data before its coverage variants."""

    def key(d):
        env, q, h = d
        level, _, coverage = h.partition("-")
        return (
            env,
            QUALITIES.index(q) if q in QUALITIES else 9,
            ENTROPY_LEVELS.index(level) if level in ENTROPY_LEVELS else 9,
            coverage,
        )

    return sorted(set(datasets), key=key)


def ordered_models(models: Iterable[str] | None, metrics: pl.DataFrame) -> list[str]:
    """Models in the paper's column order: those asked for, else those evaluated, else every registered one."""
    chosen = set(models) if models is not None else set(metrics["model"].to_list())
    return model_order(chosen) or list(registry_order())


# ---------------------------------------------------------------------------------------------
# HV / SP tables
# ---------------------------------------------------------------------------------------------

LONG_SCHEMA = {
    "metric": pl.String,
    "env": pl.String,
    "quality": pl.String,
    "entropy": pl.String,
    "model": pl.String,
    "seed": pl.Int64,
    "value": pl.Float64,
    "unit": pl.Float64,
    "value_in_units": pl.Float64,
}


def metric_long(
    metrics: pl.DataFrame,
    data_hv: Mapping[Dataset, float],
    datasets: Sequence[Dataset],
    metric: Metric,
    models: Sequence[str],
) -> pl.DataFrame:
    """One row per table cell and seed: metric, env, quality, entropy, model, seed, value (raw), unit,
    value_in_units. For HV, B (the dataset's own front, ``data_hv``) has a null seed, one row per
    dataset row that has it; the SP table has no B. Cells without evaluations have no rows."""
    schema = {"env": pl.String, "quality": pl.String, "entropy": pl.String, "_row": pl.Int64}
    cells = pl.DataFrame([(*d, i) for i, d in enumerate(datasets)], orient="row", schema=schema)
    runs = (
        metrics.filter(pl.col("model").is_in(list(models)))
        .select("env", "quality", "entropy", "model", pl.col("seed").cast(pl.Int64), pl.col(metric.key).alias("value"))
        .join(cells, on=["env", "quality", "entropy"], how="inner")
    )
    b_rows = [
        (*d, "B", None, b, i)
        for i, d in enumerate(datasets)
        if metric.key == HV.key and (b := b_of(data_hv, tuple(d))) is not None
    ]
    b_schema = {k: LONG_SCHEMA[k] for k in ("env", "quality", "entropy", "model", "seed", "value")}
    b = pl.DataFrame(b_rows, orient="row", schema={**b_schema, "_row": pl.Int64})
    units = pl.DataFrame({"env": list(metric.units), "unit": list(metric.units.values())})
    column = pl.DataFrame({"model": ["B", *models], "_col": list(range(len(models) + 1))})
    return (
        pl.concat([b, runs.with_columns(pl.col("value").cast(pl.Float64))])
        .join(units, on="env", how="left")
        .join(column, on="model", how="left")
        .with_columns(pl.col("unit").fill_null(1.0))
        .with_columns((pl.col("value") / pl.col("unit")).alias("value_in_units"), pl.lit(metric.key).alias("metric"))
        .sort("_row", "_col", "seed", nulls_last=True)
        .select(list(LONG_SCHEMA))
    )


def finite_or_scaled(direct: pl.Expr, scaled: pl.Expr) -> pl.Expr:
    """``direct``, or where it overflowed (finite values whose squares or sums pass the float range,
    e.g. returns of 1e300) the same statistic computed on the values divided by their largest size."""
    return pl.when(direct.is_finite() | direct.is_null()).then(direct).otherwise(scaled)


def cell_stats(long: pl.DataFrame) -> dict[tuple[str, str, str, str], dict]:
    """{(env, quality, entropy, model): {mean, std, n}} in the paper's units; std over seeds (ddof 0)."""
    value = pl.col("value_in_units")
    scale = value.abs().max()
    grouped = long.group_by("env", "quality", "entropy", "model").agg(
        finite_or_scaled(value.mean(), (value / scale).mean() * scale).alias("mean"),
        finite_or_scaled(value.std(ddof=0), (value / scale).std(ddof=0) * scale).alias("std"),
        pl.len().alias("n"),
    )
    return {(r["env"], r["quality"], r["entropy"], r["model"]): r for r in grouped.iter_rows(named=True)}


def fmt_number(x: float) -> tuple[str, str]:
    """``x`` with two decimals, as the paper prints; values too small for that get two significant
    digits (``3.1e-05``), so a small experiment's numbers do not all read 0.00; so do values of a
    trillion (1e12) units and more, which no table of the paper's units holds unless a run diverged. (text, LaTeX)."""
    if x == 0 or 0.5 * 10**-DIGITS <= abs(x) < 1e12 or not math.isfinite(x):
        s = f"{x:.{DIGITS}f}"
        return s, s
    mant, exp = f"{x:.1e}".split("e")
    return f"{mant}e{exp}", f"${mant}\\times 10^{{{int(exp)}}}$"


def _format_stat(stat: dict | None, expected_seeds: int | None) -> tuple[str, str]:
    if stat is None:
        return MISSING, "---"
    text, tex = fmt_number(stat["mean"])
    if stat["n"] > 1:
        # the std in the mean's style: two decimals beside two decimals, as the paper prints
        s_text, s_tex = fmt_number(stat["std"]) if "e" in text else (f"{stat['std']:.{DIGITS}f}",) * 2
        text, tex = f"{text} ± {s_text}", f"{tex} $\\pm$ {s_tex}"
    if expected_seeds is not None and stat["model"] != "B" and stat["n"] < expected_seeds:
        text, tex = text + PARTIAL_MARK, tex + "$^\\dagger$"
    return text, tex


def metric_table(
    metrics: pl.DataFrame,
    data_hv: Mapping[Dataset, float],
    datasets: Sequence[Dataset],
    metric: Metric,
    models: Sequence[str] | None = None,
    expected_seeds: int | None = None,
) -> Table:
    """HV or SP in the paper's layout (rows env x dataset; columns B (HV only), MODT(P), ..., BC)."""
    models = ordered_models(models, metrics)
    datasets = list(datasets)
    stats = cell_stats(metric_long(metrics, data_hv, datasets, metric, models))
    columns = ["B", *models] if metric.key == HV.key else list(models)
    header = [Cell("env"), Cell("dataset"), Cell("unit"), *[Cell(display_name(m)) for m in columns]]
    rows, any_missing, any_partial, b_missing = [], False, False, False
    for env, quality, entropy in datasets:
        unit = metric.units.get(env, 1.0)
        row = [Cell(env), Cell(dataset_label(quality, entropy)), Cell(f"×{unit_label(unit)}", unit_latex(unit))]
        cells = {}
        for m in columns:
            st = stats.get((env, quality, entropy, m))
            text, tex = _format_stat(st, expected_seeds)
            cells[m] = Cell(text, tex)
            if m == "B":
                b_missing |= st is None
            else:
                any_missing |= st is None
            any_partial |= PARTIAL_MARK in text
        # best model of the row: compare the means as displayed, so ties are bolded alike
        shown = {
            m: float(fmt_number(stats[(env, quality, entropy, m)]["mean"])[0])
            for m in models
            if (env, quality, entropy, m) in stats
        }
        if shown:
            best = max(shown.values()) if metric.higher_is_better else min(shown.values())
            for m, v in shown.items():
                cells[m].bold = v == best
        rows.append(row + [cells[m] for m in columns])
    units = ", ".join(f"{e} ×{unit_label(metric.units.get(e, 1.0))}" for e in dict.fromkeys(d[0] for d in datasets))
    notes = [
        f"Cells: mean ± std over training seeds (population std), divided by the paper's unit ({units or 'none'}); "
        "a single number is a single seed.",
    ]
    if metric.key == HV.key:
        notes.append(
            "B: the HV of the dataset's own front (its trajectories' returns), as the PEDA paper defines it; a "
            "coverage variant's row shows the B of the complete dataset it was cut from."
        )
    notes.append(
        f"Bold: the best model of the row ({'highest' if metric.higher_is_better else 'lowest'} mean as shown"
        + ("; B is not ranked)." if metric.key == HV.key else ").")
    )
    if not metric.higher_is_better and metric.key == "sp":
        notes.append(
            "SP alone misleads: a front that collapsed to one or two points scores 0 or near it; read it "
            "beside HV and the cardinality in the per-cell statistics."
        )
    if any_partial:
        notes.append(
            f"{PARTIAL_MARK} : fewer seeds evaluated than configured ({expected_seeds}); mean over the seeds found."
        )
    if any_missing:
        notes.append(f"{MISSING} : not evaluated yet (no evaluation file for this cell).")
    if b_missing:
        notes.append(f"{MISSING} under B: no card of the dataset was given, so its data HV is not known.")
    return Table(metric.title, header, rows, notes)


# ---------------------------------------------------------------------------------------------
# Paper comparison
# ---------------------------------------------------------------------------------------------


def comparison_long(
    metrics: pl.DataFrame,
    data_hv: Mapping[Dataset, float],
    datasets: Sequence[Dataset],
    models: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Per env, dataset and model: our mean HV and B (the dataset's own front; paper units), our
    HV / B, and the paper's."""
    models = ordered_models(models, metrics)
    stats = cell_stats(metric_long(metrics, data_hv, list(datasets), HV, models))
    rows = []
    for env, quality, entropy in datasets:
        b = stats.get((env, quality, entropy, "B"))
        for m in models:
            st = stats.get((env, quality, entropy, m))
            ours = st["mean"] / b["mean"] if st is not None and b is not None and b["mean"] > 0 else None
            rows.append(
                {
                    **cell_columns((env, quality, entropy), m, st["n"] if st else 0),
                    "our_hv": st["mean"] if st else None,
                    "our_b_hv": b["mean"] if b else None,
                    "our_fraction": ours,
                    "paper_hv": published_hv(env, quality, entropy, m),
                    "paper_b_hv": published_hv(env, quality, entropy, "B"),
                    "paper_fraction": published_fraction(env, quality, entropy, m),
                }
            )
    schema = {
        **CELL_SCHEMA,
        "our_hv": pl.Float64,
        "our_b_hv": pl.Float64,
        "our_fraction": pl.Float64,
        "paper_hv": pl.Float64,
        "paper_b_hv": pl.Float64,
        "paper_fraction": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall's tau-a between two rankings of the same items (None for fewer than two items)."""
    n = len(a)
    if n < 2:
        return None
    s = sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) for i in range(n) for j in range(i + 1, n))
    return float(s / (n * (n - 1) / 2))


def comparison_table(long: pl.DataFrame, datasets: Sequence[Dataset], models: Sequence[str]) -> Table:
    """Wide form of :func:`comparison_long`: one cell "ours / paper" per model, and how well the
    orderings of the models agree (Kendall's tau over the models both sides have)."""
    models = model_order(models)
    header = [
        Cell("env"),
        Cell("dataset"),
        Cell("B HV ours (unit)"),
        *[Cell(f"{display_name(m)} ours / paper") for m in models],
        Cell("rank agreement τ", "rank agreement $\\tau$"),
    ]
    by_key = {(r["env"], r["quality"], r["entropy"], r["model"]): r for r in long.iter_rows(named=True)}
    rows, any_missing, any_unpublished, any_withheld = [], False, False, False

    def frac(x):
        return MISSING if x is None else fmt_number(x)[0]

    for env, quality, entropy in datasets:
        b = next((by_key[(env, quality, entropy, m)]["our_b_hv"] for m in models), None)
        unit = HV_UNITS.get(env, 1.0)
        row = [
            Cell(env),
            Cell(dataset_label(quality, entropy)),
            Cell(
                MISSING if b is None else f"{fmt_number(b)[0]} (×{unit_label(unit)})",
                "---" if b is None else f"{fmt_number(b)[1]} ({unit_latex(unit)})",
            ),
        ]
        ours_v, paper_v, unmatched = [], [], False
        for m in models:
            r = by_key[(env, quality, entropy, m)]
            any_missing |= r["our_fraction"] is None
            any_unpublished |= r["paper_fraction"] is None
            row.append(Cell(f"{frac(r['our_fraction'])} / {frac(r['paper_fraction'])}"))
            if r["our_fraction"] is not None and r["paper_fraction"] is not None:
                ours_v.append(r["our_fraction"])
                paper_v.append(r["paper_fraction"])
            unmatched |= r["our_fraction"] is None and r["paper_fraction"] is not None
        # an ordering of part of the paper's models (a row still being run) would read as agreement
        # over the row: no tau until every model the paper reports has ours
        tau = None if unmatched else kendall_tau(ours_v, paper_v)
        any_withheld |= unmatched and len(ours_v) >= 2
        row.append(Cell(MISSING if tau is None else f"{tau:+.2f}"))
        rows.append(row)
    notes = [
        "Each cell: the model's mean HV over seeds divided by B, the HV of the dataset's own front (its "
        "trajectories' returns), ours / the paper's (PEDA paper, High-H datasets; docs/protocol.md). 1.00 means as "
        "good as the data's front; above 1 the model stitched a better front than its data.",
        "Rank agreement: Kendall's τ between our and the paper's ordering of the models in the row "
        "(+1 same order, −1 reversed), over the models both sides have.",
    ]
    if any_unpublished:
        notes.append(
            f"{MISSING} after the slash: the paper publishes no number for this cell (it reports High-H "
            f"({PUBLISHED_ENTROPY}-entropy) datasets only)."
        )
    if any_missing:
        notes.append(
            f"{MISSING} before the slash: not evaluated yet (no evaluation file), or no B to divide by (no card "
            "of the dataset given, or a data HV of 0)."
        )
    if any_withheld:
        notes.append(
            f"{MISSING} as rank agreement where the row has numbers of ours: a model the paper reports has none "
            "yet, and the ordering of part of the row is not shown."
        )
    return Table("Paper comparison: HV as a fraction of B, ours / published", header, rows, notes)
