"""Rule `behavior_front`: the behavior policy and trivial baselines on the preference grid."""
from morl.evaluate import evaluate_behavior
from morl.progress import log_to

sm = snakemake  # noqa: F821 (injected by Snakemake)
s = sm.params.settings
with log_to(sm.log[0]):
    evaluate_behavior(sm.input.policy, sm.output.front, s["divisions"], s["episodes"], s["seed"],
                      workers=sm.threads)
