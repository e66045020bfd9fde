"""Shared fixtures: configs, and tiny real artifacts (behavior policy, dataset) built once per session."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest (and least disturbed by other processes) on one thread."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def smoke_config() -> dict:
    with open(ROOT / "configs" / "smoke.yaml") as f:
        return yaml.safe_load(f)


@pytest.fixture
def config(smoke_config) -> dict:
    """A fresh, mutable copy of the smoke config."""
    return copy.deepcopy(smoke_config)


@pytest.fixture(scope="session")
def tiny_policy(tmp_path_factory, smoke_config) -> Path:
    """A behavior policy for MO-HalfCheetah-v2 trained for a few hundred steps."""
    from morl.behavior import train_behavior

    out = tmp_path_factory.mktemp("behavior") / "policy.pt"
    cfg = dict(smoke_config["behavior"], total_steps=400, start_steps=200)
    train_behavior("MO-HalfCheetah-v2", cfg, out, progress=False)
    return out


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory, tiny_policy) -> Path:
    from morl.collect import collect_dataset

    out = tmp_path_factory.mktemp("data") / "amateur-high.parquet"
    collect_dataset(tiny_policy, "amateur", "high", 6, out, batch_size=4, seed=3, progress=False)
    return out


@pytest.fixture
def write_copy():
    """``write_copy(src, dest, env_id=None, extra_objective=False)``: the dataset ``src`` written to
    ``dest`` under another env id, or with a third objective (a copy of the first); returns ``dest``."""
    import numpy as np

    from morl.data import Dataset, load_dataset, write_dataset
    from morl.envs import physics_version

    def write(src, dest, env_id=None, extra_objective=False):
        ds = load_dataset(src)
        derived = ("n_obj", "obs_dim", "act_dim", "n_trajectories", "n_steps", "format_version")
        meta = {k: v for k, v in ds.meta.items() if k not in derived}
        if env_id is not None:
            meta.update(env_id=env_id, physics_version=physics_version(env_id))
        rewards, prefs = ds.rewards, ds.traj_preferences
        if extra_objective:
            rewards = np.hstack([rewards, rewards[:, :1]])
            prefs = np.hstack([prefs[:, :1] / 2, prefs[:, 1:], prefs[:, :1] / 2])
        write_dataset(dest, Dataset.from_arrays(ds.observations, ds.actions, rewards, prefs, ds.traj_lengths,
                                                next_observations=ds.next_observations, terminals=ds.terminals,
                                                timeouts=ds.timeouts, meta=meta))  # fmt: skip
        return dest

    return write
