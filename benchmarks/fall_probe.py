"""Why do trained models fall on the tasks with a termination rule while the data does not?

Four read-only checks on a collected dataset (a Parquet file of `morl collect`) and, for the last
three, a trained PEDA checkpoint (MORvS(P), MODT(P) or BC(P)):

``replay``       rebuild each trajectory's preference and environment seed the way
                 morl.collect draws them, replay the recorded actions from that reset in the
                 evaluation's stepper (BatchedEnv without next_seeds) and in one MOMujocoEnv, and
                 compare observations, rewards and termination with the file, step by step.
``falls``        roll the checkpoint out on the evaluation grid (one episode per point, the
                 evaluation's seeds and targets), record every state, and describe the episodes
                 that end early: which healthy condition failed, the last states' z-scores against
                 the dataset's state statistics, whether they hit the +-10 clip, how far they lie
                 from the data's states (nearest neighbour in normalised space), and whether the
                 falling points' preferences lie in the data's preference range.
                 ``--conditioning unweighted`` conditions MORvS on the unweighted R(w) (decremented by
                 the unweighted reward), the quantity `returns_to_go: peda` trains it on, instead of
                 the evaluation's w * R(w): a test of the conditioning mismatch as a cause.
                 ``--points data`` starts from data trajectories' own resets and preferences instead
                 of the grid, and ``--targets own`` conditions on each one's own return.
``takeover``     for the early-ending episodes of a ``falls --save`` file: the model's actions
                 against the behavior policy's on the model's own states, and the behavior policy
                 put in control k steps before the model's fall (can it still stand?).
``handoff``      the behavior policy acts for the first N steps of data trajectories' own resets,
                 then the checkpoint: does a start on the data's own states keep it standing?
``fit``          the checkpoint's action on the data's own states, preferences and training-time
                 returns-to-go, against the data's actions (unit action space), by time step, by
                 preference and near the ends of trajectories; for MODT also at the evaluation's
                 window with four kinds of return tokens (training's, known, evaluation's, zero).
``front``        for finished evaluations (``eval.parquet`` of the workflow): which episodes carry the
                 HV. The front's points (non-dominated returns) that ran to the cap, and the share
                 of the HV the full-length episodes carry alone; with the models' ``--dataset``,
                 also HV / B of all episodes, of the full-length ones, of those inside the data's
                 preference box and of those outside it.
``train``        train a checkpoint to probe (a short MORvS(P)/BC(P) run with PEDA's settings).

Run from the repository root, e.g.::

    python benchmarks/fall_probe.py replay --dataset D.parquet --trajectories 40
    python benchmarks/fall_probe.py train --dataset D.parquet --model rvs-p --steps 20000 --out /tmp/fp/rvs-p.pt
    python benchmarks/fall_probe.py falls --dataset D.parquet --checkpoint /tmp/fp/rvs-p.pt
    python benchmarks/fall_probe.py falls --dataset D.parquet --checkpoint /tmp/fp/rvs-p.pt --points data --targets own
    python benchmarks/fall_probe.py takeover --rollouts /tmp/fp/falls.npz --behavior behaviors/MO-Hopper-v3.pt
    python benchmarks/fall_probe.py handoff --dataset D.parquet --checkpoint /tmp/fp/rvs-p.pt --behavior B.pt
    python benchmarks/fall_probe.py fit --dataset D.parquet --checkpoint /tmp/fp/rvs-p.pt
    python benchmarks/fall_probe.py front --dataset D.parquet --evaluations run/seed*/eval.parquet

Every command is read-only on its inputs; ``train`` writes only ``--out`` (and its ``.partial``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from morl.data import load_dataset  # noqa: E402
from morl.envs import BatchedEnv, get_spec, make_env  # noqa: E402
from morl.preferences import default_divisions, sample_preferences, simplex_grid  # noqa: E402

HOPPER_DIMS = ["height", "torso", "thigh", "leg", "foot", "vx", "vz", "v_torso", "v_thigh", "v_leg", "v_foot"]
WALKER_DIMS = [
    "height", "torso", "thigh_r", "leg_r", "foot_r", "thigh_l", "leg_l", "foot_l",
    "vx", "vz", "v_torso", "v_thigh_r", "v_leg_r", "v_foot_r", "v_thigh_l", "v_leg_l", "v_foot_l",
]  # fmt: skip


def dim_names(env_id: str, obs_dim: int) -> list[str]:
    if "Hopper" in env_id:
        return HOPPER_DIMS
    if "Walker" in env_id:
        return WALKER_DIMS
    return [f"s{i}" for i in range(obs_dim)]


def failed_conditions(env_id: str, obs: np.ndarray) -> list[str]:
    """Which healthy conditions a state (observation = qpos[1:], clip(qvel)) violates."""
    out = []
    if "Hopper" in env_id:
        if not obs[0] > 0.4:
            out.append("height<=0.4")
        for i, name in zip(range(1, 5), ("torso", "thigh", "leg", "foot")):
            if not abs(obs[i]) < np.deg2rad(90.0):
                out.append(f"|{name}|>=90deg")
    elif "HalfCheetah" in env_id:
        if not abs(obs[1]) < np.deg2rad(50.0):
            out.append("|body angle|>=50deg")
    elif "Walker" in env_id:
        if not 0.8 < obs[0]:
            out.append("height<=0.8")
        if not obs[0] < 2.0:
            out.append("height>=2.0")
        if not -1.0 < obs[1] < 1.0:
            out.append("|torso|>=1rad")
    return out or ["none (truncated?)"]


def share(flags: np.ndarray, empty="n/a"):
    """The share of True in ``flags`` as a percentage string (a float with ``empty=None``); ``empty``
    when there are none."""
    if len(flags) == 0:
        return empty
    return float(flags.mean()) if empty is None else f"{flags.mean():.0%}"


def collection_draws(meta: dict, n: int, n_obj: int) -> tuple[np.ndarray, np.ndarray]:
    """The preferences and environment seeds morl.collect drew for trajectories 0..n-1: one
    generator seeded by the file's seed; the preferences first, then one seed per trajectory."""
    rng = np.random.default_rng(meta["seed"])
    prefs = sample_preferences(meta["entropy"], n, n_obj, rng, low=meta["pref_low"], high=meta["pref_high"])
    seeds = rng.integers(0, 2**31 - 1, size=n)
    return prefs.astype(np.float32), seeds


# --------------------------------------------------------------------------------------------- replay
def cmd_replay(args) -> dict:
    ds = load_dataset(args.dataset)
    meta, env_id = ds.meta, ds.meta["env_id"]
    spec = get_spec(env_id)
    prefs, seeds = collection_draws(meta, ds.n_trajectories, ds.n_obj)
    pref_match = bool(np.array_equal(prefs, ds.traj_preferences))
    print(
        f"{env_id}: {ds.n_trajectories} trajectories; preferences rebuilt from seed {meta['seed']}: "
        f"{'identical' if pref_match else 'DIFFERENT'} (max |diff| {np.abs(prefs - ds.traj_preferences).max():.3g})"
    )
    short = np.flatnonzero(ds.traj_lengths < spec.max_episode_steps)
    rest = np.setdiff1d(np.arange(ds.n_trajectories), short)
    chosen = np.concatenate([short, rest[: max(0, args.trajectories - len(short))]])
    print(
        f"replaying {len(chosen)} trajectories ({len(short)} that end before step {spec.max_episode_steps} in the data)"
    )
    B = len(chosen)
    starts, lengths = ds.traj_starts[chosen], ds.traj_lengths[chosen]
    max_obs_err = np.zeros(B)
    max_rew_err = np.zeros(B)
    first_diff = np.full(B, -1)
    replay_len = np.zeros(B, int)
    replay_term = np.zeros(B, bool)
    with BatchedEnv(env_id, B) as env:  # as evaluation builds it: no next_seeds, slots stop when done
        obs = env.reset([int(s) for s in seeds[chosen]])
        t = 0
        acts = np.zeros((B, ds.act_dim), np.float32)
        while not env.done:
            active = env.active
            for k in np.flatnonzero(active):
                if t < lengths[k]:
                    row = starts[k] + t
                    err = np.abs(obs[k] - ds.observations[row]).max()
                    max_obs_err[k] = max(max_obs_err[k], err)
                    if err > 0 and first_diff[k] < 0:
                        first_diff[k] = t
                    acts[k] = ds.actions[row]
                else:  # the data's trajectory ended, the replay goes on: hold the last action
                    acts[k] = ds.actions[starts[k] + lengths[k] - 1]
            obs, rew, term, trunc = env.step(acts)
            for k in np.flatnonzero(active):
                if t < lengths[k]:
                    row = starts[k] + t
                    max_rew_err[k] = max(max_rew_err[k], np.abs(rew[k] - ds.rewards[row]).max())
                    nerr = (
                        np.abs(obs[k] - ds.next_observations[row]).max()
                        if not (term[k] or trunc[k])
                        else np.abs(env.final_observations[k] - ds.next_observations[row]).max()
                    )
                    max_obs_err[k] = max(max_obs_err[k], nerr)
                if term[k] or trunc[k]:
                    replay_len[k] = t + 1
                    replay_term[k] = bool(term[k])
            t += 1
    data_term = np.array([bool(ds.terminals[starts[k] + lengths[k] - 1]) for k in range(B)])
    same_len = replay_len == lengths
    print(
        f"batched replay: max |obs - data| over all steps {max_obs_err.max():.3g}; "
        f"max |reward - data| {max_rew_err.max():.3g}; bit-identical trajectories {int((max_obs_err == 0).sum())}/{B}"
    )
    print(
        f"  same length as the data: {int(same_len.sum())}/{B}; terminated where the data terminated: "
        f"{int((replay_term == data_term).sum())}/{B}"
    )
    for k in range(min(B, len(short))):
        print(
            f"  traj {chosen[k]}: data length {lengths[k]} (terminal {data_term[k]}), replay length {replay_len[k]} "
            f"(terminated {replay_term[k]}), max obs err {max_obs_err[k]:.3g}"
        )
    # one trajectory through a single MOMujocoEnv, as rollout_sequential steps
    single = make_env(env_id)
    k = len(short)  # the first full-length trajectory replayed
    o, _ = single.reset(seed=int(seeds[chosen[k]]))
    err = 0.0
    for t in range(lengths[k]):
        err = max(err, float(np.abs(o - ds.observations[starts[k] + t]).max()))
        o, r, te, tr, _ = single.step(ds.actions[starts[k] + t])
        if te or tr:
            break
    print(
        f"single MOMujocoEnv replay of traj {chosen[k]}: max |obs - data| {err:.3g}, ended at step {t + 1} "
        f"(terminated {te}, truncated {tr})"
    )
    return {
        "preferences_rebuilt_identical": pref_match,
        "replayed": int(B),
        "max_obs_err": float(max_obs_err.max()),
        "max_rew_err": float(max_rew_err.max()),
        "bit_identical": int((max_obs_err == 0).sum()),
        "same_length": int(same_len.sum()),
        "single_env_max_obs_err": err,
    }


# --------------------------------------------------------------------------------------------- rollouts
class UnweightedTargets:
    """Wrap a PEDA agent so that it is conditioned on the unweighted return-to-go: g0 = R(w),
    lowered by r (not w * r) each step, as `returns_to_go: peda` trains MORvS."""

    def __init__(self, agent):
        self.agent = agent

    def reset(self, preferences, target_returns, generator=None):
        self.agent.reset(preferences, target_returns, generator)

    def act(self, obs):
        return self.agent.act(obs)

    def observe(self, actions, rewards):
        w = self.agent._w
        self.agent.observe(actions, rewards)
        # observe() lowered g by w * r; lower it by r instead
        r = torch.as_tensor(np.asarray(rewards), dtype=torch.float64)
        self.agent._g = self.agent._g + w * r - r


class WindowTargets:
    """Wrap a MODT agent so that its return tokens look like those `returns_to_go: peda` trains it on:
    unweighted rewards summed to the end of the window, the current (last) token holding a desired
    one-step reward R(w) / T. Token j of the context is then sum of the rewards received from step j
    on plus R(w) / T."""

    def __init__(self, agent, per_step):
        self.agent, self.per_step = agent, np.asarray(per_step, np.float64)

    def reset(self, preferences, target_returns, generator=None):
        self.agent.reset(preferences, self.per_step, generator)

    def act(self, obs):
        return self.agent.act(obs)

    def observe(self, actions, rewards):
        self.agent.observe(actions, rewards)
        r = torch.as_tensor(np.asarray(rewards), dtype=torch.float32) * self.agent.return_scale
        self.agent._ctx_returns = self.agent._ctx_returns + r[:, None, :]
        self.agent._g = torch.as_tensor(self.per_step, dtype=torch.float64)  # the next token


def cmd_falls(args) -> dict:
    from morl.conditioning import fit_return_regression
    from morl.families import load_agent
    from morl.rollout import episode_seeds
    from morl.runtime import torch_threads

    ds = load_dataset(args.dataset)
    env_id = ds.meta["env_id"]
    spec = get_spec(env_id)
    names = dim_names(env_id, ds.obs_dim)
    agent = load_agent(args.checkpoint)
    mean, std = agent.obs_mean.numpy(), agent.obs_std.numpy()
    from morl.normalisation import observation_stats

    dmean, dstd = observation_stats(ds.observations)
    print(
        f"checkpoint {args.checkpoint}: {agent.model_name}, {agent.training.get('steps')} steps; "
        f"its state statistics equal the dataset's: {np.array_equal(mean, dmean) and np.array_equal(std, dstd)}"
    )
    coef = fit_return_regression(ds.traj_preferences, ds.traj_returns)
    if args.points == "grid":  # the evaluation's grid, seeds and regression targets
        prefs = simplex_grid(spec.n_obj, default_divisions(spec.n_obj))
        seeds = episode_seeds(args.eval_seed, len(prefs), 1)[0]
        own = None
    else:  # data trajectories: their own preference, their own reset (collection's seed)
        _, all_seeds = collection_draws(ds.meta, ds.n_trajectories, ds.n_obj)
        pick = np.linspace(0, ds.n_trajectories - 1, args.n_data).round().astype(int)
        prefs = ds.traj_preferences[pick].astype(np.float64)
        seeds = all_seeds[pick]
        own = ds.traj_returns[pick]
    unweighted = prefs @ coef[:, :-1].T + coef[:, -1]  # R(w)
    if args.targets == "own" and own is None:
        raise SystemExit("--targets own needs --points data")
    raw = own if args.targets == "own" else unweighted
    if args.conditioning == "window":  # MODT: tokens as `peda` trains them (WindowTargets)
        targets, runner = raw, WindowTargets(agent, raw / spec.max_episode_steps)
    elif args.conditioning == "unweighted":  # g0 = R, lowered by r: what `peda` trains MORvS on
        targets, runner = raw, UnweightedTargets(agent)
    else:  # g0 = w * R, lowered by w * r: the evaluation's
        targets, runner = prefs * raw, agent
    from morl.families.peda import returns_to_go

    T = spec.max_episode_steps
    rtg = returns_to_go(ds.rewards, ds.traj_starts, ds.traj_lengths)
    left = np.repeat(ds.traj_lengths, ds.traj_lengths) - ds.steps
    avg = rtg / left[:, None]  # MORvS's training input (times return_scale) under `peda`
    q = np.quantile(avg, [0.0, 0.01, 0.5, 0.99, 1.0], axis=0)
    first = targets / T
    print(
        "MORvS's conditioning input g/(T - t) (raw units) per objective: training data min/1%/median/99%/max "
        + "; ".join(" ".join(f"{v:.2f}" for v in q[:, j]) for j in range(ds.n_obj))
    )
    print(
        "  at t = 0 in these rollouts min/median/max "
        + "; ".join(
            f"{first[:, j].min():.2f} {np.median(first[:, j]):.2f} {first[:, j].max():.2f}" for j in range(ds.n_obj)
        )
        + f"; points with an objective below the data's 1% quantile: {int((first < q[1]).any(1).sum())}/{len(first)}"
    )
    if getattr(agent, "is_transformer", False):
        K = (
            int(agent.training.get("settings", {}).get("context_length", 10))
            if isinstance(agent.training, dict)
            else 10
        )
        r = ds.rewards.astype(np.float64)
        c = np.cumsum(np.concatenate([np.zeros((1, ds.n_obj)), r]), 0)
        ends = np.minimum(np.arange(ds.n_steps) + K, np.repeat(ds.traj_starts + ds.traj_lengths, ds.traj_lengths))
        tok = c[ends] - c[np.arange(ds.n_steps)]  # the largest token of each training window position
        qt = np.quantile(tok, [0.5, 0.99, 1.0], axis=0)
        print(
            "MODT's return token (raw units): training windows median/99%/max "
            + "; ".join(" ".join(f"{v:.1f}" for v in qt[:, j]) for j in range(ds.n_obj))
            + "; evaluation's first token (w * R(w)) median/max "
            + "; ".join(
                f"{np.median(prefs[:, j] * unweighted[:, j]):.0f} {(prefs[:, j] * unweighted[:, j]).max():.0f}"
                for j in range(ds.n_obj)
            )
        )
    t0 = time.time()
    with torch_threads(1):
        # record the states with a stepper that keeps the terminal state: BatchedEnv without
        # next_seeds leaves a finished slot's last observation in place
        B = len(prefs)
        states = np.full((B, T + 1, spec.obs_dim), np.nan, np.float32)
        acts = np.full((B, T, spec.act_dim), np.nan, np.float32)
        returns = np.zeros((B, spec.n_obj))
        terminated = np.zeros(B, bool)
        with BatchedEnv(env_id, B) as env:
            obs = env.reset([int(s) for s in seeds])
            runner.reset(np.asarray(prefs, np.float32), np.asarray(targets, np.float32))
            t = 0
            while not env.done:
                active = env.active
                states[active, t] = obs[active]
                a = runner.act(obs)
                acts[active, t] = a[active]
                obs, rew, term, trunc = env.step(a)
                returns += rew
                terminated |= term
                ended = term | trunc
                states[ended, t + 1] = obs[ended]
                runner.observe(a, rew)
                t += 1
            lengths = env.lengths
    print(
        f"rolled out {B} {args.points} points in {time.time() - t0:.0f} s (targets: {args.targets} R, "
        f"conditioning: {args.conditioning})"
    )
    lo, hi = np.asarray(ds.meta["pref_low"]), np.asarray(ds.meta["pref_high"])
    inside = np.all((prefs >= lo - 1e-9) & (prefs <= hi + 1e-9), axis=1)
    early = lengths < T
    print(
        f"episodes ending before step {T}: {int(early.sum())}/{B} ({early.mean():.0%}); "
        f"inside the data's preference box {share(early[inside])} of {int(inside.sum())}, "
        f"outside {share(early[~inside])} of {int((~inside).sum())}"
    )
    # distance of each grid preference to the nearest data preference
    dpref = np.sqrt(((prefs[:, None, :] - ds.traj_preferences[None, :, :]) ** 2).sum(-1)).min(1)
    for lo_d, hi_d in ((0, 0.02), (0.02, 0.05), (0.05, 0.1), (0.1, 0.2), (0.2, 1.5)):
        sel = (dpref >= lo_d) & (dpref < hi_d)
        if sel.any():
            print(
                f"  nearest data preference at distance [{lo_d}, {hi_d}): {int(sel.sum())} points, "
                f"{early[sel].mean():.0%} end early, mean length {lengths[sel].mean():.0f}"
            )
    if early.any():
        print(
            f"  length of early episodes: min {lengths[early].min()}, median {int(np.median(lengths[early]))}, "
            f"max {lengths[early].max()}"
        )
    # which condition failed
    cond_counts: dict[str, int] = {}
    for k in np.flatnonzero(early):
        for c in failed_conditions(env_id, states[k, lengths[k]]):
            cond_counts[c] = cond_counts.get(c, 0) + 1
    print(f"failed healthy condition at the terminal state: {cond_counts}")
    # z-scores of the last states against the dataset statistics
    z = (states - dmean) / dstd
    data_z = (ds.observations - dmean) / dstd
    q = np.quantile(np.abs(data_z), [0.99, 0.999], axis=0)
    print(
        "per dimension: |z| of the data (99%, 99.9% quantiles, max) and of falling episodes' states "
        "(median over episodes of the max |z| in their last 10 steps before the terminal state; at the terminal state)"
    )
    last10 = (
        np.stack([np.nanmax(np.abs(z[k, max(0, lengths[k] - 10) : lengths[k]]), axis=0) for k in np.flatnonzero(early)])
        if early.any()
        else np.zeros((0, ds.obs_dim))
    )
    term_z = np.stack([np.abs(z[k, lengths[k]]) for k in np.flatnonzero(early)]) if early.any() else last10
    for i, n in enumerate(names):
        print(
            f"  {n:>9}: data {q[0, i]:5.2f} {q[1, i]:5.2f} {np.abs(data_z[:, i]).max():6.2f} | "
            f"falling last-10 {np.median(last10[:, i]) if len(last10) else np.nan:6.2f}  terminal "
            f"{np.median(term_z[:, i]) if len(term_z) else np.nan:6.2f}  (terminal above data max: "
            f"{int((term_z[:, i] > np.abs(data_z[:, i]).max()).sum()) if len(term_z) else 0})"
        )
    # the +-10 clip
    valid = ~np.isnan(z[..., 0])
    clip_hits = (np.abs(z) > 10).any(-1) & valid
    ep_hit = clip_hits.any(1)
    print(
        f"normalised states beyond +-10 (clipped): {int(clip_hits.sum())} of {int(valid.sum())} states; "
        f"episodes with any: {int(ep_hit[early].sum())}/{int(early.sum())} early, {int(ep_hit[~early].sum())}/{int((~early).sum())} full"
    )
    # nearest-neighbour distance to the data (normalised, clipped states) for states before a fall
    rng = np.random.default_rng(0)
    ref_idx = rng.choice(ds.n_steps, size=min(args.nn_ref, ds.n_steps), replace=False)
    ref = torch.from_numpy(np.clip(data_z[ref_idx], -10, 10).astype(np.float32))
    hold_idx = rng.choice(np.setdiff1d(np.arange(ds.n_steps), ref_idx), size=2000, replace=False)

    def nn_dist(x: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(np.clip(x, -10, 10).astype(np.float32))
        out = []
        for chunk in torch.split(x, 512):
            out.append(torch.cdist(chunk, ref).min(1).values)
        return torch.cat(out).numpy()

    base = nn_dist(data_z[hold_idx])
    print(
        f"nearest-neighbour distance to {len(ref_idx)} data states (normalised): held-out data states "
        f"median {np.median(base):.2f}, 95% {np.quantile(base, 0.95):.2f}, 99% {np.quantile(base, 0.99):.2f}"
    )
    result = {"early": int(early.sum()), "points": int(B), "conditions": cond_counts}
    if early.any():
        for back in (1, 5, 20, 50, 100):
            rows = [z[k, lengths[k] - back] for k in np.flatnonzero(early) if lengths[k] - back >= 0]
            d = nn_dist(np.stack(rows))
            print(
                f"  falling episodes, state {back:3d} step(s) before the end: median {np.median(d):.2f}, "
                f"share beyond the data's 99% {np.mean(d > np.quantile(base, 0.99)):.0%} (n={len(d)})"
            )
            result[f"nn_median_{back}_before_end"] = float(np.median(d))
        full_rows = z[~early, ::50].reshape(-1, ds.obs_dim)
        full_rows = full_rows[~np.isnan(full_rows[:, 0])]
        if len(full_rows):
            d = nn_dist(full_rows)
            print(
                f"  full-length episodes, every 50th state: median {np.median(d):.2f}, share beyond the data's 99% "
                f"{np.mean(d > np.quantile(base, 0.99)):.0%}"
            )
        # where on the way the episodes leave the data
        t_leave = []
        thr = np.quantile(base, 0.99)
        for k in np.flatnonzero(early):
            d = nn_dist(z[k, : lengths[k]])
            far = np.flatnonzero(d > thr)
            t_leave.append(lengths[k] - far[0] if len(far) else 0)
        t_leave = np.array(t_leave)
        print(
            f"  steps between a falling episode's first state beyond the data's 99% NN distance and its end: "
            f"median {np.median(t_leave):.0f}, quartiles {np.quantile(t_leave, 0.25):.0f}-{np.quantile(t_leave, 0.75):.0f}; "
            f"never beyond: {int((t_leave == 0).sum())}/{len(t_leave)}"
        )
    result.update({"inside_early": share(early[inside], None), "outside_early": share(early[~inside], None)})
    for label, sel in (("full-length", ~early), ("early-ending", early)):
        if sel.any():
            print(f"mean return of {label} episodes {returns[sel].mean(0).round(0)}")
    if args.save:
        np.savez_compressed(
            args.save,
            prefs=prefs,
            targets=targets,
            lengths=lengths,
            states=states,
            actions=acts,
            returns=returns,
            terminated=terminated,
            seeds=np.asarray(seeds),
            env_id=env_id,
        )
    return result


# --------------------------------------------------------------------------------------------- takeover
def cmd_takeover(args) -> dict:
    """For every early-ending episode of a ``falls --save`` file: its model actions replayed from its
    reset up to ``k`` steps before its end, then the behavior policy in control (same preference)
    until the episode ends; and the behavior's action on the model's states against the model's."""
    from morl.behavior import load_behavior
    from morl.data import file_sha256, read_meta

    f = np.load(args.rollouts)
    env_id = str(f["env_id"])
    spec = get_spec(env_id)
    T = spec.max_episode_steps
    policy = load_behavior(args.behavior, expect_env=env_id)
    if args.dataset:
        same = read_meta(args.dataset).get("behavior_sha256") == file_sha256(args.behavior)
        print(f"behavior file is the one the dataset was collected with: {same}")
    L, prefs, seeds, acts, states = f["lengths"], f["prefs"].astype(np.float32), f["seeds"], f["actions"], f["states"]
    early = np.flatnonzero(L < T)
    low, high = np.asarray(spec.act_low), np.asarray(spec.act_high)
    # labels: the behavior's action on the states the model visited, in unit action space
    by_back = {}
    for k in early:
        s = states[k, : L[k]]
        lab = np.clip(policy.act(s, np.repeat(prefs[k : k + 1], len(s), 0)), low, high) / high
        diff = acts[k, : L[k]] / high - lab
        for t in range(L[k]):
            by_back.setdefault(min((L[k] - t - 1) // 25, 7), []).append(diff[t])
    full = np.flatnonzero(L >= T)
    lab_full = []
    for k in full[:: max(1, len(full) // 50)]:
        s = states[k, :T]
        lab = np.clip(policy.act(s, np.repeat(prefs[k : k + 1], T, 0)), low, high) / high
        lab_full.append(acts[k, :T] / high - lab)
    print("model action - behavior action on the model's own states (unit action space), RMSE per dimension:")
    if lab_full:
        d = np.concatenate(lab_full)
        print(f"  full-length episodes: {np.sqrt(np.mean(d**2, 0)).round(3)}")
    for b in sorted(by_back):
        d = np.stack(by_back[b])
        print(
            f"  falling episodes, {25 * b}-{25 * b + 24} steps before the end: {np.sqrt(np.mean(d**2, 0)).round(3)} (n={len(d)})"
        )
    out = {}
    for back in args.back:
        rows = [k for k in early if L[k] - back >= 0]
        B = len(rows)
        if B == 0:
            print(f"behavior takes over {back:3d} steps before the model's fall: no episode falls that late")
            continue
        with BatchedEnv(env_id, B) as env:
            obs = env.reset([int(seeds[k]) for k in rows])
            t = 0
            while not env.done:
                a = np.zeros((B, spec.act_dim), np.float32)
                for i, k in enumerate(rows):
                    a[i] = acts[k, t] if t < L[k] - back else policy.act(obs[i : i + 1], prefs[k : k + 1])[0]
                obs, _, _, _ = env.step(a)
                t += 1
            lens = env.lengths
        stood = lens >= T
        out[back] = float(stood.mean())
        print(
            f"behavior takes over {back:3d} steps before the model's fall: {int(stood.sum())}/{B} episodes reach step {T}"
            f" (median end {int(np.median(lens))})"
        )
    return {str(k): v for k, v in out.items()}


# --------------------------------------------------------------------------------------------- handoff
def cmd_handoff(args) -> dict:
    """The behavior policy acts for the first N steps of data trajectories' own resets and
    preferences, then the checkpoint (conditioned on each trajectory's own return, lowered by what
    the behavior's steps earned) acts to the end: does a good start keep the model standing?"""
    from morl.behavior import load_behavior
    from morl.families import load_agent
    from morl.runtime import torch_threads

    ds = load_dataset(args.dataset)
    env_id = ds.meta["env_id"]
    spec = get_spec(env_id)
    T = spec.max_episode_steps
    policy = load_behavior(args.behavior, expect_env=env_id)
    agent = load_agent(args.checkpoint)
    _, all_seeds = collection_draws(ds.meta, ds.n_trajectories, ds.n_obj)
    pick = np.linspace(0, ds.n_trajectories - 1, args.n_data).round().astype(int)
    prefs = ds.traj_preferences[pick].astype(np.float32)
    seeds = all_seeds[pick]
    targets = prefs.astype(np.float64) * ds.traj_returns[pick]  # the evaluation's weighted form
    out = {}
    for first in args.first:
        with torch_threads(1), BatchedEnv(env_id, len(pick)) as env:
            obs = env.reset([int(x) for x in seeds])
            agent.reset(prefs, targets)
            t = 0
            while not env.done:
                a = agent.act(obs)
                if t < first:
                    a = np.clip(policy.act(obs, prefs), spec.act_low, spec.act_high).astype(np.float32)
                obs, rew, _, _ = env.step(a)
                agent.observe(a, rew)
                t += 1
            lengths = env.lengths
        early = lengths < T
        out[first] = float(early.mean())
        print(
            f"behavior for the first {first:3d} steps, then {agent.model_name}: {int(early.sum())}/{len(pick)} "
            f"episodes end before step {T} ({early.mean():.0%}); those that fall after the handoff: "
            f"{int((early & (lengths > first)).sum())}"
        )
    return {str(k): v for k, v in out.items()}


# --------------------------------------------------------------------------------------------- fit
def cmd_fit(args) -> dict:
    from morl.families import load_checkpoint
    from morl.families.peda import gather_batch, predict, prepare_tensors
    from morl.families.peda_agent import build_agent

    ds = load_dataset(args.dataset)
    ckpt = load_checkpoint(args.checkpoint)
    agent = build_agent(ckpt, torch.device("cpu"))
    model = agent.model.eval()
    stats = (ckpt["obs_mean"].numpy(), ckpt["obs_std"].numpy())
    data = prepare_tensors(
        ds,
        ckpt["return_scale"],
        rtg_definition=ckpt.get("returns_to_go", "peda"),
        stats=stats,
        act_low=ckpt["act_low"],
        act_high=ckpt["act_high"],
        max_episode_steps=ckpt["max_episode_steps"],
    )
    name = ckpt["model_name"]
    ctx = None if name.startswith("rvs") else int(ckpt["settings"]["context_length"])
    rng = np.random.default_rng(1)
    idx = np.sort(rng.choice(ds.n_steps, size=min(args.samples, ds.n_steps), replace=False))
    errs = []
    with torch.no_grad():
        for chunk in np.array_split(idx, max(1, len(idx) // 2048)):
            start = torch.from_numpy(chunk)
            if ctx is None:
                batch = gather_batch(data, start, None)
                pred = model.action_head.to_unit(predict(model, batch))
                target = batch["actions"]
            else:  # the window that ends at the step (what the agent sees when it acts there)
                first = torch.maximum(start - ctx + 1, torch.from_numpy(ds.traj_starts[ds.traj_ids[chunk]]))
                batch = gather_batch(data, first, ctx)
                pred = model.action_head.to_unit(predict(model, batch))
                if pred.dim() == 3:
                    pred = pred[torch.arange(len(chunk)), (start - first).long()]
                    target = data.actions[start]
                else:
                    target = data.actions[start]
                    # BC: its window must end at the step; gather_batch cuts at the trajectory end
            errs.append((pred - target).numpy())
    err = np.concatenate(errs)
    t = ds.steps[idx]
    L = ds.traj_lengths[ds.traj_ids[idx]]
    print(
        f"{name} on {len(idx)} dataset steps: unit-action MSE {np.mean(err**2):.4f}; "
        f"per dimension RMSE {np.sqrt(np.mean(err**2, 0)).round(3)}"
    )
    print(
        f"  data actions: per dimension std (unit) {data.actions.std(0).numpy().round(3)}; share at |a|>=0.99: "
        f"{(data.actions.abs() >= 0.99).float().mean(0).numpy().round(3)}"
    )
    for lo, hi in ((0, 10), (10, 50), (50, 200), (200, 400), (400, 480), (480, 500)):
        sel = (t >= lo) & (t < hi)
        if sel.any():
            print(f"  t in [{lo}, {hi}): RMSE {np.sqrt(np.mean(err[sel] ** 2)):.3f} (n={int(sel.sum())})")
    near_end = (L - t) <= 20
    short = L < 500
    if (near_end & short).any():
        print(
            f"  last 20 steps of the data's terminated trajectories: RMSE {np.sqrt(np.mean(err[near_end & short] ** 2)):.3f} "
            f"(n={int((near_end & short).sum())})"
        )
    w = ds.preferences[idx]
    for j in range(ds.n_obj):
        qs = np.quantile(w[:, j], [0, 0.25, 0.5, 0.75, 1.0])
        parts = []
        for a, b in zip(qs[:-1], qs[1:]):
            sel = (w[:, j] >= a) & (w[:, j] <= b)
            parts.append(f"[{a:.2f},{b:.2f}] {np.sqrt(np.mean(err[sel] ** 2)):.3f}")
        print(f"  by preference w{j} quartile: " + "; ".join(parts))
    if name.startswith("dt"):
        modt_token_check(ds, data, model, ckpt, idx)
    return {"mse": float(np.mean(err**2)), "rmse_dims": np.sqrt(np.mean(err**2, 0)).tolist()}


def modt_token_check(ds, data, model, ckpt, idx) -> None:
    """MODT acting at step c from the evaluation's window (the last K_eval steps, ending at c), with
    two kinds of return tokens: as `peda` trains them (the rewards summed from each step to the
    window's end, c included: r_c carries -|a_c|^2 in an energy objective) and as an evaluation can
    know them (the rewards received before c plus the trajectory's own return / T for step c)."""
    from morl.families.peda import predict

    K = int(ckpt["settings"]["eval_context_length"])
    scale = float(ckpt["return_scale"])
    T = int(ckpt["max_episode_steps"])
    c = torch.from_numpy(idx[ds.steps[idx] >= K - 1])
    pos = c[:, None] + torch.arange(-K + 1, 1)[None, :]  # (B, K) rows of the window
    r = torch.from_numpy(ds.rewards).double()
    win_r = r[pos]  # (B, K, n_obj)
    hindsight = win_r.flip(1).cumsum(1).flip(1)  # sum from j to c, c included
    own = torch.from_numpy(ds.traj_returns[ds.traj_ids[c.numpy()]]).double() / T
    known = hindsight - win_r[:, -1:, :] + own[:, None, :]  # r_c replaced by R / T
    csum = torch.cat([torch.zeros(1, r.shape[1], dtype=torch.float64), r.cumsum(0)])
    first = torch.from_numpy(ds.traj_starts[ds.traj_ids[c.numpy()]])
    received = csum[pos] - csum[first][:, None, :]  # rewards of the trajectory before each window step
    w = torch.from_numpy(ds.preferences[c.numpy()]).double()[:, None, :]
    R = own[:, None, :] * T
    evaluation = w * (R - received)  # the evaluation's weighted return-to-go, its own return as target
    acts = data.actions[pos].clone()
    acts[:, -1] = 0.0  # the current action token is not known (the agent feeds zeros)
    base = {
        "states": data.states[pos],
        "actions": acts,
        "preferences": data.preferences[pos],
        "timesteps": data.timesteps[pos],
        "mask": torch.ones(pos.shape, dtype=torch.bool),
    }
    target = data.actions[c]
    with torch.no_grad():
        for label, tok in (
            ("training tokens (hindsight, r_c included)", hindsight),
            ("tokens an evaluation can know", known),
            ("the evaluation's tokens w * (R - received)", evaluation),
            ("zero tokens", torch.zeros_like(known)),
        ):
            errs = []
            for sl in torch.split(torch.arange(len(c)), 2048):
                b = {k: (v[sl] if v is not None else None) for k, v in base.items()}
                b["returns_to_go"] = (tok[sl] * scale).float()
                errs.append((model.action_head.to_unit(predict(model, b))[:, -1] - target[sl]).numpy())
            e = np.concatenate(errs)
            print(f"  MODT at step c, window of {K}, {label}: RMSE per dimension {np.sqrt(np.mean(e**2, 0)).round(3)}")


# --------------------------------------------------------------------------------------------- train
def cmd_front(args) -> dict:
    import polars as pl

    from morl.metrics import hypervolume, pareto_front

    ds = load_dataset(args.dataset) if args.dataset else None
    b = hypervolume(ds.traj_returns) if ds is not None else None
    cap = int(ds.meta["max_episode_steps"]) if ds is not None else args.max_steps
    rows = []
    for path in args.evaluations:
        ev = pl.read_parquet(path)
        prefs = np.stack(ev["preference"].to_numpy())
        ret = np.stack(ev["return"].to_numpy())
        full = ev["length"].to_numpy() >= cap
        front = np.isin(np.arange(len(ret)), [np.flatnonzero((ret == f).all(1))[0] for f in pareto_front(ret)])
        hv_all = hypervolume(ret)
        row = {
            "evaluation": str(path),
            "points": len(ret),
            "full_length": int(full.sum()),
            "front_points": int(front.sum()),
            "front_full_length": int((front & full).sum()),
            "hv_full_length_only_over_hv": round(hypervolume(ret[full]) / hv_all, 4) if full.any() else 0.0,
        }
        if ds is not None:
            lo, hi = ds.traj_preferences.min(0), ds.traj_preferences.max(0)
            inside = np.all((prefs >= lo - 1e-9) & (prefs <= hi + 1e-9), axis=1)

            def hv_of(mask: np.ndarray, ret: np.ndarray = ret) -> float:
                return round(hypervolume(ret[mask]) / b, 3) if mask.any() else 0.0

            row |= {
                "inside_box": int(inside.sum()),
                "front_inside": int((front & inside).sum()),
                "hv_over_b": hv_of(np.ones(len(ret), bool)),
                "hv_over_b_full_length_only": hv_of(full),
                "hv_over_b_inside_only": hv_of(inside),
                "hv_over_b_outside_only": hv_of(~inside),
            }
        rows.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items()))
    return {"dataset": args.dataset, "b": b, "rows": rows}


def cmd_train(args) -> dict:
    from morl.families import train
    from morl.runtime import torch_threads

    settings = {
        "steps": args.steps, "batch_size": 64, "lr": args.lr, "weight_decay": 1e-3, "warmup_steps": args.warmup,
        "return_scale": 1e-3, "checkpoint_every": args.checkpoint_every, "hidden": 512, "depth": 3, "embed_dim": 64, "n_layer": 2,
        "n_head": 1, "dropout": 0.1, "context_length": 10, "eval_context_length": 5, "grad_clip": 0.25,
        "returns_to_go": "peda", "statistics_from": args.statistics_from,
    }  # fmt: skip
    with torch_threads(1):
        return train(args.dataset, args.model, args.seed, settings, args.out, device="cpu", progress=False)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay")
    r.add_argument("--dataset", required=True)
    r.add_argument("--trajectories", type=int, default=40)
    f = sub.add_parser("falls")
    f.add_argument("--dataset", required=True, help="the expert-high dataset the checkpoint was trained on")
    f.add_argument("--checkpoint", required=True)
    f.add_argument(
        "--points",
        choices=("grid", "data"),
        default="grid",
        help="grid: the evaluation's preference grid and seeds; data: --n-data trajectories of the "
        "dataset, each from its own preference and reset",
    )
    f.add_argument("--n-data", type=int, default=325)
    f.add_argument(
        "--targets",
        choices=("regression", "own"),
        default="regression",
        help="regression: R(w) of the evaluation's fit; own: the data trajectory's own return",
    )
    f.add_argument(
        "--conditioning",
        choices=("weighted", "unweighted", "window"),
        default="weighted",
        help="weighted: g0 = w * R lowered by w * r (the evaluation's); unweighted: g0 = R lowered "
        "by r (what returns_to_go: peda trains MORvS on); window: MODT's return tokens as peda trains "
        "them (WindowTargets)",
    )
    f.add_argument("--eval-seed", type=int, default=2023)
    f.add_argument("--nn-ref", type=int, default=100_000)
    f.add_argument("--save", default=None, help="write the recorded rollouts to this .npz")
    k = sub.add_parser("takeover")
    k.add_argument("--rollouts", required=True, help="a falls --save file")
    k.add_argument("--behavior", required=True)
    k.add_argument("--dataset", default=None, help="to check the behavior file is the data's")
    k.add_argument("--back", type=int, nargs="+", default=[1, 5, 20, 50, 100])
    h = sub.add_parser("handoff")
    h.add_argument("--dataset", required=True)
    h.add_argument("--checkpoint", required=True)
    h.add_argument("--behavior", required=True)
    h.add_argument("--n-data", type=int, default=325)
    h.add_argument("--first", type=int, nargs="+", default=[0, 10, 30, 100, 200])
    b = sub.add_parser("fit")
    b.add_argument("--dataset", required=True)
    b.add_argument("--checkpoint", required=True)
    b.add_argument("--samples", type=int, default=50_000)
    fr = sub.add_parser("front")
    fr.add_argument(
        "--dataset",
        default=None,
        help="the dataset the evaluated models were trained on: its B, preference box and episode cap "
        "(without it: the share of the HV the full-length episodes carry only)",
    )
    fr.add_argument("--max-steps", type=int, default=500, help="the episode cap, without --dataset")
    fr.add_argument("--evaluations", required=True, nargs="+", help="eval.parquet files of the workflow")
    t = sub.add_parser("train")
    t.add_argument("--dataset", required=True)
    t.add_argument("--model", default="rvs-p")
    t.add_argument("--steps", type=int, default=20_000)
    t.add_argument("--lr", type=float, default=1e-4)
    t.add_argument("--warmup", type=int, default=10_000)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument(
        "--statistics-from",
        choices=("expert-high", "dataset"),
        default="expert-high",
        help="expert-high (PEDA's) needs the env's expert-high dataset as --dataset",
    )
    t.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        help="write a resumable partial state this often; rerunning the same command resumes it",
    )
    t.add_argument("--out", required=True)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    commands = {
        "replay": cmd_replay,
        "falls": cmd_falls,
        "takeover": cmd_takeover,
        "handoff": cmd_handoff,
        "fit": cmd_fit,
        "front": cmd_front,
        "train": cmd_train,
    }
    out = commands[args.cmd](args)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
