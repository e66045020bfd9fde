"""Rule `behavior`: train one environment's behavior policy."""
from morl.behavior import train_behavior
from morl.progress import log_to

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    train_behavior(sm.wildcards.env, sm.params.settings, sm.output.policy, threads=sm.threads)
