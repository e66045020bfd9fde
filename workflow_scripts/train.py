"""Rule `train`: one model on one dataset with one seed."""
import torch

from morl.progress import log_to
from morl.training import train

sm = snakemake  # noqa: F821 (injected by Snakemake)
torch.set_num_threads(sm.threads)
with log_to(sm.log[0]):
    train(sm.input.dataset, sm.wildcards.model, int(sm.wildcards.seed), sm.params.settings,
          sm.output.checkpoint, curve_path=sm.output.curve, expect_env=sm.wildcards.env)
