"""Settings are declared once (a frozen dataclass, its rules): :func:`morl.settings.resolve` checks a
config's values with them, the committed schema is generated from them, and the behavior methods
are found through their registry."""

from __future__ import annotations

import copy
import inspect
import math
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest
import yaml

import morl.behavior as behavior
from morl import coverage, settings
from morl.behavior import DEFAULT_METHOD, METHODS, Method, TrainOptions, train_behavior
from morl.config import ConfigError, validate_config
from morl.config_schema import SCHEMA_PATH, committed_block, generated_defs, render
from morl.errors import InputError
from morl.families import FAMILIES
from morl.settings import SettingError, json_schema, required, resolve, section, setting

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Inner:
    keep: tuple[float, float] = setting((0.25, 0.75), "two quantiles")


@dataclass(frozen=True)
class Outer:
    count: int = required("a count the config must give")
    rate: float = setting(0.5, "a rate")
    name: str = setting("a", "a name")
    inner: Inner = section(Inner, "a nested section", {"keep": settings.numbers(settings.between(0.0, 1.0), length=2)})


RULES = {
    "count": settings.count(),
    "rate": settings.between(0.0, 1.0, open_low=True),
    "name": settings.one_of(("a", "b")),
}


def test_resolve_fills_defaults_nested_sections_and_lists():
    out = resolve(Outer, {"count": 3, "rate": 1, "inner": {"keep": [0, 1]}}, "sec", RULES)
    assert out == {"count": 3, "rate": 1.0, "name": "a", "inner": {"keep": [0.0, 1.0]}}
    assert isinstance(out["rate"], float) and isinstance(out["inner"]["keep"], list)
    assert resolve(Outer, {"count": 3}, "sec", RULES)["inner"] == {"keep": [0.25, 0.75]}  # a section left out


@pytest.mark.parametrize(
    ("values", "message", "path"),
    [
        ({}, "missing setting 'count' of sec", "sec.count"),
        ({"count": 0}, "setting 'count' of sec must be >= 1 and <= 2147483647, got 0", "sec.count"),
        ({"count": 1, "rate": 0}, "setting 'rate' of sec must be in (0, 1], got 0.0", "sec.rate"),
        ({"count": 1, "name": "c"}, "setting 'name' of sec must be one of a, b, got 'c'", "sec.name"),
        ({"count": 1, "inner": []}, "settings of sec.inner must be a mapping, got list", "sec.inner"),
        ({"count": 1, "inner": {"kep": 1}}, "unknown setting 'kep' of sec.inner; known: keep", "sec.inner.kep"),
        ({"count": 1, "inner": {"keep": [0.5]}}, "must be a list of 2 numbers, got [0.5]", "sec.inner.keep"),
        ({"count": 1, "inner": {"keep": [0.5, True]}}, "must be a finite number, got True", "sec.inner.keep[1]"),
        ({"count": 1, "inner": {"keep": [0.5, 2]}}, "must be in [0, 1], got 2.0", "sec.inner.keep[1]"),
    ],
)
def test_a_refusal_names_the_key_in_one_line(values, message, path):
    with pytest.raises(SettingError) as err:
        resolve(Outer, values, "sec", RULES)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert err.value.path == path and str(err.value.keyed()).startswith(f"{path}: ")


def test_json_schema_says_what_resolve_checks():
    props = json_schema(Outer, RULES)
    assert props["count"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 2**31 - 1,
        "description": "a count the config must give",
    }
    assert props["rate"] == {
        "type": "number",
        "exclusiveMinimum": 0.0,
        "maximum": 1.0,
        "default": 0.5,
        "description": "a rate",
    }
    assert props["name"]["enum"] == ["a", "b"] and props["name"]["default"] == "a"
    keep = props["inner"]["properties"]["keep"]
    assert keep["default"] == [0.25, 0.75] and keep["minItems"] == keep["maxItems"] == 2
    assert props["inner"]["additionalProperties"] is False


def every_rule():
    """(where, rule) of every settings section whose schema is generated."""
    rules = {f.name: {**settings.CORE_RULES, **f.load().RULES} for f in FAMILIES}
    rules["coverage"] = coverage.RULES
    rules |= {m.label: m.settings().RULES for m in METHODS}
    for f in coverage.CoverageSettings.__dataclass_fields__.values():
        if "section" in f.metadata:
            rules[f"coverage.{f.name}"] = f.metadata["rules"]
    return [(f"{where}.{name}", rule) for where, rs in rules.items() for name, rule in rs.items()]


@pytest.mark.parametrize(("where", "rule"), every_rule())
def test_a_rules_test_and_its_schema_agree(where, rule):
    """The one declaration of a range gives both the check and the schema: they accept the same values."""
    if rule.item is not None:  # a list's rule: the range of its numbers
        rule = rule.item
    if "enum" in rule.schema:
        values = [*rule.schema["enum"], "other"]
    else:
        edges = [v for k, v in rule.schema.items() if "inimum" in k or "aximum" in k]
        values = [e + d for e in edges for d in (-1, -1e-9, 0, 1e-9, 1)] + [0, 0.5, 1, 10**12]
    validator = jsonschema.Draft202012Validator(dict(rule.schema))
    for v in values:
        assert rule.test(v) == validator.is_valid(v), (where, v)


def test_the_committed_schema_block_is_what_the_sources_generate():
    """Run ``python -m morl.config_schema`` after changing a settings dataclass, its rules, the
    vocabulary or a registry."""
    assert committed_block(SCHEMA_PATH.read_text()) == render(generated_defs())


@pytest.mark.parametrize("fam", [f.name for f in FAMILIES])
def test_every_familys_section_is_checked_key_by_key_by_the_schema(fam):
    """A misspelt or out-of-range key under train.<family> is refused when the config is read, with the
    keys the family knows, whatever the family."""
    with open(ROOT / "configs" / "smoke.yaml") as f:
        config = yaml.safe_load(f)
    config.setdefault("train", {})[fam] = {"stepz": 10}
    with pytest.raises(ConfigError, match=rf"unknown key train\.{fam}\.stepz \(allowed here: .*\bsteps\b"):
        validate_config(copy.deepcopy(config), "c.yaml")
    config["train"][fam] = {"steps": 0}
    with pytest.raises(ConfigError, match=rf"train\.{fam}\.steps"):
        validate_config(config, "c.yaml")


def test_behavior_methods_are_dispatched_through_their_registry(monkeypatch, tmp_path):
    calls = []
    fake = types.ModuleType("fake_method")
    fake.train = lambda env_id, values, output, options: calls.append((env_id, values, output, options)) or {}
    settings_module = types.ModuleType("fake_method_settings")

    @dataclass(frozen=True)
    class Settings:
        n: int = setting(1, "a count")

    settings_module.Settings, settings_module.RULES, settings_module.LABEL = Settings, {}, "behavior.fake"
    monkeypatch.setitem(sys.modules, "fake_method", fake)
    monkeypatch.setitem(sys.modules, "fake_method_settings", settings_module)
    line = Method("fake", "fake", "fake_method_settings", "fake_method", "train", "Policy", "a test method")
    monkeypatch.setattr(behavior, "METHODS", (*METHODS, line))
    train_behavior("Env-v0", {"method": "fake", "fake": {"n": 2}, "gamma": 0.9}, tmp_path / "p.pt", threads=3)
    # the options given, passed on in the one options record every method receives
    assert calls == [("Env-v0", {"n": 2}, tmp_path / "p.pt", TrainOptions(threads=3))]
    with pytest.raises(TypeError, match="hv_evry"):
        train_behavior("Env-v0", {"method": "fake"}, tmp_path / "p.pt", hv_evry=3)
    assert len(calls) == 1
    assert behavior.method("fake").resolve_settings({}) == {"n": 1}
    with pytest.raises(InputError, match="unknown behavior method 'ppo'; known: td3, pgmorl, fake"):
        train_behavior("Env-v0", {"method": "ppo"}, tmp_path / "p.pt")


def test_every_method_keeps_the_registry_contract():
    assert DEFAULT_METHOD == "td3" and len({m.name for m in METHODS}) == len(METHODS)
    for m in METHODS:
        mod, trainer = m.settings(), m.load()
        assert mod.LABEL == m.label and set(mod.RULES) <= set(m.keys())
        assert callable(getattr(trainer, m.trainer)) and trainer.POLICY_KINDS
        # every method is called the same way: train(env_id, settings, output, options)
        params = list(inspect.signature(getattr(trainer, m.trainer)).parameters)
        assert params == ["env_id", "settings", "output", "options"], m.name
        assert getattr(behavior, m.policy) is getattr(trainer, m.policy)
        assert all(settings.setting_docs(mod.Settings).values()), f"{m.name}: a setting says nothing"
    assert math.isclose(behavior.method("pgmorl").resolve_settings(
        {"env_steps_per_task": 640, "warmup_iters": 2, "update_iters": 1, "num_steps": 64, "num_envs": 2,
         "num_minibatches": 4})["lr"], 3e-4)  # fmt: skip
