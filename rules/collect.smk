rule collect:
    """Roll out the behavior policy into one Parquet dataset per (env, quality, entropy)."""
    input:
        policy=behavior_policy,
    output:
        dataset=DATASET,
    log:
        os.path.join(LOGS, "collect/{env}/{quality}-{entropy}.log"),
    benchmark:
        os.path.join(BENCH, "collect/{env}/{quality}-{entropy}.tsv")
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        settings=config["collect"],
    script:
        "../workflow_scripts/collect.py"
