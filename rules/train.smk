rule train:
    """Train one model on one dataset with one seed, by its family's trainer (resumes from its partial state).
    Under evaluate.at_steps it also keeps the model at each of those steps (snapshots/step<N>.pt)."""
    input:
        dataset=dataset_for,
        reference=reference_for,
    output:
        **({"snapshots": directory(SNAPSHOTS)} if AT_STEPS else {}),
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
        keep=lambda wc: snapshot_steps(config, wc.env, wc.model) if AT_STEPS else [],
    script:
        "../workflow_scripts/train.py"
