"""Slices of a grid: stale ones refused, and the committed paper-cpu-small tables rebuilt from the committed slices."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from tables_compare import csv_differences, differences, text_differences

from morl.cli import main
from morl.errors import InputError
from morl.slices import PROVENANCE, check_behaviors, merge_slices, slice_files

ROOT = Path(__file__).resolve().parent.parent
PAPER_CPU = ROOT / "docs" / "paper-cpu-small"
UNSEEN = ROOT / "docs" / "unseen"


def merged_tables(config: str, slices: Path, out: Path) -> Path:
    """`morl merge-slices --tables-only` of ``slices`` under ``config`` into ``out``."""
    assert (
        main(
            [
                "merge-slices",
                "--config",
                str(ROOT / config),
                "--slices",
                str(slices),
                "--out-dir",
                str(out),
                "--tables-only",
            ]
        )
        == 0
    )
    return out


def write_slice(root: Path, env: str, sha: str) -> Path:
    (root / env).mkdir(parents=True)
    (root / env / PROVENANCE).write_text(
        json.dumps({"env": env, "behavior": [{"method": "pgmorl", "sha256": sha}], "runs": 0})
    )
    return root / env


def test_a_slice_from_another_behavior_policy_is_refused_naming_it(tmp_path):
    write_slice(tmp_path, "MO-HalfCheetah-v2", "a" * 64)
    check_behaviors(tmp_path, {"MO-HalfCheetah-v2": "a" * 64, "MO-Hopper-v2": "c" * 64})
    with pytest.raises(InputError, match=r"MO-HalfCheetah-v2: the slice's data came from behavior policy sha256 a+, "
                       r"but MO-HalfCheetah-v2 now uses b+; run the env again"):  # fmt: skip
        check_behaviors(tmp_path, {"MO-HalfCheetah-v2": "b" * 64})


def test_no_slice_is_an_error_not_empty_tables(tmp_path):
    with pytest.raises(InputError, match="holds no slice"):
        slice_files(tmp_path)
    with pytest.raises(InputError, match="no slices folder"):
        slice_files(tmp_path / "absent")


@pytest.mark.parametrize("name", ["paper-cpu-small", "paper-cpu"])
def test_the_committed_paper_cpu_tables_are_what_the_committed_slices_give(tmp_path, name):
    """docs/paper-cpu-small (the grid at a 50th of PEDA's MLP budget) and docs/paper-cpu (at PEDA's
    budgets, filled env by env) hold the tables and plots `morl merge-slices` makes from their runs/."""
    folder = ROOT / "docs" / name
    if not (folder / "runs").is_dir():
        pytest.skip(f"no slice of configs/{name}.yaml is committed yet")
    out = tmp_path / "merged"
    argv = ["merge-slices", "--config", str(ROOT / f"configs/{name}.yaml"), "--slices", str(folder / "runs")]
    assert main([*argv, "--out-dir", str(out)]) == 0
    made = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert made and all((folder / f).is_file() for f in made)
    # the tables as tests/tables_compare.py compares them (byte for byte but the numbers that pass
    # through CPU-dependent float kernels); the figures (and the page that embeds them) depend on
    # the fonts and the renderer of the machine that draws them, so they are checked to be there
    tables = [f for f in made if f.parts[0] != "plots" and f.suffix != ".html"]
    # and the reading against the paper's findings that `morl paper-targets` makes from them
    comparison = ["paper-targets", "--comparison", str(out / "paper_comparison.csv")]
    assert main([*comparison, "--output", str(out / "targets.md")]) == 0
    differ = differences(folder, out, [*tables, "targets.md"])
    assert tables and not differ, "\n".join(differ)


def test_the_committed_budget_probe_tables_are_what_its_slice_gives(tmp_path):
    """docs/unseen/budget-probe keeps some of the tables `morl merge-slices` makes from its slice
    (docs/weight-conditioning.md reads them); each kept one is what the slice gives (as
    tests/tables_compare.py compares them)."""
    probe = ROOT / "docs/unseen/budget-probe"
    out = merged_tables("configs/unseen-budget-probe.yaml", probe / "runs", tmp_path / "merged")
    assert not (out / "plots").exists()
    kept = sorted(p.name for p in probe.iterdir() if p.is_file())
    assert "metrics.csv" in kept and "generalisation_iqm.md" in kept
    differ = differences(probe, out, kept)
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize("change, differs", [(1e-8, False), (1e-3, True)])
def test_the_committed_tables_allow_for_another_cpu_and_nothing_more(tmp_path, monkeypatch, change, differs):
    """The front model's predictions and EUM pass through float kernels whose last bits depend on
    the CPU: changed by a relative 1e-8 (more than another CPU changes them), the budget probe's
    tables still compare equal; changed by 1e-3, the comparison names each changed column."""
    import morl.metrics_frame
    from morl.front_model import FrontModel

    predict, eum = FrontModel.predict, morl.metrics_frame.eum
    monkeypatch.setattr(FrontModel, "predict", lambda self, w: predict(self, w) * (1 + change))
    monkeypatch.setattr(morl.metrics_frame, "eum", lambda points: eum(points) * (1 + change))
    probe = ROOT / "docs/unseen/budget-probe"
    out = merged_tables("configs/unseen-budget-probe.yaml", probe / "runs", tmp_path / "merged")
    differ = differences(probe, out, sorted(p.name for p in probe.iterdir() if p.is_file()))
    if not differs:
        assert not differ, "\n".join(differ)
        return
    for file, column in [("metrics.csv", "rd_held_out"), ("metrics.csv", "eum"), ("intervals.csv", "rd_held_out_mean"),
                         ("intervals.csv", "rd_held_out_std"), ("intervals.csv", "eum")]:  # fmt: skip
        assert any(d.startswith(f"{file}: row ") and f"column {column}: " in d and "> 1e-06" in d for d in differ), (
            file, column, differ)  # fmt: skip
    assert all(" column rd_held_out" in d or " column eum" in d or " column 'EUM'" in d for d in differ), differ


def test_a_changed_number_is_named_with_its_file_row_column_and_size():
    """Outside the columns of CPU-dependent kernels a number must keep its bytes; in them it may
    move by a relative 1e-6; a Markdown cell of such a column by one unit of its last digit."""
    header = "env,model,hv,eum,rd_held_out,note\n"
    committed = header + "A,dt,1.5,2000.0,300.0,ok\n"
    assert csv_differences("t.csv", committed, header + "A,dt,1.5,2000.0000001,300.0000003,ok\n") == []
    assert csv_differences("t.csv", committed, header + "A,dt,1.5000000000000002,2000.0,300.0,ok\n") == [
        "t.csv: row 1 (A,dt,1.5,2000.0,300.0), column hv: committed 1.5, made 1.5000000000000002, relative "
        "difference 1.48e-16; this column must repeat byte for byte"
    ]
    assert csv_differences("t.csv", committed, header + "A,dt,1.5,2000.0,300.3,ok\n") == [
        "t.csv: row 1 (A,dt,1.5,2000.0,300.0), column rd_held_out: committed 300.0, made 300.3, relative "
        "difference 0.000999 > 1e-06"
    ]
    assert csv_differences("t.csv", committed, header + "A,dt,1.5,2000.0,,ok\n") == [
        "t.csv: row 1 (A,dt,1.5,2000.0,300.0), column rd_held_out: committed '300.0', made ''"
    ]
    assert csv_differences("t.csv", committed, header + "A,dt,1.5,2000.0,300.0,bad\n") != []
    assert csv_differences("t.csv", committed, committed + "B,dt,1,2,3,ok\n") == ["t.csv: 1 rows committed, 2 made"]
    assert csv_differences("t.csv", committed, committed.replace("note", "notes")) != []
    table = "## T\n\n| model | HV (unit) | EUM | RD held-out (unit) |\n|---|---|---|---|\n| dt | 1.25 | 2181 | {} |\n"
    assert text_differences("t.md", table.format("1.16 ± 0.01"), table.format("1.17 ± 0.01")) == []
    assert text_differences("t.md", table.format("1.16 ± 0.01"), table.format("1.18 ± 0.01")) == [
        "t.md: line 5 (dt | 1.25 | 2181), column 'RD held-out (unit)': committed 1.16, made 1.18, differ by "
        "0.02, more than one unit of the last printed digit (0.01)"
    ]
    assert text_differences("t.md", table.format("1"), table.format("1").replace("1.25", "1.26")) == [
        "t.md: line 5 (dt | 1.25 | 2181), column 'HV (unit)': committed '1.25', made '1.26'"
    ]
    assert text_differences("t.md", table.format("1"), table.format("1").replace("## T", "## U")) != []
    tex = "\\toprule\nmodel & HV (unit) & EUM \\\\\n\\midrule\ndt & 1.25 & 2181 \\\\\n\\bottomrule\n"
    assert text_differences("t.tex", tex, tex.replace("2181", "2182")) == []
    assert text_differences("t.tex", tex, tex.replace("1.25", "1.24")) == [
        "t.tex: line 4 (dt | 1.25 | 2181), column 'HV (unit)': committed '1.25', made '1.24'"
    ]


@pytest.mark.parametrize(
    "folder, config, table",
    [("unseen", "configs/unseen.yaml", "generalisation_iqm.md"),
     ("paper-cpu-definitions", "configs/paper-cpu-definitions.yaml", "paper_comparison.csv")],
)  # fmt: skip
def test_committed_tables_are_what_their_slices_give(tmp_path, folder, config, table):
    """docs/unseen's and docs/paper-cpu-definitions' tables (every file at the top level but the
    README and the HTML page) are what `morl merge-slices` makes from their runs/ (as
    tests/tables_compare.py compares them)."""
    committed = ROOT / "docs" / folder
    out = merged_tables(config, committed / "runs", tmp_path / "merged")
    made = sorted(p.name for p in out.iterdir() if p.is_file() and p.suffix != ".html")
    kept = sorted(p.name for p in committed.iterdir() if p.is_file() and p.suffix != ".html" and p.name != "README.md")
    assert table in made and made == kept
    differ = differences(committed, out, made)
    assert not differ, "\n".join(differ)


def test_the_committed_value_based_tables_are_the_unseen_runs_complete_rows(tmp_path):
    """docs/value-based is `morl aggregate` over the complete-data evaluations of docs/unseen/runs,
    as its README's command writes it: the same tables (as tests/tables_compare.py compares them)."""
    runs = UNSEEN / "runs"
    evaluations = sorted(str(p) for p in runs.glob("MO-*/*-high/*/seed*/eval.parquet"))
    fronts = sorted(str(p) for p in runs.glob("MO-*/behavior/front.parquet"))
    cards = sorted(str(p) for p in runs.glob("MO-*/data/*.card.md"))
    assert len(fronts) == 3 and len(cards) == 6 and evaluations
    out = tmp_path / "value-based"
    argv = ["aggregate", "--evaluations", *evaluations, "--fronts", *fronts, "--data-cards", *cards]
    argv += ["--seeds", "0", "1", "2"]
    assert main([*argv, "--out-dir", str(out)]) == 0
    tables = sorted(p.name for p in out.iterdir() if p.is_file() and p.suffix != ".html")
    differ = differences(ROOT / "docs" / "value-based", out, tables)
    assert tables and not differ, "\n".join(differ)


def test_the_definitions_comparison_reads_b_as_the_paper_comparison_does(capsys):
    """benchmarks/definitions_effect.py --b data divides by each dataset's own front, as
    paper_comparison.csv does; on one run against itself its cells are that table's fractions."""
    import importlib.util

    import polars as pl

    spec = importlib.util.spec_from_file_location("definitions_effect", ROOT / "benchmarks/definitions_effect.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(PAPER_CPU), str(PAPER_CPU), "--b", "data"]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    comparison = pl.read_csv(PAPER_CPU / "paper_comparison.csv").filter(pl.col("n_seeds") > 0)
    assert len(rows) == len(comparison) > 30
    from morl.families import display_names

    expected = {
        (r["env"], f"{r['quality']} high-H", display_names()[r["model"]]): r for r in comparison.iter_rows(named=True)
    }
    for cells in rows:
        r = expected[(cells[0].lstrip("| "), cells[1], cells[2])]
        assert float(cells[3].split(" ± ")[0]) == pytest.approx(r["our_fraction"], abs=0.006)
        assert cells[5] == "+0.00"
        paper = cells[6].rstrip(" |")
        assert (paper == "") == (r["paper_fraction"] is None)
        if paper:
            assert float(paper) == pytest.approx(r["paper_fraction"], abs=0.006)


ENV = "MO-HalfCheetah-v2"
SHA = "d" * 64


def meta_parquet(path: Path, meta: dict) -> Path:
    """A Parquet file that holds nothing but ``meta`` as its morl metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from morl.data import META_KEY

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"x": [0]}).replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    pq.write_table(table, path)
    return path


def results_of_one_run(results: Path) -> dict:
    """The inputs of the slice rule for one env with one run, as files whose metadata says which
    behavior policy they come from (enough for the slice's checks, which come first)."""
    run = results / ENV / "expert-high" / "bc" / "seed0"
    evaluation = meta_parquet(run / "eval.parquet", {"kind": "model", "env_id": ENV, "behavior_sha256": SHA})
    (run / "curve.csv").write_text("step,loss\n1,0.5\n")
    dataset = meta_parquet(results / ENV / "data" / "expert-high.parquet",
                           {"env_id": ENV, "behavior_method": "td3", "behavior_sha256": SHA})  # fmt: skip
    front = meta_parquet(results / ENV / "behavior" / "front.parquet", {"kind": "behavior", "env_id": ENV})
    return {"evaluations": [evaluation], "curves": [run / "curve.csv"], "front": front, "datasets": [dataset]}


@pytest.mark.parametrize(
    "files, why",
    [({"data/expert-high.parquet": "a dataset"}, "it holds data/expert-high.parquet, which no slice holds"),
     ({"notes.txt": "mine"}, "it holds notes.txt, which no slice holds"),
     ({"behavior/front.parquet": "x"}, "it has no SLICE.json"),
     ({"SLICE.json": json.dumps({"env": "MO-Hopper-v2", "behavior": [], "runs": 0})},
      f"its SLICE.json describes a slice of MO-Hopper-v2, not of {ENV}"),
     ({"SLICE.json": "[1, 2]"}, "its SLICE.json is not one this tool writes")],
)  # fmt: skip
def test_a_folder_that_is_not_a_slice_is_never_replaced(tmp_path, files, why):
    from morl.slices import export_slice

    inputs = results_of_one_run(tmp_path / "results")
    out = tmp_path / "old_results" / ENV
    for name, text in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    with pytest.raises(InputError) as caught:
        export_slice(ENV, tmp_path / "results", out, **inputs)
    assert str(caught.value) == (f"{out}: will not replace this folder with the slice of {ENV}: {why}, so it is not a "
                                 "slice this tool wrote; move it away or set slices_dir to another folder")  # fmt: skip
    assert {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*") if p.is_file()} == files
    assert not out.with_name(ENV + ".partial").exists()


def test_an_unfinished_copy_that_holds_other_files_is_not_deleted(tmp_path):
    from morl.slices import export_slice

    inputs = results_of_one_run(tmp_path / "results")
    partial = tmp_path / "slices" / f"{ENV}.partial"
    (partial / "data").mkdir(parents=True)
    (partial / "data" / "expert-high.parquet").write_text("a dataset")
    with pytest.raises(InputError, match=rf"{ENV}\.partial: will not replace .*: it holds data/expert-high\.parquet"):
        export_slice(ENV, tmp_path / "results", tmp_path / "slices" / ENV, **inputs)
    assert (partial / "data" / "expert-high.parquet").read_text() == "a dataset"


SNAKEFILE = """
import os
import re
config.update({{"envs": ["{env}"], "qualities": ["expert"], "entropies": ["high"]}})
R, SLICES, LOGS, BENCH = "results", "old_results", "results/logs", "results/benchmarks"
BEHAVIOR_FRONT = os.path.join(R, "{{env}}/behavior/front.parquet")
RUN = os.path.join(R, "{env}/expert-high/bc/seed0")
def all_evaluations(): return [os.path.join(RUN, "eval.parquet")]
def all_curves(): return [os.path.join(RUN, "curve.csv")]
def all_front_models(): return []
def all_along_evaluations(): return []
def all_episode_evaluations(): return []
def dataset_file(env, q, h): return os.path.join(R, env, "data", f"{{q}}-{{h}}.parquet")
def of_env(paths, env): return [p for p in paths if p.startswith(os.path.join(R, env, ""))]
include: "{rules}"
"""


@pytest.mark.slow
def test_the_slice_rule_leaves_a_folder_that_is_not_a_slice_as_it_was(tmp_path):
    """Snakemake deletes a job's output folder before the job runs; the slice rule's is left to
    the script, which refuses it, and the folder keeps its files."""
    import subprocess
    import sys

    results_of_one_run(tmp_path / "results")
    user = tmp_path / "old_results" / ENV / "data" / "expert-high.parquet"
    user.parent.mkdir(parents=True)
    user.write_bytes(b"the user's dataset")
    for path in (user, user.parent, user.parent.parent):  # older than the results, so the rule runs
        os.utime(path, (1e9, 1e9))
    (tmp_path / "Snakefile").write_text(SNAKEFILE.format(env=ENV, rules=ROOT / "rules" / "slices.smk"))
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "slices"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode != 0, res.stdout + res.stderr
    assert f"morl slice: error: old_results/{ENV}: will not replace this folder" in res.stderr, res.stderr[-3000:]
    assert user.read_bytes() == b"the user's dataset"
    assert sorted(p.relative_to(tmp_path / "old_results") for p in (tmp_path / "old_results").rglob("*")) == [
        Path(ENV), Path(ENV) / "data", Path(ENV) / "data" / "expert-high.parquet"]  # fmt: skip


def evaluation(path: Path, config: dict, env: str, model: str | None, **changes) -> Path:
    """An evaluation of ``model`` (None: the behavior front) on ``env``'s grid, as ``config`` makes it."""
    from morl.config import train_settings
    from morl.evaluate import result_settings, write_evaluation

    n = config["evaluate"]["divisions"] + 1  # two objectives
    prefs = np.linspace([0, 1], [1, 0], n)
    res = {"preferences": prefs, "targets": np.zeros_like(prefs), "returns": prefs * 100, "lengths": np.full(n, 9.0),
           "seeds": np.zeros((n, 1), int), "summary": {"hv": 1.0, "n_points": n}}  # fmt: skip
    meta = {"env_id": env, "eval_seed": config["evaluate"]["seed"], "episodes": config["evaluate"]["episodes"]}
    if model is None:
        meta |= {"kind": "behavior", "checkpoint_sha256": SHA}
    else:
        settings = result_settings(train_settings(config, env, model))
        meta |= {"kind": "model", "model": model, "quality": "amateur", "entropy": "low", "train_seed": 0,
                 "behavior_sha256": SHA, "train_settings": settings}  # fmt: skip
    for key, value in changes.items():
        if key in meta.get("train_settings", {}):
            meta["train_settings"] = {**meta["train_settings"], key: value}
        elif key == "n_points":
            res["summary"]["n_points"] = value
        else:
            meta[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    if model is None:  # the front holds the behavior policy's, the zero and the random policy's points
        res = {k: v if k == "summary" else np.concatenate([v] * 3) for k, v in res.items()}
        write_evaluation(path, res, meta, policy_names=np.repeat(["behavior", "zero", "random"], n))
    else:
        write_evaluation(path, res, meta)
    return path


def a_slice(root: Path, config: dict, models=("bc", "dt-p"), front=True, **provenance) -> Path:
    """A slice of MO-HalfCheetah-v2 as export_slice lays it out, made under ``config``."""
    folder = root / ENV
    for m in models:
        evaluation(folder / "amateur-low" / m / "seed0" / "eval.parquet", config, ENV, m)
    if front:
        evaluation(folder / "behavior" / "front.parquet", config, ENV, None)
    info = {"env": ENV, "behavior": [{"method": "td3", "sha256": SHA}], "runs": len(models), **provenance}
    (folder / PROVENANCE).write_text(json.dumps(info))
    return folder


def merge(root: Path, out: Path, config: dict) -> dict:
    rows = [(e, q, h) for e in config["envs"] for q in config["qualities"] for h in config["entropies"]]
    return merge_slices(root, out, datasets=rows, models=config["models"], seeds=config["seeds"], plots=False,
                        config=config)  # fmt: skip


@pytest.mark.parametrize(
    "text, problem",
    [("{not json", "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
     ("[1, 2]", "a JSON list, not an object"),
     ('{"env": 3, "behavior": [], "runs": 0}', "'env' is 3, not an env's name"),
     ('{"env": "E", "behavior": {"sha256": "x"}, "runs": 0}',
      "'behavior' is {'sha256': 'x'}, not a list of {method, sha256}"),
     ('{"env": "E", "behavior": [], "runs": -1}', "'runs' is -1, not a count of runs")],
)  # fmt: skip
def test_a_damaged_slice_description_is_named_before_any_table_is_written(tmp_path, config, text, problem):
    a_slice(tmp_path / "slices", config)
    (tmp_path / "slices" / ENV / PROVENANCE).write_text(text)
    with pytest.raises(InputError) as caught:
        merge(tmp_path / "slices", tmp_path / "out", config)
    assert str(caught.value) == f"{tmp_path / 'slices' / ENV / PROVENANCE}: not a slice's {PROVENANCE}: {problem}"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_sound_slice_merges(tmp_path, config):
    a_slice(tmp_path / "slices", config)
    out = merge(tmp_path / "slices", tmp_path / "out", config)
    assert f"| {ENV} | 2 | td3 `{SHA[:12]}` |" in out["slices"].read_text()


@pytest.mark.parametrize(
    "provenance, problem",
    [({"behavior": [{"method": "td3", "sha256": "e" * 64}]},
      f"amateur-low/bc/seed0/eval.parquet: made from data of behavior policy sha256 {SHA}, but "
      f"{{slice}}/SLICE.json says {'e' * 64}; the slice's description does not match its files, export it anew"),
     ({"env": "MO-Hopper-v2"}, "{slice}/SLICE.json: describes a slice of MO-Hopper-v2, but the folder is "
                               f"{ENV}'s"),
     ({"runs": 3}, "{slice}/SLICE.json: says the slice holds 3 runs, but it holds 2 evaluations")],
)  # fmt: skip
def test_a_slice_whose_description_disagrees_with_its_files_is_refused(tmp_path, config, provenance, problem):
    folder = a_slice(tmp_path / "slices", config, **provenance)
    with pytest.raises(InputError) as caught:
        merge(tmp_path / "slices", tmp_path / "out", config)
    assert str(caught.value).endswith(problem.format(slice=folder)), str(caught.value)


@pytest.mark.parametrize(
    "change, problem",
    [({"eval_seed": 8}, "evaluate.seed is 8 in the slice, 7 in the config"),
     ({"episodes": 2}, "evaluate.episodes is 2 in the slice, 1 in the config"),
     ({"n_points": 11}, "evaluate.divisions (preference points) is 11 in the slice, '3 (4 points)' in the config"),
     ({"steps": 60}, "train.peda.steps (for dt-p) is 60 in the slice, 30 in the config"),
     ({"lr": 0.01}, "train.peda.lr (for dt-p) is 0.01 in the slice, 0.001 in the config")],
)  # fmt: skip
def test_a_slice_made_under_another_config_is_refused_naming_the_setting(tmp_path, config, change, problem):
    folder = a_slice(tmp_path / "slices", config)
    path = evaluation(folder / "amateur-low" / "dt-p" / "seed0" / "eval.parquet", config, ENV, "dt-p", **change)
    with pytest.raises(InputError) as caught:
        merge(tmp_path / "slices", tmp_path / "out", config)
    assert str(caught.value) == (f"{path}: made under another config: {problem}; run the env again under this "
                                 "config and export its slice anew")  # fmt: skip


def test_what_a_slice_lacks_is_noted(tmp_path, config):
    from morl.slices import check_slice, read_provenance, unsliced_folders

    folder = a_slice(tmp_path / "slices", config, models=("bc",), front=False)
    (tmp_path / "slices" / "MO-Hopper-v3" / "amateur-low").mkdir(parents=True)
    rows = [(e, "amateur", "low") for e in config["envs"]]
    notes = check_slice(folder, read_provenance(folder / PROVENANCE), config, rows, ["bc", "dt-p", "cql"])
    assert notes == [
        f"{folder}: the slice has no behavior front (behavior/front.parquet); its Pareto plots and baselines table lack the behavior policy",
        f"{folder}: the slice has no runs of amateur-low/dt-p, amateur-low/cql; their cells are empty",
    ]
    assert unsliced_folders(tmp_path / "slices") == [
        f"{tmp_path / 'slices' / 'MO-Hopper-v3'}: holds no SLICE.json, so it is no slice and is left out"
    ]
    a_slice(tmp_path / "whole", config, models=("bc", "dt-p", "cql"))
    assert check_slice(tmp_path / "whole" / ENV, read_provenance(tmp_path / "whole" / ENV / PROVENANCE), config,
                       rows, ["bc", "dt-p", "cql"]) == []  # fmt: skip


@pytest.mark.parametrize(
    "runs, config",
    [("docs/paper-cpu-small/runs", "configs/paper-cpu-small.yaml"), ("docs/paper-cpu/runs", "configs/paper-cpu.yaml"),
     ("docs/unseen/runs", "configs/unseen.yaml"),
     ("docs/unseen/budget-probe/runs", "configs/unseen-budget-probe.yaml"),
     ("docs/paper-cpu-definitions/runs", "configs/paper-cpu-definitions.yaml")],
)  # fmt: skip
def test_every_committed_slice_agrees_with_its_files_and_its_config(runs, config):
    from morl.config import load_config
    from morl.slices import check_slice, read_slices

    cfg = load_config(ROOT / config)
    for folder, info in read_slices(ROOT / runs).items():
        notes = check_slice(folder, info, config=cfg)
        # a slice assembled from pieces lacks the behavior front until a piece exported by the
        # workflow brings it; a slice exported whole has it
        assert notes == ([f"{folder}: the slice has no behavior front (behavior/front.parquet); its Pareto plots and baselines table lack the behavior policy"]
                         if "pieces" in info and not (folder / "behavior" / "front.parquet").is_file() else [])  # fmt: skip


def card(trajectories: str = "2,000", size: str = "76.9 MB", front: str = "results/E/behavior") -> str:
    return (f"{front}/../data/amateur-low.parquet\n  env_id {ENV}, quality amateur, preference entropy label 'low'\n"
            f"  trajectories     {trajectories}   steps 1,000,000   file {size}\n"
            "  data HV          1000.0  (trajectory returns, reference point 0; 6 non-dominated of 2000)\n"
            f"  behavior front   HV 1100.0  (4-point grid, {front}/front.parquet)\n")  # fmt: skip


def a_piece(root: Path, config: dict, models, commit: str, card: str = card(), front: bool = True) -> Path:
    """A slice exported from the part of the grid that trains ``models``, by the code of ``commit``."""
    folder = a_slice(root, config, models=models, commit=commit, exported="2026-12-07 10:00 UTC", front=front,
                     machine={"cpu": "AMD EPYC", "cores": 2}, wall_seconds={"train": 60.0 * len(models)})  # fmt: skip
    (folder / "data").mkdir(exist_ok=True)
    (folder / "data" / "amateur-low.card.md").write_text(card)
    return folder


def test_pieces_of_an_envs_grid_add_up_to_one_slice_that_names_each_piece(tmp_path, config):
    """A grid too long for one sitting is run a few models at a time; each part is exported on its
    own and added to the env's slice, which then merges as one and says where each part ran."""
    from morl.slices import add_slice, check_slice, read_provenance

    first = a_piece(tmp_path / "a", config, ("bc",), "a" * 40)
    # written by another Parquet writer into another results folder: the same data
    second = a_piece(tmp_path / "b", config, ("dt-p",), "b" * 40, card=card(size="77.0 MB", front="/home/me/res"))
    assert main(["add-slice", str(first), "--slices", str(tmp_path / "slices")]) == 0
    folder = add_slice(second, tmp_path / "slices")
    info = read_provenance(folder / PROVENANCE)
    assert info["runs"] == 2
    assert [(p["commit"], p["runs"]) for p in info["pieces"]] == [
        ("a" * 40, ["amateur-low/bc/seed0"]), ("b" * 40, ["amateur-low/dt-p/seed0"])]  # fmt: skip
    assert check_slice(folder, info, config=config) == []
    slices_md = merge(tmp_path / "slices", tmp_path / "out", config)["slices"].read_text()
    assert (
        f"| {ENV} | 1 | td3 `{SHA[:12]}` | aaaaaaa | 2026-12-07 10:00 UTC | AMD EPYC, 2 cores | train 1 min |"
        in slices_md
    )
    assert f"| {ENV} | 1 | td3 `{SHA[:12]}` | bbbbbbb |" in slices_md
    # the tables are those of one slice that holds both runs
    a_piece(tmp_path / "whole", config, ("bc", "dt-p"), "c" * 40)
    whole = merge(tmp_path / "whole", tmp_path / "whole-out", config)
    assert (tmp_path / "out" / "metrics.csv").read_text() == whole["metrics"].read_text()


def test_a_piece_that_brings_the_behavior_front_completes_a_slice_made_without_it(tmp_path, config):
    """Pieces gathered without the behavior front have cards that say it is not known; a later piece
    of the same data, exported by the workflow, brings the front and cards that give its HV."""
    from morl.slices import add_slice, check_slice, read_provenance

    unknown = "  behavior front   not known (pass --front results/<env>/behavior/front.parquet)\n"
    without = card().split("  behavior front")[0] + unknown
    add_slice(a_piece(tmp_path / "a", config, ("bc",), "a" * 40, card=without, front=False), tmp_path / "slices")
    # the workflow's cards end in a blank line, which cards gathered by hand may lack
    folder = add_slice(a_piece(tmp_path / "b", config, ("dt-p",), "b" * 40, card=card() + "\n"), tmp_path / "slices")
    assert (folder / "behavior" / "front.parquet").is_file()
    assert (folder / "data" / "amateur-low.card.md").read_text() == card() + "\n"
    assert check_slice(folder, read_provenance(folder / PROVENANCE), config=config) == []
    # a third piece without the front changes neither
    add_slice(a_piece(tmp_path / "c", config, ("cql",), "c" * 40, card=without, front=False), tmp_path / "slices")
    assert (folder / "data" / "amateur-low.card.md").read_text() == card() + "\n"
    assert (folder / "behavior" / "front.parquet").is_file()


def test_a_piece_whose_card_lacks_a_line_of_the_data_is_refused_naming_where(tmp_path, config):
    from morl.slices import add_slice

    add_slice(a_piece(tmp_path / "a", config, ("bc",), "a" * 40), tmp_path / "slices")
    short = "".join(line for line in card().splitlines(keepends=True) if "data HV" not in line)
    with pytest.raises(
        InputError, match=re.escape("differs from the slice's") + ".*first at '\\(the end of the card\\)'"
    ):
        add_slice(a_piece(tmp_path / "b", config, ("dt-p",), "b" * 40, card=short), tmp_path / "slices")


def test_a_piece_that_brings_a_run_the_slice_holds_is_refused_unless_it_replaces_it(tmp_path, config):
    from morl.slices import add_slice, read_provenance

    add_slice(a_piece(tmp_path / "a", config, ("bc", "dt-p"), "a" * 40), tmp_path / "slices")
    again = a_piece(tmp_path / "b", config, ("dt-p",), "b" * 40)
    with pytest.raises(InputError) as caught:
        add_slice(again, tmp_path / "slices")
    assert str(caught.value) == (f"{again}: the slice {tmp_path / 'slices' / ENV} holds run amateur-low/dt-p/seed0 "
                                 "already; add with --replace to replace them with the piece's")  # fmt: skip
    folder = add_slice(again, tmp_path / "slices", replace=True)
    assert [(p["commit"], p["runs"]) for p in read_provenance(folder / PROVENANCE)["pieces"]] == [
        ("a" * 40, ["amateur-low/bc/seed0"]), ("b" * 40, ["amateur-low/dt-p/seed0"])]  # fmt: skip
    # a piece left with no runs is dropped
    add_slice(a_piece(tmp_path / "c", config, ("dt-p",), "c" * 40), tmp_path / "slices", replace=True)
    assert [p["commit"] for p in read_provenance(folder / PROVENANCE)["pieces"]] == ["a" * 40, "c" * 40]


@pytest.mark.parametrize(
    "change, problem",
    [("behavior", "made from data of behavior policy sha256 eeee"),
     ("card", "the piece's dataset differs from the slice's ({slice}/data/amateur-low.card.md), first at "
              "'trajectories     1,000   steps 1,000,000   file'; its runs were trained on other data")],
)  # fmt: skip
def test_a_piece_made_from_other_data_is_refused_and_the_slice_kept(tmp_path, config, change, problem):
    from morl.slices import add_slice

    folder = add_slice(a_piece(tmp_path / "a", config, ("bc",), "a" * 40), tmp_path / "slices")
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    piece = a_piece(tmp_path / "b", config, ("dt-p",), "b" * 40, card=card("1,000" if change == "card" else "2,000"))
    if change == "behavior":  # the piece's description and files name another behavior policy
        import pyarrow.parquet as pq

        from morl.data import META_KEY

        info = json.loads((piece / PROVENANCE).read_text())
        (piece / PROVENANCE).write_text(json.dumps({**info, "behavior": [{"method": "td3", "sha256": "e" * 64}]}))
        for path in piece.rglob("*.parquet"):
            table = pq.read_table(path)
            meta = json.loads(table.schema.metadata[META_KEY])
            meta = {k: ("e" * 64 if v == SHA else v) for k, v in meta.items()}
            pq.write_table(table.replace_schema_metadata({**table.schema.metadata, META_KEY: json.dumps(meta)}), path)
    with pytest.raises(InputError, match=re.escape(problem.format(slice=folder))):
        add_slice(piece, tmp_path / "slices")
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert not folder.with_name(ENV + ".partial").exists()


def test_the_slice_rule_does_not_replace_a_slice_that_holds_runs_it_lacks(tmp_path, config):
    from morl.slices import add_slice, export_slice

    add_slice(a_piece(tmp_path / "a", config, ("cql",), "a" * 40), tmp_path / "old_results")
    inputs = results_of_one_run(tmp_path / "results")
    with pytest.raises(InputError) as caught:
        export_slice(ENV, tmp_path / "results", tmp_path / "old_results" / ENV, **inputs)
    assert str(caught.value) == (
        f"{tmp_path / 'old_results' / ENV}: will not replace this slice of {ENV}: it holds runs this export lacks "
        "(amateur-low/cql/seed0); export into another slices_dir and add it with `morl add-slice`, or move the "
        "folder away to replace it")  # fmt: skip
    assert (tmp_path / "old_results" / ENV / "amateur-low" / "cql" / "seed0" / "eval.parquet").is_file()


def test_a_slice_counts_the_wall_time_of_its_own_runs_only(tmp_path):
    """The results folder of a grid run in parts holds every part's benchmark files; each part's
    slice sums the training and evaluation jobs of its own runs (and the env's shared stages)."""
    from morl.slices import stage_seconds

    bench = tmp_path / "benchmarks"
    for rel, seconds in [("collect/E/expert-high.tsv", 10), ("train/E/expert-high/bc/seed0.tsv", 100),
                         ("train/E/expert-high/bc/seed1.tsv", 200), ("evaluate/E/expert-high/bc/seed0.tsv", 5),
                         ("evaluate/E/expert-high/bc/seed0.step2000.tsv", 3),
                         ("evaluate/E/expert-high/bc/seed1.step2000.tsv", 4)]:  # fmt: skip
        (bench / rel).parent.mkdir(parents=True, exist_ok=True)
        (bench / rel).write_text(f"s\th:m:s\n{seconds}\t0:00:00\n")
    assert stage_seconds(bench, "E", ["expert-high/bc/seed0"]) == {"collect": 10.0, "train": 100.0, "evaluate": 8.0}
    assert stage_seconds(bench, "E") == {"collect": 10.0, "train": 300.0, "evaluate": 12.0}


@pytest.mark.parametrize(
    "pieces, problem",
    [([["amateur-low/bc/seed0"]], "holds run amateur-low/dt-p/seed0, which no piece lists"),
     ([["amateur-low/bc/seed0", "amateur-low/dt-p/seed0"], ["amateur-low/bc/seed0"]],
      "lists run amateur-low/bc/seed0 in two pieces"),
     ([["amateur-low/bc/seed0", "amateur-low/dt-p/seed0", "amateur-low/bc/seed1"]],
      "lists run amateur-low/bc/seed1, which it does not hold")],
)  # fmt: skip
def test_a_slice_whose_pieces_do_not_account_for_its_runs_is_refused(tmp_path, config, pieces, problem):
    folder = a_slice(tmp_path / "slices", config, pieces=[{"commit": "a" * 40, "runs": p} for p in pieces])
    with pytest.raises(InputError) as caught:
        merge(tmp_path / "slices", tmp_path / "out", config)
    assert str(caught.value) == (f"{folder / PROVENANCE}: {problem}; the slice's description does not match its "
                                 "files")  # fmt: skip
