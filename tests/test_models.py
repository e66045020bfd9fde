"""Tests for PEDA's networks (morl.families.peda_networks) and evaluation agent (morl.families.peda_agent)."""

from __future__ import annotations

import csv
import pickle

import numpy as np
import pytest
import torch

from morl.checkpoints import CheckpointError
from morl.data import Dataset, write_dataset
from morl.families import family, load_agent, load_checkpoint, train
from morl.families.peda import predict, prepare_tensors
from morl.families.peda_networks import MODEL_NAMES, build_model, is_bc, is_transformer, uses_preference

PEDA = family("peda")
DISPLAY_NAMES = {m.name: m.display for m in PEDA.models}
resolve_hp = PEDA.resolve_settings


def full(settings: dict) -> dict:
    """PEDA's settings with its defaults filled in, as the training core hands them to the networks."""
    return family("peda").resolve_settings(settings)


OBS_DIM, ACT_DIM, N_OBJ = 4, 3, 2
ACT_LOW, ACT_HIGH = [-2.0, -1.0, 0.0], [2.0, 1.0, 4.0]
TINY_HP = dict(
    batch_size=32,
    lr=3e-3,
    weight_decay=0.0,
    warmup_steps=10,
    return_scale=0.01,
    hidden=64,
    depth=2,
    embed_dim=32,
    n_layer=2,
    n_head=2,
    dropout=0.0,
    context_length=6,
    eval_context_length=4,
    checkpoint_every=0,
    statistics_from="dataset",
)


def make_dataset(seed=0, n_traj=16, action_of="state", max_steps=40):
    """A toy dataset; actions are a fixed function of the state, or of the preference only."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(8, max_steps, size=n_traj)
    n = int(lengths.sum())
    obs = rng.normal(size=(n, OBS_DIM)).astype(np.float32) * 3 + 1
    prefs = rng.dirichlet([1.0] * N_OBJ, size=n_traj).astype(np.float32)
    w = np.repeat(prefs, lengths, axis=0)
    if action_of == "state":
        z = np.tanh(obs[:, :ACT_DIM] / 3)
    else:  # "preference": one action per preference, independent of the state
        z = np.stack([2 * w[:, 0] - 1, 1 - 2 * w[:, 0], 2 * w[:, 1] - 1], axis=1)
    lo, hi = np.array(ACT_LOW), np.array(ACT_HIGH)
    actions = (lo + (hi - lo) * (0.5 + 0.45 * z)).astype(np.float32)
    rewards = rng.uniform(0.0, 2.0, size=(n, N_OBJ)).astype(np.float32)
    meta = {"env_id": "Toy-v0", "act_low": ACT_LOW, "act_high": ACT_HIGH, "max_episode_steps": max_steps}
    return Dataset.from_arrays(obs, actions, rewards, prefs, lengths, meta=meta)


@pytest.fixture(scope="module")
def dataset_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "toy.parquet"
    write_dataset(path, make_dataset())
    return path


def read_curve(path):
    with open(path) as f:
        return [(int(r["step"]), float(r["loss"]), float(r["lr"])) for r in csv.DictReader(f)]


# ------------------------------------------------------------------------------ registry, hp
def test_names_and_display_names():
    assert MODEL_NAMES == ("dt-p", "rvs-p", "bc-p", "dt", "rvs", "bc")  # PEDA's, in table order
    assert DISPLAY_NAMES == {
        "bc": "BC",
        "bc-p": "BC(P)",
        "rvs": "MORvS",
        "rvs-p": "MORvS(P)",
        "dt": "MODT",
        "dt-p": "MODT(P)",
    }
    assert [is_transformer(n) for n in MODEL_NAMES] == [True, False, False, True, False, False]
    assert [uses_preference(n) for n in MODEL_NAMES] == [True, True, True, False, False, False]
    with pytest.raises(ValueError, match="unknown model 'cql'"):
        build_model("cql", OBS_DIM, ACT_DIM, N_OBJ, full({}))


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"hiden": 3}, "unknown setting 'hiden' of train.peda"),
        ({"steps": 0}, "'steps' of train.peda must be >= 1"),
        ({"batch_size": 2.5}, "'batch_size' of train.peda must be an integer"),
        ({"lr": -1.0}, "'lr' of train.peda must be > 0"),
        ({"dropout": 1.0}, "'dropout' of train.peda must be in"),
        ({"embed_dim": 30, "n_head": 4}, "divisible"),
        ({"lr": "fast"}, "'lr' of train.peda must be a finite number"),
    ],
)
def test_resolve_hp_rejects_bad_values(bad, match):
    with pytest.raises(ValueError, match=match):
        resolve_hp(bad)


def test_resolve_hp_fills_paper_defaults():
    hp = resolve_hp({"steps": 10})
    assert hp["steps"] == 10 and hp["embed_dim"] == 512 and hp["context_length"] == 20
    assert hp["eval_context_length"] == 5 and hp["return_scale"] == 1e-3 and hp["warmup_steps"] == 10_000
    assert hp["returns_to_go"] == "peda" and hp["statistics_from"] == "expert-high"


def test_modt_feed_forward_is_a_4x_relu_mlp():
    """PEDA's GPT-2 configuration: activation_function relu, n_inner = 4 * embed_dim."""
    model = build_model("dt", OBS_DIM, ACT_DIM, N_OBJ, full({**TINY_HP, "embed_dim": 32}))
    for block in model.blocks:
        assert [type(m) for m in block.mlp] == [torch.nn.Linear, torch.nn.ReLU, torch.nn.Linear, torch.nn.Dropout]
        assert block.mlp[0].out_features == 4 * 32


# ------------------------------------------------------------------------------ networks
def model_inputs(name, batch=5, k=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (batch, k) if is_transformer(name) or is_bc(name) else (batch,)
    return {
        "states": torch.randn(*shape, OBS_DIM, generator=g),
        "actions": torch.randn(*shape, ACT_DIM, generator=g),
        "preferences": torch.rand(*shape, N_OBJ, generator=g),
        "returns_to_go": torch.randn(*shape, N_OBJ, generator=g),
        "timesteps": torch.randint(0, 30, shape, generator=g),
        "mask": None,
    }


def fresh_model(name, seed=0, **hp):
    torch.manual_seed(seed)
    model = build_model(
        name, OBS_DIM, ACT_DIM, N_OBJ, full({**TINY_HP, **hp}), act_low=ACT_LOW, act_high=ACT_HIGH, max_episode_steps=40
    )
    return model.eval()


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_output_shape_and_action_bounds(name):
    model = fresh_model(name)
    with torch.no_grad():
        # make the head saturate in both directions
        model.action_head.linear.weight.mul_(1e4)
        out = predict(model, {k: (v * 100 if k == "states" else v) for k, v in model_inputs(name).items()})
    expected = (5, 6, ACT_DIM) if is_transformer(name) else (5, ACT_DIM)
    assert out.shape == expected
    low, high = torch.tensor(ACT_LOW), torch.tensor(ACT_HIGH)
    assert torch.all(out >= low) and torch.all(out <= high)
    assert torch.any(out < low + 0.01) and torch.any(out > high - 0.01)  # the whole box is reachable


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_only_p_variants_see_the_preference(name):
    """Changing only w changes the action of the (P) variants and of nobody else."""
    model = fresh_model(name)
    x = model_inputs(name)
    y = dict(x, preferences=x["preferences"].flip(-1) + 0.3)
    with torch.no_grad():
        changed = not torch.allclose(predict(model, x), predict(model, y))
    assert changed == uses_preference(name)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_only_bc_ignores_the_return_to_go(name):
    model = fresh_model(name)
    x = model_inputs(name)
    y = dict(x, returns_to_go=x["returns_to_go"] * 3 + 1)
    with torch.no_grad():
        changed = not torch.allclose(predict(model, x), predict(model, y))
    assert changed == (not name.startswith("bc"))


@pytest.mark.parametrize("name", ["rvs", "rvs-p"])
def test_rvs_conditions_on_average_return_to_go(name):
    """MORvS sees g / (T - t): doubling g while doubling the steps left gives the same action."""
    model = fresh_model(name)  # T = 40
    x = model_inputs(name)
    x["timesteps"] = torch.full((5,), 30)  # 10 steps left
    y = dict(x, returns_to_go=x["returns_to_go"] * 2, timesteps=torch.full((5,), 20))  # 20 left
    z = dict(x, timesteps=torch.full((5,), 20))
    with torch.no_grad():
        assert torch.allclose(predict(model, x), predict(model, y), atol=1e-6)
        assert not torch.allclose(predict(model, x), predict(model, z))


@pytest.mark.parametrize("name", ["dt", "dt-p"])
def test_modt_is_causal(name):
    """The action predicted at step j depends on g_<=j, s_<=j, a_<j only."""
    model = fresh_model(name)
    x = model_inputs(name)
    j = 2
    with torch.no_grad():
        base = predict(model, x)
        keys = ["states", "actions", "returns_to_go", "timesteps"] + (["preferences"] if uses_preference(name) else [])
        for key in keys:
            y = {k: (v.clone() if v is not None else None) for k, v in x.items()}
            y[key][:, j + 1 :] = y[key][:, j + 1 :] + 7  # perturb every later step
            out = predict(model, y)
            assert torch.equal(out[:, : j + 1], base[:, : j + 1]), key
            assert not torch.allclose(out[:, j + 1 :], base[:, j + 1 :]), key
        y = dict(x, actions=x["actions"].clone())
        y["actions"][:, j] += 7  # the action of step j itself is not visible at step j
        out = predict(model, y)
        assert torch.equal(out[:, : j + 1], base[:, : j + 1])
        assert not torch.allclose(out[:, j + 1 :], base[:, j + 1 :])


@pytest.mark.parametrize("name", ["dt", "dt-p"])
def test_modt_left_padding_is_invisible(name):
    """A left-padded, masked window predicts what the unpadded shorter window predicts."""
    model = fresh_model(name)
    x = model_inputs(name, k=4)
    with torch.no_grad():
        short = predict(model, x)
        pad = 3
        padded = {}
        for key, v in x.items():
            if v is None:
                continue
            if v.is_floating_point():
                filler = torch.randn(v.shape[0], pad, *v.shape[2:]) * 5
            else:
                filler = torch.zeros(v.shape[0], pad, dtype=v.dtype)
            padded[key] = torch.cat([filler, v], dim=1)
        padded["mask"] = torch.cat([torch.zeros(5, pad, dtype=torch.bool), torch.ones(5, 4, dtype=torch.bool)], dim=1)
        long = predict(model, padded)
    assert torch.allclose(long[:, pad:], short, atol=1e-5)


# ------------------------------------------------------------------------------ training fits
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_each_model_overfits_a_tiny_dataset(name, dataset_path, tmp_path):
    curve_path = tmp_path / "curve.csv"
    summary = train(
        dataset_path, name, 0, {**TINY_HP, "steps": 300}, tmp_path / "m.pt", curve_path, device="cpu", progress=False
    )
    curve = read_curve(curve_path)
    assert summary["steps"] == 300 and curve[-1][0] == 300
    first, last = curve[0][1], curve[-1][1]
    assert last < 0.02 * first, (first, last)
    assert summary["final_loss"] == pytest.approx(last)


def test_preference_conditioning_is_learned_by_p_variants_only(tmp_path):
    """Data whose action is a function of w alone: BC(P) fits it and acts differently per w;
    naive BC cannot tell the preferences apart and returns the same action for every w. (The
    action compared is the one of a full window of context_length states.)"""
    path = tmp_path / "pref.parquet"
    write_dataset(path, make_dataset(seed=1, action_of="preference"))
    losses, actions = {}, {}
    w = np.array([[0.9, 0.1], [0.1, 0.9]], dtype=np.float32)
    obs = np.zeros((2, OBS_DIM), dtype=np.float32)
    for name in ("bc", "bc-p"):
        s = train(path, name, 0, {**TINY_HP, "steps": 300}, tmp_path / f"{name}.pt", device="cpu", progress=False)
        losses[name] = s["final_loss"]
        agent = load_agent(tmp_path / f"{name}.pt")
        agent.reset(w, w * 50)
        for _ in range(TINY_HP["context_length"] - 1):
            agent.observe(agent.act(obs), np.zeros((2, N_OBJ)))
        actions[name] = agent.act(obs)
    assert losses["bc-p"] < 0.1 * losses["bc"]
    np.testing.assert_array_equal(actions["bc"][0], actions["bc"][1])
    assert np.abs(actions["bc-p"][0] - actions["bc-p"][1]).max() > 1.0
    lo, hi = np.array(ACT_LOW), np.array(ACT_HIGH)
    z = np.stack([2 * w[:, 0] - 1, 1 - 2 * w[:, 0], 2 * w[:, 1] - 1], axis=1)
    np.testing.assert_allclose(actions["bc-p"], lo + (hi - lo) * (0.5 + 0.45 * z), atol=0.3)


# ------------------------------------------------------------------------------ agent
def history(data, rows, k):
    """Training-time tensors of the ``k`` steps that end at ``rows``, zero-padded on the left at
    the start of a trajectory (what an agent sees during a rollout)."""
    rows = torch.as_tensor(rows)
    idx = rows[:, None] + torch.arange(1 - k, 1)
    mask = idx >= (rows - data.timesteps[rows])[:, None]
    idx, m = idx.clamp(min=0), mask[..., None]
    batch = {key: getattr(data, key)[idx] * m for key in ("states", "actions", "preferences", "returns_to_go")}
    return {**batch, "timesteps": data.timesteps[idx] * mask, "mask": mask}


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_agent_reproduces_training_time_predictions(name, dataset_path, tmp_path):
    """Replaying dataset trajectories through load_agent gives the actions the trained network
    predicts on the training-time inputs (clipped normalised states, g_t = w * rtg_t * scale under
    ``returns_to_go: weighted``, t; for MODT the last eval_context_length steps with actions in
    [-1, 1] units, for BC the last context_length states, zero-padded)."""
    hp = {**TINY_HP, "steps": 30, "dropout": 0.2, "returns_to_go": "weighted"}
    train(dataset_path, name, 3, hp, tmp_path / "m.pt", device="cpu", progress=False)
    ckpt = load_checkpoint(tmp_path / "m.pt")
    model = build_model(
        name, OBS_DIM, ACT_DIM, N_OBJ, ckpt["settings"], act_low=ACT_LOW, act_high=ACT_HIGH, max_episode_steps=40
    )
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    from morl.data import load_dataset

    ds = load_dataset(dataset_path)
    data = prepare_tensors(ds, ckpt["return_scale"], rtg_definition="weighted", act_low=ACT_LOW,
                           act_high=ACT_HIGH, max_episode_steps=40)  # fmt: skip
    np.testing.assert_array_equal(ckpt["obs_mean"].numpy(), data.obs_mean)

    trajs = [0, 3, 5]  # replay three trajectories in one batch, as long as the shortest
    starts, length = ds.traj_starts[trajs], int(ds.traj_lengths[trajs].min())
    agent = load_agent(tmp_path / "m.pt")
    w = ds.traj_preferences[trajs]
    agent.reset(w, w * ds.traj_returns[trajs])
    k = {"dt": 4, "bc": 6}.get(name.split("-")[0])  # eval_context_length, context_length
    for t in range(length):
        rows = starts + t
        got = agent.act(ds.observations[rows])
        with torch.no_grad():
            if k is None:
                expected = predict(model, {key: v[torch.as_tensor(rows)] for key, v in vars(data).items()
                                           if key in ("states", "actions", "preferences", "returns_to_go", "timesteps")}
                                   | {"mask": None})  # fmt: skip
            else:
                expected = predict(model, history(data, rows, k))
                expected = expected[:, -1] if is_transformer(name) else expected
        np.testing.assert_allclose(got, expected.numpy(), atol=2e-5, err_msg=f"step {t}")
        agent.observe(ds.actions[rows], ds.rewards[rows])
    assert agent.timestep == length
    seen = np.stack([ds.rewards[s : s + length].astype(np.float64).sum(0) for s in starts])
    np.testing.assert_allclose(agent.return_to_go, w * (ds.traj_returns[trajs] - seen), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["rvs-p", "bc", "dt"])
def test_agent_clips_normalised_states_to_ten(name, dataset_path, tmp_path):
    """States beyond 10 standard deviations act like states at 10, as in training."""
    train(dataset_path, name, 0, {**TINY_HP, "steps": 5}, tmp_path / "m.pt", device="cpu", progress=False)
    ckpt = load_checkpoint(tmp_path / "m.pt")
    mean, std = ckpt["obs_mean"].numpy(), ckpt["obs_std"].numpy()
    w = np.array([[0.3, 0.7]], np.float32)
    acts = []
    for sigmas in (10.0, 1000.0):
        agent = load_agent(tmp_path / "m.pt")
        agent.reset(w, w * 50)
        acts.append(agent.act((mean + sigmas * std)[None].astype(np.float32)))
    np.testing.assert_allclose(acts[0], acts[1], atol=1e-6)


@pytest.mark.parametrize("name", ["dt-p", "rvs-p"])
def test_agent_slots_are_independent(name, dataset_path, tmp_path):
    """Acting for a batch equals acting for each slot on its own."""
    train(dataset_path, name, 0, {**TINY_HP, "steps": 20}, tmp_path / "m.pt", device="cpu", progress=False)
    rng = np.random.default_rng(0)
    w = rng.dirichlet([1, 1], size=3).astype(np.float32)
    target = w * 60
    obs = rng.normal(size=(7, 3, OBS_DIM)).astype(np.float32)
    rew = rng.uniform(0, 2, size=(7, 3, N_OBJ)).astype(np.float32)
    batched = load_agent(tmp_path / "m.pt")
    batched.reset(w, target)
    singles = [load_agent(tmp_path / "m.pt") for _ in range(3)]
    for i, a in enumerate(singles):
        a.reset(w[i : i + 1], target[i : i + 1])
    for t in range(7):
        acts = batched.act(obs[t])
        for i, a in enumerate(singles):
            np.testing.assert_allclose(a.act(obs[t, i : i + 1])[0], acts[i], atol=1e-5)
            a.observe(acts[i : i + 1], rew[t, i : i + 1])
        batched.observe(acts, rew[t])
    np.testing.assert_allclose(batched.return_to_go, target - (w * rew.astype(np.float64)).sum(0), rtol=1e-6)


def test_agent_call_order_and_shapes(dataset_path, tmp_path):
    train(dataset_path, "dt", 0, {**TINY_HP, "steps": 5}, tmp_path / "m.pt", device="cpu", progress=False)
    agent = load_agent(tmp_path / "m.pt")
    obs = np.zeros((2, OBS_DIM), np.float32)
    with pytest.raises(RuntimeError, match="reset"):
        agent.act(obs)
    with pytest.raises(ValueError, match="preferences must have shape"):
        agent.reset(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="target_returns must have shape"):
        agent.reset(np.ones((2, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        agent.reset(np.ones((2, 2)), np.full((2, 2), np.nan))
    agent.reset(np.full((2, 2), 0.5), np.ones((2, 2)))
    with pytest.raises(RuntimeError, match="observe"):
        agent.observe(np.zeros((2, ACT_DIM)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="obs must have shape"):
        agent.act(np.zeros((3, OBS_DIM), np.float32))
    a = agent.act(obs)
    assert a.dtype == np.float32 and a.shape == (2, ACT_DIM)
    with pytest.raises(RuntimeError, match="twice"):
        agent.act(obs)
    agent.observe(a, np.ones((2, 2)))
    np.testing.assert_allclose(agent.return_to_go, 0.5)
    for _ in range(60):  # past the episode cap and the context length: still well defined
        agent.observe(agent.act(obs), np.zeros((2, 2)))
    assert agent.timestep == 61


# ------------------------------------------------------------------------------ bad checkpoints
class Foreign:
    pass


def test_a_checkpoint_of_the_format_before_the_training_core_loads_and_acts_the_same(dataset_path, tmp_path):
    """Format version 2 (before every family ran on one training core) named the settings "hp" and
    had no "family" key: such a file still loads, and its agent acts as the current file's does."""
    new = tmp_path / "new.pt"
    train(dataset_path, "dt-p", 0, {**TINY_HP, "steps": 3}, new, device="cpu", progress=False)
    ckpt = torch.load(new, weights_only=True)
    assert ckpt["format_version"] == 3 and "hp" not in ckpt
    old = {k: v for k, v in ckpt.items() if k not in ("family", "settings")}
    torch.save({**old, "format_version": 2, "hp": ckpt["settings"]}, tmp_path / "old.pt")
    obs = np.random.default_rng(0).normal(size=(2, OBS_DIM)).astype(np.float32)
    actions = []
    for path in (new, tmp_path / "old.pt"):
        agent = load_agent(path)
        agent.reset(np.array([[0.2, 0.8], [0.6, 0.4]]), np.array([[10.0, 30.0], [20.0, 5.0]]))
        actions.append(agent.act(obs))
        assert agent.training["settings"] == ckpt["settings"]
    np.testing.assert_array_equal(actions[0], actions[1])
    torch.save({**old, "format_version": 1, "hp": ckpt["settings"]}, tmp_path / "older.pt")
    with pytest.raises(CheckpointError, match="format version 1 is not supported .*reads 2, 3"):
        load_agent(tmp_path / "older.pt")


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_load_agent_rejects_bad_files(dataset_path, tmp_path):
    good = tmp_path / "good.pt"
    train(dataset_path, "bc-p", 0, {**TINY_HP, "steps": 3}, good, device="cpu", progress=False)
    ckpt = torch.load(good, weights_only=True)

    cases = {}
    cases["missing.pt"] = None
    (tmp_path / "noise.pt").write_bytes(np.random.default_rng(0).bytes(300))
    cases["noise.pt"] = "not a readable torch checkpoint"
    with open(tmp_path / "pickle.pt", "wb") as f:
        pickle.dump({"format": "morl-peda-agent", "x": Foreign()}, f)
    cases["pickle.pt"] = "not a readable torch checkpoint"
    torch.save(Foreign(), tmp_path / "object.pt")
    cases["object.pt"] = "not a safe checkpoint: it needs the Python global"
    torch.save([1, 2], tmp_path / "list.pt")
    cases["list.pt"] = "expected a checkpoint dict"
    torch.save({"state_dict": ckpt["state_dict"]}, tmp_path / "bare.pt")
    cases["bare.pt"] = "not a morl agent checkpoint"
    torch.save({k: v for k, v in ckpt.items() if k != "obs_std"}, tmp_path / "nostd.pt")
    cases["nostd.pt"] = "lacks key\\(s\\) obs_std"
    torch.save({**ckpt, "model_name": "cql"}, tmp_path / "name.pt")
    cases["name.pt"] = "unknown model 'cql'"
    torch.save({**ckpt, "format_version": 99}, tmp_path / "version.pt")
    cases["version.pt"] = "format version 99"
    torch.save({**ckpt, "obs_dim": OBS_DIM + 1}, tmp_path / "dims.pt")
    cases["dims.pt"] = "obs_mean"
    sd = dict(ckpt["state_dict"])
    sd.pop(next(iter(sd)))
    torch.save({**ckpt, "state_dict": sd}, tmp_path / "weights.pt")
    cases["weights.pt"] = "weights do not fit the model"
    torch.save({"format": "morl-peda-training-state", "step": 3}, tmp_path / "x.pt.partial")
    cases["x.pt.partial"] = "partial training state"

    for fname, match in cases.items():
        path = tmp_path / fname
        with pytest.raises(ValueError) as info:
            load_agent(path)
        assert isinstance(info.value, CheckpointError)
        assert str(path) in str(info.value), fname
        if match:
            assert info.match(match), (fname, str(info.value))
    assert load_agent(good).model_name == "bc-p"


class _RunsCode:
    """Unpickling it would run a shell command (the safe loader must refuse it first)."""

    def __reduce__(self):
        import os

        return (os.system, ("true",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("payload, refused", [(_RunsCode(), "posix.system"), (Foreign(), f"{__name__}.Foreign")],
                         ids=["code", "class"])  # fmt: skip
def test_checkpoint_that_fails_the_safe_load_is_named_unsafe(tmp_path, payload, refused):
    """No advice to load it unsafely: the file is named, with the global torch refused."""
    path = tmp_path / "evil.pt"
    torch.save({"format": "morl-peda-agent", "x": payload}, path)
    with pytest.raises(CheckpointError) as info:
        load_agent(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not a safe checkpoint")
    assert f"'{refused}'" in message
    assert "weights_only" not in message and "likely succeed" not in message and "trust" not in message
