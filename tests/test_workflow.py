"""The Snakemake workflow as a user runs it: dry runs, bad configs, and the whole smoke DAG."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        [*SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


def grid_dry_run(config: str, cwd: Path) -> tuple[dict[str, int], float]:
    """Job counts of ``snakemake -n`` on a shipped config (``configs/<config>``), and the seconds it took."""
    t0 = time.perf_counter()
    res = snakemake("-n", "--quiet", "rules", "--configfile", str(ROOT / "configs" / config), cwd=cwd)
    elapsed = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr
    return job_counts(res.stdout + res.stderr), elapsed


def test_paper_grid_dry_run(tmp_path):
    counts, elapsed = grid_dry_run("paper.yaml", tmp_path)
    assert counts["behavior"] == 6 and counts["behavior_front"] == 6
    assert counts["collect"] == 36 and counts["train"] == 1080 and counts["evaluate"] == 1080
    assert counts["aggregate"] == 1
    assert elapsed < 60, f"dry run of the paper grid took {elapsed:.0f} s"


@pytest.mark.parametrize("name, along", [("paper-cpu.yaml", 936), ("paper-cpu-small.yaml", 0)])
def test_paper_cpu_grid_dry_run(tmp_path, name, along):
    """configs/paper-cpu.yaml (PEDA's budgets, with HV along training) and paper-cpu-small.yaml: the
    High-H grid from the shipped behavior policies (no behavior jobs), expert and amateur data per
    env, ten models, three seeds; listed in seconds."""
    counts, elapsed = grid_dry_run(name, tmp_path)
    config = yaml.safe_load((ROOT / "configs" / name).read_text())
    n_envs = len(config["envs"])
    assert n_envs == 6
    assert "behavior" not in counts and counts["behavior_front"] == n_envs
    assert counts["collect"] == 2 * n_envs
    assert counts["train"] == counts["evaluate"] == 2 * n_envs * 10 * 3 == 360
    # per env and dataset: four MLP models x 3 seeds x 4 snapshots (2k, 5k, 10k, 50k of 200k), MODT's
    # two x 3 x 3 (of 20k), the value-based four x 3 x 1 (of 3k)
    assert (
        counts.get("evaluate_along", 0) == along == (2 * n_envs * (4 * 3 * 4 + 2 * 3 * 3 + 4 * 3 * 1) if along else 0)
    )
    assert counts["aggregate"] == 1 and counts.get("convergence", 0) == (1 if along else 0)
    assert elapsed < 30, f"dry run of the paper-cpu grid took {elapsed:.0f} s"


def test_the_multiverse_episodes_choice_evaluates_every_run_again(tmp_path):
    """multiverse.episodes [1, 3]: `snakemake -n multiverse` evaluates every run of the grid again
    with 3 episodes per point (from its checkpoint) before it exports the slices."""
    config = yaml.safe_load((ROOT / "configs" / "paper-cpu-small.yaml").read_text())
    config["results_dir"], config["slices_dir"] = str(tmp_path / "results"), str(tmp_path / "slices")
    config["multiverse"] = {"episodes": [1, 3]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    res = snakemake("multiverse", "-n", "--quiet", "rules", "--configfile", str(tmp_path / "config.yaml"), cwd=ROOT)
    assert res.returncode == 0, res.stderr
    counts = job_counts(res.stdout + res.stderr)
    assert counts["evaluate_episodes"] == counts["evaluate"] == counts["train"] == 360
    assert counts["slice"] == 6 and counts["multiverse"] == 1


def test_unseen_preferences_grid_dry_run(tmp_path):
    """configs/unseen.yaml: three envs from their shipped policies, two datasets each, used complete and as
    their shattered and narrow variants (derived, not collected), twelve models, three seeds."""
    counts, _ = grid_dry_run("unseen.yaml", tmp_path)
    assert "behavior" not in counts and counts["behavior_front"] == 3
    assert counts["collect"] == 6 and counts["derive_coverage"] == 12
    assert counts["front_model"] == 6  # one per complete dataset, for MODULI's return deviation
    assert counts["train"] == 648 and counts["evaluate"] == 648 and counts["aggregate"] == 1


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda c: c.update(models=["bc", "transformer-xl"]), "models[1]: 'transformer-xl' is not one of"),
        (
            lambda c: c["train"]["peda"].update(returns_to_go="discounted"),
            "train.peda.returns_to_go: 'discounted' is not one of",
        ),
        (
            lambda c: c["train"]["peda"].update(statistics_from="expert-high"),
            "this config has no MO-HalfCheetah-v2 expert-high",
        ),
    ],
)
def test_bad_config_fails_before_any_job_runs(tmp_path, mutate, expected):
    config = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    mutate(config)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    res = snakemake("--cores", "1", "--configfile", str(bad), cwd=tmp_path, timeout=120)
    assert res.returncode != 0
    assert expected in res.stderr + res.stdout
    assert "bad.yaml" in res.stderr + res.stdout
    assert not (tmp_path / "results").exists(), "no job may run on an invalid config"


def test_a_run_uses_exactly_one_config(tmp_path):
    """A --configfile that lacks a section is refused, even where config.yaml lies in the working
    folder and could fill the gap; without --configfile config.yaml is the config, and --config
    key=value overrides either one."""
    shutil.copy(ROOT / "config.yaml", tmp_path / "config.yaml")
    smoke = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    del smoke["behavior"]
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(smoke))
    res = snakemake("-n", "--configfile", "mine.yaml", cwd=tmp_path, timeout=120)
    assert res.returncode != 0
    assert re.search(r"mine.yaml: invalid config:\n\s+missing required key behavior", res.stdout + res.stderr)

    res = snakemake("-n", "--quiet", "rules", cwd=tmp_path, timeout=120)  # config.yaml: 2 datasets, 6 models, 2 seeds
    assert res.returncode == 0, res.stderr
    assert job_counts(res.stdout + res.stderr)["train"] == 24
    res = snakemake("-n", "--config", "results_dir=elsewhere", cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "elsewhere/MO-HalfCheetah-v2/behavior/policy.pt" in res.stdout
    assert "results/" not in res.stdout
    res = snakemake("-n", "--configfile", str(ROOT / "configs/smoke.yaml"), "--config", "results_dir=other",
                    cwd=tmp_path, timeout=120)  # fmt: skip
    assert res.returncode == 0 and "other/MO-Hopper-v3/behavior/policy.pt" in res.stdout, res.stderr
    # a list given on the command line means what the same text means in the file: seeds=[0] is
    # seed 0 (Snakemake itself reads the 0 inside as text)
    res = snakemake("-n", "--quiet", "rules", "--config", "seeds=[0]", "models=[bc, dt-p]", cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert job_counts(res.stdout + res.stderr)["train"] == 4
    res = snakemake("-n", "--config", "seeds=3", cwd=tmp_path, timeout=120)
    assert res.returncode != 0 and re.search(r"config.yaml with --config overrides: invalid config:\n\s+seeds: 3 has "
                                             "the wrong type", res.stdout + res.stderr)  # fmt: skip

    res = snakemake("-n", "--configfile", str(ROOT / "configs/smoke.yaml"), "mine.yaml", cwd=tmp_path, timeout=120)
    assert res.returncode != 0 and "give one --configfile" in res.stdout + res.stderr
    (tmp_path / "taken").write_text("a file where the results folder should go\n")
    res = snakemake("-n", "--config", "results_dir=taken", cwd=tmp_path, timeout=120)
    assert res.returncode != 0 and "config.yaml: results_dir: taken is a file" in res.stdout + res.stderr
    (tmp_path / "config.yaml").unlink()
    res = snakemake("-n", cwd=tmp_path, timeout=120)
    assert res.returncode != 0 and "config.yaml: config file not found" in res.stdout + res.stderr


def test_expert_high_dataset_is_an_input_of_every_train_and_evaluate_job(tmp_path):
    """Under statistics_from: expert-high (config.yaml), training and evaluation on every dataset
    of the env depend on its expert-high dataset; under dataset, only on their own."""
    for value, extra in (("expert-high", ", results/MO-HalfCheetah-v2/data/expert-high.parquet"), ("dataset", "")):
        config = yaml.safe_load((ROOT / "config.yaml").read_text())
        config["train"]["peda"]["statistics_from"] = value
        path = tmp_path / f"{value}.yaml"
        path.write_text(yaml.safe_dump(config))
        res = snakemake("-n", "--configfile", str(path), cwd=tmp_path, timeout=120)
        assert res.returncode == 0, res.stderr
        jobs = re.findall(r"^rule (train|evaluate):\n\s+input: (.*)$", res.stdout + res.stderr, re.M)
        assert len(jobs) == 48
        for rule, inputs in jobs:
            own = re.search(r"results/MO-HalfCheetah-v2/data/\w+-high.parquet", inputs).group(0)
            assert inputs.endswith(own + extra), (rule, inputs)


def test_no_path_is_misparsed():
    """Every output path of the DAG maps back to exactly the wildcards that made it."""
    from snakemake.io import regex_from_filepattern

    from morl.families import model_order, wildcard_pattern
    from morl.vocabulary import WILDCARDS

    common = (ROOT / "rules/common.smk").read_text()
    constraints = dict(re.findall(r"^\s+(\w+)=r\"([^\"]+)\",$", common, re.M))
    assert "model=wildcard_pattern()," in common
    constraints["model"] = wildcard_pattern()
    for name in ("quality", "entropy", "coverage"):  # the vocabulary's (morl.vocabulary.WILDCARDS)
        assert f'{name}=WILDCARDS["{name}"],' in common
        constraints[name] = WILDCARDS[name]
    pattern = "results/{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}/eval.parquet"
    for name, rx in constraints.items():
        pattern = pattern.replace("{" + name + "}", "{" + name + "," + rx + "}")
    regex = re.compile(regex_from_filepattern(pattern))
    for model in model_order():
        for coverage in ("", "-shattered", "-narrow"):
            m = regex.match(f"results/MO-Hopper-v3/amateur-high{coverage}/{model}/seed12/eval.parquet")
            assert m and m.group("model") == model and m.group("seed") == "12" and m.group("env") == "MO-Hopper-v3"
            assert m.group("entropy") == "high" and m.group("coverage") == coverage
    assert not regex.match("results/MO-Hopper-v3/amateur-high/dt-p-x/seed1/eval.parquet")
    assert not regex.match("results/MO-Hopper-v3/amateur-high-broken/dt/seed1/eval.parquet")
    assert not regex.match("results/MO-Hopper-v3/amateur-hi/dt/seed1/eval.parquet")


@pytest.mark.slow
def test_smoke_pipeline_end_to_end(tmp_path):
    """The whole DAG on configs/smoke.yaml, as a subprocess, then every output is checked."""
    from morl.cli import main as morl_main
    from morl.data import load_dataset
    from morl.evaluate import read_evaluation
    from morl.families import load_agent
    from morl.front_model import load_front_model

    config = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    # Two threads for the stepping rules: multi-threaded stepping must work under Snakemake too.
    res = snakemake(
        "--cores",
        "2",
        "--configfile",
        str(ROOT / "configs/smoke.yaml"),
        "--set-threads",
        "collect=2",
        "behavior_front=2",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    R = tmp_path / config["results_dir"]
    n_points = {"MO-HalfCheetah-v2": 4, "MO-Hopper-v3": 10}  # divisions 3
    for env in config["envs"]:
        _, front = read_evaluation(R / env / "behavior/front.parquet")
        assert len(front["return"]) == 3 * n_points[env]
        for q in config["qualities"]:
            for h in config["entropies"]:
                ds = load_dataset(R / env / "data" / f"{q}-{h}.parquet")
                assert ds.n_trajectories == config["collect"]["n_trajectories"]
                assert ds.meta["env_id"] == env and ds.meta["quality"] == q and ds.meta["entropy"] == h
                for model in config["models"]:
                    for seed in config["seeds"]:
                        run = R / env / f"{q}-{h}" / model / f"seed{seed}"
                        agent = load_agent(run / "model.pt")
                        assert agent is not None
                        assert (run / "curve.csv").read_text().startswith("step")
                        meta, arr = read_evaluation(run / "eval.parquet")
                        assert meta["model"] == model and len(arr["return"]) == n_points[env]
                        summary = json.loads((run / "summary.json").read_text())
                        assert summary["model"] == model and summary["train_seed"] == seed
                        assert summary["hv"] == pytest.approx(meta["summary"]["hv"])
                        assert np.all(np.isfinite(arr["return"]))
                        assert meta["summary"]["hv"] >= 0
    table = (R / "tables/results.md").read_text()
    for env in config["envs"]:
        assert f"| {env} | amateur low-H |" in table
    assert "MODT(P)" in table and "MORvS(P)" in table and "BC(P)" in table
    n_datasets = len(config["envs"]) * len(config["qualities"]) * len(config["entropies"])
    for kind, n in (
        ("pareto", n_datasets),
        ("preference", n_datasets),
        ("curves", n_datasets),
        ("hv", len(config["envs"])),
    ):
        assert len(list((R / "tables/plots" / kind).glob("*.png"))) == n, kind
        assert len(list((R / "tables/plots" / kind).glob("*.pdf"))) == n, kind
    for stage in ("behavior", "behavior_front", "collect", "train", "evaluate"):
        assert list((R / "logs" / stage).rglob("*.log")), f"no log for {stage}"
        assert list((R / "benchmarks" / stage).rglob("*.tsv")), f"no benchmark for {stage}"
    # a second run finds nothing to do
    again = snakemake("-n", "--configfile", str(ROOT / "configs/smoke.yaml"), cwd=tmp_path, timeout=120)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr

    # The grid as slices, one per env, merged again: the same tables and plots, byte for byte, as
    # the aggregate rule's from the same evaluations; a slice holds no dataset or checkpoint.
    res = snakemake("slices", "--cores", "2", "--configfile", str(ROOT / "configs/smoke.yaml"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    slices = R / "slices"
    for env in config["envs"]:
        info = json.loads((slices / env / "SLICE.json").read_text())
        assert info["env"] == env and info["runs"] == len(config["models"]) * len(config["seeds"])
        assert info["behavior"][0]["method"] == "td3" and len(info["behavior"][0]["sha256"]) == 64
        assert info["wall_seconds"]["train"] > 0 and info["machine"]["cores"] >= 1
        assert info["config"] == "configs/smoke.yaml"  # the checkout's path, not this machine's folders
        assert len(list((slices / env).rglob("eval.parquet"))) == info["runs"]
        assert list((slices / env).rglob("*.card.md")) and not list((slices / env).rglob("model.pt"))
        assert not list((slices / env).rglob("*-*.parquet"))  # no dataset
    merged = tmp_path / "merged"
    assert morl_main(["merge-slices", "--config", str(ROOT / "configs/smoke.yaml"), "--slices", str(slices),
                      "--out-dir", str(merged)]) == 0  # fmt: skip
    ours = sorted(p.relative_to(R / "tables") for p in (R / "tables").rglob("*")
                  if p.is_file() and p.name != ".snakemake_timestamp")  # fmt: skip
    assert ours and all((merged / f).read_bytes() == (R / "tables" / f).read_bytes() for f in ours), [
        str(f) for f in ours if (merged / f).read_bytes() != (R / "tables" / f).read_bytes()
    ]

    # The tables follow the files they are built from. A deleted evaluation is rebuilt and the
    # tables after it (before, Snakemake took it for a deleted intermediate and did nothing) ...
    hv_csv = R / "tables/hv.csv"
    before = hv_csv.read_text()
    env = config["envs"][0]
    cell = R / env / f"{config['qualities'][0]}-{config['entropies'][0]}"
    evaluation = cell / "bc" / "seed0" / "eval.parquet"
    evaluation.unlink()
    res = snakemake("--cores", "2", "--configfile", str(ROOT / "configs/smoke.yaml"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert job_counts(res.stdout + res.stderr) == {"evaluate": 1, "aggregate": 1, "all": 1, "total": 3}
    assert hv_csv.read_text() == before  # evaluation is deterministic
    # ... and an evaluation rewritten with other numbers changes the tables.
    table = pq.read_table(evaluation)
    ret = table.column("return").combine_chunks()
    halved = pa.FixedSizeListArray.from_arrays(pa.array(ret.flatten().to_numpy() * 0.5, ret.type.value_type),
                                               ret.type.list_size)  # fmt: skip
    pq.write_table(table.set_column(table.schema.get_field_index("return"), "return", halved), evaluation)
    res = snakemake("--cores", "2", "--configfile", str(ROOT / "configs/smoke.yaml"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert job_counts(res.stdout + res.stderr) == {"aggregate": 1, "all": 1, "total": 2}
    changed = [row for row in hv_csv.read_text().splitlines() if row not in before.splitlines()]
    assert len(changed) == 1 and f",{env}," in changed[0] and ",bc," in changed[0], changed

    # A coverage variant of the same data: derived (not collected again), trained, evaluated with
    # its held-out preferences tagged, and tabled as a dataset row of its own.
    res = snakemake("--cores", "2", "--configfile", str(ROOT / "configs/smoke.yaml"), "--config",
                    "coverages=[complete,narrow]", "models=[bc-p,td3bc-p]", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert job_counts(res.stdout + res.stderr) == {"derive_coverage": 2, "front_model": 2, "train": 4, "evaluate": 4,
                                                   "aggregate": 1, "all": 1, "total": 14}  # fmt: skip
    q, h = config["qualities"][0], config["entropies"][0]
    for env in config["envs"]:
        variant = load_dataset(R / env / "data" / f"{q}-{h}-narrow.parquet")
        assert variant.meta["coverage"]["removed_trajectories"] > 0
        meta, arr = read_evaluation(R / env / f"{q}-{h}-narrow" / "td3bc-p" / "seed0" / "eval.parquet")
        # the low-entropy data covers a narrow middle of w_1; its 4 and 10 grid points may all lie outside
        assert meta["coverage"] == "narrow" and arr["held_out"].any()
    metrics = pl.read_csv(R / "tables/metrics.csv")
    narrow = metrics.filter(pl.col("entropy") == f"{h}-narrow")
    assert len(narrow) == 4 and narrow["n_held_out"].min() > 0 and narrow["front_distance_held_out"].is_not_null().all()
    # MODULI's RD against the front model of each complete dataset, fitted with the smoke config's steps;
    # where the tiny data has no trajectory with non-negative, non-dominated returns there is none
    for env in config["envs"]:
        front_model = load_front_model(R / env / "data" / f"{q}-{h}.front_model.pt")
        rows = narrow.filter(pl.col("env") == env)
        assert (
            front_model.info["env_id"] == env and front_model.info["steps"] == config["coverage"]["front_model_steps"]
        )
        assert rows["rd_held_out"].is_not_null().all() if front_model.fitted else rows["rd_held_out"].is_null().all()
    assert metrics.filter(pl.col("entropy") == h)["hv_held_out"].is_null().all()
    assert f"{q} {h}-H narrow" in (R / "tables/intervals.md").read_text()
    # each variant run is read against the same model and seed trained on the complete data
    # and against B's front at the same preferences
    assert narrow["hv_held_out_complete"].is_not_null().all() and narrow["b_held_out"].is_not_null().all()
    generalisation = pl.read_csv(R / "tables/generalisation.csv")
    assert set(generalisation["model"].to_list()) <= {"bc-p", "td3bc-p"} and (generalisation["n_paired"] == 1).all()
    assert (R / "tables/generalisation_iqm.md").exists()

    # HV along training: the same grid with evaluate.at_steps for two models. Their runs train again
    # (they now keep snapshots), each snapshot is evaluated, and convergence.csv has a row per run and
    # step; the slices carry the snapshots' evaluations, and merge-slices rebuilds the same file.
    along = dict(config, models=["rvs-p", "cql-p"], evaluate=dict(config["evaluate"], at_steps=[10, 20]))
    along_config = tmp_path / "along.yaml"
    along_config.write_text(yaml.safe_dump(along))
    res = snakemake("all", "slices", "--cores", "2", "--configfile", str(along_config), cwd=tmp_path)
    counts = job_counts(res.stdout + res.stderr)
    assert counts["train"] == 4 and counts["evaluate_along"] == 8 and counts["convergence"] == 1, counts
    # this cut of the grid does not replace the slices of the whole grid, which hold other runs
    refused = re.search(r"results/slices/(MO-\S+): will not replace this slice of \1: it holds runs this export lacks",
                        res.stderr)  # fmt: skip
    assert res.returncode != 0 and refused, res.stderr[-3000:]
    for env in config["envs"]:
        assert len(list((slices / env).rglob("eval.parquet"))) == len(config["models"]) * len(config["seeds"])
    slices = tmp_path / "slices-along"
    along_config.write_text(yaml.safe_dump(dict(along, slices_dir=str(slices))))
    res = snakemake("all", "slices", "--cores", "2", "--configfile", str(along_config), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    convergence = pl.read_csv(R / "tables/convergence.csv")
    steps = {m: sorted(set(convergence.filter(pl.col("model") == m)["step"])) for m in along["models"]}
    assert steps == {"rvs-p": [10, 20, 30], "cql-p": [10, 20, 30]}, steps
    assert convergence.height == 2 * 2 * 3 and convergence["full_length"].is_between(0, 1).all()
    for env in config["envs"]:
        assert len(list((slices / env).glob("*/*/seed*/along/step*/eval.parquet"))) == 4
    merged = tmp_path / "merged-along"
    assert morl_main(["merge-slices", "--config", str(along_config), "--slices", str(slices),
                      "--out-dir", str(merged)]) == 0  # fmt: skip
    assert (merged / "convergence.csv").read_bytes() == (R / "tables/convergence.csv").read_bytes()
    assert len(list((merged / "plots/convergence").glob("*.png"))) == n_datasets


def test_imported_dataset_replaces_collection(tmp_path):
    """A cell named in imported_datasets is trained from that file and never collected."""
    config = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    imported = tmp_path / "d4morl" / "hopper-amateur-low.parquet"
    imported.parent.mkdir()
    imported.write_bytes(b"")  # the dry run only needs the file to exist
    config["imported_datasets"] = [
        {"env": "MO-Hopper-v3", "quality": "amateur", "entropy": "low", "path": str(imported)}
    ]
    cfg = tmp_path / "imported.yaml"
    cfg.write_text(yaml.safe_dump(config))
    res = snakemake("-n", "--configfile", str(cfg), cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    counts = job_counts(out)
    assert counts["collect"] == 1  # only the HalfCheetah dataset
    assert "results/MO-Hopper-v3/data/amateur-low.parquet" not in out
    assert f"input: {imported}" in out
    n_runs = len(config["models"]) * len(config["seeds"])  # one dataset of each env, Hopper's imported
    assert counts["train"] == 2 * n_runs and counts["evaluate"] == 2 * n_runs


def test_a_job_that_refuses_its_input_fails_with_one_line(tmp_path, tiny_dataset):
    """A job given a bad input fails with `morl <stage>: error: ...` on stderr and in its log, and
    no traceback; with MORL_DEBUG=1 the log holds the traceback too."""
    config = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    config.update(envs=["MO-Walker2d-v2"], qualities=["amateur"], entropies=["high"], models=["bc"])
    config["imported_datasets"] = [  # a HalfCheetah file (same sizes) under the Walker2d cell
        {"env": "MO-Walker2d-v2", "quality": "amateur", "entropy": "high", "path": str(tiny_dataset)}
    ]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    target = "results/MO-Walker2d-v2/amateur-high/bc/seed0/model.pt"
    log = tmp_path / "results/logs/train/MO-Walker2d-v2/amateur-high/bc/seed0.log"
    message = (f"morl train: error: {tiny_dataset}: dataset is for env 'MO-HalfCheetah-v2', but 'MO-Walker2d-v2' "
               "was expected (env mismatch)")  # fmt: skip
    res = snakemake(target, "--cores", "1", "--configfile", "c.yaml", cwd=tmp_path, timeout=300)
    assert res.returncode != 0
    assert message in res.stderr.splitlines()
    assert log.read_text().strip().splitlines()[-1] == message and "Traceback" not in log.read_text()
    assert not (tmp_path / target).exists()

    log.unlink()
    res = subprocess.run([*SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), target, "--cores", "1", "--configfile",
                          "c.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, MORL_DEBUG="1"))  # fmt: skip
    assert res.returncode != 0 and "Traceback (most recent call last)" in log.read_text()
    assert log.read_text().strip().splitlines()[-1] == message


def test_imported_dataset_config_errors(config, tmp_path, monkeypatch):
    from morl.config import ConfigError, validate_config

    monkeypatch.chdir(tmp_path)
    for name in ("x", "y"):
        (tmp_path / name).touch()

    config["imported_datasets"] = [{"env": "MO-Foo-v0", "quality": "expert", "entropy": "high", "path": "x"}]
    with pytest.raises(ConfigError, match="imported_datasets\\[0\\].env: unknown environment 'MO-Foo-v0'"):
        validate_config(config, "c.yaml")
    cell = {"env": "MO-Hopper-v3", "quality": "expert", "entropy": "high", "path": "x"}
    config["imported_datasets"] = [cell, dict(cell, path="y")]
    with pytest.raises(ConfigError, match="imported_datasets\\[1\\]: a second file for MO-Hopper-v3/expert/high"):
        validate_config(config, "c.yaml")
    config["imported_datasets"] = [dict(cell, quality="novice")]
    with pytest.raises(ConfigError, match="imported_datasets\\[0\\].quality"):
        validate_config(config, "c.yaml")
    config["imported_datasets"] = [dict(cell, path="z")]  # not there: refused before any job
    with pytest.raises(ConfigError, match="imported_datasets\\[0\\].path: z is not a file"):
        validate_config(config, "c.yaml")


def test_a_killed_run_finishes_with_the_readme_commands(tmp_path):
    """kill -9 of a running workflow leaves Snakemake's lock; the two commands the README gives
    clear it and finish the run."""
    import signal

    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- resume-after-kill[^>]*-->\s*```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line.split() for line in block.splitlines() if line.strip()]
    assert [c[:2] for c in commands] == [["snakemake", "--unlock"], ["snakemake", "--profile"]]

    config = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    config.update(envs=["MO-HalfCheetah-v2"], models=["bc", "dt-p"])
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(config))
    profile = ["--profile", str(ROOT / "profiles/local"), "--configfile", "mine.yaml"]
    proc = subprocess.Popen([*SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), *profile, "--cores", "1"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    train_logs = tmp_path / "results/logs/train"
    deadline = time.monotonic() + 600
    while not (train_logs.exists() and any(train_logs.rglob("*.log"))):
        assert proc.poll() is None, "the run ended before any training job started"
        assert time.monotonic() < deadline, "no training job started within 600 s"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the workflow and its running job, as a lost node would
    proc.wait()
    assert list((tmp_path / ".snakemake/locks").iterdir()), "the killed run left no lock"

    res = snakemake(*profile, cwd=tmp_path)
    assert res.returncode != 0 and "cannot be locked" in res.stdout + res.stderr
    for command in commands:
        args = [str(ROOT / a) if a == "profiles/local" else ("mine.yaml" if a == "YOUR_CONFIG.yaml" else a)
                for a in command[1:]]  # fmt: skip
        res = snakemake(*args, cwd=tmp_path)
        assert res.returncode == 0, " ".join(command) + "\n" + res.stderr[-3000:]
    assert (tmp_path / "results/tables/results.md").exists()
    for model in config["models"]:
        assert (tmp_path / f"results/MO-HalfCheetah-v2/amateur-low/{model}/seed0/eval.parquet").exists()


@pytest.mark.slow
def test_an_imported_dataset_replaced_by_an_older_copy_is_noticed(tmp_path, tiny_dataset):
    """cp -p, rsync -a or an archive put back data with an older mtime: Snakemake alone would say
    "Nothing to be done" and keep the tables of the replaced data. The file's identity (a param of
    `aggregate`) reruns the tables, which refuse evaluations made from other bytes, naming both
    files; `touch` on the file, as the message says, rebuilds what was made from it."""
    from dataclasses import replace

    from morl.data import load_dataset, write_dataset

    ds = load_dataset(tiny_dataset)  # as an imported D4MORL file: no behavior policy recorded
    derived = ("n_obj", "obs_dim", "act_dim", "n_trajectories", "n_steps", "format_version")
    meta = {k: v for k, v in ds.meta.items() if k not in derived and not k.startswith("behavior_")}
    imported, older = tmp_path / "d4morl" / "amateur-high.parquet", tmp_path / "backup" / "amateur-high.parquet"
    write_dataset(imported, replace(ds, meta={**meta, "origin": "d4morl", "source_file": "new.pkl"}))
    write_dataset(older, replace(ds, meta={**meta, "origin": "d4morl", "source_file": "old.pkl"}))
    os.utime(older, (time.time() - 86400,) * 2)
    config = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    config.update(envs=["MO-HalfCheetah-v2"], qualities=["amateur"], entropies=["high"], models=["bc"])
    config["behavior"]["shipped"] = True
    config["imported_datasets"] = [{"env": "MO-HalfCheetah-v2", "quality": "amateur", "entropy": "high",
                                    "path": str(imported)}]  # fmt: skip
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    res = snakemake("--cores", "2", "--configfile", "c.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]

    shutil.copy2(older, imported)  # cp -p: the old bytes, with the old mtime
    dry = snakemake("-n", "--configfile", "c.yaml", cwd=tmp_path, timeout=120)
    counts = job_counts(dry.stdout + dry.stderr)
    assert dry.returncode == 0 and counts["aggregate"] == 1 and "train" not in counts, dry.stdout  # only the tables
    res = snakemake("--cores", "2", "--configfile", "c.yaml", cwd=tmp_path)
    evaluation = "results/MO-HalfCheetah-v2/amateur-high/bc/seed0/eval.parquet"
    assert res.returncode != 0
    assert any(
        line.startswith(f"morl aggregate: error: {evaluation} was evaluated on a dataset with sha256 ")
        and f"but {imported} now holds sha256 " in line
        and f"run `touch {imported}`" in line
        for line in res.stderr.splitlines()
    ), res.stderr[-3000:]

    imported.touch()
    res = snakemake("--cores", "2", "--configfile", "c.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    counts = job_counts(res.stdout + res.stderr)
    assert counts["train"] == 1 and counts["evaluate"] == 1 and counts["aggregate"] == 1, counts
