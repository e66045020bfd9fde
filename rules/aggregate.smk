# Tables, plots and the report's contents from the evaluations. `report(...)` marks what
# `snakemake --report results/report.html` shows; captions live in report/.
import os

PARTIAL_TABLES = R + "/tables_partial"
PLOT_KINDS = {
    # kind: (report category, caption, file-name pattern inside plots/<kind>/)
    "pareto": ("Pareto fronts", "pareto.rst", "{env}_{quality}-{entropy}.png"),
    "preference": ("Target vs achieved preference", "preference.rst", "{env}_{quality}-{entropy}.png"),
    "hv": ("HV by dataset", "hv_bars.rst", "{env}.png"),
    "curves": ("Training curves", "curves.rst", "{env}_{quality}-{entropy}.png"),
}


def all_curves():
    """The training curve of every run, in the order of all_evaluations()."""
    return expand(CURVE, env=config["envs"], quality=config["qualities"], entropy=config["entropies"],
                  model=config["models"], seed=config["seeds"])


def runs_on_disk(wildcards=None):
    """(evaluation, curve or None) of every configured run whose evaluation file exists now."""
    return [(e, c if os.path.exists(c) else None) for e, c in zip(all_evaluations(), all_curves())
            if os.path.exists(e)]


def plot_outputs(tables_dir, with_report):
    out = {}
    for kind, (category, caption, pattern) in PLOT_KINDS.items():
        path = directory(f"{tables_dir}/plots/{kind}")
        if with_report:
            labels = {"env": "{env}"} if kind == "hv" else {"env": "{env}", "dataset": "{quality}-{entropy}"}
            path = report(path, patterns=[pattern], category=category, caption=f"../report/{caption}", labels=labels)
        out[f"plots_{kind}"] = path
    return out


# key: (file name, caption); the tables come as Markdown, CSV and LaTeX.
TABLE_FILES = {"summary": ("summary.html", "summary.rst"), "results": ("results.md", "results_md.rst"),
               "metrics": ("metrics.csv", "metrics.rst"), "baselines": ("baselines.csv", "baselines.rst")}
for _name, _caption in [("hv", "hv_table.rst"), ("sp", "sp_table.rst"), ("paper_comparison", "comparison_table.rst")]:
    TABLE_FILES.update({f"{_name}_{ext}": (f"{_name}.{ext}", _caption) for ext in ("md", "csv", "tex")})


def table_outputs(tables_dir, with_report):
    out = {}
    for key, (name, caption) in TABLE_FILES.items():
        out[key] = f"{tables_dir}/{name}"
        if with_report:
            sub = "All tables and key figures" if key == "summary" else "Markdown, CSV, LaTeX"
            out[key] = report(out[key], category="Tables", subcategory=sub, caption=f"../report/{caption}")
    return out


rule aggregate:
    """HV/SP tables and the paper comparison (Markdown, CSV, LaTeX, HTML), and every plot."""
    input:
        evaluations=all_evaluations(),
        fronts=all_behavior_fronts(),
        curves=all_curves(),
    output:
        **table_outputs(TABLES, with_report=True),
        **plot_outputs(TABLES, with_report=True),
    log:
        LOGS + "/aggregate.log",
    benchmark:
        BENCH + "/aggregate.tsv"
    threads: 1
    params:
        datasets=datasets(),
        models=config["models"],
        seeds=config["seeds"],
    conda:
        "../envs/morl.yaml"
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
    output:
        **table_outputs(PARTIAL_TABLES, with_report=False),
        **plot_outputs(PARTIAL_TABLES, with_report=False),
    log:
        LOGS + "/partial_tables.log",
    threads: 1
    params:
        datasets=datasets(),
        models=config["models"],
        seeds=config["seeds"],
    conda:
        "../envs/morl.yaml"
    script:
        "../workflow_scripts/aggregate.py"
