"""Experiment configuration: loading, schema validation and per-cell settings.

Every config is checked against ``schemas/config.schema.yaml`` plus the checks a schema cannot
express (environment ids must be registered; ``statistics_from: expert-high`` needs each env's
expert-high dataset). Errors name the file and the key, e.g.
``configs/x.yaml: train.steps: 0 is less than the minimum of 1``. A Snakemake run uses exactly one
config file (:func:`workflow_config`).
"""

from __future__ import annotations

import copy
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from morl.errors import InputError
from morl.families import DISPLAY, FAMILIES, MODEL_ORDER, family_of

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "config.schema.yaml"


class ConfigError(InputError):
    """The experiment configuration is invalid; the message names the source and the key."""


@lru_cache(maxsize=1)
def load_schema() -> dict:
    """The config schema: ``schemas/config.schema.yaml`` completed from the family registry (the model
    names, and one ``train.<family>`` settings section per family, also allowed in overrides)."""
    if not SCHEMA_PATH.exists():
        raise ConfigError(f"{SCHEMA_PATH}: config schema not found (is the package installed from a checkout?)")
    with open(SCHEMA_PATH) as f:
        schema = yaml.safe_load(f)
    schema["$defs"]["model"] = {"enum": list(MODEL_ORDER)}
    train = schema["properties"]["train"]
    for fam in FAMILIES:
        if fam.top_level_settings:
            continue
        names = ", ".join(DISPLAY[m.name] for m in fam.models)
        section = {
            "type": "object",
            "description": f"Settings of {names} that differ from the method paper's defaults (docs/protocol.md).",
        }
        train["properties"][fam.name] = section
        train["properties"]["overrides"]["items"]["properties"][fam.name] = section
    return schema


def _is_integer(checker, value) -> bool:
    # JSON Schema counts 1.0 as an integer; a config's counts and seeds must be written as integers
    # (a seed 1.0 would name files seed1.0)
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(checker, value) -> bool:
    # YAML's .nan and .inf are floats; no setting of a config is meaningful as either
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer).redefine(
        "number", _is_number
    ),
)

#: Folders a results_dir must not be: the filesystem root and the system's own folders.
SYSTEM_FOLDERS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr",
                  "/var")  # fmt: skip


def _setting_keys(section: str) -> tuple[str, ...]:
    """The keys an override may set in ``section`` ("train" or "behavior"), as the schema lists them
    (for ``train``: the PEDA models' settings; the other families' sit in ``train.<family>``)."""
    return tuple(load_schema()["$defs"][f"{section}_settings"])


def _key_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    where = _key_path(error.absolute_path)
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in (error.instance or {})]
        keys = ", ".join(_key_path([*error.absolute_path, k]) for k in missing)
        return f"missing required key {keys}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        keys = ", ".join(_key_path([*error.absolute_path, k]) for k in extra)
        return f"unknown key {keys} (allowed here: {', '.join(allowed)})"
    if error.validator == "enum":
        return f"{where}: {error.instance!r} is not one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "type":
        inst, want = error.instance, error.validator_value
        if isinstance(inst, float) and not math.isfinite(inst) and want in ("number", "integer"):
            return f"{where}: {inst!r} is not a finite number"
        if isinstance(inst, float) and want == "integer" and inst.is_integer():
            return f"{where}: {inst!r} must be written as an integer ({int(inst)})"
        return f"{where}: {inst!r} has the wrong type; expected {want}"
    return f"{where}: {error.message}"


def check_env(env_id: str, where: str, source: str | os.PathLike) -> None:
    """Raise :class:`ConfigError` unless ``env_id`` is a D4MORL task or an installed MO-Gymnasium task."""
    from morl.envs import ENV_SPECS, MO_GYMNASIUM_INSTALL, MissingExtraError, get_spec  # late: needs mujoco

    try:
        get_spec(env_id)
    except MissingExtraError:
        raise ConfigError(
            f"{source}: {where}: {env_id!r} is an MO-Gymnasium task, and MO-Gymnasium is not installed; "
            f"install the optional extra: {MO_GYMNASIUM_INSTALL}"
        ) from None
    except ValueError as exc:
        if env_id not in ENV_SPECS and not str(exc).startswith("unknown"):
            raise ConfigError(f"{source}: {where}: {exc}") from None  # e.g. a discrete-action MO-Gymnasium task
        raise ConfigError(
            f"{source}: {where}: unknown environment {env_id!r}; known: {', '.join(sorted(ENV_SPECS))}, "
            f"or an MO-Gymnasium id (e.g. mo-halfcheetah-v5) with the mo-gymnasium extra installed"
        ) from None


def validate_config(config: dict[str, Any], source: str | os.PathLike = "config") -> dict[str, Any]:
    """Check ``config`` against the schema and the environment registry; return it unchanged.

    Raises :class:`ConfigError` naming ``source`` and the offending key.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping of keys to values, got {type(config).__name__}")
    validator = _StrictValidator(load_schema())
    errors = sorted(
        validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
    )
    if errors:
        lines = [_describe(e) for e in errors[:10]]
        raise ConfigError(f"{source}: invalid config:\n  " + "\n  ".join(lines))

    results_dir = Path(config["results_dir"]).resolve()
    if str(results_dir) in SYSTEM_FOLDERS:
        raise ConfigError(f"{source}: results_dir: {config['results_dir']!r} is {results_dir}, a system folder; "
                          "give a folder of the experiment's own")  # fmt: skip
    for i, env_id in enumerate(config["envs"]):
        check_env(env_id, f"envs[{i}]", source)
    seen = set()
    for i, imp in enumerate(config.get("imported_datasets", [])):
        cell = (imp["env"], imp["quality"], imp["entropy"])
        check_env(imp["env"], f"imported_datasets[{i}].env", source)

        if cell in seen:
            raise ConfigError(f"{source}: imported_datasets[{i}]: a second file for {'/'.join(cell)}")
        seen.add(cell)
    for i, imp in enumerate(config.get("imported_datasets", [])):
        if not Path(imp["path"]).is_file():
            raise ConfigError(f"{source}: imported_datasets[{i}].path: {imp['path']} is not a file (looked for it "
                              f"from {Path.cwd()}); an import that is not there would leave the cell to earlier "
                              "outputs")  # fmt: skip
    for i, ov in enumerate(config["train"]["overrides"]):
        for env_id in ov.get("envs", []):
            check_env(env_id, f"train.overrides[{i}].envs", source)
        _check_override_targets(ov, f"train.overrides[{i}]", source)
    for fam in FAMILIES:
        if not fam.top_level_settings and config["train"].get(fam.name):
            try:
                fam.load().resolve_settings(config["train"][fam.name])
            except InputError as exc:
                raise ConfigError(f"{source}: train.{fam.name}: {exc}") from None
    for i, ov in enumerate(config["behavior"].get("overrides", [])):
        for j, env_id in enumerate(ov["envs"]):
            check_env(env_id, f"behavior.overrides[{i}].envs[{j}]", source)
    for env_id in config["envs"]:
        _check_behavior_method(config, env_id, source)
        if behavior_settings(config, env_id)["shipped"]:
            from morl.shipped import check_shipped_policy

            try:
                check_shipped_policy(env_id)
            except InputError as exc:
                raise ConfigError(f"{source}: behavior.shipped: {exc}") from None
        for model in config["models"]:
            _check_train_settings(config, env_id, model, source)
    try:
        coverage_settings(config)
    except InputError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if set(config.get("coverages", ["complete"])) - {"complete"}:
        leaky = [(e, m) for e in config["envs"] for m in config["models"]
                 if family_of(m).top_level_settings and train_settings(config, e, m)["statistics_from"] == "expert-high"]  # fmt: skip
        if leaky:
            e, m = leaky[0]
            raise ConfigError(
                f"{source}: coverages: a coverage variant holds preferences out of the data, but train.statistics_from "
                f"is expert-high (e.g. for {m} on {e}): the initial targets would come from a regression on the complete "
                "expert-high data, held-out preferences included; set train.statistics_from: dataset"
            )
    divisions = config["evaluate"]["divisions"]
    if divisions is not None:
        _check_grid_size(config, divisions, source)
    in_grid = "expert" in config["qualities"] and "high" in config["entropies"]
    missing = [
        f"{env_id} expert-high"
        for env_id in config["envs"]
        if not in_grid
        and (env_id, "expert", "high") not in imported_datasets(config)
        and any(reference_cell(config, env_id, m) for m in config["models"])
    ]
    if missing:
        raise ConfigError(
            f"{source}: train.statistics_from: 'expert-high' takes the state statistics and the target regression "
            f"of every dataset of an env from its expert-high dataset, and this config has no {', '.join(missing)}; "
            "add expert to qualities and high to entropies, name that cell in imported_datasets, or set "
            "train.statistics_from: dataset"
        )
    return config


def _check_override_targets(ov: dict[str, Any], where: str, source) -> None:
    """Refuse an override that sets settings none of its models read (they would be ignored)."""
    models = ov.get("models", MODEL_ORDER)
    families = {family_of(m).name for m in models}
    peda_keys = sorted(set(ov) & set(_setting_keys("train")))
    if peda_keys and not any(f.top_level_settings and f.name in families for f in FAMILIES):
        raise ConfigError(
            f"{source}: {where}: sets {', '.join(peda_keys)}, which only PEDA's models read, but its "
            f"models are {', '.join(models)}; put them under the family's key instead"
        )
    for fam in FAMILIES:
        if fam.name in ov and fam.name not in families:
            raise ConfigError(
                f"{source}: {where}.{fam.name}: none of its models ({', '.join(models)}) is a "
                f"{fam.name} model ({', '.join(m.name for m in fam.models)})"
            )


def _check_train_settings(config: dict[str, Any], env_id: str, model: str, source) -> None:
    """The settings of one (env, model) cell, resolved and checked; ConfigError naming the key."""
    fam = family_of(model)
    if not fam.top_level_settings:
        try:
            train_settings(config, env_id, model)
        except InputError as exc:
            raise ConfigError(
                f"{source}: train.{fam.name} (or an override of it, for {model} on {env_id}): {exc}"
            ) from None
        return
    hp = train_settings(config, env_id, model)
    if hp["embed_dim"] % hp["n_head"]:
        raise ConfigError(
            f"{source}: train.embed_dim: {hp['embed_dim']} is not divisible by train.n_head: {hp['n_head']} "
            f"(for {model} on {env_id}); each attention head takes an equal share of the embedding"
        )
    if hp["eval_context_length"] > hp["context_length"]:
        raise ConfigError(
            f"{source}: train.eval_context_length: {hp['eval_context_length']} is greater than "
            f"train.context_length: {hp['context_length']} (for {model} on {env_id}); a model is "
            "evaluated on at most the context it was trained on"
        )


#: The most points an evaluation grid may have (the protocol's grids have 501 and 325).
MAX_GRID_POINTS = 1_000_000


def _check_grid_size(config: dict[str, Any], divisions: int, source) -> None:
    from math import comb

    from morl.envs import get_spec

    for env_id in config["envs"]:
        n_obj = get_spec(env_id).n_obj
        points = comb(divisions + n_obj - 1, n_obj - 1)
        if points > MAX_GRID_POINTS:
            raise ConfigError(
                f"{source}: evaluate.divisions: {divisions} divisions give {points:,} preference points for "
                f"{env_id} ({n_obj} objectives), more than {MAX_GRID_POINTS:,}; null gives the protocol's grid"
            )


def _read_yaml(path: Path) -> Any:
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: config file cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc


def load_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML config file and validate it."""
    path = Path(path)
    return validate_config(_read_yaml(path), path)


#: The config of a Snakemake run that names no --configfile, in the folder it runs in.
DEFAULT_CONFIG = "config.yaml"


def _merged(base: Any, overrides: dict) -> Any:
    """``base`` with ``overrides`` laid over it, mappings merged key by key (as Snakemake merges)."""
    if not isinstance(base, dict) or not isinstance(overrides, dict):
        return copy.deepcopy(overrides)
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        out[key] = _merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def workflow_config(config: dict[str, Any], configfiles, default: str | os.PathLike = DEFAULT_CONFIG):
    """The one config of a Snakemake run, validated whole: ``(config, path of its file)``.

    ``config``: what Snakemake has when the Snakefile starts: the ``--configfile`` given, with any
    ``--config key=value`` overrides applied, or, without ``--configfile``, those overrides alone.
    ``configfiles``: the ``--configfile`` paths. More than one is refused; with none, ``default``
    (in the working folder) is read and validated alone, then with the overrides laid over it.
    Nothing else is merged in: a file that lacks a key is refused, never filled in from another.
    """
    configfiles = [str(f) for f in configfiles]
    if len(configfiles) > 1:
        raise ConfigError(f"{', '.join(configfiles)}: give one --configfile; a run uses exactly one config, "
                          "validated whole (copy what the files share into one file)")  # fmt: skip
    if configfiles:
        result = validate_config(copy.deepcopy(config), configfiles[0]), configfiles[0]
    else:
        path = Path(default)
        if not path.exists():
            raise ConfigError(f"{path}: config file not found in {Path.cwd()}; run where it lies, or give --configfile")
        loaded = validate_config(_read_yaml(path), path)
        source = path if not config else f"{path} with --config overrides"
        result = (loaded if not config else validate_config(_merged(loaded, config), source)), str(path)
    results_dir = Path(result[0]["results_dir"])
    if results_dir.exists() and not results_dir.is_dir():
        raise ConfigError(f"{result[1]}: results_dir: {results_dir} is a file; every output goes into this folder")
    return result


def imported_datasets(config: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    """The config's imported dataset files, keyed by (env, quality, entropy)."""
    return {(d["env"], d["quality"], d["entropy"]): d["path"] for d in config.get("imported_datasets", [])}


def train_settings(config: dict[str, Any], env_id: str, model: str) -> dict[str, Any]:
    """Training settings for one (env, model) cell: the defaults with matching overrides applied.

    PEDA's models read the top-level ``train`` keys. Every other family reads ``train.<family>``
    (only what differs from its paper's defaults) and the ``<family>`` mappings of the matching
    overrides, and gets its full settings back, defaults filled in and checked.
    """
    train = config["train"]
    fam = family_of(model)

    def matches(ov):
        return env_id in ov.get("envs", [env_id]) and model in ov.get("models", [model])

    if fam.top_level_settings:
        keys = _setting_keys("train")
        hp = {k: copy.deepcopy(train[k]) for k in keys}
        for ov in train["overrides"]:
            if matches(ov):
                hp.update({k: v for k, v in ov.items() if k in keys})
        return hp
    hp = copy.deepcopy(train.get(fam.name) or {})
    for ov in train["overrides"]:
        if matches(ov):
            hp.update(copy.deepcopy(ov.get(fam.name) or {}))
    return fam.load().resolve_settings(hp)


def reference_cell(config: dict[str, Any], env_id: str, model: str) -> tuple[str, str, str] | None:
    """The dataset cell whose statistics a model of ``env_id`` is trained and evaluated with: the
    env's expert-high cell under ``statistics_from: expert-high``, else None (its own dataset)."""
    if train_settings(config, env_id, model)["statistics_from"] == "expert-high":
        return (env_id, "expert", "high")
    return None


def training_definitions(config: dict[str, Any], env_id: str, model: str) -> dict[str, str]:
    """The training definitions of one (env, model) cell, which its checkpoints record: for PEDA's
    models ``returns_to_go`` and ``statistics_from``, for the value-based ones ``statistics_from``."""
    hp = train_settings(config, env_id, model)
    return {k: hp[k] for k in family_of(model).load().DEFINITIONS}


def coverage_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The band settings of the shattered and narrow coverage variants, defaults filled in."""
    from morl.coverage import check_settings

    return check_settings(config.get("coverage"))


def _check_behavior_method(config: dict[str, Any], env_id: str, source) -> None:
    """The behavior settings of ``env_id`` can train: TD3's keys present for td3, PGMORL's
    settings consistent and the env a D4MORL task for pgmorl."""
    hp = behavior_settings(config, env_id)
    if hp["shipped"]:
        return
    if hp["method"] == "td3":
        missing = [k for k in _setting_keys("behavior") if k not in hp and k not in ("shipped", "method")]
        if missing:
            raise ConfigError(f"{source}: behavior: {env_id} trains with method td3, which needs "
                              f"behavior.{', behavior.'.join(missing)}")  # fmt: skip
        return
    from morl.behavior.pgmorl import PGMORLSettings  # late: needs torch and mujoco
    from morl.envs import is_d4morl_task

    if "pgmorl" not in config["behavior"]:
        raise ConfigError(f"{source}: behavior: {env_id} trains with method pgmorl, which needs a behavior.pgmorl "
                          "section")  # fmt: skip
    if not is_d4morl_task(env_id):
        raise ConfigError(f"{source}: behavior.method: pgmorl trains the D4MORL tasks only, not {env_id}; "
                          "use method td3 for it (a behavior.overrides entry can set it for some envs)")  # fmt: skip
    try:
        PGMORLSettings.from_config(hp["pgmorl"]).check()
    except InputError as exc:
        raise ConfigError(f"{source}: {exc} (for {env_id})") from None


def behavior_settings(config: dict[str, Any], env_id: str) -> dict[str, Any]:
    """Behavior-policy settings for one env: ``behavior``'s defaults with its matching overrides applied."""
    behavior = config["behavior"]
    keys = _setting_keys("behavior")
    # shipped and method are optional (defaults false and td3); pgmorl: PGMORL's section, which an
    # override updates key by key
    hp = {"shipped": False, "method": "td3", **{k: copy.deepcopy(behavior[k]) for k in keys if k in behavior}}
    pgmorl = copy.deepcopy(behavior.get("pgmorl", {}))
    for ov in behavior.get("overrides", []):
        if env_id in ov["envs"]:
            hp.update({k: v for k, v in ov.items() if k in keys})
            pgmorl.update(ov.get("pgmorl", {}))
    if hp["method"] == "pgmorl":
        hp["pgmorl"] = pgmorl
    return hp
