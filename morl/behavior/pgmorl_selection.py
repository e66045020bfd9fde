"""PGMORL's evolutionary step: the weight grid, the optimisation graph (:class:`OptGraph`), the
hyperbolic prediction of where a candidate weight takes a policy (:func:`predict_hyperbolic`),
the population's performance buffers (:class:`Population`) and the prediction-guided choice of the
next generation's tasks (:func:`select_tasks`)."""

from __future__ import annotations

import math

import numpy as np

from morl.behavior.pgmorl_archive import add_to_front, front_sparsity
from morl.behavior.pgmorl_settings import PGMORLSettings
from morl.metrics import hypervolume
from morl.progress import log

#: PGMORL's minimum objective for the performance buffers.
_BUFFER_MIN_OBJ = 1e-7


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
