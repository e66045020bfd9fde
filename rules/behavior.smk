rule behavior:
    """Train the preference-conditioned behavior policy of one environment."""
    output:
        policy=BEHAVIOR,
    log:
        LOGS + "/behavior/{env}.log",
    benchmark:
        BENCH + "/behavior/{env}.tsv"
    # Small networks: one torch thread is faster than two (measured: ~276 vs ~170 env-steps/s).
    threads: 1
    resources:
        mem_mb=4000,
    params:
        settings=lambda wc: behavior_settings(config, wc.env),
    conda:
        "../envs/morl.yaml"
    script:
        "../workflow_scripts/behavior.py"


rule behavior_front:
    """Evaluate the behavior policy (and the zero/random-action baselines) on the preference grid."""
    input:
        policy=BEHAVIOR,
    output:
        front=BEHAVIOR_FRONT,
    log:
        LOGS + "/behavior_front/{env}.log",
    benchmark:
        BENCH + "/behavior_front/{env}.tsv"
    threads: 1
    params:
        settings=config["evaluate"],
    conda:
        "../envs/morl.yaml"
    script:
        "../workflow_scripts/behavior_front.py"
