"""The PGMORL behavior method: D4MORL's own recipe, a population of PPO policies.

D4MORL's data came from a population of PPO policies trained by PGMORL (J. Xu, Y. Tian, P. Ma,
D. Rus, S. Sueda, W. Matusik, "Prediction-Guided Multi-Objective Reinforcement Learning for
Continuous Robot Control", ICML 2020; code: github.com/mit-gfx/PGMORL) and collected with the
nearest-policy rule of PEDA's ``data_generation/collect_env_new.py`` (github.com/baitingzbt/PEDA).
This module follows PGMORL's code, setting by setting (docs/protocol.md, "Behavior policies",
lists every departure):

* **Tasks.** A task is a (policy, weight) pair. The warm-up starts one freshly initialised policy
  per weight of the grid ``min_weight:delta_weight:max_weight`` on the simplex (6 weights for two
  objectives at 0.2, 15 for three at 0.25) and trains each for ``warmup_iters`` PPO iterations;
  every later generation trains ``num_tasks`` selected tasks for ``update_iters`` iterations, until
  every lineage has run ``env_steps_per_task // (num_steps * num_envs)`` iterations (PGMORL's
  ``num_env_steps`` is per lineage).
* **PPO** (``a2c_ppo_acktr``): separate 64x64 tanh actor and critic, orthogonal init (gain
  sqrt(2), the mean head 1), a state-independent log-std starting at 0; the critic gives one value
  per objective. ``num_envs`` x ``num_steps`` steps per iteration, GAE per objective with
  PGMORL's proper time limits (no bootstrap at the 500-step cut), the scalarised advantage
  ``w . sigma * (R - V)`` standardised, clipped surrogate and clipped value loss, 10 epochs of 32
  minibatches, Adam (eps 1e-5) with the learning rate decayed linearly over the global iteration
  index, gradient norm clipped at 0.5 per policy. Observations are normalised by running
  statistics (clipped to +-10) and each objective is divided by the running std of its discounted
  return (clipped to +-10); a child inherits its parent's networks, optimiser and statistics.
* **Evolution.** After every iteration each policy runs one deterministic episode; every
  non-dominated one enters the archive. Every ``update_iters``-th one enters the optimisation
  graph and the population (performance buffers by angle, 2 per buffer). A hyperbolic model
  ``A tanh(a (x - b) / 2) + c`` fitted to the graph's neighbouring improvements predicts where each
  of 7 candidate weights per population member would take it, and ``num_tasks`` tasks are picked
  greedily by the predicted archive's hypervolume minus ``sparsity`` times its sparsity.

**Batched.** The K tasks of a generation step together: their ``K * num_envs`` environments are
the slots of one :class:`morl.envs.batched.BatchedEnv`, each step is one stacked forward of all K
actors (parameters stacked along a leading task axis and applied with batched matrix products), and
each PPO minibatch updates all K at once. Each policy's loss, gradient clipping and Adam moments stay
its own, so the result is the same as K separate learners. One torch thread (PGMORL sets one too).

**Resumable.** The whole state (tasks, population, archive, graph, normalisers, random state) is
written to ``<output>.partial`` every ``update_iters`` iterations: at every generation boundary,
and inside the long warm-up, which runs in chunks of ``update_iters`` iterations, each starting
new episodes. A rerun continues from there and writes the same final file as an uninterrupted run
on the same machine. Random draws depend only on the seed and the iteration index, never on when
the run was stopped.

**The file.** The written population holds the archive: each policy's mean-action network, its
observation statistics and its objective vector. :class:`PopulationPolicy` acts with it by PEDA's
rule: for a preference ``w`` the policy whose sum-normalised objective vector is nearest to ``w``
(squared distance) acts deterministically on observations normalised by its own statistics; the
preference range for High-H sampling is the per-objective range of those normalised vectors.

**Modules.** This one trains: a generation's PPO iterations (:func:`run_generation`) and the run
around them (:func:`train_pgmorl`); it also gives every public name of the others, which hold the
settings (``pgmorl_settings``), the stacked networks and Adam (``pgmorl_networks``), the task state
(``pgmorl_tasks``), the archive (``pgmorl_archive``), the graph, population and selection
(``pgmorl_selection``), the run state and its partial file (``pgmorl_state``), and acting with and
thinning a population (``pgmorl_population``).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from morl import __version__
from morl.behavior.pgmorl_archive import add_to_front, archive_indices, front_sparsity, merge_archive
from morl.behavior.pgmorl_networks import (
    ACTOR_KEYS,
    CRITIC_KEYS,
    EPS,
    FUSED_KEYS,
    PARAM_KEYS,
    StackedAdam,
    actor_mean,
    critic_values,
    fuse,
    init_params,
    log_prob,
    mlp3,
    rms_update,
)
from morl.behavior.pgmorl_population import THINNING_RULE, PopulationPolicy, thin_population, thinned_indices
from morl.behavior.pgmorl_selection import (
    OptGraph,
    Population,
    candidate_weights,
    predict_hyperbolic,
    select_tasks,
    weight_grid,
)
from morl.behavior.pgmorl_settings import PGMORLSettings
from morl.behavior.pgmorl_state import KIND, PARTIAL_KIND, GenerationState, RunState, resume_run
from morl.behavior.pgmorl_tasks import TaskBatch, evaluate_tasks, normalise_obs
from morl.cpu import flush_subnormals
from morl.envs import BatchedEnv, get_spec, is_d4morl_task, physics_version
from morl.errors import InputError
from morl.metrics import hypervolume
from morl.progress import Progress, log
from morl.torch_io import save_torch

if TYPE_CHECKING:
    from morl.behavior import TrainOptions

#: The kinds of file :class:`PopulationPolicy` reads: a population, and a run in progress.
POLICY_KINDS = (KIND, PARTIAL_KIND)

__all__ = [
    "ACTOR_KEYS",
    "CRITIC_KEYS",
    "KIND",
    "PARAM_KEYS",
    "PARTIAL_KIND",
    "POLICY_KINDS",
    "THINNING_RULE",
    "OptGraph",
    "PGMORLSettings",
    "Population",
    "PopulationPolicy",
    "StackedAdam",
    "TaskBatch",
    "actor_mean",
    "add_to_front",
    "archive_indices",
    "candidate_weights",
    "critic_values",
    "evaluate_tasks",
    "front_sparsity",
    "init_params",
    "predict_hyperbolic",
    "rms_update",
    "run_generation",
    "select_tasks",
    "thin_population",
    "thinned_indices",
    "train",
    "train_pgmorl",
    "weight_grid",
]


# ------------------------------------------------------------------------------------------
# One generation: K tasks trained together for a number of PPO iterations
# ------------------------------------------------------------------------------------------


def _iteration_generator(seed: int, iteration: int) -> torch.Generator:
    # PGMORL seeds torch with the global iteration index in every worker; here with the run's
    # seed as well, so that two runs with different seeds differ.
    return torch.Generator().manual_seed(int(seed) * 1_000_003 + int(iteration))


class _Seeds:
    """An endless stream of environment seeds drawn from a numpy generator."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def __iter__(self):
        return self

    def __next__(self) -> int:
        return int(self.rng.integers(2**31 - 1))


def run_generation(
    env_id: str,
    tb: TaskBatch,
    s: PGMORLSettings,
    start: int,
    stop: int,
    env_seed: int,
    eval_seed: int,
    on_iteration=None,
) -> list[tuple[TaskBatch, np.ndarray]]:
    """Train the K tasks of ``tb`` in place for global iterations ``start .. stop - 1``.

    Returns one (snapshot of the K tasks, (K, n_obj) evaluated objectives) per iteration. Each call
    starts new environments (new episodes, seeded from ``env_seed``) and a fresh objective-return
    accumulator, as PGMORL does at every generation; the normalisers' statistics carry over.
    """
    spec = get_spec(env_id)
    k, n, t_len, n_obj = len(tb.weights), s.num_envs, s.num_steps, spec.n_obj
    obs_dim, act_dim = spec.obs_dim, spec.act_dim
    p = tb.params
    for v in p.values():
        v.requires_grad_(True)
    opt = StackedAdam(p, s.adam_eps, tb.adam)
    w = torch.from_numpy(tb.weights.astype(np.float32))  # (K, M)
    offspring = []
    seeds = _Seeds(np.random.default_rng(env_seed))
    total = s.total_iters
    mb_size = n * t_len // s.num_minibatches
    with BatchedEnv(env_id, k * n) as env:
        raw = env.reset([next(seeds) for _ in range(k * n)], next_seeds=seeds).reshape(k, n, obs_dim)
        rms_update(tb.ob_mean, tb.ob_var, tb.ob_count, raw.astype(np.float64))
        obs_n = normalise_obs(tb, raw, s.obs_clip).astype(np.float32)
        obj_acc = np.zeros((k, n, n_obj))
        masks_last = np.ones((k, n), np.float32)
        bad_last = np.ones((k, n), np.float32)
        for j in range(start, stop):
            gen = _iteration_generator(s.seed, j)
            lr = s.lr - s.lr * (j / total)
            b_obs = torch.zeros(t_len + 1, k, n, obs_dim)
            b_act = torch.zeros(t_len, k, n, act_dim)
            b_logp = torch.zeros(t_len, k, n)
            b_val = torch.zeros(t_len + 1, k, n, n_obj)
            b_rew = torch.zeros(t_len, k, n, n_obj)
            b_mask = torch.ones(t_len + 1, k, n)
            b_bad = torch.ones(t_len + 1, k, n)
            b_obs[0] = torch.from_numpy(obs_n)
            b_mask[0], b_bad[0] = torch.from_numpy(masks_last), torch.from_numpy(bad_last)
            with torch.no_grad():
                # The networks do not change during the rollout: actor and critic are fused into
                # one network of twice the width (block-diagonal beyond the first layer), so a
                # step costs three batched products instead of six.
                fused = fuse(p)
                noise = torch.randn(t_len, k, n, act_dim, generator=gen)
                std = torch.exp(p["logstd"]).unsqueeze(1)
                # log N(a; mean, std) with a = mean + std * noise
                logp_const = (-p["logstd"].sum(-1) - 0.5 * act_dim * math.log(2 * math.pi)).unsqueeze(1)
                r_np = np.empty((t_len, k, n, n_obj), np.float32)
                mask_np = np.ones((t_len + 1, k, n), np.float32)
                bad_np = np.ones((t_len + 1, k, n), np.float32)
                mask_np[0], bad_np[0] = masks_last, bad_last
                for t in range(t_len):
                    out = mlp3(b_obs[t], fused, FUSED_KEYS)
                    a = torch.addcmul(out[..., :act_dim], std, noise[t])
                    b_act[t] = a
                    b_val[t] = out[..., act_dim:]
                    raw, r, term, trunc = env.step(a.view(k * n, act_dim).numpy())
                    raw = raw.reshape(k, n, obs_dim).astype(np.float64)
                    r = r.reshape(k, n, n_obj).astype(np.float64)
                    done = (term | trunc).reshape(k, n)
                    rms_update(tb.ob_mean, tb.ob_var, tb.ob_count, raw)
                    obj_acc *= s.gamma
                    obj_acc += r
                    rms_update(tb.obj_mean, tb.obj_var, tb.obj_count, obj_acc)
                    np.clip(r / np.sqrt(tb.obj_var[:, None, :] + EPS), -s.reward_clip, s.reward_clip, out=r)
                    r_np[t] = r
                    obj_acc[done] = 0.0
                    b_obs[t + 1] = torch.from_numpy(normalise_obs(tb, raw, s.obs_clip).astype(np.float32))
                    mask_np[t + 1] = ~done
                    bad_np[t + 1] = ~trunc.reshape(k, n)
                b_logp[:] = logp_const - 0.5 * noise.square().sum(-1)
                b_rew[:] = torch.from_numpy(r_np)
                b_mask[:] = torch.from_numpy(mask_np)
                b_bad[:] = torch.from_numpy(bad_np)
                b_val[t_len] = critic_values(p, b_obs[t_len])
                # GAE per objective with proper time limits (a2c_ppo_acktr storage.compute_returns)
                ret = torch.zeros(t_len, k, n, n_obj)
                gae = torch.zeros(k, n, n_obj)
                for t in reversed(range(t_len)):
                    m1 = b_mask[t + 1].unsqueeze(-1)
                    delta = b_rew[t] + s.gamma * b_val[t + 1] * m1 - b_val[t]
                    gae = (delta + s.gamma * s.gae_lambda * m1 * gae) * b_bad[t + 1].unsqueeze(-1)
                    ret[t] = gae + b_val[t]
                sigma = torch.from_numpy(np.sqrt(tb.obj_var + EPS).astype(np.float32))  # (K, M)
                adv = ((ret - b_val[:-1]) * (sigma * w)[None, :, None, :]).sum(-1)  # (T, K, n)
                adv = adv.permute(1, 0, 2).reshape(k, t_len * n)
                adv = (adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-5)
            # The next iteration continues these episodes from where this one stopped, as PGMORL's
            # rollout storage does (after_update copies the last observation and masks to slot 0).
            obs_n = b_obs[t_len].numpy().copy()
            masks_last, bad_last = b_mask[t_len].numpy().copy(), b_bad[t_len].numpy().copy()
            flat = lambda x: x[:t_len].permute(1, 0, 2, *range(3, x.dim())).reshape(k, t_len * n, *x.shape[3:])  # noqa: E731
            f_obs, f_act, f_logp = flat(b_obs), flat(b_act), flat(b_logp)
            f_val, f_ret = flat(b_val), flat(ret)
            rows = torch.arange(k).unsqueeze(1)
            for _ in range(s.ppo_epochs):
                perm = torch.argsort(torch.rand(k, t_len * n, generator=gen), dim=1)
                for i in range(s.num_minibatches):
                    idx = perm[:, i * mb_size : (i + 1) * mb_size]
                    o, a, old_lp = f_obs[rows, idx], f_act[rows, idx], f_logp[rows, idx]
                    old_v, rt, ad = f_val[rows, idx], f_ret[rows, idx], adv[rows, idx]
                    mean = actor_mean(p, o)
                    lp = log_prob(mean, p["logstd"], a)
                    ratio = torch.exp(lp - old_lp)
                    surr = torch.min(ratio * ad, ratio.clamp(1 - s.clip, 1 + s.clip) * ad)
                    action_loss = -surr.mean(1)  # (K,)
                    v = critic_values(p, o)
                    v_clipped = old_v + (v - old_v).clamp(-s.clip, s.clip)
                    value_loss = 0.5 * torch.max((v - rt) ** 2, (v_clipped - rt) ** 2).mean((1, 2))
                    entropy = (0.5 + 0.5 * math.log(2 * math.pi) + p["logstd"]).sum(-1)
                    loss = value_loss * s.value_loss_coef + action_loss - entropy * s.entropy_coef
                    for v_ in p.values():
                        v_.grad = None
                    loss.sum().backward()
                    with torch.no_grad():
                        sq = sum(g.grad.reshape(k, -1).pow(2).sum(1) for g in p.values())
                        coef = (s.max_grad_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
                        for v_ in p.values():
                            v_.grad.mul_(coef.view(k, *([1] * (v_.dim() - 1))))
                    opt.step(lr)
            snapshot = _snapshot(tb)
            objs = evaluate_tasks(env_id, snapshot, s, eval_seed)
            offspring.append((snapshot, objs))
            if on_iteration is not None:
                on_iteration(j, objs)
    for v in p.values():
        v.requires_grad_(False)
        v.grad = None
    return offspring


def _snapshot(tb: TaskBatch) -> TaskBatch:
    return tb.select(list(range(len(tb.weights))))


# ------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------


def train_pgmorl(
    env_id: str, cfg: dict[str, Any], output: str | os.PathLike, threads: int | None = 1, progress: bool = True
) -> dict[str, Any]:
    """Train a PGMORL population for ``env_id`` with the settings ``cfg``; write ``output``.

    Resumes from ``<output>.partial`` when present (written at every generation boundary and
    between the chunks of update_iters iterations a longer warm-up runs in). Returns a summary.
    """
    if not is_d4morl_task(env_id):
        raise InputError(
            f"{env_id}: behavior.method pgmorl trains on the D4MORL tasks only (its runs resume from "
            "saved physics-free generation boundaries); use method td3 for MO-Gymnasium ids"
        )
    s = PGMORLSettings.from_config(cfg)
    output = Path(output)
    partial = output.with_name(output.name + ".partial")
    flush_subnormals()  # a long fit keeps its speed (morl.cpu)
    if threads:
        torch.set_num_threads(int(threads))
    total = s.total_iters
    settings = vars(s).copy()

    t0 = time.perf_counter()
    if partial.exists():
        run = resume_run(partial, env_id, settings)
        log.info("resuming PGMORL on %s from iteration %d of %d (%s)", env_id, run.iteration, total, partial)
    else:
        run = _fresh_run(env_id, s)

    def save_partial(in_generation: GenerationState | None) -> None:
        wall = run.wall_before + time.perf_counter() - t0
        save_torch(partial, run.partial_state(env_id, settings, wall, in_generation))

    bar = Progress(total, f"pgmorl {env_id}", unit="iter", enabled=progress, initial=run.iteration)
    while run.iteration < total:
        gen = _open_generation(run, s)
        k = len(run.tasks.weights)

        def on_iteration(j, objs, k=k):
            bar.update(1, tasks=k, **{"archive HV": f"{run.history[-1][2]:.4g}" if run.history else "-"})

        # A generation runs in chunks of update_iters iterations, each with new episodes, so that a
        # long warm-up (200 iterations) can be saved between chunks; later generations are one chunk.
        while run.iteration < gen.stop:
            _run_chunk(env_id, run, gen, s, on_iteration)
            if run.iteration < gen.stop:
                save_partial(gen)
        _close_generation(env_id, run, gen, s)
        if run.iteration < total:
            _select_next_tasks(env_id, run, s)
            save_partial(None)
    bar.close()
    return _write_population(env_id, s, settings, run, output, partial, t0)


def train(env_id: str, settings: dict[str, Any], output: str | os.PathLike, options: TrainOptions) -> dict[str, Any]:
    """The behavior registry's entry (:data:`morl.behavior.METHODS`): :func:`train_pgmorl` on one
    torch thread unless ``options.threads`` says more. PGMORL trains on the CPU and shows no HV
    estimate, so ``options.device`` and ``options.hv_every`` (TD3's) do not apply."""
    return train_pgmorl(env_id, settings, output, threads=options.threads or 1, progress=options.progress)


def _fresh_run(env_id: str, s: PGMORLSettings) -> RunState:
    """A new run: one freshly initialised task per weight of the grid, evaluated once as the roots
    of the optimisation graph."""
    spec = get_spec(env_id)
    n_obj, obs_dim, act_dim = spec.n_obj, spec.obs_dim, spec.act_dim
    gen = torch.Generator().manual_seed(s.seed)
    init_w = weight_grid(n_obj, s.min_weight, s.max_weight, s.delta_weight)
    k0 = len(init_w)
    params = init_params(k0, obs_dim, act_dim, n_obj, s.hidden, gen)
    tasks = TaskBatch(
        params,
        StackedAdam(params, s.adam_eps).state,
        np.zeros((k0, obs_dim)),
        np.ones((k0, obs_dim)),
        np.full(k0, 1e-4),
        np.ones((k0, n_obj)),
        np.zeros((k0, n_obj)),
        np.full(k0, 1e-4),
        init_w / init_w.sum(1, keepdims=True),
        np.full(k0, -1, np.int64),
    )
    graph = OptGraph()
    objs0 = evaluate_tasks(env_id, tasks, s, s.seed)
    tasks.nodes[:] = [graph.insert(w, o, -1) for w, o in zip(tasks.weights, objs0)]
    pop_objs, archive_objs = np.zeros((0, n_obj)), np.zeros((0, n_obj))
    return RunState(tasks, None, pop_objs, None, archive_objs, graph, np.random.default_rng(s.seed))


def _open_generation(run: RunState, s: PGMORLSettings) -> GenerationState:
    """The generation the run is in: a new one (the warm-up first, then ``update_iters``
    iterations each), or the one a resumed run stopped inside."""
    if run.in_generation is None:
        n_iters = s.warmup_iters if run.generation == 0 else s.update_iters
        stop = min(run.iteration + n_iters, s.total_iters)
        # prev: each task's chain in the optimisation graph
        return GenerationState(run.iteration, stop, run.tasks.nodes.copy(), [], [])
    gen, run.in_generation = run.in_generation, None  # resumed inside a generation (the warm-up runs in chunks)
    return gen


def _run_chunk(env_id: str, run: RunState, gen: GenerationState, s: PGMORLSettings, on_iteration) -> None:
    """Train the tasks for the next chunk of at most ``update_iters`` iterations of ``gen``.

    The archive takes every iteration's policies; the graph and the population candidates take
    every ``update_iters``-th."""
    chunk_start, chunk_stop = run.iteration, min(run.iteration + s.update_iters, gen.stop)
    chunk = (chunk_start - gen.start) // s.update_iters
    env_seed = s.seed * 7919 + run.generation + 1 + chunk * 100_003
    offspring = run_generation(
        env_id, run.tasks, s, chunk_start, chunk_stop, env_seed=env_seed, eval_seed=s.seed, on_iteration=on_iteration
    )
    k = len(run.tasks.weights)
    for i, (snap, objs) in enumerate(offspring):
        if (chunk_start - gen.start + i + 1) % s.update_iters == 0:
            for t in range(k):
                gen.prev[t] = run.graph.insert(snap.weights[t], objs[t], int(gen.prev[t]))
            snap.nodes[:] = gen.prev
            gen.pop_new.append(snap)
            gen.pop_new_objs.append(objs)
    run.archive, run.archive_objs = merge_archive(run.archive, run.archive_objs, offspring)
    run.iteration = chunk_stop
    run.env_steps += k * (chunk_stop - chunk_start) * (s.num_envs * s.num_steps)


def _close_generation(env_id: str, run: RunState, gen: GenerationState, s: PGMORLSettings) -> None:
    """Rebuild the population's performance buffers with the generation's candidates, count the
    generation and record the archive's hypervolume."""
    if gen.pop_new:
        all_pop = TaskBatch.concat(([run.pop] if run.pop is not None else []) + gen.pop_new)
        all_objs = np.concatenate([run.pop_objs] + gen.pop_new_objs)
        keep_pop = Population(get_spec(env_id).n_obj, s.pbuffer_num, s.pbuffer_size).members(list(all_objs))
        run.pop, run.pop_objs = all_pop.select(keep_pop), all_objs[keep_pop]
    run.generation += 1
    hv = hypervolume(run.archive_objs) if len(run.archive_objs) else 0.0
    run.history.append([run.iteration, run.env_steps, hv, len(run.archive_objs)])
    log.info(
        "pgmorl %s: generation %d, iteration %d/%d, archive %d policies, archive HV %.4g",
        env_id,
        run.generation,
        run.iteration,
        s.total_iters,
        len(run.archive_objs),
        hv,
    )


def _select_next_tasks(env_id: str, run: RunState, s: PGMORLSettings) -> None:
    """The next generation's tasks: population members with the weights the prediction-guided
    selection picks for them."""
    if run.pop is None or len(run.pop_objs) == 0:
        raise InputError(
            f"{env_id}: PGMORL's population is empty after generation {run.generation} (no policy "
            "reached positive returns on every objective); nothing to select from"
        )
    chosen = select_tasks(run.graph, list(run.pop.nodes), run.archive_objs, s, get_spec(env_id).n_obj, run.rng)
    run.tasks = run.pop.select([c[0] for c in chosen])
    run.tasks.weights[:] = np.stack([c[1] for c in chosen])


def _write_population(
    env_id: str, s: PGMORLSettings, settings: dict, run: RunState, output: Path, partial: Path, t0: float
) -> dict[str, Any]:
    """Write the population file (the archive) to ``output``, remove the partial file and return
    the run's summary."""
    if run.archive is None or len(run.archive_objs) == 0:
        raise InputError(
            f"{env_id}: PGMORL's archive is empty (no policy reached non-negative returns on every "
            "objective); no population file written"
        )
    wall = run.wall_before + time.perf_counter() - t0
    spec = get_spec(env_id)
    state = {
        "kind": KIND,
        "env_id": env_id,
        "physics_version": physics_version(env_id),
        "method": "pgmorl",
        "obs_dim": spec.obs_dim,
        "act_dim": spec.act_dim,
        "n_obj": spec.n_obj,
        "hidden": s.hidden,
        "act_low": np.asarray(spec.act_low, np.float32).tolist(),
        "act_high": np.asarray(spec.act_high, np.float32).tolist(),
        "obs_clip": s.obs_clip,
        "settings": settings,
        "iterations": s.total_iters,
        "env_steps": run.env_steps,
        "archive": run.archive,
        "objs": torch.from_numpy(run.archive_objs.astype(np.float64)),
        "history": run.history,
        "morl_version": __version__,
    }
    save_torch(output, state)
    if partial.exists():
        partial.unlink()
    summary = {
        "env_id": env_id,
        "method": "pgmorl",
        "iterations": s.total_iters,
        "generations": run.generation,
        "archive_size": int(len(run.archive_objs)),
        "archive_hv": run.history[-1][2],
        "env_steps": state["env_steps"],
        "wall_s": wall,
    }
    log.info("pgmorl %s done: %s", env_id, summary)
    return summary
