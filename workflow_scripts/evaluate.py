"""Rule `evaluate`: one trained model on the preference grid."""

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.errors import run_stage
from morl.evaluate import evaluate_checkpoint
from morl.progress import log_to


def main(sm) -> None:
    s = sm.params.settings
    # Physics on `threads` cores; the policy on one torch thread, which evaluate_checkpoint sets
    # itself (morl.evaluate.EVALUATION_TORCH_THREADS), as for `morl evaluate`.
    # a snapshot kept along training is named by the rule (its folder is the input), else the model
    checkpoint = sm.params.checkpoint if "checkpoint" in sm.params.keys() else sm.input.checkpoint
    with log_to(sm.log[0]):
        evaluate_checkpoint(
            checkpoint,
            sm.input.dataset,
            sm.output.evaluation,
            s["divisions"],
            s["episodes"],
            s["seed"],
            expect_env=sm.wildcards.env,
            summary_path=sm.output.summary,
            workers=sm.threads,
            reference_dataset=next(iter(sm.input.reference), None),
            definitions=sm.params.definitions,
            coverage_source=next(iter(sm.input.coverage_source), None),
        )


# Guarded: worker processes (BatchedEnv, started with "spawn") import this file as __mp_main__,
# where there is no `snakemake` object and nothing must run.
if __name__ == "__main__":
    run_stage("evaluate", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
