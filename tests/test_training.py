"""Tests for the training loop (morl.training): data preparation, batches, checkpoints, resume."""

from __future__ import annotations

import csv
import hashlib

import numpy as np
import pytest
import torch

import morl.training as training
from morl.agents import CHECKPOINT_KEYS
from morl.data import Dataset, write_dataset
from morl.training import (
    gather_batch,
    observation_stats,
    prepare_tensors,
    returns_to_go,
    sample_indices,
    train,
)

OBS_DIM, ACT_DIM, N_OBJ = 3, 2, 2
HP = dict(
    steps=40,
    batch_size=16,
    lr=1e-3,
    warmup_steps=8,
    return_scale=0.01,
    hidden=32,
    depth=2,
    embed_dim=16,
    n_layer=1,
    n_head=1,
    dropout=0.1,
    context_length=5,
    eval_context_length=3,
    checkpoint_every=10,
)



def make_dataset(lengths=(3, 9, 1, 12, 6), seed=0, meta=None, actions_scale=0.9):
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths)
    n = int(lengths.sum())
    obs = rng.normal(size=(n, OBS_DIM)).astype(np.float32)
    obs[:, 2] = 5.0  # a constant dimension
    actions = (actions_scale * np.tanh(obs[:, :ACT_DIM])).astype(np.float32)
    rewards = rng.uniform(0, 3, size=(n, N_OBJ)).astype(np.float32)
    prefs = rng.dirichlet([1, 1], size=len(lengths)).astype(np.float32)
    base = {"env_id": "Toy-v0", "act_low": [-1.0, -1.0], "act_high": [1.0, 1.0], "max_episode_steps": 20}
    return Dataset.from_arrays(obs, actions, rewards, prefs, lengths, meta={**base, **(meta or {})})


@pytest.fixture
def dataset_path(tmp_path):
    path = tmp_path / "toy.parquet"
    write_dataset(path, make_dataset())
    return path


# ------------------------------------------------------------------------------ data preparation
def test_returns_to_go_sums_future_rewards_within_each_trajectory():
    ds = make_dataset()
    rtg = returns_to_go(ds.rewards, ds.traj_starts, ds.traj_lengths)
    for start, length in zip(ds.traj_starts, ds.traj_lengths):
        for t in range(length):
            expected = ds.rewards[start + t : start + length].astype(np.float64).sum(0)
            np.testing.assert_allclose(rtg[start + t], expected, rtol=1e-12)
    np.testing.assert_allclose(rtg[ds.traj_starts], ds.traj_returns, rtol=1e-12)


def test_prepare_tensors_normalises_states_and_scales_weighted_returns():
    ds = make_dataset()
    mean, std = observation_stats(ds.observations)
    assert std[2] == 1.0  # constant dimension is not blown up
    np.testing.assert_allclose(std[:2], ds.observations[:, :2].std(0), rtol=1e-5)
    data = prepare_tensors(ds, return_scale=0.01)
    np.testing.assert_allclose(data.states.numpy().mean(0)[:2], 0, atol=1e-5)
    np.testing.assert_allclose(data.states.numpy()[:, 2], 0)
    rtg = returns_to_go(ds.rewards, ds.traj_starts, ds.traj_lengths)
    np.testing.assert_allclose(data.returns_to_go.numpy(), ds.preferences * rtg * 0.01, rtol=1e-6)
    np.testing.assert_array_equal(data.timesteps.numpy(), ds.steps)


def test_windows_end_at_the_sampled_step_with_masked_left_padding():
    ds = make_dataset(lengths=(3, 9))
    data = prepare_tensors(ds, return_scale=1.0)
    end = torch.tensor([1, 3 + 7, 3])  # step 1 of traj 0, step 7 of traj 1, step 0 of traj 1
    b = gather_batch(data, end, context_length=5)
    assert b["states"].shape == (3, 5, OBS_DIM)
    np.testing.assert_array_equal(
        b["mask"].numpy(),
        [[0, 0, 0, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]],
    )
    np.testing.assert_array_equal(b["timesteps"].numpy(), [[0, 0, 0, 0, 1], [3, 4, 5, 6, 7], [0, 0, 0, 0, 0]])
    torch.testing.assert_close(b["states"][1], data.states[6:11])
    torch.testing.assert_close(b["actions"][0, 3:], data.actions[0:2])
    torch.testing.assert_close(b["returns_to_go"][2, 4], data.returns_to_go[3])
    for key in ("states", "actions", "preferences", "returns_to_go"):
        assert torch.all(b[key][~b["mask"]] == 0), key  # padding is zero, not data of the previous trajectory
    single = gather_batch(data, end, context_length=None)
    torch.testing.assert_close(single["states"], data.states[end])
    assert single["mask"] is None


def test_trajectories_are_drawn_in_proportion_to_their_length():
    ds = make_dataset(lengths=(10, 40, 150))
    gen = torch.Generator().manual_seed(0)
    idx = torch.cat([sample_indices(gen, ds.n_steps, 1000) for _ in range(30)]).numpy()
    counts = np.bincount(ds.traj_ids[idx], minlength=3) / len(idx)
    np.testing.assert_allclose(counts, [0.05, 0.2, 0.75], atol=0.01)
    gen2 = torch.Generator().manual_seed(0)
    np.testing.assert_array_equal(sample_indices(gen2, ds.n_steps, 1000).numpy(), idx[:1000])


# ------------------------------------------------------------------------------ train()
def test_checkpoint_contents_and_curve(dataset_path, tmp_path):
    ckpt_path, curve_path = tmp_path / "out" / "dt.pt", tmp_path / "out" / "curve.csv"
    summary = train(dataset_path, "dt-p", 7, HP, ckpt_path, curve_path, device="cpu", progress=False)
    assert summary["steps"] == 40 and summary["device"] == "cpu" and summary["resumed_from"] == 0
    assert summary["samples_per_s"] > 0 and np.isfinite(summary["final_loss"])
    assert not (tmp_path / "out" / "dt.pt.partial").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["curve.csv", "dt.pt"]  # no temp files

    ckpt = torch.load(ckpt_path, weights_only=True)
    assert set(CHECKPOINT_KEYS) <= set(ckpt)
    assert ckpt["model_name"] == "dt-p" and ckpt["display_name"] == "MODT(P)"
    assert (ckpt["obs_dim"], ckpt["act_dim"], ckpt["n_obj"]) == (OBS_DIM, ACT_DIM, N_OBJ)
    assert ckpt["hp"]["context_length"] == 5 and ckpt["hp"]["eval_context_length"] == 3
    assert ckpt["hp"]["n_head"] == 1 and ckpt["hp"]["grad_clip"] == 0.25  # filled default
    assert ckpt["return_scale"] == 0.01 and ckpt["max_episode_steps"] == 20
    assert ckpt["act_low"] == [-1.0, -1.0] and ckpt["act_high"] == [1.0, 1.0]
    assert ckpt["dataset_sha256"] == hashlib.sha256(dataset_path.read_bytes()).hexdigest()
    assert ckpt["dataset_path"] == str(dataset_path.resolve())
    assert ckpt["env_id"] == "Toy-v0" and ckpt["seed"] == 7 and ckpt["steps"] == 40
    assert ckpt["morl_version"] and ckpt["dataset_meta"]["max_episode_steps"] == 20
    ds = make_dataset()
    mean, std = observation_stats(ds.observations)
    np.testing.assert_array_equal(ckpt["obs_mean"].numpy(), mean)
    np.testing.assert_array_equal(ckpt["obs_std"].numpy(), std)
    assert all(v.device.type == "cpu" for v in ckpt["state_dict"].values())
    assert ckpt["state_dict"]["embed_timestep.weight"].shape[0] == 20

    with open(curve_path) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["step", "loss", "lr"]
    steps = [int(r["step"]) for r in rows]
    lrs = [float(r["lr"]) for r in rows]
    assert steps == list(range(1, 41))  # curve_interval(40) == 1
    # linear warm-up over 8 steps, then constant
    np.testing.assert_allclose(lrs[:8], [1e-3 * (s + 1) / 8 for s in range(8)])
    np.testing.assert_allclose(lrs[8:], 1e-3)
    assert float(rows[-1]["loss"]) == pytest.approx(summary["final_loss"])


def test_training_is_seeded_and_leaves_global_rng_alone(dataset_path, tmp_path):
    hp = dict(HP, checkpoint_every=0)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    train(dataset_path, "rvs-p", 1, hp, tmp_path / "a.pt", device="cpu", progress=False)
    assert torch.equal(torch.get_rng_state(), before)
    train(dataset_path, "rvs-p", 1, hp, tmp_path / "b.pt", device="cpu", progress=False)
    train(dataset_path, "rvs-p", 2, hp, tmp_path / "c.pt", device="cpu", progress=False)
    a, b, c = (torch.load(tmp_path / f"{x}.pt", weights_only=True)["state_dict"] for x in "abc")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


class Killed(Exception):
    pass


def kill_after_partial_saves(monkeypatch, n_saves):
    """Make train() die right after its n-th partial save, as a killed job would."""
    real = training._save_partial
    calls = {"n": 0}

    def save_then_die(path, state):
        real(path, state)
        calls["n"] += 1
        if calls["n"] == n_saves:
            raise Killed(f"killed after step {state['step']}")

    monkeypatch.setattr(training, "_save_partial", save_then_die)


@pytest.mark.parametrize("name", ["dt", "rvs-p", "bc"])
def test_killed_and_rerun_equals_uninterrupted(name, dataset_path, tmp_path, monkeypatch):
    hp = dict(HP, steps=50, checkpoint_every=10)  # curve rows every step; dropout on
    def run(stem):
        return train(dataset_path, name, 5, hp, tmp_path / f"{stem}.pt", tmp_path / f"{stem}.csv", device="cpu", progress=False)

    straight = run("straight")

    with monkeypatch.context() as m:
        kill_after_partial_saves(m, 2)  # dies after step 20
        with pytest.raises(Killed, match="after step 20"):
            run("resumed")
    assert (tmp_path / "resumed.pt.partial").exists() and not (tmp_path / "resumed.pt").exists()
    resumed = run("resumed")

    assert resumed["resumed_from"] == 20 and resumed["steps"] == 50
    assert not (tmp_path / "resumed.pt.partial").exists()
    a = torch.load(tmp_path / "straight.pt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "resumed.pt", weights_only=True)["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "straight.csv").read_text() == (tmp_path / "resumed.csv").read_text()
    assert resumed["final_loss"] == straight["final_loss"]


def test_partial_state_from_another_run_is_ignored(dataset_path, tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        kill_after_partial_saves(m, 1)
        with pytest.raises(Killed):
            train(dataset_path, "bc-p", 5, dict(HP, lr=5e-3), tmp_path / "x.pt", device="cpu", progress=False)
    summary = train(dataset_path, "bc-p", 5, HP, tmp_path / "x.pt", device="cpu", progress=False)
    assert summary["resumed_from"] == 0
    train(dataset_path, "bc-p", 5, HP, tmp_path / "ref.pt", device="cpu", progress=False)
    a = torch.load(tmp_path / "x.pt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "ref.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)

    (tmp_path / "y.pt.partial").write_bytes(b"garbage")  # unreadable partial: start afresh
    assert train(dataset_path, "bc-p", 5, HP, tmp_path / "y.pt", device="cpu", progress=False)["resumed_from"] == 0


def test_progress_bar_goes_to_stderr(dataset_path, tmp_path, capsys):
    train(dataset_path, "bc", 0, dict(HP, steps=5), tmp_path / "m.pt", device="cpu", progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "5/5" in err and "BC" in err


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(model_name="cql"), "unknown model"),
        (dict(hp=dict(HP, learning_rate=1.0)), "unknown hyperparameter"),
        (dict(seed=-1), "seed"),
        (dict(device="cuda:0"), "CUDA is not available"),
    ],
)
def test_bad_arguments(kwargs, match, dataset_path, tmp_path):
    if "cuda" in str(kwargs.get("device", "")) and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    args = dict(dataset_path=dataset_path, model_name="bc", seed=0, hp=HP, checkpoint_path=tmp_path / "m.pt")
    args.update(device="cpu", progress=False)
    with pytest.raises(ValueError, match=match):
        train(**{**args, **kwargs})
    assert not (tmp_path / "m.pt").exists()


@pytest.mark.parametrize(
    "ds, match",
    [
        (make_dataset(actions_scale=1.5), "outside the action bounds"),
        (make_dataset(meta={"max_episode_steps": 10}), "more than max_episode_steps=10"),
        (make_dataset(meta={"act_low": [-1.0], "act_high": [1.0]}), "action bounds have 1 entries"),
    ],
)
def test_bad_datasets_are_named(ds, match, tmp_path):
    path = tmp_path / "bad.parquet"
    write_dataset(path, ds)
    with pytest.raises(ValueError, match=match) as info:
        train(path, "bc", 0, HP, tmp_path / "m.pt", device="cpu", progress=False)
    assert str(path) in str(info.value)


def test_missing_action_bounds_and_unknown_env(tmp_path):
    ds = make_dataset()
    meta = {k: v for k, v in ds.meta.items() if k not in ("act_low", "act_high")}
    ds = Dataset.from_arrays(ds.observations, ds.actions, ds.rewards, ds.traj_preferences, ds.traj_lengths, meta=meta)
    path = tmp_path / "nobounds.parquet"
    write_dataset(path, ds)
    with pytest.raises(ValueError, match="action bounds of env id 'Toy-v0' are unknown") as info:
        train(path, "bc", 0, HP, tmp_path / "m.pt", device="cpu", progress=False)
    assert str(path) in str(info.value)
    with pytest.raises(ValueError, match="does not exist"):
        train(tmp_path / "absent.parquet", "bc", 0, HP, tmp_path / "m.pt", device="cpu", progress=False)
