# Offline multi-objective RL pipeline (D4MORL datasets, PEDA agents, Pareto evaluation).
#
#   behavior (per env) -> collect (env x quality x entropy) -> train (dataset x model x seed)
#     -> evaluate (model x preference grid) -> aggregate (tables, Pareto plots)
#
# Run:  snakemake --cores 2                        (default config.yaml)
#       snakemake --cores 2 --configfile configs/paper.yaml

# `morl` comes from this checkout: Snakemake puts the Snakefile's folder on sys.path, and
# workflow_scripts/morl_checkout.py puts it there for the jobs.
from morl.config import validate_config


configfile: "config.yaml"


# `snakemake --report results/report.html`: one self-contained page; its front page is this file.
report: "report/workflow.rst"


# Fail before any job runs if the config is wrong; the message names the key.
validate_config(config, source=", ".join(map(str, workflow.configfiles)) or "config")


include: "rules/common.smk"
include: "rules/behavior.smk"
include: "rules/collect.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/aggregate.smk"


rule all:
    default_target: True
    input:
        rules.aggregate.output,
