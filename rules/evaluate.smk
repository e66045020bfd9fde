rule evaluate:
    """Roll out one trained model on every point of the preference grid."""
    input:
        checkpoint=CHECKPOINT,
        dataset=dataset_for,
        reference=reference_for,
    output:
        evaluation=EVALUATION,
        summary=EVAL_SUMMARY,
    log:
        LOGS + "/evaluate/{env}/{quality}-{entropy}/{model}/seed{seed}.log",
    benchmark:
        BENCH + "/evaluate/{env}/{quality}-{entropy}/{model}/seed{seed}.tsv"
    threads: 1
    params:
        settings=config["evaluate"],
        definitions=lambda wc: training_definitions(config, wc.env, wc.model),
    conda:
        "../envs/morl.yaml"
    script:
        "../workflow_scripts/evaluate.py"
