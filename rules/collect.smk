rule collect:
    """Roll out the behavior policy into one Parquet dataset per (env, quality, entropy)."""
    input:
        policy=BEHAVIOR,
    output:
        dataset=DATASET,
    log:
        LOGS + "/collect/{env}/{quality}-{entropy}.log",
    benchmark:
        BENCH + "/collect/{env}/{quality}-{entropy}.tsv"
    threads: 1
    params:
        settings=config["collect"],
    conda:
        "../envs/morl.yaml"
    script:
        "../workflow_scripts/collect.py"
