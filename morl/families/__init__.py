"""Agent families: one module each, listed once in :data:`FAMILIES`.

A family is a set of models trained by one module, e.g. PEDA's six return-conditioned and
behavior-cloning models (:mod:`morl.families.peda`) or the value-based CQL family
(:mod:`morl.families.cql`). The entry here holds what the rest of the project needs without
importing torch: the family's name, its module, its models with their display names, table
order and plot colors, and the format string of its checkpoints. Everything that lists models
reads it: the config schema and validation (:mod:`morl.config`), the command line
(:mod:`morl.cli`), the Snakemake wildcard constraint (``rules/common.smk``), the tables, plots and
the paper comparison.

The family module itself (imported on first use) provides:

- ``Settings``: a frozen dataclass whose defaults are the method paper's settings, so a config
  states only what it changes; ``resolve_settings(values) -> dict`` fills in the defaults and
  refuses unknown keys and bad values, naming the key;
- ``DEFINITIONS``: the training definitions a checkpoint records and an evaluation must agree with;
- ``train(dataset_path, model_name, seed, settings, checkpoint_path, curve_path=None,
  device="auto", progress=True, expect_env=None, reference_dataset=None) -> dict``;
- ``load_agent(checkpoint_path, device="cpu", definitions=None)``: a batched evaluation agent
  with ``reset(preferences, target_returns)``, ``act(obs)`` and ``observe(actions, rewards)``.

Adding a family is that module, one :class:`Family` line below and the family's tests
(README, "Adding an agent family").
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from morl.errors import InputError


@dataclass(frozen=True)
class Model:
    name: str  # in configs, on the command line and in paths
    display: str  # in tables and plots
    rank: int  # column position in tables and plots (lower first)
    color: str  # matplotlib color in every figure


@dataclass(frozen=True)
class Family:
    name: str  # also the key of its settings section in a config (``train.<name>``), except PEDA's
    module: str
    models: tuple[Model, ...]
    checkpoint_format: str
    #: True when the family's settings are the top-level ``train`` keys (PEDA, for configs written
    #: before families existed); others read ``train.<name>``.
    top_level_settings: bool = False

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


# The paper's column order: the (P) models first, then the naive ones; value-based after the
# return-conditioned ones in each group, as in PEDA's tables; the later families at the end.
FAMILIES: tuple[Family, ...] = (
    Family("peda", "morl.families.peda", (
        Model("dt-p", "MODT(P)", 10, "tab:blue"), Model("rvs-p", "MORvS(P)", 20, "tab:orange"),
        Model("bc-p", "BC(P)", 30, "tab:green"), Model("dt", "MODT", 110, "tab:cyan"),
        Model("rvs", "MORvS", 120, "tab:red"), Model("bc", "BC", 130, "tab:olive"),
    ), "morl-peda-agent", top_level_settings=True),
    Family("cql", "morl.families.cql", (
        Model("cql-p", "CQL(P)", 40, "tab:purple"), Model("cql", "CQL", 140, "tab:pink"),
    ), "morl-cql-agent"),
    Family("td3bc", "morl.families.td3bc", (Model("td3bc-p", "TD3+BC(P)", 50, "tab:brown"),), "morl-td3bc-agent"),
    Family("iql", "morl.families.iql", (Model("iql-p", "IQL(P)", 60, "tab:gray"),), "morl-iql-agent"),
)  # fmt: skip

_BY_MODEL: dict[str, tuple[Family, Model]] = {m.name: (f, m) for f in FAMILIES for m in f.models}
_BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}

#: Every model name, in table order.
MODEL_ORDER: tuple[str, ...] = tuple(sorted(_BY_MODEL, key=lambda name: _BY_MODEL[name][1].rank))
#: Display names of the models, and of the behavior data's front "B".
DISPLAY: dict[str, str] = {"B": "B", **{name: _BY_MODEL[name][1].display for name in MODEL_ORDER}}
#: Plot colors of the models and of "B".
COLORS: dict[str, str] = {"B": "black", **{name: _BY_MODEL[name][1].color for name in MODEL_ORDER}}


def model_names() -> tuple[str, ...]:
    return MODEL_ORDER


def family_names() -> tuple[str, ...]:
    return tuple(f.name for f in FAMILIES)


def check_model(name: str) -> str:
    if name not in _BY_MODEL:
        raise InputError(f"unknown model {name!r}; known models: {', '.join(MODEL_ORDER)}")
    return name


def family_of(model: str) -> Family:
    """The family that trains ``model`` (an InputError listing the known models if there is none)."""
    return _BY_MODEL[check_model(model)][0]


def family(name: str) -> Family:
    return _BY_NAME[name]


def wildcard_pattern() -> str:
    """A regular expression matching exactly the model names (longest first, so ``dt-p`` wins over ``dt``)."""
    return "|".join(re.escape(name) for name in sorted(MODEL_ORDER, key=len, reverse=True))


def resolve_settings(model: str, values: dict | None) -> dict[str, Any]:
    """``values`` with the family's defaults filled in and checked (InputError naming the key)."""
    return family_of(model).load().resolve_settings(values)


def definitions_of(model: str) -> tuple[str, ...]:
    """The training definitions ``model``'s checkpoints record and an evaluation must agree with."""
    return tuple(family_of(model).load().DEFINITIONS)


def train(dataset_path, model_name: str, seed: int, settings: dict, checkpoint_path, **kwargs) -> dict[str, Any]:
    """Train ``model_name`` with its family's trainer (same arguments as :func:`morl.training.train`)."""
    return family_of(model_name).load().train(dataset_path, model_name, seed, settings, checkpoint_path, **kwargs)


def checkpoint_model(path: os.PathLike | str) -> str:
    """The model a final checkpoint holds; a file that is no final checkpoint of any family is refused
    with a :class:`~morl.agents.CheckpointError` naming it."""
    from morl.agents import CheckpointError, read_checkpoint_dict

    ckpt = read_checkpoint_dict(path)
    fmt = ckpt.get("format")
    fam = next((f for f in FAMILIES if f.checkpoint_format == fmt), None)
    if fam is None:
        raise CheckpointError(path, f"not a morl agent checkpoint (format {fmt!r})")
    name = ckpt.get("model_name")
    if name not in {m.name for m in fam.models}:
        raise CheckpointError(path, f"unknown model {name!r} in a {fam.name} checkpoint")
    return name


def load_agent(path: os.PathLike | str, device: str = "cpu", definitions: dict | None = None):
    """The batched evaluation agent of any family's final checkpoint."""
    return family_of(checkpoint_model(path)).load().load_agent(path, device=device, definitions=definitions)
