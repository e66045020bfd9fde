"""Experiment configuration: loading, schema validation and per-cell settings.

Every config is checked against ``schemas/config.schema.yaml`` plus the checks a schema cannot
express (environment ids must be registered; ``statistics_from: expert-high`` needs each env's
expert-high dataset). Errors name the file and the key, e.g.
``configs/x.yaml: train.peda.steps: 0 is less than the minimum of 1``. A Snakemake run uses exactly one
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

from morl import behavior as behavior_methods
from morl import families, vocabulary
from morl.errors import InputError
from morl.families import display_names, family_of, model_order

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "config.schema.yaml"


class ConfigError(InputError):
    """The experiment configuration is invalid; the message names the source and the key."""


@lru_cache(maxsize=1)
def load_schema() -> dict:
    """The config schema: ``schemas/config.schema.yaml`` completed from the sources of its words,
    which import no torch: the qualities, entropies and coverages (:mod:`morl.vocabulary`), the
    behavior methods (:data:`morl.behavior.METHODS`) and the family registry (the model names, and
    one ``train.<family>`` settings section per family, also allowed in overrides). The file's
    generated block (:mod:`morl.config_schema`) lists the same words; completing them here keeps a
    stale file from validating with old ones. A family whose settings the schema file describes
    (``$defs/<family>_settings``) gets them checked key by key here; every family's are checked by
    its own rules when the config is validated."""
    if not SCHEMA_PATH.exists():
        raise ConfigError(f"{SCHEMA_PATH}: config schema not found (is the package installed from a checkout?)")
    with open(SCHEMA_PATH) as f:
        schema = yaml.safe_load(f)
    defs = schema["$defs"]
    defs["quality"] = {"enum": list(vocabulary.QUALITIES)}
    defs["entropy"] = {"enum": list(vocabulary.ENTROPIES)}
    defs["coverage_name"] = {"enum": list(vocabulary.COVERAGES)}
    defs["behavior_method"]["enum"] = list(behavior_methods.method_names())
    defs["model"] = {"enum": list(model_order())}
    train = schema["properties"]["train"]
    names = display_names()
    for fam in families.FAMILIES:
        section = {
            "type": "object",
            "description": f"Settings of {', '.join(names[m.name] for m in fam.models)} that differ from the "
            "defaults of their source (docs/protocol.md).",
        }
        described = schema["$defs"].get(f"{fam.name}_settings")
        if described is not None:
            section.update(additionalProperties=False, properties=described)
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
SYSTEM_FOLDERS = (
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib64",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
)


def _behavior_keys() -> tuple[str, ...]:
    """The keys at the top of ``behavior`` that an override may set too: ``method``, ``shipped``
    and the settings of the methods that have no section of their own (TD3's)."""
    own = (k for m in behavior_methods.METHODS if m.section is None for k in m.keys())
    return ("method", "shipped", *own)


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
    if error.validator == "contains" and "const" in error.validator_value:
        return f"{where}: {error.instance!r} must include {error.validator_value['const']!r}"
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
    _refuse_old_train_keys(config, source)
    validator = _StrictValidator(load_schema())
    errors = sorted(
        validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
    )
    if errors:
        lines = list(dict.fromkeys(_describe(e) for e in errors))[:10]  # one line per problem
        raise ConfigError(f"{source}: invalid config:\n  " + "\n  ".join(lines))

    results_dir = Path(config["results_dir"]).resolve()
    if str(results_dir) in SYSTEM_FOLDERS:
        raise ConfigError(
            f"{source}: results_dir: {config['results_dir']!r} is {results_dir}, a system folder; "
            "give a folder of the experiment's own"
        )
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
            raise ConfigError(
                f"{source}: imported_datasets[{i}].path: {imp['path']} is not a file (looked for it "
                f"from {Path.cwd()}); an import that is not there would leave the cell to earlier "
                "outputs"
            )
    for i, ov in enumerate(config["train"].get("overrides") or []):
        for env_id in ov.get("envs", []):
            check_env(env_id, f"train.overrides[{i}].envs", source)
        _check_override_targets(ov, f"train.overrides[{i}]", source)
    for fam in families.FAMILIES:
        if config["train"].get(fam.name):
            try:
                fam.resolve_settings(config["train"][fam.name])
            except InputError as exc:
                raise ConfigError(f"{source}: {exc}") from None
    for i, ov in enumerate(config["behavior"].get("overrides", [])):
        for j, env_id in enumerate(ov["envs"]):
            check_env(env_id, f"behavior.overrides[{i}].envs[{j}]", source)
    for env_id in config["envs"]:
        _check_behavior_method(config, env_id, source)
        which = behavior_settings(config, env_id)["shipped"]
        if which:
            from morl.shipped import check_shipped_policy

            try:
                check_shipped_policy(env_id, which=which)
            except InputError as exc:
                raise ConfigError(f"{source}: behavior.shipped: {exc}") from None
        for model in config["models"]:
            _check_train_settings(config, env_id, model, source)
    try:
        coverage_settings(config)
    except InputError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if set(config.get("coverages", [vocabulary.COMPLETE])) - {vocabulary.COMPLETE}:
        leaky = [
            (e, m)
            for e in config["envs"]
            for m in config["models"]
            if "returns_to_go" in families.definitions_of(m)
            and train_settings(config, e, m)["statistics_from"] == "expert-high"
        ]
        if leaky:
            e, m = leaky[0]
            raise ConfigError(
                f"{source}: coverages: a coverage variant holds preferences out of the data, but "
                f"train.{family_of(m).name}.statistics_from "
                f"is expert-high (e.g. for {m} on {e}): the initial targets would come from a regression on the complete "
                f"expert-high data, held-out preferences included; set train.{family_of(m).name}.statistics_from: dataset"
            )
    divisions = config["evaluate"]["divisions"]
    if divisions is not None:
        _check_grid_size(config, divisions, source)
    in_grid = "expert" in config["qualities"] and "high" in config["entropies"]
    needing = [
        (env_id, m)
        for env_id in config["envs"]
        if not in_grid and (env_id, "expert", "high") not in imported_datasets(config)
        for m in config["models"]
        if reference_cell(config, env_id, m)
    ]
    if needing:
        missing = ", ".join(dict.fromkeys(f"{e} expert-high" for e, _ in needing))
        key = f"train.{family_of(needing[0][1]).name}.statistics_from"
        raise ConfigError(
            f"{source}: {key}: 'expert-high' takes the state statistics and the target regression of every dataset "
            f"of an env from its expert-high dataset, and this config has no {missing}; add expert to qualities and "
            f"high to entropies, name that cell in imported_datasets, or set {key}: dataset"
        )
    return config


def snapshot_steps(config: dict[str, Any], env_id: str, model: str) -> list[int]:
    """The steps at which ``model`` on ``env_id`` keeps a snapshot for HV along training:
    ``evaluate.at_steps`` below the model's own budget, in order (none without the key)."""
    total = train_settings(config, env_id, model)["steps"]
    return sorted(s for s in config["evaluate"].get("at_steps") or () if s < total)


def _refuse_old_train_keys(config: dict[str, Any], source) -> None:
    """A config written before every family had its own ``train.<family>`` section: PEDA's settings
    at the top of ``train`` or of an override are refused, naming the first key and where it goes."""
    train = config.get("train")
    if not isinstance(train, dict):
        return
    peda_keys = set(load_schema()["$defs"].get("peda_settings", {}))
    old = [k for k in train if k in peda_keys]
    if old:
        raise ConfigError(
            f"{source}: train.{old[0]}: the settings of PEDA's models now sit in their family's section, "
            f"train.peda (as every family's: train.<family>); move {', '.join(old)} under train.peda"
        )
    for i, ov in enumerate(train.get("overrides") or []):
        old = [k for k in ov if k in peda_keys] if isinstance(ov, dict) else []
        if old:
            raise ConfigError(
                f"{source}: train.overrides[{i}].{old[0]}: an override sets a family's settings under its name, "
                f"e.g. {{models: [dt, dt-p], peda: {{{old[0]}: ...}}}}; move {', '.join(old)} under peda"
            )


def _check_override_targets(ov: dict[str, Any], where: str, source) -> None:
    """Refuse an override that sets settings none of its models read (they would be ignored)."""
    models = ov.get("models", model_order())
    names = {family_of(m).name for m in models}
    for fam in families.FAMILIES:
        if fam.name in ov and fam.name not in names:
            raise ConfigError(
                f"{source}: {where}.{fam.name}: none of its models ({', '.join(models)}) is a "
                f"{fam.name} model ({', '.join(m.name for m in fam.models)})"
            )


def _check_train_settings(config: dict[str, Any], env_id: str, model: str, source) -> None:
    """The settings of one (env, model) cell, resolved and checked; ConfigError naming the key."""
    try:
        train_settings(config, env_id, model)
    except InputError as exc:
        raise ConfigError(
            f"{source}: {exc} (train.{family_of(model).name} with its overrides, for {model} on {env_id})"
        ) from None


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


def _yaml_typed(value: Any) -> Any:
    """A ``--config`` value as the same text means in a config file. Snakemake reads a value such
    as ``[0, 1]`` with YAML's base loader, which keeps every scalar inside it a string (``['0',
    '1']``); each such scalar is read again as YAML reads it in a file (``0`` an integer, ``0.5``
    a number, ``null`` nothing), and a scalar that YAML reads as text stays as it was."""
    if isinstance(value, dict):
        return {k: _yaml_typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_yaml_typed(v) for v in value]
    if isinstance(value, str):
        try:
            typed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        return typed if typed is None or isinstance(typed, bool | int | float) else value
    return value


def workflow_config(
    config: dict[str, Any],
    configfiles,
    default: str | os.PathLike = DEFAULT_CONFIG,
    overrides: dict[str, Any] | None = None,
):
    """The one config of a Snakemake run, validated whole: ``(config, path of its file)``.

    ``config``: what Snakemake has when the Snakefile starts: the ``--configfile`` given, with any
    ``--config key=value`` overrides applied, or, without ``--configfile``, those overrides alone.
    ``configfiles``: the ``--configfile`` paths. More than one is refused; with none, ``default``
    (in the working folder) is read and validated alone, then with the overrides laid over it.
    Nothing else is merged in: a file that lacks a key is refused, never filled in from another.
    ``overrides``: the ``--config`` entries as Snakemake parsed them; their values are read again
    as a config file's YAML reads them (:func:`_yaml_typed`), so ``seeds=[0]`` means ``[0]``.
    """
    if overrides:
        config = _merged(config, {key: _yaml_typed(value) for key, value in overrides.items()})
    configfiles = [str(f) for f in configfiles]
    if len(configfiles) > 1:
        raise ConfigError(
            f"{', '.join(configfiles)}: give one --configfile; a run uses exactly one config, "
            "validated whole (copy what the files share into one file)"
        )
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
    """Training settings for one (env, model) cell: the model's family's section ``train.<family>``
    (only what differs from the family's defaults) with the ``<family>`` mappings of the matching
    overrides laid over it in order, defaults filled in and checked."""
    train = config["train"]
    fam = family_of(model)
    values = copy.deepcopy(train.get(fam.name) or {})
    for ov in train.get("overrides") or []:
        if env_id in ov.get("envs", [env_id]) and model in ov.get("models", [model]):
            values.update(copy.deepcopy(ov.get(fam.name) or {}))
    return fam.resolve_settings(values)


def reference_cell(config: dict[str, Any], env_id: str, model: str) -> tuple[str, str, str] | None:
    """The dataset cell whose statistics a model of ``env_id`` is trained and evaluated with: the
    env's expert-high cell under ``statistics_from: expert-high``, else None (its own dataset)."""
    if train_settings(config, env_id, model)["statistics_from"] == "expert-high":
        return (env_id, "expert", "high")
    return None


def training_definitions(config: dict[str, Any], env_id: str, model: str) -> dict[str, str]:
    """The training definitions of one (env, model) cell, which its checkpoints record: for PEDA's
    models ``returns_to_go`` and ``statistics_from``, for the value-based ones ``statistics_from``."""
    settings = train_settings(config, env_id, model)
    return {k: settings[k] for k in families.definitions_of(model)}


def coverage_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The band settings of the shattered and narrow coverage variants, defaults filled in."""
    from morl.coverage import check_settings

    return check_settings(config.get("coverage"))


def _check_behavior_method(config: dict[str, Any], env_id: str, source) -> None:
    """The behavior settings of ``env_id`` can train with its method: the method's keys present
    (TD3's at the top of ``behavior``, PGMORL's section), the env one the method trains, and the
    settings resolved and checked by the method's own rules (:data:`morl.behavior.METHODS`)."""
    settings = behavior_settings(config, env_id)
    if settings["shipped"]:
        return
    method = behavior_methods.method(settings["method"])
    if method.section is None:
        missing = [k for k in method.required() if k not in settings]
        if missing:
            raise ConfigError(
                f"{source}: behavior: {env_id} trains with method {method.name}, which needs "
                f"behavior.{', behavior.'.join(missing)}"
            )
    elif method.section not in config["behavior"]:
        raise ConfigError(
            f"{source}: behavior: {env_id} trains with method {method.name}, which needs a {method.label} section"
        )
    if method.d4morl_only:
        from morl.envs import is_d4morl_task  # late: needs mujoco

        if not is_d4morl_task(env_id):
            raise ConfigError(
                f"{source}: behavior.method: {method.name} trains the D4MORL tasks only, not {env_id}; "
                f"use method {behavior_methods.DEFAULT_METHOD} for it (a behavior.overrides entry can set it for some envs)"
            )
    try:
        method.resolve_settings(method.values(settings))
    except InputError as exc:
        raise ConfigError(f"{source}: {exc} (for {env_id})") from None


def behavior_settings(config: dict[str, Any], env_id: str) -> dict[str, Any]:
    """Behavior-policy settings for one env: ``behavior``'s defaults with its matching overrides
    applied, as the config gives them (each method fills in its own defaults when it trains):
    ``shipped`` (default false), ``method`` (default td3), the keys at the top of ``behavior``,
    and the section of the method that trains (e.g. ``pgmorl``, which an override updates key by key)."""
    behavior = config["behavior"]
    keys = _behavior_keys()
    # the key order is part of the behavior rule's params, whose repr Snakemake compares: keep it
    settings = {
        "shipped": False,
        "method": behavior_methods.DEFAULT_METHOD,
        **{k: copy.deepcopy(behavior[k]) for k in keys if k in behavior},
    }
    sections = {m.section: copy.deepcopy(behavior.get(m.section, {})) for m in behavior_methods.METHODS if m.section}
    for ov in behavior.get("overrides", []):
        if env_id in ov["envs"]:
            settings.update({k: v for k, v in ov.items() if k in keys})
            for name, section in sections.items():
                section.update(ov.get(name, {}))
    section = behavior_methods.method(settings["method"]).section
    if section is not None:
        settings[section] = sections[section]
    return settings
