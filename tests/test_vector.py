"""BatchedEnv with automatic resets (collection) and several threads: same episodes as single envs."""

import numpy as np
import pytest

from morl.envs import BatchedEnv, MOMujocoEnv, get_spec


def _single_episode(env_id, seed, actions):
    env = MOMujocoEnv(env_id)
    obs, _ = env.reset(seed=seed)
    steps = []
    for a in actions:
        nxt, rew, term, trunc, _ = env.step(a)
        steps.append((obs, rew, nxt, term, trunc))
        obs = nxt
        if term or trunc:
            break
    return steps


def _batched_episodes(env_id, B, seeds, table, num_workers):
    """Run len(seeds) episodes on B auto-resetting slots; episode k is fed table[k, t] at its step t."""
    episodes = {}
    with BatchedEnv(env_id, B, num_workers=num_workers) as benv:
        obs = benv.reset(seeds[:B], next_seeds=seeds[B:])
        assert benv.episode_ids.tolist() == list(range(B))
        started = list(range(B))
        while not benv.done:
            ids, t, active = benv.episode_ids, benv.lengths, benv.active
            actions = np.zeros((B, table.shape[2]))
            actions[active] = table[ids[active], t[active]]
            nxt, rew, term, trunc = benv.step(actions)
            final = benv.final_observations
            for slot in np.flatnonzero(active):
                episodes.setdefault(int(ids[slot]), []).append(
                    (obs[slot], rew[slot], final[slot], term[slot], trunc[slot])
                )
            new_ids = benv.episode_ids
            for slot in np.flatnonzero(active & (term | trunc)):
                if new_ids[slot] >= 0:  # restarted: the row holds the new episode's first observation
                    started.append(int(new_ids[slot]))
                    assert benv.lengths[slot] == 0 and not benv.returns[slot].any()
                else:
                    assert not benv.active[slot]
            obs = nxt
    return episodes, started


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_autoreset_runs_every_seed_once_and_matches_single_envs(num_workers):
    env_id, B = "MO-Hopper-v3", 3
    seeds = [5, 6, 7, 8, 9, 10, 11]
    act_dim = get_spec(env_id).act_dim
    # Large actions: the hopper falls after a few dozen steps, at different times per episode.
    table = np.random.default_rng(0).uniform(-4, 4, size=(len(seeds), 500, act_dim))
    episodes, started = _batched_episodes(env_id, B, seeds, table, num_workers)
    assert sorted(episodes) == list(range(len(seeds)))
    assert started == list(range(len(seeds)))  # numbered in the order they start
    for k, seed in enumerate(seeds):
        single = _single_episode(env_id, seed, table[k])
        batched = episodes[k]
        assert len(batched) == len(single), f"episode {k}: {len(batched)} vs {len(single)} steps"
        for (o, r, n, te, tr), (bo, br, bn, bte, btr) in zip(single, batched):
            np.testing.assert_array_equal(bo, o)
            np.testing.assert_array_equal(br, r)
            np.testing.assert_array_equal(bn, n)  # final observation, not the next episode's first
            assert (bte, btr) == (te, tr)
        assert single[-1][3] or single[-1][4]


def test_autoreset_restarted_row_holds_the_new_episodes_first_observation():
    env_id = "MO-Hopper-v3"
    with BatchedEnv(env_id, 1) as benv:
        benv.reset([0], next_seeds=[42])
        while True:
            obs, _, term, trunc = benv.step(np.full((1, 3), 4.0))
            if term[0] or trunc[0]:
                break
        first = MOMujocoEnv(env_id).reset(seed=42)[0]
        np.testing.assert_array_equal(obs[0], first)
        assert not np.array_equal(benv.final_observations[0], first)
        assert benv.episode_ids.tolist() == [1] and benv.active.tolist() == [True]


def test_d4morl_tasks_step_on_threads_in_this_process_and_close_cleanly():
    benv = BatchedEnv("MO-HalfCheetah-v2", 6, num_workers=3)
    assert benv._workers == [] and benv._group.threads == 3  # mujoco.rollout's C++ threads
    benv.reset([0, 1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="non-negative"):
        benv.reset([0, 1, 2, 3, 4, -1])
    benv.step(np.zeros((6, 6)))
    benv.close()
    benv.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        benv.step(np.zeros((6, 6)))
    # More workers than slots: one thread per slot.
    with BatchedEnv("MO-HalfCheetah-v2", 2, num_workers=8) as small:
        assert small.num_workers == 2 and small._group.threads == 2
        small.reset([0, 1])
        small.step(np.zeros((2, 6)))
    with pytest.raises(ValueError, match="num_workers"):
        BatchedEnv("MO-HalfCheetah-v2", 2, num_workers=0)


@pytest.fixture(scope="module")
def hopper_policy(tmp_path_factory, smoke_config):
    """An untrained-ish Hopper behavior policy: its episodes end early, at different times."""
    from morl.behavior import train_behavior

    out = tmp_path_factory.mktemp("hopper") / "policy.pt"
    cfg = dict(smoke_config["behavior"], total_steps=300, start_steps=200)
    train_behavior("MO-Hopper-v3", cfg, out, progress=False)
    return out


def test_collection_restarts_slots_and_does_not_depend_on_workers(tmp_path, hopper_policy):
    from morl.collect import collect_dataset
    from morl.data import load_dataset

    paths = [tmp_path / "w1.parquet", tmp_path / "w2.parquet"]
    for workers, path in zip((1, 2), paths):
        collect_dataset(
            hopper_policy, "amateur", "high", 9, path, batch_size=4, seed=5, progress=False, workers=workers
        )
    a, b = (load_dataset(p) for p in paths)
    for name in ("observations", "next_observations", "actions", "rewards", "preferences", "terminals", "timeouts"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.n_trajectories == 9 and len(set(a.traj_lengths.tolist())) > 1 and a.traj_lengths.max() < 500
    # Within a trajectory each step starts where the previous one ended; restarts never leak the
    # next episode's first observation into next_observations.
    ends = a.traj_starts + a.traj_lengths - 1
    inner = np.setdiff1d(np.arange(a.n_steps), ends)
    np.testing.assert_array_equal(a.next_observations[inner], a.observations[inner + 1])
    assert np.all(a.terminals[ends] | a.timeouts[ends])
    assert (a.terminals | a.timeouts).sum() == a.n_trajectories
    # Each episode's first observation is a fresh reset state (near the model's initial pose).
    from morl.envs import MOMujocoEnv

    first = MOMujocoEnv("MO-Hopper-v3").reset(seed=0)[0]
    assert np.abs(a.observations[a.traj_starts] - first).max() < 0.05
