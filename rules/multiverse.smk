# The multiverse analysis of the paper comparison (morl/multiverse.py): every combination of the
# config's analysis choices (its `multiverse` section), computed from the committed slices, and
# written next to them: <slices_dir>/../multiverse (docs/paper-cpu-small/multiverse for
# configs/paper-cpu-small.yaml).
import os


rule multiverse:
    """Which of the paper's findings hold in which universe of analysis choices: universes.csv,
    findings.csv, the specification curves and a README with the reading."""
    input:
        slices=slice_inputs(SLICES),
        definitions=slice_inputs(DEFINITIONS_SLICES) if DEFINITIONS_SLICES else [],
    output:
        universes=os.path.join(MULTIVERSE, "universes.csv"),
        findings=os.path.join(MULTIVERSE, "findings.csv"),
        readme=os.path.join(MULTIVERSE, "README.md"),
        curves=expand(
            os.path.join(MULTIVERSE, "specification-{statistic}.{ext}"),
            statistic=["morvs_close", "tau_mean"],
            ext=["png", "pdf"],
        ),
    log:
        os.path.join(LOGS, "multiverse.log"),
    conda:
        "../envs/morl.yaml"
    threads: 1
    params:
        slices=lambda wc: SLICES,
    script:
        "../workflow_scripts/multiverse.py"
