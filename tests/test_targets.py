"""`morl paper-targets`: a paper comparison read against the PEDA paper's findings, row by row."""

from __future__ import annotations

import polars as pl
import pytest

from morl.cli import main
from morl.errors import InputError
from morl.paper import published_fraction
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


def published_rows(env: str = "MO-Swimmer-v2", quality: str = "amateur") -> dict:
    """PEDA's six models on one High-H row: ours a fixed fraction, the paper's its published one."""
    return {(env, quality): {m: (0.1 * i, published_fraction(env, quality, "high", m))
                             for i, m in enumerate(PEDA, start=1)}}  # fmt: skip


def test_the_command_writes_the_reading_and_refuses_a_file_that_is_not_a_comparison(tmp_path, capsys):
    comparison(published_rows()).write_csv(tmp_path / "paper_comparison.csv")
    assert main(["paper-targets", "--comparison", str(tmp_path / "paper_comparison.csv"),
                 "--output", str(tmp_path / "targets.md")]) == 0  # fmt: skip
    assert (tmp_path / "targets.md").read_text() == capsys.readouterr().out
    (tmp_path / "other.csv").write_text("env,model\nMO-Ant-v2,bc\n")
    with pytest.raises(InputError, match=r"other\.csv: not a paper comparison table \(no column quality"):
        read_comparison(tmp_path / "other.csv")
    assert main(["paper-targets", "--comparison", str(tmp_path / "absent.csv")]) != 0
    assert "absent.csv: no such file" in capsys.readouterr().err


HEADER = "env,quality,entropy,model,n_seeds,our_fraction,paper_fraction"


def good_lines() -> list[str]:
    """The lines of a valid comparison: PEDA's six models on Swimmer amateur, three seeds each."""
    out = []
    for i, m in enumerate(PEDA, start=1):
        paper = published_fraction("MO-Swimmer-v2", "amateur", "high", m)
        out.append(f"MO-Swimmer-v2,amateur,high,{m},3,{0.1 * i},{paper!r}")
    return out


def test_a_valid_comparison_file_reads_back_as_written(tmp_path):
    path = tmp_path / "paper_comparison.csv"
    path.write_text("\n".join([HEADER, *good_lines()]) + "\n")
    frame = read_comparison(path)
    assert frame["model"].to_list() == list(PEDA)
    assert frame["our_fraction"].to_list() == pytest.approx([0.1 * i for i in range(1, 7)])


def _line(i: int, column: str, value: str) -> str:
    cells = good_lines()[i].split(",")
    cells[HEADER.split(",").index(column)] = value
    return ",".join(cells)


@pytest.mark.parametrize(
    "lines, problem",
    [
        ([HEADER], r"no rows, only a header"),
        ([], r"empty, not a paper comparison table"),
        ([HEADER, good_lines()[0] + ",7"], r"line 2 has 8 fields, the header has 7"),
        ([HEADER, *good_lines()[:2], "MO-Swimmer-v2,amateur,high"], r"line 4 has 3 fields, the header has 7"),
        ([HEADER, *good_lines(), _line(2, "our_fraction", "0.9")],
         r"lines 4 and 8 are both MO-Swimmer-v2 amateur high bc-p: one row per cell"),
        ([HEADER, _line(0, "our_fraction", "inf"), *good_lines()[1:]], r"line 2: our_fraction is 'inf', not a finite"),
        ([HEADER, _line(0, "our_fraction", "-inf"), *good_lines()[1:]], r"line 2: our_fraction is '-inf', not a finite"),
        ([HEADER, good_lines()[0], _line(1, "our_fraction", "NaN"), *good_lines()[2:]], r"line 3: our_fraction is 'NaN', not a finite"),
        ([HEADER, _line(0, "our_fraction", "-0.3"), *good_lines()[1:]], r"line 2: our_fraction is -0.3, below 0"),
        ([HEADER, _line(0, "our_fraction", "high"), *good_lines()[1:]], r"line 2: our_fraction 'high' is not a number"),
        ([HEADER, _line(0, "n_seeds", "-3"), *good_lines()[1:]], r"line 2: n_seeds is -3, below 0"),
        ([HEADER, _line(0, "n_seeds", "2.5"), *good_lines()[1:]], r"line 2: n_seeds '2.5' is not a whole number"),
        ([HEADER, _line(0, "n_seeds", "0"), *good_lines()[1:]], r"line 2: our_fraction 0.1 with n_seeds 0"),
        ([HEADER, _line(0, "env", "MO-Spider-v1"), *good_lines()[1:]], r"line 2: unknown env 'MO-Spider-v1'"),
        ([HEADER, _line(0, "model", "gpt"), *good_lines()[1:]], r"line 2: unknown model 'gpt'"),
        ([HEADER, _line(0, "paper_fraction", "0.5"), *good_lines()[1:]],
         r"line 2: paper_fraction 0.5 for MO-Swimmer-v2 amateur high dt-p is not the paper's \(0\.79"),
        ([HEADER, _line(0, "entropy", "low"), *good_lines()[1:]],
         r"line 2: paper_fraction 0\.79\d* for MO-Swimmer-v2 amateur low dt-p, a cell the paper publishes no number"),
        ([HEADER, *[line.rsplit(",", 1)[0] + "," for line in good_lines()]],
         r"no published numbers to compare with: the paper publishes HV for high-H datasets of MO-Ant-v2"),
    ],
)  # fmt: skip
def test_a_bad_comparison_is_refused_with_one_line_naming_the_file(tmp_path, capsys, lines, problem):
    path = tmp_path / "paper_comparison.csv"
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(InputError, match=r"paper_comparison\.csv: " + problem):
        read_comparison(path)
    assert main(["paper-targets", "--comparison", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"morl paper-targets: error: {path}: ")


def test_a_grid_without_published_rows_is_refused_for_that_and_not_for_its_column_type(tmp_path):
    """A grid of high-narrow datasets only: every paper_fraction is empty, a column of no type."""
    lines = [HEADER] + [f"MO-Swimmer-v2,amateur,high-narrow,{m},3,0.5," for m in PEDA]
    path = tmp_path / "paper_comparison.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="no published numbers") as caught:
        read_comparison(path)
    assert "numeric" not in str(caught.value)


def test_a_comparison_whose_fraction_disagrees_with_its_hvs_is_refused(tmp_path):
    header = HEADER + ",our_hv,our_b_hv"
    lines = [line + ",0.2,2.0" for line in good_lines()]  # our_hv / our_b_hv = 0.1: only dt-p's is right
    path = tmp_path / "paper_comparison.csv"
    path.write_text("\n".join([header, lines[0]]) + "\n")
    assert read_comparison(path)["our_fraction"].to_list() == pytest.approx([0.1])
    path.write_text("\n".join([header, *lines[:2]]) + "\n")
    with pytest.raises(InputError, match=r"line 3: our_fraction 0\.2 is not our_hv / our_b_hv \(0\.1\)"):
        read_comparison(path)
