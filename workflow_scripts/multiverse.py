"""Rule `multiverse`: which of the paper's findings hold under which analysis choices (morl.multiverse)."""

from pathlib import Path

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.errors import run_stage
from morl.multiverse import write_multiverse
from morl.progress import log_to


def main(sm) -> None:
    with log_to(sm.log[0]):
        write_multiverse(sm.config, sm.params.slices, Path(sm.output.universes).parent)


# Guarded like the other scripts: nothing runs when a worker process imports this file.
if __name__ == "__main__":
    run_stage("multiverse", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
