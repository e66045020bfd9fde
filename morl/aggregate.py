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
  each dataset's own front, read from the dataset cards given (:func:`read_data_fronts`);
* ``paper_comparison.{md,csv,tex}``: each model's HV as a fraction of B, ours beside the paper's;
* ``results.md`` (every table, in one Markdown file) and ``summary.html`` (one self-contained
  page with every table and the HV and Pareto figures embedded);
* ``plots/pareto/<env>_<quality>-<entropy>.{png,pdf}``: achieved points and fronts;
* ``plots/preference/<env>_<quality>-<entropy>.{png,pdf}``: target vs achieved preference;
* ``plots/hv/<env>.{png,pdf}``: HV by quality and entropy level, bars with seed error bars;
* ``plots/curves/<env>_<quality>-<entropy>.{png,pdf}``: training curves (when curves are given);
* ``intervals.{md,csv,tex}``: per cell, HV with a bootstrap interval over seeds, HV / B, EUM, IGD,
  cardinality and MODULI's ratio deviation, and for a coverage variant the held-out HV, MODULI's RD
  and the distance to the data front; ``iqm.{md,csv,tex}`` and ``improvement.{md,csv,tex}``: the interquartile mean
  of HV / B per model and the probability of improvement between models, with intervals
  (:mod:`morl.stats`), drawn in ``plots/statistics/{iqm,improvement}.{png,pdf}``;
* with coverage variants among the datasets, ``generalisation.{md,csv,tex}``: per variant row and
  model, the HV / B reached at the held-out preferences (the behavior policy's HV at the same points) by the runs
  trained on the variant and by the same model and seeds trained on the complete data, and
  ``generalisation_iqm.{md,csv,tex}``: the interquartile mean of both per model and coverage, with
  intervals, drawn in ``plots/statistics/generalisation.{png,pdf}``.

Cells without evaluations are shown as "—" with a footnote, so everything can be built from
whatever evaluations exist while an experiment is running. Files that would be counted twice, or
that disagree on what they are (:func:`check_evaluations`), are refused before anything is written.

MODULI's return deviation needs the front model of each complete dataset a coverage variant was
derived from (:mod:`morl.front_model`, one file per complete dataset, matched by the dataset's
SHA-256 that the variant's evaluations record); a variant run whose front model is not given has
no RD ("—").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from morl.data import DataFileError, FileMismatchError, atomic_write, short_hash
from morl.dataset_info import read_card
from morl.envs import ENV_SPECS, get_spec
from morl.errors import InputError
from morl.evaluate import read_evaluation, summarize
from morl.front_model import FrontModel, load_front_model
from morl.metrics import (
    cardinality,
    eum,
    front_distance,
    front_scale,
    hypervolume,
    igd,
    pareto_front,
    return_deviation,
    trivial_ratio_text,
)
from morl.paper import HV_UNITS, SP_UNITS  # noqa: F401 (re-exported: the paper's units)
from morl.progress import log
from morl.tables import (
    HV,
    MISSING,  # noqa: F401 (re-exported)
    SP,
    cell_stats,
    comparison_long,
    comparison_table,
    generalisation_iqm_table,
    generalisation_long,
    generalisation_table,
    html_document,
    improvement_table,
    interval_long,
    interval_table,
    iqm_table,
    is_variant,
    metric_long,
    metric_table,
    model_order,
    normalised_scores,
    ordered_models,
    sort_datasets,
    to_html,
    to_latex,
    to_markdown,
    unit_label,
)

Dataset = tuple[str, str, str]

_COVERAGE_COLUMNS = (
    "coverage",
    "n_held_out",
    "hv_held_out",
    "hv_held_out_complete",
    "b_held_out",
    "rd_held_out",
    "rd_front_model_steps",
    "front_distance_held_out",
)
METRICS_SCHEMA = {
    "env": pl.String,
    "quality": pl.String,
    "entropy": pl.String,
    "model": pl.String,
    "seed": pl.Int64,
    "hv": pl.Float64,
    "sp": pl.Float64,
    "ratio_dev": pl.Float64,
    "ratio_dev_all": pl.Float64,
    "utility": pl.Float64,
    "n_nondominated": pl.Int64,
    "n_points": pl.Int64,
    "eum": pl.Float64,
    "igd": pl.Float64,
    "cardinality": pl.Int64,
    "coverage": pl.String,
    "n_held_out": pl.Int64,
    "hv_held_out": pl.Float64,
    "hv_held_out_complete": pl.Float64,
    "b_held_out": pl.Float64,
    "rd_held_out": pl.Float64,
    "rd_front_model_steps": pl.Int64,
    "front_distance_held_out": pl.Float64,
    "file": pl.String,
}
BASELINES_SCHEMA = {
    "env": pl.String,
    "policy": pl.String,
    **{k: METRICS_SCHEMA[k] for k in list(METRICS_SCHEMA)[5:] if k not in _COVERAGE_COLUMNS},
}


def entropy_label(meta: dict) -> str:
    """The entropy of an evaluation's dataset as the tables label it: ``high`` for the complete data,
    ``high-shattered`` for its shattered coverage variant (the run folder names it the same way)."""
    coverage = meta.get("coverage")
    return meta.get("entropy") if coverage in (None, "complete") else f"{meta.get('entropy')}-{coverage}"


def held_out_measures(meta: dict, arr: dict, front_model: FrontModel | None = None) -> dict:
    """Over the preferences a coverage variant held out: how many, the HV of the returns achieved
    there, MODULI's return deviation RD from ``front_model`` (the front model of the complete dataset
    the variant was derived from; None, or a front model that could not be fitted: no RD) and this
    project's distance to the complete data's front (nulls for complete data).

    The distance to the data front divides each objective by the largest value the complete data's
    front takes over the whole grid (:func:`morl.metrics.front_scale` of ``data_front_return``), so
    every variant of one dataset is measured in the same units; RD is in raw returns.
    """
    if "held_out" not in arr:
        return {
            "coverage": meta.get("coverage") or "complete",
            "n_held_out": None,
            "hv_held_out": None,
            "rd_held_out": None,
            "rd_front_model_steps": None,
            "front_distance_held_out": None,
        }
    sel = arr["held_out"]
    returns = arr["return"][sel]
    scored = len(returns) > 0
    fitted = front_model is not None and front_model.fitted
    rd = return_deviation(returns, front_model.predict(arr["preference"][sel])) if scored and fitted else None
    scale = front_scale(arr["data_front_return"])
    return {
        "coverage": meta.get("coverage"),
        "n_held_out": int(sel.sum()),
        "hv_held_out": float(hypervolume(returns)) if scored else None,
        "rd_held_out": rd,
        "rd_front_model_steps": int(front_model.info["steps"]) if fitted else None,
        "front_distance_held_out": front_distance(returns, arr["data_front_return"][sel], scale) if scored else None,
    }


def read_front_models(paths: Sequence[str | os.PathLike]) -> dict[str, tuple[str | os.PathLike, FrontModel]]:
    """The front models of ``paths`` keyed by the SHA-256 of the dataset each was fitted on; two
    files of one dataset are refused, naming both."""
    models: dict[str, tuple[str | os.PathLike, FrontModel]] = {}
    for path in paths:
        model = load_front_model(path)
        sha = model.info.get("source_sha256")
        if not isinstance(sha, str):
            raise DataFileError(path, "front model does not record the SHA-256 of the dataset it was fitted on")
        if sha in models:
            raise FileMismatchError(
                models[sha][0],
                path,
                [f"both are front models of the dataset sha256 {short_hash(sha)}; give one per dataset"],
            )
        models[sha] = (path, model)
    return models


def _preference_keys(preferences: np.ndarray) -> list[tuple[float, ...]]:
    # Grid points are written from the same float64 grid, so nine decimals tell them apart exactly.
    return [tuple(row) for row in np.round(np.asarray(preferences, float), 9)]


def held_out_on_complete(variant: dict, complete: dict | None) -> float | None:
    """The HV that another evaluation reached at the preferences a coverage-variant run held out
    (``variant``, ``complete``: arrays of :func:`morl.evaluate.read_evaluation`; ``complete`` the
    same model and seed trained on the complete data, or B's front). None when there is no such
    evaluation, nothing was held out, or it was not evaluated at every held-out preference (another
    grid)."""
    if complete is None or "held_out" not in variant or not variant["held_out"].any():
        return None
    wanted = set(_preference_keys(variant["preference"][variant["held_out"]]))
    keys = _preference_keys(complete["preference"])
    sel = np.array([k in wanted for k in keys], bool)
    if {k for k, s in zip(keys, sel, strict=True) if s} != wanted:
        return None
    return float(hypervolume(complete["return"][sel]))


def _refuse_same_files(paths: Sequence[str | os.PathLike]) -> None:
    """One file given twice (however spelled, or through a link) would be counted twice."""
    seen: dict[tuple, str | os.PathLike] = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue  # reading it names the file and the problem
        key = (st.st_dev, st.st_ino)
        if key in seen:
            raise InputError(f"{seen[key]} and {path} are the same file; each run counts once")
        seen[key] = path


def check_evaluations(
    model_evals: Sequence[tuple[str | os.PathLike, dict]], behavior_evals: Sequence[tuple[str | os.PathLike, dict]]
) -> None:
    """Refuse evaluation files (``(path, metadata)`` pairs) that the tables would count twice or
    combine although they disagree; each error names both files.

    Counted twice: two evaluations of one checkpoint (``checkpoint_sha256``), or of one run (env,
    dataset, model, training seed). Disagreeing: evaluations of one cell (env, quality, entropy) made
    from different dataset files (``dataset_sha256``); two behavior fronts of one env; an evaluation
    whose dataset was collected by another behavior policy (``behavior_sha256``) than the env's front
    evaluates or than another evaluation's dataset; a model normalised with another expert-high
    dataset (``reference_dataset_sha256``) than the env's expert-high evaluations were made from.
    Facts a file does not record (older files, imported D4MORL datasets) are not compared.
    """
    for path, meta in model_evals:
        if meta.get("kind") != "model":
            raise DataFileError(path, f"not a model evaluation (its metadata kind is {meta.get('kind')!r})")
    for path, meta in behavior_evals:
        if meta.get("kind") != "behavior":
            raise DataFileError(path, f"not a behavior front (its metadata kind is {meta.get('kind')!r})")
    checkpoints, runs, cells, fronts = {}, {}, {}, {}
    behavior: dict[str, tuple] = {}  # env -> (sha256, path, what the file says about it)
    expert_high: dict[str, tuple] = {}

    def agree(facts: dict, key, sha, path, says: str) -> None:
        if not sha:
            return
        if key in facts and facts[key][0] != sha:
            first_sha, first, first_says = facts[key]
            raise FileMismatchError(
                first,
                path,
                [f"the first {first_says.format(short_hash(first_sha))}, the second {says.format(short_hash(sha))}"],
            )
        facts.setdefault(key, (sha, path, says))

    for path, meta in behavior_evals:
        env = meta.get("env_id")
        if env in fronts:
            raise FileMismatchError(fronts[env], path, [f"both are behavior fronts of {env}"])
        fronts[env] = path
        agree(behavior, env, meta.get("checkpoint_sha256"), path, "is the front of behavior policy sha256 {}")
    _check_comparable(model_evals, behavior_evals)
    for path, meta in model_evals:
        env, cell = meta.get("env_id"), (meta.get("env_id"), meta.get("quality"), entropy_label(meta))
        run = (*cell, meta.get("model"), meta.get("train_seed"))
        sha = meta.get("checkpoint_sha256")
        if sha and sha in checkpoints:
            raise InputError(
                f"{checkpoints[sha]} and {path} are evaluations of the same checkpoint (sha256 "
                f"{short_hash(sha)}); each run counts once"
            )
        if sha:
            checkpoints[sha] = path
        if run in runs:
            raise InputError(
                f"{runs[run]} and {path} are two evaluations of run {env} {cell[1]}-{cell[2]} {run[3]} "
                f"seed {run[4]}; each run counts once"
            )
        runs[run] = path
        dataset_sha = meta.get("dataset_sha256")
        if dataset_sha and cell in cells and cells[cell][0] != dataset_sha:
            raise FileMismatchError(
                cells[cell][1],
                path,
                [
                    f"both claim cell {env} {cell[1]}-{cell[2]}, but the first was made from dataset sha256 "
                    f"{short_hash(cells[cell][0])}, the second from {short_hash(dataset_sha)}"
                ],
            )
        if dataset_sha:
            cells.setdefault(cell, (dataset_sha, path))
        agree(
            behavior, env, meta.get("behavior_sha256"), path, "is of a dataset collected by behavior policy sha256 {}"
        )
        if cell[1:] == ("expert", "high"):
            agree(expert_high, env, dataset_sha, path, f"was made from the {env} expert-high dataset sha256 {{}}")
        agree(
            expert_high,
            env,
            meta.get("reference_dataset_sha256"),
            path,
            "is of a model normalised with the expert-high dataset sha256 {}",
        )


def _check_comparable(model_evals, behavior_evals) -> None:
    """Files one table combines were evaluated alike and trained alike: every file with the same
    evaluation seed and episodes per point, every file of an env on the same number of preference
    points, and the seeds of one (cell, model) with the same training settings. Each error names
    both files and the difference. Facts a file does not record are not compared."""
    first_eval: tuple | None = None
    grids: dict[str, tuple] = {}
    settings: dict[tuple, tuple] = {}
    for path, meta in [*behavior_evals, *model_evals]:
        how = (meta.get("eval_seed"), meta.get("episodes"))
        if None not in how:
            if first_eval is not None and first_eval[0] != how:
                (seed0, ep0), other = first_eval
                raise FileMismatchError(
                    other,
                    path,
                    [
                        f"the first was evaluated with eval seed {seed0} and {ep0} "
                        f"episode(s) per point, the second with eval seed {how[0]} and "
                        f"{how[1]}; their returns are not comparable"
                    ],
                )
            first_eval = first_eval or (how, path)
        env, points = meta.get("env_id"), meta.get("_points")
        if points is not None:
            if env in grids and grids[env][0] != points:
                raise FileMismatchError(
                    grids[env][1],
                    path,
                    [
                        f"both are of {env}, but the first was evaluated on "
                        f"{grids[env][0]} preference points and the second on "
                        f"{points}; their fronts are not comparable"
                    ],
                )
            grids.setdefault(env, (points, path))
    for path, meta in model_evals:
        run_settings = meta.get("train_settings")
        if run_settings is None:
            continue
        group = (meta.get("env_id"), meta.get("quality"), entropy_label(meta), meta.get("model"))
        if group in settings and settings[group][0] != run_settings:
            first_settings, first = settings[group]
            diff = sorted(
                k for k in set(first_settings) | set(run_settings) if first_settings.get(k) != run_settings.get(k)
            )
            shown = ", ".join(f"{k} {first_settings.get(k)!r} vs {run_settings.get(k)!r}" for k in diff[:4])
            raise FileMismatchError(
                first,
                path,
                [
                    f"both are {group[3]} runs of {group[0]} {group[1]}-{group[2]}, "
                    f"trained with other settings than their seed ({shown}); a "
                    "cell's seeds must differ in the seed only"
                ],
            )
        settings.setdefault(group, (run_settings, path))


def _run_key(meta: dict) -> tuple:
    """A run without its coverage: env, quality, entropy level, model, training seed."""
    return meta.get("env_id"), meta.get("quality"), meta.get("entropy"), meta.get("model"), meta.get("train_seed")


def front_measures(returns) -> dict[str, float]:
    """EUM and cardinality of one set of achieved returns."""
    return {"eum": eum(returns), "cardinality": cardinality(returns)}


def collect_metrics(
    model_evals: Iterable[str | os.PathLike],
    behavior_evals: Iterable[str | os.PathLike],
    front_models: Iterable[str | os.PathLike] = (),
):
    """One row per evaluation: env, quality, entropy, model, seed, hv, sp, ratio_dev (MODULI's),
    ratio_dev_all (ours), utility, n_nondominated, n_points, eum, igd (of the run's non-dominated
    points, to the union front of the behavior policy's and every model's points evaluated on the
    same dataset, from the files given), cardinality, and for a coverage variant of a dataset (its entropy labelled e.g.
    ``high-shattered``) the held-out count, HV, MODULI's RD (from the front model among
    ``front_models`` fitted on the complete dataset the variant's evaluation records, with its step
    count) and the distance to the data front (:func:`held_out_measures`), the HV the same model and
    seed reached at those preferences when trained on the complete data and the HV of B there
    (:func:`held_out_on_complete`, if among the files); baselines have no igd.

    The files are checked first (:func:`check_evaluations`); a file given twice is refused.
    """
    model_evals, behavior_evals, front_models = list(model_evals), list(behavior_evals), list(front_models)
    _refuse_same_files(model_evals + behavior_evals + front_models)
    if not model_evals and not behavior_evals:
        raise InputError("no evaluation files given: there is nothing to tabulate")
    models = [(path, *read_evaluation(path)) for path in model_evals]
    fronts = [(path, *read_evaluation(path)) for path in behavior_evals]
    # the preference points each file was evaluated on (a front holds three policies' rows)
    check_evaluations(
        [(p, {**m, "_points": len(a["preference"])}) for p, m, a in models],
        [(p, {**m, "_points": len(a["preference"]) // 3}) for p, m, a in fronts],
    )
    behavior_points = {
        meta["env_id"]: {k: arr[k][arr["policy"] == "behavior"] for k in ("preference", "return")}
        for _, meta, arr in fronts
    }
    behavior_returns = {env: points["return"] for env, points in behavior_points.items()}
    # IGD's reference: per dataset, the front of everything evaluated on it, B included
    union: dict[tuple, list] = {}
    for _, meta, arr in models:
        cell = (meta["env_id"], meta["quality"], entropy_label(meta))
        union.setdefault(cell, [behavior_returns[cell[0]]] if cell[0] in behavior_returns else []).append(arr["return"])
    reference = {cell: pareto_front(np.concatenate(parts)) for cell, parts in union.items()}
    # The same model and seed trained on the complete data, for what a variant's cut cost
    complete = {_run_key(meta): arr for _, meta, arr in models if "held_out" not in arr}
    fitted = read_front_models(front_models)
    rows = []
    for path, meta, arr in models:
        front_model = None
        if "held_out" in arr and meta.get("coverage_source_sha256") in fitted:
            model_path, front_model = fitted[meta["coverage_source_sha256"]]
            if front_model.n_obj != arr["return"].shape[1]:
                raise FileMismatchError(
                    model_path,
                    path,
                    [f"the front model has {front_model.n_obj} objectives, the evaluation {arr['return'].shape[1]}"],
                )
        s = summarize(arr["preference"], arr["return"])
        cell = (meta["env_id"], meta["quality"], entropy_label(meta))
        rows.append(
            {
                "env": meta["env_id"],
                "quality": meta["quality"],
                "entropy": cell[2],
                "model": meta["model"],
                "seed": meta["train_seed"],
                **s,
                **front_measures(arr["return"]),
                "igd": igd(pareto_front(arr["return"]), reference[cell]),
                **held_out_measures(meta, arr, front_model),
                "hv_held_out_complete": held_out_on_complete(arr, complete.get(_run_key(meta))),
                "b_held_out": held_out_on_complete(arr, behavior_points.get(meta["env_id"])),
                "file": str(path),
            }
        )
    baselines = []
    for path, meta, arr in fronts:
        for policy in ("behavior", "zero", "random"):
            sel = arr["policy"] == policy
            s = summarize(arr["preference"][sel], arr["return"][sel])
            baselines.append(
                {
                    "env": meta["env_id"],
                    "policy": policy,
                    **s,
                    **front_measures(arr["return"][sel]),
                    "igd": None,
                    "file": str(path),
                }
            )
    return pl.DataFrame(rows, schema=METRICS_SCHEMA), pl.DataFrame(baselines, schema=BASELINES_SCHEMA)


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


def check_curves(curves: Mapping[str, str | os.PathLike]) -> None:
    """Refuse a training curve given for an evaluation of another run: the model, training seed and
    dataset SHA-256 the curve names (:func:`morl.trainer.read_curve_run`) against those the
    evaluation's metadata records, naming both files. A curve that names no run (written before
    curves named theirs) is taken as given."""
    from morl.data import read_meta
    from morl.trainer import read_curve_run

    for evaluation, curve in curves.items():
        run = read_curve_run(curve)
        if run is None:
            continue
        meta = read_meta(evaluation)
        recorded = {
            "model": meta.get("model"),
            "seed": meta.get("train_seed"),
            "dataset_sha256": meta.get("dataset_sha256"),
        }
        differences = []
        for key in ("model", "seed"):
            if run[key] != recorded[key]:
                differences.append(f"{key} {run[key]} in the curve, {recorded[key]} in the evaluation")
        if run["dataset_sha256"] != recorded["dataset_sha256"]:
            differences.append(
                f"dataset {short_hash(run['dataset_sha256'])} in the curve, "
                f"{short_hash(recorded['dataset_sha256'])} in the evaluation"
            )
        if differences:
            raise FileMismatchError(
                curve, evaluation, [*differences, "give the curves in the order of the evaluations"]
            )


def read_data_fronts(cards: Sequence[str | os.PathLike]) -> dict[Dataset, float]:
    """B of each dataset, the HV of its own front, from its card (:func:`morl.dataset_info.read_card`):
    (env, quality, entropy) -> data HV. Two cards of one dataset that disagree are refused, naming
    both files."""
    out: dict[Dataset, float] = {}
    source: dict[Dataset, str] = {}
    for path in cards:
        card = read_card(path)
        key = (card["env"], card["quality"], card["entropy"])
        if key in out and out[key] != card["data_hv"]:
            raise FileMismatchError(
                source[key], path, [f"two cards of {'/'.join(key)} with data HV {out[key]} and {card['data_hv']}"]
            )
        out[key], source[key] = card["data_hv"], str(path)
    return out


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
        plots: False writes the tables only (``summary.html`` then has no figures).
        front_models: front model files (``front_model`` stage, :mod:`morl.front_model`), one per
            complete dataset with coverage variants: MODULI's RD of the variants' runs.
        data_cards: dataset cards (``*.card.md``, :mod:`morl.dataset_info`), one per complete
            dataset: B of its rows, the HV of the data's own front. A row without one has no B
            and no HV / B ("—").
    """
    out_dir = Path(out_dir)
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

    written = (
        write_plots(
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
        if plots
        else {}
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
    probability-of-improvement frames of :func:`morl.tables.iqm_table` and :func:`morl.tables.improvement_table`)
    and ``statistics:generalisation`` (from the frame of :func:`morl.tables.generalisation_iqm_table`)."""
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
