"""Tables, paper comparison and plots of the aggregate step, on small synthetic evaluation files
whose HV and SP are easy to compute by hand."""

from __future__ import annotations

import math
import re
import shutil
import subprocess

import numpy as np
import polars as pl
import pytest

from morl.aggregate import aggregate, baseline_table, collect_metrics
from morl.data import FileMismatchError
from morl.errors import InputError
from morl.evaluate import write_evaluation
from morl.metrics import eum, pareto_front
from morl.paper import PUBLISHED_HV, published_fraction, published_hv
from morl.render import latex_escape
from morl.tables import kendall_tau

ENV = "MO-HalfCheetah-v2"  # HV unit 1e6, SP unit 1e4 (the paper's units)


def fake_eval(path, quality, entropy, model, seed, returns, prefs=None, held_out=None, data_front=None, **extra):
    returns = np.asarray(returns, float)
    prefs = np.linspace([0, 1], [1, 0], len(returns)) if prefs is None else np.asarray(prefs, float)
    n = len(returns)
    res = {"preferences": prefs, "targets": np.zeros_like(prefs), "returns": returns, "lengths": np.full(n, 500.0),
           "seeds": np.zeros((n, 1), int), "summary": {}}  # fmt: skip
    if held_out is not None:  # an evaluation on a coverage variant
        front = np.full_like(returns, 3000.0) if data_front is None else np.asarray(data_front, float)
        res |= {"held_out": np.asarray(held_out, bool), "data_front_return": front}
    meta = {"kind": "model", "env_id": ENV, "quality": quality, "entropy": entropy, "model": model, "train_seed": seed,
            **extra}  # fmt: skip
    write_evaluation(path, res, meta)
    return path


def fake_front(path, behavior, zero, random, **extra):
    pts = np.concatenate([behavior, zero, random]).astype(float)
    prefs = np.tile(np.linspace([0, 1], [1, 0], len(behavior)), (3, 1))
    res = {"preferences": prefs, "targets": np.zeros_like(prefs), "returns": pts, "lengths": np.full(len(pts), 500.0),
           "seeds": np.zeros((len(pts), 1), int), "summary": {}}  # fmt: skip
    names = np.repeat(["behavior", "zero", "random"], len(behavior))
    write_evaluation(path, res, {"kind": "behavior", "env_id": ENV, **extra}, policy_names=names)
    return path


def fake_card(path, quality, entropy, data_hv):
    """A dataset card (morl dataset-info) as the tables read it: the dataset's names and its data HV."""
    path.write_text(
        f"{ENV}/data/{quality}-{entropy}.parquet\n"
        f"  env_id {ENV}, quality {quality}, preference entropy label '{entropy}'\n"
        f"  data HV          {data_hv:.6g}  (trajectory returns, reference point 0; 2 non-dominated of 9)\n"
    )
    return path


@pytest.fixture
def synthetic(tmp_path):
    """Expert high-H: MODT(P) on two seeds, BC on two seeds; amateur high-H and expert low-H: nothing yet.

    By hand (reference point at the origin; HV unit 1e6, SP unit 1e4):
      MODT(P) seed 0: {(1000, 2000), (2000, 1000)}: HV = 1000*2000 + 1000*1000 = 3e6; SP = (1000^2 + 1000^2)/1 = 2e6
      MODT(P) seed 1: {(2000, 2000)}: HV 4e6, SP 0           -> HV 3.50 ± 0.50, SP 100.00 ± 100.00
      BC seed 0: {(1000, 1000), (500, 500)}: HV 1e6, SP 0 (one non-dominated point)
      BC seed 1: {(1500, 1000)}: HV 1.5e6, SP 0              -> HV 1.25 ± 0.25, SP 0.00 ± 0.00
      behavior front: {(2000, 2500), (2500, 2000)}: HV = 2000*2500 + 500*2000 = 6e6; SP = 2*500^2 = 5e5
      B (the data's own front, from the cards): expert high-H 6e6, amateur high-H 5e6, expert low-H no card
    """
    d = tmp_path / "evals"
    d.mkdir()
    evals = [
        fake_eval(d / "dtp0.parquet", "expert", "high", "dt-p", 0, [[1000, 2000], [2000, 1000]]),
        fake_eval(d / "dtp1.parquet", "expert", "high", "dt-p", 1, [[2000, 2000], [2000, 2000]]),
        fake_eval(d / "bc0.parquet", "expert", "high", "bc", 0, [[1000, 1000], [500, 500]]),
        fake_eval(d / "bc1.parquet", "expert", "high", "bc", 1, [[1500, 1000], [1500, 1000]]),
    ]
    front = fake_front(d / "front.parquet", [[2000, 2500], [2500, 2000]], [[900, 900], [900, 900]], [[10, 10], [5, 5]])
    curves = {}
    for i, e in enumerate(evals):
        c = d / f"curve{i}.csv"
        c.write_text("step,loss,lr\n" + "".join(f"{s},{1.0 / (s + i)},0.001\n" for s in range(1, 6)))
        curves[str(e)] = c
    datasets = [(ENV, "expert", "high"), (ENV, "amateur", "high"), (ENV, "expert", "low")]
    cards = [fake_card(d / "eh.card.md", "expert", "high", 6e6), fake_card(d / "ah.card.md", "amateur", "high", 5e6)]
    return {"evals": evals, "front": front, "curves": curves, "datasets": datasets, "dir": tmp_path, "cards": cards}


def run_aggregate(s, **kw):
    kw.setdefault("models", ["dt-p", "bc"])
    kw.setdefault("data_cards", s["cards"])
    kw.setdefault("datasets", s["datasets"])
    return aggregate(s["evals"], [s["front"]], s["dir"] / "tables", curves=s["curves"], **kw)


def test_metric_tables_match_hand_computation(synthetic):
    out = run_aggregate(synthetic, seeds=[0, 1], plots=False)
    hv = out["hv_md"].read_text()
    assert "| env | dataset | unit | B | MODT(P) | BC |" in hv
    assert "| MO-HalfCheetah-v2 | expert high-H | ×1e6 | 6.00 | **3.50 ± 0.50** | 1.25 ± 0.25 |" in hv
    # rows are in the paper's order: expert before amateur, high before low entropy
    assert hv.index("expert high-H") < hv.index("expert low-H") < hv.index("amateur high-H")
    # missing cells: "—" with a footnote; B is each dataset's own (amateur 5e6), unknown without a card
    assert "| MO-HalfCheetah-v2 | amateur high-H | ×1e6 | 5.00 | — | — |" in hv
    assert "| MO-HalfCheetah-v2 | expert low-H | ×1e6 | — | — | — |" in hv
    assert "— : not evaluated yet" in hv and "— under B: no card of the dataset" in hv
    assert "†" not in hv  # every cell that exists has both configured seeds

    sp = out["sp_md"].read_text()  # the paper's SP table has no B column either
    assert "| env | dataset | unit | MODT(P) | BC |" in sp
    assert "| MO-HalfCheetah-v2 | expert high-H | ×1e4 | 100.00 ± 100.00 | **0.00 ± 0.00** |" in sp

    # the CSV: raw numbers, one row per cell and seed (B has no seed)
    csv = pl.read_csv(out["hv_csv"])
    expert = csv.filter((pl.col("quality") == "expert") & (pl.col("entropy") == "high"))
    assert expert["model"].to_list() == ["B", "dt-p", "dt-p", "bc", "bc"]
    assert expert["value"].to_list() == pytest.approx([6e6, 3e6, 4e6, 1e6, 1.5e6])
    assert expert["value_in_units"].to_list() == pytest.approx([6.0, 3.0, 4.0, 1.0, 1.5])
    assert expert["seed"].to_list() == [None, 0, 1, 0, 1]
    assert len(csv) == 5 + 1  # B alone in the amateur row; the low-entropy row has no card

    metrics = pl.read_csv(out["metrics"])
    assert len(metrics) == 4 and set(metrics.columns) >= {"hv", "sp", "ratio_dev", "utility", "n_nondominated"}
    assert "| MO-HalfCheetah-v2 | 6.000 | 0.810 | 0.000 |" in out["results"].read_text()


def test_fewer_seeds_than_configured_are_marked(synthetic):
    out = run_aggregate(synthetic, seeds=[0, 1, 2], plots=False)
    hv = out["hv_md"].read_text()
    assert "**3.50 ± 0.50†** | 1.25 ± 0.25† |" in hv and "fewer seeds evaluated than configured (3)" in hv


def test_single_seed_cells_and_tiny_values(tmp_path):
    e = fake_eval(tmp_path / "a.parquet", "expert", "high", "rvs-p", 0, [[3.0, 4.0]])  # HV 12 -> 1.2e-05 x1e6
    out = aggregate([e], [], tmp_path / "t", models=["rvs-p"], plots=False)
    assert "| MO-HalfCheetah-v2 | expert high-H | ×1e6 | — | **1.2e-05** |" in out["hv_md"].read_text()


def test_huge_returns_give_finite_spreads(tmp_path):
    """Returns near the float range: HV over seeds in the 1e305s; its std would square past the range."""
    evals = [
        fake_eval(tmp_path / f"e{seed}.parquet", "expert", "high", "rvs-p", seed, [[1e152 * (seed + 1), 1e153]])
        for seed in range(2)
    ]
    out = aggregate(evals, [], tmp_path / "t", models=["rvs-p"], plots=False)
    row = next(line for line in out["hv_md"].read_text().splitlines() if "expert high-H" in line)
    assert "inf" not in row and "nan" not in row, row
    assert "**1.5e+299 ± 5.0e+298**" in row, row
    cell = pl.read_csv(out["intervals_csv"]).row(0, named=True)  # the table the markdown is not made from
    assert cell["hv_mean"] == pytest.approx(1.5e299) and cell["hv_std"] == pytest.approx(5e298)


def test_paper_comparison_fractions(synthetic):
    out = run_aggregate(synthetic, seeds=[0, 1], plots=False)
    md = out["paper_comparison_md"].read_text()
    # ours: 3.5 / 6 = 0.58 and 1.25 / 6 = 0.21; paper (expert HalfCheetah): MODT(P) 5.73 / 5.79, BC 1.53 / 5.79
    assert "| MO-HalfCheetah-v2 | expert high-H | 6.00 (×1e6) | 0.58 / 0.99 | 0.21 / 0.26 | +1.00 |" in md
    # amateur: not evaluated yet, the paper has MODT(P) 5.69 / 5.68 and BC 2.92 / 5.68
    assert "| MO-HalfCheetah-v2 | amateur high-H | 5.00 (×1e6) | — / 1.00 | — / 0.51 | — |" in md
    # low entropy: the paper has no numbers, and no card gave our B
    assert "| MO-HalfCheetah-v2 | expert low-H | — | — / — | — / — | — |" in md
    assert "reports High-H" in md
    csv = pl.read_csv(out["paper_comparison_csv"])
    row = csv.filter((pl.col("quality") == "expert") & (pl.col("entropy") == "high") & (pl.col("model") == "dt-p"))
    assert row["our_fraction"][0] == pytest.approx(3.5 / 6)
    assert row["paper_fraction"][0] == pytest.approx(5.73 / 5.79)
    assert row["paper_hv"][0] == pytest.approx(5.73) and row["paper_b_hv"][0] == pytest.approx(5.79)


def test_no_rank_agreement_over_part_of_a_row(synthetic):
    """A row still being run (MORvS not evaluated yet) shows no tau: the ordering of the two
    models it has would read as agreement over the row."""
    md = run_aggregate(synthetic, seeds=[0, 1], plots=False, models=["dt-p", "rvs", "bc"])["paper_comparison_md"]
    md = md.read_text()
    assert "| MO-HalfCheetah-v2 | expert high-H | 6.00 (×1e6) | 0.58 / 0.99 | — / 0.72 | 0.21 / 0.26 | — |" in md
    assert "— as rank agreement where the row has numbers of ours: a model the paper reports has none yet" in md


def test_published_numbers_are_the_reference_table():
    assert len(PUBLISHED_HV) == 12 * 9  # 6 envs x 2 qualities; B, the six PEDA models, CQL(P) and CQL
    assert published_hv("MO-Walker2d-v2", "expert", "high", "cql-p") == 3.21
    assert published_hv("MO-Ant-v2", "amateur", "high", "cql") == 2.80
    assert published_hv("MO-Hopper-v3", "expert", "high", "rvs-p") == 3.42
    assert published_hv("MO-Walker2d-v2", "amateur", "high", "B") == 4.99
    assert published_hv("MO-Swimmer-v2", "expert", "high", "bc") == 1.68
    assert published_hv("MO-Ant-v2", "expert", "medium", "dt-p") is None
    assert published_fraction("MO-Ant-v2", "amateur", "high", "rvs-p") == pytest.approx(6.07 / 5.61)
    assert published_fraction("mo-halfcheetah-v5", "expert", "high", "dt-p") is None


def test_kendall_tau():
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau([1, 2, 3], [30, 20, 10]) == -1.0
    assert kendall_tau([1, 2, 3], [10, 30, 20]) == pytest.approx(1 / 3)
    assert kendall_tau([1], [1]) is None


# ---------------------------------------------------------------------------------------------
# LaTeX
# ---------------------------------------------------------------------------------------------


def check_tabular(tex: str) -> int:
    """Balanced braces and environments; every row of every tabular has as many cells as its
    column spec. Returns the number of table rows checked."""
    depth = 0
    for i, ch in enumerate(tex):
        if ch in "{}" and (i == 0 or tex[i - 1] != "\\"):
            depth += 1 if ch == "{" else -1
            assert depth >= 0, f"unbalanced '}}' at {i}"
    assert depth == 0, "unbalanced braces"
    stack = []
    for kind, env in re.findall(r"\\(begin|end)\{(\w+)\}", tex):
        if kind == "begin":
            stack.append(env)
        else:
            assert stack and stack.pop() == env, f"\\end{{{env}}} does not close the open environment"
    assert not stack, f"unclosed environments {stack}"
    n_rows = 0
    for spec, body in re.findall(r"\\begin\{tabular\}\{([lrc]+)\}(.*?)\\end\{tabular\}", tex, re.S):
        assert "\\toprule" in body and "\\midrule" in body and "\\bottomrule" in body
        rows = [r for r in re.sub(r"\\(top|mid|bottom)rule", "", body).split("\\\\") if r.strip().strip("%")]
        for r in rows:
            cells = re.split(r"(?<!\\)&", r)
            assert len(cells) == len(spec), f"row has {len(cells)} cells, spec {spec!r}: {r!r}"
        n_rows += len(rows)
    assert n_rows > 0, "no tabular found"
    return n_rows


def test_latex_tables_are_balanced_booktabs_and_compile(synthetic, tmp_path):
    out = run_aggregate(synthetic, seeds=[0, 1, 2], plots=False)
    texts = {name: out[f"{name}_tex"].read_text() for name in ("hv", "sp", "paper_comparison")}
    assert check_tabular(texts["hv"]) == 1 + 3  # header + three datasets
    assert "\\textbf{3.50 $\\pm$ 0.50$^\\dagger$}" in texts["hv"]
    assert "MO-HalfCheetah-v2 & amateur high-H & $\\times 10^{6}$ & 5.00 & --- & --- \\\\" in texts["hv"]
    for text in texts.values():
        check_tabular(text)
        assert text.isascii(), "pdflatex needs every non-ASCII character spelled as a macro"
    with pytest.raises(AssertionError):
        check_tabular(texts["hv"].replace(" & --- \\\\", " \\\\", 1))  # the check can fail
    if shutil.which("pdflatex") is None:
        print("pdflatex not installed: checked the LaTeX structurally only")
        return
    doc = tmp_path / "doc.tex"
    body = "\n".join(f"\\input{{{out[f'{n}_tex'].with_suffix('')}}}" for n in texts)
    doc.write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{graphicx}\n"
                   f"\\begin{{document}}\n{body}\n\\end{{document}}\n")  # fmt: skip
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:]
    assert (tmp_path / "doc.pdf").read_bytes()[:4] == b"%PDF"


def test_the_share_of_episodes_that_ran_to_the_step_limit_is_measured(tmp_path):
    """A fall the HV cannot see: the dominated episode that ended early still lowers full_length."""
    from morl.evaluate import read_evaluation

    path = fake_eval(tmp_path / "e.parquet", "expert", "high", "rvs-p", 0, [[1000.0, 2000.0], [500.0, 500.0]])
    meta, arr = read_evaluation(path)
    res = {"preferences": arr["preference"], "targets": arr["target_return"], "returns": arr["return"],
           "lengths": np.array([500.0, 120.0]), "seeds": np.zeros((2, 1), int), "summary": {}}  # fmt: skip
    write_evaluation(path, res, meta)  # the task caps episodes at 500 steps
    metrics, _ = collect_metrics([path], [])
    assert metrics["full_length"].to_list() == [0.5]
    assert metrics["hv"].to_list() == [pytest.approx(2e6)]  # the fallen episode is dominated: no HV lost


def test_latex_escape():
    assert latex_escape("a_b & 50% — ±") == "a\\_b \\& 50\\% --- $\\pm$"


def test_statistics_tables_match_hand_computation(synthetic):
    out = run_aggregate(synthetic, seeds=[0, 1], plots=False)
    metrics = pl.read_csv(out["metrics"]).sort("model", "seed")
    dtp0 = metrics.filter((pl.col("model") == "dt-p") & (pl.col("seed") == 0)).row(0, named=True)
    # IGD's reference is the union front of the dataset: B's two points dominate every model's;
    # each of B's points lies sqrt(1000^2 + 500^2) from its nearest MODT(P) seed-0 point
    assert dtp0["igd"] == pytest.approx(math.hypot(1000, 500))
    assert dtp0["cardinality"] == 2 and dtp0["eum"] == pytest.approx(eum([[1000, 2000], [2000, 1000]]))
    assert metrics.filter(pl.col("model") == "dt-p")["cardinality"].to_list() == [2, 1]  # duplicates count once
    intervals = pl.read_csv(out["intervals_csv"])
    row = intervals.filter(pl.col("model") == "dt-p").row(0, named=True)
    assert (row["hv_mean"], row["hv_over_b"], row["cardinality"]) == (3.5, pytest.approx(3.5 / 6), 1.5)
    assert 3.0 <= row["hv_ci_low"] <= row["hv_mean"] <= row["hv_ci_high"] <= 4.0
    assert "| MO-HalfCheetah-v2 | expert high-H | MODT(P) | 2 | 3.50 ± 0.50 (×1e6) |" in out["intervals_md"].read_text()
    # MODULI's ratio deviation, MODT(P): seed 0 keeps (1000, 2000) at w (0, 1) and (2000, 1000) at (1, 0),
    # each sqrt(2)/3 from its preference; seed 1 keeps both copies of (2000, 2000), each sqrt(2)/2 away
    assert dtp0["ratio_dev"] == pytest.approx(math.sqrt(2) / 3)
    assert (row["ratio_dev_mean"], row["ratio_dev_std"]) == pytest.approx(
        ((math.sqrt(2) / 3 + math.sqrt(2) / 2) / 2, (math.sqrt(2) / 2 - math.sqrt(2) / 3) / 2)
    )
    assert "| 1.5 | 1.00 | 0.59 ± 0.12 |" in out["intervals_md"].read_text()  # every synthetic episode ran 500 steps
    # HV / B: MODT(P) 3/6 and 4/6, BC 1/6 and 1.5/6 on the one row both have with two seeds
    iqm = {r["model"]: r for r in pl.read_csv(out["iqm_csv"]).iter_rows(named=True)}
    assert iqm["dt-p"]["iqm"] == pytest.approx(3.5 / 6) and iqm["bc"]["iqm"] == pytest.approx(1.25 / 6)
    assert iqm["dt-p"]["n_rows"] == 1 and iqm["dt-p"]["n_seeds"] == 2
    poi = {(r["model"], r["other"]): r["p"] for r in pl.read_csv(out["improvement_csv"]).iter_rows(named=True)}
    assert poi == {("dt-p", "bc"): 1.0, ("bc", "dt-p"): 0.0}
    assert "**1.00 [1.00, 1.00]**" in out["improvement_md"].read_text()


def test_generalisation_tables_match_hand_computation(tmp_path):
    """Four grid points; the narrow variant held out the two ends (w1 = 0 and 1), where B reached
    (2000, 2000): B's HV there is 4e6 (reference point at the origin).

    HV / B at the held-out points:
      BC(P) seed 0: complete {(2000, 2000)} 1.0, variant {(1000, 2000)} 0.5
      BC(P) seed 1: complete 1.0, variant {(2000, 2000)} 1.0
      MODT(P) seed 0: complete 1.0, variant {(1000, 1000)} 0.25
      MODT(P) seed 1: complete {(1000, 1000)} 0.25, variant 0.25
    The points between the ends (where only the variant runs do well) do not enter.
    """
    d = tmp_path / "evals"
    d.mkdir()
    held = [True, False, False, True]
    mid = [[9000, 9000], [9000, 9000]]
    complete_end = {("bc-p", 0): [2000, 2000], ("bc-p", 1): [2000, 2000], ("dt-p", 0): [2000, 2000],
                    ("dt-p", 1): [1000, 1000]}  # fmt: skip
    variant_ends = {("bc-p", 0): [[1000, 2000], [1000, 2000]], ("bc-p", 1): [[2000, 2000], [2000, 2000]],
                    ("dt-p", 0): [[1000, 1000], [1000, 1000]], ("dt-p", 1): [[1000, 1000], [1000, 1000]]}  # fmt: skip
    evals = []
    for (model, seed), end in complete_end.items():
        evals.append(fake_eval(d / f"{model}{seed}.parquet", "expert", "high", model, seed, [end, [1, 1], [1, 1], end]))
        a, b = variant_ends[(model, seed)]
        evals.append(fake_eval(d / f"{model}{seed}n.parquet", "expert", "high", model, seed, [a, *mid, b],
                               held_out=held, coverage="narrow"))  # fmt: skip
    behavior = [[2000, 2000], [5, 5], [5, 5], [2000, 2000]]
    front = fake_front(d / "front.parquet", behavior, [[1, 1]] * 4, [[2, 2]] * 4)
    datasets = [(ENV, "expert", "high"), (ENV, "expert", "high-narrow")]
    out = aggregate(evals, [front], tmp_path / "tables", datasets=datasets, models=["dt-p", "bc-p"])
    metrics = pl.read_csv(out["metrics"]).filter(pl.col("entropy") == "high-narrow").sort("model", "seed")
    assert metrics["hv_held_out"].to_list() == [2e6, 4e6, 1e6, 1e6]
    assert metrics["hv_held_out_complete"].to_list() == [4e6, 4e6, 4e6, 1e6]
    assert metrics["b_held_out"].to_list() == [4e6] * 4
    complete = pl.read_csv(out["metrics"]).filter(pl.col("entropy") == "high")
    assert complete["hv_held_out_complete"].is_null().all() and complete["b_held_out"].is_null().all()
    cells = {r["model"]: r for r in pl.read_csv(out["generalisation_csv"]).iter_rows(named=True)}
    bcp, dtp = cells["bc-p"], cells["dt-p"]
    assert (bcp["variant"], bcp["complete"], bcp["difference"]) == (0.75, 1.0, -0.25)
    assert (dtp["variant"], dtp["complete"], dtp["difference"]) == (0.25, 0.625, -0.375)
    assert 0.5 <= bcp["variant_ci_low"] <= 0.75 <= bcp["variant_ci_high"] <= 1.0
    assert -0.5 <= bcp["difference_ci_low"] <= -0.25 <= bcp["difference_ci_high"] <= 0.0
    assert bcp["b_held_out"] == 4.0 and bcp["n_seeds"] == bcp["n_paired"] == 2
    assert "| MO-HalfCheetah-v2 | expert high-H narrow | BC(P) | 2 | 4.00 (×1e6) | 0.75 [" in (
        out["generalisation_md"].read_text()
    )
    # One row, two seeds: the IQM (25% trimmed mean) of two numbers is their mean
    iqm = {(r["model"], r["data"]): r for r in pl.read_csv(out["generalisation_iqm_csv"]).iter_rows(named=True)}
    assert iqm[("bc-p", "variant")]["iqm"] == pytest.approx(0.75) and iqm[("bc-p", "complete")]["iqm"] == 1.0
    assert iqm[("dt-p", "variant")]["iqm"] == pytest.approx(0.25)
    assert iqm[("dt-p", "complete")]["iqm"] == pytest.approx(0.625)
    assert iqm[("bc-p", "variant")]["coverage"] == "narrow" and iqm[("bc-p", "variant")]["n_rows"] == 1
    assert out["statistics:generalisation"].stat().st_size > 0


def test_no_generalisation_tables_without_coverage_variants(synthetic):
    out = run_aggregate(synthetic, plots=False)
    assert "generalisation_md" not in out and not (synthetic["dir"] / "tables" / "generalisation.md").exists()


def test_a_variant_run_without_its_complete_run_is_shown_unpaired(tmp_path):
    d = tmp_path / "evals"
    d.mkdir()
    e = fake_eval(d / "v.parquet", "expert", "high", "bc-p", 0, [[1000, 1000], [1, 1]], held_out=[True, False],
                  coverage="shattered")  # fmt: skip
    front = fake_front(d / "front.parquet", [[2000, 1000], [1, 1]], [[1, 1]] * 2, [[1, 1]] * 2)
    out = aggregate([e], [front], tmp_path / "tables", datasets=[(ENV, "expert", "high-shattered")], plots=False)
    row = pl.read_csv(out["metrics"]).row(0, named=True)
    assert (row["hv_held_out"], row["b_held_out"], row["hv_held_out_complete"]) == (1e6, 2e6, None)
    cell = pl.read_csv(out["generalisation_csv"]).row(0, named=True)  # shown, not dropped
    assert (cell["n_seeds"], cell["n_paired"], cell["variant"], cell["complete"]) == (1, 0, 0.5, None)
    assert "| 1 (0 paired) | 2.00 (×1e6) | 0.50 [0.50, 0.50] | — | — |" in out["generalisation_md"].read_text()


def constant_front_model(path, prediction, source_sha256, n_obj=2, steps=100_000):
    """A front model file whose network predicts ``prediction`` at every preference (last layer zeroed)."""
    import torch

    from morl.front_model import FrontModel, build_network, save_front_model

    network = build_network(n_obj)
    with torch.no_grad():
        network[-1].weight.zero_()
        network[-1].bias.copy_(torch.tensor(prediction, dtype=torch.float32))
    model = FrontModel(network, n_obj, np.full((1, n_obj), 1 / n_obj), np.ones((1, n_obj)), {"steps": steps})
    save_front_model(path, model, {"source_sha256": source_sha256, "env_id": ENV})
    return path


SOURCE_SHA = "5" * 64  # the complete dataset the variants below were derived from


def test_moduli_rd_and_the_front_distance_match_hand_computation(tmp_path):
    """Four grid points w = (0, 1), (1/3, 2/3), (2/3, 1/3), (1, 0); the complete data's front there,
    F = (0, 4000), (1000, 3000), (2000, 2000), (4000, 0), so the fixed scale is (4000, 4000). The front
    model predicts g(w) = (4000, 3000) everywhere.

    Narrow (held out: the two ends), seed 0 reaches (0, 0) and (4000, 3000) there:
      RD = mean(||(4000, 3000)||, 0) = 2500; front distance = mean(||(0, 4000)|| / 4000, ||(0, 3000)|| / 4000)
      = mean(1, 0.75) = 0.875. Seed 1 reaches (4000, 3000) at both ends: RD = 0.
      RD in the table: mean 1250 ± std 1250 over the two seeds, in MODULI's unit 1e3: 1.25 ± 1.25.
    Shattered (held out: w = (1/3, 2/3) alone), seed 0 reaches (0, 0):
      RD = 5000; front distance = ||(1000, 3000) / (4000, 4000)|| = sqrt(0.625), not ||(1, 1)|| = sqrt(2),
      which dividing by the held-out points' own front would give.
    Amateur narrow: no front model of its complete dataset given, so no RD.
    """
    d = tmp_path / "evals"
    d.mkdir()
    front = [[0, 4000], [1000, 3000], [2000, 2000], [4000, 0]]
    mid = [9, 9]
    narrow = {"held_out": [True, False, False, True], "coverage": "narrow", "coverage_source_sha256": SOURCE_SHA,
              "data_front": front}  # fmt: skip
    evals = [
        fake_eval(d / "n0.parquet", "expert", "high", "bc-p", 0, [[0, 0], mid, mid, [4000, 3000]], **narrow),
        fake_eval(d / "n1.parquet", "expert", "high", "bc-p", 1, [[4000, 3000], mid, mid, [4000, 3000]], **narrow),
        fake_eval(d / "s0.parquet", "expert", "high", "bc-p", 0, [mid, [0, 0], mid, mid], held_out=[False, True, False,
                  False], coverage="shattered", coverage_source_sha256=SOURCE_SHA, data_front=front),
        fake_eval(d / "a0.parquet", "amateur", "high", "bc-p", 0, [[0, 0], mid, mid, [4000, 3000]],
                  **{**narrow, "coverage_source_sha256": "6" * 64}),
    ]  # fmt: skip
    model = constant_front_model(d / "expert-high.front_model.pt", [4000, 3000], SOURCE_SHA)
    datasets = [(ENV, "expert", "high-narrow"), (ENV, "expert", "high-shattered"), (ENV, "amateur", "high-narrow")]
    out = aggregate(evals, [], tmp_path / "tables", datasets=datasets, models=["bc-p"], plots=False,
                    front_models=[model])  # fmt: skip
    metrics = {(r["quality"], r["entropy"], r["seed"]): r for r in pl.read_csv(out["metrics"]).iter_rows(named=True)}
    n0, n1 = metrics[("expert", "high-narrow", 0)], metrics[("expert", "high-narrow", 1)]
    assert (n0["rd_held_out"], n1["rd_held_out"]) == (pytest.approx(2500.0), pytest.approx(0.0, abs=1e-3))
    assert n0["front_distance_held_out"] == pytest.approx(0.875) and n0["rd_front_model_steps"] == 100_000
    s0 = metrics[("expert", "high-shattered", 0)]
    assert s0["rd_held_out"] == pytest.approx(5000.0)
    assert s0["front_distance_held_out"] == pytest.approx(math.sqrt(0.625))
    a0 = metrics[("amateur", "high-narrow", 0)]
    assert a0["rd_held_out"] is None and a0["rd_front_model_steps"] is None
    assert a0["front_distance_held_out"] == pytest.approx(0.875)  # needs no front model
    intervals = {(r["quality"], r["entropy"]): r for r in pl.read_csv(out["intervals_csv"]).iter_rows(named=True)}
    cell = intervals[("expert", "high-narrow")]
    assert (cell["rd_held_out_mean"], cell["rd_held_out_std"]) == (pytest.approx(1250.0), pytest.approx(1250.0))
    assert cell["rd_unit"] == 1e3 and cell["rd_n_seeds"] == 2
    md = out["intervals_md"].read_text()
    # front distance of the cell: the mean of seed 0's 0.875 and seed 1's
    # (||(4000, -1000)|| / 4000 + 0.75) / 2 = (sqrt(1.0625) + 0.75) / 2, i.e. 0.883
    assert "| 1.25 ± 1.25 (×1e3) | 0.883 |" in md
    assert "| 5.00 ± 0.00 (×1e3) | 0.791 |" in md
    assert "with 100,000 gradient steps;" in md and "no front model of its complete dataset was given" in md


def test_a_front_model_that_could_not_be_fitted_gives_no_rd(tmp_path):
    from morl.front_model import FrontModel, save_front_model

    e = fake_eval(tmp_path / "n0.parquet", "expert", "high", "bc-p", 0, [[1, 1], [2, 2]], held_out=[True, False],
                  coverage="narrow", coverage_source_sha256=SOURCE_SHA)  # fmt: skip
    unfitted = FrontModel(None, 2, np.empty((0, 2)), np.empty((0, 2)), {"steps": 100_000, "unfitted": "no points"})
    save_front_model(tmp_path / "m.pt", unfitted, {"source_sha256": SOURCE_SHA})
    out = aggregate([e], [], tmp_path / "tables", datasets=[(ENV, "expert", "high-narrow")], plots=False,
                    front_models=[tmp_path / "m.pt"])  # fmt: skip
    row = pl.read_csv(out["metrics"]).row(0, named=True)
    assert row["rd_held_out"] is None and row["rd_front_model_steps"] is None
    assert row["front_distance_held_out"] is not None
    assert "or none could be fitted" in out["intervals_md"].read_text()


def test_front_models_that_do_not_fit_are_refused(tmp_path):
    d = tmp_path / "evals"
    d.mkdir()
    e = fake_eval(d / "n0.parquet", "expert", "high", "bc-p", 0, [[1, 1], [2, 2]], held_out=[True, False],
                  coverage="narrow", coverage_source_sha256=SOURCE_SHA)  # fmt: skip
    first = constant_front_model(d / "a.pt", [1, 1], SOURCE_SHA)
    second = constant_front_model(d / "b.pt", [2, 2], SOURCE_SHA, steps=500)
    with pytest.raises(FileMismatchError, match=f"{first} and {second} do not belong together: both are front models"):
        collect_metrics([e], [], [first, second])
    three = constant_front_model(d / "c.pt", [1, 1, 1], SOURCE_SHA, n_obj=3)
    with pytest.raises(FileMismatchError, match="the front model has 3 objectives, the evaluation 2"):
        collect_metrics([e], [], [three])
    not_a_model = shutil.copy(e, d / "evaluation.pt")  # an evaluation given as a front model
    with pytest.raises(InputError, match=f"{not_a_model}: not a readable front model file"):
        collect_metrics([e], [], [not_a_model])
    other = constant_front_model(d / "other.pt", [1, 1], "7" * 64)  # fitted on a dataset no variant came from
    with pytest.raises(InputError, match=f"{other}: this front model was fitted on the dataset sha256 7777"):
        collect_metrics([e], [], [other])


# ---------------------------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------------------------


def test_plot_files_exist_and_are_not_empty(synthetic):
    out = run_aggregate(synthetic, seeds=[0, 1])
    kinds = {k.split(":")[0] for k in out if ":" in k}
    assert kinds == {"plot", "preference", "curves", "hv", "statistics"}
    # Pareto: the behavior policy's front exists for every dataset row; the others only where a model was evaluated
    assert {k for k in out if k.startswith("plot:")} == {f"plot:{ENV}/{q}-{h}" for _, q, h in synthetic["datasets"]}
    assert {k for k in out if k.startswith("preference:")} == {f"preference:{ENV}/expert-high"}
    for key, png in out.items():
        if ":" not in key:
            continue
        pdf = png.with_suffix(".pdf")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000, png
        assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000, pdf
    summary = out["summary"].read_text()
    assert summary.count('<img src="data:image/png;base64,') == 1 + 3 + 1  # HV bars, three Pareto plots, IQM
    assert "<strong>3.50 ± 0.50</strong>" in summary
    # the tables alone, written again into the same folder, leave the page and its figures as they were
    again = run_aggregate(synthetic, seeds=[0, 1], plots=False)
    assert "summary" not in again and out["summary"].read_text() == summary


def test_figures_of_rows_no_longer_aggregated_are_removed(synthetic):
    """Merging after a slice was withdrawn must not leave its figures beside tables that lack its rows."""
    out = run_aggregate(synthetic, seeds=[0, 1])
    old = out[f"plot:{ENV}/amateur-high"]
    assert old.is_file() and old.with_suffix(".pdf").is_file()
    notes = old.parent / "README.txt"  # not a figure: left alone
    notes.write_text("mine")
    out = run_aggregate(synthetic, seeds=[0, 1], datasets=[(ENV, "expert", "high")])
    assert not old.exists() and not old.with_suffix(".pdf").exists()
    assert out[f"plot:{ENV}/expert-high"].is_file() and out[f"plot:{ENV}/expert-high"].with_suffix(".pdf").is_file()
    assert notes.read_text() == "mine"
    on_disk = {p for kind in ("pareto", "preference", "hv", "curves", "statistics")
               for p in (out["summary"].parent / "plots" / kind).glob("*.png")}  # fmt: skip
    assert on_disk == {p for k, p in out.items() if ":" in k}


def test_plots_have_the_expected_series(synthetic):
    from morl.plots import curves_figure, hv_bars_figure, legend_labels, pareto_figure, preference_figure

    a = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0], [1.0, 1.0]])
    fig = pareto_figure("t", {"dt-p": [a, a + 1], "rvs-p": [a * 2], "bc": [a]}, behavior=a * 3,
                        objectives=("run", "energy"))  # fmt: skip
    (labels,) = legend_labels(fig)
    assert [lab.split(" (")[0] for lab in labels] == ["behavior policy", "MODT(P)", "MORvS(P)", "BC"]
    assert labels[1] == "MODT(P) (3 non-dominated)"  # (1,3)+1 etc.: a+1 dominates a; its 3-point front
    ax = fig.axes[0]
    assert len(ax.collections) == 4 and len(ax.lines) == 4  # faint points and front line per series
    assert ax.get_xlabel() == "return: run"

    b3 = np.abs(np.random.default_rng(0).normal(size=(6, 3))) + 0.1
    fig = pareto_figure("t", {"dt": [b3]}, behavior=None, objectives=("run", "jump", "energy"))
    assert len(fig.axes) == 3 and legend_labels(fig) == [[f"MODT ({len(pareto_front(b3))} non-dominated)"]]

    w = np.linspace([0, 1], [1, 0], 4)
    fig = preference_figure("t", {"dt-p": [(w, w * 100)], "bc": [(w, np.ones_like(w))]}, objectives=("run", "energy"))
    assert legend_labels(fig) == [["run"], ["run"]]  # the second objective mirrors the first
    fig = preference_figure("t", {"dt": [(np.full((2, 3), 1 / 3), np.ones((2, 3)))]}, objectives=("a", "b", "c"))
    assert legend_labels(fig) == [["a", "b", "c"]]
    assert "ratio dev. 0.000" in fig.axes[0].get_title()  # the returns split exactly as asked

    stats = pl.DataFrame({"quality": ["expert", "expert", "amateur"], "entropy": ["high", "low", "high"],
                          "model": ["B", "dt-p", "dt-p"], "mean": [1.0, 2.0, 3.0], "std": [0.0, 0.1, 0.2],
                          "n": [1, 3, 3]})  # fmt: skip
    fig = hv_bars_figure("t", stats, "1e6")
    assert legend_labels(fig) == [["B", "MODT(P)"]] and len(fig.axes) == 2
    assert [len(c) for c in fig.axes[0].containers if hasattr(c, "patches")] == [2, 2]  # high, low

    curve = pl.DataFrame({"step": [1, 2, 3], "loss": [1.0, 0.5, 0.25], "lr": [1e-3] * 3})
    fig = curves_figure("t", {"bc": [curve, curve.with_columns(pl.col("loss") * 2)], "dt-p": [curve]})
    assert legend_labels(fig) == [["MODT(P) (1 seed)", "BC (2 seeds)"]]
    assert fig.axes[0].lines[1].get_ydata().tolist() == pytest.approx([1.5, 0.75, 0.375])  # mean over seeds


def test_bad_curve_file_is_named(synthetic):
    bad = synthetic["dir"] / "bad.csv"
    bad.write_text("epoch,value\n1,2\n")
    synthetic["curves"][str(synthetic["evals"][0])] = bad
    with pytest.raises(ValueError, match="bad.csv: a training curve needs columns step and loss"):
        run_aggregate(synthetic, plots=True)


def test_cli_aggregate_with_curves(synthetic, capsys):
    from morl.cli import main

    ev = [str(e) for e in synthetic["evals"]]
    cv = [str(synthetic["curves"][e]) for e in ev]
    out_dir = synthetic["dir"] / "cli"
    assert main(["aggregate", "--evaluations", *ev, "--fronts", str(synthetic["front"]), "--curves", *cv,
                 "--seeds", "0", "1", "--out-dir", str(out_dir)]) == 0  # fmt: skip
    assert "**3.50 ± 0.50**" in capsys.readouterr().out
    assert (out_dir / "plots/curves" / f"{ENV}_expert-high.png").exists()
    assert main(["aggregate", "--evaluations", *ev, "--curves", cv[0], "--out-dir", str(out_dir)]) == 2
    assert "give one training curve per evaluation" in capsys.readouterr().err


def test_collect_metrics_reads_every_file(synthetic):
    metrics, baselines = collect_metrics(synthetic["evals"], [synthetic["front"]])
    assert sorted(metrics["hv"].to_list()) == pytest.approx([1e6, 1.5e6, 3e6, 4e6])
    assert baselines.filter(pl.col("policy") == "behavior")["hv"][0] == pytest.approx(6e6)


# ------------------------------------------------------------------------ evaluations counted twice or mismatched
def test_the_same_evaluation_given_twice_is_refused(synthetic, capsys):
    """One file given twice, or a copy of it, would count as a second seed ("± 0.00")."""
    from morl.cli import main

    d = synthetic["dir"]
    first = fake_eval(d / "first.parquet", "amateur", "high", "bc", 0, [[1, 2]], checkpoint_sha256="c" * 64)
    copy = d / "copy.parquet"
    shutil.copy(first, copy)
    spelled_otherwise = d / "evals" / ".." / "first.parquet"
    cases = [
        ([first, first], f"{first} and {first} are the same file"),
        ([first, spelled_otherwise], f"{first} and {spelled_otherwise} are the same file"),
        ([first, copy], f"{first} and {copy} are evaluations of the same checkpoint (sha256 {'c' * 12})"),
    ]
    for evals, message in cases:
        with pytest.raises(ValueError) as info:
            aggregate(evals, [], d / "tables", plots=False)
        assert str(info.value).startswith(message + "; each run counts once")
    assert not (d / "tables").exists()
    assert main(["aggregate", "--evaluations", str(first), str(first), "--out-dir", str(d / "cli")]) == 2
    assert f"morl aggregate: error: {first} and {first} are the same file" in capsys.readouterr().err
    front = synthetic["front"]
    with pytest.raises(ValueError, match="front.parquet and .*front.parquet are the same file"):
        aggregate([], [front, front], d / "tables", plots=False)


@pytest.mark.parametrize("case", ["same run", "cell dataset", "behavior policy", "two fronts", "reference", "eval seed",
                                  "grid", "train settings"])  # fmt: skip
def test_evaluations_that_do_not_belong_together_are_refused(case, tmp_path):
    """Files the tables would combine must agree on what they claim to be; both files are named."""
    a, b, c = "a" * 64, "b" * 64, "c" * 64

    def e(name, quality, seed, **meta):
        return fake_eval(tmp_path / name, quality, "high", "bc", seed, [[1, 2]], **meta)

    def f(name, **meta):
        return fake_front(tmp_path / name, [[3, 3]], [[1, 1]], [[0, 0]], **meta)

    def files():
        if case == "same run":
            return [
                e("x.parquet", "expert", 0, checkpoint_sha256=a),
                e("y.parquet", "expert", 0, checkpoint_sha256=b),
            ], []
        if case == "cell dataset":
            return [e("x.parquet", "expert", 0, dataset_sha256=a), e("y.parquet", "expert", 1, dataset_sha256=b)], []
        if case == "behavior policy":
            return [e("x.parquet", "expert", 0, behavior_sha256=a)], [f("front.parquet", checkpoint_sha256=b)]
        if case == "two fronts":
            return [], [f("front.parquet", checkpoint_sha256=a), f("other.parquet", checkpoint_sha256=a)]
        if case == "eval seed":
            return [e("x.parquet", "expert", 0, eval_seed=2023, episodes=1),
                    e("y.parquet", "expert", 1, eval_seed=7, episodes=1)], []  # fmt: skip
        if case == "grid":
            return [e("x.parquet", "expert", 0),
                    fake_eval(tmp_path / "y.parquet", "expert", "high", "bc", 1, [[1, 2], [2, 1], [3, 0]])], []  # fmt: skip
        if case == "train settings":
            return [e("x.parquet", "expert", 0, train_settings={"lr": 1e-4, "steps": 100}),
                    e("y.parquet", "expert", 1, train_settings={"lr": 1e-4, "steps": 30})], []  # fmt: skip
        return [
            e("x.parquet", "expert", 0, dataset_sha256=a),
            e("y.parquet", "amateur", 0, dataset_sha256=b, reference_dataset_sha256=c),
        ], []

    evals, fronts = files()
    first, second = (fronts + evals)[:2]
    message = {
        "same run": f"{first} and {second} are two evaluations of run {ENV} expert-high bc seed 0; each run "
        "counts once",
        "cell dataset": f"{first} and {second} do not belong together: both claim cell {ENV} expert-high, but the "
        f"first was made from dataset sha256 {a[:12]}, the second from {b[:12]}",
        "behavior policy": f"{first} and {second} do not belong together: the first is the front of behavior policy "
        f"sha256 {b[:12]}, the second is of a dataset collected by behavior policy sha256 {a[:12]}",
        "two fronts": f"{first} and {second} do not belong together: both are behavior fronts of {ENV}",
        "reference": f"{first} and {second} do not belong together: the first was made from the {ENV} expert-high "
        f"dataset sha256 {a[:12]}, the second is of a model normalised with the expert-high dataset "
        f"sha256 {c[:12]}",
        "eval seed": f"{first} and {second} do not belong together: the first was evaluated with eval seed 2023 and "
        "1 episode(s) per point, the second with eval seed 7 and 1; their returns are not comparable",
        "grid": f"{first} and {second} do not belong together: both are of {ENV}, but the first was evaluated on 1 "
        "preference points and the second on 3; their fronts are not comparable",
        "train settings": f"{first} and {second} do not belong together: both are bc runs of {ENV} expert-high, "
        "trained with other settings than their seed (steps 100 vs 30); a cell's seeds must differ in the seed "
        "only",
    }[case]
    with pytest.raises(ValueError) as info:
        aggregate(evals, fronts, tmp_path / "tables", plots=False)
    assert str(info.value) == message


def test_a_model_outside_the_paper_s_six_is_not_dropped(synthetic):
    """An evaluation of a model the paper's column order does not list (here named 'my-agent') gets a
    column after the six, in the tables, the paper comparison and the plots, never silently left out."""
    extra = fake_eval(synthetic["dir"] / "evals" / "mine0.parquet", "expert", "high", "my-agent", 0,
                      [[1200, 1200], [1200, 1200]])  # fmt: skip
    synthetic["evals"].append(extra)
    run_aggregate(synthetic, models=None)
    hv = (synthetic["dir"] / "tables" / "hv.md").read_text()
    header = next(line for line in hv.splitlines() if line.startswith("| env"))
    assert header.split("|")[-2].strip() == "my-agent" and "MODT(P)" in header and "BC" in header
    row = next(line for line in hv.splitlines() if "expert high-H" in line)
    assert row.split("|")[-2].strip() == "1.44"  # 1200 * 1200 / 1e6
    comparison = (synthetic["dir"] / "tables" / "paper_comparison.md").read_text()
    assert "my-agent ours / paper" in comparison


def test_damaged_returns_and_no_input_are_refused(synthetic, tmp_path, capsys):
    """NaN in an evaluation's returns names the file (not a traceback); no files at all is an error,
    not a set of empty tables."""
    bad = fake_eval(tmp_path / "nan.parquet", "expert", "high", "bc", 0, [[1.0, 2.0], [float("nan"), 1.0]])
    with pytest.raises(ValueError, match=r"nan.parquet: column 'return' holds NaN or infinite values \(1 rows, "
                                         r"the first row 1\)"):  # fmt: skip
        aggregate([bad], [], tmp_path / "tables", plots=False)
    with pytest.raises(ValueError, match="no evaluation files given"):
        aggregate([], [], tmp_path / "tables", plots=False)
    from morl.cli import main

    assert main(["aggregate", "--out-dir", str(tmp_path / "cli")]) == 2
    assert "morl aggregate: error: no evaluation files given" in capsys.readouterr().err
    assert not (tmp_path / "tables").exists() and not (tmp_path / "cli").exists()


def test_igd_is_taken_over_the_runs_front_as_morl_baselines_computes_it(tmp_path):
    """A dominated point nearer to the reference must not lower IGD (morl-baselines filters to the
    non-dominated points first). Reference (the union front of B and the run): (10, 0), (0, 10) and
    (6, 6). The run reached (6, 6) and the dominated (1, 5): over its front IGD =
    (|(4, -6)| + |(-6, 4)| + 0) / 3 = 2 sqrt(52) / 3, not the smaller (sqrt(52) + |(-1, 5)| + 0) / 3
    that all points would give."""
    front = fake_front(tmp_path / "front.parquet", [[10, 0], [0, 10]], [[0, 0], [0, 0]], [[0, 0], [0, 0]])
    run = fake_eval(tmp_path / "run.parquet", "expert", "high", "bc", 0, [[6, 6], [1, 5]])
    metrics, _ = collect_metrics([run], [front])
    assert metrics["igd"][0] == pytest.approx(2 * math.sqrt(52) / 3)


def test_each_row_is_divided_by_its_own_datas_front(synthetic):
    """The paper's B is per dataset: an amateur row's HV / B divides by the amateur data's front, and a
    coverage variant's row by the front of the complete data it was cut from."""
    d = synthetic["dir"] / "evals"
    extra = [
        fake_eval(d / "am0.parquet", "amateur", "high", "dt-p", 0, [[2000, 2000], [2000, 2000]]),  # HV 4e6
        fake_eval(
            d / "sh0.parquet",
            "amateur",
            "high-shattered",
            "dt-p",
            0,
            [[1000, 2000], [2000, 1000]],
            held_out=[True, False],
        ),  # HV 3e6
    ]
    datasets = [*synthetic["datasets"], (ENV, "amateur", "high-shattered")]
    out = aggregate(synthetic["evals"] + extra, [synthetic["front"]], synthetic["dir"] / "t", datasets=datasets,
                    models=["dt-p"], data_cards=synthetic["cards"], plots=False)  # fmt: skip
    iv = pl.read_csv(out["intervals_csv"]).filter(pl.col("model") == "dt-p")
    by_row = {(r["quality"], r["entropy"]): r["hv_over_b"] for r in iv.iter_rows(named=True)}
    assert by_row[("expert", "high")] == pytest.approx(3.5e6 / 6e6)
    assert by_row[("amateur", "high")] == pytest.approx(4e6 / 5e6)  # not / 6e6, the behavior front's HV
    assert by_row[("amateur", "high-shattered")] == pytest.approx(3e6 / 5e6)
    cmp = pl.read_csv(out["paper_comparison_csv"]).filter(
        (pl.col("quality") == "amateur") & (pl.col("entropy") == "high")
    )
    assert cmp["our_b_hv"][0] == pytest.approx(5.0) and cmp["our_fraction"][0] == pytest.approx(0.8)
    # rows with fewer seeds than others (a grid still running): the IQM takes the rows with the most
    assert "over 1 dataset rows × the seeds" in out["iqm_md"].read_text()

    # two cards of one dataset that disagree: refused, naming both, before anything is written
    other = fake_card(d / "other.card.md", "amateur", "high", 4e6)
    with pytest.raises(FileMismatchError, match=r"ah\.card\.md and .*other\.card\.md do not belong together"):
        aggregate(synthetic["evals"], [], synthetic["dir"] / "t2", data_cards=[*synthetic["cards"], other], plots=False)
    assert not (synthetic["dir"] / "t2").exists()


def test_trivial_baseline_ratio_says_when_there_is_none():
    # On Hopper both trivial policies fall below the reference point (HV 0): the table must not
    # divide by zero into a huge number that reads like a real ratio.
    rows = [
        {"env": "MO-Hopper-v3", "policy": "behavior", "hv": 3.37e10},
        {"env": "MO-Hopper-v3", "policy": "zero", "hv": 0.0},
        {"env": "MO-Hopper-v3", "policy": "random", "hv": 0.0},
        {"env": "MO-HalfCheetah-v2", "policy": "behavior", "hv": 3.865e6},
        {"env": "MO-HalfCheetah-v2", "policy": "zero", "hv": 1.249e6},
        {"env": "MO-HalfCheetah-v2", "policy": "random", "hv": 0.880e6},
    ]
    table = baseline_table(pl.DataFrame(rows))
    assert "| MO-Hopper-v3 | 3.370 | 0.000 | 0.000 | no ratio (both 0) |" in table
    assert "| MO-HalfCheetah-v2 | 3.865 | 1.249 | 0.880 | 3.09\u00d7 |" in table


def curves_naming_their_runs(s, sha="ab" * 32):
    """Give every synthetic evaluation its dataset hash, and a curve that names its run, as train
    writes it: model, seed and dataset on every row."""
    from morl.curves import write_curve

    for i, e in enumerate(s["evals"]):
        meta = {"quality": "expert", "entropy": "high", "model": ["dt-p", "dt-p", "bc", "bc"][i], "seed": i % 2}
        returns = pl.read_parquet(e)["return"].to_list()
        fake_eval(e, meta["quality"], meta["entropy"], meta["model"], meta["seed"], returns, dataset_sha256=sha)
        write_curve(s["curves"][str(e)], [[1, 1.0, 1e-3], [2, 0.5, 1e-3]],
                    {"model": meta["model"], "seed": meta["seed"], "dataset_sha256": sha})  # fmt: skip


def test_a_curve_given_for_another_runs_evaluation_is_refused_naming_both(synthetic, capsys):
    from morl.cli import main

    curves_naming_their_runs(synthetic)
    ev = [str(e) for e in synthetic["evals"]]
    cv = [str(synthetic["curves"][e]) for e in ev]
    out_dir = synthetic["dir"] / "cli"
    argv = ["aggregate", "--evaluations", *ev, "--fronts", str(synthetic["front"])]
    assert main([*argv, "--curves", *cv, "--out-dir", str(out_dir)]) == 0
    capsys.readouterr()
    # the curves of seeds 0 and 1 of MODT(P) swapped: the plot would label each with the other's seed
    swapped = [cv[1], cv[0], *cv[2:]]
    assert main([*argv, "--curves", *swapped, "--out-dir", str(synthetic["dir"] / "swapped")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{cv[1]} and {ev[0]} do not belong together: seed 1 in the curve, 0 in the evaluation" in err
    assert not (synthetic["dir"] / "swapped").exists()  # refused before any table is written
    # a curve of another model, and one of another dataset
    synthetic["curves"][ev[0]] = cv[2]
    with pytest.raises(FileMismatchError, match=r"curve2\.csv and .*dtp0\.parquet do not belong together: "
                                                r"model bc in the curve, dt-p in the evaluation"):  # fmt: skip
        run_aggregate(synthetic, plots=False)
    from morl.curves import write_curve

    write_curve(cv[0], [[1, 1.0, 1e-3]], {"model": "dt-p", "seed": 0, "dataset_sha256": "cd" * 32})
    synthetic["curves"][ev[0]] = cv[0]
    with pytest.raises(FileMismatchError, match=r"dataset cdcdcdcdcdcd in the curve, abababababab in the evaluation"):
        run_aggregate(synthetic, plots=False)


def test_curves_that_name_no_run_are_still_plotted(synthetic):
    """A curve written before curves named their run (step, loss, lr only), as docs/*/runs hold."""
    from morl.curves import read_curve_run

    assert all(read_curve_run(c) is None for c in synthetic["curves"].values())
    written = run_aggregate(synthetic, plots=True)
    assert any(k.startswith("curves:") for k in written)


@pytest.mark.parametrize("column, value", [("preference", float("nan")), ("preference", float("inf")),
                                           ("target_return", float("nan")), ("target_return", -float("inf"))])  # fmt: skip
def test_a_damaged_preference_or_target_is_named_with_its_file(tmp_path, capsys, column, value):
    prefs = np.array([[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]])
    targets = np.zeros_like(prefs)
    (prefs if column == "preference" else targets)[2, 1] = value
    res = {"preferences": prefs, "targets": targets, "returns": np.full((3, 2), 1000.0), "lengths": np.full(3, 500.0),
           "seeds": np.zeros((3, 1), int), "summary": {}}  # fmt: skip
    bad = tmp_path / "bad.parquet"
    write_evaluation(bad, res, {"kind": "model", "env_id": ENV, "quality": "expert", "entropy": "high",
                                "model": "bc", "train_seed": 0})  # fmt: skip
    with pytest.raises(InputError, match=rf"bad\.parquet: column '{column}' holds NaN or infinite values \(1 rows, "
                                         r"the first row 2\); the file is damaged"):  # fmt: skip
        aggregate([bad], [], tmp_path / "tables", plots=False)
    from morl.cli import main

    assert main(["aggregate", "--evaluations", str(bad), "--out-dir", str(tmp_path / "cli")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}: column '{column}' holds NaN" in err
    assert not (tmp_path / "tables").exists() and not (tmp_path / "cli").exists()


def test_evaluations_of_a_dataset_replaced_since_are_refused(tmp_path):
    """An imported dataset replaced by a copy that keeps an older mtime (cp -p, rsync -a, an archive)
    rebuilds nothing in Snakemake; its changed identity reruns `aggregate`, which compares each
    evaluation's recorded dataset SHA-256 (and its reference dataset's) with the file's now and
    refuses, naming both files. Recorded paths that are not the workflow's files are not checked."""
    import hashlib
    import os

    from morl.data import file_identity

    def sha(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()

    data, other = tmp_path / "d4morl", tmp_path / "elsewhere"
    data.mkdir(), other.mkdir()
    dataset, reference = data / "amateur-high.parquet", data / "expert-high.parquet"
    dataset.write_bytes(b"the data the run was made from")
    reference.write_bytes(b"the expert-high data")
    (other / "amateur-high.parquet").write_bytes(b"a file of another machine's slice")
    e0 = fake_eval(tmp_path / "e0.parquet", "amateur", "high", "bc", 0, [[1.0, 2.0]],
                   dataset=str(dataset), dataset_sha256=sha(dataset))  # fmt: skip
    e1 = fake_eval(tmp_path / "e1.parquet", "amateur", "high", "bc-p", 0, [[2.0, 1.0]], dataset=str(dataset),
                   dataset_sha256=sha(dataset), reference_dataset=str(reference), reference_dataset_sha256=sha(reference))  # fmt: skip
    e2 = fake_eval(tmp_path / "e2.parquet", "expert", "low", "rvs", 0, [[1.5, 1.5]],  # a slice's, made elsewhere
                   dataset=str(other / "amateur-high.parquet"), dataset_sha256="cd" * 32)  # fmt: skip
    evals, in_use = [e0, e1, e2], [dataset, reference]
    aggregate(evals, [], tmp_path / "t", plots=False, datasets_in_use=in_use)

    # the old data comes back with its old time: not newer, but another file to the identity
    old = tmp_path / "old.parquet"
    old.write_bytes(b"older data of the same cell")
    os.utime(old, ns=(10**18, 10**18))
    before, was = file_identity(dataset), sha(dataset)
    shutil.copy2(old, dataset)  # cp -p
    assert dataset.stat().st_mtime_ns < before[1] and file_identity(dataset) != before
    spelled = data / ".." / "d4morl" / "amateur-high.parquet"
    for given in (in_use, [spelled]):
        with pytest.raises(InputError) as caught:
            aggregate(evals, [], tmp_path / "t", plots=False, datasets_in_use=given)
        assert str(caught.value) == (
            f"{e0} was evaluated on a dataset with sha256 {was[:12]}, but {dataset} now holds sha256 "
            f"{sha(dataset)[:12]}: the file was replaced after the run (a copy that is not newer than the results "
            "made from it, as cp -p, rsync -a and archives make, rebuilds none of them); "
            f"run `touch {dataset}` and snakemake again to rebuild them"
        )
    # committed slices and `morl aggregate` by hand name no files in use: nothing is hashed
    aggregate(evals, [], tmp_path / "t", plots=False)

    dataset.write_bytes(b"the data the run was made from")  # back as it was
    reference.write_bytes(b"the expert-high data, replaced")
    with pytest.raises(InputError, match=rf"^{re.escape(str(e1))} is of a model normalised with a dataset with sha256 "
                                         rf"[0-9a-f]{{12}}, but {re.escape(str(reference))} now holds"):  # fmt: skip
        aggregate(evals, [], tmp_path / "t", plots=False, datasets_in_use=in_use)
    aggregate([e0, e2], [], tmp_path / "t", plots=False, datasets_in_use=in_use)  # e0 was not normalised with it
