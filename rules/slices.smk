# Slices: one env's finished results, small enough to commit, and the tables merged from them
# (morl.slices; README, "Splitting a grid into slices").
import os

SLICES = config.get("slices_dir") or os.path.join(R, "slices")


def env_runs(env, pattern):
    return [
        p for p in (all_evaluations() if pattern == "eval" else all_curves()) if p.startswith(os.path.join(R, env, ""))
    ]


rule slice:
    """Copy what the tables need of one env's runs (evaluations, curves, behavior front, front
    models, dataset cards) into the slices folder, with where and how the slice was made."""
    input:
        evaluations=lambda wc: env_runs(wc.env, "eval"),
        curves=lambda wc: env_runs(wc.env, "curve"),
        front=BEHAVIOR_FRONT,
        datasets=lambda wc: [dataset_file(wc.env, q, h) for q in config["qualities"] for h in config["entropies"]],
        front_models=lambda wc: [m for m in all_front_models() if m.startswith(os.path.join(R, wc.env, ""))],
    output:
        directory(os.path.join(SLICES, "{env}")),
    log:
        os.path.join(LOGS, "slice/{env}.log"),
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        results=R,
        bench=BENCH,
        configfile=workflow.configfiles[0] if workflow.configfiles else None,
    script:
        "../workflow_scripts/slice.py"


rule slices:
    """Every env's slice: `snakemake slices` after (part of) a grid has run."""
    input:
        expand(os.path.join(SLICES, "{env}"), env=config["envs"]),
