"""Puts this checkout's folder first on sys.path, so that the rule scripts import its `morl`.

Snakemake adds a script's own folder (this one) to sys.path, and every script here imports this
module before `morl`. That works in the Python that runs Snakemake and in conda environments built
from envs/morl.yaml, which do not install `morl`. (PYTHONPATH cannot carry the path into those:
Snakemake clears it for jobs in conda environments.) Worker processes started with "spawn" inherit
sys.path.
"""

import sys
from pathlib import Path

# First even when the folder is on sys.path already: newer Snakemake versions append it, after
# site-packages, where an installed `morl` would come before it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
