rule aggregate:
    """HV/SP tables (Markdown, CSV) and one Pareto plot per env x dataset."""
    input:
        evaluations=all_evaluations(),
        fronts=all_behavior_fronts(),
    output:
        results=TABLES + "/results.md",
        metrics=TABLES + "/metrics.csv",
        plots=directory(TABLES + "/plots"),
    log:
        LOGS + "/aggregate.log",
    benchmark:
        BENCH + "/aggregate.tsv"
    threads: 1
    params:
        datasets=datasets(),
    conda:
        "../envs/morl.yaml"
    script:
        "../workflow_scripts/aggregate.py"
