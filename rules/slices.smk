# Slices: one env's finished results, small enough to commit, and the tables merged from them
# (morl.slices; README, "Splitting a grid into slices").
import os


rule slice:
    """Copy what the tables need of one env's runs (evaluations, curves, behavior front, front
    models, dataset cards) into the slices folder, with where and how the slice was made."""
    input:
        evaluations=lambda wc: of_env(all_evaluations(), wc.env),
        curves=lambda wc: of_env(all_curves(), wc.env),
        front=BEHAVIOR_FRONT,
        datasets=lambda wc: [dataset_file(wc.env, q, h) for q in config["qualities"] for h in config["entropies"]],
        front_models=lambda wc: of_env(all_front_models(), wc.env),
        # evaluate.at_steps: the evaluations of the snapshots kept along training
        along=lambda wc: [e for e in of_env(all_along_evaluations(), wc.env) if "/along/" in e],
        # multiverse.episodes: the runs evaluated again with more episodes per point
        episodes=lambda wc: of_env(all_episode_evaluations(), wc.env),
    output:
        # update(): Snakemake deletes a job's folder before the job runs, and again when the job
        # fails; flagged so, it leaves the folder to the script, which replaces it only when it is
        # a slice this tool wrote (morl.slices.check_replaceable), and restores it on a failure.
        update(directory(os.path.join(SLICES, "{env}"))),
    log:
        os.path.join(LOGS, "slice/{env}.log"),
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        # the results folder: the behavior front lies at <results>/<env>/behavior/front.parquet
        results=lambda wc, input: os.path.dirname(os.path.dirname(os.path.dirname(input.front))),
        bench=BENCH,
        configfile=workflow.configfiles[0] if workflow.configfiles else None,
    script:
        "../workflow_scripts/slice.py"


rule slices:
    """Every env's slice: `snakemake slices` after (part of) a grid has run."""
    input:
        expand(os.path.join(SLICES, "{env}"), env=config["envs"]),
