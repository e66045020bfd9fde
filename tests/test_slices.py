"""Slices of a grid: stale ones refused, and the committed paper-cpu tables rebuilt from the committed slices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from morl.cli import main
from morl.errors import InputError
from morl.slices import PROVENANCE, check_behaviors, slice_files

ROOT = Path(__file__).resolve().parent.parent
PAPER_CPU = ROOT / "docs" / "paper-cpu"
UNSEEN = ROOT / "docs" / "unseen"


def merged_tables(config: str, slices: Path, out: Path) -> Path:
    """`morl merge-slices --tables-only` of ``slices`` under ``config`` into ``out``."""
    assert (
        main(
            [
                "merge-slices",
                "--config",
                str(ROOT / config),
                "--slices",
                str(slices),
                "--out-dir",
                str(out),
                "--tables-only",
            ]
        )
        == 0
    )
    return out


def differing(committed: Path, made: Path, names: list) -> list[str]:
    """The names among ``names`` whose committed file differs from the freshly made one."""
    return [str(n) for n in names if (committed / n).read_bytes() != (made / n).read_bytes()]


def write_slice(root: Path, env: str, sha: str) -> Path:
    (root / env).mkdir(parents=True)
    (root / env / PROVENANCE).write_text(json.dumps({"env": env, "behavior": [{"method": "pgmorl", "sha256": sha}]}))
    return root / env


def test_a_slice_from_another_behavior_policy_is_refused_naming_it(tmp_path):
    write_slice(tmp_path, "MO-HalfCheetah-v2", "a" * 64)
    check_behaviors(tmp_path, {"MO-HalfCheetah-v2": "a" * 64, "MO-Hopper-v2": "c" * 64})
    with pytest.raises(InputError, match=r"MO-HalfCheetah-v2: the slice's data came from behavior policy sha256 a+, "
                       r"but MO-HalfCheetah-v2 now uses b+; run the env again"):  # fmt: skip
        check_behaviors(tmp_path, {"MO-HalfCheetah-v2": "b" * 64})


def test_no_slice_is_an_error_not_empty_tables(tmp_path):
    with pytest.raises(InputError, match="holds no slice"):
        slice_files(tmp_path)
    with pytest.raises(InputError, match="no slices folder"):
        slice_files(tmp_path / "absent")


@pytest.mark.skipif(not (PAPER_CPU / "runs").is_dir(), reason="no slice of configs/paper-cpu.yaml is committed yet")
def test_the_committed_paper_cpu_tables_are_what_the_committed_slices_give(tmp_path):
    """docs/paper-cpu holds the tables and plots `morl merge-slices` makes from docs/paper-cpu/runs."""
    out = tmp_path / "merged"
    argv = ["merge-slices", "--config", str(ROOT / "configs/paper-cpu.yaml"), "--slices", str(PAPER_CPU / "runs")]
    assert main([*argv, "--out-dir", str(out)]) == 0
    made = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert made and all((PAPER_CPU / f).is_file() for f in made)
    # the tables byte for byte; the figures (and the page that embeds them) depend on the fonts and
    # the renderer of the machine that draws them, so they are checked to be there, not for bytes
    tables = [f for f in made if f.parts[0] != "plots" and f.suffix != ".html"]
    # and the reading against the paper's findings that `morl paper-targets` makes from them
    comparison = ["paper-targets", "--comparison", str(out / "paper_comparison.csv")]
    assert main([*comparison, "--output", str(out / "targets.md")]) == 0
    differ = differing(PAPER_CPU, out, [*tables, "targets.md"])
    assert tables and not differ, differ


def test_the_committed_budget_probe_tables_are_what_its_slice_gives(tmp_path):
    """docs/unseen/budget-probe keeps some of the tables `morl merge-slices` makes from its slice
    (docs/weight-conditioning.md reads them); each kept one is what the slice gives, byte for byte."""
    probe = ROOT / "docs/unseen/budget-probe"
    out = merged_tables("configs/unseen-budget-probe.yaml", probe / "runs", tmp_path / "merged")
    assert not (out / "plots").exists()
    kept = sorted(p.name for p in probe.iterdir() if p.is_file())
    assert "metrics.csv" in kept and "generalisation_iqm.md" in kept
    differ = differing(probe, out, kept)
    assert not differ, differ


@pytest.mark.parametrize(
    "folder, config, table",
    [("unseen", "configs/unseen.yaml", "generalisation_iqm.md"),
     ("paper-cpu-definitions", "configs/paper-cpu-definitions.yaml", "paper_comparison.csv")],
)  # fmt: skip
def test_committed_tables_are_what_their_slices_give(tmp_path, folder, config, table):
    """docs/unseen's and docs/paper-cpu-definitions' tables (every file at the top level but the
    README and the HTML page) are what `morl merge-slices` makes from their runs/, byte for byte."""
    committed = ROOT / "docs" / folder
    out = merged_tables(config, committed / "runs", tmp_path / "merged")
    made = sorted(p.name for p in out.iterdir() if p.is_file() and p.suffix != ".html")
    kept = sorted(p.name for p in committed.iterdir() if p.is_file() and p.suffix != ".html" and p.name != "README.md")
    assert table in made and made == kept
    differ = differing(committed, out, made)
    assert not differ, differ


def test_the_committed_value_based_tables_are_the_unseen_runs_complete_rows(tmp_path):
    """docs/value-based is `morl aggregate` over the complete-data evaluations of docs/unseen/runs,
    as its README's command writes it: the same tables, byte for byte."""
    runs = UNSEEN / "runs"
    evaluations = sorted(str(p) for p in runs.glob("MO-*/*-high/*/seed*/eval.parquet"))
    fronts = sorted(str(p) for p in runs.glob("MO-*/behavior/front.parquet"))
    cards = sorted(str(p) for p in runs.glob("MO-*/data/*.card.md"))
    assert len(fronts) == 3 and len(cards) == 6 and evaluations
    out = tmp_path / "value-based"
    argv = ["aggregate", "--evaluations", *evaluations, "--fronts", *fronts, "--data-cards", *cards]
    argv += ["--seeds", "0", "1", "2"]
    assert main([*argv, "--out-dir", str(out)]) == 0
    tables = sorted(p.name for p in out.iterdir() if p.is_file() and p.suffix != ".html")
    differ = differing(ROOT / "docs" / "value-based", out, tables)
    assert tables and not differ, differ


def test_the_definitions_comparison_reads_b_as_the_paper_comparison_does(capsys):
    """benchmarks/definitions_effect.py --b data divides by each dataset's own front, as
    paper_comparison.csv does; on one run against itself its cells are that table's fractions."""
    import importlib.util

    import polars as pl

    spec = importlib.util.spec_from_file_location("definitions_effect", ROOT / "benchmarks/definitions_effect.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(PAPER_CPU), str(PAPER_CPU), "--b", "data"]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    comparison = pl.read_csv(PAPER_CPU / "paper_comparison.csv").filter(pl.col("n_seeds") > 0)
    assert len(rows) == len(comparison) > 30
    from morl.families import display_names

    expected = {
        (r["env"], f"{r['quality']} high-H", display_names()[r["model"]]): r for r in comparison.iter_rows(named=True)
    }
    for cells in rows:
        r = expected[(cells[0].lstrip("| "), cells[1], cells[2])]
        assert float(cells[3].split(" ± ")[0]) == pytest.approx(r["our_fraction"], abs=0.006)
        assert cells[5] == "+0.00"
        paper = cells[6].rstrip(" |")
        assert (paper == "") == (r["paper_fraction"] is None)
        if paper:
            assert float(paper) == pytest.approx(r["paper_fraction"], abs=0.006)
