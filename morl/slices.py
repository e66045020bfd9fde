"""Slices of an experiment: one env's small results, exported to be committed, and merged into tables.

A grid that takes days can be run one env at a time (or on several machines) and still give one
set of tables. When an env's runs have finished, :func:`export_slice` copies what the tables need
into ``<slices_dir>/<env>/``, laid out as in the results folder (``<env>/...`` relative paths):
every evaluation file with its training curve, the behavior front, the front models of the
coverage variants, a card per dataset (:mod:`morl.dataset_info`) and ``SLICE.json``, which
records where the slice came from (the code's commit, the date, the machine, the wall time of
each stage from the rules' benchmark files, the behavior policy's method and hash). Datasets and
checkpoints stay out: a slice is a few MB. :func:`merge_slices` aggregates every slice found in
``slices_dir`` into the tables and plots of :func:`morl.aggregate.aggregate`, the same files the
workflow's aggregate rule writes from the same evaluations.
"""

from __future__ import annotations

import csv
import datetime
import itertools
import json
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from morl import __version__
from morl.aggregate import aggregate
from morl.convergence import write_convergence
from morl.data import atomic_write, read_meta
from morl.dataset_info import dataset_info, format_card
from morl.errors import InputError
from morl.progress import log

#: The provenance file of a slice.
PROVENANCE = "SLICE.json"
#: The stages whose benchmark files give a slice's wall time, in pipeline order.
STAGES = ("behavior", "behavior_front", "collect", "coverage", "front_model", "train", "evaluate")
#: Every file a slice holds, as a path relative to its folder: its provenance, the behavior front,
#: a card and a front model per dataset, each run's evaluation and curve, and the timestamp
#: Snakemake keeps in a folder it made.
SLICE_FILE = re.compile(
    r"SLICE\.json|\.snakemake_timestamp|behavior/front\.parquet|data/[^/]+\.(?:card\.md|front_model\.pt)"
    r"|[^/]+/[^/]+/seed\d+/(?:eval\.parquet|curve\.csv|along/step\d+/eval\.parquet)"
)


def run_evaluations(folder: Path) -> list[Path]:
    """The final evaluation of every run in a slice (not those of its snapshots along training)."""
    return [p for p in sorted(folder.rglob("eval.parquet")) if "along" not in p.relative_to(folder).parts[:-1]]


def along_evaluations(folder: Path) -> list[Path]:
    """The evaluations of the snapshots a slice's runs kept along training (``<run>/along/step<N>``)."""
    return sorted(p for p in folder.glob("*/*/seed*/along/step*/eval.parquet"))


def _relative(path: Path, results_dir: Path, env: str) -> Path:
    rel = Path(os.path.relpath(Path(path).resolve(), results_dir.resolve()))
    if rel.parts[:1] != (env,):
        raise InputError(f"{path}: not a file of env {env} under the results folder {results_dir}")
    return rel


def _git_commit(directory: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _config_record(config_file: Path, code: Path) -> str:
    """The config's path as a slice records it: relative to the checkout that ran it when it lies
    inside (the commit names that checkout), so a slice does not carry one machine's folders."""
    path = config_file.resolve()
    return str(path.relative_to(code)) if path.is_relative_to(code) else str(path)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


#: The stages whose jobs belong to one run (``<quality>-<entropy>/<model>/seed<N>``), by benchmark file.
RUN_STAGES = ("train", "evaluate")


def stage_seconds(bench_dir: Path, env: str, runs: Sequence[str] | None = None) -> dict[str, float]:
    """Wall time of each stage's jobs of ``env``, summed from the rules' benchmark files (seconds).
    ``runs``: the runs (``<quality>-<entropy>/<model>/seed<N>``) whose training and evaluation jobs
    count; the results folder may hold others, exported in another slice."""
    out = {}
    for stage in STAGES:
        files = sorted((bench_dir / stage).glob(f"{env}*")) if (bench_dir / stage).is_dir() else []
        files = [p for f in files for p in ([f] if f.is_file() else sorted(f.rglob("*.tsv")))]
        if runs is not None and stage in RUN_STAGES:
            wanted = set(runs)
            files = [f for f in files if _benchmark_run(f.relative_to(bench_dir / stage / env)) in wanted]
        total = 0.0
        for path in files:
            with open(path) as f:
                total += sum(float(row["s"]) for row in csv.DictReader(f, delimiter="\t"))
        if files:
            out[stage] = round(total, 1)
    return out


def _benchmark_run(relative: Path) -> str:
    """The run a training or evaluation job's benchmark file belongs to: ``<dataset>/<model>/seed<N>``
    of ``<dataset>/<model>/seed<N>[.<what>].tsv`` (relative to the stage's env folder)."""
    seed = re.match(r"seed\d+", relative.name)
    return (relative.parent / seed.group(0)).as_posix() if seed else relative.as_posix()


def slice_runs(folder: str | os.PathLike) -> list[str]:
    """The runs a slice holds, as ``<quality>-<entropy>/<model>/seed<N>`` (its final evaluations' folders)."""
    folder = Path(folder)
    return [p.parent.relative_to(folder).as_posix() for p in run_evaluations(folder)]


def export_slice(
    env: str,
    results_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    evaluations: Sequence[str | os.PathLike],
    curves: Sequence[str | os.PathLike],
    front: str | os.PathLike,
    datasets: Sequence[str | os.PathLike],
    front_models: Sequence[str | os.PathLike] = (),
    bench_dir: str | os.PathLike | None = None,
    config_file: str | os.PathLike | None = None,
    along: Sequence[str | os.PathLike] = (),
    episodes: Sequence[str | os.PathLike] = (),
) -> Path:
    """Copy one env's finished results that the tables need into ``out_dir`` (replacing a previous
    export of that env) and write its ``SLICE.json``; return ``out_dir``. ``along``: the evaluations
    of the snapshots the runs kept along training (``evaluate.at_steps``); ``episodes``: the runs'
    evaluations with another number of episodes per point (``eval-episodes<N>.parquet``, for the
    multiverse's episodes choice)."""
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    own = (results_dir / env).resolve()
    if out_dir.resolve() in (results_dir.resolve(), own) or own in out_dir.resolve().parents:
        raise InputError(f"{out_dir}: a slice must not be written into the results it is exported from")
    files = [*evaluations, *curves, front, *front_models, *along, *episodes]
    for path in files:
        if not Path(path).is_file():
            raise InputError(f"{path}: a file of the slice of {env} does not exist; has every run finished?")
    # the behavior policy the data came from, as the datasets record it (and the evaluations repeat)
    behaviors = {(read_meta(d).get("behavior_method"), read_meta(d).get("behavior_sha256")) for d in datasets}
    evaluated = {read_meta(e).get("behavior_sha256") for e in [*evaluations, *along, *episodes]}
    if not evaluated <= {sha for _, sha in behaviors}:
        raise InputError(
            f"the evaluations of {env} come from data of another behavior policy than its datasets' "
            f"({', '.join(sorted(map(str, evaluated)))}); rerun the env's runs on its current data"
        )
    runs = [_relative(Path(e), results_dir, env).relative_to(env).parent.as_posix() for e in evaluations]
    tmp = out_dir.with_name(out_dir.name + ".partial")
    # nothing but a slice this tool wrote (or the unfinished copy of one) is ever replaced, and
    # never one that holds runs this export lacks (another part of the grid, added to it)
    check_replaceable(out_dir, env)
    check_replaceable(tmp, env, partial=True)
    others = sorted(set(slice_runs(out_dir)) - set(runs)) if out_dir.is_dir() else []
    if others:
        raise InputError(
            f"{out_dir}: will not replace this slice of {env}: it holds runs this export lacks ({others[0]}"
            f"{f' and {len(others) - 1} more' if len(others) > 1 else ''}); export into another slices_dir "
            "and add it with `morl add-slice`, or move the folder away to replace it"
        )
    if tmp.exists():
        shutil.rmtree(tmp)
    for path in files:
        dest = tmp / _relative(Path(path), results_dir, env).relative_to(env)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    for path in datasets:
        card = tmp / _relative(Path(path), results_dir, env).relative_to(env).with_suffix(".card.md")
        card.parent.mkdir(parents=True, exist_ok=True)
        info = dataset_info(path, front=front)
        info["path"] = str(_relative(Path(path), results_dir, env))
        card.write_text(format_card(info) + "\n")
    code = Path(__file__).resolve().parent.parent
    provenance: dict[str, Any] = {
        "env": env,
        "commit": _git_commit(code),
        "morl_version": __version__,
        "config": None if config_file is None else _config_record(Path(config_file), code),
        "exported": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "system": platform.platform()},
        "wall_seconds": {} if bench_dir is None else stage_seconds(Path(bench_dir), env, runs),
        "behavior": [{"method": m, "sha256": s} for m, s in sorted(behaviors, key=str)],
        "runs": len(evaluations),
    }
    atomic_write(tmp / PROVENANCE, lambda t: Path(t).write_text(json.dumps(provenance, indent=2) + "\n"))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return out_dir


def check_replaceable(folder: str | os.PathLike, env: str, partial: bool = False) -> None:
    """Refuse to replace ``folder`` unless it is absent, empty, or a slice of ``env`` that
    :func:`export_slice` wrote: a ``SLICE.json`` that describes ``env`` (for the unfinished copy,
    ``partial``, none is needed) and no file but those a slice holds (:data:`SLICE_FILE`). A
    folder of anything else (a results folder, a user's files) is never deleted."""
    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        return
    why = None
    if folder.is_symlink() or not folder.is_dir():
        why = "it is not a folder" if not folder.is_symlink() else "it is a link"
    else:
        files = sorted(p for p in folder.rglob("*") if not p.is_dir() or p.is_symlink())
        if not files:
            return
        other = [p for p in files if p.is_symlink() or not SLICE_FILE.fullmatch(p.relative_to(folder).as_posix())]
        if other:
            why = f"it holds {other[0].relative_to(folder)}, which no slice holds"
        elif not partial:
            info = _read_provenance(folder / PROVENANCE) if (folder / PROVENANCE).is_file() else None
            if not (folder / PROVENANCE).is_file():
                why = f"it has no {PROVENANCE}"
            elif info is None:
                why = f"its {PROVENANCE} is not one this tool writes"
            elif info.get("env") != env:
                why = f"its {PROVENANCE} describes a slice of {info.get('env')}, not of {env}"
    if why is not None:
        raise InputError(
            f"{folder}: will not replace this folder with the slice of {env}: {why}, so it is not a slice "
            "this tool wrote; move it away or set slices_dir to another folder"
        )


def _read_provenance(path: Path) -> dict[str, Any] | None:
    """``SLICE.json`` as :func:`read_provenance` reads it, None when it is not one."""
    try:
        return read_provenance(path)
    except (OSError, InputError):
        return None


def slice_files(slices_dir: str | os.PathLike) -> dict[str, list[str]]:
    """The evaluations, their curves (in the same order; a missing one is left out of the curves),
    behavior fronts, front models and dataset cards of every slice in ``slices_dir``, each list in a
    fixed order."""
    root = Path(slices_dir)
    if not root.is_dir():
        raise InputError(f"{root}: no slices folder")
    slices = sorted(p.parent for p in root.glob(f"*/{PROVENANCE}"))
    if not slices:
        raise InputError(f"{root}: holds no slice (no */{PROVENANCE}); export one with the workflow's slice rule")
    evaluations = [str(p) for s in slices for p in run_evaluations(s)]
    return {
        "evaluations": evaluations,
        "along": [str(p) for s in slices for p in along_evaluations(s)],
        "curves": [str(Path(e).with_name("curve.csv")) for e in evaluations],
        "fronts": [
            str(s / "behavior" / "front.parquet") for s in slices if (s / "behavior" / "front.parquet").is_file()
        ],
        "front_models": [str(p) for s in slices for p in sorted(s.rglob("*.front_model.pt"))],
        "data_cards": [str(p) for s in slices for p in sorted((s / "data").glob("*.card.md"))],
    }


def read_provenance(path: str | os.PathLike) -> dict[str, Any]:
    """A slice's ``SLICE.json``, checked to have the shape :func:`export_slice` writes: an object
    with ``env`` (a name), ``behavior`` (a list of ``{method, sha256}``) and ``runs`` (a count)."""
    path = Path(path)
    try:
        info = json.loads(path.read_text())
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a slice's {PROVENANCE}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not a slice's {PROVENANCE}: not JSON ({exc})") from None
    if not isinstance(info, dict):
        raise InputError(f"{path}: not a slice's {PROVENANCE}: a JSON {type(info).__name__}, not an object")
    behavior = info.get("behavior")
    if not isinstance(info.get("env"), str):
        raise InputError(f"{path}: not a slice's {PROVENANCE}: 'env' is {info.get('env')!r}, not an env's name")
    if not isinstance(behavior, list) or not all(
        isinstance(b, dict) and isinstance(b.get("sha256"), str) and isinstance(b.get("method"), str) for b in behavior
    ):
        raise InputError(
            f"{path}: not a slice's {PROVENANCE}: 'behavior' is {behavior!r}, not a list of {{method, sha256}}"
        )
    runs = info.get("runs")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 0:
        raise InputError(f"{path}: not a slice's {PROVENANCE}: 'runs' is {runs!r}, not a count of runs")
    parts = info.get("pieces", [])
    if not isinstance(parts, list) or not all(
        isinstance(p, dict) and isinstance(p.get("runs"), list) and all(isinstance(r, str) for r in p["runs"])
        for p in parts
    ):
        raise InputError(f"{path}: not a slice's {PROVENANCE}: 'pieces' is not a list of pieces, each with its runs")
    return info


#: What a piece of a slice records of where it came from (:func:`export_slice`'s provenance, and a
#: note where the piece's files were gathered otherwise).
PIECE_KEYS = ("commit", "morl_version", "config", "exported", "machine", "wall_seconds", "note")


def pieces(folder: str | os.PathLike, info: dict[str, Any]) -> list[dict[str, Any]]:
    """The parts a slice was assembled from by :func:`add_slice`, each with where it was made and
    the runs it brought (``runs``: ``<quality>-<entropy>/<model>/seed<N>``). A slice exported in
    one go is one piece: its own provenance and every run it holds."""
    if "pieces" in info:
        return [dict(p) for p in info["pieces"]]
    return [{**{key: info[key] for key in PIECE_KEYS if key in info}, "runs": slice_runs(folder)}]


def read_slices(slices_dir: str | os.PathLike) -> dict[Path, dict[str, Any]]:
    """Each slice's folder in ``slices_dir`` with its ``SLICE.json`` (:func:`read_provenance`)."""
    return {path.parent: read_provenance(path) for path in sorted(Path(slices_dir).glob(f"*/{PROVENANCE}"))}


def check_behaviors(slices_dir: str | os.PathLike, behaviors: dict[str, str]) -> None:
    """Refuse a slice whose data came from another behavior policy than ``behaviors`` says its env
    uses now (env -> SHA-256 of the policy file): its rows would describe data the grid no longer
    has, so the slice must be run again."""
    for folder, info in read_slices(slices_dir).items():
        expected = behaviors.get(info["env"])
        recorded = {b["sha256"] for b in info["behavior"]}
        if expected is not None and recorded != {expected}:
            raise InputError(
                f"{folder}: the slice's data came from behavior policy sha256 "
                f"{', '.join(sorted(recorded))}, but {info['env']} now uses {expected}; run the env "
                "again and export its slice anew"
            )


def _n_obj(path: Path) -> int | None:
    """The number of objectives of an evaluation file: the width of its return column."""
    import pyarrow.parquet as pq

    field = pq.read_schema(path).field("return") if "return" in pq.read_schema(path).names else None
    return getattr(field.type, "list_size", None) if field is not None else None


def _config_differences(path: Path, meta: dict[str, Any], config: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The settings in which the evaluation ``path`` (its metadata ``meta``) was made otherwise than
    ``config`` says: (setting, the evaluation's value, the config's value)."""
    from math import comb

    from morl.config import train_settings
    from morl.evaluate import result_settings
    from morl.families import family_of
    from morl.preferences import default_divisions

    evaluate = config.get("evaluate") or {}
    out = []
    for key, recorded in (("seed", meta.get("eval_seed")), ("episodes", meta.get("episodes"))):
        if key in evaluate and recorded != evaluate[key]:
            out.append((f"evaluate.{key}", recorded, evaluate[key]))
    n_obj, points = _n_obj(path), (meta.get("summary") or {}).get("n_points")
    if n_obj and points is not None:
        divisions = evaluate.get("divisions") or default_divisions(n_obj)
        expected = comb(divisions + n_obj - 1, n_obj - 1)
        if points != expected:
            out.append(("evaluate.divisions (preference points)", points, f"{divisions} ({expected} points)"))
    model = meta.get("model")
    if meta.get("kind") == "model" and model in (config.get("models") or []):
        expected = result_settings(train_settings(config, meta.get("env_id"), model))
        recorded = meta.get("train_settings") or {}
        for key in sorted(set(expected) | set(recorded)):
            if recorded.get(key) != expected.get(key):
                out.append((f"train.{family_of(model).name}.{key} (for {model})", recorded.get(key), expected.get(key)))
    return out


def check_slice(
    folder: str | os.PathLike,
    info: dict[str, Any],
    config: dict[str, Any] | None = None,
    datasets: Sequence[tuple[str, str, str]] | None = None,
    models: Sequence[str] | None = None,
) -> list[str]:
    """Refuse a slice whose ``SLICE.json`` (``info``) disagrees with what its files record (its
    env, its behavior policy, its number of runs), or whose evaluations were made under settings
    other than ``config``'s (evaluation seed, episodes and grid, training settings). Return notes
    on what the slice lacks of the config's grid (``datasets``, ``models``): its behavior front,
    a run's folder."""
    folder = Path(folder)
    env = info["env"]
    description = folder / PROVENANCE
    if folder.name != env:
        raise InputError(f"{description}: describes a slice of {env}, but the folder is {folder.name}'s")
    recorded = {b["sha256"] for b in info["behavior"]}
    evaluations = run_evaluations(folder)
    if info["runs"] != len(evaluations):
        raise InputError(f"{description}: says the slice holds {info['runs']} runs, but it holds "
                         f"{len(evaluations)} evaluations")  # fmt: skip
    if "pieces" in info:
        held, listed = set(slice_runs(folder)), [r for p in info["pieces"] for r in p["runs"]]
        twice = sorted({r for r in listed if listed.count(r) > 1})
        unlisted, absent = sorted(held - set(listed)), sorted(set(listed) - held)
        if twice or unlisted or absent:
            problem = (f"lists run {twice[0]} in two pieces" if twice else f"lists run {absent[0]}, which it does not "
                       "hold" if absent else f"holds run {unlisted[0]}, which no piece lists")  # fmt: skip
            raise InputError(f"{description}: {problem}; the slice's description does not match its files")
    front = folder / "behavior" / "front.parquet"
    files = [*evaluations, *along_evaluations(folder), *([front] if front.is_file() else [])]
    for path in files:
        meta = read_meta(path)
        sha = meta.get("behavior_sha256") if meta.get("kind") != "behavior" else meta.get("checkpoint_sha256")
        if meta.get("env_id") != env:
            raise InputError(f"{path}: an evaluation of {meta.get('env_id')}, but {description} describes a slice "
                             f"of {env}")  # fmt: skip
        if sha not in recorded:
            raise InputError(
                f"{path}: made from data of behavior policy sha256 {sha}, but {description} says "
                f"{', '.join(sorted(recorded))}; the slice's description does not match its files, export it anew"
            )
        if config is not None and env in config.get("envs", []):
            differ = _config_differences(path, meta, config)
            if differ:
                setting, theirs, ours = differ[0]
                raise InputError(
                    f"{path}: made under another config: {setting} is {theirs!r} in the slice, {ours!r} in the "
                    "config; run the env again under this config and export its slice anew"
                )
    notes = []
    if not front.is_file():
        notes.append(
            f"{folder}: the slice has no behavior front (behavior/front.parquet); its Pareto plots and baselines table lack the behavior policy"
        )
    missing = [
        f"{q}-{h}/{m}"
        for e, q, h in datasets or ()
        if e == env
        for m in models or ()
        if not (folder / f"{q}-{h}" / m).is_dir()
    ]
    if missing:
        notes.append(f"{folder}: the slice has no runs of {', '.join(missing)}; their cells are empty")
    return notes


def unsliced_folders(slices_dir: str | os.PathLike) -> list[str]:
    """Notes on the folders of ``slices_dir`` that are left out because they hold no ``SLICE.json``."""
    return [
        f"{p}: holds no {PROVENANCE}, so it is no slice and is left out"
        for p in sorted(Path(slices_dir).iterdir())
        if p.is_dir() and not (p / PROVENANCE).is_file() and not p.name.endswith(".partial")
    ]


def merge_slices(
    slices_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    datasets: Sequence[tuple[str, str, str]] | None = None,
    models: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    behaviors: dict[str, str] | None = None,
    plots: bool = True,
    config: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """The tables and plots of every slice in ``slices_dir``, written to ``out_dir`` (the arguments of
    :func:`morl.aggregate.aggregate`: the config's rows, columns and seeds; ``plots=False``: the
    tables only). ``behaviors``: env -> SHA-256 of the behavior policy it uses now; a slice made
    from another is refused. Every slice is checked (:func:`check_slice`, against ``config`` when
    given) before any table is written; what a slice lacks is logged as a note."""
    found = slice_files(slices_dir)
    slices = read_slices(slices_dir)
    if behaviors:
        check_behaviors(slices_dir, behaviors)
    notes = unsliced_folders(slices_dir)
    for folder, info in slices.items():
        notes += check_slice(folder, info, config=config, datasets=datasets, models=models)
    for note in notes:
        log.warning("note: %s", note)
    curves = {e: c for e, c in zip(found["evaluations"], found["curves"]) if Path(c).is_file()}
    out = aggregate(
        found["evaluations"],
        found["fronts"],
        out_dir,
        datasets=datasets,
        models=models,
        seeds=seeds,
        curves=curves,
        front_models=found["front_models"],
        plots=plots,
        data_cards=found["data_cards"],
    )
    if found["along"]:  # HV along training: the snapshots' evaluations and their runs' final ones
        runs = {str(Path(a).parents[2]) for a in found["along"]}
        finals = [e for e in found["evaluations"] if str(Path(e).parent) in runs]
        out.update(write_convergence([*found["along"], *finals], found["data_cards"], out_dir, plots=plots))
    out["slices"] = Path(out_dir) / "slices.md"
    text = provenance_table(slices_dir)
    atomic_write(out["slices"], lambda t: Path(t).write_text(text))
    return out


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def provenance_table(slices_dir: str | os.PathLike) -> str:
    """A Markdown table of where each slice came from (its ``SLICE.json``s): env, runs, behavior
    policy, commit, date, machine and the wall time of each stage (summed over its jobs)."""
    rows = [
        "| env | runs | behavior policy | commit | exported | machine | wall time per stage |",
        "|---|---:|---|---|---|---|---|",
    ]
    for folder, info in read_slices(slices_dir).items():
        behavior = "; ".join(f"{b.get('method')} `{str(b.get('sha256'))[:12]}`" for b in info.get("behavior", []))
        for piece in pieces(folder, info):
            machine = piece.get("machine") or {}
            stages = ", ".join(f"{k} {_duration(v)}" for k, v in (piece.get("wall_seconds") or {}).items())
            rows.append(
                f"| {info.get('env')} | {len(piece['runs'])} | {behavior} | {str(piece.get('commit'))[:7]} "
                f"| {piece.get('exported')} | {machine.get('cpu')}, {machine.get('cores')} cores | {stages} |"
            )
    return "\n".join(rows) + "\n"


def _card_text(path: Path) -> str:
    """A dataset card's lines that describe the data, without what depends on the machine: its first
    line (where the dataset lay), the file's size (the Parquet writer's version), blank lines, and
    the behavior front's lines, which a card made without the front lacks (the fronts themselves
    are compared as files by :func:`check_same_data`)."""
    text = path.read_text().split("\n", 1)[-1]
    text = re.sub(r"\bfile +[\d.,]+ [kMG]?B\b", "file", text)
    return "\n".join(line for line in text.splitlines() if line.strip() and not _FRONT_LINE.match(line))


#: The lines of a dataset card that give the behavior front (:func:`morl.dataset_info.format_card`).
_FRONT_LINE = re.compile(r"^\s*(behavior front\s|data HV / behavior front HV)")


def check_same_data(slice_folder: Path, piece: Path, slice_info: dict[str, Any], piece_info: dict[str, Any]) -> None:
    """Refuse to add ``piece`` to a slice whose runs came from other data: another behavior policy,
    a dataset card that differs, or another behavior front (beyond the last bits that float
    kernels change between CPU kinds)."""
    import numpy as np

    ours, theirs = ({b["sha256"] for b in i["behavior"]} for i in (slice_info, piece_info))
    if ours != theirs:
        raise InputError(
            f"{piece}: made from data of behavior policy sha256 {', '.join(sorted(theirs))}, but the slice "
            f"{slice_folder} holds runs on data of {', '.join(sorted(ours))}; run the piece on the slice's data"
        )
    for card in sorted((piece / "data").glob("*.card.md")):
        other = slice_folder / "data" / card.name
        if not other.is_file():
            continue
        ours, theirs = _card_text(card), _card_text(other)
        if ours != theirs:
            pairs = itertools.zip_longest(ours.splitlines(), theirs.splitlines())
            line = next(a if a is not None else "(the end of the card)" for a, b in pairs if a != b)
            raise InputError(
                f"{card}: the piece's dataset differs from the slice's ({other}), first at "
                f"{line.strip()!r}; its runs were trained on other data"
            )
    front, other = piece / "behavior" / "front.parquet", slice_folder / "behavior" / "front.parquet"
    if front.is_file() and other.is_file():
        from morl.evaluate import read_evaluation

        a, b = (np.asarray(read_evaluation(p)[1]["return"], dtype=float) for p in (front, other))
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-6, atol=1e-9):
            raise InputError(f"{front}: the piece's behavior front differs from the slice's ({other})")


def add_slice(piece: str | os.PathLike, slices_dir: str | os.PathLike, replace: bool = False) -> Path:
    """Add the runs of ``piece``, a slice exported from part of an env's grid (some models, some
    seeds), to that env's slice in ``slices_dir`` (made when there is none); return the slice's
    folder. The slice's ``SLICE.json`` then lists each piece with where it was made and its runs.
    A piece made from other data than the slice's is refused (:func:`check_same_data`), and so is
    one that brings a run the slice holds already, unless ``replace``: then the piece's run
    replaces it. The slice is written beside itself and swapped in only when complete."""
    piece = Path(piece)
    if not (piece / PROVENANCE).is_file():
        raise InputError(f"{piece}: holds no {PROVENANCE}, so it is not a slice the slice rule exported")
    info = read_provenance(piece / PROVENANCE)
    env = info["env"]
    check_slice(piece, info)
    new_runs = slice_runs(piece)
    if not new_runs:
        raise InputError(f"{piece}: holds no runs to add")
    target = Path(slices_dir) / env
    if target.resolve() == piece.resolve():
        raise InputError(f"{piece}: is the slice it would be added to")
    tmp = target.with_name(env + ".partial")
    check_replaceable(target, env)
    check_replaceable(tmp, env, partial=True)
    kept: list[dict[str, Any]] = []
    existing = target.is_dir() and (target / PROVENANCE).is_file()
    if existing:
        old = read_provenance(target / PROVENANCE)
        check_slice(target, old)
        check_same_data(target, piece, old, info)
        held = sorted(set(new_runs) & set(slice_runs(target)))
        if held and not replace:
            raise InputError(
                f"{piece}: the slice {target} holds run {held[0]} already"
                f"{f' (and {len(held) - 1} more of the piece)' if len(held) > 1 else ''}; "
                "add with --replace to replace them with the piece's"
            )
        kept = [{**p, "runs": [r for r in p["runs"] if r not in new_runs]} for p in pieces(target, old)]
        kept = [p for p in kept if p["runs"]]
    if tmp.exists():
        shutil.rmtree(tmp)
    if existing:
        shutil.copytree(target, tmp)
    else:
        tmp.mkdir(parents=True)
    for run in new_runs:
        if (tmp / run).exists():
            shutil.rmtree(tmp / run)
        shutil.copytree(piece / run, tmp / run)
    # a piece that brings the behavior front to a slice without one brings its dataset cards too,
    # which give the front's HV (check_same_data found them the same in every line of the data)
    front_added = (piece / "behavior" / "front.parquet").is_file() and not (tmp / "behavior" / "front.parquet").exists()
    shared = [piece / "behavior" / "front.parquet", *sorted((piece / "data").glob("*"))]
    for path in shared:
        dest = tmp / path.relative_to(piece)
        if path.is_file() and (not dest.exists() or (front_added and path.name.endswith(".card.md"))):
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    added = [{**p, "runs": [r for r in p["runs"] if r in new_runs]} for p in pieces(piece, info)]
    combined = {
        "env": env,
        "config": (old if existing else info).get("config"),
        "behavior": info["behavior"],
        "runs": len(slice_runs(tmp)),
        "pieces": [*kept, *[p for p in added if p["runs"]]],
    }
    (tmp / PROVENANCE).unlink(missing_ok=True)
    atomic_write(tmp / PROVENANCE, lambda t: Path(t).write_text(json.dumps(combined, indent=2) + "\n"))
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target
