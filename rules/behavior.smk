rule behavior:
    """Train the behavior policy of one environment (behavior.method: a PGMORL population or one TD3 actor)."""
    output:
        policy=BEHAVIOR,
    log:
        os.path.join(LOGS, "behavior/{env}.log"),
    benchmark:
        os.path.join(BENCH, "behavior/{env}.tsv")
    conda:
        "../envs/morl.yaml"
    # Small networks: one torch thread is faster than two (measured: ~276 vs ~170 env-steps/s).
    threads: 1
    resources:
        mem_mb=4000,
    params:
        # the method and its settings (`shipped` decides whether this rule runs at all)
        settings=lambda wc: {k: v for k, v in behavior_settings(config, wc.env).items() if k != "shipped"},
    script:
        "../workflow_scripts/behavior.py"


rule behavior_front:
    """Evaluate the behavior policy (and the zero/random-action baselines) on the preference grid."""
    input:
        policy=behavior_policy,
    output:
        front=BEHAVIOR_FRONT,
    log:
        os.path.join(LOGS, "behavior_front/{env}.log"),
    benchmark:
        os.path.join(BENCH, "behavior_front/{env}.tsv")
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        settings=config["evaluate"],
    script:
        "../workflow_scripts/behavior_front.py"
