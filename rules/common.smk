# Paths, wildcard constraints and target lists. No science here.
from morl.config import behavior_settings, imported_datasets, reference_cell, train_settings, training_definitions

R = config["results_dir"]

wildcard_constraints:
    env=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    quality=r"expert|amateur",
    entropy=r"high|medium|low",
    model=r"bc-p|bc|rvs-p|rvs|dt-p|dt",
    seed=r"\d+",

BEHAVIOR = R + "/{env}/behavior/policy.pt"
BEHAVIOR_FRONT = R + "/{env}/behavior/front.parquet"
DATASET = R + "/{env}/data/{quality}-{entropy}.parquet"
RUN = R + "/{env}/{quality}-{entropy}/{model}/seed{seed}"
CHECKPOINT = RUN + "/model.pt"
CURVE = RUN + "/curve.csv"
EVALUATION = RUN + "/eval.parquet"
EVAL_SUMMARY = RUN + "/summary.json"
TABLES = R + "/tables"
LOGS = R + "/logs"
BENCH = R + "/benchmarks"


IMPORTED = imported_datasets(config)


def dataset_file(env, quality, entropy):
    """The dataset of a cell: an imported file if the config names one, else the collected file."""
    return IMPORTED.get((env, quality, entropy)) or DATASET.format(env=env, quality=quality, entropy=entropy)


def dataset_for(wildcards):
    """The training dataset of a cell."""
    return dataset_file(wildcards.env, wildcards.quality, wildcards.entropy)


def reference_for(wildcards):
    """The env's expert-high dataset when the model's statistics come from it, else nothing."""
    cell = reference_cell(config, wildcards.env, wildcards.model)
    return [dataset_file(*cell)] if cell else []


def datasets():
    return [(e, q, h) for e in config["envs"] for q in config["qualities"] for h in config["entropies"]]


def all_evaluations():
    return expand(EVALUATION, env=config["envs"], quality=config["qualities"], entropy=config["entropies"],
                  model=config["models"], seed=config["seeds"])


def all_behavior_fronts():
    return expand(BEHAVIOR_FRONT, env=config["envs"])
