"""Refusing evaluation files that the result tables must not combine.

:func:`morl.metrics_frame.collect_metrics` checks its files here before it reads a number from
them, and :func:`morl.aggregate.aggregate` its training curves; each error names both files and
what sets them apart.

* :func:`refuse_same_files` - one file given twice, however spelled or linked;
* :func:`check_evaluations` - evaluations counted twice (one checkpoint, one run), of one cell
  from other dataset files, of datasets from other behavior policies or normalised with another
  expert-high dataset, evaluated with other seeds, episodes or preference grids, or seeds of one
  cell trained with other settings;
* :func:`check_curves` - a training curve given for another run than its evaluation's;
* :func:`check_datasets_unchanged` - evaluations made from a dataset file that has since been
  replaced by other bytes.

Facts a file does not record (older files, imported D4MORL datasets) are not compared.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from morl.curves import read_curve_run
from morl.data import DataFileError, FileMismatchError, file_sha256, read_meta, short_hash
from morl.errors import InputError


def entropy_label(meta: dict) -> str:
    """The entropy of an evaluation's dataset as the tables label it: ``high`` for the complete data,
    ``high-shattered`` for its shattered coverage variant (the run folder names it the same way)."""
    coverage = meta.get("coverage")
    return meta.get("entropy") if coverage in (None, "complete") else f"{meta.get('entropy')}-{coverage}"


def refuse_same_files(paths: Sequence[str | os.PathLike]) -> None:
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


def check_curves(curves: Mapping[str, str | os.PathLike]) -> None:
    """Refuse a training curve given for an evaluation of another run: the model, training seed and
    dataset SHA-256 the curve names (:func:`morl.curves.read_curve_run`) against those the
    evaluation's metadata records, naming both files. A curve that names no run (written before
    curves named theirs) is taken as given."""
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


#: The dataset files an evaluation records, each with its SHA-256 then, and what the evaluation is of it.
DATASET_RECORDS = (
    ("dataset", "dataset_sha256", "was evaluated on a dataset"),
    ("coverage_source", "coverage_source_sha256", "was evaluated on a coverage variant cut from a dataset"),
    ("reference_dataset", "reference_dataset_sha256", "is of a model normalised with a dataset"),
)


def _same_file_key(path: str | os.PathLike) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def check_datasets_unchanged(
    model_evals: Sequence[tuple[str | os.PathLike, dict]], datasets: Sequence[str | os.PathLike]
) -> None:
    """Refuse an evaluation (``(path, metadata)``) made from a dataset file that now holds other bytes.

    ``datasets``: the dataset files the caller uses now (the workflow's imported datasets). For each
    file an evaluation records (its dataset, the complete dataset its coverage variant was cut from,
    the expert-high dataset its model was normalised with) that exists and is one of ``datasets``
    (the same file, however spelled), the SHA-256 recorded then must be the file's now. A file
    replaced by a copy that keeps an older modification time (``cp -p``, ``rsync -a``, unpacking an
    archive) is not newer than the results made from it, so Snakemake rebuilds none of them; the
    tables would show results of the old data. Recorded paths that do not exist here, or are other
    files (slices made on other machines), are not checked. Each distinct file is hashed once."""
    in_use = {key for key in map(_same_file_key, datasets) if key is not None}
    if not in_use:
        return
    now: dict[tuple[int, int], str] = {}
    for path, meta in model_evals:
        for path_key, sha_key, what in DATASET_RECORDS:
            recorded, sha = meta.get(path_key), meta.get(sha_key)
            if not recorded or not sha:
                continue
            key = _same_file_key(recorded)
            if key not in in_use:
                continue
            if key not in now:
                now[key] = file_sha256(recorded)
            if now[key] != sha:
                raise InputError(
                    f"{path} {what} with sha256 {short_hash(sha)}, but {recorded} now holds sha256 "
                    f"{short_hash(now[key])}: the file was replaced after the run (a copy that is not newer than "
                    f"the results made from it, as cp -p, rsync -a and archives make, rebuilds none of them); "
                    f"run `touch {recorded}` and snakemake again to rebuild them"
                )
