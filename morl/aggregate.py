"""Result tables, plots and the tables page from evaluation files.

Reads every per-point evaluation file given, recomputes the metrics from the achieved returns,
and writes into ``out_dir``

* ``metrics.csv`` (one row per evaluation: env, quality, entropy, model, seed, HV, SP, the ratio
  deviations, mean utility, EUM, IGD, cardinality, and for a coverage variant the held-out HV,
  MODULI's return deviation RD and the distance to the data front)
  and ``baselines.csv`` (the behavior policy's front on the grid and the trivial zero-/random-action
  policies, one row each per env);
* ``hv.{md,csv,tex}`` and ``sp.{md,csv,tex}``: the HV and SP tables in the paper's layout
  (:func:`morl.tables.metric_table`; the CSV has one row per cell and seed); the HV table's B is
  each dataset's own front, read from the dataset cards given
  (:func:`morl.metrics_frame.read_data_fronts`);
* ``paper_comparison.{md,csv,tex}``: each model's HV as a fraction of B, ours beside the paper's
  (:func:`morl.tables.comparison_table`);
* ``results.md`` (every table, in one Markdown file) and ``summary.html`` (one self-contained
  page with every table and the HV and Pareto figures embedded; not written with the tables
  alone);
* ``plots/pareto/<env>_<quality>-<entropy>.{png,pdf}``: achieved points and fronts;
* ``plots/preference/<env>_<quality>-<entropy>.{png,pdf}``: target vs achieved preference;
* ``plots/hv/<env>.{png,pdf}``: HV by quality and entropy level, bars with seed error bars;
* ``plots/curves/<env>_<quality>-<entropy>.{png,pdf}``: training curves (when curves are given);
* ``intervals.{md,csv,tex}``: per cell, HV with a bootstrap interval over seeds, HV / B, EUM, IGD,
  cardinality and MODULI's ratio deviation, and for a coverage variant the held-out HV, MODULI's RD
  and the distance to the data front; ``iqm.{md,csv,tex}`` and ``improvement.{md,csv,tex}``: the interquartile mean
  of HV / B per model and the probability of improvement between models, with intervals
  (:mod:`morl.intervals`), drawn in ``plots/statistics/{iqm,improvement}.{png,pdf}``;
* with coverage variants among the datasets, ``generalisation.{md,csv,tex}``: per variant row and
  model, the HV / B reached at the held-out preferences (the behavior policy's HV at the same points) by the runs
  trained on the variant and by the same model and seeds trained on the complete data, and
  ``generalisation_iqm.{md,csv,tex}``: the interquartile mean of both per model and coverage, with
  intervals (:mod:`morl.generalisation`), drawn in ``plots/statistics/generalisation.{png,pdf}``.

The metrics are collected by :func:`morl.metrics_frame.collect_metrics` and every table is
rendered by :mod:`morl.render`. Cells without evaluations are shown as "—" with a footnote, so
everything can be built from whatever evaluations exist while an experiment is running. Files that
would be counted twice, or that disagree on what they are
(:func:`morl.evaluation_checks.check_evaluations`), are refused before anything is written.

MODULI's return deviation needs the front model of each complete dataset a coverage variant was
derived from (:mod:`morl.front_model`, one file per complete dataset, matched by the dataset's
SHA-256 that the variant's evaluations record); a variant run whose front model is not given has
no RD ("—").
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from morl.data import atomic_write, read_meta
from morl.envs import ENV_SPECS, get_spec
from morl.errors import InputError
from morl.evaluate import read_evaluation
from morl.evaluation_checks import check_curves, check_datasets_unchanged
from morl.generalisation import generalisation_iqm_table, generalisation_long, generalisation_table, is_variant
from morl.intervals import improvement_table, interval_long, interval_table, iqm_table, normalised_scores
from morl.metrics import trivial_ratio_text
from morl.metrics_frame import collect_metrics, read_data_fronts
from morl.paper import HV_UNITS
from morl.progress import log
from morl.render import html_document, to_html, to_latex, to_markdown
from morl.tables import (
    HV,
    SP,
    Dataset,
    cell_stats,
    comparison_long,
    comparison_table,
    metric_long,
    metric_table,
    model_order,
    ordered_models,
    sort_datasets,
    unit_label,
)


def baseline_table(baselines: pl.DataFrame) -> str:
    """B against the trivial zero-action and random-action policies (HV, paper units)."""
    lines = ["| env | B (behavior) | zero actions | random actions | B / better trivial |", "|---|---|---|---|---|"]
    for env in sorted(set(baselines["env"].to_list())):
        hv = {r["policy"]: r["hv"] for r in baselines.filter(pl.col("env") == env).iter_rows(named=True)}
        unit = HV_UNITS.get(env, 1.0)
        ratio = trivial_ratio_text(hv["behavior"], hv["zero"], hv["random"])
        lines.append(
            f"| {env} | {hv['behavior'] / unit:.3f} | {hv['zero'] / unit:.3f} | {hv['random'] / unit:.3f} | {ratio} |"
        )
    units = ", ".join(f"×{unit_label(HV_UNITS.get(e, 1.0))} for {e}" for e in sorted(set(baselines["env"].to_list())))
    return "\n".join(lines) + f"\n\nHV in the paper's units ({units})."


def _write_text(path: Path, text: str) -> Path:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return path


def _write_csv(path: Path, frame: pl.DataFrame) -> Path:
    atomic_write(path, lambda tmp: frame.write_csv(tmp))
    return path


def _read_curve(path: str | os.PathLike) -> pl.DataFrame:
    try:
        curve = pl.read_csv(path)
    except Exception as exc:  # polars raises several kinds
        raise InputError(f"{path}: not a readable training curve CSV ({exc})") from exc
    if not {"step", "loss"} <= set(curve.columns):
        raise InputError(f"{path}: a training curve needs columns step and loss, found {curve.columns}")
    return curve


def aggregate(
    model_evals: Sequence[str | os.PathLike],
    behavior_evals: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    datasets: Sequence[Dataset] | None = None,
    models: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    curves: Mapping[str, str | os.PathLike] | None = None,
    plots: bool = True,
    front_models: Sequence[str | os.PathLike] = (),
    data_cards: Sequence[str | os.PathLike] = (),
    datasets_in_use: Sequence[str | os.PathLike] = (),
) -> dict[str, Path]:
    """Write the tables and plots listed in the module docstring into ``out_dir``; return their paths.

    Args:
        model_evals: model evaluation files (``evaluate`` stage); any subset of the experiment.
        behavior_evals: behavior-front evaluation files (``behavior_front`` stage), one per env.
        datasets: the table rows (env, quality, entropy); default: those evaluated.
        models: the table columns besides B; default: those evaluated.
        seeds: the configured training seeds; a cell with fewer is marked "†".
        curves: training curve CSV of a run, keyed by that run's evaluation file (as given in
            ``model_evals``); the curve belongs to the env, dataset, model and seed the
            evaluation file's metadata names.
        plots: False writes the tables only: no plots and no ``summary.html`` (a page of the
            tables alone would replace, without its figures, one a full run wrote in ``out_dir``).
        front_models: front model files (``front_model`` stage, :mod:`morl.front_model`), one per
            complete dataset with coverage variants: MODULI's RD of the variants' runs.
        data_cards: dataset cards (``*.card.md``, :mod:`morl.dataset_info`), one per complete
            dataset: B of its rows, the HV of the data's own front. A row without one has no B
            and no HV / B ("—").
        datasets_in_use: dataset files the caller uses now (the workflow's imported datasets): an
            evaluation made from one of them when it held other bytes is refused
            (:func:`morl.evaluation_checks.check_datasets_unchanged`).
    """
    out_dir = Path(out_dir)
    if datasets_in_use:
        check_datasets_unchanged([(path, read_meta(path)) for path in model_evals], datasets_in_use)
    check_curves(curves or {})
    data_hv = read_data_fronts(data_cards)
    metrics, baselines = collect_metrics(model_evals, behavior_evals, front_models)
    # one row order whatever the order of the files given (a run's own, or merged slices')
    row_of = {d: i for i, d in enumerate(sort_datasets(metrics.select("env", "quality", "entropy").iter_rows()))}
    column_of = {m: i for i, m in enumerate(ordered_models(None, metrics))}
    metrics = (
        metrics.with_columns(
            pl.struct("env", "quality", "entropy")
            .map_elements(lambda r: row_of[(r["env"], r["quality"], r["entropy"])], return_dtype=pl.Int64)
            .alias("_row"),
            pl.col("model").replace_strict(column_of, return_dtype=pl.Int64).alias("_column"),
        )
        .sort("_row", "_column", "seed")
        .drop("_row", "_column")
    )
    baselines = baselines.sort(*[c for c in ("env", "policy", "kind") if c in baselines.columns])
    if datasets is None:
        datasets = metrics.select("env", "quality", "entropy").iter_rows()
    datasets = sort_datasets(tuple(d) for d in datasets)
    models = ordered_models(models, metrics)
    expected_seeds = len(seeds) if seeds is not None else None
    out: dict[str, Path] = {}

    out["metrics"] = _write_csv(out_dir / "metrics.csv", metrics.drop("file"))
    out["baselines"] = _write_csv(out_dir / "baselines.csv", baselines.drop("file"))

    tables = {
        "hv": metric_table(metrics, data_hv, datasets, HV, models, expected_seeds),
        "sp": metric_table(metrics, data_hv, datasets, SP, models, expected_seeds),
    }
    longs = {
        "hv": metric_long(metrics, data_hv, datasets, HV, models),
        "sp": metric_long(metrics, data_hv, datasets, SP, models),
    }
    comparison = comparison_long(metrics, data_hv, datasets, models)
    tables["paper_comparison"] = comparison_table(comparison, datasets, models)
    longs["paper_comparison"] = comparison
    longs["intervals"] = interval_long(metrics, data_hv, datasets, models)
    tables["intervals"] = interval_table(longs["intervals"])
    scores, score_rows = normalised_scores(metrics, data_hv, datasets, models)
    tables["iqm"], longs["iqm"] = iqm_table(scores, score_rows)
    tables["improvement"], longs["improvement"] = improvement_table(scores)
    if any(is_variant(entropy) for _, _, entropy in datasets):
        longs["generalisation"] = generalisation_long(metrics, datasets, models)
        tables["generalisation"] = generalisation_table(longs["generalisation"])
        tables["generalisation_iqm"], longs["generalisation_iqm"] = generalisation_iqm_table(
            metrics, longs["generalisation"]
        )
    for name, table in tables.items():
        out[f"{name}_md"] = _write_text(out_dir / f"{name}.md", f"## {table.title}\n\n{to_markdown(table)}\n")
        out[f"{name}_csv"] = _write_csv(out_dir / f"{name}.csv", longs[name])
        out[f"{name}_tex"] = _write_text(out_dir / f"{name}.tex", to_latex(table, label=f"tab:{name}"))

    md = ["# Results", ""]
    for table in tables.values():
        md += [f"## {table.title}", "", to_markdown(table), ""]
    if len(baselines):
        md += ["## Behavior front against trivial policies (HV)", "", baseline_table(baselines), ""]
    out["results"] = _write_text(out_dir / "results.md", "\n".join(md))

    if not plots:
        log.info("wrote %d tables into %s", len(tables), out_dir)
        return out
    written = write_plots(
        out_dir / "plots",
        metrics,
        data_hv,
        datasets,
        models,
        curves or {},
        behavior_evals,
        (longs["iqm"], longs["improvement"]),
        longs.get("generalisation_iqm"),
    )
    out.update(written)
    figures = [
        (f"HV by dataset, {k.split(':', 1)[1]}: mean over seeds in the paper's unit, error bars = std over seeds.", p)
        for k, p in written.items()
        if k.startswith("hv:")
    ]
    figures += [
        (
            f"Pareto front, {k.split(':', 1)[1]}: every model's achieved returns (faint), its non-dominated "
            "points (outlined) and B's front (black).",
            p,
        )
        for k, p in written.items()
        if k.startswith("plot:")
    ]
    figures += [
        (
            "Interquartile mean of HV / B per model over every dataset row and seed, bars = 95% stratified-bootstrap "
            "intervals (Agarwal et al. 2021).",
            p,
        )
        for k, p in written.items()
        if k == "statistics:iqm"
    ]
    figures += [
        (
            "Generalisation: per coverage variant, the interquartile mean of HV / B at the held-out preferences, "
            "trained on the complete data (gray) and on the variant (color); bars = 95% stratified-bootstrap "
            "intervals.",
            p,
        )
        for k, p in written.items()
        if k == "statistics:generalisation"
    ]
    page = html_document(
        [to_html(t, table_id=f"table-{name}") for name, t in tables.items()],
        figures,
        title="Results: tables and figures",
    )
    out["summary"] = _write_text(out_dir / "summary.html", page)
    log.info("wrote %d tables and %d plots into %s", len(tables), len(written), out_dir)
    return out


#: the folders under ``plots/``, one per kind of figure
PLOT_KINDS = ("pareto", "preference", "hv", "curves", "statistics")


def write_plots(
    plot_dir: Path,
    metrics: pl.DataFrame,
    data_hv: Mapping[Dataset, float],
    datasets: Sequence[Dataset],
    models: Sequence[str],
    curves: Mapping[str, str | os.PathLike],
    behavior_evals: Sequence[str | os.PathLike],
    statistics: tuple[pl.DataFrame, pl.DataFrame] | None = None,
    generalisation: pl.DataFrame | None = None,
) -> dict[str, Path]:
    """Every figure of the module docstring (PNG and PDF), removing any other PNG or PDF from an earlier
    aggregation in the kinds' folders; returns the PNG paths, keyed
    ``plot:<env>/<quality>-<entropy>`` (Pareto), ``preference:...``, ``curves:...``, ``hv:<env>`` and
    ``statistics:iqm`` / ``statistics:improvement`` (from ``statistics``: the IQM and
    probability-of-improvement frames of :func:`morl.intervals.iqm_table` and :func:`morl.intervals.improvement_table`)
    and ``statistics:generalisation`` (from the frame of :func:`morl.generalisation.generalisation_iqm_table`)."""
    from morl.plots import (
        curves_figure,
        generalisation_figure,
        hv_bars_figure,
        improvement_figure,
        iqm_figure,
        pareto_figure,
        preference_figure,
        save_figure,
    )

    for kind in PLOT_KINDS:
        (plot_dir / kind).mkdir(parents=True, exist_ok=True)
    behavior_points = {}
    for path in behavior_evals:
        meta, arr = read_evaluation(path)
        behavior_points[meta["env_id"]] = arr["return"][arr["policy"] == "behavior"]
    runs: dict[Dataset, dict[str, list[dict]]] = {}
    curve_by_file = {str(k): v for k, v in curves.items()}
    for row in metrics.sort("seed").iter_rows(named=True):
        _, arr = read_evaluation(row["file"])
        run = {"preference": arr["preference"], "return": arr["return"], "curve": curve_by_file.get(row["file"])}
        runs.setdefault((row["env"], row["quality"], row["entropy"]), {}).setdefault(row["model"], []).append(run)

    out: dict[str, Path] = {}
    for env, quality, entropy in datasets:
        cell = runs.get((env, quality, entropy), {})
        cell = {m: cell[m] for m in model_order(cell) if m in models}
        objectives = get_spec(env).objectives if env in ENV_SPECS else None
        name, stem = f"{env}/{quality}-{entropy}", f"{env}_{quality}-{entropy}"
        label = f"{env}, {quality} data, {entropy} preference entropy"
        if cell or env in behavior_points:
            fig = pareto_figure(
                f"Pareto front: {label}",
                {m: [r["return"] for r in rs] for m, rs in cell.items()},
                behavior_points.get(env),
                objectives,
            )
            out[f"plot:{name}"], _ = save_figure(fig, plot_dir / "pareto" / stem)
        if cell:
            fig = preference_figure(
                f"Target vs achieved preference: {label}",
                {m: [(r["preference"], r["return"]) for r in rs] for m, rs in cell.items()},
                objectives,
            )
            out[f"preference:{name}"], _ = save_figure(fig, plot_dir / "preference" / stem)
        with_curves = {m: [_read_curve(r["curve"]) for r in rs if r["curve"]] for m, rs in cell.items()}
        with_curves = {m: c for m, c in with_curves.items() if c}
        if with_curves:
            fig = curves_figure(f"Training curves: {label}", with_curves)
            out[f"curves:{name}"], _ = save_figure(fig, plot_dir / "curves" / stem)

    long = metric_long(metrics, data_hv, datasets, HV, models)
    for env in sorted({d[0] for d in datasets}):
        stats = [r for k, r in cell_stats(long.filter(pl.col("env") == env)).items()]
        if not stats:
            continue
        frame = pl.DataFrame(stats).select("quality", "entropy", "model", "mean", "std", "n")
        fig = hv_bars_figure(f"HV by dataset: {env}", frame, unit_label(HV_UNITS.get(env, 1.0)))
        out[f"hv:{env}"], _ = save_figure(fig, plot_dir / "hv" / env)
    iqm, improvement = statistics if statistics is not None else (None, None)
    if iqm is not None and len(iqm):
        out["statistics:iqm"], _ = save_figure(iqm_figure(iqm), plot_dir / "statistics" / "iqm")
    if improvement is not None and len(improvement):
        out["statistics:improvement"], _ = save_figure(
            improvement_figure(improvement), plot_dir / "statistics" / "improvement"
        )
    if generalisation is not None and len(generalisation):
        out["statistics:generalisation"], _ = save_figure(
            generalisation_figure(generalisation), plot_dir / "statistics" / "generalisation"
        )
    # A figure left from an earlier aggregation of other rows (a slice withdrawn, an env dropped from
    # the config) would sit beside the tables without anything in them backing it.
    drawn = {p.with_suffix(suffix) for p in out.values() for suffix in (".png", ".pdf")}
    for kind in PLOT_KINDS:
        for path in (plot_dir / kind).iterdir():
            if path.suffix in (".png", ".pdf") and path not in drawn:
                path.unlink()
    return out
