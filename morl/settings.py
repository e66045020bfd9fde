"""Settings of a stage: a frozen dataclass of defaults, range rules, and their resolution.

Every settings section of a config (an agent family's ``train.<family>``, the behavior methods'
``behavior`` and ``behavior.pgmorl``, the coverage variants' ``coverage``) is declared once, as a
frozen dataclass whose fields are made with :func:`setting` (a default and what the setting is),
:func:`required` (no default: the config must give it) or :func:`section` (a nested section with a
dataclass and rules of its own), and a :class:`Rule` per setting that has a range. From that one
declaration:

- :func:`resolve` fills a config's values in over the defaults and refuses, naming the key, what
  the stage could not run with: unknown keys, missing required ones, values of the wrong type (a
  bool is not a number, an integer setting takes whole numbers, no NaN or infinity), values outside
  their rule, and whatever the stage's own cross-check refuses (e.g. an embedding width not
  divisible by the number of attention heads);
- :func:`json_schema` writes the section's part of the config schema: types, ranges, defaults and
  descriptions (``python -m morl.config_schema`` puts it into ``schemas/config.schema.yaml``).

The range helpers below carry the bounds of the schema's value kinds (a count, a batch, a layer
width, a learning rate, a seed): upper bounds that catch a typo (an extra three zeros) before a job
fails on an allocation or an integer overflow. This module imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from morl.errors import InputError

#: Where the state-normalisation statistics (and the target regression of the return-conditioned
#: models) come from: the env's expert High-H dataset, as PEDA's code, or the training dataset.
STATISTICS_FROM = ("expert-high", "dataset")

#: Counts and seeds stay in the signed 32-bit range that numpy, torch and the environments' seeding take.
MAX_INT = 2**31 - 1
#: The most rows of a batch (a size allocated at once; far above any published setting).
MAX_BATCH = 65536
#: The widest hidden layer or embedding.
MAX_WIDTH = 16384
#: The most layers (or attention heads) of a network.
MAX_LAYERS = 256


# ------------------------------------------------------------------------------------------ fields
def setting(default: Any, doc: str) -> Any:
    """A settings field: its ``default`` and ``doc``, what it is and where the default comes from."""
    return field(default=default, metadata={"doc": doc})


def required(doc: str) -> Any:
    """A settings field without a default: a config must give it (``doc`` says what it is)."""
    return field(metadata={"doc": doc})


def section(cls: type, doc: str, rules: Mapping[str, Rule] | None = None) -> Any:
    """A nested settings section: a mapping resolved as the frozen dataclass ``cls`` with ``rules``,
    all defaults when the config leaves it out."""
    return field(default_factory=cls, metadata={"doc": doc, "section": cls, "rules": dict(rules or {})})


def setting_docs(cls: type) -> dict[str, str]:
    """Each field of a settings dataclass and what it is (an empty string where a field says nothing)."""
    return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls)}


#: The kinds of setting :func:`resolve` checks, by the type a field's annotation names.
KINDS = {"bool": "bool", "int": "int", "float": "float", "str": "str"}


def kind_of(f: dataclasses.Field) -> str:
    """What a settings field holds: ``bool``, ``int``, ``float``, ``str``, ``list`` (of numbers),
    ``section`` (a nested settings mapping), or ``any`` (not checked)."""
    if "section" in f.metadata:
        return "section"
    if f.default is not dataclasses.MISSING:
        default = f.default
        if isinstance(default, bool):
            return "bool"
        for kind in (int, float, str):
            if isinstance(default, kind):
                return kind.__name__
        if isinstance(default, tuple | list):
            return "list"
        return "any"
    name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
    if name.startswith(("tuple", "list")):
        return "list"
    return KINDS.get(name, "any")


def has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def default_of(f: dataclasses.Field) -> Any:
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


# ------------------------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class Rule:
    """A range check of one setting: ``test(value)`` must hold; ``text`` says what is allowed;
    ``schema`` is the same range in JSON Schema keywords. A rule of a list setting checks its
    length, and ``item`` (if any) each of its numbers."""

    test: Callable[[Any], bool]
    text: str
    schema: Mapping[str, Any] = field(default_factory=dict)
    item: Rule | None = None


def _number_text(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _plain(x: float) -> float:
    """A bound as the schema writes it: a whole number as an integer (its messages say 1, not 1.0)."""
    return int(x) if isinstance(x, float) and x.is_integer() else x


def positive(at_most: float | None = None) -> Rule:
    if at_most is None:
        return Rule(lambda v: v > 0, "> 0", {"exclusiveMinimum": 0})
    return Rule(
        lambda v: 0 < v <= at_most, f"> 0 and <= {_number_text(at_most)}", {"exclusiveMinimum": 0, "maximum": at_most}
    )


def non_negative() -> Rule:
    return Rule(lambda v: v >= 0, ">= 0", {"minimum": 0})


def at_least(n: float, at_most: float | None = None) -> Rule:
    if at_most is None:
        return Rule(lambda v: v >= n, f">= {_number_text(n)}", {"minimum": n})
    return Rule(
        lambda v: n <= v <= at_most,
        f">= {_number_text(n)} and <= {_number_text(at_most)}",
        {"minimum": n, "maximum": at_most},
    )


def between(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> Rule:
    lo, hi = "(" if open_low else "[", ")" if open_high else "]"
    return Rule(
        lambda v: (v > low if open_low else v >= low) and (v < high if open_high else v <= high),
        f"in {lo}{low:g}, {high:g}{hi}",
        {
            "exclusiveMinimum" if open_low else "minimum": _plain(low),
            "exclusiveMaximum" if open_high else "maximum": _plain(high),
        },
    )


def one_of(choices: tuple[str, ...]) -> Rule:
    return Rule(lambda v: v in choices, f"one of {', '.join(choices)}", {"enum": list(choices)})


def count() -> Rule:
    """A count of at least 1 (steps, iterations, environments)."""
    return at_least(1, at_most=MAX_INT)


def count_or_zero() -> Rule:
    """A count that may be 0 (e.g. warm-up steps, or checkpoints where 0 means none)."""
    return at_least(0, at_most=MAX_INT)


def seed() -> Rule:
    return at_least(0, at_most=MAX_INT)


def batch() -> Rule:
    return at_least(1, at_most=MAX_BATCH)


def width() -> Rule:
    return at_least(1, at_most=MAX_WIDTH)


def layers() -> Rule:
    return at_least(1, at_most=MAX_LAYERS)


def learning_rate() -> Rule:
    """A learning rate: above 1 overflows every optimiser here, and no paper uses one."""
    return positive(at_most=1)


def numbers(item: Rule | None = None, *, length: int | None = None, min_length: int = 0) -> Rule:
    """A rule of a list of numbers: exactly ``length`` of them (or at least ``min_length``), each
    obeying ``item``."""
    if length is not None:
        return Rule(
            lambda v: len(v) == length, f"a list of {length} numbers", {"minItems": length, "maxItems": length}, item
        )
    what = "a non-empty list" if min_length == 1 else f"a list of at least {min_length}" if min_length else "a list"
    return Rule(
        lambda v: len(v) >= min_length, f"{what} of numbers", {"minItems": min_length} if min_length else {}, item
    )


#: The settings the training loop itself reads, which every family has, and their rules.
CORE_RULES: dict[str, Rule] = {
    "steps": count(),
    "batch_size": batch(),
    "checkpoint_every": count_or_zero(),
    "statistics_from": one_of(STATISTICS_FROM),
}


# ---------------------------------------------------------------------------------------- resolve
class SettingError(InputError):
    """A setting :func:`resolve` refuses. ``label`` names the section (e.g. ``train.peda``), ``key``
    the setting in it (None: the section itself), ``problem`` what is wrong; the message reads
    ``setting 'key' of label problem``, :attr:`path` is the dotted config key."""

    def __init__(self, label: str, key: str | None, problem: str, message: str | None = None):
        self.label, self.key, self.problem = label, key, problem
        super().__init__(message or f"setting {key!r} of {label} {problem}")

    @property
    def path(self) -> str:
        """The dotted key in the config, e.g. ``coverage.shattered.centers[1]``."""
        return self.label if self.key is None else f"{self.label}.{self.key}"

    def keyed(self) -> InputError:
        """The same refusal as one line that starts with the dotted key: ``path: problem``."""
        return InputError(f"{self.path}: {self.problem}")


def _finite_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _checked(f: dataclasses.Field, value: Any, label: str, rule: Rule | None) -> Any:
    """``value`` of the field ``f`` as its kind holds it, refused (naming the key) if it is not one."""
    name, kind = f.name, kind_of(f)
    if kind == "section":
        return resolve(f.metadata["section"], value, f"{label}.{name}", f.metadata["rules"])
    if kind == "bool":
        if not isinstance(value, bool):
            raise SettingError(label, name, f"must be true or false, got {value!r}")
    elif kind == "int":
        if not _finite_number(value) or int(value) != value:
            raise SettingError(label, name, f"must be an integer, got {value!r}")
        value = int(value)
    elif kind == "float":
        if not _finite_number(value):
            raise SettingError(label, name, f"must be a finite number, got {value!r}")
        value = float(value)
    elif kind == "str":
        if not isinstance(value, str):
            raise SettingError(label, name, f"must be a string, got {value!r}")
    elif kind == "list":
        if not isinstance(value, list | tuple):
            raise SettingError(label, name, f"must be {rule.text if rule else 'a list of numbers'}, got {value!r}")
        for i, x in enumerate(value):
            if not _finite_number(x):
                raise SettingError(label, f"{name}[{i}]", f"must be a finite number, got {x!r}")
        value = [float(x) for x in value]
    if rule is not None and not rule.test(value):
        raise SettingError(label, name, f"must be {rule.text}, got {value!r}")
    if kind == "list" and rule is not None and rule.item is not None:
        for i, x in enumerate(value):
            if not rule.item.test(x):
                raise SettingError(label, f"{name}[{i}]", f"must be {rule.item.text}, got {x!r}")
    return value


def resolve(
    cls: type,
    values: dict | None,
    label: str,
    rules: Mapping[str, Rule],
    check: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """``values`` with the defaults of the frozen dataclass ``cls`` filled in, as a plain dict in
    field order (lists as lists, sections as dicts), checked against ``rules`` and then ``check``
    (which raises an :class:`~morl.errors.InputError`, passed on prefixed with ``label``). A value
    of its own is refused with a :class:`SettingError` naming the key and ``label``."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        kind = type(values).__name__
        raise SettingError(
            label,
            None,
            f"must be a mapping of keys to values, got {kind}",
            f"settings of {label} must be a mapping, got {kind}",
        )
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in values if k not in fields]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        known = ", ".join(fields)
        raise SettingError(
            label,
            str(unknown[0]),
            f"unknown key; known: {known}",
            f"unknown setting{'s' if len(unknown) > 1 else ''} {names} of {label}; known: {known}",
        )
    missing = [k for k, f in fields.items() if k not in values and not has_default(f)]
    if missing:
        names = ", ".join(repr(k) for k in missing)
        raise SettingError(
            label,
            missing[0],
            "is required (it has no default)",
            f"missing setting{'s' if len(missing) > 1 else ''} {names} of {label}",
        )
    out: dict[str, Any] = {}
    for name, f in fields.items():
        # a section left out takes all its defaults
        value = values[name] if name in values else None if kind_of(f) == "section" else default_of(f)
        out[name] = _checked(f, value, label, rules.get(name))
    resolved = dataclasses.asdict(cls(**out))
    if check is not None:
        try:
            check(resolved)
        except InputError as exc:
            raise InputError(f"{label}: {exc}") from None
    return resolved


# ------------------------------------------------------------------------------------------ schema
#: The JSON Schema type of each kind of setting.
JSON_TYPES = {
    "bool": "boolean",
    "int": "integer",
    "float": "number",
    "str": "string",
    "list": "array",
    "section": "object",
}


def json_schema(cls: type, rules: Mapping[str, Rule], *, skip: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """The JSON Schema ``properties`` of a settings dataclass: each field's type, the range of its
    rule, its default (where it has one) and its doc as the description; ``skip``: fields left out."""
    out: dict[str, dict[str, Any]] = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        kind = kind_of(f)
        prop: dict[str, Any] = {"type": JSON_TYPES[kind]} if kind in JSON_TYPES else {}
        rule = rules.get(f.name)
        if kind == "section":
            doc = f.metadata.get("doc", "")
            prop = ({"description": doc} if doc else {}) | prop
            prop.update(additionalProperties=False, properties=json_schema(f.metadata["section"], f.metadata["rules"]))
        elif rule is not None:
            prop.update(rule.schema)
        if kind == "list":
            prop["items"] = {"type": "number", **(rule.item.schema if rule is not None and rule.item else {})}
        if has_default(f) and kind != "section":
            default = default_of(f)
            prop["default"] = list(default) if isinstance(default, tuple) else default
        doc = f.metadata.get("doc", "")
        if doc and "description" not in prop:
            prop["description"] = doc
        out[f.name] = prop
    return out
