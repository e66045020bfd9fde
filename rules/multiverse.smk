# The multiverse analysis of the paper comparison (morl/multiverse.py): every combination of the
# config's analysis choices (its `multiverse` section), computed from the committed slices, and
# written next to them: <slices_dir>/../multiverse (docs/paper-cpu-small/multiverse for
# configs/paper-cpu-small.yaml).
import os
from pathlib import Path

MULTIVERSE = os.path.join(os.path.dirname(os.path.normpath(SLICES)), "multiverse")
DEFINITIONS_SLICES = (config.get("multiverse") or {}).get("definitions_slices")


def slice_inputs(folder):
    """The files the multiverse reads of each slice in `folder` (the layout of morl/slices.py: final
    evaluations, behavior front, dataset cards); while the config's own slices folder holds none,
    its slices, which the slice rule exports first."""
    slices = sorted(p.parent for p in Path(folder).glob("*/SLICE.json"))
    if not slices:
        return expand(os.path.join(SLICES, "{env}"), env=config["envs"]) if folder == SLICES else []
    patterns = ("*/*/seed*/eval.parquet", "behavior/front.parquet", "data/*.card.md")
    return [str(f) for s in slices for pattern in patterns for f in sorted(s.glob(pattern))]


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
        slices=SLICES,
    script:
        "../workflow_scripts/multiverse.py"
