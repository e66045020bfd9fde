"""Rule `convergence`: HV along training from the evaluations of the snapshots and final models."""

from pathlib import Path

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.convergence import write_convergence
from morl.errors import run_stage
from morl.progress import log_to


def main(sm) -> None:
    with log_to(sm.log[0]):
        write_convergence(sm.input.evaluations, sm.input.data_cards, Path(sm.output.table).parent)


# Guarded like the other scripts: nothing runs when a worker process imports this file.
if __name__ == "__main__":
    run_stage("convergence", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
