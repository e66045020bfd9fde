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


rule dataset_card:
    """Describe one dataset in numbers (morl dataset-info): its card holds the data's own front,
    B of the dataset's table rows (the denominator of HV / B)."""
    input:
        dataset=lambda wc: dataset_file(wc.env, wc.quality, wc.entropy),
        front=BEHAVIOR_FRONT,
    output:
        card=DATASET_CARD,
    log:
        os.path.join(LOGS, "dataset_card/{env}/{quality}-{entropy}.log"),
    conda:
        "../envs/morl.yaml"
    threads: 1
    script:
        "../workflow_scripts/dataset_card.py"
