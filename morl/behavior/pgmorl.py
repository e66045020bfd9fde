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
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from morl import __version__
from morl.cpu import flush_subnormals
from morl.envs import BatchedEnv, check_file_identity, get_spec, is_d4morl_task, physics_version
from morl.errors import InputError
from morl.metrics import hypervolume
from morl.progress import Progress, log
from morl.torch_io import load_torch, save_torch

KIND = "morl-behavior-population"
PARTIAL_KIND = "morl-behavior-population-partial"
#: PGMORL's epsilon in its normalisers (baselines' VecNormalize) and its minimum objective for the
#: performance buffers.
_EPS = 1e-8
_BUFFER_MIN_OBJ = 1e-7


@dataclass
class PGMORLSettings:
    """PGMORL's settings; the defaults are those of its ``morl/arguments.py`` and ``morl/run.py``
    (the per-task ones, from its ``scripts/<task>.py``, come from the config)."""

    env_steps_per_task: int  # scripts/<task>.py --num-env-steps: 5M HalfCheetah/Walker2d, 8M Hopper/Ant, 2M Swimmer
    warmup_iters: int  # --warmup-iter: 80 HalfCheetah/Walker2d, 200 Hopper/Ant, 40 Swimmer
    update_iters: int  # --update-iter: 20 / 40 / 10 (iterations per generation)
    delta_weight: float = 0.2  # --delta-weight: 0.2 for two objectives, 0.25 for Hopper-v3
    min_weight: float = 0.0  # --min-weight
    max_weight: float = 1.0  # --max-weight
    num_tasks: int = 6  # --num-tasks: tasks selected per generation (15 for Hopper-v3)
    weight_candidates: int = 7  # --num-weight-candidates
    pbuffer_num: int = 100  # --pbuffer-num (Hopper-v3: 20, which makes 210 buffers in 3-D)
    pbuffer_size: int = 2  # --pbuffer-size
    sparsity: float = 1.0  # --sparsity, the selection's weight on sparsity (Hopper-v3: 1e6)
    num_envs: int = 4  # run.py --num-processes: environments per task
    num_steps: int = 2048  # run.py --num-steps: steps per environment and iteration
    lr: float = 3e-4  # run.py --lr, decayed linearly (--use-linear-lr-decay)
    gamma: float = 0.995  # run.py --gamma
    gae_lambda: float = 0.95  # run.py --gae-lambda
    ppo_epochs: int = 10  # run.py --ppo-epoch
    num_minibatches: int = 32  # run.py --num-mini-batch
    clip: float = 0.2  # arguments.py --clip-param (also the value clip)
    value_loss_coef: float = 0.5  # run.py --value-loss-coef
    entropy_coef: float = 0.0  # run.py --entropy-coef
    max_grad_norm: float = 0.5  # arguments.py --max-grad-norm
    adam_eps: float = 1e-5  # warm_up.py: Adam(eps=1e-5)
    hidden: int = 64  # a2c_ppo_acktr/model.py MLPBase hidden_size
    obs_clip: float = 10.0  # baselines VecNormalize clipob
    reward_clip: float = 10.0  # baselines VecNormalize cliprew
    seed: int = 0

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> PGMORLSettings:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise InputError(f"behavior.pgmorl: unknown settings {unknown}")
        return cls(**{k: v for k, v in cfg.items() if k in known})

    def check(self) -> PGMORLSettings:
        """Raise :class:`InputError` for settings that cannot run; return self."""
        if self.total_iters < 1:
            raise InputError(
                f"behavior.pgmorl.env_steps_per_task: {self.env_steps_per_task} is less than one "
                f"iteration ({self.num_steps} x {self.num_envs} steps)"
            )
        if (self.num_envs * self.num_steps) % self.num_minibatches:
            raise InputError(
                f"behavior.pgmorl.num_minibatches: {self.num_minibatches} does not divide an "
                f"iteration's {self.num_envs * self.num_steps} steps"
            )
        if self.min_weight > self.max_weight:
            raise InputError(f"behavior.pgmorl: min_weight {self.min_weight} is above max_weight {self.max_weight}")
        return self

    @property
    def total_iters(self) -> int:
        """PPO iterations each lineage runs (PGMORL's ``total_num_updates``)."""
        return int(self.env_steps_per_task) // int(self.num_steps) // int(self.num_envs)


# ------------------------------------------------------------------------------------------
# Weights, fronts and the selection's measures (PGMORL's morl/utils.py)
# ------------------------------------------------------------------------------------------


def weight_grid(n_obj: int, low: float, high: float, delta: float) -> np.ndarray:
    """PGMORL's ``generate_weights_batch_dfs``: every weight vector whose first ``n_obj - 1``
    entries step from ``low`` by ``delta`` (below ``high`` and with a sum below 1, each with half
    a step of slack) and whose last entry is one minus their sum, in depth-first order."""
    out: list[list[float]] = []

    def dfs(i: int, prefix: list[float]) -> None:
        if i == n_obj - 1:
            out.append(prefix + [1.0 - sum(prefix)])
            return
        w = low
        while w < high + 0.5 * delta and sum(prefix) + w < 1.0 + 0.5 * delta:
            dfs(i + 1, prefix + [w])
            w += delta

    dfs(0, [])
    return np.asarray(out, np.float64)


def archive_indices(objs: np.ndarray) -> np.ndarray:
    """PGMORL's ``get_ep_indices``: rows with no negative objective that no row dominates, in
    ascending order of the first objective (exact duplicates are all kept)."""
    objs = np.asarray(objs, np.float64)
    if len(objs) == 0:
        return np.zeros(0, np.int64)
    ge = np.all(objs[None, :, :] >= objs[:, None, :], axis=2)  # ge[i, j]: row j >= row i everywhere
    gt = np.any(objs[None, :, :] > objs[:, None, :], axis=2)
    keep = np.all(objs >= 0, axis=1) & ~np.any(ge & gt, axis=1)
    order = np.argsort(objs[:, 0], kind="stable")
    return order[keep[order]]


def add_to_front(front: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``front`` (non-dominated, as :func:`archive_indices` keeps) with the point ``p`` added:
    the same set as ``archive_indices`` of both, in O(len(front))."""
    if np.any(p < 0):
        return front
    beaten = np.all(p >= front, axis=1) & np.any(p > front, axis=1)
    if np.any(np.all(front >= p, axis=1) & np.any(front > p, axis=1)):
        return front
    return np.vstack([front[~beaten], p[None]])


def front_sparsity(front: np.ndarray) -> float:
    """PGMORL's sparsity of a front: per objective, the squared gaps between sorted neighbours,
    summed over objectives, divided by ``n - 1`` (0 below two points); raw objective units."""
    n = len(front)
    if n < 2:
        return 0.0
    total = 0.0
    for d in range(front.shape[1]):
        v = np.sort(front[:, d])
        total += float(np.sum(np.diff(v) ** 2))
    return total / (n - 1)


# ------------------------------------------------------------------------------------------
# Running statistics (baselines' RunningMeanStd, vectorised over tasks)
# ------------------------------------------------------------------------------------------


def rms_update(mean: np.ndarray, var: np.ndarray, count: np.ndarray, batch: np.ndarray) -> None:
    """Chan et al.'s parallel update of running means/variances, in place, one row per task.

    ``mean``/``var``: (K, d); ``count``: (K,); ``batch``: (K, n, d) new samples of each task.
    """
    b_mean = batch.mean(axis=1)
    b_var = batch.var(axis=1)
    b_count = batch.shape[1]
    delta = b_mean - mean
    tot = count + b_count
    new_mean = mean + delta * (b_count / tot)[:, None]
    m2 = var * count[:, None] + b_var * b_count + delta**2 * (count * b_count / tot)[:, None]
    mean[:] = new_mean
    var[:] = m2 / tot[:, None]
    count[:] = tot


# ------------------------------------------------------------------------------------------
# Stacked actor-critic: K independent networks applied with batched matrix products
# ------------------------------------------------------------------------------------------

ACTOR_KEYS = ("a_w1", "a_b1", "a_w2", "a_b2", "a_wm", "a_bm")
CRITIC_KEYS = ("c_w1", "c_b1", "c_w2", "c_b2", "c_wv", "c_bv")
PARAM_KEYS = ACTOR_KEYS + ("logstd",) + CRITIC_KEYS


def init_params(k: int, obs_dim: int, act_dim: int, n_obj: int, hidden: int, gen: torch.Generator) -> dict:
    """K freshly initialised actor-critics, one after another in PGMORL's order (actor trunk,
    critic trunk, value head, mean head): orthogonal weights (gain sqrt(2); the mean head 1),
    zero biases, log-std 0. Weights are stored (K, in, out)."""

    def ortho(out_dim: int, in_dim: int, gain: float) -> torch.Tensor:
        w = torch.empty(out_dim, in_dim)
        # nn.init.orthogonal_ draws from the global generator; this uses `gen` the same way.
        flat = torch.randn(max(out_dim, in_dim), min(out_dim, in_dim), generator=gen)
        q, r = torch.linalg.qr(flat)
        q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
        w.copy_(q if out_dim >= in_dim else q.T)
        return (w * gain).T.contiguous()  # (in, out)

    g = math.sqrt(2.0)
    per: dict[str, list[torch.Tensor]] = {key: [] for key in PARAM_KEYS}
    for _ in range(k):
        per["a_w1"].append(ortho(hidden, obs_dim, g))
        per["a_w2"].append(ortho(hidden, hidden, g))
        per["c_w1"].append(ortho(hidden, obs_dim, g))
        per["c_w2"].append(ortho(hidden, hidden, g))
        per["c_wv"].append(ortho(n_obj, hidden, g))
        per["a_wm"].append(ortho(act_dim, hidden, 1.0))
        for key, n in (
            ("a_b1", hidden),
            ("a_b2", hidden),
            ("a_bm", act_dim),
            ("c_b1", hidden),
            ("c_b2", hidden),
            ("c_bv", n_obj),
            ("logstd", act_dim),
        ):
            per[key].append(torch.zeros(n))
    return {key: torch.stack(v) for key, v in per.items()}


def _mlp3(x: torch.Tensor, p: dict, keys: tuple[str, ...]) -> torch.Tensor:
    w1, b1, w2, b2, w3, b3 = (p[k] for k in keys)
    h = torch.tanh(torch.baddbmm(b1.unsqueeze(1), x, w1))
    h = torch.tanh(torch.baddbmm(b2.unsqueeze(1), h, w2))
    return torch.baddbmm(b3.unsqueeze(1), h, w3)


_FUSED_KEYS = ("w1", "b1", "w2", "b2", "w3", "b3")


def _fuse(p: dict) -> dict:
    """Actor and critic as one network of twice the width: first layers side by side, the others
    block-diagonal; its output is the mean action followed by the values."""
    k, hid = p["a_w2"].shape[0], p["a_w2"].shape[1]
    act, m = p["a_wm"].shape[2], p["c_wv"].shape[2]
    w2 = p["a_w2"].new_zeros(k, 2 * hid, 2 * hid)
    w2[:, :hid, :hid], w2[:, hid:, hid:] = p["a_w2"], p["c_w2"]
    w3 = p["a_w2"].new_zeros(k, 2 * hid, act + m)
    w3[:, :hid, :act], w3[:, hid:, act:] = p["a_wm"], p["c_wv"]
    return {
        "w1": torch.cat([p["a_w1"], p["c_w1"]], 2),
        "b1": torch.cat([p["a_b1"], p["c_b1"]], 1),
        "w2": w2,
        "b2": torch.cat([p["a_b2"], p["c_b2"]], 1),
        "w3": w3,
        "b3": torch.cat([p["a_bm"], p["c_bv"]], 1),
    }


def actor_mean(p: dict, x: torch.Tensor) -> torch.Tensor:
    """(K, n, obs) normalised observations -> (K, n, act) mean actions."""
    return _mlp3(x, p, ACTOR_KEYS)


def critic_values(p: dict, x: torch.Tensor) -> torch.Tensor:
    """(K, n, obs) normalised observations -> (K, n, n_obj) values (normalised reward units)."""
    return _mlp3(x, p, CRITIC_KEYS)


def _log_prob(mean: torch.Tensor, logstd: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
    ls = logstd.unsqueeze(1)
    return (-((act - mean) ** 2) / (2 * torch.exp(2 * ls)) - ls - 0.5 * math.log(2 * math.pi)).sum(-1)


class StackedAdam:
    """Adam (torch's formula, betas 0.9/0.999) on stacked parameters. Adam works elementwise, so
    one instance over (K, ...) tensors is K independent optimisers; each task keeps its own step
    count (a parent taken from an earlier generation has made fewer steps), and rows are gathered
    on selection."""

    def __init__(self, params: dict, eps: float, state: dict | None = None):
        self.params, self.eps = params, eps
        if state is None:
            k = next(iter(params.values())).shape[0]
            state = {
                "step": torch.zeros(k, dtype=torch.float64),
                "m": {key: torch.zeros_like(v) for key, v in params.items()},
                "v": {key: torch.zeros_like(v) for key, v in params.items()},
            }
        self.state = state

    def step(self, lr: float) -> None:
        st = self.state
        st["step"] += 1
        t = st["step"]
        step_size = (lr / (1 - 0.9**t)).to(torch.float32)  # (K,)
        bc2_sqrt = torch.sqrt(1 - 0.999**t).to(torch.float32)
        with torch.no_grad():
            for key, p in self.params.items():
                g = p.grad
                m, v = st["m"][key], st["v"][key]
                shape = (-1,) + (1,) * (p.dim() - 1)
                m.mul_(0.9).add_(g, alpha=0.1)
                v.mul_(0.999).addcmul_(g, g, value=0.001)
                denom = (v.sqrt() / bc2_sqrt.view(shape)).add_(self.eps)
                p.sub_(m / denom * step_size.view(shape))


# ------------------------------------------------------------------------------------------
# Task state: everything a lineage carries from parent to child
# ------------------------------------------------------------------------------------------


@dataclass
class TaskBatch:
    """K tasks' networks, Adam moments, normalisers and weights, stacked along axis 0."""

    params: dict  # name -> (K, ...) float32 tensors
    adam: dict  # {"step": (K,) float64 tensor, "m": {...}, "v": {...}}
    ob_mean: np.ndarray  # (K, obs) float64
    ob_var: np.ndarray
    ob_count: np.ndarray  # (K,)
    obj_var: np.ndarray  # (K, n_obj): running variance of the discounted objective returns
    obj_mean: np.ndarray
    obj_count: np.ndarray
    weights: np.ndarray  # (K, n_obj), sum-normalised scalarisation weights
    nodes: np.ndarray  # (K,) int: optimisation-graph node each task starts from

    def select(self, idx: list[int]) -> TaskBatch:
        """Rows ``idx`` (copies), e.g. one population member per selected task."""
        ix = torch.as_tensor(idx, dtype=torch.long)
        return TaskBatch(
            {k: v.detach()[ix].clone() for k, v in self.params.items()},
            {
                "step": self.adam["step"][ix].clone(),
                "m": {k: v[ix].clone() for k, v in self.adam["m"].items()},
                "v": {k: v[ix].clone() for k, v in self.adam["v"].items()},
            },
            self.ob_mean[idx].copy(),
            self.ob_var[idx].copy(),
            self.ob_count[idx].copy(),
            self.obj_var[idx].copy(),
            self.obj_mean[idx].copy(),
            self.obj_count[idx].copy(),
            self.weights[idx].copy(),
            self.nodes[idx].copy(),
        )

    @staticmethod
    def concat(batches: list[TaskBatch]) -> TaskBatch:
        b0 = batches[0]
        cat_t = lambda get: {k: torch.cat([get(b)[k] for b in batches]) for k in get(b0)}  # noqa: E731
        cat_n = lambda name: np.concatenate([getattr(b, name) for b in batches])  # noqa: E731
        return TaskBatch(
            cat_t(lambda b: b.params),
            {
                "step": torch.cat([b.adam["step"] for b in batches]),
                "m": cat_t(lambda b: b.adam["m"]),
                "v": cat_t(lambda b: b.adam["v"]),
            },
            *(
                cat_n(n)
                for n in ("ob_mean", "ob_var", "ob_count", "obj_var", "obj_mean", "obj_count", "weights", "nodes")
            ),
        )

    def state(self) -> dict:
        return {
            "params": {k: v.clone() for k, v in self.params.items()},
            "adam": {"step": self.adam["step"].clone(), "m": dict(self.adam["m"]), "v": dict(self.adam["v"])},
            **{n: torch.from_numpy(np.ascontiguousarray(getattr(self, n))) for n in _TASK_ARRAYS},
        }

    @staticmethod
    def from_state(st: dict) -> TaskBatch:
        step = st["adam"]["step"]
        k = next(iter(st["params"].values())).shape[0]
        # files of the first version held one step count for all tasks
        step = step.clone() if isinstance(step, torch.Tensor) else torch.full((k,), float(step), dtype=torch.float64)
        adam = {"step": step, "m": dict(st["adam"]["m"]), "v": dict(st["adam"]["v"])}
        return TaskBatch(dict(st["params"]), adam, *(st[n].numpy().copy() for n in _TASK_ARRAYS))


_TASK_ARRAYS = ("ob_mean", "ob_var", "ob_count", "obj_var", "obj_mean", "obj_count", "weights", "nodes")


def _normalise_obs(tb: TaskBatch, obs: np.ndarray, clip: float) -> np.ndarray:
    """(K, n, obs) raw observations -> normalised by each task's statistics, clipped."""
    z = (obs - tb.ob_mean[:, None, :]) / np.sqrt(tb.ob_var[:, None, :] + _EPS)
    return np.clip(z, -clip, clip, out=z)


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


def evaluate_tasks(env_id: str, tb: TaskBatch, s: PGMORLSettings, seed: int, lengths: list | None = None) -> np.ndarray:
    """PGMORL's ``evaluation``: each task's mean action for one episode (observation statistics
    frozen), the undiscounted raw return vector. (K, n_obj) float64. ``lengths``: if given, the
    episodes' lengths are appended to it."""
    k = len(tb.weights)
    spec = get_spec(env_id)
    with BatchedEnv(env_id, k) as env:
        obs = env.reset([int(seed)] * k)
        act = np.zeros((k, spec.act_dim), np.float32)
        with torch.no_grad():
            while not env.done:
                z = torch.from_numpy(_normalise_obs(tb, obs[:, None, :], s.obs_clip).astype(np.float32))
                act[:] = actor_mean(tb.params, z)[:, 0].numpy()
                obs, _, _, _ = env.step(act)
        if lengths is not None:
            lengths.extend(env.lengths.tolist())
        return env.returns.astype(np.float64)


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
        obs_n = _normalise_obs(tb, raw, s.obs_clip).astype(np.float32)
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
                fused = _fuse(p)
                noise = torch.randn(t_len, k, n, act_dim, generator=gen)
                std = torch.exp(p["logstd"]).unsqueeze(1)
                # log N(a; mean, std) with a = mean + std * noise
                logp_const = (-p["logstd"].sum(-1) - 0.5 * act_dim * math.log(2 * math.pi)).unsqueeze(1)
                r_np = np.empty((t_len, k, n, n_obj), np.float32)
                mask_np = np.ones((t_len + 1, k, n), np.float32)
                bad_np = np.ones((t_len + 1, k, n), np.float32)
                mask_np[0], bad_np[0] = masks_last, bad_last
                for t in range(t_len):
                    out = _mlp3(b_obs[t], fused, _FUSED_KEYS)
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
                    np.clip(r / np.sqrt(tb.obj_var[:, None, :] + _EPS), -s.reward_clip, s.reward_clip, out=r)
                    r_np[t] = r
                    obj_acc[done] = 0.0
                    b_obs[t + 1] = torch.from_numpy(_normalise_obs(tb, raw, s.obs_clip).astype(np.float32))
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
                sigma = torch.from_numpy(np.sqrt(tb.obj_var + _EPS).astype(np.float32))  # (K, M)
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
                    lp = _log_prob(mean, p["logstd"], a)
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
# Optimisation graph, population (performance buffers) and prediction-guided selection
# ------------------------------------------------------------------------------------------


class OptGraph:
    """PGMORL's ``OptGraph``: nodes (L2-normalised weight, objectives, parent), the objective
    change from the parent, and each node's successors."""

    def __init__(self, state: dict | None = None):
        st = state or {"weights": [], "objs": [], "prev": []}
        self.weights = [np.asarray(x, np.float64) for x in st["weights"]]
        self.objs = [np.asarray(x, np.float64) for x in st["objs"]]
        self.prev = [int(x) for x in st["prev"]]
        self.delta = [o - self.objs[p] if p >= 0 else np.zeros_like(o) for o, p in zip(self.objs, self.prev)]
        self.succ: list[list[int]] = [[] for _ in self.prev]
        for i, p in enumerate(self.prev):
            if p >= 0:
                self.succ[p].append(i)

    def insert(self, weights: np.ndarray, objs: np.ndarray, prev: int) -> int:
        w = np.asarray(weights, np.float64)
        self.weights.append(w / np.linalg.norm(w))
        self.objs.append(np.asarray(objs, np.float64).copy())
        self.prev.append(int(prev))
        self.delta.append(self.objs[-1] - self.objs[prev] if prev >= 0 else np.zeros_like(self.objs[-1]))
        self.succ.append([])
        if prev >= 0:
            self.succ[prev].append(len(self.prev) - 1)
        return len(self.prev) - 1

    def state(self) -> dict:
        return {
            "weights": [w.tolist() for w in self.weights],
            "objs": [o.tolist() for o in self.objs],
            "prev": list(self.prev),
        }


def _hyperbolic(params: np.ndarray, x: np.ndarray) -> np.ndarray:
    a_, a, b, c = params
    e = np.exp(a * (x - b))
    return a_ * (e - 1) / (e + 1) + c


def _hyperbolic_jac(params: np.ndarray, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    a_, a, b, c = params
    e = np.exp(a * (x - b))
    t = (e - 1) / (e + 1)
    dt = 2 * e / (e + 1) ** 2
    return np.stack([t, a_ * dt * (x - b), -a_ * dt * a, np.ones_like(x)], axis=1) * w[:, None]


def predict_hyperbolic(graph: OptGraph, q: int, test_weights: np.ndarray, three_d: bool) -> np.ndarray:
    """PGMORL's ``predict_hyperbolic``: the objectives node ``q`` would reach if trained with each
    of ``test_weights`` for one generation, from a per-objective hyperbolic fit to the changes its
    neighbours in objective space underwent. (len(test_weights), n_obj)."""
    from scipy.optimize import least_squares  # here: its import (0.3 s) is for training only, not for acting

    test = np.asarray(test_weights, np.float64)
    test = test / test.sum(axis=1, keepdims=True)
    oq = graph.objs[q]
    threshold, sigma = 0.1, 0.03
    while True:
        xs, ys, dists = [], [], []
        for i, oi in enumerate(graph.objs):
            if np.all(np.abs(oi - oq) < np.abs(oq) * threshold):
                for s_ in graph.succ[i]:
                    ws = graph.weights[s_]
                    xs.append(ws / ws.sum())
                    ys.append(graph.delta[s_])
                    dists.append(np.linalg.norm((oi - oq) / np.abs(oq)))
        distinct: list[np.ndarray] = []
        for x in xs:
            if not any(np.linalg.norm(x - d) < 1e-5 for d in distinct):
                distinct.append(x)
        if len(distinct) > 3:
            break
        # PGMORL's 3-objective version stops at threshold 1; its 2-objective one never stops when
        # an objective of q is 0 (the population refuses such points, so it cannot happen here);
        # this cap only ends that case.
        if (three_d and threshold >= 1.0) or threshold > 1e6:
            break
        threshold, sigma = threshold * 2, sigma * 2
    n_obj = len(oq)
    pred = np.tile(oq, (len(test), 1))
    if not xs:
        return pred
    xs, ys, dists = np.asarray(xs), np.asarray(ys), np.asarray(dists)
    sw = np.exp(-0.5 * (dists / sigma) ** 2)
    for d in range(n_obj):
        x, y = xs[:, d], ys[:, d]
        a_ub = float(np.clip(y.max() - y.min(), 1.0, 500.0))
        res = least_squares(
            lambda prm, x=x, y=y: (_hyperbolic(prm, x) - y) * sw,
            np.ones(4),
            jac=lambda prm, x=x: _hyperbolic_jac(prm, x, sw),
            loss="soft_l1",
            f_scale=20.0,
            bounds=([0.0, 0.1, -5.0, -500.0], [a_ub, 20.0, 5.0, 500.0]),
        )
        pred[:, d] = oq[d] + _hyperbolic(res.x, test[:, d])
    return pred


class Population:
    """PGMORL's performance buffers: objective space split by direction into buffers (2-D: equal
    angles from the second objective's axis; 3-D and more: the nearest of a grid of directions),
    each keeping its ``size`` members farthest from the origin."""

    def __init__(self, n_obj: int, pbuffer_num: int, size: int):
        self.n_obj, self.size = n_obj, size
        if n_obj == 2:
            self.num, self.dirs = pbuffer_num, None
        else:
            d = weight_grid(n_obj, 0.0, 1.0, 1.0 / (pbuffer_num - 1))
            self.dirs = d / np.linalg.norm(d, axis=1, keepdims=True)
            self.num = len(self.dirs)

    def buffer_id(self, f: np.ndarray) -> int | None:
        if np.min(f) < _BUFFER_MIN_OBJ:
            return None
        if self.dirs is not None:
            return int(np.argmax(self.dirs @ f))
        dist = np.linalg.norm(f)
        theta = math.acos(float(np.clip(f[1] / dist, -1.0, 1.0)))
        b = int(theta // ((math.pi / 2) / self.num))
        return b if 0 <= b < self.num else None

    def members(self, objs: list[np.ndarray]) -> list[int]:
        """Indices of ``objs`` (old members first, then offspring) the rebuilt buffers keep."""
        buffers: list[list[tuple[float, int]]] = [[] for _ in range(self.num)]
        for i, f in enumerate(objs):
            b = self.buffer_id(np.asarray(f, np.float64))
            if b is None:
                continue
            dist = float(np.linalg.norm(f))
            buf = buffers[b]
            for pos, (d, _) in enumerate(buf):
                if d < dist:
                    buf.insert(pos, (dist, i))
                    break
            else:
                buf.append((dist, i))
            del buf[self.size :]
        return [i for buf in buffers for _, i in buf]


def candidate_weights(
    graph: OptGraph, node: int, n_cand: int, delta_weight: float, rng: np.random.Generator
) -> np.ndarray:
    """PGMORL's candidate weights around a population member's last weight (those it has not
    already been trained with): 2-D, ``n_cand`` angles over +-45 degrees; 3-D, the weight itself
    and grid weights within 45 degrees in random order, up to ``n_cand``."""
    succ_w = [graph.weights[s] for s in graph.succ[node]]
    center = graph.weights[node]
    out = []
    if len(center) == 2:
        ang = math.atan2(center[1], center[0])
        for i in range(n_cand):
            a = ang - math.pi / 4 + i * (math.pi / 2) / (n_cand - 1)
            wv = np.array([math.cos(a), math.sin(a)])
            if np.all(wv >= -1e-7) and not any(np.linalg.norm(wv - sw) < 1e-3 for sw in succ_w):
                out.append(wv)
        return np.asarray(out).reshape(-1, 2)
    c = center / center.sum()
    succ_n = [sw / sw.sum() for sw in succ_w]
    dup = lambda wv: any(np.linalg.norm(wv - sw) < 1e-3 for sw in succ_n)  # noqa: E731
    if not dup(c):
        out.append(c)
    grid = weight_grid(len(c), 0.0, 1.0, delta_weight / 2)
    order = np.arange(len(grid))
    rng.shuffle(order)
    for i in order:
        if len(out) >= n_cand:
            break
        wv = grid[i]
        if np.linalg.norm(wv - c) < 1e-3:
            continue
        cos = float(np.dot(wv, c) / (np.linalg.norm(wv) * np.linalg.norm(c)))
        if math.acos(np.clip(cos, -1.0, 1.0)) < math.pi / 4 and not dup(wv):
            out.append(wv)
    return np.asarray(out).reshape(-1, len(c))


def select_tasks(
    graph: OptGraph,
    pop_nodes: list[int],
    archive_objs: np.ndarray,
    s: PGMORLSettings,
    n_obj: int,
    rng: np.random.Generator,
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Prediction-guided selection: ``num_tasks`` (population index, sum-normalised weight,
    prediction) triples chosen greedily by the predicted archive's hypervolume minus
    ``sparsity`` times its sparsity."""
    cands = []
    for pi, node in enumerate(pop_nodes):
        ws = candidate_weights(graph, node, s.weight_candidates, s.delta_weight, rng)
        if len(ws) == 0:
            continue
        preds = predict_hyperbolic(graph, node, ws, three_d=n_obj > 2)
        for wv, pr in zip(ws, preds):
            cands.append((pi, wv / wv.sum(), pr))
    virtual = np.asarray(archive_objs, np.float64).reshape(-1, n_obj)
    chosen: list[tuple[int, np.ndarray, np.ndarray]] = []
    used = np.zeros(len(cands), bool)
    for _ in range(s.num_tasks):
        best, best_score = -1, -np.inf
        for ci, (_, _, pr) in enumerate(cands):
            if used[ci]:
                continue
            front = add_to_front(virtual, pr)
            score = hypervolume(front) - s.sparsity * front_sparsity(front)
            if score > best_score:
                best, best_score = ci, score
        if best < 0:
            log.warning("pgmorl: too few candidates (%d) for %d tasks", len(cands), s.num_tasks)
            break
        used[best] = True
        chosen.append(cands[best])
        virtual = add_to_front(virtual, cands[best][2])
    return chosen


# ------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------


def _actor_rows(tb: TaskBatch, idx: list[int]) -> dict:
    ix = torch.as_tensor(idx, dtype=torch.long)
    return {k: tb.params[k][ix].clone() for k in ACTOR_KEYS} | {
        "ob_mean": torch.from_numpy(tb.ob_mean[idx].astype(np.float32)),
        "ob_var": torch.from_numpy(tb.ob_var[idx].astype(np.float32)),
    }


def _cat_actor(a: dict, b: dict) -> dict:
    return {k: torch.cat([a[k], b[k]]) for k in a}


def _take_actor(a: dict, idx: np.ndarray) -> dict:
    ix = torch.as_tensor(np.asarray(idx, np.int64))
    return {k: v[ix].clone() for k, v in a.items()}


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
    s = PGMORLSettings.from_config(cfg).check()
    spec = get_spec(env_id)
    n_obj, obs_dim, act_dim = spec.n_obj, spec.obs_dim, spec.act_dim
    output = Path(output)
    partial = output.with_name(output.name + ".partial")
    flush_subnormals()  # a long fit keeps its speed (morl.runtime)
    if threads:
        torch.set_num_threads(int(threads))
    total = s.total_iters
    eval_seed = s.seed
    settings = vars(s).copy()

    t0 = time.perf_counter()
    if partial.exists():
        st = _load(partial, PARTIAL_KIND, env_id)
        if st["settings"] != settings:
            raise InputError(
                f"{partial}: written with other PGMORL settings; delete it to start over, or "
                "restore the settings it was written with"
            )
        tasks = TaskBatch.from_state(st["tasks"])
        pop = TaskBatch.from_state(st["population"]) if st["population"] is not None else None
        pop_objs = st["population_objs"].numpy().copy()
        archive = dict(st["archive"]) if st["archive"] is not None else None
        archive_objs = st["archive_objs"].numpy().copy()
        graph = OptGraph(st["graph"])
        rng = np.random.default_rng()
        rng.bit_generator.state = st["np_rng"]
        iteration, generation = int(st["iteration"]), int(st["generation"])
        history = [list(x) for x in st["history"]]
        env_steps = int(st.get("env_steps", history[-1][1] if history else 0))
        in_generation = st.get("in_generation")
        wall_before = float(st["wall_s"])
        log.info("resuming PGMORL on %s from iteration %d of %d (%s)", env_id, iteration, total, partial)
    else:
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
        objs0 = evaluate_tasks(env_id, tasks, s, eval_seed)
        tasks.nodes[:] = [graph.insert(w, o, -1) for w, o in zip(tasks.weights, objs0)]
        pop, pop_objs = None, np.zeros((0, n_obj))
        archive, archive_objs = None, np.zeros((0, n_obj))
        rng = np.random.default_rng(s.seed)
        iteration, generation, history, wall_before, env_steps = 0, 0, [], 0.0, 0
        in_generation = None

    steps_per_iter = s.num_envs * s.num_steps
    bar = Progress(total, f"pgmorl {env_id}", unit="iter", enabled=progress, initial=iteration)
    while iteration < total:
        if in_generation is None:  # a new generation starts
            n_iters = s.warmup_iters if generation == 0 else s.update_iters
            gen_start, gen_stop = iteration, min(iteration + n_iters, total)
            prev = tasks.nodes.copy()  # each task's chain in the optimisation graph
            pop_new: list[TaskBatch] = []
            pop_new_objs: list[np.ndarray] = []
        else:  # resumed inside a generation (the warm-up runs in several chunks)
            gen_start, gen_stop = int(in_generation["start"]), int(in_generation["stop"])
            prev = in_generation["prev"].numpy().copy()
            pop_new = [TaskBatch.from_state(x) for x in in_generation["population_new"]]
            pop_new_objs = [x.numpy().copy() for x in in_generation["population_new_objs"]]
            in_generation = None
        k = len(tasks.weights)

        def on_iteration(j, objs, k=k):
            bar.update(1, tasks=k, **{"archive HV": f"{history[-1][2]:.4g}" if history else "-"})

        # A generation runs in chunks of update_iters iterations, each with new episodes, so that a
        # long warm-up (200 iterations) can be saved between chunks; later generations are one chunk.
        while iteration < gen_stop:
            chunk_start, chunk_stop = iteration, min(iteration + s.update_iters, gen_stop)
            chunk = (chunk_start - gen_start) // s.update_iters
            env_seed = s.seed * 7919 + generation + 1 + chunk * 100_003
            offspring = run_generation(
                env_id,
                tasks,
                s,
                chunk_start,
                chunk_stop,
                env_seed=env_seed,
                eval_seed=eval_seed,
                on_iteration=on_iteration,
            )
            # Archive: every iteration's policies; graph and population: every update_iters-th.
            new_actor, new_objs = [], []
            for i, (snap, objs) in enumerate(offspring):
                new_actor.append(_actor_rows(snap, list(range(k))))
                new_objs.append(objs)
                if (chunk_start - gen_start + i + 1) % s.update_iters == 0:
                    for t in range(k):
                        prev[t] = graph.insert(snap.weights[t], objs[t], int(prev[t]))
                    snap.nodes[:] = prev
                    pop_new.append(snap)
                    pop_new_objs.append(objs)
            cand_actor = new_actor[0]
            for a in new_actor[1:]:
                cand_actor = _cat_actor(cand_actor, a)
            cand_objs = np.concatenate(new_objs)
            if archive is not None:
                cand_actor, cand_objs = _cat_actor(archive, cand_actor), np.concatenate([archive_objs, cand_objs])
            keep = archive_indices(cand_objs)
            archive, archive_objs = _take_actor(cand_actor, keep), cand_objs[keep]
            iteration = chunk_stop
            env_steps += k * (chunk_stop - chunk_start) * steps_per_iter
            if iteration < gen_stop:
                _save(
                    partial,
                    _partial_state(
                        env_id,
                        settings,
                        tasks,
                        pop,
                        pop_objs,
                        archive,
                        archive_objs,
                        graph,
                        rng,
                        iteration,
                        generation,
                        history,
                        env_steps,
                        wall_before + time.perf_counter() - t0,
                        {
                            "start": gen_start,
                            "stop": gen_stop,
                            "prev": torch.from_numpy(prev.copy()),
                            "population_new": [b.state() for b in pop_new],
                            "population_new_objs": [torch.from_numpy(o.copy()) for o in pop_new_objs],
                        },
                    ),
                )
        if pop_new:
            all_pop = TaskBatch.concat(([pop] if pop is not None else []) + pop_new)
            all_objs = np.concatenate([pop_objs] + pop_new_objs)
            keep_pop = Population(n_obj, s.pbuffer_num, s.pbuffer_size).members(list(all_objs))
            pop, pop_objs = all_pop.select(keep_pop), all_objs[keep_pop]
        generation += 1
        hv = hypervolume(archive_objs) if len(archive_objs) else 0.0
        history.append([iteration, env_steps, hv, len(archive_objs)])
        log.info(
            "pgmorl %s: generation %d, iteration %d/%d, archive %d policies, archive HV %.4g",
            env_id,
            generation,
            iteration,
            total,
            len(archive_objs),
            hv,
        )
        if iteration < total:
            if pop is None or len(pop_objs) == 0:
                raise InputError(
                    f"{env_id}: PGMORL's population is empty after generation {generation} (no policy "
                    "reached positive returns on every objective); nothing to select from"
                )
            chosen = select_tasks(graph, list(pop.nodes), archive_objs, s, n_obj, rng)
            tasks = pop.select([c[0] for c in chosen])
            tasks.weights[:] = np.stack([c[1] for c in chosen])
            _save(
                partial,
                _partial_state(
                    env_id,
                    settings,
                    tasks,
                    pop,
                    pop_objs,
                    archive,
                    archive_objs,
                    graph,
                    rng,
                    iteration,
                    generation,
                    history,
                    env_steps,
                    wall_before + time.perf_counter() - t0,
                    None,
                ),
            )
    bar.close()
    if archive is None or len(archive_objs) == 0:
        raise InputError(
            f"{env_id}: PGMORL's archive is empty (no policy reached non-negative returns on every "
            "objective); no population file written"
        )
    wall = wall_before + time.perf_counter() - t0
    state = {
        "kind": KIND,
        "env_id": env_id,
        "physics_version": physics_version(env_id),
        "method": "pgmorl",
        "obs_dim": obs_dim,
        "act_dim": act_dim,
        "n_obj": n_obj,
        "hidden": s.hidden,
        "act_low": np.asarray(spec.act_low, np.float32).tolist(),
        "act_high": np.asarray(spec.act_high, np.float32).tolist(),
        "obs_clip": s.obs_clip,
        "settings": settings,
        "iterations": total,
        "env_steps": env_steps,
        "archive": archive,
        "objs": torch.from_numpy(archive_objs.astype(np.float64)),
        "history": history,
        "morl_version": __version__,
    }
    save_torch(output, state)
    if partial.exists():
        partial.unlink()
    summary = {
        "env_id": env_id,
        "method": "pgmorl",
        "iterations": total,
        "generations": generation,
        "archive_size": int(len(archive_objs)),
        "archive_hv": history[-1][2],
        "env_steps": state["env_steps"],
        "wall_s": wall,
    }
    log.info("pgmorl %s done: %s", env_id, summary)
    return summary


def _partial_state(
    env_id,
    settings,
    tasks,
    pop,
    pop_objs,
    archive,
    archive_objs,
    graph,
    rng,
    iteration,
    generation,
    history,
    env_steps,
    wall,
    in_generation,
) -> dict:
    """Everything a run needs to continue: tasks, population, archive, graph, random state, and,
    between the chunks of a generation, what that generation has produced so far."""
    return {
        "kind": PARTIAL_KIND,
        "env_id": env_id,
        "physics_version": physics_version(env_id),
        "settings": settings,
        "tasks": tasks.state(),
        "population": pop.state() if pop is not None else None,
        "population_objs": torch.from_numpy(pop_objs.copy()),
        "archive": archive,
        "archive_objs": torch.from_numpy(archive_objs.copy()),
        "graph": graph.state(),
        "np_rng": rng.bit_generator.state,
        "iteration": iteration,
        "generation": generation,
        "history": history,
        "env_steps": env_steps,
        "wall_s": wall,
        "in_generation": in_generation,
    }


def _save(path: Path, state: dict) -> None:
    save_torch(path, state)


def _load(path: Path, kind: str, expect_env: str | None) -> dict:
    st = load_torch(path, "PGMORL population")
    return check_file_identity(path, st, kind, expect_env, "PGMORL run state", "run")


# ------------------------------------------------------------------------------------------
# Acting with a population: PEDA's nearest-policy rule
# ------------------------------------------------------------------------------------------


def _population_of_partial(path: Path, st: dict) -> dict:
    """The archive of a run in progress (``<output>.partial``) laid out like a final file, so that
    it can be evaluated or collected from (``morl behavior-front --policy X.pt.partial``)."""
    try:
        spec = get_spec(st["env_id"])
        return {
            "kind": KIND,
            "env_id": st["env_id"],
            "physics_version": st.get("physics_version"),
            "method": "pgmorl",
            "obs_dim": spec.obs_dim,
            "act_dim": spec.act_dim,
            "n_obj": spec.n_obj,
            "hidden": st["settings"]["hidden"],
            "act_low": np.asarray(spec.act_low, np.float32).tolist(),
            "act_high": np.asarray(spec.act_high, np.float32).tolist(),
            "obs_clip": st["settings"]["obs_clip"],
            "settings": st["settings"],
            "partial": True,
            "iterations": st["iteration"],
            "env_steps": int(st.get("env_steps", st["history"][-1][1] if st["history"] else 0)),
            "archive": st["archive"],
            "objs": st["archive_objs"],
            "history": st["history"],
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: incomplete partial PGMORL file ({exc!r})") from None


class PopulationPolicy:
    """A trained PGMORL population: for each (observation, preference) row the deterministic action
    of the archive policy whose sum-normalised objective vector is nearest to the preference
    (PEDA's ``collect_env_new.py``), on observations normalised by that policy's statistics.

    ``pref_low`` / ``pref_high``: the per-objective range of the normalised objective vectors, the
    box D4MORL's preference distributions are drawn in.
    """

    def __init__(self, path: str | os.PathLike, expect_env: str | None = None, state: dict | None = None):
        self.path = Path(path)
        st = state if state is not None else load_torch(self.path, "behavior checkpoint")
        if isinstance(st, dict) and st.get("kind") == PARTIAL_KIND:
            st = _population_of_partial(self.path, st)
        check_file_identity(self.path, st, KIND, expect_env, "PGMORL population", "population")
        try:
            self.env_id = st["env_id"]
            self.n_obj, self.obs_dim, self.act_dim = int(st["n_obj"]), int(st["obs_dim"]), int(st["act_dim"])
            hidden = int(st["hidden"])
            self.act_low = np.asarray(st["act_low"], np.float32)
            self.act_high = np.asarray(st["act_high"], np.float32)
            self.obs_clip = float(st["obs_clip"])
            arch = {k: st["archive"][k].to(torch.float32) for k in (*ACTOR_KEYS, "ob_mean", "ob_var")}
            objs = st["objs"].numpy().astype(np.float64)
        except (KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"{self.path}: incomplete PGMORL population ({exc!r})") from None
        n = objs.shape[0] if objs.ndim == 2 else -1
        if n < 1:
            raise InputError(f"{self.path}: the population's archive is empty; there is no policy to act")
        want = {
            "a_w1": (n, self.obs_dim, hidden),
            "a_b1": (n, hidden),
            "a_w2": (n, hidden, hidden),
            "a_b2": (n, hidden),
            "a_wm": (n, hidden, self.act_dim),
            "a_bm": (n, self.act_dim),
            "ob_mean": (n, self.obs_dim),
            "ob_var": (n, self.obs_dim),
        }
        bad = [
            f"{k} {tuple(arch[k].shape)} (expected {shape})"
            for k, shape in want.items()
            if tuple(arch[k].shape) != shape
        ]
        if objs.shape[1] != self.n_obj:
            bad.append(f"objs {objs.shape} (expected ({n}, {self.n_obj}))")
        if bad:
            raise InputError(f"{self.path}: PGMORL population with mismatched sizes: {', '.join(bad)}")
        if not all(torch.isfinite(v).all() for v in arch.values()) or not np.all(np.isfinite(objs)):
            raise InputError(f"{self.path}: PGMORL population holds non-finite weights or objectives")
        if np.any(objs < 0) or np.any(objs.sum(1) <= 0):
            raise InputError(f"{self.path}: PGMORL population objectives must be non-negative with a positive sum")
        spec = get_spec(self.env_id)
        if (spec.obs_dim, spec.act_dim, spec.n_obj) != (self.obs_dim, self.act_dim, self.n_obj):
            raise InputError(
                f"{self.path}: the population takes {self.obs_dim} observations and {self.n_obj} "
                f"objectives and gives {self.act_dim} actions, but {self.env_id} has {spec.obs_dim}, "
                f"{spec.n_obj} and {spec.act_dim}"
            )
        self.arch = arch
        self.objs = objs
        self.norm_objs = objs / objs.sum(axis=1, keepdims=True)
        self.pref_low = self.norm_objs.min(axis=0)
        self.pref_high = self.norm_objs.max(axis=0)
        self.meta = {k: v for k, v in st.items() if k not in ("archive", "objs")}
        self.meta["archive_size"] = n

    def nearest(self, prefs: np.ndarray) -> np.ndarray:
        """(N,) index of the archive policy that acts for each preference row."""
        w = np.asarray(prefs, np.float64)
        d = ((self.norm_objs[None, :, :] - w[:, None, :]) ** 2).sum(-1)
        return np.argmin(d, axis=1)

    @torch.inference_mode()
    def act(self, obs: np.ndarray, prefs: np.ndarray) -> np.ndarray:
        idx = torch.from_numpy(self.nearest(prefs))
        a = self.arch
        o = torch.from_numpy(np.asarray(obs, np.float32))
        z = ((o - a["ob_mean"][idx]) / torch.sqrt(a["ob_var"][idx] + _EPS)).clamp(-self.obs_clip, self.obs_clip)
        rows = {k: a[k][idx] for k in ACTOR_KEYS}
        return actor_mean(rows, z.unsqueeze(1))[:, 0].numpy()


# ------------------------------------------------------------------------------------------
# Thinning an archive to a file size
# ------------------------------------------------------------------------------------------

#: How :func:`thin_population` picks the policies it keeps (recorded in the thinned file).
THINNING_RULE = (
    "the policies at each objective's smallest and largest sum-normalised value, then farthest-point "
    "sampling in the sum-normalised objective simplex (squared distance, as the nearest-policy rule)"
)


def thinned_indices(norm_objs: np.ndarray, max_policies: int) -> np.ndarray:
    """Sorted indices of at most ``max_policies`` rows of ``norm_objs`` (the archive's sum-normalised
    objective vectors): first the rows holding each objective's smallest and largest value, so the
    box preferences are drawn in stays the same, then, one at a time, the row farthest (squared
    distance) from every row kept so far, the first such row on a tie. The kept rows cover the
    simplex region the nearest-policy rule maps preferences to, as evenly as greedy covering can."""
    n = len(norm_objs)
    if n <= max_policies:
        return np.arange(n)
    keep = sorted({int(i) for i in (*np.argmin(norm_objs, axis=0), *np.argmax(norm_objs, axis=0))})
    if len(keep) > max_policies:
        raise ValueError(f"max_policies {max_policies} is below the {len(keep)} policies that span the preference box")
    nearest = np.min(((norm_objs[:, None, :] - norm_objs[None, keep, :]) ** 2).sum(-1), axis=1)
    while len(keep) < max_policies:
        j = int(np.argmax(nearest))
        keep.append(j)
        nearest = np.minimum(nearest, ((norm_objs - norm_objs[j]) ** 2).sum(-1))
    return np.sort(np.asarray(keep))


def thin_population(
    path: str | os.PathLike, max_policies: int, output: str | os.PathLike, expect_env: str | None = None
) -> dict[str, Any]:
    """Write to ``output`` the population file ``path`` with at most ``max_policies`` archive
    policies (:func:`thinned_indices`), for a file size limit: each policy of a 64 x 64 actor takes
    about 20 KB, and a three-objective archive holds thousands. Collection from the thinned file
    uses the nearest of the kept policies, a departure from the full archive that its behavior
    front measures. The file records the original archive size, the rule and the source's SHA-256.
    ``path`` may be a run in progress (``<output>.partial``): the output is then the archive at its
    last saved iteration, and says so (``partial``, ``iterations``, ``env_steps``)."""
    from morl.data import file_sha256

    path = Path(path)
    if max_policies < 1:
        raise InputError(f"max_policies must be at least 1, got {max_policies}")
    st = load_torch(path, "behavior checkpoint")
    if isinstance(st, dict) and st.get("kind") == PARTIAL_KIND:
        # a run in progress (<output>.partial): its archive so far, as a population file that
        # records where the run stood ("partial": True, "iterations", "env_steps")
        _load(path, PARTIAL_KIND, expect_env)  # the run state's own identity checks first
        st = _population_of_partial(path, st)
    policy = PopulationPolicy(path, expect_env=expect_env, state=st)  # every check of a population file
    try:
        keep = thinned_indices(policy.norm_objs, max_policies)
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    index = torch.from_numpy(keep)
    thinned = dict(st)
    thinned["archive"] = {k: v.index_select(0, index).clone() for k, v in st["archive"].items()}
    thinned["objs"] = st["objs"].index_select(0, index).clone()
    thinned["thinned"] = {
        "archive_size": len(policy.objs),
        "kept": len(keep),
        "rule": THINNING_RULE,
        "source_sha256": file_sha256(path),
    }
    save_torch(output, thinned)
    kept = policy.norm_objs[keep]
    summary = {
        "env_id": policy.env_id,
        "archive_size": len(policy.objs),
        "kept": len(keep),
        "pref_box_unchanged": bool(
            np.array_equal(kept.min(0), policy.pref_low) and np.array_equal(kept.max(0), policy.pref_high)
        ),
        "bytes": os.path.getsize(output),
    }
    log.info("thinned %s: %s", path, summary)
    return summary
