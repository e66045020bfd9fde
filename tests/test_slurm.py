"""The workflow on a real SLURM: profiles/slurm driving a single-node cluster started for the test.

tests/slurm/start_cluster.sh brings up munged, slurmctld and slurmd (Debian's slurm-wlm and munge;
tests/slurm/install.sh installs them) with all their files in a temporary directory. The
integration test runs configs/smoke.yaml, cut to one env and three models, through `snakemake
--profile profiles/slurm` (with fewer cores per job than the profile asks for, to fit this
machine), cancels one training job with `scancel` part way through, reruns the workflow, and
then checks that the training resumed, that nothing else was redone, that every job went through
sbatch, and that every output is right. The test is skipped only where the SLURM packages are not installed;
if they are and the cluster does not come up, it fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SLURM_DIR = ROOT / "tests" / "slurm"
PROFILE = ROOT / "profiles" / "slurm"
SMOKE = ROOT / "configs" / "smoke.yaml"
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel")

# The test node declares room for every ready job of the smoke DAG at once (up to 20 training jobs of
# the profile's size: 4 CPUs, 24 GB, one GPU each); SLURM schedules by these numbers, the jobs
# share the machine's real cores. The GPUs are device files with nothing behind them.
NODE = {"NODE_CPUS": "64", "NODE_MEMORY_MB": "512000", "NODE_GPUS": "16"}

# The cell whose training gets cancelled: long enough (with frequent checkpoints) to be cut part way.
SLOW = {"env": "MO-HalfCheetah-v2", "model": "dt-p", "steps": 1000, "checkpoint_every": 25}

# Cores per job in the integration test, in place of the profile's set-threads (sized for cluster
# nodes). A dozen 4-thread torch jobs on this machine's 2 cores crawl: the resumed 1500-step
# training took 3 min there, against ~15 s with one thread. behavior_front and collect still get 2
# cores, so the batched stepper runs multi-threaded under SLURM too.
TEST_THREADS = {"behavior": 1, "behavior_front": 2, "collect": 2, "train": 1, "evaluate": 1, "aggregate": 1}


def profile() -> dict:
    return yaml.safe_load((PROFILE / "config.yaml").read_text())


def snakemake_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), *args]


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


def which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")


# ------------------------------------------------------------------------------------ the profile


def test_slurm_profile_asks_for_a_gpu_for_training_only():
    p = profile()
    assert p["executor"] == "slurm"
    default, per_rule = p["default-resources"], p["set-resources"]
    assert default["slurm_partition"], "CPU partition is set once, in default-resources"
    assert "gpu" in str(per_rule["train"]["gres"])
    assert per_rule["train"]["slurm_partition"] != default["slurm_partition"]
    for rule, res in per_rule.items():
        assert {"mem_mb", "runtime"} <= set(res), f"{rule}: memory and time limit"
        if rule != "train":
            assert not {"gres", "gpu", "gpu_model", "slurm_partition"} & set(res), f"{rule} must not ask for a GPU"
    threads = p["set-threads"]
    assert threads["aggregate"] == 1
    assert all(threads[r] >= 2 for r in ("behavior_front", "collect", "evaluate", "train"))
    assert "gres" not in (ROOT / "profiles/local/config.yaml").read_text()


def test_slurm_profile_resources_reach_the_jobs(tmp_path):
    """A dry run with the profile shows each rule's partition, GPU request, cores, memory and time."""
    # --cores: a dry run caps threads at the local cores; 64 shows the profile's own numbers
    res = subprocess.run(snakemake_cmd("-n", "--profile", str(PROFILE), "--configfile", str(SMOKE), "--cores", "64"),
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    p = profile()
    jobs = re.findall(r"^rule (\w+):\n(.*?)(?=^\S|\Z)", out, re.M | re.S)
    counts = job_counts(out)
    assert len(jobs) == counts["total"]
    seen = set()
    for rule, body in jobs:
        if rule == "all":
            continue
        seen.add(rule)
        resources = dict(kv.split("=", 1) for kv in re.search(r"resources: (.*)", body).group(1).split(", "))
        want = dict(p["default-resources"], **p["set-resources"].get(rule, {}))
        assert resources["slurm_partition"] == want["slurm_partition"], rule
        assert int(resources["mem_mb"]) == want["mem_mb"] and int(resources["runtime"]) == want["runtime"], rule
        assert ("gres" in resources) == (rule == "train"), rule
        threads = re.search(r"threads: (\d+)", body)
        assert (int(threads.group(1)) if threads else 1) == p["set-threads"].get(rule, 1), rule
        if rule == "train":
            assert resources["gres"] == p["set-resources"]["train"]["gres"]
    assert seen >= {"behavior", "behavior_front", "collect", "train", "evaluate", "aggregate"}


def test_rules_do_not_hard_code_cuda():
    for path in [
        ROOT / "Snakefile",
        *sorted((ROOT / "rules").glob("*.smk")),
        *sorted((ROOT / "workflow_scripts").glob("*.py")),
    ]:
        assert "cuda" not in path.read_text().lower(), f"{path.relative_to(ROOT)} names CUDA"


# ------------------------------------------------------------------------------------ the cluster


class Cluster:
    def __init__(self, directory: Path):
        self.dir = directory
        self.conf = directory / "etc" / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf), PYTHONUNBUFFERED="1",
                        PATH=f"{directory / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")  # fmt: skip

    def run(self, *cmd: str, check: bool = True) -> str:
        res = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60)
        if check and res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr}")
        return res.stdout

    def jobs(self) -> list[dict[str, str]]:
        """Every job slurmctld knows (finished ones stay for MinJobAge), oldest first."""
        fields = ("id", "state", "partition", "cpus", "gres", "comment")
        out = self.run("squeue", "--states=all", "--noheader", "--format=%i|%T|%P|%C|%b|%k")
        rows = [dict(zip(fields, line.split("|", len(fields) - 1))) for line in out.splitlines() if line.strip()]
        return sorted(rows, key=lambda r: int(r["id"]))

    def daemon_pids(self) -> dict[str, int]:
        return {f.stem: int(f.read_text()) for f in (self.dir / "run").glob("*.pid") if f.read_text().strip()}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


@contextlib.contextmanager
def running_cluster(directory: Path):
    """A cluster started by tests/slurm/start_cluster.sh in ``directory``, stopped afterwards by
    stop_cluster.sh, which must leave none of its daemons running."""
    missing = [d for d in DAEMONS if which(d) is None]
    if missing:
        pytest.skip(f"SLURM is not installed here (no {', '.join(missing)}); tests/slurm/install.sh installs "
                    "Debian's slurm-wlm and munge")  # fmt: skip
    p = profile()
    partitions = [p["default-resources"]["slurm_partition"]]
    partitions += sorted(
        {r["slurm_partition"] for r in p["set-resources"].values() if "slurm_partition" in r} - set(partitions)
    )
    env = dict(os.environ, SLURM_PARTITIONS=",".join(partitions), **NODE)
    env["PATH"] = f"{env.get('PATH', '')}:/usr/sbin:/sbin"
    cluster = Cluster(directory)
    t0 = time.perf_counter()
    start = subprocess.run(["bash", str(SLURM_DIR / "start_cluster.sh"), str(directory)], env=env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    try:
        assert start.returncode == 0, f"the test cluster did not start:\n{start.stdout}\n{start.stderr}"
        print(f"\nSLURM test cluster up in {time.perf_counter() - t0:.1f} s: {cluster.conf}")
        yield cluster
    finally:
        pids = cluster.daemon_pids()
        stop = subprocess.run(["bash", str(SLURM_DIR / "stop_cluster.sh"), str(directory)], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        cluster.stopped = stop
        print(stop.stderr, end="")
        alive = {name: pid for name, pid in pids.items() if pid_alive(pid)}
        assert stop.returncode == 0 and not alive, f"daemons left running: {alive}\n{stop.stderr}"


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


def test_stopping_the_cluster_stops_what_its_jobs_left_running(tmp_path):
    """A process a job left behind (here one in a session of its own, which proctrack/linuxproc
    does not follow) is stopped with the cluster, so no test leaves a job's process running."""
    pid_file = tmp_path / "escaped.pid"
    with running_cluster(tmp_path / "cluster") as cluster:
        job = cluster.run("sbatch", "--parsable", "-p", profile()["default-resources"]["slurm_partition"],
                          "--output", "/dev/null", "--wrap",
                          f"setsid sh -c 'echo $$ > {pid_file}; exec sleep 600' < /dev/null > /dev/null 2>&1 &")  # fmt: skip
        job = job.strip().split(";")[0]
        wait_for(
            lambda: [j for j in cluster.jobs() if j["id"] == job and j["state"] == "COMPLETED"], 60, "the job's end"
        )
        pid = int(wait_for(lambda: pid_file.is_file() and pid_file.read_text().strip(), 30, "the escaped pid"))
        assert pid_alive(pid), "the job's process did not outlive its job; this test shows nothing here"
    assert not pid_alive(pid)
    assert f"a job of the cluster left process {pid} running: sleep 600" in cluster.stopped.stderr


def test_cluster_runs_a_job(slurm_cluster):
    out = slurm_cluster.run("sbatch", "--parsable", "--wait", "-p", profile()["default-resources"]["slurm_partition"],
                            "--output", str(slurm_cluster.dir / "hello.out"), "--wrap", "srun echo hello from $SLURM_JOB_ID")  # fmt: skip
    job = out.strip().split(";")[0]
    assert (slurm_cluster.dir / "hello.out").read_text().strip() == f"hello from {job}"


def wait_for(condition, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-5000:] if log else ""
            raise AssertionError(f"snakemake ended (rc {proc.returncode}) before {what}:\n{tail}")
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def snapshot(results: Path, skip: Path) -> dict[str, int]:
    """mtime (ns) of every output file under ``results`` outside ``skip`` and the aggregate's tables."""
    out = {}
    for f in results.rglob("*"):
        rel = f.relative_to(results)
        if f.is_file() and rel.parts[0] not in ("logs", "benchmarks", "tables") and skip not in f.parents:
            out[str(rel)] = f.stat().st_mtime_ns
    return out


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_smoke_workflow_on_slurm_resumes_a_cancelled_training_job(slurm_cluster, tmp_path):
    from morl.config import train_settings
    from morl.data import load_dataset
    from morl.evaluate import read_evaluation
    from morl.families import load_agent, load_checkpoint
    from morl.torch_io import load_torch

    cluster = slurm_cluster
    config = yaml.safe_load(SMOKE.read_text())
    q, h = config["qualities"][0], config["entropies"][0]
    R = tmp_path / config["results_dir"]
    slow_run = R / SLOW["env"] / f"{q}-{h}" / SLOW["model"] / "seed0"
    partial = slow_run / "model.pt.partial"
    # the job's comment lists its wildcards in path order; coverage is empty for the complete data
    slow_comment = f"rule_train_wildcards_{SLOW['env']}_{q}_{h}__{SLOW['model']}_0"
    # configs/smoke.yaml cut to the env of the cell to cancel and three of its models (a
    # transformer, an MLP, a value-based family: the local smoke run trains every model on both
    # envs), plus one override that makes one training run long (one file: a run takes exactly one
    # config)
    config["envs"] = [SLOW["env"]]
    config["models"] = ["dt-p", "bc-p", "td3bc-p"]
    slow = tmp_path / "slow_cell.yaml"
    config["train"]["overrides"] = [*config["train"]["overrides"], {
        "envs": [SLOW["env"]], "models": [SLOW["model"]],
        "peda": {"steps": SLOW["steps"], "checkpoint_every": SLOW["checkpoint_every"]}}]  # fmt: skip
    slow.write_text(yaml.safe_dump(config))
    # squeue for job states (no accounting database here); poll every second, as the jobs are short
    args = ["--profile", str(PROFILE), "--configfile", str(slow),
            "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
            "--seconds-between-status-checks", "1",
            "--set-threads", *(f"{rule}={n}" for rule, n in TEST_THREADS.items())]  # fmt: skip
    timings = {}

    # 1. The whole workflow; the slow training job is cancelled once it has written a checkpoint.
    log1 = tmp_path / "run1.log"
    t0 = time.perf_counter()
    with open(log1, "w") as f:
        proc = subprocess.Popen(snakemake_cmd(*args), cwd=tmp_path, env=cluster.env, stdout=f, stderr=subprocess.STDOUT)
    try:
        wait_for(partial.exists, 1200, f"a checkpoint of {slow_run}", proc, log1)
        [job] = wait_for(lambda: [j for j in cluster.jobs() if j["comment"] == slow_comment and j["state"] == "RUNNING"],
                         60, "the slow training job in squeue")  # fmt: skip
        cluster.run("scancel", job["id"])
        proc.wait(timeout=1200)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    timings["run 1 (cancelled)"] = time.perf_counter() - t0
    out1 = log1.read_text()
    assert proc.returncode != 0, "the run with a cancelled job must fail"
    assert f"SLURM-job '{job['id']}' failed, SLURM status is: 'CANCELLED'" in out1, out1[-3000:]
    assert not (slow_run / "model.pt").exists(), "a cancelled training run left a final checkpoint"
    assert partial.exists()
    # Nothing half-done counts as done: the dry run wants exactly the cut cell and what follows it.
    dry = subprocess.run(snakemake_cmd("-n", *args), cwd=tmp_path, env=cluster.env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert job_counts(dry.stdout + dry.stderr) == {"train": 1, "evaluate": 1, "aggregate": 1, "all": 1, "total": 4}
    assert str(slow_run.relative_to(tmp_path) / "model.pt") in dry.stdout + dry.stderr
    before = snapshot(R, slow_run)

    # 2. Rerun: the training resumes from its checkpoint; nothing else is redone.
    t0 = time.perf_counter()
    res = subprocess.run(snakemake_cmd(*args), cwd=tmp_path, env=cluster.env, capture_output=True, text=True,
                         timeout=1200)  # fmt: skip
    timings["run 2 (resume)"] = time.perf_counter() - t0
    out2 = res.stdout + res.stderr
    assert res.returncode == 0, out2[-5000:]
    assert job_counts(out2) == {"train": 1, "evaluate": 1, "aggregate": 1, "all": 1, "total": 4}
    assert snapshot(R, slow_run) == before, "a finished job's output was redone"
    rerun = [j for j in cluster.jobs() if j["comment"] == slow_comment]
    assert [j["state"] for j in rerun] == ["CANCELLED", "COMPLETED"]
    rerun_log = (tmp_path / ".snakemake/slurm_logs/rule_train" / slow_comment.split("_wildcards_")[1] /
                 f"{rerun[1]['id']}.log").read_text()  # fmt: skip
    resumed = [int(n) for n in re.findall(r"model\.pt\.partial: resuming from step (\d+)", rerun_log)]
    assert len(resumed) == 1 and 0 < resumed[0] < SLOW["steps"], rerun_log[-3000:]
    assert resumed[0] % SLOW["checkpoint_every"] == 0
    ckpt = load_checkpoint(slow_run / "model.pt")
    assert ckpt["steps"] == SLOW["steps"] and ckpt["settings"]["steps"] == SLOW["steps"]
    assert not partial.exists()
    curve = (slow_run / "curve.csv").read_text().splitlines()
    assert curve[0].startswith("step") and int(float(curve[-1].split(",")[0])) == SLOW["steps"]
    # Training used whatever device the job found; this machine has none but the CPU.
    import torch

    assert ckpt["device"].startswith("cuda") if torch.cuda.is_available() else ckpt["device"] == "cpu"

    # 3. Every job went through sbatch: slurmctld logged one submission per job, and the job
    #    comments name each rule as often as the DAG has it, with the profile's requests.
    jobs = cluster.jobs()
    submitted = re.findall(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", (cluster.dir / "log/slurmctld.log").read_text())
    ours = [j for j in jobs if j["comment"].startswith("rule_")]
    assert {j["id"] for j in ours} <= set(submitted), "a job ran that slurmctld did not log as submitted"
    assert all(j["state"] == "COMPLETED" for j in ours if j["id"] != rerun[0]["id"])
    per_rule: dict[str, int] = {}
    for j in ours:
        rule = re.match(r"rule_(\w+?)(?:_wildcards_|$)", j["comment"]).group(1)
        per_rule[rule] = per_rule.get(rule, 0) + 1
    # run 1 submitted its whole DAG but the cut cell's evaluation and the aggregate; run 2 those
    # two and the training again
    planned = {rule: n for rule, n in job_counts(out1).items() if rule not in ("all", "total")}
    planned["train"] += 1
    assert per_rule == planned
    n_envs, n_cells = len(config["envs"]), len(config["envs"]) * len(config["models"])
    assert (per_rule["behavior"], per_rule["collect"], per_rule["train"]) == (n_envs, n_envs, n_cells + 1)
    p = profile()
    for j in ours:
        rule = re.match(r"rule_(\w+?)(?:_wildcards_|$)", j["comment"]).group(1)
        want = dict(p["default-resources"], **p["set-resources"].get(rule, {}))
        assert j["partition"] == want["slurm_partition"], j
        assert int(j["cpus"]) == TEST_THREADS.get(rule, 1), j
        assert (j["gres"] == f"gres:{p['set-resources']['train']['gres']}") == (rule == "train"), j
    for out in (out1, out2):
        assert "has been submitted with SLURM jobid" in out
    assert out1.count("has been submitted with SLURM jobid") + out2.count("has been submitted with SLURM jobid") == len(
        ours
    )

    # 4. All outputs are right (as in tests/test_workflow.py's local smoke run).
    n_points = {"MO-HalfCheetah-v2": 4, "MO-Hopper-v3": 10}  # divisions 3
    for env in config["envs"]:
        _, front = read_evaluation(R / env / "behavior/front.parquet")
        assert len(front["return"]) == 3 * n_points[env]
        ds = load_dataset(R / env / "data" / f"{q}-{h}.parquet")
        assert ds.n_trajectories == config["collect"]["n_trajectories"] and ds.meta["env_id"] == env
        for model in config["models"]:
            run = R / env / f"{q}-{h}" / model / "seed0"
            assert load_agent(run / "model.pt") is not None
            assert load_torch(run / "model.pt")["steps"] == train_settings(config, env, model)["steps"]
            meta, arr = read_evaluation(run / "eval.parquet")
            assert meta["model"] == model and len(arr["return"]) == n_points[env]
            assert np.all(np.isfinite(arr["return"]))
            summary = json.loads((run / "summary.json").read_text())
            assert summary["model"] == model and summary["hv"] >= 0
    table = (R / "tables/results.md").read_text()
    for env in config["envs"]:
        assert f"| {env} | {q} {h}-H |" in table
    assert len(list((R / "tables/plots").rglob("*.png"))) >= len(config["envs"])
    again = subprocess.run(snakemake_cmd("-n", *args), cwd=tmp_path, env=cluster.env, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    print("\n" + ", ".join(f"{k}: {v:.0f} s" for k, v in timings.items()))
