rule train:
    """Train one PEDA model on one dataset with one seed (resumes from its partial checkpoint)."""
    input:
        dataset=dataset_for,
        reference=reference_for,
    output:
        checkpoint=CHECKPOINT,
        curve=CURVE,
    log:
        os.path.join(LOGS, "train/{env}/{quality}-{entropy}/{model}/seed{seed}.log"),
    benchmark:
        os.path.join(BENCH, "train/{env}/{quality}-{entropy}/{model}/seed{seed}.tsv")
    conda:
        "../envs/morl.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        settings=lambda wc: train_settings(config, wc.env, wc.model),
    script:
        "../workflow_scripts/train.py"
