"""Rule `collect`: one D4MORL-recipe dataset."""

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.collect import collect_dataset
from morl.errors import run_stage
from morl.progress import log_to


def main(sm) -> None:
    s = sm.params.settings
    with log_to(sm.log[0]):
        collect_dataset(
            sm.input.policy,
            sm.wildcards.quality,
            sm.wildcards.entropy,
            s["n_trajectories"],
            sm.output.dataset,
            batch_size=s["batch_size"],
            seed=s["seed"],
            workers=sm.threads,
            expect_env=sm.wildcards.env,
        )


# Guarded: worker processes (BatchedEnv, started with "spawn") import this file as __mp_main__,
# where there is no `snakemake` object and nothing must run.
if __name__ == "__main__":
    run_stage("collect", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
