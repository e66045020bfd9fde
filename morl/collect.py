"""Dataset collection following the D4MORL recipe (reference §2).

For each trajectory a preference is drawn from the dataset's preference distribution (high,
medium or low entropy) inside the preference range the behavior policy covers; the behavior
policy then acts for one episode with that preference:

* **expert**: the policy's deterministic action;
* **amateur**: per step, with probability 0.35 the deterministic action, otherwise the
  deterministic action times one factor drawn from U(0.35, 1.65) (for Swimmer the 0.35 branch is a
  uniformly random action instead); the result is clipped to the action bounds.

Episodes run ``batch_size`` at a time in a :class:`~morl.vector.BatchedEnv`, with one policy forward
per step for the whole batch. Every random draw comes from one generator seeded by ``seed``, so the
same seed and behavior checkpoint give the same file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from morl import __version__
from morl.behavior import BehaviorPolicy
from morl.data import Dataset, file_sha256, write_dataset
from morl.envs import get_spec
from morl.preferences import ENTROPY_LEVELS, sample_preferences
from morl.progress import Progress, log
from morl.vector import BatchedEnv

QUALITIES = ("expert", "amateur")
ENTROPIES = ENTROPY_LEVELS
AMATEUR_KEEP_PROB = 0.35
AMATEUR_FACTOR = (0.35, 1.65)
# Environments whose amateur "keep" branch is a uniformly random action (D4MORL's Swimmer rule).
AMATEUR_RANDOM_BRANCH = frozenset({"MO-Swimmer-v2"})


def amateur_actions(det: np.ndarray, env_id: str, low: np.ndarray, high: np.ndarray, rng: np.random.Generator):
    """Perturb a batch of deterministic actions by the amateur rule."""
    n = det.shape[0]
    keep = rng.random(n) < AMATEUR_KEEP_PROB
    factor = rng.uniform(*AMATEUR_FACTOR, size=(n, 1)).astype(np.float32)
    out = det * factor
    if env_id in AMATEUR_RANDOM_BRANCH:
        out[keep] = rng.uniform(low, high, size=(int(keep.sum()), det.shape[1]))
    else:
        out[keep] = det[keep]
    return np.clip(out, low, high).astype(np.float32)


def collect_dataset(
    policy_path: str | os.PathLike,
    quality: str,
    entropy: str,
    n_trajectories: int,
    output: str | os.PathLike,
    batch_size: int = 100,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, Any]:
    """Roll out the behavior policy at ``policy_path`` for ``n_trajectories`` episodes; write ``output``."""
    if quality not in QUALITIES:
        raise ValueError(f"unknown quality {quality!r}; expected one of {QUALITIES}")
    if entropy not in ENTROPIES:
        raise ValueError(f"unknown entropy {entropy!r}; expected one of {ENTROPIES}")
    if n_trajectories < 1 or batch_size < 1:
        raise ValueError("n_trajectories and batch_size must be positive")
    policy = BehaviorPolicy(policy_path)
    env_id = policy.env_id
    spec = get_spec(env_id)
    low, high = policy.act_low, policy.act_high
    rng = np.random.default_rng(seed)
    B = min(batch_size, n_trajectories)
    env = BatchedEnv(env_id, B)
    T = spec.max_episode_steps

    pieces: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "act", "rew", "next_obs", "term", "tout")}
    lengths: list[np.ndarray] = []
    traj_prefs: list[np.ndarray] = []
    bar = Progress(n_trajectories, f"collect {env_id} {quality}-{entropy}", unit="traj", enabled=progress)
    done_count = 0
    while done_count < n_trajectories:
        n = min(B, n_trajectories - done_count)
        prefs = sample_preferences(entropy, B, spec.n_obj, rng, low=policy.pref_low, high=policy.pref_high)
        prefs = prefs.astype(np.float32)
        seeds = rng.integers(0, 2**31 - 1, size=B)
        obs = env.reset(seeds)
        buf_obs = np.zeros((T, B, spec.obs_dim), np.float32)
        buf_act = np.zeros((T, B, len(low)), np.float32)
        buf_rew = np.zeros((T, B, spec.n_obj), np.float32)
        buf_next = np.zeros((T, B, spec.obs_dim), np.float32)
        buf_term = np.zeros((T, B), bool)
        buf_tout = np.zeros((T, B), bool)
        t = 0
        while not env.done:
            act = policy.act(obs, prefs)
            if quality == "amateur":
                act = amateur_actions(act, env_id, low, high, rng)
            else:
                act = np.clip(act, low, high)
            buf_obs[t], buf_act[t] = obs, act
            obs, rew, term, trunc = env.step(act)
            buf_rew[t], buf_next[t], buf_term[t], buf_tout[t] = rew, obs, term, trunc
            t += 1
        lens = env.lengths[:n].astype(np.int64)
        # time-major (T, B, ...) -> trajectory-major rows, keeping each slot's first len steps
        mask = np.arange(T)[None, :] < lens[:, None]  # (n, T)
        for key, buf in (("obs", buf_obs), ("act", buf_act), ("rew", buf_rew), ("next_obs", buf_next),
                         ("term", buf_term), ("tout", buf_tout)):  # fmt: skip
            pieces[key].append(np.swapaxes(buf[:, :n], 0, 1)[mask])
        lengths.append(lens)
        traj_prefs.append(prefs[:n])
        done_count += n
        bar.update(n, steps=int(sum(int(x.sum()) for x in lengths)))
    bar.close()

    meta = {
        "env_id": env_id,
        "quality": quality,
        "entropy": entropy,
        "seed": int(seed),
        "max_episode_steps": T,
        "behavior_path": str(policy_path),
        "behavior_sha256": file_sha256(policy_path),
        "pref_low": policy.pref_low.tolist(),
        "pref_high": policy.pref_high.tolist(),
        "morl_version": __version__,
    }
    ds = Dataset.from_arrays(
        np.concatenate(pieces["obs"]),
        np.concatenate(pieces["act"]),
        np.concatenate(pieces["rew"]),
        np.concatenate(traj_prefs),
        np.concatenate(lengths),
        next_observations=np.concatenate(pieces["next_obs"]),
        terminals=np.concatenate(pieces["term"]),
        timeouts=np.concatenate(pieces["tout"]),
        meta=meta,
    )
    write_dataset(output, ds)
    summary = {
        "env_id": env_id, "quality": quality, "entropy": entropy, "trajectories": ds.n_trajectories,
        "steps": ds.n_steps, "mean_length": float(ds.traj_lengths.mean()),
        "mean_return": ds.traj_returns.mean(0).round(1).tolist(), "output": str(output),
    }  # fmt: skip
    log.info("collected %s", summary)
    return summary
