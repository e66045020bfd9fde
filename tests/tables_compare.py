"""Comparing tables made afresh with the committed ones they should equal.

A committed table is made from committed numbers (evaluation files, fronts, front models). Most
of its numbers are float64 arithmetic on them that repeats byte for byte on any x86-64 CPU. A
few pass through floating-point kernels whose lowest bits depend on the kind of CPU (its vector
width, whether it fuses multiply and add, the summation order a kernel picks for it):

* MODULI's return deviation evaluates a front model (:mod:`morl.front_model`) with torch's
  float32 kernels;
* EUM takes the best of ``w @ R`` (a BLAS product) over weights that pymoo's Riesz s-energy
  iteration places.

A table made on one kind of CPU then equals the committed one only to within a relative
:data:`KERNEL_REL` in those columns. So a CSV is parsed: its header, its row count and every
non-numeric cell must be identical, every number must have the same bytes, except in a column of
:data:`KERNEL_COLUMNS`, where it may differ by :data:`KERNEL_REL` relative. A Markdown or LaTeX
table prints those numbers rounded: its lines must be identical, except that in a column headed by
one of :data:`KERNEL_LABELS` a number may differ by one unit of its last printed digit (a value
at the edge of a rounding step; the unrounded value is checked in the CSV). Every difference is
reported with its file, its row and column (or line and column) and by how much.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable
from pathlib import Path

#: The relative difference allowed in a number that passes through a CPU-dependent float kernel.
KERNEL_REL = 1e-6

#: The CSV columns whose numbers pass through such kernels (module docstring).
KERNEL_COLUMNS = frozenset({"rd_held_out", "rd_held_out_mean", "rd_held_out_std", "eum"})

#: The headers of the Markdown and LaTeX columns that print them.
KERNEL_LABELS = frozenset({"EUM", "RD held-out (unit)"})

#: A number as the tables print it.
NUMBER = re.compile(r"[-+−]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _number(text: str) -> float | None:
    try:
        return float(text.replace("−", "-"))
    except ValueError:
        return None


def relative_difference(a: float, b: float) -> float:
    """|a - b| relative to the larger of the two in magnitude; 0 for equal values (NaN equals NaN
    here), inf where only one is finite."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b))


def csv_differences(name: str, committed: str, made: str, rel: float = KERNEL_REL) -> list[str]:
    """How the CSV text ``made`` differs from ``committed`` (of the file ``name``), one message per
    difference; empty when they are equal as the module docstring says."""
    old, new = list(csv.reader(io.StringIO(committed))), list(csv.reader(io.StringIO(made)))
    if not old or not new:
        return [] if old == new else [f"{name}: one of the two is empty"]
    if old[0] != new[0]:
        return [f"{name}: the header differs: committed {old[0]}, made {new[0]}"]
    if len(old) != len(new):
        return [f"{name}: {len(old) - 1} rows committed, {len(new) - 1} made"]
    header, out = old[0], []
    for i, (a_row, b_row) in enumerate(zip(old[1:], new[1:]), start=1):
        if len(a_row) != len(b_row):
            out.append(f"{name}: row {i} has {len(a_row)} cells committed, {len(b_row)} made")
            continue
        for column, a, b in zip(header, a_row, b_row):
            if a == b:
                continue
            where = f"{name}: row {i} ({','.join(a_row[:5])}), column {column}"
            x, y = _number(a), _number(b)
            if x is None or y is None:
                out.append(f"{where}: committed {a!r}, made {b!r}")
            elif column not in KERNEL_COLUMNS:
                out.append(f"{where}: committed {a}, made {b}, relative difference "
                           f"{relative_difference(x, y):.3g}; this column must repeat byte for byte")  # fmt: skip
            elif relative_difference(x, y) > rel:
                out.append(f"{where}: committed {a}, made {b}, relative difference "
                           f"{relative_difference(x, y):.3g} > {rel:g}")  # fmt: skip
    return out


def _last_digit_unit(token: str) -> float:
    """One unit of the last printed digit of ``token`` (``12.34`` -> 0.01, ``1.5e3`` -> 100)."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.split(".", 1)[1]) if "." in mantissa else 0
    return 10.0 ** (int(exponent or 0) - decimals)


def _cells(line: str) -> list[str] | None:
    """The cells of a Markdown or LaTeX table row, None for a line that is not one."""
    text = line.strip()
    if text.startswith("|") and text.endswith("|"):
        return [c.strip() for c in text[1:-1].split("|")]
    if text.endswith("\\\\") and " & " in text:
        return [c.strip() for c in text[:-2].split(" & ")]
    return None


def _headers(lines: list[str]) -> list[list[str] | None]:
    """For each line, the header of the table it is a row of (None outside a table): a Markdown
    table's header is the row above its ``|---|`` line, a LaTeX table's the row after ``\\toprule``."""
    out: list[list[str] | None] = []
    header = None
    for i, line in enumerate(lines):
        cells = _cells(line)
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        previous = lines[i - 1].strip() if i else ""
        if cells is not None and (previous == "\\toprule" or (following and set(following) <= set("|-: "))):
            header = cells
        elif cells is None and not (line.strip() in ("\\midrule", "\\bottomrule") or set(line.strip()) <= set("|-: ")):
            header = None
        out.append(header if cells is not None else None)
    return out


def text_differences(name: str, committed: str, made: str) -> list[str]:
    """How the Markdown or LaTeX text ``made`` differs from ``committed`` (of the file ``name``), one
    message per difference; empty when they are equal as the module docstring says."""
    old, new = committed.splitlines(), made.splitlines()
    if len(old) != len(new):
        return [f"{name}: {len(old)} lines committed, {len(new)} made"]
    out = []
    for i, (a, b, header) in enumerate(zip(old, new, _headers(old)), start=1):
        if a == b:
            continue
        a_cells, b_cells = _cells(a), _cells(b)
        if header is None or a_cells is None or b_cells is None or not len(header) == len(a_cells) == len(b_cells):
            out.append(f"{name}: line {i}: committed {a!r}, made {b!r}")
            continue
        for column, x, y in zip(header, a_cells, b_cells):
            if x == y:
                continue
            where = f"{name}: line {i} ({' | '.join(a_cells[:3])}), column {column!r}"
            xs, ys = NUMBER.findall(x), NUMBER.findall(y)
            if column not in KERNEL_LABELS or NUMBER.sub("#", x) != NUMBER.sub("#", y) or len(xs) != len(ys):
                out.append(f"{where}: committed {x!r}, made {y!r}")
                continue
            for p, q in zip(xs, ys):
                unit = max(_last_digit_unit(p), _last_digit_unit(q))
                gap = abs(_number(p) - _number(q))
                if gap > unit * (1 + 1e-9):
                    out.append(f"{where}: committed {p}, made {q}, differ by {gap:.3g}, more than one unit of "
                               f"the last printed digit ({unit:g})")  # fmt: skip
    return out


def differences(committed: Path, made: Path, names: Iterable) -> list[str]:
    """Every difference between the files ``names`` of the folder ``committed`` and those of the
    folder ``made``: CSVs by :func:`csv_differences`, Markdown and LaTeX by
    :func:`text_differences`, any other file byte for byte."""
    out = []
    for n in map(str, names):
        a, b = committed / n, made / n
        if not b.is_file():
            out.append(f"{n}: committed but not made")
        elif n.endswith(".csv"):
            out += csv_differences(n, a.read_text(), b.read_text())
        elif n.endswith((".md", ".tex")):
            out += text_differences(n, a.read_text(), b.read_text())
        elif a.read_bytes() != b.read_bytes():
            out.append(f"{n}: the bytes differ")
    return out
