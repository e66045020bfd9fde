# Offline multi-objective RL pipeline (D4MORL datasets, PEDA agents, Pareto evaluation).
#
#   behavior (per env) -> collect (env x quality x entropy) -> train (dataset x model x seed)
#     -> evaluate (model x preference grid) -> aggregate (tables, Pareto plots)
#
# Run:  snakemake --cores 2                        (default config.yaml)
#       snakemake --cores 2 --configfile configs/paper.yaml

# `morl` comes from this checkout: Snakemake puts the Snakefile's folder on sys.path, and
# workflow_scripts/morl_checkout.py puts it there for the jobs.
from morl.config import workflow_config

# One config per run, validated whole before any job runs (the message names the file and the key):
# the --configfile given, else config.yaml; --config key=value overrides apply to either. There is
# no `configfile:` directive, because Snakemake would merge its file under any --configfile, and a
# config that lacks a key would silently run with config.yaml's value.
_config, _config_path = workflow_config(
    config, workflow.overwrite_configfiles, overrides=dict(workflow.config_settings.config)
)
config.clear()
config.update(_config)
if not workflow.overwrite_configfiles:
    workflow.configfiles.append(_config_path)  # as `configfile:` would: listed in the report


# `snakemake --report results/report.html`: one self-contained page; its front page is this file.
report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/behavior.smk"
include: "rules/collect.smk"
include: "rules/coverage.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/aggregate.smk"
include: "rules/slices.smk"
include: "rules/multiverse.smk"


# The files the tables are built from are targets too. Snakemake treats a missing input of a job
# whose outputs exist as a deleted intermediate and reruns nothing; listed here, a deleted
# evaluation, curve or front is rebuilt, and the tables are rebuilt after it. A file rewritten in
# place reruns `aggregate` when its bytes changed (Snakemake's mtime and checksum triggers).
rule all:
    default_target: True
    input:
        rules.aggregate.output,
        all_evaluations(),
        all_curves(),
        all_behavior_fronts(),
        all_data_cards(),
        # evaluate.at_steps: HV along training
        rules.convergence.output if AT_STEPS else [],
