"""The agent-family registry: every list of models reads it, and PEDA's models kept their numbers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from test_training import HP, make_dataset

from morl import families
from morl.cli import build_parser
from morl.config import ConfigError, load_schema, train_settings, training_definitions, validate_config
from morl.data import write_dataset
from morl.families import FAMILIES, colors, display_names, family_of, model_order, wildcard_pattern
from morl.families.base import REQUIRED, CoreSettings, FamilyModule, check_family_module, setting_docs
from morl.paper import PUBLISHED_HV
from morl.tables import model_order as table_order

ROOT = Path(__file__).resolve().parent.parent


def test_every_family_module_gives_the_training_core_what_it_reads():
    for fam in FAMILIES:
        module = fam.load()  # checked against the contract on load
        assert isinstance(module, FamilyModule)
        assert issubclass(module.Settings, CoreSettings)
        assert "statistics_from" in module.DEFINITIONS
        assert module.FORMAT_VERSION in module.READS_VERSIONS
        defaults = fam.resolve_settings({})
        assert set(defaults) == set(module.Settings.__dataclass_fields__)
        assert {"steps", "batch_size", "checkpoint_every", "statistics_from"} <= set(defaults)
        with pytest.raises(ValueError, match="no_such_key"):
            fam.resolve_settings({"no_such_key": 1})


@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.name)
def test_every_setting_of_every_family_says_what_it_is(fam):
    docs = setting_docs(fam.load().Settings)
    assert docs and all(len(doc.split()) >= 3 for doc in docs.values()), docs


def test_a_family_module_that_breaks_the_contract_is_refused_naming_what_it_lacks():
    import types
    from dataclasses import dataclass

    from morl.families import peda

    broken = types.ModuleType("broken_family")
    with pytest.raises(TypeError, match="broken_family lacks Settings, RULES"):
        check_family_module(broken)
    for name in REQUIRED:
        setattr(broken, name, getattr(peda, name))

    @dataclass(frozen=True)
    class Silent(peda.Settings):
        extra: int = 3

    broken.Settings = Silent
    with pytest.raises(TypeError, match="extra say nothing"):
        check_family_module(broken)

    @dataclass(frozen=True)
    class Free:
        steps: int = 1

    broken.Settings = Free
    with pytest.raises(TypeError, match="deriving from CoreSettings"):
        check_family_module(broken)
    broken.Settings = peda.Settings
    broken.DEFINITIONS = ("returns_to_go",)
    with pytest.raises(TypeError, match="statistics_from"):
        check_family_module(broken)


def test_model_names_are_unique_and_every_model_has_a_display_name_and_a_color():
    names = [m.name for f in FAMILIES for m in f.models]
    assert len(names) == len(set(names)) == len(model_order())
    assert set(display_names()) == set(colors()) == {"B", *names}
    assert len(set(colors().values())) == len(colors())
    # the paper's own order, derived from the registry: (P) models first, PEDA's before CQL in each group
    assert model_order()[:4] == ("dt-p", "rvs-p", "bc-p", "cql-p")
    assert model_order()[-4:] == ("dt", "rvs", "bc", "cql")
    # the families with the preference in the weights sit with the (P) models though their names lack "-p"
    assert model_order().index("rvs-pml") < model_order().index("dt")


def test_the_schema_the_command_line_and_the_wildcards_list_the_registry_s_models():
    assert load_schema()["$defs"]["model"]["enum"] == list(model_order())
    train = next(a for a in build_parser()._subparsers._group_actions[0].choices["train"]._actions
                 if a.dest == "model")  # fmt: skip
    assert tuple(train.choices) == model_order()
    pattern = re.compile(rf"(?:{wildcard_pattern()})")
    assert all(pattern.fullmatch(name) for name in model_order())
    assert not any(pattern.fullmatch(name) for name in ("dt-px", "p", "cql-", "bc p", "td3bc"))
    smk = (ROOT / "rules" / "common.smk").read_text()
    assert "model=wildcard_pattern()" in smk


def test_tables_and_the_paper_comparison_know_every_model():
    assert table_order(["iql-p", "bc", "dt-p", "cql-p"]) == ["dt-p", "cql-p", "iql-p", "bc"]
    assert table_order(["mystery", "dt"]) == ["dt", "mystery"]  # an unregistered model still gets a column
    published = {model for (_, _, model) in PUBLISHED_HV}
    assert published == {"B", "dt-p", "rvs-p", "bc-p", "cql-p", "dt", "rvs", "bc", "cql"}


def test_family_settings_come_from_their_own_section_and_overrides(config):
    config["models"] = ["dt-p", "td3bc-p"]
    config["train"]["td3bc"] = {"steps": 500, "alpha": 4.0}
    config["train"]["overrides"] = [
        {"models": ["td3bc-p"], "envs": [config["envs"][0]], "td3bc": {"alpha": 1.0}},
        {"models": ["dt-p"], "peda": {"steps": 7}},
    ]
    validate_config(config)
    env = config["envs"][0]
    td3 = train_settings(config, env, "td3bc-p")
    defaults = family_of("td3bc-p").resolve_settings({})
    assert td3 == {**defaults, "steps": 500, "alpha": 1.0}
    assert train_settings(config, env, "dt-p")["steps"] == 7
    assert training_definitions(config, env, "td3bc-p") == {"statistics_from": td3["statistics_from"]}
    assert set(training_definitions(config, env, "dt-p")) == {"returns_to_go", "statistics_from"}


@pytest.mark.parametrize(
    "edit, match",
    [
        (
            lambda c: c["train"].update(td3bc={"alpah": 2.0}),
            r"unknown key train\.td3bc\.alpah \(allowed here: actor_lr, alpha, ",
        ),
        (
            lambda c: c["train"].update(iql={"expectile": "high"}),
            r"train\.iql\.expectile: 'high' has the wrong type; expected number",
        ),
        (
            lambda c: c["train"].update(overrides=[{"models": ["iql-p"], "steps": 10}]),
            r"train\.overrides\[0\]\.steps: an override sets a family's settings under its name",
        ),
        (
            lambda c: c["train"].update(overrides=[{"models": ["iql-p"], "peda": {"steps": 10}}]),
            r"train\.overrides\[0\]\.peda: none of its models",
        ),
        (
            lambda c: c["train"].update(steps=10),
            r"train\.steps: the settings of PEDA's models now sit in .*train\.peda",
        ),
        (
            lambda c: c["train"].update(overrides=[{"models": ["dt-p"], "iql": {"steps": 10}}]),
            r"train\.overrides\[0\]\.iql: none of its models",
        ),
        (
            lambda c: c["train"].update(overrides=[{"models": ["iql-p"], "iql": {"stepz": 10}}]),
            r"unknown key train\.overrides\[0\]\.iql\.stepz \(allowed here: .*expectile",
        ),
        (lambda c: c.update(models=["sac-p"]), r"models\[0\]: 'sac-p' is not one of dt-p, rvs-p"),
    ],
)
def test_bad_family_settings_are_refused_naming_the_key(config, edit, match):
    config["models"] = ["dt-p", "iql-p", "td3bc-p"]
    edit(config)
    with pytest.raises(ConfigError, match=match):
        validate_config(config)


def test_an_unknown_model_is_refused_where_a_model_is_named():
    with pytest.raises(ValueError, match="unknown model 'sac'; known models: dt-p, rvs-p"):
        family_of("sac")


# Final loss and first actions of each PEDA model after 40 steps on the toy dataset of
# test_training (seed 3), measured with the code as it was before the families existed (f3d6f4b).
# The tolerance allows for the last bits that differ between CPU families (docs/reliability.md).
BEFORE_FAMILIES = {
    "dt-p": (0.041547, [0.10179, -0.42785, 0.53382, 0.35045]),
    "rvs-p": (0.150421, [-0.00819, 0.01632, 0.18836, 0.08606]),
    "bc-p": (0.187467, [0.12968, -0.00798, 0.13887, 0.02953]),
    "dt": (0.026713, [0.13286, -0.42557, 0.59539, 0.38534]),
    "rvs": (0.209003, [-0.04811, 0.08662, 0.16438, 0.19341]),
    "bc": (0.195236, [0.02733, 0.02489, 0.04972, 0.11471]),
}


@pytest.mark.parametrize("model", list(BEFORE_FAMILIES))
def test_peda_models_give_the_numbers_they_gave_before_the_registry(model, tmp_path):
    data = tmp_path / "toy.parquet"
    write_dataset(data, make_dataset())
    summary = families.train(data, model, 3, dict(HP), tmp_path / "model.pt", progress=False)
    agent = families.load_agent(tmp_path / "model.pt")
    agent.reset(np.array([[0.3, 0.7], [0.9, 0.1]]), np.array([[50.0, 80.0], [120.0, 10.0]]))
    actions = agent.act(np.array([[0.1, -0.2, 5.0], [1.0, 0.5, 5.0]], np.float32))
    loss, first_actions = BEFORE_FAMILIES[model]
    assert summary["final_loss"] == pytest.approx(loss, rel=1e-3)
    np.testing.assert_allclose(actions.ravel(), first_actions, atol=2e-3)


def readme_family_example() -> tuple[str, str, str, list[list[str]]]:
    """The README's example family: the module's code, the registry line, the config's keys and the
    commands."""
    section = (ROOT / "README.md").read_text().split("## Adding an agent family", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    (_, module), (_, line), (_, keys), (_, commands) = blocks
    return module, line.strip(), keys, [c.split() for c in commands.strip().splitlines()]


def test_a_new_family_is_one_module_and_one_registry_line(tmp_path, tiny_dataset):
    """The README's example, done as it says: the module saved in a checkout's morl/families, the
    line added to its registry, the config made from config.yaml, and the commands run with that
    checkout's morl from its root; the family trains, evaluates and gets its own column and color."""
    module, line, keys, commands = readme_family_example()
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "morl", checkout / "morl", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("schemas", "behaviors"):
        shutil.copytree(ROOT / folder, checkout / folder)
    (checkout / "morl" / "families" / "mylin.py").write_text(module)
    registry = checkout / "morl" / "families" / "__init__.py"
    head, tail = registry.read_text().split("\nFAMILIES: tuple[Family, ...] = (\n", 1)
    entries, rest = tail.split("\n)", 1)  # the registry's last line closes the tuple
    registry.write_text(f"{head}\nFAMILIES: tuple[Family, ...] = (\n{entries}\n    {line}\n){rest}")
    config = yaml.safe_load((ROOT / "config.yaml").read_text()) | yaml.safe_load(keys)
    config["train"]["lin"]["steps"] = 60  # the README's 2000, shortened for the test
    (checkout / "lin.yaml").write_text(yaml.safe_dump(config))
    shutil.copy(tiny_dataset, checkout / "data.parquet")
    env = dict(os.environ, PYTHONPATH=str(checkout))  # the checkout's morl, as its `morl` command has it
    for argv in commands:
        assert argv[0] == "morl"
        done = subprocess.run([sys.executable, "-m", "morl.cli", *argv[1:]], cwd=checkout, env=env,
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, (argv, done.stderr[-2000:])
    ckpt = torch.load(checkout / "lin.pt", weights_only=True)
    assert ckpt["family"] == "lin" and ckpt["settings"]["steps"] == 60 and ckpt["steps"] == 60
    assert "Lin(P)" in (checkout / "tables" / "hv.md").read_text()
    probe = ("from morl.families import model_order; from morl.plots import colors; order = model_order(); "
             "c = colors(); print(order.index('lin-p') < order.index('dt'), order[-1], "
             "c['lin-p'] not in {v for k, v in c.items() if k != 'lin-p'})")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], cwd=checkout, env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["True", "cql", "True"], done.stderr[-2000:]


def test_a_config_of_an_old_layout_is_refused_once_naming_the_key_to_move(tmp_path):
    old = yaml.safe_load((ROOT / "configs" / "smoke.yaml").read_text())
    old["train"] = {**old["train"].pop("peda"), **old["train"]}
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(old))
    result = subprocess.run([sys.executable, "-m", "morl.cli", "validate-config", str(tmp_path / "old.yaml")],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode != 0
    assert result.stderr.count("now sit in their family's section, train.peda") == 1, result.stderr
