"""The agent-family registry: every list of models reads it, and PEDA's models kept their numbers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_training import HP, make_dataset

from morl import families
from morl.cli import build_parser
from morl.config import ConfigError, load_schema, train_settings, training_definitions, validate_config
from morl.data import write_dataset
from morl.families import COLORS, DISPLAY, FAMILIES, MODEL_ORDER, family_of, wildcard_pattern
from morl.paper import PUBLISHED_HV
from morl.tables import model_order

ROOT = Path(__file__).resolve().parent.parent


def test_every_family_module_answers_to_its_registry_line():
    for fam in FAMILIES:
        module = fam.load()
        assert module.NAME == fam.name
        assert module.MODELS == {m.name: m.display for m in fam.models}
        assert module.CHECKPOINT_FORMAT == fam.checkpoint_format
        for name in ("Settings", "resolve_settings", "train", "load_agent", "DEFINITIONS"):
            assert hasattr(module, name), (fam.module, name)
        assert "statistics_from" in module.DEFINITIONS
        defaults = module.resolve_settings({})
        assert set(defaults) == {f for f in module.Settings.__dataclass_fields__}
        with pytest.raises(ValueError, match="no_such_key"):
            module.resolve_settings({"no_such_key": 1})


def test_model_names_are_unique_and_every_model_has_a_display_name_and_a_color():
    names = [m.name for f in FAMILIES for m in f.models]
    assert len(names) == len(set(names)) == len(MODEL_ORDER)
    assert len({m.rank for f in FAMILIES for m in f.models}) == len(names)
    assert set(DISPLAY) == set(COLORS) == {"B", *names}
    assert len(set(COLORS.values())) == len(COLORS)
    # the paper's own order: (P) models first, PEDA's before CQL in each group
    assert MODEL_ORDER[:4] == ("dt-p", "rvs-p", "bc-p", "cql-p")
    assert MODEL_ORDER.index("cql") == len(MODEL_ORDER) - 1


def test_the_schema_the_command_line_and_the_wildcards_list_the_registry_s_models():
    assert load_schema()["$defs"]["model"]["enum"] == list(MODEL_ORDER)
    train = next(a for a in build_parser()._subparsers._group_actions[0].choices["train"]._actions
                 if a.dest == "model")  # fmt: skip
    assert tuple(train.choices) == MODEL_ORDER
    pattern = re.compile(rf"(?:{wildcard_pattern()})")
    assert all(pattern.fullmatch(name) for name in MODEL_ORDER)
    assert not any(pattern.fullmatch(name) for name in ("dt-px", "p", "cql-", "bc p", "td3bc"))
    smk = (ROOT / "rules" / "common.smk").read_text()
    assert "model=wildcard_pattern()" in smk


def test_tables_and_the_paper_comparison_know_every_model():
    assert model_order(["iql-p", "bc", "dt-p", "cql-p"]) == ["dt-p", "cql-p", "iql-p", "bc"]
    assert model_order(["mystery", "dt"]) == ["dt", "mystery"]  # an unregistered model still gets a column
    published = {model for (_, _, model) in PUBLISHED_HV}
    assert published == {"B", "dt-p", "rvs-p", "bc-p", "cql-p", "dt", "rvs", "bc", "cql"}


def test_family_settings_come_from_their_own_section_and_overrides(config):
    config["models"] = ["dt-p", "td3bc-p"]
    config["train"]["td3bc"] = {"steps": 500, "alpha": 4.0}
    config["train"]["overrides"] = [
        {"models": ["td3bc-p"], "envs": [config["envs"][0]], "td3bc": {"alpha": 1.0}},
        {"models": ["dt-p"], "steps": 7},
    ]
    validate_config(config)
    env = config["envs"][0]
    td3 = train_settings(config, env, "td3bc-p")
    defaults = family_of("td3bc-p").load().resolve_settings({})
    assert td3 == {**defaults, "steps": 500, "alpha": 1.0}
    assert train_settings(config, env, "dt-p")["steps"] == 7
    assert training_definitions(config, env, "td3bc-p") == {"statistics_from": td3["statistics_from"]}
    assert set(training_definitions(config, env, "dt-p")) == {"returns_to_go", "statistics_from"}


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda c: c["train"].update(td3bc={"alpah": 2.0}), r"train\.td3bc: .*alpah"),
        (lambda c: c["train"].update(iql={"expectile": "high"}), r"train\.iql: .*expectile"),
        (
            lambda c: c["train"].update(overrides=[{"models": ["iql-p"], "steps": 10}]),
            r"train\.overrides\[0\]: sets steps, which only PEDA's models read",
        ),
        (
            lambda c: c["train"].update(overrides=[{"models": ["dt-p"], "iql": {"steps": 10}}]),
            r"train\.overrides\[0\]\.iql: none of its models",
        ),
        (lambda c: c["train"].update(overrides=[{"models": ["iql-p"], "iql": {"stepz": 10}}]), r"train\.iql .*stepz"),
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


def test_the_readme_lists_the_files_of_a_new_family():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Adding an agent family", 1)[1].split("\n## ", 1)[0]
    for fam in FAMILIES:
        if not fam.top_level_settings:
            assert f"morl/families/{fam.name}.py" in section
    assert "morl/families/__init__.py" in section
