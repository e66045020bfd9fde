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
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from morl import __version__
from morl.aggregate import aggregate
from morl.data import atomic_write, read_meta
from morl.dataset_info import dataset_info, format_card
from morl.errors import InputError

#: The provenance file of a slice.
PROVENANCE = "SLICE.json"
#: The stages whose benchmark files give a slice's wall time, in pipeline order.
STAGES = ("behavior", "behavior_front", "collect", "coverage", "front_model", "train", "evaluate")


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


def stage_seconds(bench_dir: Path, env: str) -> dict[str, float]:
    """Wall time of each stage's jobs of ``env``, summed from the rules' benchmark files (seconds)."""
    out = {}
    for stage in STAGES:
        files = sorted((bench_dir / stage).glob(f"{env}*")) if (bench_dir / stage).is_dir() else []
        files = [p for f in files for p in ([f] if f.is_file() else sorted(f.rglob("*.tsv")))]
        total = 0.0
        for path in files:
            with open(path) as f:
                total += sum(float(row["s"]) for row in csv.DictReader(f, delimiter="\t"))
        if files:
            out[stage] = round(total, 1)
    return out


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
) -> Path:
    """Copy one env's finished results that the tables need into ``out_dir`` (replacing a previous
    export of that env) and write its ``SLICE.json``; return ``out_dir``."""
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    own = (results_dir / env).resolve()
    if out_dir.resolve() in (results_dir.resolve(), own) or own in out_dir.resolve().parents:
        raise InputError(f"{out_dir}: a slice must not be written into the results it is exported from")
    files = [*evaluations, *curves, front, *front_models]
    for path in files:
        if not Path(path).is_file():
            raise InputError(f"{path}: a file of the slice of {env} does not exist; has every run finished?")
    # the behavior policy the data came from, as the datasets record it (and the evaluations repeat)
    behaviors = {(read_meta(d).get("behavior_method"), read_meta(d).get("behavior_sha256")) for d in datasets}
    evaluated = {read_meta(e).get("behavior_sha256") for e in evaluations}
    if not evaluated <= {sha for _, sha in behaviors}:
        raise InputError(
            f"the evaluations of {env} come from data of another behavior policy than its datasets' "
            f"({', '.join(sorted(map(str, evaluated)))}); rerun the env's runs on its current data"
        )
    tmp = out_dir.with_name(out_dir.name + ".partial")
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
        "wall_seconds": {} if bench_dir is None else stage_seconds(Path(bench_dir), env),
        "behavior": [{"method": m, "sha256": s} for m, s in sorted(behaviors, key=str)],
        "runs": len(evaluations),
    }
    atomic_write(tmp / PROVENANCE, lambda t: Path(t).write_text(json.dumps(provenance, indent=2) + "\n"))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return out_dir


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
    evaluations = [str(p) for s in slices for p in sorted(s.rglob("eval.parquet"))]
    return {
        "evaluations": evaluations,
        "curves": [str(Path(e).with_name("curve.csv")) for e in evaluations],
        "fronts": [
            str(s / "behavior" / "front.parquet") for s in slices if (s / "behavior" / "front.parquet").is_file()
        ],
        "front_models": [str(p) for s in slices for p in sorted(s.rglob("*.front_model.pt"))],
        "data_cards": [str(p) for s in slices for p in sorted((s / "data").glob("*.card.md"))],
    }


def check_behaviors(slices_dir: str | os.PathLike, behaviors: dict[str, str]) -> None:
    """Refuse a slice whose data came from another behavior policy than ``behaviors`` says its env
    uses now (env -> SHA-256 of the policy file): its rows would describe data the grid no longer
    has, so the slice must be run again."""
    for path in sorted(Path(slices_dir).glob(f"*/{PROVENANCE}")):
        info = json.loads(path.read_text())
        expected = behaviors.get(info.get("env"))
        recorded = {b.get("sha256") for b in info.get("behavior", [])}
        if expected is not None and recorded != {expected}:
            raise InputError(
                f"{path.parent}: the slice's data came from behavior policy sha256 "
                f"{', '.join(sorted(map(str, recorded)))}, but {info.get('env')} now uses {expected}; run the env "
                "again and export its slice anew"
            )


def merge_slices(
    slices_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    datasets: Sequence[tuple[str, str, str]] | None = None,
    models: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    behaviors: dict[str, str] | None = None,
    plots: bool = True,
) -> dict[str, Path]:
    """The tables and plots of every slice in ``slices_dir``, written to ``out_dir`` (the arguments of
    :func:`morl.aggregate.aggregate`: the config's rows, columns and seeds; ``plots=False``: the
    tables only). ``behaviors``: env -> SHA-256 of the behavior policy it uses now; a slice made
    from another is refused."""
    if behaviors:
        check_behaviors(slices_dir, behaviors)
    found = slice_files(slices_dir)
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
    for path in sorted(Path(slices_dir).glob(f"*/{PROVENANCE}")):
        info = json.loads(path.read_text())
        behavior = "; ".join(f"{b.get('method')} `{str(b.get('sha256'))[:12]}`" for b in info.get("behavior", []))
        machine = info.get("machine", {})
        stages = ", ".join(f"{k} {_duration(v)}" for k, v in info.get("wall_seconds", {}).items())
        rows.append(
            f"| {info.get('env')} | {info.get('runs')} | {behavior} | {str(info.get('commit'))[:7]} "
            f"| {info.get('exported')} | {machine.get('cpu')}, {machine.get('cores')} cores | {stages} |"
        )
    return "\n".join(rows) + "\n"
