"""The words that name a dataset cell: its quality, its entropy and its coverage.

Everything that lists them reads them here: the config schema (:func:`morl.config.load_schema`
completes its enums from this module), the command line's choices (:mod:`morl.cli`), the
Snakemake wildcard constraints (``rules/common.smk``, ``rules/coverage.smk``), collection, the
coverage variants and the tables' row order. The behavior methods are listed by their own registry,
:data:`morl.behavior.METHODS`, as the models are by :data:`morl.families.FAMILIES`.

This module imports nothing, so the command line and the workflow read it at no cost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Dataset qualities, in table order: the behavior policy's own actions (expert) or actions perturbed
#: at random (amateur) (docs/protocol.md, Datasets).
QUALITIES: tuple[str, ...] = ("expert", "amateur")
#: Preference distributions of the datasets, in table order (D4MORL's High-H, Med-H and Low-H).
ENTROPIES: tuple[str, ...] = ("high", "medium", "low")
#: D4MORL's own names of the entropies, as the original pickles' file names spell them.
D4MORL_ENTROPIES: dict[str, str] = {"uniform": "high", "wide": "medium", "narrow": "low"}
#: Coverages of a dataset: the data as collected, and the variants with preference bands cut out
#: (:mod:`morl.coverage`).
COVERAGES: tuple[str, ...] = ("complete", "shattered", "narrow")
#: The coverage whose files and run folders have no suffix.
COMPLETE = COVERAGES[0]
#: The coverages derived from the complete data.
VARIANTS: tuple[str, ...] = COVERAGES[1:]


def coverage_suffix(coverage: str) -> str:
    """The suffix of a coverage's dataset files and run folders: ``""`` for the complete data,
    ``-shattered`` and ``-narrow`` for the variants."""
    return "" if coverage == COMPLETE else f"-{coverage}"


def coverage_of_suffix(suffix: str) -> str:
    """The coverage a file or folder suffix names (the inverse of :func:`coverage_suffix`)."""
    return suffix.removeprefix("-") or COMPLETE


def pattern(words: Iterable[str]) -> str:
    """A regular expression that matches exactly ``words``, the longest first (so that a word that
    starts another never wins over it)."""
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


#: The Snakemake wildcard constraint of each word's wildcard; a coverage wildcard holds the suffix.
WILDCARDS: dict[str, str] = {
    "quality": pattern(QUALITIES),
    "entropy": pattern(ENTROPIES),
    "coverage": pattern(coverage_suffix(c) for c in COVERAGES),
}
#: The coverage wildcard of a rule that makes a variant (never the complete data).
VARIANT_WILDCARD = pattern(coverage_suffix(c) for c in VARIANTS)
