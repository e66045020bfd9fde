"""Rule `slice`: one env's finished results that the tables need, exported to the slices folder."""

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.errors import run_stage
from morl.progress import log_to
from morl.slices import export_slice


def main(sm) -> None:
    with log_to(sm.log[0]):
        export_slice(
            sm.wildcards.env,
            sm.params.results,
            sm.output[0],
            sm.input.evaluations,
            sm.input.curves,
            sm.input.front,
            sm.input.datasets,
            front_models=sm.input.front_models,
            bench_dir=sm.params.bench,
            config_file=sm.params.configfile,
            along=sm.input.along,
            episodes=sm.input.episodes,
        )


# Guarded like the other scripts: nothing runs when a worker process imports this file.
if __name__ == "__main__":
    run_stage("slice", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
