"""Rule `behavior`: train one environment's behavior policy."""

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.behavior import train_behavior
from morl.errors import run_stage
from morl.progress import log_to


def main(sm) -> None:
    with log_to(sm.log[0]):
        train_behavior(sm.wildcards.env, sm.params.settings, sm.output.policy, threads=sm.threads)


# Guarded: worker processes (BatchedEnv, started with "spawn") import this file as __mp_main__,
# where there is no `snakemake` object and nothing must run.
if __name__ == "__main__":
    run_stage("behavior", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
