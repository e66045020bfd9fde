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


# The multiverse's episodes choice: the same job with another number of episodes per point.
use rule evaluate as evaluate_episodes with:
    output:
        evaluation=EPISODES_EVALUATION,
        summary=EPISODES_SUMMARY,
    log:
        os.path.join(LOGS, "evaluate/{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}.episodes{episodes}.log"),
    benchmark:
        os.path.join(BENCH, "evaluate/{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}.episodes{episodes}.tsv")
    params:
        settings=lambda wc: {**config["evaluate"], "episodes": int(wc.episodes)},
        definitions=lambda wc: training_definitions(config, wc.env, wc.model),


rule evaluate_along:
    """Roll out the snapshot a run kept at one step of its training (evaluate.at_steps) on the grid."""
    input:
        snapshots=SNAPSHOTS,
        dataset=dataset_for,
        reference=reference_for,
        coverage_source=coverage_source_for,
    output:
        evaluation=ALONG_EVALUATION,
        summary=ALONG_SUMMARY,
    log:
        os.path.join(LOGS, "evaluate/{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}.step{step}.log"),
    benchmark:
        os.path.join(BENCH, "evaluate/{env}/{quality}-{entropy}{coverage}/{model}/seed{seed}.step{step}.tsv")
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        settings=config["evaluate"],
        definitions=lambda wc: training_definitions(config, wc.env, wc.model),
        checkpoint=lambda wc: SNAPSHOT.format(**wc),
    script:
        "../workflow_scripts/evaluate.py"
