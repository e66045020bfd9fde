# Paths, wildcard constraints and target lists. No science here.
from morl.config import behavior_settings, imported_datasets, train_settings

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


def dataset_for(wildcards):
    """The training dataset of a cell: an imported file if the config names one, else the collected file."""
    cell = (wildcards.env, wildcards.quality, wildcards.entropy)
    return IMPORTED.get(cell) or DATASET.format(env=cell[0], quality=cell[1], entropy=cell[2])


def datasets():
    return [(e, q, h) for e in config["envs"] for q in config["qualities"] for h in config["entropies"]]


def all_evaluations():
    return expand(EVALUATION, env=config["envs"], quality=config["qualities"], entropy=config["entropies"],
                  model=config["models"], seed=config["seeds"])


def all_behavior_fronts():
    return expand(BEHAVIOR_FRONT, env=config["envs"])
