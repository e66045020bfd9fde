"""The family contract (morl.families.base) as a new family's author meets it: a sequence family that
is not one of PEDA's models works as one module plus one registry line; a family may start its agents
from its own initial targets; an update's metrics become curve columns; agents get a seeded generator."""

from __future__ import annotations

import csv
import math
import textwrap

import numpy as np
import pytest
import torch

from morl import families
from morl.data import load_dataset
from morl.evaluate import evaluate_checkpoint, read_evaluation
from morl.families import Family, Model
from morl.rollout import agent_generator, rollout

DIVISIONS = 4  # 5 points on two objectives

#: A recurrent policy over windows of (state, preference, return-to-go), trained by PEDA's action
#: regression on PEDA's data and evaluated on a rolling window, with its own initial targets.
GRU_FAMILY = '''
    """GRU(P): a GRU over the window of (s, w, g), then PEDA's action head."""

    from dataclasses import dataclass

    import numpy as np
    import torch
    from torch import nn

    from morl.families import peda
    from morl.families.base import setting
    from morl.families.peda_networks import ActionHead

    DEFINITIONS = peda.DEFINITIONS
    FORMAT_VERSION = 1
    READS_VERSIONS = (1,)
    CHECKPOINT_KEYS = peda.CHECKPOINT_KEYS
    prepare = peda.prepare


    @dataclass(frozen=True)
    class Settings(peda.WindowSettings):
        hidden: int = setting(16, "width of the GRU's state")


    RULES = peda.WINDOW_RULES
    check_settings = peda.check_window


    class GRUPolicy(nn.Module):
        def __init__(self, dims, settings, act_low, act_high, max_episode_steps):
            super().__init__()
            self.gru = nn.GRU(dims.obs_dim + 2 * dims.n_obj, settings["hidden"], batch_first=True)
            self.action_head = ActionHead(settings["hidden"], act_low, act_high)

        def forward(self, states, actions, preferences, returns_to_go, timesteps, mask=None):
            if preferences.dim() == 2:
                preferences = preferences[:, None].expand(-1, states.shape[1], -1)
            h, _ = self.gru(torch.cat([states, preferences, returns_to_go], -1))
            return self.action_head(h)


    Learner, build_agent = peda.sequence_family(GRUPolicy, window=True)


    def initial_targets(preferences, traj_preferences, traj_returns):
        best = traj_returns.max(axis=0)
        return preferences * best, {"initial_targets": "the data's best return per objective, times w"}
'''

SETTINGS = dict(steps=30, batch_size=8, lr=1e-3, warmup_steps=2, checkpoint_every=10, hidden=16, dropout=0.0,
                context_length=4, eval_context_length=3, statistics_from="dataset")  # fmt: skip


@pytest.fixture
def gru_family(tmp_path, monkeypatch):
    """The module saved on the path and its one registry line."""
    (tmp_path / "grufam.py").write_text(textwrap.dedent(GRU_FAMILY))
    monkeypatch.syspath_prepend(str(tmp_path))
    line = Family("gru", "grufam", (Model("gru-p", "GRU(P)"),), "morl-gru-agent")
    monkeypatch.setattr(families, "FAMILIES", (*families.FAMILIES, line))
    return line


def test_a_sequence_family_other_than_peda_s_is_one_module_and_one_registry_line(gru_family, tiny_dataset, tmp_path):
    assert families.family_of("gru-p") is gru_family and "gru-p" in families.model_order()
    summary = families.train(
        tiny_dataset, "gru-p", 0, SETTINGS, tmp_path / "m.pt", tmp_path / "curve.csv", device="cpu", progress=False
    )
    assert summary["steps"] == 30 and math.isfinite(summary["final_loss"])
    agent = families.load_agent(tmp_path / "m.pt")
    assert agent.kind == "window" and agent.context_length == 3 and agent.model_name == "gru-p"

    # evaluated on the grid from the family's own initial targets, recorded in the evaluation
    evaluate_checkpoint(tmp_path / "m.pt", tiny_dataset, tmp_path / "e.parquet", DIVISIONS, progress=False)
    meta, arr = read_evaluation(tmp_path / "e.parquet")
    assert meta["model"] == "gru-p" and "target_regression" not in meta
    assert meta["initial_targets"].startswith("the data's best return")
    best = load_dataset(tiny_dataset).traj_returns.max(axis=0)
    np.testing.assert_array_equal(arr["target_return"], arr["preference"] * best)
    assert np.isfinite(arr["return"]).all()

    # the same settings and seed give the same weights: the family's randomness is the core's
    families.train(tiny_dataset, "gru-p", 0, SETTINGS, tmp_path / "again.pt", device="cpu", progress=False)
    first, again = (families.load_checkpoint(tmp_path / p)["state_dict"] for p in ("m.pt", "again.pt"))
    assert all(torch.equal(first[k], again[k]) for k in first)


def test_a_family_without_initial_targets_starts_from_peda_s_regression(tiny_dataset, tmp_path):
    from morl.conditioning import regression_targets

    settings = dict(SETTINGS, hidden=16, depth=1, steps=4)
    for key in ("context_length", "eval_context_length"):
        settings.pop(key)
    families.train(tiny_dataset, "rvs-p", 0, settings, tmp_path / "m.pt", device="cpu", progress=False)
    evaluate_checkpoint(tmp_path / "m.pt", tiny_dataset, tmp_path / "e.parquet", DIVISIONS, progress=False)
    meta, arr = read_evaluation(tmp_path / "e.parquet")
    ds = load_dataset(tiny_dataset)
    targets, record = regression_targets(arr["preference"], ds.traj_preferences, ds.traj_returns)
    assert meta["target_regression"] == record["target_regression"]
    np.testing.assert_array_equal(arr["target_return"], targets)


def test_every_metric_an_update_reports_is_a_column_of_the_curve(tiny_dataset, tmp_path):
    """TD3+BC reports its actor's loss on the steps it updates the actor (every second one)."""
    settings = dict(steps=6, batch_size=8, hidden=8, depth=1, checkpoint_every=3, policy_freq=2)
    families.train(
        tiny_dataset, "td3bc-p", 0, settings, tmp_path / "m.pt", tmp_path / "curve.csv", device="cpu", progress=False
    )
    with open(tmp_path / "curve.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:4] == ["step", "loss", "lr", "actor_loss"]
    # one step per row here: the actor is updated after steps 2, 4 and 6
    assert [r["actor_loss"] != "" for r in rows] == [False, True, False, True, False, True]
    assert all(math.isfinite(float(r["actor_loss"])) for r in rows if r["actor_loss"])


class Recorder:
    """A controller that keeps the generator each reset hands it and acts with zeros."""

    def __init__(self, act_dim):
        self.act_dim, self.generators = act_dim, []

    def reset(self, preferences, target_returns, generator=None):
        self.n = len(preferences)
        self.generators.append(generator)

    def act(self, obs):
        return np.zeros((self.n, self.act_dim), np.float32)

    def observe(self, actions, rewards):
        pass


def test_rollouts_hand_every_agent_a_generator_seeded_from_its_episodes():
    prefs = np.array([[0.2, 0.8], [0.7, 0.3]], np.float32)
    agent = Recorder(6)
    for seeds in ([1, 2], [1, 2], [1, 3]):
        rollout("MO-HalfCheetah-v2", agent, prefs, np.zeros_like(prefs), np.array(seeds))
    draws = [torch.rand(3, generator=g) for g in agent.generators]
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    assert torch.equal(torch.rand(3, generator=agent_generator(np.array([1, 3]))), draws[2])
