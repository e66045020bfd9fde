"""The front model of MODULI's return deviation: an MLP from a preference to the return the data's
front offers there.

MODULI (Yuan, Zheng, Dong and Hao, ICML 2025) scores an agent at a preference ``w`` its data did
not cover by the distance between the return it achieved and ``g(w)``, the return a regression
fitted on the complete dataset's Pareto-front trajectories predicts at ``w``
(:func:`morl.metrics.return_deviation`). This module fits and stores that regression the way
MODULI's ``dev/mo_pipelines/front_approx.py`` (github.com/pickxiguapi/MODULI, commit 2b78619) does:

* **training points** (:func:`front_training_mask`): the trajectories of the complete dataset
  whose return vector has no negative coordinate and is dominated by no trajectory's return
  (tolerance 0; duplicates kept), i.e. PEDA's ``undominated_indices``. Inputs are the raw
  behaviour preferences, targets the raw undiscounted trajectory returns; nothing is normalised;
* **network**: ``Linear(d, 128) - Mish - Linear(128, 512) - Mish - Linear(512, 512) - Mish -
  Linear(512, d)`` in float32, d the number of objectives, torch's default initialisation;
* **fit**: mean squared error, AdamW with lr 1e-3 and torch's default betas, eps and weight decay
  (0.01), batches of 512 drawn from a reshuffled pass over the points (the last batch of a pass
  holds the rest), passes repeated until ``steps`` gradient steps (MODULI: 100,000) are done;
  seed 0.

Departures, none of which changes the definition: the weights are initialised after
``torch.manual_seed(seed)`` as in MODULI, but the batch order comes from a generator of its own
(seeded with ``seed``) rather than the DataLoader's draws from the global one, and the fit runs on
one CPU thread (MODULI used a GPU), so that the same points, steps and seed give the same weights
on every run on one kind of machine. The global random state is left as it was.

The file (:func:`save_front_model`, :func:`fit_front_model_file`) is a torch file read with the
safe loader. It holds the weights, the settings, the training points and the SHA-256 of the
dataset it was fitted on, which the tables match with the ``coverage_source_sha256`` an evaluation
of a coverage variant records.

A dataset none of whose trajectories has a return with no negative objective that no other return
dominates (a weak behaviour policy's data can be like that) leaves MODULI's fit nothing to learn
from: its RD is undefined. :func:`fit_front_model_file` then writes a file that says so (no
network, no training points, ``info["unfitted"]`` the reason), so that the tables show "—" for that
dataset's RD instead of the whole run stopping.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from morl import __version__
from morl.cpu import flush_subnormals
from morl.data import DataFileError, file_sha256, load_dataset
from morl.errors import InputError
from morl.metrics import peda_front_mask
from morl.progress import Progress, log
from morl.runtime import torch_threads
from morl.torch_io import load_torch, save_torch

#: MODULI's settings (``front_approx.py``): gradient steps, batch size, learning rate, seed.
STEPS = 100_000
BATCH_SIZE = 512
LR = 1e-3
SEED = 0
HIDDEN = (128, 512, 512)
#: One CPU thread: float32 sums depend on the thread count, so a fixed count repeats a fit exactly.
THREADS = 1

KIND = "morl-front-model"
FORMAT_VERSION = 1


def front_training_mask(returns) -> np.ndarray:
    """Which trajectories the front model is fitted on: those whose return vector (a row of
    ``returns``) has no negative coordinate and is dominated by no row (tolerance 0; duplicates
    all kept), as MODULI selects them with PEDA's ``undominated_indices``."""
    return peda_front_mask(returns)


def build_network(n_obj: int) -> nn.Sequential:
    """MODULI's front approximator for ``n_obj`` objectives (float32, torch's default init)."""
    widths = (n_obj, *HIDDEN)
    layers: list[nn.Module] = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        layers += [nn.Linear(a, b), nn.Mish()]
    layers.append(nn.Linear(widths[-1], n_obj))
    return nn.Sequential(*layers)


@dataclass
class FrontModel:
    """A fitted front model: :meth:`predict` gives the predicted return vector of each preference.

    ``points_preference`` / ``points_return``: the training points (raw); ``info``: the settings and
    provenance written with it (steps, seed, final loss, source file and hash, ...). ``network`` is
    None for a dataset with no training point (:attr:`fitted` False, ``info["unfitted"]`` says why)."""

    network: nn.Sequential | None
    n_obj: int
    points_preference: np.ndarray
    points_return: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def fitted(self) -> bool:
        return self.network is not None

    def predict(self, preferences) -> np.ndarray:
        """The predicted raw return vectors ``g(w)`` of the preferences (rows of a ``(P, n_obj)``
        array), as float64; one forward pass in float32 on one CPU thread."""
        if self.network is None:
            raise ValueError(f"this front model was never fitted: {self.info.get('unfitted', 'no training points')}")
        w = np.asarray(preferences, dtype=np.float64)
        if w.ndim != 2 or w.shape[1] != self.n_obj:
            raise ValueError(f"preferences must be a (P, {self.n_obj}) array, got shape {w.shape}")
        if not np.all(np.isfinite(w)):
            raise ValueError("preferences contain non-finite values (NaN or inf)")
        if len(w) == 0:
            return np.empty((0, self.n_obj))
        with torch_threads(THREADS), torch.no_grad():
            out = self.network(torch.from_numpy(w.astype(np.float32)))
        return out.numpy().astype(np.float64)


def fit_front_model(
    preferences, returns, steps: int = STEPS, seed: int = SEED, progress: bool = False, desc: str = "front model"
) -> FrontModel:
    """Fit MODULI's front model on trajectories (``preferences`` and ``returns``: ``(T, n_obj)`` arrays,
    one row per trajectory, raw), on the points :func:`front_training_mask` keeps.

    ``steps`` gradient steps (MODULI: 100,000) from ``seed``. The same inputs, steps and seed give
    the same weights. Raises ``ValueError`` when the inputs are malformed or no trajectory is kept.
    """
    w = np.asarray(preferences, dtype=np.float64)
    r = np.asarray(returns, dtype=np.float64)
    if w.ndim != 2 or r.ndim != 2 or w.shape != r.shape or w.shape[1] < 2:
        raise ValueError(
            f"preferences and returns must be (T, n_obj) arrays of one shape with n_obj >= 2, got "
            f"{w.shape} and {r.shape}"
        )
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(r))):
        raise ValueError("preferences and returns must be finite")
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(f"steps must be an integer of at least 1, got {steps!r}")
    keep = front_training_mask(r)
    if not keep.any():
        raise ValueError(
            f"no trajectory has a return with no negative coordinate that no other return dominates "
            f"(of {len(r)}); the front model has nothing to fit"
        )
    n_obj = w.shape[1]
    x = torch.from_numpy(w[keep].astype(np.float32))
    y = torch.from_numpy(r[keep].astype(np.float32))
    n = len(x)
    losses: list[float] = []
    flush_subnormals()  # a long fit keeps its speed (morl.cpu)
    with torch_threads(THREADS), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        network = build_network(n_obj)
        order_rng = torch.Generator().manual_seed(seed)
        optimiser = torch.optim.AdamW(network.parameters(), lr=LR, fused=True)
        bar = Progress(steps, desc, enabled=progress)
        done = 0
        while done < steps:
            order = torch.randperm(n, generator=order_rng)
            for start in range(0, n, BATCH_SIZE):
                idx = order[start : start + BATCH_SIZE]
                loss = nn.functional.mse_loss(network(x[idx]), y[idx])
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                done += 1
                if done > steps - 1000:
                    losses.append(loss.item())
                if done % 1000 == 0 or done == steps:
                    bar.advance_to(done)
                if done == steps:
                    break
        bar.close()
        network.eval()
        with torch.no_grad():
            fitted_mse = float(nn.functional.mse_loss(network(x), y))
    info = {
        "steps": int(steps),
        "seed": int(seed),
        "batch_size": BATCH_SIZE,
        "lr": LR,
        "weight_decay": optimiser.defaults["weight_decay"],
        "threads": THREADS,
        "n_trajectories": int(len(r)),
        "n_points": int(n),
        "final_loss": float(np.mean(losses)),
        "fitted_rmse": math.sqrt(fitted_mse),
    }
    return FrontModel(network, n_obj, w[keep], r[keep], info)


# ------------------------------------------------------------------------------------------- files
def save_front_model(path: os.PathLike | str, model: FrontModel, meta: dict[str, Any] | None = None) -> None:
    """Write ``model`` atomically to ``path`` (a torch file of plain types and tensors); ``meta``
    (JSON-like: the source file and its hash, env, ...) is stored beside its ``info``."""
    obj = {
        "kind": KIND,
        "format_version": FORMAT_VERSION,
        "n_obj": model.n_obj,
        "hidden": list(HIDDEN),
        "info": dict(model.info),
        "meta": dict(meta or {}),
        "points_preference": torch.from_numpy(np.ascontiguousarray(model.points_preference, np.float64)),
        "points_return": torch.from_numpy(np.ascontiguousarray(model.points_return, np.float64)),
        "state_dict": {}
        if model.network is None
        else {k: v.detach().clone() for k, v in model.network.state_dict().items()},
        "morl_version": __version__,
        "torch_version": str(torch.__version__),
    }
    save_torch(path, obj)


def load_front_model(path: os.PathLike | str) -> FrontModel:
    """Read a file :func:`save_front_model` wrote; ``info`` then also holds its ``meta`` entries.
    A file of another kind, format or shape raises :class:`~morl.data.DataFileError` naming it."""
    obj = load_torch(path, what="front model file")
    if not isinstance(obj, dict) or obj.get("kind") != KIND:
        kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
        raise DataFileError(path, f"not a morl front model (kind {kind!r}, expected {KIND!r})")
    if obj.get("format_version") != FORMAT_VERSION:
        raise DataFileError(
            path,
            f"front model format version {obj.get('format_version')!r} is not supported (expected {FORMAT_VERSION})",
        )
    missing = [k for k in ("n_obj", "info", "meta", "points_preference", "points_return", "state_dict") if k not in obj]
    if missing:
        raise DataFileError(path, f"front model lacks key(s) {', '.join(missing)}")
    n_obj = obj["n_obj"]
    if isinstance(n_obj, bool) or not isinstance(n_obj, int) or n_obj < 2:
        raise DataFileError(path, f"front model has n_obj {n_obj!r}; expected an integer of at least 2")
    info = {**dict(obj["info"]), **dict(obj["meta"])}
    points = [obj["points_preference"], obj["points_return"]]
    if not all(isinstance(p, torch.Tensor) and p.ndim == 2 and p.shape[1] == n_obj for p in points):
        raise DataFileError(path, f"front model training points are not (K, {n_obj}) tensors")
    points = [p.numpy().astype(np.float64) for p in points]
    if info.get("unfitted"):
        if obj["state_dict"] or len(points[0]):
            raise DataFileError(path, "front model says it was never fitted, yet holds weights or training points")
        return FrontModel(None, n_obj, *points, info)
    network = build_network(n_obj)
    try:
        network.load_state_dict(obj["state_dict"])
    except (RuntimeError, TypeError, AttributeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataFileError(
            path, f"front model weights do not fit the network for {n_obj} objectives ({first})"
        ) from None
    if not all(torch.isfinite(v).all() for v in network.state_dict().values()):
        raise DataFileError(path, "front model weights hold NaN or infinite values")
    network.eval()
    return FrontModel(network, n_obj, *points, info)


def fit_front_model_file(
    dataset: os.PathLike | str, output: os.PathLike | str, steps: int = STEPS, seed: int = SEED, progress: bool = True
) -> dict[str, Any]:
    """Fit the front model of a complete dataset file and write it to ``output``; return its info.

    A shattered or narrow coverage variant is refused: the front model of MODULI's RD comes from
    the complete data, which the variant's held-out preferences are compared with. A dataset with no
    training point (:func:`front_training_mask`) gets a file that records it was never fitted.
    """
    from morl.coverage import coverage_record

    ds = load_dataset(dataset)
    record = coverage_record(ds.meta, dataset)
    if record is not None and record["coverage"] != "complete":
        raise InputError(
            f"{dataset}: a {record['coverage']!r} coverage variant; fit the front model on the complete "
            f"dataset it was derived from ({ds.meta.get('coverage_source')})"
        )
    if not front_training_mask(ds.traj_returns).any():
        n_obj = ds.n_obj
        why = (
            f"none of its {ds.n_trajectories} trajectories has a return with no negative objective that no "
            "other return dominates, so MODULI's front model has nothing to fit and its RD is undefined"
        )
        log.warning("%s: %s", dataset, why)
        info = {
            "steps": int(steps),
            "seed": int(seed),
            "n_trajectories": ds.n_trajectories,
            "n_points": 0,
            "unfitted": why,
        }
        model = FrontModel(None, n_obj, np.empty((0, n_obj)), np.empty((0, n_obj)), info)
    else:
        model = fit_front_model(
            ds.traj_preferences,
            ds.traj_returns,
            steps=steps,
            seed=seed,
            progress=progress,
            desc=f"front model {dataset}",
        )
    meta = {
        "source": str(dataset),
        "source_sha256": file_sha256(dataset),
        "env_id": ds.meta.get("env_id"),
        "quality": ds.meta.get("quality"),
        "entropy": ds.meta.get("entropy"),
    }
    save_front_model(output, model, meta)
    return {**model.info, **meta}
