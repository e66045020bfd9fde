"""Dataset collection following the D4MORL recipe (docs/protocol.md, "Datasets").

For each trajectory a preference is drawn from the dataset's preference distribution (high,
medium or low entropy) inside the preference range the behavior policy covers; the behavior
policy then acts for one episode with that preference:

* **expert**: the policy's deterministic action;
* **amateur**: per step, with probability 0.35 the deterministic action, otherwise the
  deterministic action times one factor drawn from U(0.35, 1.65) (for Swimmer the 0.35 branch is a
  uniformly random action instead); the result is clipped to the action bounds.

Episodes run in a :class:`~morl.envs.batched.BatchedEnv` of ``batch_size`` slots that restart as soon as
their episode ends (no slot waits for the longest episode of a batch), with one policy forward per
step for all running slots.  Every random draw comes from one generator seeded by ``seed``, so the
same seed and behavior checkpoint give the same file, whatever the number of workers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from morl import __version__
from morl.behavior import load_behavior
from morl.data import Dataset, file_sha256, write_dataset
from morl.envs import BatchedEnv, get_spec, physics_version
from morl.errors import InputError
from morl.preferences import sample_preferences
from morl.progress import Progress, log
from morl.vocabulary import ENTROPIES, QUALITIES

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


def recorded_policy_path(policy_path: str | os.PathLike) -> str:
    """The behavior policy's path as a dataset records it: relative to this checkout where the
    policy lies inside it (a shipped policy: ``behaviors/<env>.pt``), else as given. A dataset then
    does not carry the folder of the checkout that collected it, so the same collection in two
    checkouts writes the same bytes and its SHA-256 names the data, not the folder."""
    checkout = Path(__file__).resolve().parent.parent
    path = Path(policy_path).resolve()
    return path.relative_to(checkout).as_posix() if path.is_relative_to(checkout) else str(policy_path)


def collect_dataset(
    policy_path: str | os.PathLike,
    quality: str,
    entropy: str,
    n_trajectories: int,
    output: str | os.PathLike,
    batch_size: int = 100,
    seed: int = 0,
    progress: bool = True,
    workers: int = 1,
    expect_env: str | None = None,
) -> dict[str, Any]:
    """Roll out the behavior policy at ``policy_path`` for ``n_trajectories`` episodes; write ``output``.

    ``expect_env``: if given, a behavior policy of another env id is refused.

    ``batch_size`` slots run in lockstep and restart as soon as their episode ends, until every
    trajectory has been started; ``workers`` cores step the physics (the file does not depend
    on it).  Trajectory ``k`` has the ``k``-th preference and environment seed drawn from ``seed``.
    """
    if quality not in QUALITIES:
        raise InputError(f"unknown quality {quality!r}; expected one of {QUALITIES}")
    if entropy not in ENTROPIES:
        raise InputError(f"unknown entropy {entropy!r}; expected one of {ENTROPIES}")
    if n_trajectories < 1 or batch_size < 1:
        raise InputError("n_trajectories and batch_size must be positive")
    policy = load_behavior(policy_path, expect_env=expect_env)
    env_id = policy.env_id
    spec = get_spec(env_id)
    low, high = policy.act_low, policy.act_high
    rng = np.random.default_rng(seed)
    N = int(n_trajectories)
    prefs = sample_preferences(entropy, N, spec.n_obj, rng, low=policy.pref_low, high=policy.pref_high)
    prefs = prefs.astype(np.float32)
    seeds = rng.integers(0, 2**31 - 1, size=N).tolist()
    B = min(batch_size, N)

    # One record per step taken: (episode, step index, obs, action, reward, next obs, flags).
    chunks: dict[str, list[np.ndarray]] = {k: [] for k in ("ep", "t", "obs", "act", "rew", "next_obs", "term", "tout")}
    bar = Progress(N, f"collect {env_id} {quality}-{entropy}", unit="traj", enabled=progress)
    steps = 0
    with BatchedEnv(env_id, B, num_workers=workers) as env:
        obs = env.reset(seeds[:B], next_seeds=seeds[B:])
        actions = np.zeros((B, spec.act_dim), np.float32)
        while not env.done:
            slots = np.flatnonzero(env.active)
            episodes, t = env.episode_ids[slots], env.lengths[slots]
            act = policy.act(obs[slots], prefs[episodes])
            if quality == "amateur":
                act = amateur_actions(act, env_id, low, high, rng)
            else:
                act = np.clip(act, low, high)
            actions[slots] = act
            next_obs, rew, term, trunc = env.step(actions)
            for key, value in (
                ("ep", episodes),
                ("t", t),
                ("obs", obs[slots]),
                ("act", act),
                ("rew", rew[slots]),
                ("next_obs", env.final_observations[slots]),
                ("term", term[slots]),
                ("tout", trunc[slots]),
            ):
                chunks[key].append(value)
            obs = next_obs
            steps += len(slots)
            ended = int((term[slots] | trunc[slots]).sum())
            if ended:
                bar.update(ended, steps=steps)
    bar.close()

    # Trajectory-major order: episode by episode, each in step order (one field at a time, so the
    # peak is one extra copy of one field).
    ep = np.concatenate(chunks.pop("ep"))
    t = np.concatenate(chunks.pop("t"))
    order = np.lexsort((t, ep))
    lengths = np.bincount(ep, minlength=N).astype(np.int64)
    fields = {}
    for key in ("obs", "act", "rew", "next_obs", "term", "tout"):
        fields[key] = np.concatenate(chunks.pop(key))[order]
    del ep, t, order

    meta = {
        "env_id": env_id,
        "physics_version": physics_version(env_id),
        "quality": quality,
        "entropy": entropy,
        "seed": int(seed),
        "max_episode_steps": spec.max_episode_steps,
        "behavior_path": recorded_policy_path(policy_path),
        "behavior_sha256": file_sha256(policy_path),
        "behavior_method": policy.meta.get("method", "td3"),
        "pref_low": policy.pref_low.tolist(),
        "pref_high": policy.pref_high.tolist(),
        "morl_version": __version__,
    }
    ds = Dataset.from_arrays(
        fields.pop("obs"),
        fields.pop("act"),
        fields.pop("rew"),
        prefs,
        lengths,
        next_observations=fields.pop("next_obs"),
        terminals=fields.pop("term"),
        timeouts=fields.pop("tout"),
        meta=meta,
    )
    write_dataset(output, ds)
    summary = {
        "env_id": env_id,
        "quality": quality,
        "entropy": entropy,
        "trajectories": ds.n_trajectories,
        "steps": ds.n_steps,
        "mean_length": float(ds.traj_lengths.mean()),
        "mean_return": ds.traj_returns.mean(0).round(1).tolist(),
        "output": str(output),
    }
    log.info("collected %s", summary)
    return summary
