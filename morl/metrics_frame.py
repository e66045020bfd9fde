"""The metrics frame: one row of metrics per evaluation file, recomputed from its achieved returns.

:func:`collect_metrics` reads the model evaluations and behavior fronts given (refused first where
they would be counted twice or do not belong together, :mod:`morl.evaluation_checks`) and returns
the frame every result table starts from (:data:`METRICS_SCHEMA`: HV, SP, the ratio deviations,
utility, EUM, IGD, cardinality, the share of full-length episodes and, for a coverage variant, the measures at its held-out
preferences), and one of the behavior policy and the trivial zero- and random-action policies per
env (:data:`BASELINES_SCHEMA`).

:func:`read_data_fronts` reads B of each dataset, the HV of its own front, from the dataset cards;
:func:`read_front_models` the front models MODULI's return deviation RD is measured against.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

from morl.data import DataFileError, FileMismatchError, short_hash
from morl.dataset_info import read_card
from morl.envs import get_spec
from morl.errors import InputError
from morl.evaluate import read_evaluation, summarize
from morl.evaluation_checks import check_evaluations, entropy_label, refuse_same_files
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
)
from morl.tables import Dataset

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
    "full_length": pl.Float64,
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


def _run_key(meta: dict) -> tuple:
    """A run without its coverage: env, quality, entropy level, model, training seed."""
    return meta.get("env_id"), meta.get("quality"), meta.get("entropy"), meta.get("model"), meta.get("train_seed")


def front_measures(env_id: str, returns, lengths) -> dict[str, float]:
    """EUM and cardinality of one set of achieved returns, and the share of its episodes that ran to
    the task's step limit (``full_length``: on a task with a termination rule, 1 less the share
    that fell, which the HV, counting only non-dominated points, barely sees)."""
    limit = get_spec(env_id).max_episode_steps
    full = float(np.mean(np.asarray(lengths) >= limit))
    return {"eum": eum(returns), "cardinality": cardinality(returns), "full_length": full}


def collect_metrics(
    model_evals: Iterable[str | os.PathLike],
    behavior_evals: Iterable[str | os.PathLike],
    front_models: Iterable[str | os.PathLike] = (),
):
    """One row per evaluation: env, quality, entropy, model, seed, hv, sp, ratio_dev (MODULI's),
    ratio_dev_all (ours), utility, n_nondominated, n_points, eum, igd (of the run's non-dominated
    points, to the union front of the behavior policy's and every model's points evaluated on the
    same dataset, from the files given), cardinality, full_length (the share of episodes that ran to
    the task's step limit), and for a coverage variant of a dataset (its entropy labelled e.g.
    ``high-shattered``) the held-out count, HV, MODULI's RD (from the front model among
    ``front_models`` fitted on the complete dataset the variant's evaluation records, with its step
    count) and the distance to the data front (:func:`held_out_measures`), the HV the same model and
    seed reached at those preferences when trained on the complete data and the HV of B there
    (:func:`held_out_on_complete`, if among the files); baselines have no igd.

    The files are checked first (:func:`morl.evaluation_checks.check_evaluations`); a file given twice is refused.
    """
    model_evals, behavior_evals, front_models = list(model_evals), list(behavior_evals), list(front_models)
    refuse_same_files(model_evals + behavior_evals + front_models)
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
    sources = {meta.get("coverage_source_sha256") for _, meta, arr in models if "held_out" in arr}
    for sha, (model_path, _) in fitted.items():
        if sha not in sources:
            raise DataFileError(
                model_path,
                f"this front model was fitted on the dataset sha256 {short_hash(sha)}, from which no evaluated "
                "coverage variant was derived; give the front model of the complete dataset the variants were cut from",
            )
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
                **front_measures(meta["env_id"], arr["return"], arr["length"]),
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
                    **front_measures(meta["env_id"], arr["return"][sel], arr["length"][sel]),
                    "igd": None,
                    "file": str(path),
                }
            )
    return pl.DataFrame(rows, schema=METRICS_SCHEMA), pl.DataFrame(baselines, schema=BASELINES_SCHEMA)


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
