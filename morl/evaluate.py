"""Evaluation over the preference simplex (``docs/protocol.md``, "Evaluation").

Every point of a uniform simplex lattice is one preference ``w``. All points are rolled out
together in a :class:`~morl.envs.batched.BatchedEnv`, with one policy forward per step for the whole
batch. For a trained agent the initial return-to-go is ``g0 = w * R(w)``, where ``R`` is a
per-objective linear regression from trajectory preferences to trajectory returns, fitted on the
env's expert-high dataset (``statistics_from: expert-high``, as PEDA) or on the training dataset
(``dataset``); see ``docs/protocol.md``. The achieved raw return vector (averaged over
``episodes`` episodes) is the point of that preference; hypervolume, sparsity and friends are
computed on the set of points.

:func:`evaluate_sequential` is the slow reference the batched path is checked against (tests)
and timed against (``benchmarks/eval_speed.py``): written the way the original D4MORL/PEDA code
evaluates, one :class:`~morl.envs.gym_env.MOMujocoEnv`, one policy call with batch size 1 per step,
preference after preference. With the same seeds both run the same episodes: a batched rollout
of one point is bit-identical to the reference. For B points they differ only by float rounding,
since a float32 matrix product rounds differently for 1 row than for B rows (and for other thread
counts); chaotic contact dynamics (HalfCheetah) can amplify that ~1e-7 action difference to
whole units of return within an episode, so per-point returns of a float32 network depend,
slightly, on the grid size. With float64 networks the two agree bit for bit
(tests/test_evaluate.py).

Output: one Parquet file per evaluated policy, one row per grid point, with columns
``point, preference, target_return, return, length, episode_seeds`` and, in its ``morl``
metadata, the summary metrics, the regression coefficients and where the policy came from.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from morl import __version__
from morl.behavior import load_behavior
from morl.conditioning import initial_targets, regression_targets
from morl.coverage import check_derived_from, coverage_record, held_out
from morl.data import (
    META_KEY,
    DataFileError,
    FileMismatchError,
    atomic_write,
    file_sha256,
    fixed_size_list,
    load_trajectories,
    read_meta,
    short_hash,
)
from morl.envs import get_spec
from morl.errors import InputError
from morl.families import family, load_agent
from morl.metrics import (
    front_at,
    hypervolume,
    mean_utility,
    pareto_front,
    ratio_deviation,
    ratio_deviation_all,
    sparsity,
    trivial_ratio_text,
)
from morl.normalisation import check_reference, resolve_reference
from morl.preferences import default_divisions, simplex_grid
from morl.progress import Progress, log
from morl.rollout import BehaviorAgent, Controller, episode_seeds, rollout, rollout_sequential
from morl.runtime import torch_threads


class ConstantAgent:
    """Always the same action (zeros: the 'do nothing' baseline)."""

    def __init__(self, action: np.ndarray):
        self.action = np.asarray(action, np.float32)
        self.n = 0

    def reset(self, preferences, target_returns, generator=None) -> None:
        self.n = len(preferences)

    def act(self, obs):
        return np.broadcast_to(self.action, (self.n, self.action.shape[0])).copy()

    def observe(self, actions, rewards) -> None:
        pass


class RandomAgent:
    """Uniformly random actions within the bounds, from a seeded generator."""

    def __init__(self, low, high, seed: int):
        self.low, self.high = np.asarray(low, np.float32), np.asarray(high, np.float32)
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def reset(self, preferences, target_returns, generator=None) -> None:
        self.n = len(preferences)

    def act(self, obs):
        return self.rng.uniform(self.low, self.high, size=(self.n, self.low.shape[0])).astype(np.float32)

    def observe(self, actions, rewards) -> None:
        pass


def summarize(preferences: np.ndarray, returns: np.ndarray) -> dict[str, float]:
    """HV, SP, the ratio deviations, mean utility and the number of non-dominated points of one evaluation.

    ``ratio_dev`` is MODULI's ratio deviation, over the points PEDA keeps
    (:func:`morl.metrics.ratio_deviation`); ``ratio_dev_all`` is this project's, over every point
    (:func:`morl.metrics.ratio_deviation_all`).
    """
    return {
        "hv": float(hypervolume(returns)),
        "sp": float(sparsity(returns)),
        "ratio_dev": float(ratio_deviation(preferences, returns)),
        "ratio_dev_all": float(ratio_deviation_all(preferences, returns)),
        "utility": float(mean_utility(preferences, returns)),
        "n_nondominated": int(len(pareto_front(returns))),
        "n_points": int(len(returns)),
    }


def evaluate_agent(
    env_id: str,
    agent: Controller,
    divisions: int | None,
    episodes: int,
    seed: int,
    coef: np.ndarray | None = None,
    progress: bool = True,
    desc: str = "evaluate",
    workers: int = 1,
    target_fn=None,
    sequential: bool = False,
) -> dict[str, Any]:
    """Roll ``agent`` out on the whole grid; return per-point arrays and the summary.

    Per point: preference, target (``g0``), return vector and length averaged over ``episodes``
    episodes (seeds from :func:`episode_seeds`, one column per episode in ``seeds``).  ``workers``
    cores step the physics; the result does not depend on their number. ``target_fn(preferences)``,
    if given, makes the initial targets in place of the regression ``coef`` (:func:`grid_targets`).
    ``sequential``: with :func:`rollout_sequential`, one point and one step at a time (a reference).
    """
    return _evaluate_grid(
        env_id, agent, divisions, episodes, seed, coef, progress, desc, sequential, workers, target_fn
    )


def evaluate_sequential(env_id: str, agent: Controller, *args, **kwargs) -> dict[str, Any]:
    """:func:`evaluate_agent` with :func:`rollout_sequential`: the same grid, targets, seeds and
    result, computed one point and one step at a time (a reference for tests and benchmarks)."""
    kwargs.setdefault("desc", "evaluate (sequential reference)")
    return evaluate_agent(env_id, agent, *args, sequential=True, **kwargs)


#: Torch threads of every evaluation, whoever calls it (the evaluate rule, `morl evaluate`, a
#: notebook). float32 results depend on torch's thread count, so a fixed count is what lets the
#: rule and the command give the same numbers; the physics' worker count does not change them.
EVALUATION_TORCH_THREADS = 1


def grid_targets(prefs: np.ndarray, coef, target_fn) -> np.ndarray:
    """The initial target returns at the grid's preferences: ``target_fn(prefs)`` if given (checked:
    one finite row per preference), else :func:`initial_targets` of the regression ``coef``, else zeros."""
    if target_fn is None:
        return initial_targets(coef, prefs) if coef is not None else np.zeros_like(prefs)
    targets = np.asarray(target_fn(prefs), np.float64)
    if targets.shape != prefs.shape or not np.isfinite(targets).all():
        raise ValueError(f"initial targets must be finite, of shape {prefs.shape}; got shape {targets.shape}")
    return targets


def _evaluate_grid(
    env_id, agent, divisions, episodes, seed, coef, progress, desc, sequential, workers=1, target_fn=None
):
    spec = get_spec(env_id)
    prefs = simplex_grid(spec.n_obj, divisions or default_divisions(spec.n_obj))
    targets = grid_targets(prefs, coef, target_fn)
    seeds = episode_seeds(seed, len(prefs), episodes)
    total_ret = np.zeros((len(prefs), spec.n_obj))
    total_len = np.zeros(len(prefs))
    if sequential:
        bar = Progress(episodes * len(prefs) * spec.max_episode_steps, desc, unit="step", enabled=progress)
        run = rollout_sequential
    else:
        bar = Progress(episodes * spec.max_episode_steps, desc, unit="batch-step", enabled=progress)
        run = functools.partial(rollout, workers=workers)
    with torch_threads(EVALUATION_TORCH_THREADS):
        for e in range(episodes):
            ret, lens = run(env_id, agent, prefs, targets, seeds[e], progress=bar)
            total_ret += ret
            total_len += lens
            bar.advance_to((e + 1) * (bar.total // episodes))
    bar.close()
    returns = total_ret / episodes
    return {
        "preferences": prefs,
        "targets": targets,
        "returns": returns,
        "lengths": total_len / episodes,
        "seeds": seeds.T,
        "summary": summarize(prefs, returns),
    }


def write_evaluation(
    output: str | os.PathLike, result: dict[str, Any], meta: dict[str, Any], policy_names: np.ndarray | None = None
) -> None:
    """Write per-point rows atomically; the summary and provenance go into the metadata.

    With ``policy_names`` (one per row) several policies share the file, told apart by a
    ``policy`` column, and the point index restarts for each of them.
    """
    n = len(result["preferences"])
    columns = {}
    if policy_names is not None:
        columns["policy"] = pa.array(list(policy_names), pa.string())
        per_policy = n // len(set(policy_names))
        point = np.tile(np.arange(per_policy), n // per_policy)
    else:
        point = np.arange(n)
    columns |= {
        "point": pa.array(point, pa.int32()),
        "preference": fixed_size_list(result["preferences"], pa.float64()),
        "target_return": fixed_size_list(result["targets"], pa.float64()),
        "return": fixed_size_list(result["returns"], pa.float64()),
        "length": pa.array(result["lengths"], pa.float64()),
        "episode_seeds": fixed_size_list(result["seeds"], pa.int64()),
    }
    if "held_out" in result:  # evaluations on a coverage variant
        columns["held_out"] = pa.array(np.asarray(result["held_out"], bool), pa.bool_())
        columns["data_front_return"] = fixed_size_list(result["data_front_return"], pa.float64())
    full_meta = {**meta, "summary": result["summary"], "morl_version": __version__}
    table = pa.table(columns).replace_schema_metadata({META_KEY: json.dumps(full_meta, sort_keys=True)})
    atomic_write(output, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def check_checkpoint_fits_dataset(checkpoint, agent, dataset, ds, dataset_sha: str) -> None:
    """Refuse a dataset other than the one the loaded ``agent`` was trained on (another env, other
    sizes, other bytes): the evaluation would run on the dataset's env, under the dataset's labels.
    Raises :class:`~morl.data.FileMismatchError` naming both files."""
    trained = agent.training
    differences = []
    if trained.get("env_id") != ds.meta.get("env_id"):
        differences.append(
            f"the checkpoint is for env {trained.get('env_id')!r}, the dataset for {ds.meta.get('env_id')!r}"
        )
    for what, mine, theirs in (
        ("objectives", agent.n_obj, ds.n_obj),
        ("observation dimensions", agent.obs_dim, ds.obs_dim),
        ("action dimensions", agent.act_dim, ds.act_dim),
    ):
        if mine != theirs:
            differences.append(f"the checkpoint has {mine} {what}, the dataset {theirs}")
    if not differences and trained.get("dataset_sha256") != dataset_sha:
        differences.append(
            f"the checkpoint was trained on another dataset ({trained.get('dataset_path')}, sha256 "
            f"{short_hash(trained.get('dataset_sha256'))}; this one's is {short_hash(dataset_sha)})"
        )
    if differences:
        raise FileMismatchError(checkpoint, dataset, differences)


def _coverage_of(dataset, ds_meta: dict, coverage_source) -> tuple[dict, np.ndarray] | None:
    """For a coverage variant: its record and the trajectory returns of the complete source dataset
    (checked to be the file it was derived from); None for a complete dataset."""
    record = coverage_record(ds_meta, dataset)
    if record is None or record["coverage"] == "complete":
        if coverage_source is not None:
            raise InputError(f"{dataset}: not a coverage variant, so a coverage source ({coverage_source}) has no use")
        return None
    if coverage_source is None:
        raise InputError(
            f"{dataset}: a {record['coverage']!r} coverage variant; give the complete dataset it was "
            f"derived from ({ds_meta.get('coverage_source')}) as the coverage source"
        )
    check_derived_from(dataset, coverage_source)
    return record, load_trajectories(coverage_source).traj_returns


def evaluate_checkpoint(
    checkpoint: str | os.PathLike,
    dataset: str | os.PathLike,
    output: str | os.PathLike,
    divisions: int | None = None,
    episodes: int = 1,
    seed: int = 0,
    progress: bool = True,
    expect_env: str | None = None,
    summary_path: str | os.PathLike | None = None,
    workers: int = 1,
    reference_dataset: str | os.PathLike | None = None,
    definitions: dict | None = None,
    coverage_source: str | os.PathLike | None = None,
) -> dict[str, float]:
    """Evaluate a trained model on the grid (``dataset`` is its training dataset, refused if
    ``expect_env`` is given and the dataset is for another env, and if it is not the dataset the
    checkpoint records: another env, objective count, observation or action size, or file hash).

    The target regression is fit on the dataset the checkpoint's ``statistics_from`` names: the
    training dataset, or the expert-high dataset it was trained with (``reference_dataset``, which
    may be left out when that is the training dataset itself; another file is refused).
    ``definitions``: the ``returns_to_go`` and ``statistics_from`` the caller's settings say; a
    checkpoint trained under others is refused. With ``summary_path``, the summary (HV, SP, ratio
    deviation, mean utility, non-dominated points) and what was evaluated also go to a small JSON
    file there.

    A coverage variant of a dataset (:mod:`morl.coverage`) needs ``coverage_source``, the complete
    dataset it was derived from (another file is refused, naming both). Each grid point is then
    tagged ``held_out`` when its preference lies in a band the variant removed, and gets
    ``data_front_return``, the complete data's front at that preference (:func:`morl.metrics.front_at`),
    from which the tables compute the distance to the data front on the held-out points.
    """
    ds = load_trajectories(dataset, expect_env=expect_env)  # its states and actions are not needed
    ds_meta = ds.meta
    agent = load_agent(checkpoint, definitions=definitions)
    env_id = ds_meta["env_id"]
    dataset_sha = file_sha256(dataset)
    check_checkpoint_fits_dataset(checkpoint, agent, dataset, ds, dataset_sha)
    coverage = _coverage_of(dataset, ds_meta, coverage_source)
    trained = agent.training
    reference = resolve_reference(trained["statistics_from"], ds_meta, dataset, reference_dataset)
    if reference is not None:
        reference_sha = dataset_sha if reference == Path(dataset) else file_sha256(reference)
        if reference_sha != trained["reference_dataset_sha256"]:
            raise InputError(
                f"{reference}: not the expert-high dataset {checkpoint} was trained with "
                f"({trained['reference_dataset']}); pass that file as --reference-dataset"
            )
        if reference != Path(dataset):
            check_reference(reference, ds_meta, dataset)
            ds = load_trajectories(reference)
    make_targets = getattr(family(agent.family).load(), "initial_targets", regression_targets)
    record: dict[str, Any] = {}

    def target_fn(prefs: np.ndarray) -> np.ndarray:
        targets, made = make_targets(prefs, ds.traj_preferences, ds.traj_returns)
        record.update(made)
        return targets

    result = evaluate_agent(
        env_id,
        agent,
        divisions,
        episodes,
        seed,
        target_fn=target_fn,
        progress=progress,
        desc=f"evaluate {Path(checkpoint).parent}",
        workers=workers,
    )
    if coverage is not None:
        record, source_returns = coverage
        result["held_out"] = held_out(result["preferences"], record["bands"])
        result["data_front_return"] = front_at(result["preferences"], source_returns)
    meta = {
        "kind": "model",
        "env_id": env_id,
        "quality": ds_meta.get("quality"),
        "entropy": ds_meta.get("entropy"),
        "model": agent.model_name,
        "train_seed": agent.seed,
        "checkpoint": str(checkpoint),
        "checkpoint_sha256": file_sha256(checkpoint),
        "dataset": str(dataset),
        "dataset_sha256": dataset_sha,
        "behavior_sha256": ds_meta.get("behavior_sha256"),
        "returns_to_go": trained.get("returns_to_go"),
        "statistics_from": trained["statistics_from"],
        "reference_dataset": None if reference is None else str(reference),
        "reference_dataset_sha256": None if reference is None else trained["reference_dataset_sha256"],
        "eval_seed": seed,
        "episodes": episodes,
        # how the initial targets were made (PEDA's: the regression's coefficients, "target_regression")
        **record,
        # what the run was trained with (its seed apart), so that runs of one cell can be checked to
        # differ in their seed only
        "train_settings": result_settings(trained.get("settings")),
        # the optimiser steps the checkpoint had made: its settings' steps, or fewer for a snapshot
        # taken along training
        "train_steps": trained.get("steps"),
    }
    if coverage is not None:
        meta["coverage"] = coverage[0]["coverage"]
        meta["coverage_bands"] = coverage[0]["bands"]
        meta["coverage_source"] = str(coverage_source)
        meta["coverage_source_sha256"] = ds_meta.get("coverage_source_sha256")
    write_evaluation(output, result, meta)
    if summary_path is not None:
        keys = ("env_id", "quality", "entropy", "model", "train_seed", "eval_seed", "episodes", "checkpoint")
        text = json.dumps({**{k: meta[k] for k in keys}, **result["summary"]}, indent=2) + "\n"
        atomic_write(summary_path, lambda tmp: Path(tmp).write_text(text))
    log.info("evaluated %s: %s", checkpoint, result["summary"])
    return result["summary"]


#: Training settings that do not change what is learnt (how often progress is saved).
NON_RESULT_SETTINGS = ("checkpoint_every",)


def result_settings(settings: dict | None) -> dict | None:
    if not isinstance(settings, dict):
        return None
    return {k: v for k, v in sorted(settings.items()) if k not in NON_RESULT_SETTINGS}


def evaluate_behavior(
    policy_path: str | os.PathLike,
    output: str | os.PathLike,
    divisions: int | None = None,
    episodes: int = 1,
    seed: int = 0,
    progress: bool = True,
    workers: int = 1,
    expect_env: str | None = None,
) -> dict[str, dict[str, float]]:
    """The behavior front ("B") and two trivial baselines (zero and uniform-random actions) on the grid.

    All three go into ``output``, told apart by the ``policy`` column (behavior, zero, random).
    ``expect_env``: if given, a behavior policy of another env id is refused.
    """
    policy = load_behavior(policy_path, expect_env=expect_env)
    env_id = policy.env_id
    agents = {
        "behavior": BehaviorAgent(policy),
        "zero": ConstantAgent(np.zeros(policy.act_dim, np.float32)),
        "random": RandomAgent(policy.act_low, policy.act_high, seed=seed),
    }
    tables, summaries = [], {}
    for name, agent in agents.items():
        res = evaluate_agent(
            env_id,
            agent,
            divisions,
            episodes,
            seed,
            progress=progress,
            desc=f"evaluate {env_id} {name}",
            workers=workers,
        )
        summaries[name] = res["summary"]
        tables.append(res)
    n = len(tables[0]["preferences"])
    merged = {
        k: np.concatenate([t[k] for t in tables]) for k in ("preferences", "targets", "returns", "lengths", "seeds")
    }
    merged["summary"] = summaries["behavior"]
    meta = {
        "kind": "behavior",
        "env_id": env_id,
        "checkpoint": str(policy_path),
        "checkpoint_sha256": file_sha256(policy_path),
        "eval_seed": seed,
        "episodes": episodes,
        "baselines": summaries,
    }
    write_evaluation(output, merged, meta, policy_names=np.repeat(list(agents), n))
    ratio = trivial_ratio_text(summaries["behavior"]["hv"], summaries["zero"]["hv"], summaries["random"]["hv"])
    log.info(
        "behavior front of %s: HV %.4g (zero actions %.4g, random actions %.4g; to the better of the two: %s)",
        env_id,
        summaries["behavior"]["hv"],
        summaries["zero"]["hv"],
        summaries["random"]["hv"],
        ratio,
    )
    return summaries


def read_evaluation(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Metadata and per-point arrays of an evaluation file. NaN or an infinite value in its
    ``preference``, ``target_return`` or ``return`` column is refused with one line naming the file."""
    meta = read_meta(path)
    table = pq.read_table(path)
    n_obj = table.schema.field("return").type.list_size
    arrays = {
        name: table.column(name).combine_chunks().flatten().to_numpy().reshape(-1, n_obj)
        for name in ("preference", "target_return", "return")
    }
    arrays["length"] = table.column("length").to_numpy()
    if "held_out" in table.column_names:
        arrays["held_out"] = np.asarray(table.column("held_out").to_pylist(), bool)
        arrays["data_front_return"] = (
            table.column("data_front_return").combine_chunks().flatten().to_numpy().reshape(-1, n_obj)
        )
    if "policy" in table.column_names:
        arrays["policy"] = np.asarray(table.column("policy").to_pylist())
    for name in ("preference", "target_return", "return"):
        bad = np.flatnonzero(~np.all(np.isfinite(arrays[name]), axis=1))
        if bad.size:
            raise DataFileError(
                path,
                f"column '{name}' holds NaN or infinite values ({bad.size} rows, the first row "
                f"{int(bad[0])}); the file is damaged",
            )
    return meta, arrays
