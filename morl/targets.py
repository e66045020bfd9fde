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

import csv
import io
import math
from pathlib import Path

import polars as pl

from morl.errors import InputError
from morl.paper import PUBLISHED_ENTROPY, PUBLISHED_HV, published_fraction
from morl.render import Cell, Table, to_markdown
from morl.tables import dataset_label, display_name, kendall_tau, sort_datasets

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
#: Columns that hold a number, an empty cell meaning "none": fractions and HVs (finite, >= 0).
_NUMBERS = ("our_fraction", "paper_fraction", "our_hv", "our_b_hv", "paper_hv", "paper_b_hv")
#: Two fractions count as the same number within this relative distance (a CSV round trip is exact).
_SAME = 1e-9


def _known_env(env: str) -> bool:
    from morl.envs.tasks import ENV_SPECS, MO_GYMNASIUM_ID

    return env in ENV_SPECS or MO_GYMNASIUM_ID.match(env) is not None


def _number(path: Path, line: int, column: str, text: str) -> float | None:
    """One numeric cell: ``None`` when empty; an error line for text, NaN, infinity or a negative value."""
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{path}: line {line}: {column} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise InputError(f"{path}: line {line}: {column} is {text!r}, not a finite number")
    if value < 0:
        raise InputError(f"{path}: line {line}: {column} is {text}, below 0 (HVs and HV / B are never negative)")
    return value


def _seed_count(path: Path, line: int, text: str) -> int:
    text = text.strip()
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{path}: line {line}: n_seeds {text!r} is not a whole number") from None
    if value < 0:
        raise InputError(f"{path}: line {line}: n_seeds is {value}, below 0")
    return value


def _check_row(path: Path, line: int, r: dict) -> None:
    """What one parsed row must agree with: a known env and model, the paper's own number, its seeds."""
    from morl.families import model_order

    env, quality, entropy, model = r["env"], r["quality"], r["entropy"], r["model"]
    if not _known_env(env):
        raise InputError(f"{path}: line {line}: unknown env {env!r}")
    if model not in model_order():
        raise InputError(f"{path}: line {line}: unknown model {model!r}; known models: {', '.join(model_order())}")
    published = published_fraction(env, quality, entropy, model)
    paper = r["paper_fraction"]
    if paper is not None and published is None:
        raise InputError(
            f"{path}: line {line}: paper_fraction {paper} for {env} {quality} {entropy} {model}, "
            "a cell the paper publishes no number for"
        )
    if paper is not None and abs(paper - published) > _SAME * published:
        raise InputError(
            f"{path}: line {line}: paper_fraction {paper} for {env} {quality} {entropy} {model} is not the "
            f"paper's ({published})"
        )
    ours, hv, b = r["our_fraction"], r.get("our_hv"), r.get("our_b_hv")
    if ours is not None and hv is not None and b and abs(ours - hv / b) > _SAME * max(ours, 1e-300):
        raise InputError(f"{path}: line {line}: our_fraction {ours} is not our_hv / our_b_hv ({hv / b})")
    if ours is not None and r.get("n_seeds") == 0:
        raise InputError(f"{path}: line {line}: our_fraction {ours} with n_seeds 0 (no run to have it)")


def read_comparison(path: str | Path) -> pl.DataFrame:
    """``paper_comparison.csv`` as a frame; one error line naming the file (and the line) if it is
    not one: a missing column, a ragged row, a number that is not finite or is negative, an unknown
    env or model, a paper number that is not the paper's, two rows for one cell, or no rows, or none
    the paper publishes a number for."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(
            f"{path}: no such file (morl aggregate or morl merge-slices writes paper_comparison.csv)"
        ) from None
    except IsADirectoryError:
        raise InputError(f"{path}: a folder, not a paper comparison table") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a readable CSV file (not UTF-8 text)") from None
    try:
        lines = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc})") from None
    if not lines or not any(c.strip() for c in lines[0]):
        raise InputError(f"{path}: empty, not a paper comparison table (no header)")
    header = [c.strip() for c in lines[0]]
    missing = [c for c in _COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path}: not a paper comparison table (no column {', '.join(missing)})")
    doubled = sorted({c for c in header if header.count(c) > 1})
    if doubled:
        raise InputError(f"{path}: column {', '.join(doubled)} appears more than once in the header")
    records, seen = [], {}
    for line, cells in enumerate(lines[1:], start=2):
        if not cells:  # a blank line
            continue
        if len(cells) != len(header):
            raise InputError(f"{path}: line {line} has {len(cells)} fields, the header has {len(header)}")
        raw = dict(zip(header, cells, strict=True))
        r: dict = {c: raw[c].strip() for c in ("env", "quality", "entropy", "model")}
        for c, v in r.items():
            if not v:
                raise InputError(f"{path}: line {line}: {c} is empty")
        for c in _NUMBERS:
            if c in raw:
                r[c] = _number(path, line, c, raw[c])
        if "n_seeds" in raw:
            r["n_seeds"] = _seed_count(path, line, raw["n_seeds"])
        _check_row(path, line, r)
        key = (r["env"], r["quality"], r["entropy"], r["model"])
        if key in seen:
            raise InputError(f"{path}: lines {seen[key]} and {line} are both {' '.join(key)}: one row per cell")
        seen[key] = line
        records.append({c: r[c] for c in _COLUMNS})
    if not records:
        raise InputError(f"{path}: no rows, only a header (morl aggregate writes one row per dataset and model)")
    if all(r["paper_fraction"] is None for r in records):
        raise InputError(
            f"{path}: no published numbers to compare with: the paper publishes HV for {PUBLISHED_ENTROPY}-H "
            f"datasets of {', '.join(sorted({e for e, _, _ in PUBLISHED_HV}))} only"
        )
    schema = {c: pl.String for c in _COLUMNS[:4]} | {"our_fraction": pl.Float64, "paper_fraction": pl.Float64}
    return pl.DataFrame(records, schema=schema)


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
