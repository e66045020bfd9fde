"""Rule `behavior_front`: the behavior policy and trivial baselines on the preference grid."""

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.errors import run_stage
from morl.evaluate import evaluate_behavior
from morl.progress import log_to


def main(sm) -> None:
    s = sm.params.settings
    with log_to(sm.log[0]):
        evaluate_behavior(
            sm.input.policy,
            sm.output.front,
            s["divisions"],
            s["episodes"],
            s["seed"],
            workers=sm.threads,
            expect_env=sm.wildcards.env,
        )


# Guarded: worker processes (BatchedEnv, started with "spawn") import this file as __mp_main__,
# where there is no `snakemake` object and nothing must run.
if __name__ == "__main__":
    run_stage("behavior_front", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
