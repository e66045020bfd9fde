"""PGMORL behavior populations: PGMORL's pieces, K tasks trained together as K separate learners,
byte-identical resumes after a kill, and acting by PEDA's nearest-policy rule."""

from __future__ import annotations

import copy
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from morl.behavior import pgmorl
from morl.config import ConfigError, validate_config
from morl.data import file_sha256
from morl.errors import InputError

ROOT = Path(__file__).resolve().parent.parent

# A few short iterations: 2 envs x 64 steps, warm-up of 2 iterations, then generations of 1.
TINY = {"env_steps_per_task": 5 * 2 * 64, "warmup_iters": 2, "update_iters": 1, "num_envs": 2, "num_steps": 64,
        "num_minibatches": 4, "ppo_epochs": 2, "hidden": 16, "seed": 0}  # fmt: skip


def test_weight_grid_is_pgmorls_depth_first_grid():
    two = pgmorl.weight_grid(2, 0.0, 1.0, 0.2)
    assert two.shape == (6, 2)
    np.testing.assert_allclose(two[:, 0], [0, 0.2, 0.4, 0.6, 0.8, 1.0], atol=1e-12)
    np.testing.assert_allclose(two.sum(1), 1.0)
    three = pgmorl.weight_grid(3, 0.0, 1.0, 0.25)
    assert three.shape == (15, 3)  # Hopper-v3's 15 tasks
    np.testing.assert_allclose(three[:3], [[0, 0, 1], [0, 0.25, 0.75], [0, 0.5, 0.5]], atol=1e-12)
    assert len(pgmorl.weight_grid(3, 0.0, 1.0, 0.125)) == 45  # the 3-D candidate grid


def test_archive_keeps_non_negative_non_dominated_rows_and_duplicates_in_first_objective_order():
    objs = np.array([[3.0, 1.0], [1.0, 3.0], [2.0, 2.0], [1.0, 1.0], [2.0, 2.0], [5.0, -1.0], [0.5, 3.0]])
    assert pgmorl.archive_indices(objs).tolist() == [1, 2, 4, 0]
    rng = np.random.default_rng(0)
    for n_obj in (2, 3):
        pts = rng.integers(-1, 6, size=(40, n_obj)).astype(float)
        front = np.zeros((0, n_obj))
        for p in pts:
            front = pgmorl.add_to_front(front, p)
        expect = pts[pgmorl.archive_indices(pts)]
        assert sorted(map(tuple, front)) == sorted(map(tuple, expect))


def test_running_statistics_equal_the_statistics_of_all_samples():
    rng = np.random.default_rng(1)
    data = rng.normal(3.0, 2.0, size=(2, 50, 4))
    mean, var, count = np.zeros((2, 4)), np.ones((2, 4)), np.full(2, 1e-4)
    for i in range(0, 50, 5):
        pgmorl.rms_update(mean, var, count, data[:, i : i + 5])
    np.testing.assert_allclose(mean, data.mean(1), rtol=1e-5)
    np.testing.assert_allclose(var, data.var(1), rtol=1e-3)


def test_hyperbolic_prediction_recovers_a_known_improvement_curve():
    graph = pgmorl.OptGraph()
    root = graph.insert(np.array([0.5, 0.5]), np.array([100.0, 100.0]), -1)
    truth = lambda x: 40 * np.tanh(3 * (x - 0.5) / 2) + 10  # noqa: E731
    for w0 in np.linspace(0.05, 0.95, 9):
        w = np.array([w0, 1 - w0])
        graph.insert(w, graph.objs[root] + np.array([truth(w0), truth(1 - w0)]), root)
    test = np.array([[0.3, 0.7], [0.7, 0.3]])
    pred = pgmorl.predict_hyperbolic(graph, root, test, three_d=False)
    np.testing.assert_allclose(pred[:, 0], 100 + truth(test[:, 0]), atol=1.0)
    np.testing.assert_allclose(pred[:, 1], 100 + truth(test[:, 1]), atol=1.0)


def test_population_keeps_the_farthest_members_of_each_direction():
    pop = pgmorl.Population(2, pbuffer_num=4, size=2)
    objs = [np.array(x) for x in ([1.0, 0.1], [2.0, 0.2], [3.0, 0.3], [0.1, 1.0], [0.0, 5.0], [1.0, 1.0])]
    kept = pop.members(objs)
    assert 2 in kept and 1 in kept and 0 not in kept  # one buffer, its two farthest
    assert 4 not in kept  # an objective at 0 is refused, as PGMORL's buffers do
    assert {3, 5} <= set(kept)


def _fresh_tasks(env_id: str, weights: np.ndarray, s: pgmorl.PGMORLSettings, seed: int) -> pgmorl.TaskBatch:
    from morl.envs import get_spec

    spec = get_spec(env_id)
    k, n_obj = len(weights), spec.n_obj
    params = pgmorl.init_params(k, spec.obs_dim, spec.act_dim, n_obj, s.hidden, torch.Generator().manual_seed(seed))
    return pgmorl.TaskBatch(
        params, pgmorl.StackedAdam(params, s.adam_eps).state, np.zeros((k, spec.obs_dim)), np.ones((k, spec.obs_dim)),
        np.full(k, 1e-4), np.ones((k, n_obj)), np.zeros((k, n_obj)), np.full(k, 1e-4), weights, np.zeros(k, np.int64),
    )  # fmt: skip


def test_tasks_trained_together_learn_as_separate_learners():
    """A task's training does not depend on the tasks stepped beside it: the same task paired with
    two different partners ends with the same networks, normalisers and evaluation (Swimmer never
    terminates, so every slot's episodes, and so their seeds, line up in both runs)."""
    env_id = "MO-Swimmer-v2"
    s = pgmorl.PGMORLSettings.from_config(TINY)
    a = _fresh_tasks(env_id, np.array([[0.3, 0.7]]), s, seed=1)
    b = _fresh_tasks(env_id, np.array([[0.9, 0.1]]), s, seed=2)
    c = _fresh_tasks(env_id, np.array([[0.1, 0.9]]), s, seed=3)
    b.params = {k: v * 3 for k, v in b.params.items()}  # a very different partner
    results = []
    for partner in (b, c):
        tb = pgmorl.TaskBatch.concat([a.select([0]), partner])
        off = pgmorl.run_generation(env_id, tb, s, 0, 2, env_seed=5, eval_seed=0)
        results.append((tb, off[-1][1]))
    (t1, o1), (t2, o2) = results
    for key in pgmorl.PARAM_KEYS:
        torch.testing.assert_close(t1.params[key][0], t2.params[key][0], rtol=0, atol=0)
    np.testing.assert_array_equal(t1.ob_mean[0], t2.ob_mean[0])
    np.testing.assert_array_equal(o1[0], o2[0])
    assert not torch.equal(t1.params["a_w1"][0], a.params["a_w1"][0])  # it did train
    assert not np.array_equal(o1[1], o2[1])


def test_each_iteration_continues_from_the_state_the_last_one_ended_in(monkeypatch):
    """Within a generation the environments keep running, so an iteration's first step acts on the
    observation the previous iteration ended with (the one its value bootstrap saw), as in PGMORL's
    rollout storage, not on the generation's first reset."""
    env_id = "MO-Hopper-v2"
    s = pgmorl.PGMORLSettings.from_config(TINY)
    tb = _fresh_tasks(env_id, np.array([[0.5, 0.5]]), s, seed=0)
    acted, bootstrapped = [], []
    mlp3, critic = pgmorl.mlp3, pgmorl.critic_values

    def recording_mlp3(x, p, keys):
        if keys is pgmorl.FUSED_KEYS:  # the rollout's fused actor-critic, one call per step
            acted.append(x.clone())
        return mlp3(x, p, keys)

    def recording_critic(p, x):
        if not torch.is_grad_enabled():  # the bootstrap value after the last step, not the update
            bootstrapped.append(x.clone())
        return critic(p, x)

    monkeypatch.setattr(pgmorl, "mlp3", recording_mlp3)
    monkeypatch.setattr(pgmorl, "critic_values", recording_critic)
    pgmorl.run_generation(env_id, tb, s, 0, 2, env_seed=5, eval_seed=0)
    assert len(acted) == 2 * s.num_steps and len(bootstrapped) == 2
    torch.testing.assert_close(acted[s.num_steps], bootstrapped[0], rtol=0, atol=0)
    assert not torch.equal(acted[s.num_steps], acted[0])


def _cli_config(tmp_path: Path, env_id: str, pgmorl_settings: dict) -> Path:
    with open(ROOT / "configs" / "smoke.yaml") as f:
        cfg = yaml.safe_load(f)
    cfg["envs"] = [env_id]
    cfg["behavior"]["method"] = "pgmorl"
    cfg["behavior"]["pgmorl"] = pgmorl_settings
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _morl(*args, cwd: Path, **kw):
    return subprocess.Popen([sys.executable, "-m", "morl.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)  # fmt: skip


def _kill_when(run: subprocess.Popen, partial: Path, output: Path, stop_when) -> None:
    """Kill ``run`` (SIGKILL) once its partial state meets ``stop_when``, and leave on disk what a kill
    at that moment leaves: that partial state and no finished file. On a busy machine the run may
    write its next state, or finish, between two looks; the state that was seen is put back, so the
    test does not depend on timing."""
    seen = None
    deadline = time.time() + 300
    while seen is None and time.time() < deadline:
        try:
            raw = partial.read_bytes()
            st = torch.load(io.BytesIO(raw), weights_only=True)
        except Exception:  # not there yet, or being replaced
            raw = st = None
        if st is not None and stop_when(st):
            seen = raw
        elif run.poll() is not None:
            break
        else:
            time.sleep(0.02)
    if run.poll() is None:
        os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert seen is not None, "the run never showed the state it was to be killed in"
    partial.write_bytes(seen)
    output.unlink(missing_ok=True)


def test_a_killed_run_resumes_to_the_same_file_as_an_uninterrupted_one(tmp_path):
    """Killed (SIGKILL) twice, inside the warm-up (between its chunks) and at a later generation
    boundary, and rerun each time: the same bytes as a run never stopped."""
    from morl.behavior import load_behavior

    settings = dict(TINY, env_steps_per_task=8 * 2 * 64, warmup_iters=3)
    cfg = _cli_config(tmp_path, "MO-Swimmer-v2", settings)
    argv = ["behavior", "--config", str(cfg), "--env", "MO-Swimmer-v2", "--output"]
    whole = _morl(*argv, "whole.pt", cwd=tmp_path)
    out, _ = whole.communicate(timeout=600)
    assert whole.returncode == 0, out
    partial = tmp_path / "cut.pt.partial"
    for stop_when in (lambda st: st["in_generation"] is not None, lambda st: st["generation"] >= 2):
        run = _morl(*argv, "cut.pt", cwd=tmp_path, start_new_session=True)
        _kill_when(run, partial, tmp_path / "cut.pt", stop_when)
        assert partial.exists() and not (tmp_path / "cut.pt").exists()
        in_progress = load_behavior(partial, expect_env="MO-Swimmer-v2")  # a run in progress can be evaluated
        assert in_progress.meta["partial"] and len(in_progress.objs) >= 1
        # and exported (thinned) as a population file that says where the run stood
        pgmorl.thin_population(partial, 10, tmp_path / "so_far.pt", expect_env="MO-Swimmer-v2")
        so_far = torch.load(tmp_path / "so_far.pt", weights_only=True)
        assert so_far["kind"] == pgmorl.KIND and so_far["partial"] is True
        assert so_far["iterations"] == torch.load(partial, weights_only=True)["iteration"]
        assert len(load_behavior(tmp_path / "so_far.pt").objs) == min(10, len(in_progress.objs))
    resumed = _morl(*argv, "cut.pt", cwd=tmp_path)
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out
    assert (tmp_path / "cut.pt").read_bytes() == (tmp_path / "whole.pt").read_bytes()
    assert not partial.exists()


@pytest.fixture(scope="module")
def population(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pgmorl") / "pop.pt"
    pgmorl.train_pgmorl("MO-HalfCheetah-v2", TINY, out, progress=False)
    return out


def test_population_file_is_small_safe_and_acts_by_the_nearest_policy(population):
    assert population.stat().st_size < 10 * 2**20
    st = torch.load(population, weights_only=True)
    assert st["kind"] == pgmorl.KIND and st["method"] == "pgmorl"
    policy = pgmorl.PopulationPolicy(population)
    n = len(policy.objs)
    assert n >= 1 and np.all(policy.objs >= 0)
    norm = policy.objs / policy.objs.sum(1, keepdims=True)
    np.testing.assert_allclose(policy.pref_low, norm.min(0))
    np.testing.assert_allclose(policy.pref_high, norm.max(0))
    # Each archive policy acts for the preference equal to its own normalised objectives.
    assert policy.nearest(norm).tolist() == [int(np.flatnonzero((norm == row).all(1))[0]) for row in norm]
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(len(norm), 17)).astype(np.float32)
    acts = policy.act(obs, norm)
    for i, idx in enumerate(policy.nearest(norm)):
        arch = st["archive"]
        z = np.clip((obs[i] - arch["ob_mean"][idx].numpy()) / np.sqrt(arch["ob_var"][idx].numpy() + 1e-8), -10, 10)
        h = np.tanh(z @ arch["a_w1"][idx].numpy() + arch["a_b1"][idx].numpy())
        h = np.tanh(h @ arch["a_w2"][idx].numpy() + arch["a_b2"][idx].numpy())
        np.testing.assert_allclose(acts[i], h @ arch["a_wm"][idx].numpy() + arch["a_bm"][idx].numpy(), atol=1e-5)


def test_collection_from_a_population_records_the_method_and_stays_in_its_range(population, tmp_path):
    from morl.collect import collect_dataset
    from morl.data import load_dataset

    out = tmp_path / "expert-high.parquet"
    collect_dataset(population, "expert", "high", 8, out, batch_size=4, seed=0, progress=False)
    ds = load_dataset(out)
    policy = pgmorl.PopulationPolicy(population)
    assert ds.meta["behavior_method"] == "pgmorl"
    assert np.all(ds.traj_preferences >= policy.pref_low - 1e-6)
    assert np.all(ds.traj_preferences <= policy.pref_high + 1e-6)


def test_a_mismatched_or_empty_population_is_refused_naming_the_file(population, tmp_path):
    st = torch.load(population, weights_only=True)
    cases = {
        "env": dict(st, env_id="MO-Hopper-v2"),
        "physics": dict(st, physics_version=-1),
        "sizes": dict(st, archive=dict(st["archive"], a_w1=st["archive"]["a_w1"][:, :5])),
        "empty": dict(st, objs=st["objs"][:0], archive={k: v[:0] for k, v in st["archive"].items()}),
        "negative": dict(st, objs=-st["objs"]),
    }
    from morl.behavior import load_behavior

    for name, bad in cases.items():
        path = tmp_path / f"{name}.pt"
        torch.save(bad, path)
        with pytest.raises(InputError, match=str(path)):
            load_behavior(path, expect_env="MO-HalfCheetah-v2")


def test_thinning_keeps_the_extremes_then_the_farthest_policies():
    norm = np.array([[0, 1], [0.1, 0.9], [0.2, 0.8], [0.5, 0.5], [0.55, 0.45], [1, 0]])
    # extremes 0 and 5; then 3 (squared distance 0.5 to both), then 2 (0.08 to 0; 4 is 0.005 from 3)
    assert pgmorl.thinned_indices(norm, 4).tolist() == [0, 2, 3, 5]
    assert pgmorl.thinned_indices(norm, 6).tolist() == list(range(6))
    with pytest.raises(ValueError, match="below the 2 policies that span the preference box"):
        pgmorl.thinned_indices(norm, 1)


def test_a_thinned_population_keeps_its_policies_and_preference_box(population, tmp_path):
    from morl.cli import main

    st = torch.load(population, weights_only=True)
    n = 12  # the tiny run's archive, repeated with other objective vectors
    rows = np.arange(n) % len(st["objs"])
    rng = np.random.default_rng(3)
    big = dict(st, archive={k: v[rows].clone() for k, v in st["archive"].items()},
               objs=torch.from_numpy(rng.uniform(0.1, 1.0, size=(n, 2))))  # fmt: skip
    source = tmp_path / "big.pt"
    torch.save(big, source)
    assert (
        main(["thin-population", "--policy", str(source), "--max-policies", "5", "--output", str(tmp_path / "t.pt")])
        == 0
    )
    thin = torch.load(tmp_path / "t.pt", weights_only=True)
    full, kept = pgmorl.PopulationPolicy(source), pgmorl.PopulationPolicy(tmp_path / "t.pt")
    keep = pgmorl.thinned_indices(full.norm_objs, 5)
    assert len(keep) == 5 and thin["thinned"]["archive_size"] == n and thin["thinned"]["kept"] == 5
    assert thin["thinned"]["source_sha256"] == file_sha256(source)
    np.testing.assert_array_equal(kept.objs, full.objs[keep])
    np.testing.assert_array_equal(kept.pref_low, full.pref_low)
    np.testing.assert_array_equal(kept.pref_high, full.pref_high)
    obs = rng.normal(size=(5, 17)).astype(np.float32)
    np.testing.assert_array_equal(kept.act(obs, kept.norm_objs), full.act(obs, full.norm_objs[keep]))
    with pytest.raises(InputError, match=r"big.pt: max_policies 1 is below the"):
        pgmorl.thin_population(source, 1, tmp_path / "one.pt")
    assert not (tmp_path / "one.pt").exists()


def test_config_errors_name_the_key(config):
    cfg = copy.deepcopy(config)
    cfg["behavior"]["method"] = "ppo"
    with pytest.raises(ConfigError, match="behavior.method"):
        validate_config(cfg)
    cfg["behavior"]["method"] = "pgmorl"
    with pytest.raises(ConfigError, match="behavior.pgmorl"):
        validate_config(cfg)
    cfg["behavior"]["pgmorl"] = dict(TINY, num_minibatches=7)
    with pytest.raises(ConfigError, match="num_minibatches"):
        validate_config(cfg)
    cfg["behavior"]["pgmorl"] = dict(TINY, warmup=3)
    with pytest.raises(ConfigError, match="warmup"):
        validate_config(cfg)
    cfg["behavior"]["pgmorl"] = TINY
    validate_config(cfg)


def test_stacked_adam_is_torchs_adam_per_task_with_each_tasks_step_count():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(2, 3, 4, generator=gen)
    stacked = {"w": w.clone()}
    opt = pgmorl.StackedAdam(stacked, eps=1e-5)
    opt.state["step"][1] = 7.0  # the second task's parent had made 7 steps (with zero moments)
    refs = []
    for i in range(2):
        p = torch.nn.Parameter(w[i].clone())
        ref = torch.optim.Adam([p], lr=1e-2, eps=1e-5)
        refs.append((p, ref))
    p1, ref1 = refs[1]
    ref1.state[p1] = {"step": torch.tensor(7.0), "exp_avg": torch.zeros_like(p1), "exp_avg_sq": torch.zeros_like(p1)}
    for _ in range(3):
        g = torch.randn(2, 3, 4, generator=gen)
        stacked["w"].grad = g.clone()
        opt.step(1e-2)
        for i, (p, ref) in enumerate(refs):
            p.grad = g[i].clone()
            ref.step()
    for i, (p, _) in enumerate(refs):
        torch.testing.assert_close(stacked["w"][i], p.detach(), rtol=1e-6, atol=1e-7)


def test_the_workflow_trains_a_population_and_collects_from_it(tmp_path):
    """behavior -> behavior_front -> collect under Snakemake with method pgmorl (Hopper-v3: three
    objectives, 15 tasks), the dataset recording the population's method and hash."""
    from morl.data import file_sha256, load_dataset
    from morl.evaluate import read_evaluation

    cfg = yaml.safe_load((ROOT / "configs" / "smoke.yaml").read_text())
    cfg["envs"] = ["MO-Hopper-v3"]
    cfg["behavior"]["method"] = "pgmorl"
    cfg["behavior"]["pgmorl"] = dict(TINY, env_steps_per_task=3 * 2 * 64, delta_weight=0.25, num_tasks=15,
                                     pbuffer_num=20, sparsity=1e6)  # fmt: skip
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    data = Path(cfg["results_dir"]) / "MO-Hopper-v3" / "data" / "amateur-low.parquet"
    front = Path(cfg["results_dir"]) / "MO-Hopper-v3" / "behavior" / "front.parquet"
    res = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--cores", "1",
                          str(data), str(front), "--configfile", "c.yaml"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=900)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    policy = tmp_path / cfg["results_dir"] / "MO-Hopper-v3" / "behavior" / "policy.pt"
    st = torch.load(policy, weights_only=True)
    assert st["kind"] == pgmorl.KIND and st["settings"]["num_tasks"] == 15
    ds = load_dataset(tmp_path / data)
    assert ds.meta["behavior_method"] == "pgmorl" and ds.meta["behavior_sha256"] == file_sha256(policy)
    meta, _ = read_evaluation(tmp_path / front)
    assert meta["checkpoint_sha256"] == file_sha256(policy)
