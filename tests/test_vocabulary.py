"""The words of a dataset cell and the behavior methods are written once: the command line's
choices, the config schema's enums and the Snakemake wildcard constraints are the vocabulary's
(:mod:`morl.vocabulary`) and the behavior registry's (:data:`morl.behavior.METHODS`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from morl import families, vocabulary
from morl.behavior import method_names
from morl.cli import build_parser
from morl.config import load_schema
from morl.vocabulary import COVERAGES, D4MORL_ENTROPIES, ENTROPIES, QUALITIES, VARIANTS

ROOT = Path(__file__).resolve().parent.parent


def choices(command: str, dest: str) -> tuple[str, ...]:
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    return tuple(next(a for a in sub._actions if a.dest == dest).choices)


def test_the_command_line_offers_the_vocabulary():
    assert choices("collect", "quality") == choices("import-d4morl", "quality") == QUALITIES
    assert choices("collect", "entropy") == ENTROPIES
    assert choices("import-d4morl", "entropy") == (*ENTROPIES, *D4MORL_ENTROPIES)
    assert choices("derive-coverage", "coverage") == VARIANTS == tuple(c for c in COVERAGES if c != "complete")
    assert choices("behavior", "method") == method_names()


def test_the_schema_enums_are_the_vocabulary():
    schema = load_schema()
    defs, props = schema["$defs"], schema["properties"]
    assert defs["quality"]["enum"] == list(QUALITIES)
    assert defs["entropy"]["enum"] == list(ENTROPIES)
    assert defs["coverage_name"]["enum"] == list(COVERAGES)
    assert defs["behavior_method"]["enum"] == list(method_names())
    # every place that takes one of the words refers to its enum
    assert props["qualities"]["items"] == {"$ref": "#/$defs/quality"}
    assert props["entropies"]["items"] == {"$ref": "#/$defs/entropy"}
    assert props["coverages"]["items"] == {"$ref": "#/$defs/coverage_name"}
    cell = props["imported_datasets"]["items"]["properties"]
    assert cell["quality"] == {"$ref": "#/$defs/quality"} and cell["entropy"] == {"$ref": "#/$defs/entropy"}
    behavior = defs["behavior"]["properties"]
    assert behavior["method"] == behavior["overrides"]["items"]["properties"]["method"]
    assert behavior["method"] == {"$ref": "#/$defs/behavior_method"}


def wildcard_constraints(path: Path) -> dict[str, str]:
    """The wildcard constraints of a rules file, each expression evaluated with the names the
    rules import from the vocabulary and the family registry."""
    namespace = {**vars(vocabulary), "wildcard_pattern": families.wildcard_pattern}
    out, inside = {}, False
    for line in path.read_text().splitlines():
        if line.strip() == "wildcard_constraints:":
            inside = True
            continue
        if inside:
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            match = re.fullmatch(r"(\w+)=(.+),", text)
            if not match or not line.startswith(" "):
                inside = False
                continue
            out[match[1]] = eval(match[2], namespace)  # the file's own expression
    return out


def matched(pattern: str, words) -> set[str]:
    return {w for w in words if re.fullmatch(rf"(?:{pattern})", w)}


def test_the_wildcard_constraints_are_the_vocabulary():
    common = wildcard_constraints(ROOT / "rules" / "common.smk")
    assert {k: common[k] for k in vocabulary.WILDCARDS} == vocabulary.WILDCARDS
    near = ["", "x", "expert-", "High", "highh", "-complete", "complete", "shattered", "-shattered-", "narrow"]
    suffixes = [vocabulary.coverage_suffix(c) for c in COVERAGES]
    assert matched(common["quality"], [*QUALITIES, *near]) == set(QUALITIES)
    assert matched(common["entropy"], [*ENTROPIES, *near]) == set(ENTROPIES)
    assert matched(common["coverage"], [*suffixes, *near]) == set(suffixes) == {"", "-shattered", "-narrow"}
    # the rule that derives a variant never makes the complete data
    coverage = wildcard_constraints(ROOT / "rules" / "coverage.smk")
    assert matched(coverage["coverage"], [*suffixes, *near]) == {"-shattered", "-narrow"}
    assert [vocabulary.coverage_of_suffix(s) for s in suffixes] == list(COVERAGES)


@pytest.mark.parametrize("module", ["morl.vocabulary", "morl.behavior", "morl.config"])
def test_the_words_cost_no_torch(module):
    code = f"import sys, {module}; from morl.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
