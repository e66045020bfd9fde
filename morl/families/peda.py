"""PEDA's agents (Zhu, Dang, Grover, ICLR 2023): MODT, MORvS and BC, each with a (P) variant.

They are trained by supervised regression of the dataset's actions, conditioned on the
preference and on a multi-objective return-to-go (:mod:`morl.models`, :mod:`morl.training`,
:mod:`morl.agents`). Their settings are the top-level keys of a config's ``train`` section.
"""

from __future__ import annotations

from morl.agents import CHECKPOINT_FORMAT, TRAINING_DEFINITIONS, load_agent
from morl.models import DISPLAY_NAMES, PedaSettings, resolve_hp
from morl.training import train

NAME = "peda"
MODELS = dict(DISPLAY_NAMES)
Settings = PedaSettings
DEFINITIONS = TRAINING_DEFINITIONS
resolve_settings = resolve_hp

__all__ = ["CHECKPOINT_FORMAT", "DEFINITIONS", "MODELS", "NAME", "Settings", "load_agent", "resolve_settings", "train"]
