rule train:
    """Train one PEDA model on one dataset with one seed (resumes from its partial checkpoint)."""
    input:
        dataset=dataset_for,
        reference=reference_for,
    output:
        checkpoint=CHECKPOINT,
        curve=CURVE,
    log:
        LOGS + "/train/{env}/{quality}-{entropy}/{model}/seed{seed}.log",
    benchmark:
        BENCH + "/train/{env}/{quality}-{entropy}/{model}/seed{seed}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        settings=lambda wc: train_settings(config, wc.env, wc.model),
    conda:
        "../envs/morl.yaml"
    script:
        "../workflow_scripts/train.py"
