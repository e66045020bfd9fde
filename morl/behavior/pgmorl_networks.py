"""The PPO learner's pieces for PGMORL, stacked over K tasks: the separate actor and critic networks
(parameters with a leading task axis, applied with batched matrix products), the Gaussian policy's
log-probability, Adam per task (:class:`StackedAdam`) and the running statistics that normalise
observations and objective returns (:func:`rms_update`)."""

from __future__ import annotations

import math

import numpy as np
import torch

#: PGMORL's epsilon in its normalisers (baselines' VecNormalize).
EPS = 1e-8


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


def mlp3(x: torch.Tensor, p: dict, keys: tuple[str, ...]) -> torch.Tensor:
    w1, b1, w2, b2, w3, b3 = (p[k] for k in keys)
    h = torch.tanh(torch.baddbmm(b1.unsqueeze(1), x, w1))
    h = torch.tanh(torch.baddbmm(b2.unsqueeze(1), h, w2))
    return torch.baddbmm(b3.unsqueeze(1), h, w3)


FUSED_KEYS = ("w1", "b1", "w2", "b2", "w3", "b3")


def fuse(p: dict) -> dict:
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
    return mlp3(x, p, ACTOR_KEYS)


def critic_values(p: dict, x: torch.Tensor) -> torch.Tensor:
    """(K, n, obs) normalised observations -> (K, n, n_obj) values (normalised reward units)."""
    return mlp3(x, p, CRITIC_KEYS)


def log_prob(mean: torch.Tensor, logstd: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
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
