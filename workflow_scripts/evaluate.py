"""Rule `evaluate`: one trained model on the preference grid."""
import torch

from morl.evaluate import evaluate_checkpoint
from morl.progress import log_to

sm = snakemake  # noqa: F821 (injected by Snakemake)
s = sm.params.settings
torch.set_num_threads(sm.threads)
with log_to(sm.log[0]):
    evaluate_checkpoint(sm.input.checkpoint, sm.input.dataset, sm.output.evaluation, s["divisions"],
                        s["episodes"], s["seed"], expect_env=sm.wildcards.env, summary_path=sm.output.summary)
