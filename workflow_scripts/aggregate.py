"""Rule `aggregate`: tables and Pareto plots from every evaluation."""
from pathlib import Path

from morl.aggregate import aggregate
from morl.progress import log_to

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    Path(sm.output.plots).mkdir(parents=True, exist_ok=True)
    aggregate(sm.input.evaluations, sm.input.fronts, Path(sm.output.results).parent,
              datasets=[tuple(d) for d in sm.params.datasets])
