"""Behavior policies: the registry of behavior methods, the interface every method's policy
implements, and loading and training through the registry.

Two methods make the policies that collect the datasets (docs/datasets.md):

* ``td3`` (:mod:`morl.behavior.td3`): one preference-conditioned TD3 actor,
  :class:`~morl.behavior.td3.BehaviorPolicy`;
* ``pgmorl`` (:mod:`morl.behavior.pgmorl`): a PGMORL population of PPO policies,
  :class:`~morl.behavior.pgmorl.PopulationPolicy`, which acts by D4MORL's nearest-policy rule.

Each is a :class:`Method` line of :data:`METHODS`, which holds what the rest of the project needs
without importing torch: the name a config's ``behavior.method`` gives, where its settings sit in
the config, and its modules. Everything that lists the methods reads it: the config schema and
validation (:mod:`morl.config`), the command line (:mod:`morl.cli`) and :func:`train_behavior`.

A method's settings module (no torch) defines ``Settings`` (a frozen dataclass made with
:mod:`morl.settings`), ``RULES``, ``LABEL`` (the config key they sit under) and optionally
``check_settings``; its module (which imports torch) defines the training function the line
names, called as ``train(env_id, settings, output, options)`` with a :class:`TrainOptions`
(each method uses the options that apply to it), ``POLICY_KINDS`` (the ``kind`` of the files it
writes) and the policy class the line names, a :class:`Behavior`. Adding a method is those two
modules and one line below.

Both policies are a :class:`Behavior`: what collection (:mod:`morl.collect`), the behavior front
(:func:`morl.evaluate.evaluate_behavior`) and the shipped-policy checks (:mod:`morl.shipped`) use.
:func:`load_behavior` reads either kind of file (final or ``.partial``); :func:`train_behavior`
trains with the method a config's ``behavior`` section names.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import numpy as np

from morl import settings as settings_core
from morl.errors import InputError

__all__ = [
    "DEFAULT_METHOD",
    "METHODS",
    "Behavior",
    "BehaviorPolicy",
    "Method",
    "PopulationPolicy",
    "TrainOptions",
    "load_behavior",
    "method",
    "method_names",
    "train_behavior",
]


@dataclass(frozen=True)
class Method:
    """One behavior method: ``name`` (``behavior.method``'s value), ``section`` (the key of its
    settings under ``behavior``; None: the keys of ``behavior`` itself), ``settings_module`` (its
    settings; no torch), ``module`` (trains it and reads its files; imported on first use),
    ``trainer`` and ``policy`` (the names of its training function and policy class there),
    ``doc`` (what it makes, for the config schema) and ``d4morl_only`` (it trains the D4MORL tasks
    only)."""

    name: str
    section: str | None
    settings_module: str
    module: str
    trainer: str
    policy: str
    doc: str
    d4morl_only: bool = False

    def settings(self) -> ModuleType:
        """The method's settings module (``Settings``, ``RULES``, ``LABEL``, optionally ``check_settings``)."""
        return importlib.import_module(self.settings_module)

    def load(self) -> ModuleType:
        """The method's module (imported on first use: it imports torch)."""
        return importlib.import_module(self.module)

    @property
    def label(self) -> str:
        """The config key its settings sit under, e.g. ``behavior.pgmorl``."""
        return "behavior" if self.section is None else f"behavior.{self.section}"

    def keys(self) -> tuple[str, ...]:
        """The names of its settings."""
        return tuple(f.name for f in dataclasses.fields(self.settings().Settings))

    def required(self) -> tuple[str, ...]:
        """The settings a config must give (those without a default)."""
        return tuple(f.name for f in dataclasses.fields(self.settings().Settings) if not settings_core.has_default(f))

    def values(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """The method's settings among one env's behavior settings ``cfg`` (:func:`morl.config.behavior_settings`)."""
        if self.section is not None:
            return dict(cfg.get(self.section) or {})
        keys = self.keys()
        return {k: v for k, v in cfg.items() if k in keys}

    def resolve_settings(self, values: dict | None) -> dict[str, Any]:
        """``values`` with the method's defaults filled in and checked (an InputError naming the key)."""
        mod = self.settings()
        return settings_core.resolve(mod.Settings, values, mod.LABEL, mod.RULES, getattr(mod, "check_settings", None))


@dataclass(frozen=True)
class TrainOptions:
    """How a behavior run trains, whatever its method; each method uses those that apply to it.

    ``threads``: torch threads (None: the method's default; PGMORL's is 1). ``progress``: show a
    progress bar. ``hv_every`` (TD3): environment steps between HV estimates (None: its
    ``checkpoint_every``; 0: none). ``device`` (TD3): ``"auto"`` (CUDA if present), ``"cpu"`` or
    ``"cuda[:i]"``; PGMORL trains on the CPU."""

    threads: int | None = None
    progress: bool = True
    hv_every: int | None = None
    device: Any = "auto"


#: The behavior methods; the first is the default of a config that names none.
METHODS: tuple[Method, ...] = (
    Method("td3", None, "morl.behavior.td3_settings", "morl.behavior.td3", "train", "BehaviorPolicy",
           "one preference-conditioned TD3 actor (any task, MO-Gymnasium ids included)"),
    Method("pgmorl", "pgmorl", "morl.behavior.pgmorl_settings", "morl.behavior.pgmorl", "train", "PopulationPolicy",
           "a PGMORL population acting by PEDA's nearest-policy rule (the D4MORL tasks)", d4morl_only=True),
)  # fmt: skip
#: The method of a config's ``behavior`` section that names none.
DEFAULT_METHOD = METHODS[0].name


def method_names() -> tuple[str, ...]:
    return tuple(m.name for m in METHODS)


def method(name: str) -> Method:
    """The method called ``name`` (an InputError listing the known ones if there is none)."""
    for m in METHODS:
        if m.name == name:
            return m
    raise InputError(f"unknown behavior method {name!r}; known: {', '.join(method_names())}")


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


def __getattr__(name: str) -> Any:
    # the policy classes, imported on use: they import torch, and the registry serves the config
    # schema and the command line, which must start fast
    for m in METHODS:
        if name == m.policy:
            return getattr(m.load(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_behavior(path: str | os.PathLike, expect_env: str | None = None) -> Behavior:
    """The behavior policy in ``path``, whichever method made it, told apart by the file's ``kind``
    (a file of no method's kind goes to the default method's reader, which says what is wrong
    with it). ``expect_env``: the env id the caller needs; a policy of another env is refused."""
    from morl.torch_io import load_torch

    st = load_torch(path, "behavior checkpoint")
    kind = st.get("kind") if isinstance(st, dict) else None
    m = next((m for m in METHODS if kind in m.load().POLICY_KINDS), METHODS[0])
    return getattr(m.load(), m.policy)(path, expect_env=expect_env, state=st)


def train_behavior(env_id: str, cfg: dict[str, Any], output: str | os.PathLike, **options: Any) -> dict[str, Any]:
    """Train the behavior policy of ``env_id`` with the ``behavior`` config section ``cfg``, by its
    ``method`` (``td3``, the default, or ``pgmorl``); write ``output`` and return a summary.

    ``options``: the fields of :class:`TrainOptions` (``threads``, ``progress``, ``hv_every``,
    ``device``); an unknown one is a TypeError before any work starts.
    """
    m = method(cfg.get("method", DEFAULT_METHOD))
    run_options = TrainOptions(**options)
    train = getattr(m.load(), m.trainer)
    return train(env_id, m.values(cfg), output, run_options)
