# Tables, plots and the report's contents from the evaluations. Their outputs (table_outputs,
# plot_outputs) and the report's categories and captions are set in rules/common.smk.
import os


rule aggregate:
    """HV/SP tables and the paper comparison (Markdown, CSV, LaTeX, HTML), and every plot."""
    input:
        evaluations=all_evaluations(),
        fronts=all_behavior_fronts(),
        curves=all_curves(),
        front_models=all_front_models(),
        data_cards=all_data_cards(),
    output:
        **table_outputs(TABLES, with_report=True),
        **plot_outputs(TABLES, with_report=True),
    log:
        os.path.join(LOGS, "aggregate.log"),
    benchmark:
        os.path.join(BENCH, "aggregate.tsv")
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        datasets=datasets(),
        models=config["models"],
        seeds=config["seeds"],
        imported_datasets=imported_identities(),
    script:
        "../workflow_scripts/aggregate.py"


rule partial_tables:
    """The same tables and plots from whichever evaluations exist now, without running anything
    else: `snakemake partial_tables` (add --nolock while another snakemake runs here). Cells not
    evaluated yet show "—". Written to tables_partial/, never over the complete tables."""
    input:
        evaluations=lambda wc: [e for e, _ in runs_on_disk()],
        fronts=lambda wc: [f for f in all_behavior_fronts() if os.path.exists(f)],
        curves=lambda wc: [c for _, c in runs_on_disk() if c],
        front_models=lambda wc: [m for m in all_front_models() if os.path.exists(m)],
        # a card is made from its dataset in seconds: those of the datasets on disk now
        data_cards=lambda wc: [
            c for c, (e, q, h) in zip(all_data_cards(), complete_datasets()) if os.path.exists(dataset_file(e, q, h))
        ],
    output:
        **table_outputs(PARTIAL_TABLES, with_report=False),
        **plot_outputs(PARTIAL_TABLES, with_report=False),
    log:
        os.path.join(LOGS, "partial_tables.log"),
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        datasets=datasets(),
        models=config["models"],
        seeds=config["seeds"],
        imported_datasets=imported_identities(),
    script:
        "../workflow_scripts/aggregate.py"


rule convergence:
    """HV along training (evaluate.at_steps): convergence.csv, its readable convergence.md and one plot per dataset row."""
    input:
        evaluations=all_along_evaluations(),
        data_cards=all_data_cards(),
    output:
        table=os.path.join(TABLES, "convergence.csv"),
        summary=os.path.join(TABLES, "convergence.md"),
        plots=expand(
            os.path.join(TABLES, "plots", "convergence", "{row}.{ext}"),
            row=[f"{e}_{q}-{h}" for e, q, h in datasets()],
            ext=["png", "pdf"],
        ),
    log:
        os.path.join(LOGS, "convergence.log"),
    conda:
        "../envs/morl.yaml"
    threads: 1
    script:
        "../workflow_scripts/convergence.py"
