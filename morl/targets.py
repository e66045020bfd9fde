"""A run's paper comparison read against the PEDA paper's main findings, row by row.

``paper_comparison.csv`` (written by ``morl aggregate`` and ``morl merge-slices``) holds each model's
HV as a fraction of B, ours beside the paper's, per High-H dataset. This module turns it into the
checks a user regenerating the paper's table asks first, each with the numbers it rests on:

- **close**: MODT(P) and MORvS(P), the paper's two headline models, within ``CLOSE`` (0.10) of the
  paper's HV / B;
- **naive below (P)**: wherever the paper's naive model (MODT, MORvS, BC, CQL) is more than
  ``NAIVE_GAP`` (10%) below its preference-conditioned counterpart, ours is below ours too;
- **ordering**: Kendall's tau between our and the paper's ordering of PEDA's six models (the four
  value-based ones have no published numbers or are not PEDA's), target ``TAU_TARGET`` on average;
- **stitching**: on the amateur data of Ant and Swimmer the paper's MORvS(P) beats B (HV / B >= 1);
  ours should too.

Rows where we have no evaluations yet are left out of the tally and listed as pending.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from morl.errors import InputError
from morl.tables import Cell, Table, dataset_label, display_name, kendall_tau, sort_datasets, to_markdown

#: MODT(P) and MORvS(P) count as reproduced within this distance of the paper's HV / B.
CLOSE = 0.10
#: The paper's naive model is "clearly below" its (P) counterpart when it is below (1 - NAIVE_GAP) x it.
NAIVE_GAP = 0.10
#: Kendall's tau over PEDA's six models, averaged over the rows, should reach this.
TAU_TARGET = 0.6
HEADLINE = ("dt-p", "rvs-p")
NAIVE_PAIRS = (("dt", "dt-p"), ("rvs", "rvs-p"), ("bc", "bc-p"), ("cql", "cql-p"))
PEDA_MODELS = ("dt-p", "rvs-p", "bc-p", "dt", "rvs", "bc")
#: (env, quality) rows where the paper's MORvS(P) exceeds B.
STITCHING_ROWS = (("MO-Ant-v2", "amateur"), ("MO-Swimmer-v2", "amateur"))

_COLUMNS = ("env", "quality", "entropy", "model", "our_fraction", "paper_fraction")


def read_comparison(path: str | Path) -> pl.DataFrame:
    """``paper_comparison.csv`` as a frame; one error line naming the file if it is not one."""
    path = Path(path)
    try:
        frame = pl.read_csv(path, infer_schema_length=None)
    except FileNotFoundError:
        raise InputError(
            f"{path}: no such file (morl aggregate or morl merge-slices writes paper_comparison.csv)"
        ) from None
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({type(exc).__name__})") from None
    missing = [c for c in _COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: not a paper comparison table (no column {', '.join(missing)})")
    for c in ("our_fraction", "paper_fraction"):
        if frame[c].dtype not in (pl.Float64, pl.Float32, pl.Int64, pl.Null):
            raise InputError(f"{path}: column {c} is not numeric")
    return frame.with_columns(pl.col("our_fraction", "paper_fraction").cast(pl.Float64))


def _fractions(frame: pl.DataFrame) -> dict[tuple[str, str, str], dict[str, tuple[float | None, float | None]]]:
    rows: dict[tuple[str, str, str], dict[str, tuple[float | None, float | None]]] = {}
    for r in frame.iter_rows(named=True):
        key = (r["env"], r["quality"], r["entropy"])
        ours, paper = r["our_fraction"], r["paper_fraction"]
        ours = None if ours is None or not math.isfinite(ours) else ours
        paper = None if paper is None or not math.isfinite(paper) else paper
        rows.setdefault(key, {})[r["model"]] = (ours, paper)
    return rows


def row_checks(models: dict[str, tuple[float | None, float | None]], env: str, quality: str) -> dict:
    """The four checks on one row (model -> (ours, paper) HV / B). A check without the numbers it
    needs is ``None``."""
    out: dict = {}
    for m in HEADLINE:
        ours, paper = models.get(m, (None, None))
        out[m] = None if ours is None or paper is None else (ours, paper, abs(ours - paper) <= CLOSE + 1e-12)
    naive = []
    for n, p in NAIVE_PAIRS:
        (on, pn), (op, pp) = models.get(n, (None, None)), models.get(p, (None, None))
        if pn is None or pp is None or not pn < (1 - NAIVE_GAP) * pp:
            continue  # the paper does not have this naive model clearly below its (P) one
        naive.append((n, p, on, op, None if on is None or op is None else on < op))
    out["naive"] = naive
    pairs = [(models[m][0], models[m][1]) for m in PEDA_MODELS
             if m in models and models[m][0] is not None and models[m][1] is not None]  # fmt: skip
    out["tau"] = kendall_tau([a for a, _ in pairs], [b for _, b in pairs]) if len(pairs) == len(PEDA_MODELS) else None
    if (env, quality) in STITCHING_ROWS:
        ours, paper = models.get("rvs-p", (None, None))
        out["stitch"] = None if ours is None else (ours, paper, ours >= 1.0)
    return out


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


def _close_cell(check) -> str:
    if check is None:
        return "—"
    ours, paper, ok = check
    return f"{ours:.2f} / {paper:.2f}: {_yes(ok)}" + ("" if ok else f" ({ours - paper:+.2f})")


def targets_table(frame: pl.DataFrame) -> tuple[Table, list[str]]:
    """The per-row table and the tally lines."""
    header = [Cell("env"), Cell("dataset")]
    header += [Cell(f"{display_name(m)} within ±{CLOSE:.2f}") for m in HEADLINE]
    header += [Cell(f"naive below (P) where the paper's is >{NAIVE_GAP:.0%} below"),
               Cell(f"τ, PEDA's six models (≥ {TAU_TARGET})"), Cell("MORvS(P) ≥ B")]  # fmt: skip
    rows, pending = [], []
    close = {m: [0, 0] for m in HEADLINE}
    naive_rows, taus, stitch = [0, 0], [], []
    fractions = _fractions(frame)
    for env, quality, entropy in sort_datasets(fractions):
        models = fractions[(env, quality, entropy)]
        checks = row_checks(models, env, quality)
        if all(checks[m] is None for m in HEADLINE) and checks["tau"] is None:
            pending.append(f"{env} {dataset_label(quality, entropy)}")
            continue
        for m in HEADLINE:
            if checks[m] is not None:
                close[m][0] += checks[m][2]
                close[m][1] += 1
        parts, all_ok, known = [], True, False
        for n, _, on, op, ok in checks["naive"]:
            if ok is None:
                parts.append(f"{display_name(n)} —")
                continue
            known, all_ok = True, all_ok and ok
            parts.append(f"{display_name(n)} {on:.2f} {'<' if ok else '≥'} {op:.2f}")
        if known:
            naive_rows[0] += all_ok
            naive_rows[1] += 1
        naive_cell = "no naive model clearly below in the paper" if not checks["naive"] else (
            ", ".join(parts) + (f": {_yes(all_ok)}" if known else ""))  # fmt: skip
        tau = checks["tau"]
        if tau is not None:
            taus.append(tau)
        stitch_cell = ""
        if "stitch" in checks:
            s = checks["stitch"]
            stitch_cell = "—" if s is None else f"{s[0]:.2f} / {s[1]:.2f}: {_yes(s[2])}"
            if s is not None:
                stitch.append((env, s[2]))
        rows.append([
            Cell(env), Cell(dataset_label(quality, entropy)), *[Cell(_close_cell(checks[m])) for m in HEADLINE],
            Cell(naive_cell), Cell("—" if tau is None else f"{tau:+.2f}: {_yes(tau >= TAU_TARGET)}"), Cell(stitch_cell),
        ])  # fmt: skip
    tally = [
        f"{display_name(m)} within ±{CLOSE:.2f} of the paper's HV / B on {close[m][0]} of {close[m][1]} rows"
        for m in HEADLINE
    ]
    tally.append(f"naive models below their (P) counterparts where the paper has them clearly below: "
                 f"{naive_rows[0]} of {naive_rows[1]} rows")  # fmt: skip
    if taus:
        tally.append(f"Kendall's τ over PEDA's six models: mean {sum(taus) / len(taus):+.2f} over {len(taus)} rows "
                     f"(target ≥ {TAU_TARGET})")  # fmt: skip
    if stitch:
        tally.append("MORvS(P) ≥ B on amateur data: " + ", ".join(f"{e} {_yes(ok)}" for e, ok in stitch))
    if pending:
        tally.append("not evaluated yet: " + "; ".join(pending))
    notes = [
        "Each cell reads `paper_comparison.csv`: HV as a fraction of B, ours / the paper's.",
        f"A naive model is clearly below in the paper when its HV / B is under {1 - NAIVE_GAP:.2f} x its (P) "
        "counterpart's; the cell lists those models, ours against our (P) model.",
        "τ: Kendall's tau-a between our and the paper's ordering of MODT(P), MORvS(P), BC(P), MODT, MORvS and BC.",
        "MORvS(P) ≥ B: on the amateur rows of Ant and Swimmer, where the paper's MORvS(P) beats its data.",
    ]
    return Table("The paper's findings, row by row", header, rows, notes, n_label_columns=2), tally


def targets_markdown(frame: pl.DataFrame) -> str:
    table, tally = targets_table(frame)
    return "\n".join([f"# {table.title}", "", to_markdown(table), "", "Tally:", "", *[f"- {t}" for t in tally], ""])


def write_targets(comparison: str | Path, output: str | Path | None = None) -> str:
    text = targets_markdown(read_comparison(comparison))
    if output is not None:
        Path(output).write_text(text)
    return text
