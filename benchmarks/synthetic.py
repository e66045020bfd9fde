"""A synthetic, learnable dataset of HalfCheetah's sizes, for benchmarks that need no collection.

Actions are a fixed smooth function of state and preference (plus a little noise), so training
loss falls as it does on real data, and the file goes through the real Parquet format. Each
trajectory starts at the named task's rest observation (within its reset noise), so the file passes
the loader's check that trajectories start at a reset state of that task.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from morl.data import Dataset, write_dataset
from morl.envs import get_spec, is_d4morl_task, rest_observation


def synthetic_dataset(path: str | Path, n_traj: int = 200, length: int = 500, obs_dim: int = 17, act_dim: int = 6,
                      n_obj: int = 2, seed: int = 0, env_id: str = "MO-HalfCheetah-v2") -> Path:  # fmt: skip
    rng = np.random.default_rng(seed)
    n = n_traj * length
    prefs = rng.dirichlet(np.ones(n_obj), size=n_traj)
    obs = rng.normal(size=(n, obs_dim)).astype(np.float32)
    if is_d4morl_task(env_id):
        rest = rest_observation(get_spec(env_id))
        obs[::length] = (rest + rng.uniform(-0.005, 0.005, size=(n_traj, obs_dim))).astype(np.float32)
    w = np.repeat(prefs, length, axis=0)
    W_s = rng.normal(size=(obs_dim, act_dim)) / np.sqrt(obs_dim)
    W_w = rng.normal(size=(n_obj, act_dim))
    actions = np.tanh(obs @ W_s + w @ W_w + 0.05 * rng.normal(size=(n, act_dim)))
    rewards = np.stack([1 + actions[:, 0], 5 - (actions**2).sum(1)] + [np.ones(n)] * (n_obj - 2), axis=1)
    timeouts = np.zeros(n, bool)
    timeouts[length - 1 :: length] = True
    ds = Dataset.from_arrays(obs, actions, rewards, prefs, np.full(n_traj, length), timeouts=timeouts,
                             meta={"env_id": env_id, "quality": "expert", "entropy": "high", "seed": seed,
                                   "max_episode_steps": 500, "synthetic": True})  # fmt: skip
    path = Path(path)
    write_dataset(path, ds)
    return path
