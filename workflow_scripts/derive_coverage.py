"""Rule `derive_coverage`: the shattered or narrow coverage variant of one dataset."""

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.coverage import derive_file
from morl.errors import run_stage
from morl.progress import log, log_to
from morl.vocabulary import coverage_of_suffix


def main(sm) -> None:
    coverage = coverage_of_suffix(sm.wildcards.coverage)
    with log_to(sm.log[0]):
        record = derive_file(sm.input.source, coverage, sm.params.settings, sm.output.dataset)
        log.info("%s: %s variant of %s: kept %d of %d trajectories, removed w_1 bands %s", sm.output.dataset, coverage,
                 sm.input.source, record["kept_trajectories"], record["source_trajectories"], record["bands"])  # fmt: skip


if __name__ == "__main__":
    run_stage("derive_coverage", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
