"""The registry of agent families: model name -> family, and everything derived from it.

A family is a set of models trained by one plugin module of the training core
(:mod:`morl.trainer`), e.g. PEDA's six return-conditioned and behavior-cloning models
(:mod:`morl.families.peda`) or the value-based CQL (:mod:`morl.families.cql`). Its
:class:`Family` line here holds what the rest of the project needs without importing torch: the
family's name (also the key of its settings section, ``train.<name>``), its module, its models
with their display names, and the format string of its checkpoints. Everything that lists models
derives from :data:`FAMILIES`: the config schema and validation (:mod:`morl.config`), the command
line (:mod:`morl.cli`), the Snakemake wildcard constraint (``rules/common.smk``), the tables'
column order, the plots' colors and the paper comparison.

The module of a family satisfies the contract of :mod:`morl.families.base`
(:class:`~morl.families.base.FamilyModule`): ``Settings`` (a frozen dataclass deriving from
``CoreSettings``, whose defaults are its source's and whose every field says what it is),
``RULES`` (and optionally ``check_settings``), ``DEFINITIONS``, ``prepare``, ``Learner``,
``build_agent``, ``FORMAT_VERSION``, ``READS_VERSIONS``, ``CHECKPOINT_KEYS`` and optionally
``initial_targets``. Adding a family is that module and one :class:`Family` line below (README,
"Adding an agent family").
"""

from __future__ import annotations

import colorsys
import importlib
import os
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from morl import settings as settings_core
from morl.errors import InputError

#: The plot colors given to models in registry order, after any a model names itself; past the end
#: of this list a color is drawn from matplotlib's ``hsv`` map, so the palette never runs out.
PALETTE = (
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:purple",
    "tab:brown",
    "tab:gray",
    "tab:cyan",
    "tab:red",
    "tab:olive",
    "tab:pink",
    "gold",
    "teal",
    "navy",
    "maroon",
    "lime",
    "indigo",
    "salmon",
    "sienna",
    "darkkhaki",
    "slateblue",
)


#: The family modules checked against the contract so far in this process.
_CHECKED: set[str] = set()


@dataclass(frozen=True)
class Model:
    name: str  # in configs, on the command line and in paths
    display: str  # in tables and plots
    #: True if the model sees the preference as an input (the "(P)" models); tables and plots list
    #: these first, then the others, each group in registry order (PEDA's tables' layout).
    #: Default: the name ends in "-p".
    conditioned: bool | None = None
    #: matplotlib color in every figure; default: the next free one of :data:`PALETTE`
    color: str | None = None

    @property
    def takes_preference(self) -> bool:
        return self.name.endswith("-p") if self.conditioned is None else self.conditioned


@dataclass(frozen=True)
class Family:
    name: str  # the key of its settings section, train.<name>
    module: str  # the plugin module
    models: tuple[Model, ...]
    checkpoint_format: str  # the "format" string its final checkpoints record

    def load(self) -> ModuleType:
        """The family's module (imported on first use: it imports torch), checked against the
        family contract (:mod:`morl.families.base`); one that breaks it is refused with a TypeError
        naming what it lacks."""
        module = importlib.import_module(self.module)
        if self.module not in _CHECKED:
            importlib.import_module("morl.families.base").check_family_module(module)
            _CHECKED.add(self.module)
        return module

    def display(self, model: str) -> str:
        return next(m.display for m in self.models if m.name == model)

    def check_model(self, model: str) -> str:
        if model not in {m.name for m in self.models}:
            known = ", ".join(m.name for m in self.models)
            raise InputError(f"unknown model {model!r} for the {self.name} family; known: {known}")
        return model

    def resolve_settings(self, values: dict | None) -> dict[str, Any]:
        """``values`` with the family's defaults filled in and checked (InputError naming the key)."""
        module = self.load()
        rules = {**settings_core.CORE_RULES, **module.RULES}
        check = getattr(module, "check_settings", None)
        return settings_core.resolve(module.Settings, values, f"train.{self.name}", rules, check)


# The paper's column order follows from the registry order: the (P) models first, then the naive
# ones; PEDA's first, the value-based after them in each group, as in PEDA's tables; the families
# that put the preference into the weights (MORvS-HN, MORvS-PML) sit with the (P) models, last.
FAMILIES: tuple[Family, ...] = (
    Family("peda", "morl.families.peda", (
        Model("dt-p", "MODT(P)", color="tab:blue"), Model("rvs-p", "MORvS(P)", color="tab:orange"),
        Model("bc-p", "BC(P)", color="tab:green"), Model("dt", "MODT", color="tab:cyan"),
        Model("rvs", "MORvS", color="tab:red"), Model("bc", "BC", color="tab:olive"),
    ), "morl-peda-agent"),
    Family("cql", "morl.families.cql", (
        Model("cql-p", "CQL(P)", color="tab:purple"), Model("cql", "CQL", color="tab:pink"),
    ), "morl-cql-agent"),
    Family("td3bc", "morl.families.td3bc", (Model("td3bc-p", "TD3+BC(P)", color="tab:brown"),), "morl-td3bc-agent"),
    Family("iql", "morl.families.iql", (Model("iql-p", "IQL(P)", color="tab:gray"),), "morl-iql-agent"),
    Family("hyper", "morl.families.hyper", (Model("rvs-hn", "MORvS-HN", conditioned=True),), "morl-hyper-agent"),
    Family("manifold", "morl.families.manifold", (Model("rvs-pml", "MORvS-PML", conditioned=True),),
           "morl-manifold-agent"),
)  # fmt: skip


def _models() -> list[tuple[Family, Model]]:
    return [(f, m) for f in FAMILIES for m in f.models]


def model_order() -> tuple[str, ...]:
    """Every model name, in table order: the preference-conditioned models, then the others."""
    pairs = _models()
    return tuple(m.name for _, m in pairs if m.takes_preference) + tuple(
        m.name for _, m in pairs if not m.takes_preference
    )


def display_names() -> dict[str, str]:
    """Display names of the models in table order, and of the behavior data's front "B"."""
    by_name = {m.name: m.display for _, m in _models()}
    return {"B": "B", **{name: by_name[name] for name in model_order()}}


def colors() -> dict[str, str]:
    """One plot color per model (and black for "B"), unique, the same in every figure."""
    taken = {m.color for _, m in _models() if m.color}
    free = [c for c in PALETTE if c not in taken]
    out = {"B": "black"}
    unnamed = [m for _, m in _models() if not m.color]
    for i, m in enumerate(unnamed):
        if i < len(free):
            out[m.name] = free[i]
        else:  # evenly spaced hues past the palette, as hex strings
            r, g, b = colorsys.hsv_to_rgb((i - len(free)) / max(1, len(unnamed) - len(free)), 0.8, 0.8)
            out[m.name] = f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"
    out.update({m.name: m.color for _, m in _models() if m.color})
    return {name: out[name] for name in ("B", *model_order())}


def family_names() -> tuple[str, ...]:
    return tuple(f.name for f in FAMILIES)


def check_model(name: str) -> str:
    if name not in {m.name for _, m in _models()}:
        raise InputError(f"unknown model {name!r}; known models: {', '.join(model_order())}")
    return name


def family_of(model: str) -> Family:
    """The family that trains ``model`` (an InputError listing the known models if there is none)."""
    check_model(model)
    return next(f for f, m in _models() if m.name == model)


def family(name: str) -> Family:
    return next(f for f in FAMILIES if f.name == name)


def wildcard_pattern() -> str:
    """A regular expression matching exactly the model names (longest first, so ``dt-p`` wins over ``dt``)."""
    return "|".join(re.escape(name) for name in sorted(model_order(), key=len, reverse=True))


def resolve_settings(model: str, values: dict | None) -> dict[str, Any]:
    """``values`` with the family's defaults filled in and checked (InputError naming the key)."""
    return family_of(model).resolve_settings(values)


def definitions_of(model: str) -> tuple[str, ...]:
    """The training definitions ``model``'s checkpoints record and an evaluation must agree with."""
    return tuple(family_of(model).load().DEFINITIONS)


def _trainer() -> ModuleType:
    # imported on use: it imports torch and mujoco, and the registry serves the config schema and the
    # command line, which must start fast
    return importlib.import_module("morl.trainer")


def _checkpoints() -> ModuleType:
    # imported on use, as the trainer
    return importlib.import_module("morl.checkpoints")


def train(
    dataset_path, model_name: str, seed: int, settings: dict | None, checkpoint_path, curve_path=None, **kwargs
) -> dict[str, Any]:
    """Train ``model_name`` with the training core (arguments and summary of :func:`morl.trainer.train`)."""
    return _trainer().train(
        family_of(model_name), dataset_path, model_name, seed, settings, checkpoint_path, curve_path, **kwargs
    )


def checkpoint_family(path: os.PathLike | str) -> Family:
    """The family of a final checkpoint; a file that is no final checkpoint of any family is refused
    with a :class:`~morl.checkpoints.CheckpointError` naming it."""
    checkpoints = _checkpoints()
    ckpt = checkpoints.read_checkpoint_dict(path)
    fmt = ckpt.get("format")
    fam = next((f for f in FAMILIES if f.checkpoint_format == fmt), None)
    if fam is None:
        raise checkpoints.CheckpointError(path, f"not a morl agent checkpoint (format {fmt!r})")
    return fam


def checkpoint_model(path: os.PathLike | str) -> str:
    """The model a final checkpoint holds (refused, naming the file, if it is no known model's)."""
    fam = checkpoint_family(path)
    checkpoints = _checkpoints()
    name = checkpoints.read_checkpoint_dict(path).get("model_name")
    if name not in {m.name for m in fam.models}:
        raise checkpoints.CheckpointError(path, f"unknown model {name!r} in a {fam.name} checkpoint")
    return name


def load_checkpoint(path: os.PathLike | str) -> dict[str, Any]:
    """Read and check a final checkpoint of any family (:func:`morl.checkpoints.load_checkpoint`)."""
    return _checkpoints().load_checkpoint(checkpoint_family(path), path)


def load_agent(path: os.PathLike | str, device: str = "cpu", definitions: dict | None = None):
    """The batched evaluation agent of any family's final checkpoint."""
    return _checkpoints().load_agent(checkpoint_family(path), path, device=device, definitions=definitions)
