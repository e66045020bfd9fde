"""PGMORL's task state (:class:`TaskBatch`): everything a lineage carries from parent to child,
K tasks stacked along axis 0 (networks, Adam moments, normalisers, weights, graph nodes); the
observation normalisation with each task's own statistics, and the tasks' evaluation
(:func:`evaluate_tasks`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from morl.behavior.pgmorl_networks import EPS, actor_mean
from morl.behavior.pgmorl_settings import PGMORLSettings
from morl.envs import BatchedEnv, get_spec


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


def normalise_obs(tb: TaskBatch, obs: np.ndarray, clip: float) -> np.ndarray:
    """(K, n, obs) raw observations -> normalised by each task's statistics, clipped."""
    z = (obs - tb.ob_mean[:, None, :]) / np.sqrt(tb.ob_var[:, None, :] + EPS)
    return np.clip(z, -clip, clip, out=z)


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
                z = torch.from_numpy(normalise_obs(tb, obs[:, None, :], s.obs_clip).astype(np.float32))
                act[:] = actor_mean(tb.params, z)[:, 0].numpy()
                obs, _, _, _ = env.step(act)
        if lengths is not None:
            lengths.extend(env.lengths.tolist())
        return env.returns.astype(np.float64)
