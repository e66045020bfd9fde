"""Tests for the training core (morl.trainer) with PEDA's family: data preparation, batches, checkpoints, resume."""

from __future__ import annotations

import csv
import hashlib

import numpy as np
import pytest
import torch

import morl.trainer as training
from morl import curves
from morl.checkpoints import CHECKPOINT_KEYS
from morl.data import Dataset, write_dataset
from morl.errors import InputError
from morl.families import family, load_agent, peda, train
from morl.families.peda import action_loss, batch_loss, gather_batch, prepare_tensors, returns_to_go, sample_indices
from morl.families.peda_networks import ActionHead, build_model
from morl.normalisation import observation_stats


def full(settings: dict) -> dict:
    """PEDA's settings with its defaults filled in, as the training core hands them to the networks."""
    return family("peda").resolve_settings(settings)


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
    statistics_from="dataset",  # the toy datasets have no expert-high sibling
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
    data = prepare_tensors(ds, return_scale=0.01, rtg_definition="weighted")
    np.testing.assert_allclose(data.states.numpy().mean(0)[:2], 0, atol=1e-5)
    np.testing.assert_allclose(data.states.numpy()[:, 2], 0)
    rtg = returns_to_go(ds.rewards, ds.traj_starts, ds.traj_lengths)
    np.testing.assert_allclose(data.returns_to_go.numpy(), ds.preferences * rtg * 0.01, rtol=1e-6)
    np.testing.assert_array_equal(data.timesteps.numpy(), ds.steps)
    assert data.rewards is None


def test_normalised_states_are_clipped_to_ten():
    ds = make_dataset()
    mean, std = np.zeros(OBS_DIM, np.float32), np.full(OBS_DIM, 0.1, np.float32)  # e.g. a reference's
    data = prepare_tensors(ds, return_scale=1.0, stats=(mean, std))
    np.testing.assert_array_equal(data.obs_mean, mean)
    assert data.states.abs().max() == 10.0 and (data.states == 10.0).any() and (data.states == -10.0).any()
    np.testing.assert_allclose(data.states.numpy(), np.clip(ds.observations / 0.1, -10, 10), rtol=1e-6)


def test_actions_are_clipped_and_scaled_to_unit_range():
    ds = make_dataset(lengths=(2,))
    ds.actions[:] = [[1.0, -3.0], [5.0, 0.5]]  # bounds [-2, 2] and [-4, 4]: 5.0 is clipped to 2
    data = prepare_tensors(ds, return_scale=1.0, act_low=[-2.0, -4.0], act_high=[2.0, 4.0])
    np.testing.assert_allclose(data.actions.numpy(), [[0.5, -0.75], [1.0, 0.125]])


def test_loss_is_in_unit_action_units():
    """A network predicting 1.0 in the bounds [-2, 2] where the data has 0: the loss is
    (1/2)^2 = 0.25 in the tanh's units, not 1.0 in raw action units."""

    class Constant(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.action_head = ActionHead(1, [-2.0], [2.0])

        def forward(self, states, *rest):
            return torch.ones(states.shape[0], 1)

    ds = Dataset.from_arrays(np.zeros((3, 1)), np.zeros((3, 1)), np.zeros((3, 2)), [[0.5, 0.5]], [3])
    data = prepare_tensors(ds, return_scale=1.0, act_low=[-2.0], act_high=[2.0])
    batch = gather_batch(data, torch.tensor([0, 1, 2]), None)
    assert batch_loss(Constant(), batch).item() == pytest.approx(0.25)


def test_bc_is_trained_on_the_window_s_last_action():
    actions = torch.tensor([[[0.0], [0.5], [1.0]], [[0.0], [0.0], [-1.0]]])  # (B=2, K=3, 1)
    batch = {"actions": actions, "mask": torch.ones(2, 3, dtype=torch.bool)}
    # one prediction per window: against the last action only, (0.5 - 1)^2 and (0 + 1)^2
    assert action_loss(torch.tensor([[0.5], [0.0]]), batch).item() == pytest.approx((0.25 + 1.0) / 2)
    # per-step predictions (MODT): every unpadded step
    batch["mask"] = torch.tensor([[False, True, True], [True, True, True]])
    assert action_loss(torch.zeros(2, 3, 1), batch).item() == pytest.approx((0.25 + 1 + 1) / 5)


def test_bc_stacks_the_last_context_length_states():
    hp = dict(HP, context_length=4)
    bc = build_model("bc", OBS_DIM, ACT_DIM, N_OBJ, full(hp))
    bcp = build_model("bc-p", OBS_DIM, ACT_DIM, N_OBJ, full(hp))
    assert bc.trunk[0].in_features == 4 * OBS_DIM and bcp.trunk[0].in_features == 4 * (OBS_DIM + N_OBJ)
    ds = make_dataset(lengths=(9,))
    batch = gather_batch(prepare_tensors(ds, return_scale=1.0), torch.tensor([2, 7]), 4)
    assert batch["states"].shape == (2, 4, OBS_DIM)
    assert bc.eval()(batch["states"], None, batch["preferences"], None, None, batch["mask"]).shape == (2, ACT_DIM)
    with pytest.raises(ValueError, match="windows of 4 steps"):
        bc(batch["states"][:, 1:], None, None, None, None)


def test_windows_start_at_the_sampled_step_and_are_left_padded_at_the_episode_end():
    ds = make_dataset(lengths=(3, 9))
    data = prepare_tensors(ds, return_scale=1.0, rtg_definition="weighted")
    start = torch.tensor([1, 3 + 2, 3 + 7, 0])  # traj 0 step 1, traj 1 steps 2 and 7, traj 0 step 0
    b = gather_batch(data, start, context_length=5)
    assert b["states"].shape == (4, 5, OBS_DIM)
    np.testing.assert_array_equal(
        b["mask"].numpy(),
        [[0, 0, 0, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 1, 1], [0, 0, 1, 1, 1]],
    )
    np.testing.assert_array_equal(
        b["timesteps"].numpy(), [[0, 0, 0, 1, 2], [2, 3, 4, 5, 6], [0, 0, 0, 7, 8], [0, 0, 0, 1, 2]]
    )
    torch.testing.assert_close(b["states"][1], data.states[5:10])
    torch.testing.assert_close(b["actions"][0, 3:], data.actions[1:3])
    torch.testing.assert_close(b["returns_to_go"][2, 3:], data.returns_to_go[10:12])
    for key in ("states", "actions", "preferences", "returns_to_go"):
        assert torch.all(b[key][~b["mask"]] == 0), key  # padding is zero, not data of another trajectory
    single = gather_batch(data, start, context_length=None)
    torch.testing.assert_close(single["states"], data.states[start])
    assert single["mask"] is None


def hand_dataset(max_episode_steps):
    """One trajectory of 4 steps, rewards (1, 10), (2, 20), (3, 30), (4, 40), w = (0.25, 0.75)."""
    rewards = np.array([[1, 10], [2, 20], [3, 30], [4, 40]], np.float32)
    meta = {"max_episode_steps": max_episode_steps}
    return Dataset.from_arrays(np.zeros((4, 1)), np.zeros((4, 1)), rewards, [[0.25, 0.75]], [4], meta=meta)


def test_peda_returns_to_go_modt_sums_raw_rewards_to_the_window_end():
    ds = hand_dataset(4)
    data = prepare_tensors(ds, return_scale=0.1, rtg_definition="peda", max_episode_steps=4)
    b = gather_batch(data, torch.tensor([1, 3]), context_length=2)
    # window [1, 3): 0.1 * ((2 + 3, 20 + 30), (3, 30)); window [3, 4): padding, then 0.1 * (4, 40)
    np.testing.assert_allclose(b["returns_to_go"].numpy(), [[[0.5, 5], [0.3, 3]], [[0, 0], [0.4, 4]]], rtol=1e-6)


def test_weighted_returns_to_go_modt_is_w_times_the_rest_of_the_episode():
    ds = hand_dataset(4)
    data = prepare_tensors(ds, return_scale=0.1, rtg_definition="weighted", max_episode_steps=4)
    b = gather_batch(data, torch.tensor([1]), context_length=2)
    # rest of the episode from step 1: (9, 90), from step 2: (7, 70); times w and 0.1
    np.testing.assert_allclose(b["returns_to_go"][0].numpy(), [[0.225, 6.75], [0.175, 5.25]], rtol=1e-6)


@pytest.mark.parametrize("definition, expected", [("peda", [3.0, 30.0]), ("weighted", [0.25 * 9 / 9, 0.75 * 90 / 9])])
def test_morvs_conditioning_under_each_definition(definition, expected):
    """MORvS from step 1 of a 4-step trajectory, with an episode cap T = 10: ``peda`` gives the
    unweighted mean reward over the 3 remaining steps, (9, 90) / 3; ``weighted`` gives
    w * (9, 90) spread over the T - t = 9 steps the cap leaves."""
    ds = hand_dataset(10)
    data = prepare_tensors(ds, return_scale=1.0, rtg_definition=definition, max_episode_steps=10)
    b = gather_batch(data, torch.tensor([1]), context_length=None)
    rvs = build_model("rvs", 1, 1, 2, full({}), max_episode_steps=10)
    seen = rvs.average_return_to_go(b["returns_to_go"], b["timesteps"])[0].numpy()
    np.testing.assert_allclose(seen, expected, rtol=1e-6)


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
    assert set(CHECKPOINT_KEYS) | set(peda.CHECKPOINT_KEYS) <= set(ckpt)
    assert ckpt["model_name"] == "dt-p" and ckpt["display_name"] == "MODT(P)"
    assert (ckpt["obs_dim"], ckpt["act_dim"], ckpt["n_obj"]) == (OBS_DIM, ACT_DIM, N_OBJ)
    assert ckpt["settings"]["context_length"] == 5 and ckpt["settings"]["eval_context_length"] == 3
    assert ckpt["settings"]["n_head"] == 1 and ckpt["settings"]["grad_clip"] == 0.25  # filled default
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
    assert list(rows[0])[:3] == ["step", "loss", "lr"]  # then the run it names (below)
    steps = [int(r["step"]) for r in rows]
    lrs = [float(r["lr"]) for r in rows]
    assert steps == list(range(1, 41))  # curve_interval(40) == 1
    # linear warm-up over 8 steps, then constant
    np.testing.assert_allclose(lrs[:8], [1e-3 * (s + 1) / 8 for s in range(8)])
    np.testing.assert_allclose(lrs[8:], 1e-3)
    assert float(rows[-1]["loss"]) == pytest.approx(summary["final_loss"])


def test_a_one_trajectory_dataset_trains_with_a_warning(dataset_path, tmp_path, caplog):
    """One trajectory: the target regression of return on preference has one point to fit and
    predicts its return everywhere. Training goes on, with a warning that says so."""
    single = tmp_path / "single.parquet"
    write_dataset(single, make_dataset(lengths=(12,)))
    hp = dict(HP, steps=2, checkpoint_every=0)
    with caplog.at_level("WARNING", logger="morl.trainer"):
        summary = train(single, "dt-p", 0, hp, tmp_path / "one.pt", device="cpu", progress=False)
    assert summary["steps"] == 2 and (tmp_path / "one.pt").exists()
    warnings = [r for r in caplog.records if r.name == "morl.trainer" and r.levelname == "WARNING"]
    assert len(warnings) == 1, caplog.text
    message = warnings[0].getMessage()
    assert message.startswith(f"{single}: the dataset has one trajectory; ")
    assert "target regression of return on preference" in message and "underdetermined" in message
    assert "predicts that trajectory's return at every preference" in message
    caplog.clear()
    with caplog.at_level("WARNING", logger="morl.trainer"):
        train(dataset_path, "dt-p", 0, hp, tmp_path / "five.pt", device="cpu", progress=False)
    assert "one trajectory" not in caplog.text  # five trajectories: nothing to say


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


def test_same_inputs_and_seed_give_the_same_checkpoint_bytes(dataset_path, tmp_path, monkeypatch):
    """Final and partial checkpoints: identical files, whatever their names (their hashes are provenance)."""
    partials = []
    real = training.save_partial

    def save_and_keep(path, state):
        real(path, state)
        partials.append(path.read_bytes())

    monkeypatch.setattr(training, "save_partial", save_and_keep)
    for name in ("a.pt", "b.pt"):
        train(dataset_path, "dt-p", 3, HP, tmp_path / name, device="cpu", progress=False)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    n = len(partials) // 2
    assert n >= 1 and partials[:n] == partials[n:]


class Killed(Exception):
    pass


def kill_after_partial_saves(monkeypatch, n_saves):
    """Make train() die right after its n-th partial save, as a killed job would."""
    real = training.save_partial
    calls = {"n": 0}

    def save_then_die(path, state):
        real(path, state)
        calls["n"] += 1
        if calls["n"] == n_saves:
            raise Killed(f"killed after step {state['step']}")

    monkeypatch.setattr(training, "save_partial", save_then_die)


@pytest.mark.parametrize("name", ["dt", "rvs-p", "bc"])
def test_killed_and_rerun_equals_uninterrupted(name, dataset_path, tmp_path, monkeypatch):
    hp = dict(HP, steps=50, checkpoint_every=10)  # curve rows every step; dropout on

    def run(stem):
        return train(
            dataset_path, name, 5, hp, tmp_path / f"{stem}.pt", tmp_path / f"{stem}.csv", device="cpu", progress=False
        )

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
        (dict(model_name="sac"), "unknown model"),
        (dict(settings=dict(HP, learning_rate=1.0)), "unknown setting"),
        (dict(seed=-1), "seed"),
        (dict(device="cuda:0"), "CUDA is not available"),
    ],
)
def test_bad_arguments(kwargs, match, dataset_path, tmp_path):
    if "cuda" in str(kwargs.get("device", "")) and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    args = dict(dataset_path=dataset_path, model_name="bc", seed=0, settings=HP, checkpoint_path=tmp_path / "m.pt")
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


@pytest.mark.parametrize("name", ["dt", "dt-p", "bc", "bc-p", "rvs", "rvs-p"])
def test_only_modt_clips_its_gradients(name, dataset_path, tmp_path, monkeypatch):
    calls = []
    real = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(
        torch.nn.utils, "clip_grad_norm_", lambda p, norm, **kw: calls.append(norm) or real(p, norm, **kw)
    )
    train(dataset_path, name, 0, dict(HP, steps=3), tmp_path / "m.pt", device="cpu", progress=False)
    assert calls == ([0.25] * 3 if name.startswith("dt") else [])


# ------------------------------------------------------------------------------ statistics_from
def write_cell(tmp_path, name, quality, entropy, seed, obs_shift=0.0, **meta):
    ds = make_dataset(seed=seed, meta={"quality": quality, "entropy": entropy, **meta})
    ds.observations[:] += obs_shift
    ds.next_observations[:] += obs_shift  # the same states, shifted
    path = tmp_path / f"{name}.parquet"
    write_dataset(path, ds)
    return path, ds


def test_expert_high_statistics_normalise_every_dataset_of_the_env(tmp_path):
    amateur, _ = write_cell(tmp_path, "amateur-low", "amateur", "low", 1)
    expert, expert_ds = write_cell(tmp_path, "expert-high", "expert", "high", 2, obs_shift=3.0)
    hp = dict(HP, steps=2, statistics_from="expert-high", returns_to_go="weighted")
    train(amateur, "bc", 0, hp, tmp_path / "m.pt", device="cpu", progress=False, reference_dataset=expert)
    ckpt = torch.load(tmp_path / "m.pt", weights_only=True)
    mean, std = observation_stats(expert_ds.observations)
    np.testing.assert_array_equal(ckpt["obs_mean"].numpy(), mean)
    np.testing.assert_array_equal(ckpt["obs_std"].numpy(), std)
    assert ckpt["returns_to_go"] == "weighted" and ckpt["statistics_from"] == "expert-high"
    assert ckpt["settings"]["returns_to_go"] == "weighted" and ckpt["settings"]["statistics_from"] == "expert-high"
    assert ckpt["reference_dataset"] == str(expert.resolve())
    assert ckpt["reference_dataset_sha256"] == hashlib.sha256(expert.read_bytes()).hexdigest()
    # the expert-high dataset is its own reference
    train(expert, "bc", 0, hp, tmp_path / "e.pt", device="cpu", progress=False)
    assert torch.load(tmp_path / "e.pt", weights_only=True)["reference_dataset"] == str(expert.resolve())


def test_dataset_statistics_are_the_training_dataset_s_own(dataset_path, tmp_path):
    train(dataset_path, "bc", 0, dict(HP, steps=2), tmp_path / "m.pt", device="cpu", progress=False)
    ckpt = torch.load(tmp_path / "m.pt", weights_only=True)
    assert ckpt["statistics_from"] == "dataset" and ckpt["reference_dataset"] is None
    assert ckpt["returns_to_go"] == "peda"  # the default
    np.testing.assert_array_equal(ckpt["obs_mean"].numpy(), observation_stats(make_dataset().observations)[0])


def test_reference_dataset_mistakes_are_refused(tmp_path, monkeypatch):
    """Each mistake is refused from the files' metadata, before either dataset is read (at paper
    scale reading one takes a minute and gigabytes)."""
    import morl.trainer

    amateur, _ = write_cell(tmp_path, "amateur-low", "amateur", "low", 1)
    medium, _ = write_cell(tmp_path, "expert-medium", "expert", "medium", 2)

    def no_reading(*args, **kwargs):
        raise AssertionError("a dataset was read before the mistake was refused")

    monkeypatch.setattr(morl.trainer, "load_dataset", no_reading)
    monkeypatch.setattr(morl.trainer, "load_observations", no_reading)
    hp = dict(HP, steps=2, statistics_from="expert-high")
    run = dict(device="cpu", progress=False)
    with pytest.raises(ValueError, match="amateur-low.parquet: statistics_from 'expert-high' needs the env's"):
        train(amateur, "bc", 0, hp, tmp_path / "m.pt", **run)
    with pytest.raises(ValueError, match="expert-medium.parquet: a reference dataset must be the env's expert-high "
                       "dataset, but this is expert-medium"):  # fmt: skip
        train(amateur, "bc", 0, hp, tmp_path / "m.pt", reference_dataset=medium, **run)
    with pytest.raises(ValueError, match="used only with statistics_from 'expert-high'"):
        train(amateur, "bc", 0, dict(hp, statistics_from="dataset"), tmp_path / "m.pt", reference_dataset=medium, **run)
    with pytest.raises(ValueError, match="'returns_to_go' of train.peda must be one of peda, weighted"):
        train(amateur, "bc", 0, dict(hp, returns_to_go="discounted"), tmp_path / "m.pt", **run)
    assert not (tmp_path / "m.pt").exists()


@pytest.mark.parametrize("reference_meta, difference", [
    ({"env_id": "Toy-v1"}, "the reference dataset is for env 'Toy-v1', the training dataset for 'Toy-v0'"),
    ({"behavior_sha256": "b" * 64}, f"the reference dataset was collected by behavior policy sha256 {'b' * 12}, "
                                    f"the training dataset by {'a' * 12}"),
], ids=["env", "behavior"])  # fmt: skip
def test_reference_dataset_of_another_env_or_behavior_policy_is_refused(tmp_path, reference_meta, difference):
    """The statistics of every dataset of an env come from its expert-high dataset: the two files must come
    from the same env and the same behavior policy; both files are named."""
    amateur, _ = write_cell(tmp_path, "amateur-low", "amateur", "low", 1, behavior_sha256="a" * 64)
    expert, _ = write_cell(tmp_path, "expert-high", "expert", "high", 2, **{"behavior_sha256": "a" * 64,
                                                                             **reference_meta})  # fmt: skip
    hp = dict(HP, steps=2, statistics_from="expert-high")
    with pytest.raises(ValueError) as info:
        train(amateur, "bc", 0, hp, tmp_path / "m.pt", device="cpu", progress=False, reference_dataset=expert)
    assert str(info.value) == f"{expert} and {amateur} do not belong together: {difference}"
    assert not (tmp_path / "m.pt").exists()


def test_state_statistics_are_numpys_float64_mean_and_std_computed_in_blocks(monkeypatch):
    """The statistics are computed a block of rows at a time (no float64 copy of all states); they
    equal numpy's over the whole float64 array, and a constant dimension gets std 1."""
    import morl.normalisation

    rng = np.random.default_rng(3)
    obs = (rng.normal(size=(1001, 9)) * rng.uniform(0.1, 50, 9) + rng.uniform(-100, 100, 9)).astype(np.float32)
    obs[:, 4] = 2.5
    whole = np.asarray(obs, np.float64)
    want_std = whole.std(axis=0)
    want_std[4] = 1.0
    for block in (7, 1000, 1001, 5000):
        monkeypatch.setattr(morl.normalisation, "_STATS_BLOCK_ROWS", block)
        mean, std = observation_stats(obs)
        assert mean.dtype == std.dtype == np.float32
        np.testing.assert_array_equal(mean, whole.mean(axis=0).astype(np.float32), err_msg=f"block {block}")
        np.testing.assert_array_equal(std, want_std.astype(np.float32), err_msg=f"block {block}")


# --------------------------------------------------------------------------- snapshots along training
def _weights(path):
    return torch.load(path, weights_only=True)["state_dict"]


@pytest.mark.parametrize("name", ["rvs-p", "dt-p"])
def test_a_snapshot_is_the_model_a_run_of_that_many_steps_ends_with(name, dataset_path, tmp_path):
    """HV along training evaluates snapshots as if they were runs of that budget: for PEDA's models,
    whose schedule does not depend on the total, the snapshot at step 20 of a 40-step run is the final
    model of a 20-step run, and it says which step it was taken at."""
    hp = dict(HP, checkpoint_every=0)
    keep = {20: tmp_path / "snap" / "step20.pt"}
    train(dataset_path, name, 4, dict(hp, steps=40), tmp_path / "long.pt", device="cpu", progress=False, keep=keep)
    train(dataset_path, name, 4, dict(hp, steps=20), tmp_path / "short.pt", device="cpu", progress=False)
    snap, short = _weights(keep[20]), _weights(tmp_path / "short.pt")
    assert snap.keys() == short.keys() and all(torch.equal(snap[k], short[k]) for k in snap)
    ckpt = torch.load(keep[20], weights_only=True)
    assert ckpt["steps"] == 20 and ckpt["settings"]["steps"] == 40
    assert not all(torch.equal(snap[k], _weights(tmp_path / "long.pt")[k]) for k in snap)
    agent = load_agent(keep[20])  # a snapshot is a final checkpoint of its own
    assert agent.training["steps"] == 20


def test_a_killed_run_still_writes_the_snapshots_it_took_before_it_died(dataset_path, tmp_path, monkeypatch):
    hp = dict(HP, steps=50, checkpoint_every=20)
    keep = lambda stem: {10: tmp_path / stem / "step10.pt", 30: tmp_path / stem / "step30.pt"}  # noqa: E731
    train(dataset_path, "rvs-p", 5, hp, tmp_path / "straight.pt", device="cpu", progress=False, keep=keep("a"))
    with monkeypatch.context() as m:
        kill_after_partial_saves(m, 3)  # saves at 10 (a snapshot), 20 and 30 (a snapshot): dies after step 30
        with pytest.raises(Killed, match="after step 30"):
            train(dataset_path, "rvs-p", 5, hp, tmp_path / "resumed.pt", device="cpu", progress=False, keep=keep("b"))
    assert not (tmp_path / "b").exists()  # written when the run finishes, not before
    resumed = train(dataset_path, "rvs-p", 5, hp, tmp_path / "resumed.pt", device="cpu", progress=False, keep=keep("b"))
    assert resumed["resumed_from"] == 30
    for a, b in zip(keep("a").values(), keep("b").values()):
        wa, wb = _weights(a), _weights(b)
        assert all(torch.equal(wa[k], wb[k]) for k in wa), f"{b} differs from the uninterrupted run's"


@pytest.mark.parametrize(
    "keep, match",
    [
        ({0: "x.pt"}, "from 1 to the run's 30 steps"),
        ({31: "x.pt"}, "from 1 to the run's 30 steps"),
        ({True: "x.pt"}, "from 1 to the run's 30 steps"),
        ({5: "x.pt", 6: "x.pt"}, "given twice"),
    ],
)
def test_bad_snapshot_requests_are_refused_before_training(keep, match, dataset_path, tmp_path):
    keep = {k: tmp_path / v for k, v in keep.items()}
    with pytest.raises(InputError, match=match):
        train(dataset_path, "rvs-p", 0, dict(HP, steps=30), tmp_path / "m.pt", device="cpu", progress=False, keep=keep)
    assert not (tmp_path / "m.pt").exists()


# ------------------------------------------------------------------------------ the curve's run
def test_the_training_curve_names_its_run_on_every_row(dataset_path, tmp_path):
    curve_path = tmp_path / "curve.csv"
    train(dataset_path, "rvs-p", 3, HP, tmp_path / "m.pt", curve_path, device="cpu", progress=False)
    sha = hashlib.sha256(dataset_path.read_bytes()).hexdigest()
    with open(curve_path) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["step", "loss", "lr", "model", "seed", "dataset_sha256"]
    assert int(rows[-1]["step"]) == HP["steps"] and all(np.isfinite(float(r["loss"])) for r in rows)
    assert {(r["model"], r["seed"], r["dataset_sha256"]) for r in rows} == {("rvs-p", "3", sha)}
    assert curves.read_curve_run(curve_path) == {"model": "rvs-p", "seed": 3, "dataset_sha256": sha}


def test_a_curve_that_names_no_run_reads_as_none_and_a_muddled_one_is_refused(tmp_path):
    old = tmp_path / "old.csv"
    curves.write_curve(old, [[1, 0.5, 1e-3], [2, 0.25, 1e-3]])
    assert old.read_text().splitlines()[0] == "step,loss,lr"
    assert curves.read_curve_run(old) is None
    partial = tmp_path / "partial.csv"
    partial.write_text("step,loss,lr,model,seed\n1,0.5,0.001,dt-p,0\n")
    with pytest.raises(InputError, match=r"partial\.csv: a training curve that names its run needs the column"):
        curves.read_curve_run(partial)
    mixed = tmp_path / "mixed.csv"
    curves.write_curve(mixed, [[1, 0.5, 1e-3]], {"model": "dt-p", "seed": 0, "dataset_sha256": "ab" * 32})
    lines = mixed.read_text().splitlines()
    mixed.write_text("\n".join([*lines, lines[-1].replace(",dt-p,0,", ",dt-p,1,")]) + "\n")
    with pytest.raises(InputError, match=r"mixed\.csv: the rows of this training curve do not all name one run"):
        curves.read_curve_run(mixed)
    seedless = tmp_path / "seedless.csv"
    seedless.write_text(lines[0] + "\n" + lines[1].replace(",dt-p,0,", ",dt-p,x,") + "\n")
    with pytest.raises(InputError, match=r"seedless\.csv: the training curve's seed 'x' is not a whole number"):
        curves.read_curve_run(seedless)


def test_every_committed_curve_is_still_read():
    """The curves committed under docs/*/runs are read: those written before curves named their run
    name none, the later ones the model and seed of their folder."""
    from pathlib import Path

    import polars as pl

    committed = sorted((Path(__file__).resolve().parents[1] / "docs").glob("*/**/runs/**/curve.csv"))
    assert committed
    for path in committed[::25] + [p for p in committed if "progress" in p.parts]:
        run = curves.read_curve_run(path)
        if run is not None:
            assert (run["model"], run["seed"]) == (path.parent.parent.name, int(path.parent.name.removeprefix("seed")))
        assert {"step", "loss"} <= set(pl.read_csv(path).columns)
