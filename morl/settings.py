"""Settings of an agent family: a frozen dataclass of defaults, range rules, and their resolution.

Every family declares its settings as a frozen dataclass whose defaults are its source's (the
method paper or its code) and a :class:`Rule` per setting that has a range. :func:`resolve` fills
a config's values in over those defaults and refuses, naming the key, what the family could not
train with: unknown keys, values of the wrong type (a bool is not a number, an integer setting
takes whole numbers, no NaN or infinity), values outside their rule, and whatever the family's own
cross-check refuses (e.g. an embedding width not divisible by the number of attention heads).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from morl.errors import InputError

#: Where the state-normalisation statistics (and the target regression of the return-conditioned
#: models) come from: the env's expert High-H dataset, as PEDA's code, or the training dataset.
STATISTICS_FROM = ("expert-high", "dataset")


@dataclass(frozen=True)
class Rule:
    """A range check of one setting: ``test(value)`` must hold; ``text`` says what is allowed."""

    test: Callable[[Any], bool]
    text: str


def positive() -> Rule:
    return Rule(lambda v: v > 0, "> 0")


def non_negative() -> Rule:
    return Rule(lambda v: v >= 0, ">= 0")


def at_least(n: int) -> Rule:
    return Rule(lambda v: v >= n, f">= {n}")


def between(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> Rule:
    lo, hi = "(" if open_low else "[", ")" if open_high else "]"
    return Rule(
        lambda v: (v > low if open_low else v >= low) and (v < high if open_high else v <= high),
        f"in {lo}{low:g}, {high:g}{hi}",
    )


def one_of(choices: tuple[str, ...]) -> Rule:
    return Rule(lambda v: v in choices, f"one of {', '.join(choices)}")


#: The settings the training loop itself reads, which every family has, and their rules.
CORE_RULES: dict[str, Rule] = {
    "steps": at_least(1),
    "batch_size": at_least(1),
    "checkpoint_every": at_least(0),
    "statistics_from": one_of(STATISTICS_FROM),
}


def resolve(
    cls: type,
    values: dict | None,
    label: str,
    rules: dict[str, Rule],
    check: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """``values`` with the defaults of the frozen dataclass ``cls`` filled in, as a plain dict in
    field order, checked against ``rules`` and then ``check`` (which raises an
    :class:`~morl.errors.InputError`); every error names the key and ``label``."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise InputError(f"settings of {label} must be a mapping, got {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in values if k not in fields]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise InputError(
            f"unknown setting{'s' if len(unknown) > 1 else ''} {names} of {label}; known: {', '.join(fields)}"
        )
    defaults = cls()
    out: dict[str, Any] = {}
    for name in fields:
        default = getattr(defaults, name)
        value = values.get(name, default)
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise InputError(f"setting {name!r} of {label} must be true or false, got {value!r}")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"setting {name!r} of {label} must be an integer, got {value!r}")
            if int(value) != value:
                raise InputError(f"setting {name!r} of {label} must be an integer, got {value!r}")
            value = int(value)
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"setting {name!r} of {label} must be a finite number, got {value!r}")
            value = float(value)
        elif isinstance(default, str):
            if not isinstance(value, str):
                raise InputError(f"setting {name!r} of {label} must be a string, got {value!r}")
        rule = rules.get(name)
        if rule is not None and not rule.test(value):
            raise InputError(f"setting {name!r} of {label} must be {rule.text}, got {value!r}")
        out[name] = value
    resolved = dataclasses.asdict(cls(**out))
    if check is not None:
        try:
            check(resolved)
        except InputError as exc:
            raise InputError(f"{label}: {exc}") from None
    return resolved
