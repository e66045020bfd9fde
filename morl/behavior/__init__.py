"""Behavior policies: the interface every behavior method implements, and loading and training by method.

Two methods make the policies that collect the datasets (docs/datasets.md):

* ``td3`` (:mod:`morl.behavior.td3`): one preference-conditioned TD3 actor,
  :class:`~morl.behavior.td3.BehaviorPolicy`;
* ``pgmorl`` (:mod:`morl.behavior.pgmorl`): a PGMORL population of PPO policies,
  :class:`~morl.behavior.pgmorl.PopulationPolicy`, which acts by D4MORL's nearest-policy rule.

Both are a :class:`Behavior`: what collection (:mod:`morl.collect`), the behavior front
(:func:`morl.evaluate.evaluate_behavior`) and the shipped-policy checks (:mod:`morl.shipped`) use.
:func:`load_behavior` reads either kind of file (final or ``.partial``); :func:`train_behavior`
trains with the method a config's ``behavior`` section names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from morl.behavior.pgmorl import KIND, PARTIAL_KIND, PopulationPolicy, train_pgmorl
from morl.behavior.td3 import BehaviorPolicy, train_td3
from morl.torch_io import load_torch

__all__ = ["Behavior", "BehaviorPolicy", "PopulationPolicy", "load_behavior", "train_behavior"]


@runtime_checkable
class Behavior(Protocol):
    """A trained behavior policy of any method: deterministic actions for a batch of (observation,
    preference) rows, and what the policy was made for."""

    path: Path  # the file it was loaded from
    env_id: str
    obs_dim: int
    act_dim: int
    n_obj: int
    act_low: np.ndarray  # (act_dim,) float32 action bounds
    act_high: np.ndarray
    #: (n_obj,) float64: the box of preferences the policy covers, where datasets draw theirs
    pref_low: np.ndarray
    pref_high: np.ndarray
    meta: dict[str, Any]  # what the file records besides the weights (method, settings, steps, ...)

    def act(self, obs: np.ndarray, prefs: np.ndarray) -> np.ndarray:
        """(B, act_dim) actions for (B, obs_dim) observations and (B, n_obj) preferences."""
        ...


def load_behavior(path: str | os.PathLike, expect_env: str | None = None) -> Behavior:
    """The behavior policy in ``path``, whichever method made it: a :class:`BehaviorPolicy` (TD3)
    or a :class:`PopulationPolicy` (PGMORL), told apart by the file's ``kind``. ``expect_env``: the
    env id the caller needs; a policy of another env is refused."""
    st = load_torch(path, "behavior checkpoint")
    if isinstance(st, dict) and st.get("kind") in (KIND, PARTIAL_KIND):
        return PopulationPolicy(path, expect_env=expect_env, state=st)
    return BehaviorPolicy(path, expect_env=expect_env, state=st)


def train_behavior(
    env_id: str,
    cfg: dict[str, Any],
    output: str | os.PathLike,
    threads: int | None = None,
    progress: bool = True,
    hv_every: int | None = None,
    device: str | torch.device = "auto",
) -> dict[str, Any]:
    """Train the behavior policy of ``env_id`` with the ``behavior`` config section ``cfg``, by its
    ``method`` (``td3``, the default, or ``pgmorl``); write ``output`` and return a summary.

    ``threads``: torch threads (PGMORL: default 1). ``hv_every`` and ``device`` are TD3's
    (:func:`morl.behavior.td3.train_td3`); PGMORL trains on the CPU.
    """
    if cfg.get("method", "td3") == "pgmorl":
        return train_pgmorl(env_id, cfg["pgmorl"], output, threads=threads or 1, progress=progress)
    return train_td3(env_id, cfg, output, threads=threads, progress=progress, hv_every=hv_every, device=device)
