"""Config validation: every shipped config is valid; bad ones fail naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from morl.cli import main
from morl.config import ConfigError, behavior_settings, load_config, train_settings, validate_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["config.yaml", "configs/smoke.yaml", "configs/paper.yaml"])
def test_shipped_configs_are_valid(name):
    load_config(ROOT / name)


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda c: c["envs"].append("MO-Nonsense-v9"), "envs[2]: unknown environment 'MO-Nonsense-v9'"),
        (lambda c: c.update(models=["bc", "ppo"]), "models[1]: 'ppo' is not one of"),
        (lambda c: c["qualities"].append("novice"), "qualities[1]: 'novice' is not one of"),
        (lambda c: c["collect"].update(n_trajectories=0), "collect.n_trajectories: 0 is less than the minimum of 1"),
        (lambda c: c["train"]["peda"].update(steps=-5), "train.peda.steps: -5 is less than the minimum of 1"),
        (lambda c: c["behavior"].update(n_envs=0), "behavior.n_envs"),
        (lambda c: c["train"].update(peda=[1]), "train.peda: [1] has the wrong type; expected object"),
        (lambda c: c.pop("seeds"), "missing required key seeds"),
        (lambda c: c["train"]["peda"].update(lr="fast"), "train.peda.lr: 'fast' has the wrong type"),
        (lambda c: c["collect"].update(batch_size=2.5), "collect.batch_size: 2.5 has the wrong type"),
        (lambda c: c["evaluate"].update(episodes=0), "evaluate.episodes"),
        (lambda c: c.update(envs=[]), "envs: [] should be non-empty"),
        (lambda c: c["train"]["peda"].update(stepz=10), "unknown key train.peda.stepz"),
        (
            lambda c: c["train"]["overrides"].append({"models": ["dt"], "envs": ["MO-Foo-v1"], "peda": {"steps": 3}}),
            "train.overrides[0].envs: unknown environment 'MO-Foo-v1'",
        ),
        (
            lambda c: c["behavior"].update(overrides=[{"envs": ["MO-HalfCheetah-v2", "MO-Foo-v1"], "gamma": 0.999}]),
            "behavior.overrides[0].envs[1]: unknown environment 'MO-Foo-v1'",
        ),
        (
            lambda c: c["behavior"].update(overrides=[{"envs": ["MO-Hopper-v2"], "gama": 0.999}]),
            "unknown key behavior.overrides[0].gama",
        ),
        (
            lambda c: c["behavior"].update(overrides=[{"envs": ["MO-Hopper-v2"], "gamma": 1.5}]),
            "behavior.overrides[0].gamma: 1.5 is greater than or equal to the maximum of 1",
        ),
        (
            lambda c: c["behavior"].update(overrides=[{"gamma": 0.999}]),
            "missing required key behavior.overrides[0].envs",
        ),
        (
            lambda c: c["train"]["peda"].update(returns_to_go="discounted"),
            "train.peda.returns_to_go: 'discounted' is not one of peda, weighted",
        ),
        (
            lambda c: c["train"]["peda"].update(statistics_from="per-env"),
            "train.peda.statistics_from: 'per-env' is not one of expert-high, dataset",
        ),
        (
            lambda c: c["train"]["overrides"].append({"models": ["dt"], "peda": {"returns_to_go": "raw"}}),
            "train.overrides[0].peda.returns_to_go: 'raw' is not one of peda, weighted",
        ),
        (lambda c: c["train"].update(sac={}), "unknown key train.sac"),
        # sizes and seeds a job could not allocate or would overflow on (a typo's extra zeros)
        (
            lambda c: c["train"]["peda"].update(batch_size=10**12),
            "train.peda.batch_size: 1000000000000 is greater than the maximum",
        ),
        (
            lambda c: c["behavior"].update(batch_size=10**9),
            "behavior.batch_size: 1000000000 is greater than the maximum",
        ),
        (
            lambda c: c.update(seeds=[0, 10**30]),
            "seeds[1]: 1000000000000000000000000000000 is greater than the maximum",
        ),
        (
            lambda c: c["collect"].update(seed=2**31),
            "collect.seed: 2147483648 is greater than the maximum of 2147483647",
        ),
        (
            lambda c: c["train"]["peda"].update(hidden=10**6),
            "train.peda.hidden: 1000000 is greater than the maximum of 16384",
        ),
        (lambda c: c["collect"].update(n_trajectories=10**12), "collect.n_trajectories: 1000000000000 is greater"),
        (lambda c: c["behavior"].update(buffer_size=10**10), "behavior.buffer_size: 10000000000 is greater"),
        (
            lambda c: c["evaluate"].update(divisions=5_000),
            "evaluate.divisions: 5000 divisions give 12,507,501 preference points for MO-Hopper-v3",
        ),
        (lambda c: c["train"]["peda"].update(n_head=3), "train.peda: embed_dim (16) must be divisible by n_head (3)"),
        # an evaluation context longer than the training context, set directly or by an override
        (
            lambda c: c["train"]["peda"].update(context_length=5, eval_context_length=8),
            "train.peda: eval_context_length (8) must be at most context_length (5)",
        ),
        (
            lambda c: c["train"]["overrides"].append({"models": ["dt-p"], "peda": {"eval_context_length": 10**4}}),
            "eval_context_length (10000) must be at most context_length (5): a model is evaluated on at most the "
            "context it was trained on (train.peda with its overrides, for dt-p on MO-HalfCheetah-v2)",
        ),
        # what YAML reads but no job can use: non-finite numbers, a float seed, an overflowing rate
        (lambda c: c["behavior"].update(lr=float("nan")), "behavior.lr: nan is not a finite number"),
        (lambda c: c["behavior"].update(gamma=float("inf")), "behavior.gamma: inf is not a finite number"),
        (
            lambda c: c["train"]["peda"].update(weight_decay=float("-inf")),
            "train.peda.weight_decay: -inf is not a finite number",
        ),
        (lambda c: c.update(seeds=[0, 1.0]), "seeds[1]: 1.0 must be written as an integer (1)"),
        (lambda c: c["collect"].update(seed=3.0), "collect.seed: 3.0 must be written as an integer (3)"),
        (
            lambda c: c["train"]["peda"].update(lr=1e12),
            "train.peda.lr: 1000000000000.0 is greater than the maximum of 1",
        ),
        (lambda c: c["behavior"].update(lr=2.0), "behavior.lr: 2.0 is greater than the maximum of 1"),
        (lambda c: c.update(results_dir="/"), "results_dir: '/' is /, a system folder"),
        (lambda c: c.update(results_dir="/usr/../etc"), "results_dir: '/usr/../etc' is /etc, a system folder"),
        (
            lambda c: c.update(
                imported_datasets=[
                    {"env": "MO-HalfCheetah-v2", "quality": "amateur", "entropy": "low", "path": "no/such/file.parquet"}
                ]
            ),
            "imported_datasets[0].path: no/such/file.parquet is not a file",
        ),
    ],
)
def test_bad_config_names_the_key(config, mutate, expected):
    mutate(config)
    with pytest.raises(ConfigError) as err:
        validate_config(config, source="bad.yaml")
    assert "bad.yaml" in str(err.value)
    assert expected in str(err.value)


def test_unreadable_config_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("envs: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(bad)
    with pytest.raises(ConfigError, match=f"{tmp_path}: is a folder, not a config file"):
        load_config(tmp_path)  # was an IsADirectoryError traceback
    bad.write_text("envs: [a, b\nmodels: [bc]\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert "line 1, column" in str(err.value) and "line 2" in str(err.value)


def test_train_overrides_apply_in_order():
    with open(ROOT / "configs" / "paper.yaml") as f:
        config = yaml.safe_load(f)
    assert train_settings(config, "MO-HalfCheetah-v2", "dt")["steps"] == 80000
    assert train_settings(config, "MO-Hopper-v3", "dt-p")["steps"] == 400000
    assert train_settings(config, "MO-Hopper-v3", "rvs")["steps"] == 200000
    assert train_settings(config, "MO-Ant-v2", "bc-p")["hidden"] == 512


def test_behavior_overrides_apply_in_order_to_their_envs_only(config):
    config["behavior"]["overrides"] = [
        {"envs": ["MO-Swimmer-v2", "MO-Ant-v2"], "gamma": 0.999, "total_steps": 50},
        {"envs": ["MO-Ant-v2"], "total_steps": 70},
    ]
    validate_config(config)
    base = {**{k: v for k, v in config["behavior"].items() if k != "overrides"}, "shipped": False, "method": "td3"}
    assert behavior_settings(config, "MO-HalfCheetah-v2") == base
    assert behavior_settings(config, "MO-Swimmer-v2") == dict(base, gamma=0.999, total_steps=50)
    assert behavior_settings(config, "MO-Ant-v2") == dict(base, gamma=0.999, total_steps=70)
    config["behavior"].pop("overrides")  # optional: without it every env gets the defaults
    assert behavior_settings(validate_config(config), "MO-Ant-v2") == base


def test_pgmorl_settings_are_overridden_key_by_key_and_the_method_per_env(config):
    config["envs"] = ["MO-HalfCheetah-v2", "MO-Hopper-v3", "MO-Swimmer-v2"]
    config["behavior"]["method"] = "pgmorl"
    config["behavior"]["pgmorl"] = {"env_steps_per_task": 5000000, "warmup_iters": 80, "update_iters": 20}
    config["behavior"]["overrides"] = [
        {"envs": ["MO-Hopper-v3"], "pgmorl": {"env_steps_per_task": 8000000, "delta_weight": 0.25}},
        {"envs": ["MO-Hopper-v3"], "pgmorl": {"warmup_iters": 200}},
        {"envs": ["MO-Swimmer-v2"], "method": "td3"},
    ]
    validate_config(config)
    assert behavior_settings(config, "MO-HalfCheetah-v2")["pgmorl"] == config["behavior"]["pgmorl"]
    assert behavior_settings(config, "MO-Hopper-v3")["pgmorl"] == {
        "env_steps_per_task": 8000000, "warmup_iters": 200, "update_iters": 20, "delta_weight": 0.25}  # fmt: skip
    swimmer = behavior_settings(config, "MO-Swimmer-v2")
    assert swimmer["method"] == "td3" and "pgmorl" not in swimmer and swimmer["gamma"] == config["behavior"]["gamma"]
    # A pgmorl config needs no TD3 keys; a td3 env in it does.
    for key in ("total_steps", "gamma"):
        config["behavior"].pop(key)
    with pytest.raises(ConfigError, match=r"MO-Swimmer-v2 trains with method td3, which needs behavior.total_steps"):
        validate_config(config)
    config["behavior"]["overrides"].pop()
    validate_config(config)


def test_morl_behavior_trains_with_the_envs_overrides(tmp_path, config):
    config["behavior"]["overrides"] = [{"envs": ["MO-HalfCheetah-v2"], "total_steps": 48, "start_steps": 48,
                                        "gamma": 0.95}]  # fmt: skip
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "policy.pt"
    assert main(["behavior", "--config", str(path), "--env", "MO-HalfCheetah-v2", "--output", str(out)]) == 0
    ckpt = torch.load(out, weights_only=True)
    assert ckpt["steps"] == 48 and ckpt["settings"]["gamma"] == 0.95


def test_morl_behavior_method_flag_trains_the_configs_other_method(tmp_path, config):
    """`morl behavior --method td3` on a pgmorl config (configs/paper.yaml keeps TD3's keys too)
    trains the TD3 actor with them, per-env overrides included; a method whose settings the config
    lacks is a config error."""
    config["behavior"].update(method="pgmorl", pgmorl={"env_steps_per_task": 640, "warmup_iters": 2,
                                                       "update_iters": 1, "num_steps": 64, "num_envs": 2,
                                                       "num_minibatches": 4})  # fmt: skip
    config["behavior"]["overrides"] = [{"envs": ["MO-HalfCheetah-v2"], "total_steps": 48, "start_steps": 48}]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "policy.pt"
    argv = ["behavior", "--config", str(path), "--env", "MO-HalfCheetah-v2", "--output", str(out)]
    assert main([*argv, "--method", "td3"]) == 0
    ckpt = torch.load(out, weights_only=True)
    assert ckpt["kind"] == "morl-behavior" and ckpt["steps"] == 48
    del config["behavior"]["pgmorl"]
    config["behavior"]["method"] = "td3"
    path.write_text(yaml.safe_dump(config))
    out.unlink()
    assert main([*argv, "--method", "pgmorl"]) == 2 and not out.exists()


def test_expert_high_statistics_need_the_expert_high_cell_of_every_env(config, tmp_path):
    from morl.config import training_definitions

    imported = tmp_path / "x.parquet"
    imported.touch()  # an imported file must exist (its contents are checked when it is read)

    config["train"]["peda"]["statistics_from"] = "expert-high"  # the smoke grid has only amateur-low
    with pytest.raises(ConfigError) as err:
        validate_config(config, "c.yaml")
    assert str(err.value) == (
        "c.yaml: train.peda.statistics_from: 'expert-high' takes the state statistics and the target regression of "
        "every dataset of an env from its expert-high dataset, and this config has no MO-HalfCheetah-v2 "
        "expert-high, MO-Hopper-v3 expert-high; add expert to qualities and high to entropies, name that cell in "
        "imported_datasets, or set train.peda.statistics_from: dataset"
    )
    config["imported_datasets"] = [{"env": "MO-HalfCheetah-v2", "quality": "expert", "entropy": "high",
                                    "path": str(imported)}]  # fmt: skip
    with pytest.raises(ConfigError, match="this config has no MO-Hopper-v3 expert-high;"):
        validate_config(config, "c.yaml")
    config["imported_datasets"].append(dict(config["imported_datasets"][0], env="MO-Hopper-v3"))
    validate_config(config, "c.yaml")
    del config["imported_datasets"]
    config.update(qualities=["expert", "amateur"], entropies=["high", "low"])
    validate_config(config, "c.yaml")
    # one model under expert-high through an override is enough to need the cell
    config.update(qualities=["amateur"], entropies=["low"])
    config["train"]["peda"]["statistics_from"] = "dataset"
    validate_config(config, "c.yaml")
    config["train"]["overrides"] = [
        {"models": ["dt"], "envs": ["MO-Hopper-v3"], "peda": {"statistics_from": "expert-high"}}
    ]
    with pytest.raises(ConfigError, match="this config has no MO-Hopper-v3 expert-high;"):
        validate_config(config, "c.yaml")
    assert training_definitions(config, "MO-Hopper-v3", "dt") == {
        "returns_to_go": "peda",
        "statistics_from": "expert-high",
    }
    assert training_definitions(config, "MO-Hopper-v3", "bc") == {"returns_to_go": "peda", "statistics_from": "dataset"}


@pytest.mark.parametrize("name", ["config.yaml", "configs/paper.yaml"])
def test_shipped_configs_follow_peda(name):
    train = load_config(ROOT / name)["train"]["peda"]
    assert train["returns_to_go"] == "peda" and train["statistics_from"] == "expert-high"


def test_coverage_variants_with_expert_high_targets_are_refused(config):
    """The target regression of expert-high statistics sees the complete data, held-out preferences included."""
    config["coverages"] = ["complete", "narrow"]
    config["train"]["peda"]["statistics_from"] = "expert-high"
    with pytest.raises(ConfigError, match="coverages: a coverage variant holds preferences out .* set "
                       "train.peda.statistics_from: dataset"):  # fmt: skip
        validate_config(config)
    config["train"]["peda"]["statistics_from"] = "dataset"
    assert validate_config(config) is config


@pytest.mark.parametrize(
    "section, match",
    [
        ({"shattered": {"fraction": 1.5}}, r"coverage\.shattered\.fraction"),
        ({"narrow": {"keep": [0.0, 1.0]}}, r"coverage\.narrow\.keep"),
        ({"narow": {}}, r"coverage"),
    ],
)
def test_bad_coverage_bands_are_refused_before_any_job(config, section, match):
    config["coverage"] = section
    with pytest.raises(ConfigError, match=match):
        validate_config(config)


def test_checkpoint_every_zero_means_never_in_every_family(config):
    """0 is documented as "no partial states" by each family's settings; the schema agrees."""
    for family in ("peda", "cql", "td3bc", "iql"):
        config["train"].setdefault(family, {})["checkpoint_every"] = 0
    validated = validate_config(config)
    assert train_settings(validated, "MO-HalfCheetah-v2", "rvs-p")["checkpoint_every"] == 0
    config["train"]["peda"]["checkpoint_every"] = -1
    with pytest.raises(ConfigError, match="checkpoint_every"):
        validate_config(config)


def test_a_missing_section_key_is_reported_once(config, tmp_path):
    """A shipped behavior section without the TD3 keys fails several schema branches the same way;
    the message says it once."""
    config["behavior"] = {"shipped": True}
    with pytest.raises(ConfigError) as err:
        validate_config(config, source="mine.yaml")
    lines = str(err.value).splitlines()[1:]
    assert len(lines) == len(set(lines)) and any("behavior.total_steps" in line for line in lines)
