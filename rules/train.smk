rule train:
    """Train one model on one dataset with one seed, by its family's trainer (resumes from its partial state)."""
    input:
        dataset=dataset_for,
        reference=reference_for,
    output:
        checkpoint=CHECKPOINT,
        curve=CURVE,
    log:
        os.path.join(LOGS, "train/{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}.log"),
    benchmark:
        os.path.join(BENCH, "train/{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}.tsv")
    conda:
        "../envs/morl.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        settings=lambda wc: train_settings(config, wc.env, wc.model),
    script:
        "../workflow_scripts/train.py"
