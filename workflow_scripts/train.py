"""Rule `train`: one model on one dataset with one seed, by its family's trainer."""

import os

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)
import torch

from morl.errors import run_stage
from morl.families import train
from morl.progress import log_to


def main(sm) -> None:
    torch.set_num_threads(sm.threads)
    keep = {}
    if "snapshots" in sm.output.keys():  # evaluate.at_steps: the folder exists even if it stays empty
        os.makedirs(sm.output.snapshots, exist_ok=True)
        keep = {step: os.path.join(sm.output.snapshots, f"step{step}.pt") for step in sm.params.keep}
    with log_to(sm.log[0]):
        train(
            sm.input.dataset,
            sm.wildcards.model,
            int(sm.wildcards.seed),
            sm.params.settings,
            sm.output.checkpoint,
            curve_path=sm.output.curve,
            expect_env=sm.wildcards.env,
            reference_dataset=next(iter(sm.input.reference), None),
            keep=keep,
        )


# Guarded: worker processes (BatchedEnv, started with "spawn") import this file as __mp_main__,
# where there is no `snakemake` object and nothing must run.
if __name__ == "__main__":
    run_stage("train", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
