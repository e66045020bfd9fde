"""Every script under benchmarks/ runs, in a tiny mode, the way a user runs it.

Each test starts ``python benchmarks/<script>.py <arguments>`` (``bash benchmarks/gpu_check.sh``)
from the repository's root in a process of its own, with the smallest arguments that still take
the script through all of its code, and asserts that it exits 0 and prints the table or lines it
is there to print, so that a script that fails, or runs and prints nothing, fails here. Inputs come
from the suite's tiny behavior policy and dataset (tests/conftest.py), the shipped behavior
populations and the results committed under docs/. Where a script needs another project that is
not installed (PEDA's original model files, morl-baselines, CUDA), the test runs what can run and
asserts that the script says clearly what is missing.

Timings printed by these runs mean nothing: the point is that every line of the scripts runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from morl.envs import ENV_SPECS
from morl.families import display_names, family_of, model_order
from morl.families.peda_networks import MODEL_NAMES

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
#: Modules of benchmarks/ that other scripts import and that are no script themselves.
HELPERS = {"synthetic.py"}
#: One thread per process: the machines that run the suite are small and shared.
ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def run(*args, env: dict | None = None, ok: bool = True, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python <args>`` (or ``bash <args>`` for a shell script) from the repository's root; with
    ``ok``, assert that it exited 0."""
    exe = "bash" if str(args[0]).endswith(".sh") else sys.executable
    res = subprocess.run([exe, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                         env=env or ENV)  # fmt: skip
    if ok:
        assert res.returncode == 0, f"{args[0]} exited {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}"
    return res


def table_rows(out: str, header: str) -> list[list[str]]:
    """The cells of the rows of the Markdown table under the first line that starts with ``header``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def first_column(out: str, header: str) -> list[str]:
    return [row[0] for row in table_rows(out, header)]


def _built_on_one_thread(request, name: str) -> Path:
    """The session fixture ``name`` of tests/conftest.py, built on one torch thread if this module is
    the first to need it: session fixtures are set up before the autouse ``one_thread`` one, and two
    threads on a busy 2-core machine train and collect several times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return request.getfixturevalue(name)
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def policy(request) -> Path:
    """tests/conftest.py's tiny MO-HalfCheetah-v2 behavior policy (TD3, a few hundred steps)."""
    return _built_on_one_thread(request, "tiny_policy")


@pytest.fixture(scope="module")
def dataset(request) -> Path:
    """tests/conftest.py's tiny amateur-high dataset of that policy."""
    return _built_on_one_thread(request, "tiny_dataset")


def code_copy(dest: Path) -> Path:
    """A copy of this checkout's code, configs and schema at ``dest``: "another checkout" for the
    scripts that compare one with this one (``--code``)."""
    for folder in ("morl", "configs", "schemas"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def scripts() -> set[str]:
    """The scripts of benchmarks/: shell scripts, and Python files that run as ``__main__``."""
    found = {p.name for p in BENCHMARKS.glob("*.sh")}
    found |= {p.name for p in BENCHMARKS.glob("*.py") if '__name__ == "__main__"' in p.read_text()}
    return found


#: The scripts this file runs, each by the test named after it.
TESTED = {
    "behavior_curves.py", "behavior_quality.py", "collect_throughput.py", "cpu_capability.py", "data_format.py",
    "definitions_effect.py", "env_throughput.py", "eval_speed.py", "gpu_check.sh", "original_models.py",
    "paper_scale_memory.py", "peer_pgmorl.py", "pgmorl_throughput.py", "returns_along_preferences.py",
    "train_throughput.py", "warmstart_effect.py", "weight_conditioning_cost.py", "weight_conditioning_study.py",
    "long_run_speed.py", "step_floor.py", "threads.py", "subnormal_step.py", "fall_probe.py", "pgmorl_phases.py",
    "d4morl_policies.py",
}  # fmt: skip


def test_every_benchmark_script_has_a_test_here():
    assert not HELPERS & scripts(), "a helper module became a script: run it here"
    untested = sorted(scripts() - TESTED)
    assert not untested, f"benchmarks/ scripts that no test in tests/test_benchmarks.py runs: {untested}"
    assert TESTED <= scripts(), f"gone from benchmarks/: {sorted(TESTED - scripts())}"


def test_behavior_curves(tmp_path, policy):
    out = tmp_path / "curves.png"
    res = run("benchmarks/behavior_curves.py", "behaviors/MO-Hopper-v2.pt", policy, "--output", out)
    assert f"{policy}: not a PGMORL population; skipped" in res.stdout
    assert f"wrote {out}" in res.stdout and out.stat().st_size > 0


def test_behavior_quality(policy):
    # A TD3 policy and a PGMORL population, on the smoke config's 4-point grid, physics on 2 workers.
    res = run("benchmarks/behavior_quality.py", policy, "behaviors/MO-Swimmer-v2.pt", "--config",
              "configs/smoke.yaml", "--workers", "2")  # fmt: skip
    rows = table_rows(res.stdout, "| env | steps | B | published B |")
    assert [r[0] for r in rows] == ["MO-HalfCheetah-v2", "MO-Swimmer-v2"]
    assert all(r[5].endswith("of 4") for r in rows)


@pytest.mark.parametrize("own_policy", [False, True], ids=["trains-a-policy", "given-policy"])
def test_collect_throughput(policy, own_policy):
    extra = ["--policy", policy] if own_policy else []
    res = run("benchmarks/collect_throughput.py", "--trajectories", "2", "--batch", "2", "--workers", "2",
              "--repeats", "1", *extra)  # fmt: skip
    rows = first_column(res.stdout, "| what | env-steps/s | ratio to floor |")
    which = f"policy {policy}" if own_policy else "a barely trained policy"
    assert rows[0].startswith(f"collect_dataset, MO-HalfCheetah-v2 amateur/high, {which}, 2 trajectories")
    assert rows[1] == "floor: mujoco.rollout, 2 threads"
    assert "one 50,000-trajectory dataset at this rate" in res.stdout


def test_cpu_capability(tmp_path):
    res = run("benchmarks/cpu_capability.py", "--steps", "1", "--behavior-steps", "12", "--runs", "1", "--workdir",
              tmp_path)  # fmt: skip
    rows = table_rows(res.stdout, "| kernels | run | torch capability |")
    assert [r[:2] for r in rows] == [["default", "1"], ["avx2", "1"]]
    assert all(re.fullmatch(r"[0-9a-f]{12}", h) for r in rows for h in r[3:6])


def test_data_format(tmp_path, dataset):
    # Two sizes (the pickle and --compare-root, this checkout by another name, on the smaller only),
    # a real dataset's size, and the output folder removed at the end.
    out_dir = tmp_path / "files"
    res = run("benchmarks/data_format.py", "--sizes", "3", "2", "--repeats", "1", "--out-dir", out_dir,
              "--compare-root", ".", "--dataset", dataset)  # fmt: skip
    real = json.loads(next(line for line in res.stdout.splitlines() if line.startswith('{"file"')))
    assert real["file"] == str(dataset) and real["parquet_bytes_per_step"] > 0
    rows = table_rows(res.stdout, "| format | trajectories | steps |")
    assert [r[:2] for r in rows] == [["parquet", "2"], ["pickle", "2"], ["parquet (.)", "2"], ["parquet", "3"]]
    assert not out_dir.exists()


@pytest.mark.parametrize("b_of", ["behavior", "data"])
def test_definitions_effect(b_of):
    res = run("benchmarks/definitions_effect.py", "docs/paper-cpu-small", "docs/paper-cpu-definitions", "--b", b_of)
    rows = table_rows(res.stdout, "| env | dataset | model | HV / B, PEDA's definitions |")
    assert len(rows) > 10
    assert ["MO-HalfCheetah-v2", "expert high-H", display_names()["dt-p"]] in [r[:3] for r in rows]


def test_env_throughput():
    envs = ["MO-HalfCheetah-v2", "MO-Hopper-v3"]  # two objectives and three
    res = run("benchmarks/env_throughput.py", "--envs", ",".join(envs), "--batch", "2", "--steps", "2",
              "--single-steps", "2", "--workers", "2", "--repeats", "1")  # fmt: skip
    assert first_column(res.stdout, "| task | single env | batched, 1 worker |") == envs


def test_eval_speed():
    # An MLP and a transformer, 2 grid points, the reference on 1, episodes cut at 3 steps, 2 repeats.
    res = run("benchmarks/eval_speed.py", "--models", "rvs-p,dt-p", "--divisions", "1", "--points", "1",
              "--horizon", "3", "--repeats", "2", "--matmul-size", "64")  # fmt: skip
    rows = table_rows(res.stdout, "| model | points | env steps |")
    assert [r[:2] for r in rows] == [["rvs-p", "2"], ["dt-p", "2"]]
    assert "reference: 1 points, steps 0-2" in rows[0][3]
    assert "extrapolated linearly per env step" in res.stdout


def test_gpu_check_on_the_cpu():
    env = dict(ENV, PYTHON=sys.executable, DEVICE="cpu", CONFIG="configs/smoke.yaml", STEPS="300", FALL="0.8",
               BEHAVIOR_STEPS="500")  # fmt: skip
    res = run("benchmarks/gpu_check.sh", env=env)
    rows = table_rows(res.stdout, "| model | samples/s | peak GPU memory (MiB) |")
    assert [r[0] for r in rows] == list(model_order())
    assert all(r[4] == "yes" for r in rows), rows
    assert "gpu_check: all models trained on cpu and their loss fell" in res.stdout
    assert re.search(r"behavior \(MO-HalfCheetah-v2, settings of configs/smoke.yaml\) on cpu: \d+ training env-steps",
                     res.stdout)  # fmt: skip


def test_gpu_check_without_cuda_says_so():
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is visible: the script would run its check proper (minutes on a GPU)")
    env = {k: v for k, v in ENV.items() if k != "DEVICE"} | {"PYTHON": sys.executable}
    res = run("benchmarks/gpu_check.sh", env=env, ok=False)
    assert res.returncode != 0 and "gpu_check: no CUDA device is visible" in res.stderr


def test_original_models_says_the_original_files_are_missing(tmp_path):
    # PEDA's original model files are another project's and are not installed: the script says so.
    res = run("benchmarks/original_models.py", tmp_path, ok=False)
    assert res.returncode != 0 and res.stdout == ""
    assert f"original model files ant.xml, half_cheetah.xml, hopper.xml, swimmer.xml, walker2d.xml are missing from {tmp_path}" in res.stderr  # fmt: skip


def test_paper_scale_memory(tmp_path):
    # The smoke config's tiny models with PEDA's expert-high statistics (so training and evaluation
    # get a --reference-dataset), and a copy of this checkout's code as the --code to compare.
    config = yaml.safe_load((ROOT / "configs" / "smoke.yaml").read_text())
    config.update(envs=["MO-HalfCheetah-v2"], qualities=["expert"], entropies=["high"])
    config["train"]["peda"]["statistics_from"] = "expert-high"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    other = code_copy(tmp_path / "other")
    work = tmp_path / "work"
    if not os.access("/usr/bin/time", os.X_OK):  # GNU time measures the peaks: without it, the script says so
        res = run("benchmarks/paper_scale_memory.py", "--workdir", work, ok=False)
        assert res.returncode != 0 and "needs GNU time at /usr/bin/time" in res.stderr
        return
    res = run("benchmarks/paper_scale_memory.py", "--env", "MO-HalfCheetah-v2", "--workdir", work, "--trajectories",
              "2", "--models", "rvs-p", "--steps", "2", "--workers", "1", "--config", tmp_path / "config.yaml",
              "--code", other, "--only-other")  # fmt: skip
    rows = [r[:3] for r in table_rows(res.stdout, "| code | command | size |")]
    assert rows == [["this checkout", "collect", "2 trajectories"], [str(other), "train rvs-p", "2 updates"],
                    [str(other), "evaluate rvs-p", "protocol grid"]]  # fmt: skip
    for log in ("train-other-rvs-p.log", "evaluate-other-rvs-p.log"):  # /usr/bin/time -v logs the command
        assert "--reference-dataset" in (work / log).read_text()


def morl_baselines_installed() -> bool:
    return importlib.util.find_spec("morl_baselines") is not None


def test_peer_pgmorl():
    res = run("benchmarks/peer_pgmorl.py", "mo-hopper-2obj-v5", "--iters", "1", "--floor-steps", "2",
              ok=morl_baselines_installed())  # fmt: skip
    if morl_baselines_installed():
        assert json.loads(res.stdout.strip().splitlines()[-1])["env"] == "mo-hopper-2obj-v5"
    else:  # it runs in the peer's own virtual environment; this one lacks it, and the script says so
        assert res.returncode != 0
        assert "peer_pgmorl: morl_baselines is not installed" in res.stderr.strip().splitlines()[-1]


def test_pgmorl_throughput(tmp_path):
    # A few tiny PPO iterations (3 tasks of 2 envs x 16 steps in 2-D, 6 tasks in 3-D) and this
    # Python as the peer's: it has no morl-baselines (unless installed), which the row then says.
    config = yaml.safe_load((ROOT / "configs" / "smoke.yaml").read_text())
    config["envs"] = ["MO-Hopper-v2", "MO-Hopper-v3"]
    config["behavior"] |= {"method": "pgmorl", "pgmorl": {
        "env_steps_per_task": 64, "warmup_iters": 1, "update_iters": 1, "num_envs": 2, "num_steps": 16,
        "num_minibatches": 2, "ppo_epochs": 1, "hidden": 16, "delta_weight": 0.5}}  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    res = run("benchmarks/pgmorl_throughput.py", "--envs", "MO-Hopper-v2,MO-Hopper-v3", "--iters", "1",
              "--floor-steps", "2", "--config", tmp_path / "config.yaml", "--peer-python", sys.executable)  # fmt: skip
    rows = table_rows(res.stdout, "| task | tasks x envs | env steps |")
    assert [r[:2] for r in rows if r[0].startswith("MO-")] == [["MO-Hopper-v2", "3 x 2"], ["MO-Hopper-v3", "6 x 2"]]
    peer = [r for r in rows if r[0].startswith("morl-baselines")]
    assert len(peer) == 1  # MO-Hopper-v3 has no MO-Gymnasium version
    if not morl_baselines_installed():
        assert peer[0][0] == "morl-baselines mo-hopper-2obj-v5"
        assert peer[0][1].startswith("failed: peer_pgmorl: morl_baselines is not installed")


def test_returns_along_preferences(tmp_path):
    out = tmp_path / "returns.png"
    res = run("benchmarks/returns_along_preferences.py", "--results", "docs/unseen/runs", "--env",
              "MO-HalfCheetah-v2", "--output", out)  # fmt: skip
    assert f"wrote {out}" in res.stdout and out.stat().st_size > 0


def test_train_throughput():
    res = run("benchmarks/train_throughput.py", "--threads", "1", "--mlp-steps", "1", "--dt-steps", "1",
              "--value-steps", "1", "--warmup", "0")  # fmt: skip
    assert "dataset 100000 steps" in res.stdout
    assert first_column(res.stdout, "| model | step (ms) | samples/s |") == list(MODEL_NAMES)
    value_models = [m for m in model_order() if family_of(m).name != "peda"]
    assert first_column(res.stdout, "| model | updates/s | samples/s | batch |") == value_models


def test_warmstart_effect():
    res = run("benchmarks/warmstart_effect.py", "--episodes", "2", "--repeats", "1", "--batch", "2")
    assert first_column(res.stdout, "| env | seed 0, off (ours) | seed 0, on |") == list(ENV_SPECS)


def test_weight_conditioning_cost():
    res = run("benchmarks/weight_conditioning_cost.py", "--steps", "1", "--rounds", "1")
    names = display_names()
    assert first_column(res.stdout, "| model | hidden x depth | batch |") == [names[m] for m in
                                                                           ("rvs-p", "rvs-hn", "rvs-pml")]  # fmt: skip
    assert "updates/s of each round: rvs-p:" in res.stdout


def test_weight_conditioning_study():
    res = run("benchmarks/weight_conditioning_study.py", "docs/unseen/metrics.csv", "--runs", "docs/unseen/runs",
              "--env", "MO-HalfCheetah-v2", "--quality", "expert", "--reps", "50")  # fmt: skip
    names = display_names()
    for title in ("HV / B at the held-out preferences", "P(run of the model > run of", "EUM and MODULI's RD",
                  "Training loss at the end"):  # fmt: skip
        assert any(line.startswith(title) for line in res.stdout.splitlines()), title
    assert first_column(res.stdout, "| model | narrow (") == [names[m] for m in ("rvs-p", "bc-p", "rvs-hn", "rvs-pml")]
    assert first_column(res.stdout, "| model | complete | narrow |") == [
        names[m] for m in ("rvs-p", "bc-p", "rvs-hn", "rvs-pml")
    ]


def test_long_run_speed(tmp_path):
    # A family's learner loop and the front model's, 3 steps in windows of 1, run by another
    # checkout's code (--code: a copy of this one).
    before = code_copy(tmp_path / "before")
    res = run("benchmarks/long_run_speed.py", "--loops", "rvs-p,front", "--steps", "3", "--window", "1", "--skip",
              "1", "--trajectories", "2", "--code", before)  # fmt: skip
    rows = table_rows(res.stdout, "| loop | checkout | runtime setup |")
    assert [r[:3] for r in rows] == [
        ["rvs-p", "before", "morl.cpu.configure"],
        ["front", "before", "morl.cpu.configure"],
    ]
    assert all(r[7].endswith("%") for r in rows), rows  # a loop that fails says so in its row and exits 0
    along = table_rows(res.stdout, "| loop | checkout | 0% |")
    assert [r[:2] for r in along] == [["rvs-p", "before"], ["front", "before"]] and len(along[0]) == 13
    # the front model on the points a committed front model was fitted on
    front = ROOT / "docs/unseen/runs/MO-Hopper-v2/data/expert-high.front_model.pt"
    res = run("benchmarks/long_run_speed.py", "--loops", "front", "--steps", "3", "--window", "1", "--skip", "1",
              "--front-from", str(front))  # fmt: skip
    rows = table_rows(res.stdout, "| loop | checkout | runtime setup |")
    assert len(rows) == 1 and rows[0][0] == "front" and rows[0][7].endswith("%"), rows
    # the behavior trainers, run whole (TD3's random steps first, one PGMORL iteration)
    res = run("benchmarks/long_run_speed.py", "--loops", "td3,ppo", "--steps", "3", "--window", "1", "--skip", "1",
              "--trajectories", "2")  # fmt: skip
    rows = table_rows(res.stdout, "| loop | checkout | runtime setup |")
    assert [r[0] for r in rows] == ["td3", "ppo"] and all(r[7].endswith("%") for r in rows), rows


def test_pgmorl_phases():
    res = run("benchmarks/pgmorl_phases.py", "--tiny", "--profile-selection", "1")
    rows = table_rows(res.stdout, "| generation | iterations | tasks |")
    # the warm-up's 2 iterations, then 1-iteration generations; the archive never shrinks
    assert [r[:3] for r in rows] == [["1", "2", "6"], ["2", "1", "6"], ["3", "1", "6"]], rows
    assert [int(r[3]) for r in rows] == sorted(int(r[3]) for r in rows) and int(rows[0][3]) >= 1
    assert all(r[-1].endswith("%") for r in rows)
    # the profile of the selections names the function that chooses the tasks
    assert "The selections from generation 1 on" in res.stdout and "select_tasks" in res.stdout


def test_step_floor():
    res = run("benchmarks/step_floor.py", "--steps", "1", "--rounds", "1", "--trajectories", "2")
    rows = first_column(res.stdout, "| model | floor | full step (ms) |")
    assert (
        rows == ["MORvS(P), PEDA's size", "MORvS(P), PEDA's size", "MODT(P)", "CQL(P)"] + ["front model (MODULI)"] * 2
    )


def test_threads():
    # One model at one thread, idle and beside the busy job the script starts.
    res = run("benchmarks/threads.py", "--models", "rvs-p", "--threads", "1", "--steps", "1", "--trajectories", "2")
    rows = table_rows(res.stdout, "| model | condition | 1 thread |")
    assert [r[:2] for r in rows] == [["rvs-p", "idle"], ["rvs-p", "beside a busy job"]]
    assert all(r[2].endswith("(1.00, 1 used)") for r in rows), rows


def test_subnormal_step():
    res = run("benchmarks/subnormal_step.py", "--size", "8", "--steps", "2")
    rows = table_rows(res.stdout, "| kernel | subnormals | update (ms) |")
    assert [r[:2] for r in rows] == [
        ["foreach", "IEEE"],
        ["foreach", "flushed"],
        ["fused", "IEEE"],
        ["fused", "flushed"],
    ]


def test_fall_probe(tmp_path, policy, dataset):
    # Every subcommand on the tiny HalfCheetah policy and data: a replay that must be exact, two
    # short checkpoints, their rollouts, and the probes that read them.
    fp = "benchmarks/fall_probe.py"
    res = run(fp, "replay", "--dataset", str(dataset), "--trajectories", "3")
    assert "bit-identical trajectories 3/3" in res.stdout, res.stdout[-2000:]
    ckpt = {}
    for model in ("rvs-p", "dt-p"):
        ckpt[model] = tmp_path / f"{model}.pt"
        run(fp, "train", "--dataset", str(dataset), "--model", model, "--steps", "20", "--warmup", "5",
            "--statistics-from", "dataset", "--out", str(ckpt[model]))  # fmt: skip
    saved = tmp_path / "falls.npz"
    run(fp, "falls", "--dataset", str(dataset), "--checkpoint", str(ckpt["rvs-p"]), "--nn-ref", "500", "--save",
        str(saved))  # fmt: skip
    run(fp, "falls", "--dataset", str(dataset), "--checkpoint", str(ckpt["rvs-p"]), "--points", "data", "--n-data",
        "6", "--targets", "own", "--conditioning", "unweighted", "--nn-ref", "500")  # fmt: skip
    run(fp, "falls", "--dataset", str(dataset), "--checkpoint", str(ckpt["dt-p"]), "--points", "data", "--n-data",
        "6", "--conditioning", "window", "--nn-ref", "500")  # fmt: skip
    run(fp, "takeover", "--rollouts", str(saved), "--behavior", str(policy), "--back", "1", "5")
    run(fp, "handoff", "--dataset", str(dataset), "--checkpoint", str(ckpt["rvs-p"]), "--behavior", str(policy),
        "--n-data", "6", "--first", "0", "3")  # fmt: skip
    res = run(fp, "fit", "--dataset", str(dataset), "--checkpoint", str(ckpt["dt-p"]), "--samples", "500")
    assert "MODT at step c" in res.stdout, res.stdout[-2000:]
    # front: a standing episode that dominates the data carries the whole HV; a falling one, dominated, none
    import polars as pl

    from morl.data import load_dataset
    from morl.metrics import hypervolume

    ds = load_dataset(dataset)
    top, cap = ds.traj_returns.max(0), int(ds.meta["max_episode_steps"])
    inside = ds.traj_preferences[0].tolist()
    pl.DataFrame({"point": [0, 1], "preference": [inside, inside], "return": [(2 * top).tolist(), (top / 4).tolist()],
                  "length": [float(cap), 3.0]}).write_parquet(tmp_path / "eval.parquet")  # fmt: skip
    res = run(fp, "front", "--dataset", str(dataset), "--evaluations", str(tmp_path / "eval.parquet"))
    row = json.loads(res.stdout.strip().splitlines()[-1])["rows"][0]
    assert (row["front_points"], row["front_full_length"], row["front_inside"], row["full_length"]) == (1, 1, 1, 1)
    assert row["hv_over_b"] == row["hv_over_b_full_length_only"] == row["hv_over_b_inside_only"]
    assert row["hv_over_b"] == round(hypervolume(2 * top[None]) / hypervolume(ds.traj_returns), 3)
    assert row["hv_full_length_only_over_hv"] == 1.0
    res = run(fp, "front", "--evaluations", str(tmp_path / "eval.parquet"), "--max-steps", str(cap + 1))
    row = json.loads(res.stdout.strip().splitlines()[-1])["rows"][0]  # no episode reaches a cap of cap + 1
    assert (row["front_points"], row["front_full_length"], row["hv_full_length_only_over_hv"]) == (1, 0, 0.0)


def _pgmorl_final_folder(folder: Path, obs_dim: int, act_dim: int, objs: list[list[float]]) -> None:
    """A PGMORL ``final/`` folder of ``len(objs)`` random policies, laid out as PGMORL writes it:
    ``EP_policy_<i>.pt`` (an ``a2c_ppo_acktr`` state dict in float64), ``EP_env_params_<i>.pkl`` (a
    pickled dict holding baselines' ``RunningMeanStd``) and ``objs.txt``."""
    import pickle
    import types

    import numpy as np
    import torch

    module = types.ModuleType("baselines.common.running_mean_std")

    class RunningMeanStd:  # pickled under baselines' name, as PGMORL's files are
        pass

    RunningMeanStd.__module__, RunningMeanStd.__qualname__ = module.__name__, "RunningMeanStd"
    module.RunningMeanStd = RunningMeanStd
    gen = torch.Generator().manual_seed(0)
    folder.mkdir(parents=True)
    names = ("baselines", "baselines.common", module.__name__)
    saved = {name: sys.modules.get(name) for name in names}
    sys.modules.update({"baselines": types.ModuleType("baselines"),
                        "baselines.common": types.ModuleType("baselines.common"), module.__name__: module})  # fmt: skip
    try:
        for i in range(len(objs)):
            shapes = {"base.actor.0.weight": (64, obs_dim), "base.actor.0.bias": (64,), "base.actor.2.weight": (64, 64),
                      "base.actor.2.bias": (64,), "dist.fc_mean.weight": (act_dim, 64), "dist.fc_mean.bias": (act_dim,),
                      "dist.logstd._bias": (act_dim, 1)}  # fmt: skip
            state = {k: 0.3 * torch.randn(shape, generator=gen, dtype=torch.float64) for k, shape in shapes.items()}
            torch.save(state, folder / f"EP_policy_{i}.pt")
            rms = RunningMeanStd()
            rms.mean, rms.var, rms.count = np.zeros(obs_dim), np.ones(obs_dim), 1e4
            (folder / f"EP_env_params_{i}.pkl").write_bytes(pickle.dumps({"ob_rms": rms, "ret_rms": None}))
    finally:
        for name, was in saved.items():
            if was is None:
                del sys.modules[name]
            else:
                sys.modules[name] = was
    (folder / "objs.txt").write_text("".join(",".join(f"{v:.6f}" for v in row) + "\n" for row in objs))


def test_d4morl_policies(tmp_path):
    # Two random policies on MO-Hopper-v2, with MuJoCo 2.0's capsule inertials and contact margins:
    # the table has a row per policy, and the model gets mujoco-py's Hopper masses (torso 3.5343)
    _pgmorl_final_folder(tmp_path / "final", 11, 3, [[1000.0, 2000.0], [1500.0, 1500.0]])
    res = run("benchmarks/d4morl_policies.py", "--final", tmp_path / "final", "--env", "MO-Hopper-v2",
              "--capsules", "mujoco200", "--margins", "mujoco200")  # fmt: skip
    rows = table_rows(res.stdout, "| policy | objs.txt | ours |")
    assert [r[0] for r in rows] == ["0", "1"] and rows[1][1] == "[1500.0, 1500.0]", rows
    assert "-> [3.5343, 3.927, 2.7143, 5.0894]" in res.stdout, res.stdout
    assert "contact margins: geom margin 0.001 -> 0.0005" in res.stdout
    assert "summary MO-Hopper-v2 (2 policies" in res.stdout
