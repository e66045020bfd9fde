"""MO-Gymnasium ids as `env`: clear errors without the extra, the same batched semantics with it."""

import sys

import numpy as np
import pytest

from morl.config import ConfigError, train_settings, validate_config
from morl.envs import BatchedEnv, MissingExtraError, get_spec, make_env
from morl.envs import tasks as env_tasks


def test_config_names_the_extra_to_install_when_mo_gymnasium_is_missing(config, monkeypatch):
    monkeypatch.setitem(sys.modules, "mo_gymnasium", None)  # what `import mo_gymnasium` sees without it
    env_tasks._external_spec.cache_clear()
    config["envs"] = ["MO-HalfCheetah-v2", "mo-halfcheetah-v5"]
    with pytest.raises(
        ConfigError,
        match=r"cfg.yaml: envs\[1\]: 'mo-halfcheetah-v5' is an MO-Gymnasium task.*"
        r"pip install 'morl\[mo-gymnasium\]'",
    ):
        validate_config(config, "cfg.yaml")
    with pytest.raises(MissingExtraError, match=r"install it with: pip install 'morl\[mo-gymnasium\]'"):
        get_spec("mo-hopper-v5")
    env_tasks._external_spec.cache_clear()


mo_gymnasium = pytest.importorskip("mo_gymnasium", reason="the mo-gymnasium extra is not installed")


def test_spec_of_an_mo_gymnasium_task_and_config_acceptance(config):
    spec = get_spec("mo-hopper-v5")
    assert (spec.obs_dim, spec.act_dim, spec.n_obj, spec.max_episode_steps) == (11, 3, 3, 1000)
    assert spec.act_low == (-1.0,) * 3 and len(spec.objectives) == 3
    config["envs"] = ["mo-halfcheetah-v5"]
    validate_config(config, "cfg.yaml")
    config["envs"] = ["mo-mountaincar-v0"]  # discrete actions: our agents emit continuous ones
    with pytest.raises(ConfigError, match=r"envs\[0\]: mo-mountaincar-v0: only continuous"):
        validate_config(config, "cfg.yaml")
    config["envs"] = ["mo-nonsense-v1"]
    with pytest.raises(ConfigError, match="unknown environment 'mo-nonsense-v1'"):
        validate_config(config, "cfg.yaml")


def test_env_follows_morl_conventions():
    env = make_env("mo-halfcheetah-v5")
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.shape == (17,)
    _, reward, term, trunc, info = env.step(np.full(6, 5.0))  # clipped to the bounds
    assert reward.dtype == np.float32 and reward.shape == (2,)
    np.testing.assert_array_equal(info["obj"], reward)
    # MO-Gymnasium's energy objective is -sum(a^2): -6 for the clipped action (-150 unclipped)
    assert reward[1] == pytest.approx(-6.0, rel=1e-5)


def test_worker_processes_are_stopped_and_errors_name_the_task():
    # Tasks outside D4MORL have no batched physics: their slots are split over worker processes.
    benv = BatchedEnv("mo-hopper-v5", 6, num_workers=3)
    procs = [p for p, _, _ in benv._workers]
    assert len(procs) == 2 and all(p.is_alive() for p in procs)  # the caller steps the first block
    benv.reset([0, 1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="non-negative"):
        benv.reset([0, 1, 2, 3, 4, -1])
    benv.step(np.zeros((6, 3)))
    benv.close()
    assert all(not p.is_alive() for p in procs)
    with pytest.raises(RuntimeError, match="closed"):
        benv.step(np.zeros((6, 3)))
    with BatchedEnv("mo-hopper-v5", 2, num_workers=8) as small:  # one block per slot
        assert small.num_workers == 2 and len(small._workers) == 1


@pytest.mark.parametrize("num_workers", [1, 2])
def test_batched_mo_gymnasium_task_matches_single_envs(num_workers):
    env_id, B = "mo-hopper-v5", 3
    seeds = [1, 2, 3, 4, 5]
    table = np.random.default_rng(0).uniform(-1, 1, size=(len(seeds), 1000, 3))
    per_episode = {}
    with BatchedEnv(env_id, B, num_workers=num_workers) as benv:
        obs = benv.reset(seeds[:B], next_seeds=seeds[B:])
        while not benv.done:
            ids, t, active = benv.episode_ids, benv.lengths, benv.active
            actions = np.zeros((B, 3))
            actions[active] = table[ids[active], t[active]]
            nxt, rew, term, trunc = benv.step(actions)
            final = benv.final_observations
            for slot in np.flatnonzero(active):
                per_episode.setdefault(int(ids[slot]), []).append((obs[slot], rew[slot], final[slot], term[slot]))
            obs = nxt
    assert sorted(per_episode) == list(range(len(seeds)))
    for k, seed in enumerate(seeds):
        env = make_env(env_id)
        o, _ = env.reset(seed=seed)
        steps = per_episode[k]
        for t, (bo, br, bn, bterm) in enumerate(steps):
            n, r, te, tr, _ = env.step(table[k, t])
            np.testing.assert_array_equal(bo, o)
            np.testing.assert_array_equal(br, r)
            np.testing.assert_array_equal(bn, n)
            assert bterm == te
            o = n
        assert te or tr  # the batched episode ended where the single one did


def test_every_stage_runs_on_an_mo_gymnasium_task(tmp_path, smoke_config):
    """behavior -> behavior front -> collect -> train -> evaluate on mo-hopper-v5 (3 objectives,
    1000-step episodes, its own termination), with tiny settings."""
    from morl.behavior import train_behavior
    from morl.collect import collect_dataset
    from morl.data import load_dataset
    from morl.evaluate import evaluate_behavior, evaluate_checkpoint, read_evaluation
    from morl.families import train

    env_id = "mo-hopper-v5"
    policy = tmp_path / "policy.pt"
    train_behavior(env_id, dict(smoke_config["behavior"], total_steps=300, start_steps=200), policy, progress=False)
    front = tmp_path / "front.parquet"
    summaries = evaluate_behavior(policy, front, divisions=2, episodes=1, seed=0, progress=False)
    assert set(summaries) == {"behavior", "zero", "random"}
    data = tmp_path / "data.parquet"
    collect_dataset(policy, "expert", "medium", 5, data, batch_size=2, seed=0, progress=False, workers=2)
    ds = load_dataset(data, expect_env=env_id)
    assert ds.n_trajectories == 5 and ds.obs_dim == 11 and ds.n_obj == 3
    assert ds.meta["max_episode_steps"] == 1000
    for model in ("dt-p", "rvs-p"):
        ckpt = tmp_path / model / "model.pt"
        hp = dict(train_settings(smoke_config, env_id, model), steps=10, checkpoint_every=0)
        train(data, model, 0, hp, ckpt, progress=False, expect_env=env_id)
        out = tmp_path / model / "eval.parquet"
        summary = evaluate_checkpoint(
            ckpt, data, out, divisions=2, episodes=1, seed=0, progress=False, expect_env=env_id
        )
        meta, arr = read_evaluation(out)
        assert meta["env_id"] == env_id and arr["return"].shape == (6, 3)  # 6 points for 3 objectives
        assert np.isfinite(summary["hv"])
