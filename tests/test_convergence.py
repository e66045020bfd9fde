"""HV along training: convergence.csv from evaluations of snapshots and final models."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from test_aggregate import fake_card, fake_eval

from morl.cli import main
from morl.convergence import convergence_rows, convergence_table, write_convergence
from morl.errors import InputError

SETTINGS = {"steps": 100, "lr": 1e-4}


def along(tmp_path, model, seed, step, scale, lengths=None, **extra):
    returns = [[1000.0 * scale, 2000.0 * scale], [2000.0 * scale, 1000.0 * scale]]
    meta = {"train_steps": step, "train_settings": SETTINGS, "dataset_sha256": "d" * 64, "eval_seed": 7,
            "episodes": 1, **extra}  # fmt: skip
    path = fake_eval(tmp_path / f"{model}-{seed}-{step}.parquet", "expert", "high", model, seed, returns, **meta)
    if lengths is not None:  # rewrite with other episode lengths
        from morl.evaluate import read_evaluation, write_evaluation

        m, arr = read_evaluation(path)
        res = {"preferences": arr["preference"], "targets": arr["target_return"], "returns": arr["return"],
               "lengths": np.asarray(lengths, float), "seeds": np.zeros((2, 1), int), "summary": {}}  # fmt: skip
        write_evaluation(path, res, m)
    return path


def test_rows_give_hv_over_b_and_the_share_of_full_length_episodes(tmp_path):
    card = fake_card(tmp_path / "card.md", "expert", "high", 4e6)
    files = [
        along(tmp_path, "rvs-p", 0, 100, 1.0),
        along(tmp_path, "rvs-p", 0, 10, 0.5, lengths=[500, 120]),
        along(tmp_path, "dt-p", 0, 10, 0.25),
    ]
    frame = convergence_rows(files, [card])
    # HV of {(1000s, 2000s), (2000s, 1000s)} from the origin: 3e6 s^2
    assert frame.select("model", "step").rows() == [("dt-p", 10), ("rvs-p", 10), ("rvs-p", 100)]  # paper order
    assert frame["hv"].to_list() == pytest.approx([3e6 / 16, 3e6 / 4, 3e6])
    assert frame["hv_over_b"].to_list() == pytest.approx([3 / 64, 3 / 16, 3 / 4])
    assert frame["full_length"].to_list() == [1.0, 0.5, 1.0]


def test_the_readable_table_gives_each_step_the_final_runs_and_the_paper(tmp_path):
    card = fake_card(tmp_path / "card.md", "expert", "high", 4e6)
    files = [
        along(tmp_path, "rvs-p", 0, 10, 0.5),
        along(tmp_path, "rvs-p", 0, 100, 1.0),
        along(tmp_path, "rvs-p", 1, 10, 0.5),
        along(tmp_path, "rvs-p", 1, 100, 1.0, lengths=[500, 120]),
        along(tmp_path, "dt-p", 0, 10, 0.25),
    ]
    lines = convergence_table(convergence_rows(files, [card])).splitlines()
    assert lines[0] == "| row | model | seeds | 10 | 100 | final (step) | final full length | paper |"
    # HV / B: 3e6 s^2 / 4e6 at scale s; the paper's HV / B on HalfCheetah expert: 5.73 / 5.79 and 5.78 / 5.79
    assert lines[2:] == [
        "| MO-HalfCheetah-v2 expert-high | MODT(P) | 1 | 0.05 |  | **0.05** [0.05, 0.05] (10) | 1.00 | 0.99 |",
        "| MO-HalfCheetah-v2 expert-high | MORvS(P) | 2 | 0.19 | 0.75 | **0.75** [0.75, 0.75] (100) | 0.75 | 1.00 |",
    ]
    # without the dataset's card: the HV itself, and no paper figure to compare with
    (line,) = convergence_table(convergence_rows(files[-1:], [])).splitlines()[2:]
    assert (
        line
        == "| MO-HalfCheetah-v2 expert-high | MODT(P) | 1 | 1.88e+05 | **1.88e+05** [1.88e+05, 1.88e+05] (10) | 1.00 |  |"
    )


def test_a_row_without_its_card_has_no_hv_over_b(tmp_path):
    frame = convergence_rows([along(tmp_path, "rvs-p", 0, 10, 1.0)], [])
    assert frame["hv_over_b"].to_list() == [None]


def test_the_same_run_and_step_twice_is_refused(tmp_path):
    (tmp_path / "again").mkdir()
    a = along(tmp_path, "rvs-p", 0, 10, 1.0)
    b = along(tmp_path / "again", "rvs-p", 0, 10, 1.0)
    with pytest.raises(InputError, match="rvs-p/0 at step 10 is evaluated twice"):
        convergence_rows([a, b], [])


def test_evaluations_of_one_run_must_differ_in_their_step_only(tmp_path):
    a = along(tmp_path, "rvs-p", 0, 10, 1.0)
    b = along(tmp_path, "rvs-p", 0, 100, 1.0, eval_seed=8)
    with pytest.raises(InputError, match=r"not the same training run .*eval_seed"):
        convergence_rows([a, b], [])


def test_an_evaluation_that_does_not_record_its_step_is_refused(tmp_path):
    old = fake_eval(tmp_path / "old.parquet", "expert", "high", "rvs-p", 0, [[1.0, 2.0]])
    with pytest.raises(InputError, match="does not record the step"):
        convergence_rows([old], [])


def test_the_command_writes_the_table_and_a_plot_per_row(tmp_path, capsys):
    card = fake_card(tmp_path / "card.md", "expert", "high", 4e6)
    files = [str(along(tmp_path, "rvs-p", s, st, st / 100)) for s in (0, 1) for st in (10, 30, 100)]
    out = tmp_path / "tables"
    assert main(["convergence", "--evaluations", *files, "--data-cards", str(card), "--out-dir", str(out)]) == 0
    table = pl.read_csv(out / "convergence.csv")
    assert table.columns == ["env", "quality", "entropy", "model", "seed", "step", "hv", "hv_over_b", "full_length"]
    assert table.height == 6
    assert (out / "plots/convergence/MO-HalfCheetah-v2_expert-high.png").stat().st_size > 1000
    assert "| MO-HalfCheetah-v2 expert-high | MORvS(P) | 2 |" in (out / "convergence.md").read_text()
    assert "rvs-p" in capsys.readouterr().out


def test_write_convergence_without_plots(tmp_path):
    out = write_convergence([along(tmp_path, "rvs-p", 0, 10, 1.0)], [], tmp_path / "t", plots=False)
    assert list(out) == ["convergence", "convergence_table"] and not (tmp_path / "t" / "plots").exists()


def test_the_committed_progress_of_the_paper_grid_is_what_its_evaluations_give(tmp_path):
    """docs/paper-cpu/progress: convergence.csv and .md rebuilt from the committed evaluations and cards."""
    from pathlib import Path

    from tables_compare import differences

    folder = Path(__file__).resolve().parents[1] / "docs" / "paper-cpu" / "progress"
    evaluations = sorted(folder.glob("runs/**/eval.parquet"))
    cards = sorted(folder.glob("runs/*/data/*.card.md"))
    assert len(evaluations) == 324 and len(cards) == 12
    write_convergence(evaluations, cards, tmp_path, plots=False)
    found = differences(folder, tmp_path, ["convergence.csv", "convergence.md"])
    assert not found, "\n".join(found)
