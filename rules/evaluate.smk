rule evaluate:
    """Roll out one trained model on every point of the preference grid."""
    input:
        checkpoint=CHECKPOINT,
        dataset=dataset_for,
        reference=reference_for,
        coverage_source=coverage_source_for,
    output:
        evaluation=EVALUATION,
        summary=EVAL_SUMMARY,
    log:
        os.path.join(LOGS, "evaluate/{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}.log"),
    benchmark:
        os.path.join(BENCH, "evaluate/{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}.tsv")
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        settings=config["evaluate"],
        definitions=lambda wc: training_definitions(config, wc.env, wc.model),
    script:
        "../workflow_scripts/evaluate.py"
