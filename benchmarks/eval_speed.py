"""Evaluation speed: the batched evaluator against a sequential reference and the hardware floor.

For each model (default MORvS(P) and MODT(P) at paper size: hidden 512 depth 3; embed 512,
3 layers, 1 head, context 20, evaluation context 5), on MO-HalfCheetah-v2 and the full
preference grid (501 points), in one run:

- reference: :func:`morl.rollout.rollout_sequential`, the original's style (one
  ``MOMujocoEnv``, one policy call with batch size 1 per step, preference after preference).
  It is timed on ``--points`` points spread over the grid and extrapolated linearly, per env
  step, to the env steps of the full grid (the output says so);
- batched: :func:`morl.evaluate.evaluate_agent` on the full grid (one ``BatchedEnv``, one forward
  per step for all points);
- floor: raw MuJoCo stepping (``mujoco.mj_step(model, data, nstep=frame_skip)`` for every env
  step of the batched run, replaying its actions from its initial states, nothing else in the
  loop) plus the same batched forward passes alone (same shapes, synthetic inputs), timed apart;
- for every model the forward passes' FLOPs (``torch.utils.flop_counter``) and achieved FLOP
  rate, against the rate of a large ``torch.matmul`` on this machine.

MODT at paper size does ~70 TFLOP of forward passes over the full grid (~15 min on one core, for
the batched run alone, and as much again for its floor), so by default MODT is timed on episodes
cut at ``--horizon`` steps (a copy of the task registered with ``max_episode_steps`` = horizon;
the agents still see T = 500) and every time is extrapolated linearly per env step to full
500-step episodes. The output says which numbers are extrapolated and from what.

The weights are untrained (random initialisation, seed 0): the work per step does not depend on
them, but how long HalfCheetah episodes last does (an episode ends when the body flips), so the
env-step count is printed. ``torch.set_num_threads(--threads)``; MuJoCo runs on one thread.

    python benchmarks/eval_speed.py [--threads 1] [--models rvs-p,dt-p] [--points N] [--horizon N]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import subprocess
import sys
import time

import mujoco
import numpy as np
import torch
from gymnasium.utils import seeding
from torch.utils.flop_counter import FlopCounterMode

from morl.conditioning import initial_targets
from morl.envs import ENV_SPECS, get_spec, load_model, reset_physics
from morl.evaluate import evaluate_agent
from morl.families import family
from morl.families.peda_agent import Agent, agent_kind
from morl.families.peda_networks import build_model, is_transformer
from morl.preferences import simplex_grid
from morl.rollout import episode_seeds, rollout_sequential

PAPER_HP = dict(hidden=512, depth=3, embed_dim=512, n_layer=3, n_head=1, dropout=0.1,
                context_length=20, eval_context_length=5)  # fmt: skip
#: Defaults per model kind (None = the whole grid / full episodes): the MLPs are quick enough.
DEFAULT_POINTS = {"mlp": None, "dt": 40}
DEFAULT_HORIZON = {"mlp": None, "dt": 40}
DEFAULT_REPEATS = {"mlp": 2, "dt": 1}


def truncated_task(env_id: str, horizon: int | None) -> str:
    """Register (in this process) a copy of ``env_id`` whose episodes end after ``horizon`` steps."""
    spec = get_spec(env_id)
    if horizon is None or horizon >= spec.max_episode_steps:
        return env_id
    short_id = f"{env_id}@{horizon}"
    ENV_SPECS[short_id] = dataclasses.replace(spec, id=short_id, max_episode_steps=int(horizon))
    return short_id


class RecordingAgent:
    """Passes everything through to ``agent`` and keeps each step's actions (for the floor)."""

    def __init__(self, agent):
        self.agent = agent
        self.actions: list[np.ndarray] = []

    def reset(self, preferences, target_returns, generator=None):
        self.actions = []
        self.agent.reset(preferences, target_returns, generator)

    def act(self, obs):
        a = self.agent.act(obs)
        self.actions.append(a)
        return a

    def observe(self, actions, rewards):
        self.agent.observe(actions, rewards)


def make_agent(name: str, env_id: str) -> Agent:
    spec = get_spec(env_id)
    hp = family("peda").resolve_settings(PAPER_HP)
    torch.manual_seed(0)
    model = build_model(name, spec.obs_dim, spec.act_dim, spec.n_obj, hp, act_low=spec.act_low,
                        act_high=spec.act_high, max_episode_steps=spec.max_episode_steps)  # fmt: skip
    return Agent(model, model_name=name, kind=agent_kind(name), obs_mean=torch.zeros(spec.obs_dim),
                 obs_std=torch.ones(spec.obs_dim), return_scale=hp["return_scale"],
                 max_episode_steps=spec.max_episode_steps, context_length=hp["eval_context_length"], n_obj=spec.n_obj,
                 act_dim=spec.act_dim, device=torch.device("cpu"))  # fmt: skip


def made_up_regression(n_obj: int) -> np.ndarray:
    """R_i(w) = 1000 w_i + 500: plausible HalfCheetah-sized targets (they do not change the work)."""
    return np.hstack([1000.0 * np.eye(n_obj), np.full((n_obj, 1), 500.0)])


def floor_mujoco(env_id: str, seeds: np.ndarray, actions: np.ndarray, lengths: np.ndarray) -> float:
    """Seconds of bare ``mj_step`` for every env step of the batched run (its actions replayed
    from its initial states; the resets are not timed)."""
    spec = get_spec(env_id)
    model = load_model(spec)
    datas = [mujoco.MjData(model) for _ in seeds]
    for d, s in zip(datas, seeds):
        reset_physics(spec, model, d, seeding.np_random(int(s))[0])
    ctrls = [d.ctrl for d in datas]
    acts = np.clip(actions.astype(np.float64), spec.act_low, spec.act_high)
    active = [np.flatnonzero(lengths > t).tolist() for t in range(actions.shape[0])]
    nstep, mj_step = spec.frame_skip, mujoco.mj_step
    t0 = time.perf_counter()
    for t, slots in enumerate(active):
        a_t = acts[t]
        for i in slots:
            ctrls[i][:] = a_t[i]
            mj_step(model, datas[i], nstep=nstep)
    return time.perf_counter() - t0


def forward_inputs(agent: Agent, batch: int, t: int):
    """Inputs of the shapes the agent feeds the model at step ``t`` (synthetic values)."""
    n_obj, gen = agent.n_obj, torch.Generator().manual_seed(t)
    w = torch.rand(batch, n_obj, generator=gen)
    if agent.is_transformer:
        k = min(t + 1, agent.context_length)
        steps = torch.arange(t - k + 1, t + 1).expand(batch, k)
        return (torch.randn(batch, k, agent.obs_dim, generator=gen), torch.randn(batch, k, agent.act_dim, generator=gen),
                w, torch.randn(batch, k, n_obj, generator=gen), steps)  # fmt: skip
    if agent.is_bc:
        return (torch.randn(batch, agent.context_length, agent.obs_dim, generator=gen), None, w, None, None)
    return (torch.randn(batch, agent.obs_dim, generator=gen), None, w, torch.randn(batch, n_obj, generator=gen),
            torch.full((batch,), t, dtype=torch.long))  # fmt: skip


def floor_forward(agent: Agent, batch: int, n_steps: int) -> tuple[float, float]:
    """(seconds, FLOPs) of the batched forward passes alone, one per batch step."""
    distinct = agent.context_length if agent.is_transformer else 1
    inputs = [forward_inputs(agent, batch, t) for t in range(min(n_steps, distinct))]
    flops_of = []
    with torch.no_grad():
        for args in inputs:
            with FlopCounterMode(display=False) as counter:
                agent.model(*args)
            flops_of.append(counter.get_total_flops())
        agent.model(*inputs[-1])  # warm-up
        t0 = time.perf_counter()
        for t in range(n_steps):
            agent.model(*inputs[min(t, len(inputs) - 1)])
        seconds = time.perf_counter() - t0
    flops = sum(flops_of[min(t, len(flops_of) - 1)] for t in range(n_steps))
    return seconds, float(flops)


def matmul_rate(n: int, reps: int = 5) -> float:
    """FLOP/s of an n x n float32 ``torch.matmul`` (best of ``reps``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)
    best = min(_timed(lambda: torch.matmul(a, b)) for _ in range(reps))
    return 2.0 * n**3 / best


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_model(
    name: str, env_id: str, divisions: int, points: int | None, horizon: int | None, seed: int, repeats: int = 1
) -> dict:
    spec = get_spec(env_id)
    agent = make_agent(name, env_id)  # sees the real episode cap T
    env_id = truncated_task(env_id, horizon)  # the task whose episodes are timed
    prefs = simplex_grid(spec.n_obj, divisions)
    n = len(prefs)
    coef = made_up_regression(spec.n_obj)
    targets = initial_targets(coef, prefs)
    seeds = episode_seeds(seed, n, 1)[0]

    rec = RecordingAgent(agent)
    t0 = time.perf_counter()
    res = evaluate_agent(env_id, rec, divisions, 1, seed, coef=coef, progress=False)
    batched_s = time.perf_counter() - t0
    lengths = res["lengths"].astype(np.int64)
    env_steps = int(lengths.sum())
    actions = np.stack(rec.actions)  # (batch steps, B, act_dim)

    k = n if points is None else max(1, min(points, n))
    subset = np.unique(np.linspace(0, n - 1, k).round().astype(int))
    t0 = time.perf_counter()
    _, sub_lengths = rollout_sequential(env_id, agent, prefs[subset], targets[subset], seeds[subset])
    ref_sub_s = time.perf_counter() - t0
    ref_s = ref_sub_s * env_steps / int(sub_lengths.sum())
    if not np.array_equal(sub_lengths, lengths[subset]):
        print(f"  note: {name}: {np.sum(sub_lengths != lengths[subset])} of {len(subset)} reference episodes "
              "differ in length from the batched ones (float rounding amplified by the dynamics)", file=sys.stderr)  # fmt: skip

    mujoco_s = floor_mujoco(env_id, seeds, actions, lengths)
    forward_s, flops = floor_forward(agent, n, actions.shape[0])
    # Other processes on a small machine make single timings noisy (+-15% seen on 2 shared cores):
    # repeat the batched run and the floor, interleaved, and keep the fastest of each.
    for _ in range(repeats - 1):
        t0 = time.perf_counter()
        again = evaluate_agent(env_id, agent, divisions, 1, seed, coef=coef, progress=False)
        batched_s = min(batched_s, time.perf_counter() - t0)
        if not np.array_equal(again["lengths"], res["lengths"]):
            raise RuntimeError("the batched evaluation is not deterministic")
        mujoco_s = min(mujoco_s, floor_mujoco(env_id, seeds, actions, lengths))
        forward_s = min(forward_s, floor_forward(agent, n, actions.shape[0])[0])
    # Cut episodes: extrapolate per env step, assuming the episodes still running at the cut run to T.
    full_steps = env_steps
    if get_spec(env_id).max_episode_steps < spec.max_episode_steps:
        cut = get_spec(env_id).max_episode_steps
        full_steps = int(np.where(lengths == cut, spec.max_episode_steps, lengths).sum())
    scale = full_steps / env_steps
    return {
        "model": name, "repeats": repeats, "points": n, "ref_points": len(subset), "env_steps": full_steps,
        "timed_env_steps": env_steps,
        "horizon": get_spec(env_id).max_episode_steps, "ran_to_horizon": int(np.sum(lengths == get_spec(env_id).max_episode_steps)),
        "batch_steps": actions.shape[0], "ref_s": ref_s * scale, "ref_sub_s": ref_sub_s,
        "batched_s": batched_s * scale, "mujoco_s": mujoco_s * scale, "forward_s": forward_s * scale,
        "floor_s": (mujoco_s + forward_s) * scale, "flops": flops * scale, "hv": res["summary"]["hv"],
    }  # fmt: skip


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")
    except (OSError, subprocess.CalledProcessError):
        model = ""
    return f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="MO-HalfCheetah-v2")
    p.add_argument("--models", default="rvs-p,dt-p", help="comma-separated model names")
    p.add_argument("--divisions", type=int, default=500, help="grid divisions (500: 501 points)")
    p.add_argument("--points", type=int, default=None,
                   help="time the reference on this many grid points and extrapolate "
                        "(default: all points for MLP models, 40 for MODT)")  # fmt: skip
    p.add_argument("--horizon", type=int, default=None,
                   help="time episodes cut at this many steps and extrapolate to full episodes "
                        "(default: full 500-step episodes for MLP models, 40 steps for MODT)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=None,
                   help="time the batched run and the floor this many times (interleaved), keep the fastest "
                        "(default: 2 for MLP models, 1 for MODT)")  # fmt: skip
    p.add_argument("--threads", type=int, default=1, help="torch threads (MuJoCo always uses one)")
    p.add_argument("--matmul-size", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    print(f"# Evaluation speed, {args.env}, {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {machine()}; torch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()}; "
          f"mujoco {mujoco.__version__}; load average before: {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"models at paper size, untrained weights (timing only): {PAPER_HP}")
    rate = matmul_rate(args.matmul_size)
    print(f"matmul rate: {rate / 1e9:.1f} GFLOP/s ({args.matmul_size}x{args.matmul_size} float32, best of 5)")
    rows = []
    for name in args.models.split(","):
        kind = "dt" if is_transformer(name) else "mlp"
        points = args.points if args.points is not None else DEFAULT_POINTS[kind]
        horizon = args.horizon if args.horizon is not None else DEFAULT_HORIZON[kind]
        t0 = time.perf_counter()
        repeats = args.repeats if args.repeats is not None else DEFAULT_REPEATS[kind]
        row = bench_model(name, args.env, args.divisions, points, horizon, args.seed, repeats)
        rows.append(row)
        print(f"  {name}: measured in {time.perf_counter() - t0:.0f} s: {row['timed_env_steps']} env steps "
              f"in {row['batch_steps']} batch steps (episodes cut at {row['horizon']}; {row['ran_to_horizon']} of "
              f"{row['points']} reached it); reference timed on {row['ref_points']} points in {row['ref_sub_s']:.1f} s",
              flush=True)  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}\n")

    print("| model | points | env steps | timed part | reference (s) | batched (s) | reference / batched "
          "| floor = MuJoCo + forward (s) | batched / floor | forward TFLOP | forward GFLOP/s | of matmul rate |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cut = r["timed_env_steps"] != r["env_steps"]
        steps = f"steps 0-{r['horizon'] - 1}" if cut else "full episodes"
        ref_part = "all points" if r["ref_points"] == r["points"] else f"{r['ref_points']} points"
        part = f"reference: {ref_part}, {steps}; batched, floor: all points, {steps}"
        star = "*" if cut else ""
        ref_star = "*" if cut or r["ref_points"] != r["points"] else ""
        gflops = r["flops"] / r["forward_s"] / 1e9
        print(f"| {r['model']} | {r['points']} | {r['env_steps']} | {part} | {r['ref_s']:.1f}{ref_star} "
              f"| {r['batched_s']:.1f}{star} | {r['ref_s'] / r['batched_s']:.2f}x "
              f"| {r['floor_s']:.1f}{star} = {r['mujoco_s']:.1f} + {r['forward_s']:.1f} | {r['batched_s'] / r['floor_s']:.2f}x "
              f"| {r['flops'] / 1e12:.2f}{star} | {gflops:.1f} | {gflops * 1e9 / rate:.0%} |")  # fmt: skip
    print(
        "\n\\* extrapolated linearly per env step from the timed part to the full grid's env steps "
        "(episodes still running at a cut are counted as running to step 500)."
    )
    print(
        "batched and floor: fastest of "
        + ", ".join(f"{r['repeats']} ({r['model']})" for r in rows)
        + " interleaved runs; reference: one run."
    )
    print(
        "floor: bare mj_step(nstep=frame_skip) over the batched run's env steps (its actions replayed from "
        "the same initial states) + the same batched forward passes alone; timed separately and added."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
