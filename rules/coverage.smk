rule derive_coverage:
    """Cut preference bands out of a dataset: its shattered or narrow coverage variant (no re-collection)."""
    input:
        source=lambda wc: dataset_file(wc.env, wc.quality, wc.entropy),
    output:
        dataset=VARIANT,
    log:
        os.path.join(LOGS, "coverage/{env}/{quality}-{entropy}{coverage}.log"),
    benchmark:
        os.path.join(BENCH, "coverage/{env}/{quality}-{entropy}{coverage}.tsv")
    wildcard_constraints:
        coverage=VARIANT_WILDCARD,
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        settings=lambda wc: coverage_settings(config),
    script:
        "../workflow_scripts/derive_coverage.py"


rule front_model:
    """Fit the front model of MODULI's return deviation on a complete dataset that has coverage variants."""
    input:
        dataset=lambda wc: dataset_file(wc.env, wc.quality, wc.entropy),
    output:
        model=FRONT_MODEL,
    log:
        os.path.join(LOGS, "front_model/{env}/{quality}-{entropy}.log"),
    benchmark:
        os.path.join(BENCH, "front_model/{env}/{quality}-{entropy}.tsv")
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        steps=front_model_steps(config.get("coverage")),
    script:
        "../workflow_scripts/front_model.py"
