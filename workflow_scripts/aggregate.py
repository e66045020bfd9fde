"""Rules `aggregate` and `partial_tables`: tables and plots from the evaluations given."""

from pathlib import Path

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.aggregate import aggregate
from morl.errors import run_stage
from morl.progress import log_to


def main(sm) -> None:
    # A run's curve.csv lies beside its eval.parquet (RUN in rules/common.smk).
    curve_of_run = {Path(c).parent: c for c in sm.input.curves}
    curves = {e: curve_of_run[Path(e).parent] for e in sm.input.evaluations if Path(e).parent in curve_of_run}
    with log_to(sm.log[0]):
        aggregate(
            sm.input.evaluations,
            sm.input.fronts,
            Path(sm.output.results).parent,
            datasets=[tuple(d) for d in sm.params.datasets],
            models=sm.params.models,
            seeds=sm.params.seeds,
            curves=curves,
            front_models=sm.input.front_models,
            data_cards=sm.input.data_cards,
            datasets_in_use=list(sm.params.imported_datasets),
        )


# Guarded like the other scripts: nothing runs when a worker process imports this file.
if __name__ == "__main__":
    run_stage("aggregate", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
