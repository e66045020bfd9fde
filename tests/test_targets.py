"""`morl paper-targets`: a paper comparison read against the PEDA paper's findings, row by row."""

from __future__ import annotations

import polars as pl
import pytest

from morl.cli import main
from morl.errors import InputError
from morl.targets import read_comparison, row_checks, targets_markdown

PEDA = ("dt-p", "rvs-p", "bc-p", "dt", "rvs", "bc")


def comparison(rows: dict[tuple[str, str], dict[str, tuple[float | None, float | None]]]) -> pl.DataFrame:
    records = [
        {"env": env, "quality": q, "entropy": "high", "model": m, "our_fraction": ours, "paper_fraction": paper}
        for (env, q), models in rows.items()
        for m, (ours, paper) in models.items()
    ]
    return pl.DataFrame(records, schema={"env": pl.String, "quality": pl.String, "entropy": pl.String,
                                         "model": pl.String, "our_fraction": pl.Float64,
                                         "paper_fraction": pl.Float64})  # fmt: skip


def test_closeness_is_the_distance_to_the_papers_fraction():
    c = row_checks({"dt-p": (0.85, 0.95), "rvs-p": (0.80, 0.95)}, "MO-Hopper-v2", "expert")
    assert c["dt-p"] == (0.85, 0.95, True)  # 0.10 away counts as within
    assert c["rvs-p"][2] is False
    assert row_checks({"dt-p": (None, 0.95)}, "MO-Hopper-v2", "expert")["dt-p"] is None


def test_a_naive_model_is_checked_only_where_the_paper_has_it_clearly_below():
    models = {"dt": (0.9, 0.97), "dt-p": (0.8, 0.99),  # paper: MODT within 10% of MODT(P): not checked
              "rvs": (0.5, 0.70), "rvs-p": (0.9, 1.0),  # paper clearly below; ours below: holds
              "bc": (0.6, 0.3), "bc-p": (0.5, 0.9)}  # paper clearly below; ours above: fails  # fmt: skip
    naive = row_checks(models, "MO-Hopper-v2", "expert")["naive"]
    assert [(n, ok) for n, _, _, _, ok in naive] == [("rvs", True), ("bc", False)]


def test_tau_needs_all_six_models_and_stitching_only_on_ant_and_swimmer_amateur():
    same = {m: (0.1 * i, 0.1 * i) for i, m in enumerate(PEDA, start=1)}
    assert row_checks(same, "MO-Ant-v2", "amateur")["tau"] == 1.0
    reversed_ = {m: (1.0 - ours, paper) for m, (ours, paper) in same.items()}
    assert row_checks(reversed_, "MO-Ant-v2", "expert")["tau"] == -1.0
    assert row_checks({m: same[m] for m in PEDA[:5]}, "MO-Ant-v2", "expert")["tau"] is None
    assert row_checks({"rvs-p": (1.02, 1.08)}, "MO-Ant-v2", "amateur")["stitch"] == (1.02, 1.08, True)
    assert row_checks({"rvs-p": (0.97, 1.08)}, "MO-Swimmer-v2", "amateur")["stitch"][2] is False
    assert "stitch" not in row_checks({"rvs-p": (1.02, 1.08)}, "MO-Ant-v2", "expert")


def test_the_tally_counts_evaluated_rows_and_lists_the_rest():
    good = {m: (0.1 * i, 0.1 * i) for i, m in enumerate(PEDA, start=1)}
    text = targets_markdown(comparison({
        ("MO-HalfCheetah-v2", "expert"): good,
        ("MO-HalfCheetah-v2", "amateur"): {**good, "rvs-p": (0.5, 0.2)},
        ("MO-Ant-v2", "expert"): {m: (None, 0.9) for m in PEDA},
    }))  # fmt: skip
    assert "MODT(P) within ±0.10 of the paper's HV / B on 2 of 2 rows" in text
    assert "MORvS(P) within ±0.10 of the paper's HV / B on 1 of 2 rows" in text
    assert "0.50 / 0.20: no (+0.30)" in text
    assert "not evaluated yet: MO-Ant-v2 expert high-H" in text
    # expert before amateur, as in the paper's tables
    assert text.index("| MO-HalfCheetah-v2 | expert") < text.index("| MO-HalfCheetah-v2 | amateur")


def test_the_command_writes_the_reading_and_refuses_a_file_that_is_not_a_comparison(tmp_path, capsys):
    good = {m: (0.1 * i, 0.1 * i) for i, m in enumerate(PEDA, start=1)}
    comparison({("MO-Swimmer-v2", "amateur"): good}).write_csv(tmp_path / "paper_comparison.csv")
    assert main(["paper-targets", "--comparison", str(tmp_path / "paper_comparison.csv"),
                 "--output", str(tmp_path / "targets.md")]) == 0  # fmt: skip
    assert (tmp_path / "targets.md").read_text() == capsys.readouterr().out
    (tmp_path / "other.csv").write_text("env,model\nMO-Ant-v2,bc\n")
    with pytest.raises(InputError, match=r"other\.csv: not a paper comparison table \(no column quality"):
        read_comparison(tmp_path / "other.csv")
    assert main(["paper-targets", "--comparison", str(tmp_path / "absent.csv")]) != 0
    assert "absent.csv: no such file" in capsys.readouterr().err
