"""Tests for the families that put the preference into the weights: MORvS-HN (morl.families.hyper) and
MORvS-PML (morl.families.manifold), both on PEDA's MORvS backbone."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from test_training import make_dataset

from morl import checkpoints, families, trainer
from morl.checkpoints import CheckpointError
from morl.config import ConfigError, train_settings, validate_config
from morl.data import Dataset, write_dataset
from morl.errors import InputError
from morl.families import family, hyper, manifold, peda
from morl.families.base import Dims
from morl.families.peda_agent import KINDS, Agent, agent_kind
from morl.families.peda_networks import MODEL_NAMES, build_model

HYPER, MANIFOLD = family("hyper"), family("manifold")
MODELS = ["rvs-hn", "rvs-pml"]
OBS_DIM, ACT_DIM, N_OBJ = 3, 2, 2
TINY = dict(steps=24, batch_size=16, lr=1e-3, warmup_steps=4, hidden=16, depth=2, checkpoint_every=8,
            statistics_from="dataset")  # fmt: skip
HYPER_TINY = dict(hyper_hidden=8, hyper_dim=3)


def tiny(model: str, **extra) -> dict:
    return {**TINY, **(HYPER_TINY if model == "rvs-hn" else {}), **extra}


@pytest.fixture
def dataset_path(tmp_path):
    path = tmp_path / "toy.parquet"
    write_dataset(path, make_dataset())
    return path


def preference_dataset(n=512, seed=0) -> Dataset:
    """One-step episodes whose action is the preference's trade-off, a = w_1 - w_2 (plus a little noise),
    under constant rewards: the return-to-go says nothing, so only the preference tells w = (1, 0)
    (best served by a = +1) from w = (0, 1) (a = -1)."""
    rng = np.random.default_rng(seed)
    prefs = rng.dirichlet([1, 1], size=n).astype(np.float32)
    obs = rng.normal(size=(n, 1)).astype(np.float32)
    actions = np.clip(prefs[:, :1] - prefs[:, 1:] + 0.05 * rng.normal(size=(n, 1)), -1, 1).astype(np.float32)
    rewards = np.ones((n, 2), np.float32)
    meta = {"env_id": "Bandit-v0", "act_low": [-1.0], "act_high": [1.0], "max_episode_steps": 1}
    return Dataset.from_arrays(obs, actions, rewards, prefs, np.ones(n, int), terminals=np.ones(n, bool), meta=meta)


# ------------------------------------------------------------------------------ learning
@pytest.mark.parametrize("model", MODELS)
def test_learns_the_best_action_of_each_preference(model, tmp_path):
    path = tmp_path / "prefs.parquet"
    write_dataset(path, preference_dataset())
    settings = tiny(model, steps=400, batch_size=64, hidden=32, warmup_steps=10, checkpoint_every=0)
    families.train(path, model, 0, settings, tmp_path / "m.pt", device="cpu", progress=False)

    prefs = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], np.float32)
    agent = families.load_agent(tmp_path / "m.pt")
    agent.reset(prefs, np.ones_like(prefs))  # the return-to-go the data had
    a = agent.act(np.zeros((3, 1), np.float32))[:, 0]
    assert a[0] > 0.5 and a[1] < -0.5 and abs(a[2]) < 0.3, f"{model} acts {a} for preferences {prefs.tolist()}"


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


@pytest.mark.parametrize("model", MODELS)
def test_killed_and_rerun_equals_uninterrupted(model, dataset_path, tmp_path, monkeypatch):
    def run(stem):
        return families.train(dataset_path, model, 5, tiny(model), tmp_path / f"{stem}.pt", tmp_path / f"{stem}.csv",
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


@pytest.mark.parametrize("model", MODELS)
def test_same_seed_same_bytes_and_the_agent_acts_in_batch(model, dataset_path, tmp_path):
    settings = tiny(model, steps=10, checkpoint_every=0)
    before = torch.get_rng_state()
    for name, seed in (("a.pt", 1), ("b.pt", 1), ("c.pt", 2)):
        families.train(dataset_path, model, seed, settings, tmp_path / name, tmp_path / f"{name}.csv", device="cpu",
                       progress=False)  # fmt: skip
    assert torch.equal(torch.get_rng_state(), before)  # the caller's generator is left alone
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    assert (tmp_path / "a.pt").read_bytes() != (tmp_path / "c.pt").read_bytes()
    with open(tmp_path / "a.pt.csv") as f:
        assert [int(r[0]) for r in list(csv.reader(f))[1:]] == list(range(1, 11))

    ckpt = torch.load(tmp_path / "a.pt", weights_only=True)
    fam = families.family_of(model)
    for key in (*checkpoints.CHECKPOINT_KEYS, *fam.load().CHECKPOINT_KEYS):
        assert key in ckpt
    assert ckpt["format"] == fam.checkpoint_format and ckpt["family"] == fam.name and ckpt["model_name"] == model
    assert ckpt["settings"] == fam.resolve_settings(settings) and ckpt["returns_to_go"] == "peda"

    agent = families.load_agent(tmp_path / "a.pt")
    assert isinstance(agent, Agent) and agent.kind == "step"
    assert (agent.model_name, agent.seed, agent.n_obj, agent.obs_dim, agent.act_dim) == (model, 1, 2, 3, 2)
    assert agent.training["returns_to_go"] == "peda" and agent.training["statistics_from"] == "dataset"
    rng = np.random.default_rng(0)
    prefs = rng.dirichlet([1, 1], size=7).astype(np.float32)
    targets = 100 * prefs
    obs = 50 * rng.normal(size=(7, OBS_DIM)).astype(np.float32)  # far outside the data: clipped states
    agent.reset(prefs, targets)
    for _ in range(3):
        actions = agent.act(obs)
        assert actions.shape == (7, ACT_DIM) and actions.dtype == np.float32
        assert np.all(actions >= -1.0) and np.all(actions <= 1.0)
        agent.observe(actions, np.ones((7, N_OBJ)))
    batched = agent.act(obs)
    for i in range(7):  # each row acts with its own preference's weights, as if alone
        agent.reset(prefs[i : i + 1], targets[i : i + 1])
        for _ in range(3):
            agent.observe(agent.act(obs[i : i + 1]), np.ones((1, N_OBJ)))
        np.testing.assert_allclose(agent.act(obs[i : i + 1])[0], batched[i], rtol=0, atol=1e-6)

    other = "manifold" if model == "rvs-hn" else "hyper"
    with pytest.raises(CheckpointError, match=f"not a {other} agent checkpoint"):
        checkpoints.load_agent(family(other), tmp_path / "a.pt")
    with pytest.raises(CheckpointError, match="returns_to_go: peda.*returns_to_go: weighted"):
        families.load_agent(tmp_path / "a.pt", definitions={"returns_to_go": "weighted", "statistics_from": "dataset"})


# ------------------------------------------------------------------------------ settings
@pytest.mark.parametrize(
    "fam, values, match",
    [
        (HYPER, {"hyper_dim": 0}, "'hyper_dim' of train.hyper must be >= 1"),
        (HYPER, {"hyper_hidden": 2.5}, "'hyper_hidden' of train.hyper must be an integer"),
        (HYPER, {"hyper_init": -0.1}, "'hyper_init' of train.hyper must be >= 0"),
        (HYPER, {"embed_dim": 64}, "unknown setting 'embed_dim' of train.hyper"),
        (MANIFOLD, {"hyper_dim": 3}, "unknown setting 'hyper_dim' of train.manifold"),
        (MANIFOLD, {"depth": 0}, "'depth' of train.manifold must be >= 1"),
        (MANIFOLD, {"dropout": 1.0}, r"'dropout' of train.manifold must be in \[0, 1\)"),
        (MANIFOLD, {"returns_to_go": "mean"}, "'returns_to_go' of train.manifold must be one of peda, weighted"),
        (HYPER, {"statistics_from": "reference"}, "'statistics_from' of train.hyper must be one of"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(fam, values, match):
    with pytest.raises(InputError, match=match):
        fam.resolve_settings(values)


def test_shared_settings_default_to_morvs_p_s_and_the_hypernetwork_to_hyper_morl_s():
    morvs = family("peda").resolve_settings({})
    for fam in (HYPER, MANIFOLD):
        own = fam.resolve_settings({})
        shared = set(own) & set(morvs)
        assert shared >= {"steps", "batch_size", "lr", "weight_decay", "warmup_steps", "return_scale", "hidden",
                          "depth", "dropout", "returns_to_go", "statistics_from", "checkpoint_every"}  # fmt: skip
        assert {k: own[k] for k in shared} == {k: morvs[k] for k in shared}
    h = HYPER.resolve_settings({})
    assert (h["hyper_hidden"], h["hyper_dim"], h["hyper_init"]) == (128, 10, 0.0)
    assert set(MANIFOLD.resolve_settings({})) < set(h)


def test_unseen_config_trains_them_with_morvs_p_s_budget_and_refuses_expert_high_statistics(smoke_config):
    with open(Path(__file__).resolve().parent.parent / "configs" / "unseen.yaml") as f:
        config = yaml.safe_load(f)
    assert {"rvs-p", *MODELS} <= set(config["models"])
    for env in config["envs"]:
        morvs = train_settings(config, env, "rvs-p")
        for model in MODELS:
            own = train_settings(config, env, model)
            assert {k: own[k] for k in own if k in morvs} == {k: morvs[k] for k in own if k in morvs}, model
    config = dict(smoke_config, coverages=["complete", "shattered"], models=["rvs-hn"],
                  train={"hyper": {"statistics_from": "expert-high"}})  # fmt: skip
    with pytest.raises(ConfigError, match="train.hyper.statistics_from is expert-high"):
        validate_config(config)


# ------------------------------------------------------------------------------ the networks
def random_inputs(n, n_obj=N_OBJ, seed=0):
    gen = torch.Generator().manual_seed(seed)
    prefs = torch.distributions.Dirichlet(torch.ones(n_obj)).sample((n,))
    return (torch.randn(n, OBS_DIM, generator=gen), None, prefs, torch.rand(n, n_obj, generator=gen),
            torch.randint(0, 20, (n,), generator=gen))  # fmt: skip


@pytest.mark.parametrize("n_obj", [2, 3])
def test_manifold_policy_is_morvs_with_the_preference_weighted_weights(n_obj):
    settings = MANIFOLD.resolve_settings({"hidden": 16, "depth": 3})
    torch.manual_seed(0)
    net = manifold.network(Dims(OBS_DIM, ACT_DIM, n_obj), settings, [-2.0, 0.0], [2.0, 4.0], 20).eval()
    peda_settings = family("peda").resolve_settings({"hidden": 16, "depth": 3})
    morvs = build_model("rvs", OBS_DIM, ACT_DIM, n_obj, peda_settings, act_low=[-2.0, 0.0], act_high=[2.0, 4.0],
                        max_episode_steps=20).eval()  # fmt: skip
    states, _, prefs, g, t = random_inputs(9, n_obj)
    members = [net.member_state_dict(i) for i in range(n_obj)]
    assert not torch.equal(members[0]["trunk.0.weight"], members[1]["trunk.0.weight"])  # independent initialisations
    with torch.no_grad():
        for i in range(n_obj):  # a corner of the simplex is weight set i alone
            corner = torch.zeros(9, n_obj)
            corner[:, i] = 1.0
            morvs.load_state_dict(members[i])
            torch.testing.assert_close(net(states, None, corner, g, t), morvs(states, None, None, g, t), rtol=0,
                                       atol=1e-6)  # fmt: skip
        for row in range(9):  # elsewhere, MORvS with every layer's weights combined by the row's preference
            w = prefs[row]
            morvs.load_state_dict({k: sum(w[i] * members[i][k] for i in range(n_obj)) for k in members[0]})
            torch.testing.assert_close(net(states, None, prefs, g, t)[row], morvs(states, None, None, g, t)[row],
                                       rtol=0, atol=1e-5)  # fmt: skip


def test_hypernetwork_generates_the_weights_it_acts_with_and_they_differ_between_preferences():
    dims = Dims(OBS_DIM, ACT_DIM, N_OBJ)
    corners = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    torch.manual_seed(0)
    start = hyper.network(dims, HYPER.resolve_settings({"hidden": 16}), [-1.0] * 2, [1.0] * 2, 20)
    same = start.generated_weights(corners)
    assert all(torch.equal(v[0], v[1]) for v in same.values())  # W starts at 0: one policy for every w

    torch.manual_seed(0)
    net = hyper.network(dims, HYPER.resolve_settings({"hidden": 16, "hyper_init": 0.1}), [-1.0] * 2, [1.0] * 2,
                        20).eval()  # fmt: skip
    states, _, prefs, g, t = random_inputs(6)
    with torch.no_grad():
        gen = net.generated_weights(corners)
        assert gen["layer.weight"].shape == (2, 16, 16) and gen["head.weight"].shape == (2, ACT_DIM, 16)
        assert all(not torch.equal(v[0], v[1]) for v in gen.values())
        gen = net.generated_weights(prefs)  # the forward pass applies exactly these weights, row by row
        x = torch.cat([states, g / (20 - t).clamp(min=1)[:, None]], dim=-1)
        h = torch.relu(torch.bmm(gen["layer.weight"], net.trunk(x)[:, :, None])[:, :, 0] + gen["layer.bias"])
        pre = torch.bmm(gen["head.weight"], h[:, :, None])[:, :, 0] + gen["head.bias"]
        torch.testing.assert_close(net(states, None, prefs, g, t), net.action_head.squash(pre), rtol=0, atol=1e-6)


def test_training_moves_the_hypernetwork_off_one_policy_for_every_preference(dataset_path, tmp_path):
    families.train(dataset_path, "rvs-hn", 0, tiny("rvs-hn", steps=10, checkpoint_every=0), tmp_path / "m.pt",
                   device="cpu", progress=False)  # fmt: skip
    agent = families.load_agent(tmp_path / "m.pt")
    with torch.no_grad():
        gen = agent.model.generated_weights(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    assert all(not torch.equal(v[0], v[1]) for v in gen.values())


def test_peda_s_agent_kinds_come_from_its_model_names_and_others_are_refused():
    assert {name: agent_kind(name) for name in MODEL_NAMES} == {
        "dt-p": "window", "rvs-p": "step", "bc-p": "stacked", "dt": "window", "rvs": "step", "bc": "stacked"}  # fmt: skip
    assert set(KINDS) == {"window", "stacked", "step"}
    model = build_model("rvs-p", OBS_DIM, ACT_DIM, N_OBJ, family("peda").resolve_settings({"hidden": 8}))
    with pytest.raises(ValueError, match="kind must be one of window, stacked, step"):
        Agent(model, model_name="rvs-p", kind="mlp", obs_mean=torch.zeros(OBS_DIM), obs_std=torch.ones(OBS_DIM),
              return_scale=1e-3, max_episode_steps=20, n_obj=N_OBJ, act_dim=ACT_DIM, device=torch.device("cpu"))  # fmt: skip


def test_they_reuse_peda_s_training_pieces():
    for module in (hyper, manifold):
        assert module.prepare is peda.prepare and issubclass(module.Learner, peda.SequenceLearner)
        assert module.DEFINITIONS == peda.DEFINITIONS and module.CHECKPOINT_KEYS == peda.CHECKPOINT_KEYS
