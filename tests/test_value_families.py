"""Tests for the value-based families (morl.families.td3bc, .iql, .cql and their shared morl.families.value)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

from morl import checkpoints, families, trainer
from morl.checkpoints import CheckpointError
from morl.data import Dataset, load_dataset, write_dataset
from morl.errors import InputError
from morl.families import family, family_of, iql, td3bc, value

TD3BC, IQL, CQL = family("td3bc"), family("iql"), family("cql")
OBS_DIM, ACT_DIM, N_OBJ = 3, 2, 2
ACT_LOW, ACT_HIGH = [-2.0, 0.0], [2.0, 4.0]
TINY = dict(steps=24, batch_size=16, hidden=16, depth=2, checkpoint_every=8)


def tiny(**extra) -> dict:
    return {**TINY, **extra}


def make_dataset(lengths=(3, 9, 1, 12, 6), seed=0) -> Dataset:
    """Multi-step trajectories with asymmetric action bounds; the first trajectory ends by termination,
    the second by timeout."""
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths)
    n = int(lengths.sum())
    obs = rng.normal(size=(n, OBS_DIM)).astype(np.float32)
    low, high = np.asarray(ACT_LOW, np.float32), np.asarray(ACT_HIGH, np.float32)
    actions = rng.uniform(low, high, size=(n, ACT_DIM)).astype(np.float32)
    rewards = rng.uniform(0, 3, size=(n, N_OBJ)).astype(np.float32)
    prefs = rng.dirichlet([1, 1], size=len(lengths)).astype(np.float32)
    ends = np.cumsum(lengths) - 1
    terminals, timeouts = np.zeros(n, bool), np.zeros(n, bool)
    terminals[ends[0]] = True
    timeouts[ends[1]] = True
    meta = {"env_id": "Toy-v0", "act_low": ACT_LOW, "act_high": ACT_HIGH, "max_episode_steps": 20}
    return Dataset.from_arrays(obs, actions, rewards, prefs, lengths, terminals=terminals, timeouts=timeouts,
                               meta=meta)  # fmt: skip


@pytest.fixture
def dataset_path(tmp_path):
    path = tmp_path / "toy.parquet"
    write_dataset(path, make_dataset())
    return path


def bandit_dataset(n=512, seed=0) -> Dataset:
    """One-step episodes: action a in [-1, 1], reward (1 + a, 1 - a), so w = (1, 0) is best served by
    a = +1 and w = (0, 1) by a = -1; the data's actions are uniform and unrelated to its preferences."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 1)).astype(np.float32)
    actions = rng.uniform(-1, 1, size=(n, 1)).astype(np.float32)
    rewards = np.hstack([1 + actions, 1 - actions]).astype(np.float32)
    prefs = rng.dirichlet([1, 1], size=n).astype(np.float32)
    meta = {"env_id": "Bandit-v0", "act_low": [-1.0], "act_high": [1.0], "max_episode_steps": 1}
    return Dataset.from_arrays(obs, actions, rewards, prefs, np.ones(n, int), terminals=np.ones(n, bool), meta=meta)


# ------------------------------------------------------------------------------ data and batches
def test_transitions_bootstrap_through_timeouts_but_not_terminations():
    ds = make_dataset()
    data = value.prepare_transitions(ds, reward_scale=0.5, act_low=ACT_LOW, act_high=ACT_HIGH)
    ends = ds.traj_starts + ds.traj_lengths - 1
    not_done = data.not_done.numpy()[:, 0]
    assert not_done[ends[0]] == 0.0  # terminal: no future return
    assert not_done[ends[1]] == 1.0 and ds.timeouts[ends[1]]  # timeout: bootstraps from next_observation
    assert not_done.sum() == ds.n_steps - 1
    np.testing.assert_allclose(data.rewards.numpy(), ds.rewards * 0.5)
    low, high = np.asarray(ACT_LOW), np.asarray(ACT_HIGH)
    np.testing.assert_allclose(data.actions.numpy(), (ds.actions - (high + low) / 2) / ((high - low) / 2), atol=1e-6)
    assert data.actions.abs().max() <= 1.0
    mean, std = data.obs_mean, data.obs_std
    np.testing.assert_allclose(data.next_states.numpy(), np.clip((ds.next_observations - mean) / std, -10, 10),
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    np.testing.assert_array_equal(data.preferences.numpy(), ds.preferences)


def test_relabelling_draws_simplex_points_deterministically():
    prefs = torch.tensor([[0.9, 0.1]]).repeat(1000, 1)

    def draw(fraction):
        gen = torch.Generator().manual_seed(3)
        return value.relabel_preferences(gen, prefs, fraction)

    out = draw(0.5)
    assert torch.equal(out, draw(0.5))
    assert torch.equal(out[500:], prefs[500:]) and not torch.equal(out[:500], prefs[:500])
    assert torch.all(out >= 0) and torch.allclose(out.sum(-1), torch.ones(1000))
    assert abs(out[:500, 0].mean().item() - 0.5) < 0.05  # uniform on the simplex: first coordinate ~ U(0, 1)
    assert abs(out[:500, 0].std().item() - (1 / 12) ** 0.5) < 0.03
    assert torch.equal(draw(0.0), prefs)


# ------------------------------------------------------------------------------ learning
@pytest.mark.parametrize("model", ["td3bc-p", "iql-p", "cql-p"])
def test_learns_the_best_action_of_each_preference(model, tmp_path):
    path = tmp_path / "bandit.parquet"
    write_dataset(path, bandit_dataset())
    settings = {
        "td3bc-p": dict(steps=500, actor_lr=1e-3, critic_lr=1e-3),
        "iql-p": dict(steps=500, actor_lr=1e-3, critic_lr=1e-3, value_lr=1e-3),
        "cql-p": dict(steps=500, policy_lr=1e-3, q_lr=1e-3, cql_alpha=1.0),
    }[model]
    settings.update(batch_size=64, hidden=32, depth=2, checkpoint_every=0)
    ckpt = tmp_path / f"{model}.pt"
    families.train(path, model, 0, settings, ckpt, device="cpu", progress=False)

    prefs = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    agent = families.load_agent(ckpt)
    agent.reset(prefs, np.zeros_like(prefs))
    a = agent.act(np.zeros((2, 1), np.float32))[:, 0]
    assert a[0] > 0.1 and a[1] < -0.1, f"{model} acts {a} for preferences {prefs.tolist()}"

    if model != "cql-p":  # the vector critic ranks actions by w . Q
        critic = {"td3bc-p": td3bc, "iql-p": iql}[model].load_critics(ckpt)["critic"]
        actions = torch.linspace(-1, 1, 5)[:, None]
        for w, increasing in (([1.0, 0.0], True), ([0.0, 1.0], False)):
            wt = torch.tensor([w]).repeat(5, 1)
            with torch.no_grad():
                scalar = (critic(torch.zeros(5, 1), actions, wt)[0] * wt).sum(-1)
            steps = scalar.diff() if increasing else -scalar.diff()
            assert torch.all(steps > 0), f"w . Q for w={w}: {scalar.tolist()}"


# ------------------------------------------------------------------------------ checkpoints and resume
class Killed(Exception):
    pass


def kill_after_partial_saves(monkeypatch, n_saves):
    real = trainer.save_partial
    calls = {"n": 0}

    def save_then_die(path, state):
        real(path, state)
        calls["n"] += 1
        if calls["n"] == n_saves:
            raise Killed(f"killed after step {state['step']}")

    monkeypatch.setattr(trainer, "save_partial", save_then_die)


@pytest.mark.parametrize("model", ["td3bc-p", "iql-p", "cql"])
def test_killed_and_rerun_equals_uninterrupted(model, dataset_path, tmp_path, monkeypatch):
    settings = tiny(policy_freq=3) if model == "td3bc-p" else tiny()

    def run(stem):
        return families.train(dataset_path, model, 5, settings, tmp_path / f"{stem}.pt", tmp_path / f"{stem}.csv",
                         device="cpu", progress=False)  # fmt: skip

    straight = run("straight")
    with monkeypatch.context() as m:
        kill_after_partial_saves(m, 2)  # dies after step 16
        with pytest.raises(Killed, match="after step 16"):
            run("resumed")
    assert (tmp_path / "resumed.pt.partial").exists() and not (tmp_path / "resumed.pt").exists()
    resumed = run("resumed")

    assert resumed["resumed_from"] == 16 and resumed["steps"] == 24 and straight["resumed_from"] == 0
    assert not (tmp_path / "resumed.pt.partial").exists()
    assert (tmp_path / "straight.pt").read_bytes() == (tmp_path / "resumed.pt").read_bytes()
    assert (tmp_path / "straight.csv").read_text() == (tmp_path / "resumed.csv").read_text()
    assert resumed["final_loss"] == straight["final_loss"]


def test_partial_state_of_another_run_is_not_resumed(dataset_path, tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        kill_after_partial_saves(m, 1)
        with pytest.raises(Killed):
            families.train(dataset_path, "td3bc-p", 5, tiny(alpha=1.0), tmp_path / "x.pt", device="cpu",
                        progress=False)  # fmt: skip
    summary = families.train(dataset_path, "td3bc-p", 5, TINY, tmp_path / "x.pt", device="cpu", progress=False)
    assert summary["resumed_from"] == 0
    families.train(dataset_path, "td3bc-p", 5, TINY, tmp_path / "ref.pt", device="cpu", progress=False)
    assert (tmp_path / "x.pt").read_bytes() == (tmp_path / "ref.pt").read_bytes()


@pytest.mark.parametrize("model", ["td3bc-p", "iql-p", "cql-p"])
def test_same_seed_same_bytes_and_the_agent_acts_within_bounds(model, dataset_path, tmp_path):
    settings = tiny(steps=10, checkpoint_every=0)
    before = torch.get_rng_state()
    for name, seed in (("a.pt", 1), ("b.pt", 1), ("c.pt", 2)):
        summary = families.train(dataset_path, model, seed, settings, tmp_path / name, tmp_path / f"{name}.csv",
                            device="cpu", progress=False)  # fmt: skip
    assert torch.equal(torch.get_rng_state(), before)  # the caller's generator is left alone
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    assert (tmp_path / "a.pt").read_bytes() != (tmp_path / "c.pt").read_bytes()
    assert set(summary) == {"final_loss", "steps", "resumed_from", "samples_per_s", "steps_per_s", "seconds",
                            "device", "checkpoint"}  # fmt: skip
    with open(tmp_path / "a.pt.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0][:3] == ["step", "loss", "lr"] and [int(r[0]) for r in rows[1:]] == list(range(1, 11))

    ckpt = torch.load(tmp_path / "a.pt", weights_only=True)
    for key in (*checkpoints.CHECKPOINT_KEYS, *value.CHECKPOINT_KEYS):
        assert key in ckpt
    fam = family_of(model)
    assert ckpt["format"] == fam.checkpoint_format and ckpt["model_name"] == model and ckpt["family"] == fam.name
    assert ckpt["display_name"] == fam.display(model) and ckpt["settings"] == fam.resolve_settings(settings)
    assert "returns_to_go" not in ckpt  # PEDA's definition, not a value-based family's
    assert ckpt["dataset_sha256"] and ckpt["statistics_from"] == "dataset" and ckpt["reference_dataset"] is None

    agent = families.load_agent(tmp_path / "a.pt")
    assert (agent.model_name, agent.seed, agent.n_obj, agent.obs_dim, agent.act_dim) == (model, 1, 2, 3, 2)
    assert agent.training["statistics_from"] == "dataset" and "returns_to_go" not in agent.training
    assert agent.training["env_id"] == "Toy-v0"
    rng = np.random.default_rng(0)
    prefs = rng.dirichlet([1, 1], size=7).astype(np.float32)
    agent.reset(prefs, np.zeros_like(prefs))
    obs = 50 * rng.normal(size=(7, OBS_DIM)).astype(np.float32)  # far outside the data: clipped states
    for _ in range(3):
        actions = agent.act(obs)
        assert actions.shape == (7, ACT_DIM) and actions.dtype == np.float32
        assert np.all(actions >= ACT_LOW) and np.all(actions <= ACT_HIGH)
        agent.observe(actions, np.ones((7, N_OBJ)))
    np.testing.assert_array_equal(agent.act(obs), actions)  # deterministic, stateless
    with pytest.raises(RuntimeError, match="twice"):
        agent.act(obs)
    with pytest.raises(ValueError, match="target_returns"):
        agent.reset(prefs, np.zeros((7, 3)))


def test_statistics_from_expert_high_and_the_definitions_check(dataset_path, tmp_path):
    ds = load_dataset(dataset_path)
    reference = tmp_path / "expert-high.parquet"
    shifted = Dataset.from_arrays(ds.observations + 4.0, ds.actions, ds.rewards, ds.traj_preferences, ds.traj_lengths,
                                  meta={**ds.meta, "quality": "expert", "entropy": "high"})  # fmt: skip
    write_dataset(reference, shifted)
    settings = tiny(steps=4, checkpoint_every=0, statistics_from="expert-high")
    families.train(dataset_path, "iql-p", 0, settings, tmp_path / "m.pt", device="cpu", progress=False,
              reference_dataset=reference)  # fmt: skip
    ckpt = torch.load(tmp_path / "m.pt", weights_only=True)
    np.testing.assert_allclose(ckpt["obs_mean"].numpy(), ds.observations.mean(0) + 4.0, rtol=1e-5)
    assert ckpt["reference_dataset_sha256"] is not None

    agent = checkpoints.load_agent(
        IQL, tmp_path / "m.pt", definitions={"statistics_from": "expert-high", "returns_to_go": "peda"}
    )
    assert agent.training["statistics_from"] == "expert-high"
    with pytest.raises(CheckpointError, match="statistics_from: expert-high.*statistics_from: dataset") as info:
        checkpoints.load_agent(IQL, tmp_path / "m.pt", definitions={"statistics_from": "dataset"})
    assert str(tmp_path / "m.pt") in str(info.value)
    with pytest.raises(InputError, match="reference dataset"):
        families.train(dataset_path, "iql-p", 0, settings, tmp_path / "n.pt", device="cpu", progress=False)


def test_foreign_partial_and_missing_checkpoints_are_refused(dataset_path, tmp_path, monkeypatch):
    peda = tmp_path / "peda.pt"
    families.train(dataset_path, "bc", 0, dict(steps=2, batch_size=4, hidden=8, depth=1, context_length=2,
               eval_context_length=2, statistics_from="dataset"), peda, device="cpu", progress=False)  # fmt: skip
    with pytest.raises(CheckpointError, match="not a td3bc agent checkpoint") as info:
        checkpoints.load_agent(TD3BC, peda)
    assert str(peda) in str(info.value)

    families.train(dataset_path, "iql-p", 0, tiny(steps=2, checkpoint_every=0), tmp_path / "iql.pt",
              device="cpu", progress=False)  # fmt: skip
    with pytest.raises(CheckpointError, match="not a cql agent checkpoint"):
        checkpoints.load_agent(CQL, tmp_path / "iql.pt")

    with monkeypatch.context() as m:
        kill_after_partial_saves(m, 1)
        with pytest.raises(Killed):
            families.train(dataset_path, "cql-p", 0, TINY, tmp_path / "c.pt", device="cpu", progress=False)
    partial = tmp_path / "c.pt.partial"
    with pytest.raises(CheckpointError, match="partial training state") as info:
        checkpoints.load_agent(CQL, partial)
    assert str(partial) in str(info.value)

    with pytest.raises(CheckpointError, match="does not exist") as info:
        checkpoints.load_agent(TD3BC, tmp_path / "nothing.pt")
    assert str(tmp_path / "nothing.pt") in str(info.value)

    ckpt = torch.load(tmp_path / "iql.pt", weights_only=True)
    del ckpt["obs_std"]
    torch.save(ckpt, tmp_path / "broken.pt")
    with pytest.raises(CheckpointError, match="lacks key.*obs_std"):
        checkpoints.load_agent(IQL, tmp_path / "broken.pt")


@pytest.mark.parametrize(
    "fam, values, match",
    [
        (TD3BC, {"learning_rate": 1e-3}, r"unknown setting 'learning_rate' of train\.td3bc; known: steps"),
        (IQL, {"steps": True}, "'steps' of train.iql.*integer"),
        (IQL, {"steps": 2.5}, "'steps' of train.iql.*integer"),
        (CQL, {"cql_n_actions": 0}, "'cql_n_actions' of train.cql must be >= 1"),
        (TD3BC, {"relabel": 1.5}, r"'relabel' .* in \[0, 1\]"),
        (IQL, {"expectile": 1.0}, r"'expectile' .* in \(0, 1\)"),
        (CQL, {"statistics_from": "reference"}, "'statistics_from' .* one of"),
        (CQL, {"relabel": 0.5}, "unknown setting 'relabel' of train.cql"),
        (TD3BC, {"discount": "0.9"}, "'discount' .* finite number"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(fam, values, match):
    with pytest.raises(InputError, match=match):
        fam.resolve_settings(values)


def test_settings_defaults_are_the_papers():
    t = TD3BC.resolve_settings(None)
    assert (t["actor_lr"], t["critic_lr"], t["policy_noise"], t["noise_clip"], t["policy_freq"], t["alpha"]) == (
        3e-4, 3e-4, 0.2, 0.5, 2, 2.5)  # fmt: skip
    i = IQL.resolve_settings({"steps": 10})
    assert (i["steps"], i["expectile"], i["temperature"], i["adv_clip"], i["actor_lr"]) == (10, 0.7, 3.0, 100.0, 3e-4)
    c = CQL.resolve_settings({"steps": 1e3})
    assert c["steps"] == 1000 and isinstance(c["steps"], int) and c["cql_n_actions"] == 10
    for s in (t, i, c):
        assert (s["discount"], s["tau"], s["reward_scale"], s["batch_size"], s["statistics_from"]) == (
            0.99, 0.005, 1.0, 256, "dataset")  # fmt: skip


def test_bad_model_and_seed_are_refused(dataset_path, tmp_path):
    with pytest.raises(InputError, match="unknown model 'cql' for the td3bc family"):
        trainer.train(TD3BC, dataset_path, "cql", 0, TINY, tmp_path / "m.pt", device="cpu", progress=False)
    with pytest.raises(InputError, match="seed"):
        families.train(dataset_path, "cql", -1, TINY, tmp_path / "m.pt", device="cpu", progress=False)
