"""PGMORL's Pareto archive: non-dominated fronts and their sparsity (PGMORL's ``morl/utils.py``),
and the archive itself, every evaluated policy's actor and observation statistics that no other
policy's objectives dominate (:func:`merge_archive`)."""

from __future__ import annotations

import numpy as np
import torch

from morl.behavior.pgmorl_networks import ACTOR_KEYS
from morl.behavior.pgmorl_tasks import TaskBatch


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
# The archive: actors and observation statistics of the non-dominated policies
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


def merge_archive(
    archive: dict | None, archive_objs: np.ndarray, offspring: list[tuple[TaskBatch, np.ndarray]]
) -> tuple[dict, np.ndarray]:
    """The archive (``None`` before the first policies) with every task of every (snapshot,
    (K, n_obj) objectives) pair of ``offspring`` offered to it: the rows :func:`archive_indices`
    keeps of the old archive followed by the new policies, as (actor rows, objectives)."""
    new_actor = [_actor_rows(snap, list(range(len(snap.weights)))) for snap, _ in offspring]
    cand_actor = new_actor[0]
    for a in new_actor[1:]:
        cand_actor = _cat_actor(cand_actor, a)
    cand_objs = np.concatenate([objs for _, objs in offspring])
    if archive is not None:
        cand_actor, cand_objs = _cat_actor(archive, cand_actor), np.concatenate([archive_objs, cand_objs])
    keep = archive_indices(cand_objs)
    return _take_actor(cand_actor, keep), cand_objs[keep]
