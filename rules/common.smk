# Paths, wildcard constraints, target lists and the outputs of the table rules. No science here.
import os
from pathlib import Path

from morl.config import (
    behavior_settings,
    coverage_settings,
    imported_datasets,
    reference_cell,
    snapshot_steps,
    train_settings,
    training_definitions,
)
from morl.coverage import front_model_steps
from morl.data import file_identity
from morl.families import wildcard_pattern
from morl.shipped import shipped_policy_path
from morl.vocabulary import COMPLETE, VARIANT_WILDCARD, WILDCARDS, coverage_suffix

# Every output lies under the config's results_dir; the patterns below are relative to it.
R = config["results_dir"]


wildcard_constraints:
    env=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    quality=WILDCARDS["quality"],
    entropy=WILDCARDS["entropy"],
    model=wildcard_pattern(),
    seed=r"\d+",
    step=r"\d+",
    episodes=r"\d+",
    # the complete data has no suffix, so runs on it keep their paths; variants: -shattered, -narrow
    coverage=WILDCARDS["coverage"],


BEHAVIOR = os.path.join(R, "{env}/behavior/policy.pt")
BEHAVIOR_FRONT = os.path.join(R, "{env}/behavior/front.parquet")
DATASET = os.path.join(R, "{env}/data/{quality}-{entropy}.parquet")
# A dataset's card (morl dataset-info): its data HV is B of the dataset's table rows.
DATASET_CARD = os.path.join(R, "{env}/data/{quality}-{entropy}.card.md")
VARIANT = os.path.join(R, "{env}/data/{quality}-{entropy}{coverage}.parquet")
# MODULI's front model of a complete dataset with variants (its return deviation's reference)
FRONT_MODEL = os.path.join(R, "{env}/data/{quality}-{entropy}.front_model.pt")
RUN = os.path.join(R, "{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}")
CHECKPOINT = os.path.join(RUN, "model.pt")
CURVE = os.path.join(RUN, "curve.csv")
EVALUATION = os.path.join(RUN, "eval.parquet")
EVAL_SUMMARY = os.path.join(RUN, "summary.json")
# HV along training (evaluate.at_steps): the snapshots a run keeps, and their evaluations
SNAPSHOTS = os.path.join(RUN, "snapshots")
SNAPSHOT = os.path.join(SNAPSHOTS, "step{step}.pt")
ALONG = os.path.join(RUN, "along", "step{step}")
ALONG_EVALUATION = os.path.join(ALONG, "eval.parquet")
ALONG_SUMMARY = os.path.join(ALONG, "summary.json")
# The multiverse's episodes choice: a run evaluated again with more episodes per preference point
EPISODES_EVALUATION = os.path.join(RUN, "eval-episodes{episodes}.parquet")
EPISODES_SUMMARY = os.path.join(RUN, "summary-episodes{episodes}.json")
AT_STEPS = bool(config["evaluate"].get("at_steps"))
TABLES = os.path.join(R, "tables")
# Each env's finished results that the tables need, to be committed (rules/slices.smk).
SLICES = config.get("slices_dir") or os.path.join(R, "slices")
PARTIAL_TABLES = os.path.join(R, "tables_partial")
LOGS = os.path.join(R, "logs")
BENCH = os.path.join(R, "benchmarks")


IMPORTED = imported_datasets(config)


def imported_identities():
    """Each imported dataset file with its size, times and inode (morl.data.file_identity). A param
    of the table rules: a file replaced by a copy that keeps an older mtime (cp -p, rsync -a, an
    archive) is not newer than the results made from it, so Snakemake would rebuild nothing; the
    changed param reruns `aggregate`, which refuses evaluations made from other bytes than the
    file's now (morl.evaluation_checks.check_datasets_unchanged) and says how to rebuild them."""
    return {path: file_identity(path) for path in IMPORTED.values()}


def behavior_policy(wildcards):
    """The env's behavior policy: the shipped file under behavior.shipped (true: the current one; a
    SHA-256: the shipped or retired file with that hash), else the one the behavior rule trains."""
    which = behavior_settings(config, wildcards.env)["shipped"]
    if which:
        return str(shipped_policy_path(wildcards.env, which=which))
    return BEHAVIOR.format(env=wildcards.env)


def dataset_file(env, quality, entropy):
    """The dataset of a cell: an imported file if the config names one, else the collected file."""
    return IMPORTED.get((env, quality, entropy)) or DATASET.format(env=env, quality=quality, entropy=entropy)


def dataset_for(wildcards):
    """The training dataset of a run: the cell's dataset, or its coverage variant."""
    if wildcards.coverage:
        return VARIANT.format(**wildcards)
    return dataset_file(wildcards.env, wildcards.quality, wildcards.entropy)


def coverage_source_for(wildcards):
    """The complete dataset a coverage variant was derived from (nothing for the complete data)."""
    return [dataset_file(wildcards.env, wildcards.quality, wildcards.entropy)] if wildcards.coverage else []


def coverage_suffixes():
    """The config's coverages as the suffixes of run folders and dataset files ("" for complete)."""
    return [coverage_suffix(c) for c in config.get("coverages", [COMPLETE])]


def reference_for(wildcards):
    """The env's expert-high dataset when the model's statistics come from it, else nothing."""
    cell = reference_cell(config, wildcards.env, wildcards.model)
    return [dataset_file(*cell)] if cell else []


def datasets():
    """The table rows: (env, quality, entropy), the entropy of a coverage variant labelled e.g. high-shattered."""
    return [
        (e, q, h + c)
        for e in config["envs"]
        for q in config["qualities"]
        for h in config["entropies"]
        for c in coverage_suffixes()
    ]


def all_evaluations():
    return expand(
        EVALUATION,
        env=config["envs"],
        quality=config["qualities"],
        entropy=config["entropies"],
        coverage=coverage_suffixes(),
        model=config["models"],
        seed=config["seeds"],
    )


def all_along_evaluations():
    """Every snapshot's evaluation (evaluate.at_steps), and the final evaluation of each run that
    keeps snapshots: the last point of its curve of HV along training."""
    out = []
    for env in config["envs"]:
        for model in config["models"]:
            steps = snapshot_steps(config, env, model)
            for quality in config["qualities"]:
                for entropy in config["entropies"]:
                    for coverage in coverage_suffixes():
                        for seed in config["seeds"]:
                            wc = dict(
                                env=env, quality=quality, entropy=entropy, coverage=coverage, model=model, seed=seed
                            )
                            out += [ALONG_EVALUATION.format(**wc, step=s) for s in steps]
                            out.append(EVALUATION.format(**wc))
    return out if AT_STEPS else []


def all_episode_evaluations():
    """Every run on the complete data evaluated again with each episode count of
    multiverse.episodes other than 1 (none when the config asks for no other)."""
    counts = [n for n in (config.get("multiverse") or {}).get("episodes", [1]) if n != 1]
    return expand(
        EPISODES_EVALUATION,
        env=config["envs"],
        quality=config["qualities"],
        entropy=config["entropies"],
        coverage=[""],
        model=config["models"],
        seed=config["seeds"],
        episodes=counts,
    )


def all_front_models():
    """The front model of every complete dataset, when the config has coverage variants (else none)."""
    if not any(coverage_suffixes()):
        return []
    return expand(FRONT_MODEL, env=config["envs"], quality=config["qualities"], entropy=config["entropies"])


def all_behavior_fronts():
    return expand(BEHAVIOR_FRONT, env=config["envs"])


def complete_datasets():
    """(env, quality, entropy) of every complete dataset, in the order of all_data_cards()."""
    return [(e, q, h) for e in config["envs"] for q in config["qualities"] for h in config["entropies"]]


def all_data_cards():
    """The card of every complete dataset (a coverage variant's rows take its complete dataset's B)."""
    return expand(DATASET_CARD, env=config["envs"], quality=config["qualities"], entropy=config["entropies"])


def all_curves():
    """The training curve of every run, in the order of all_evaluations()."""
    return expand(
        CURVE,
        env=config["envs"],
        quality=config["qualities"],
        entropy=config["entropies"],
        coverage=coverage_suffixes(),
        model=config["models"],
        seed=config["seeds"],
    )


def of_env(paths, env):
    """The paths of ``paths`` that lie in ``env``'s results folder."""
    return [p for p in paths if p.startswith(os.path.join(R, env, ""))]


def runs_on_disk(wildcards=None):
    """(evaluation, curve or None) of every configured run whose evaluation file exists now."""
    return [(e, c if os.path.exists(c) else None) for e, c in zip(all_evaluations(), all_curves()) if os.path.exists(e)]


# Outputs of the table rules (rules/aggregate.smk). `report(...)` marks what
# `snakemake --report results/report.html` shows; captions live in report/.
PLOT_KINDS = {
    # kind: (report category, caption, file-name pattern inside plots/<kind>/)
    "pareto": ("Pareto fronts", "pareto.rst", "{env}_{quality}-{entropy}.png"),
    "preference": ("Target vs achieved preference", "preference.rst", "{env}_{quality}-{entropy}.png"),
    "hv": ("HV by dataset", "hv_bars.rst", "{env}.png"),
    "curves": ("Training curves", "curves.rst", "{env}_{quality}-{entropy}.png"),
    "statistics": ("Interval statistics", "statistics.rst", "{figure}.png"),
}


def plot_outputs(tables_dir, with_report):
    out = {}
    for kind, (category, caption, pattern) in PLOT_KINDS.items():
        path = directory(f"{tables_dir}/plots/{kind}")
        if with_report:
            labels = {"env": "{env}"} if kind == "hv" else {"env": "{env}", "dataset": "{quality}-{entropy}"}
            labels = {"figure": "{figure}"} if kind == "statistics" else labels
            path = report(path, patterns=[pattern], category=category, caption=f"../report/{caption}", labels=labels)
        out[f"plots_{kind}"] = path
    return out


# key: (file name, caption); the tables come as Markdown, CSV and LaTeX.
TABLE_FILES = {
    "summary": ("summary.html", "summary.rst"),
    "results": ("results.md", "results_md.rst"),
    "metrics": ("metrics.csv", "metrics.rst"),
    "baselines": ("baselines.csv", "baselines.rst"),
}
for _name, _caption in [
    ("hv", "hv_table.rst"),
    ("sp", "sp_table.rst"),
    ("paper_comparison", "comparison_table.rst"),
    ("intervals", "intervals_table.rst"),
    ("iqm", "statistics.rst"),
    ("improvement", "statistics.rst"),
]:
    TABLE_FILES.update({f"{_name}_{ext}": (f"{_name}.{ext}", _caption) for ext in ("md", "csv", "tex")})
# Written only when the config has coverage variants (the aggregate writes them for variant rows).
VARIANT_TABLE_FILES = {
    f"{_name}_{ext}": (f"{_name}.{ext}", "generalisation.rst")
    for _name in ("generalisation", "generalisation_iqm")
    for ext in ("md", "csv", "tex")
}


def table_outputs(tables_dir, with_report):
    out = {}
    files = dict(TABLE_FILES)
    if any(suffix for suffix in coverage_suffixes()):
        files.update(VARIANT_TABLE_FILES)
    for key, (name, caption) in files.items():
        out[key] = f"{tables_dir}/{name}"
        if with_report:
            sub = "All tables and key figures" if key == "summary" else "Markdown, CSV, LaTeX"
            out[key] = report(out[key], category="Tables", subcategory=sub, caption=f"../report/{caption}")
    return out


# The multiverse analysis (rules/multiverse.smk): where it writes, and what it reads of each slice.
MULTIVERSE = os.path.join(os.path.dirname(os.path.normpath(SLICES)), "multiverse")
DEFINITIONS_SLICES = (config.get("multiverse") or {}).get("definitions_slices")


def slice_inputs(folder):
    """The files the multiverse reads of each slice in `folder` (the layout of morl/slices.py: final
    evaluations, behavior front, dataset cards); while the config's own slices folder holds none,
    its slices, which the slice rule exports first."""
    slices = sorted(p.parent for p in Path(folder).glob("*/SLICE.json"))
    if not slices:
        return expand(os.path.join(SLICES, "{env}"), env=config["envs"]) if folder == SLICES else []
    patterns = (
        "*/*/seed*/eval.parquet",
        "*/*/seed*/eval-episodes*.parquet",
        "behavior/front.parquet",
        "data/*.card.md",
    )
    return [str(f) for s in slices for pattern in patterns for f in sorted(s.glob(pattern))]
