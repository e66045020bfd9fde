"""The paper's result tables, from the per-evaluation metrics, as Markdown, CSV, LaTeX and HTML.

Input is the ``metrics`` frame of :func:`morl.aggregate.collect_metrics` (one row per evaluation
file: env, quality, entropy, model, seed, hv, sp, ...) and ``data_hv``, B of each dataset: the HV
of the data's own front (its card's "data HV", :func:`morl.dataset_info.read_card`), as the PEDA
paper's tables define B. A coverage variant's rows use the B of the complete dataset it was cut
from (:func:`b_of`). Polars does the grouping.

* :func:`metric_long` - one row per table cell and seed, raw and in the paper's units (the CSV);
* :func:`metric_table` - HV or SP in the paper's layout: rows env x dataset, columns the models
  (and B in the HV table), cells mean ± std over seeds in the paper's units, best model per row
  in bold;
* :func:`comparison_long` / :func:`comparison_table` - each model's HV as a fraction of our B,
  beside the same fraction from the published numbers (:mod:`morl.paper`);
* :func:`to_markdown`, :func:`to_latex` (booktabs), :func:`to_html` - one renderer per format
  for every :class:`Table`.

A cell without any evaluation is shown as "—" and explained in a footnote, so the tables can be
built while an experiment is still running.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from morl.collect import QUALITIES
from morl.families import display_names
from morl.families import model_order as registry_order
from morl.paper import HV_UNITS, PUBLISHED_ENTROPY, SP_UNITS, published_fraction, published_hv
from morl.preferences import ENTROPY_LEVELS


def model_order(models: Iterable[str]) -> list[str]:
    """``models`` in the paper's column order, then any model that order does not list, by name:
    a model that was evaluated always gets a column."""
    present = set(models)
    order = registry_order()
    return [m for m in order if m in present] + sorted(present - set(order))


def display_name(model: str) -> str:
    return display_names().get(model, model)


MISSING = "—"
PARTIAL_MARK = "†"
DIGITS = 2

Dataset = tuple[str, str, str]  # (env, quality, entropy)


def b_of(data_hv: Mapping[Dataset, float], dataset: Dataset) -> float | None:
    """B of a table row: the data HV of its dataset; a coverage variant (entropy ``high-shattered``)
    takes the B of the complete dataset it was cut from, so that its runs and those on the
    complete data are divided by the same number. None when no card gave it."""
    env, quality, entropy = dataset
    return data_hv.get((env, quality, entropy.partition("-")[0]))


@dataclass(frozen=True)
class Metric:
    key: str  # column of the metrics frame
    title: str
    units: dict[str, float]
    higher_is_better: bool


HV = Metric("hv", "Hypervolume (HV, higher is better)", HV_UNITS, True)
SP = Metric("sp", "Sparsity (SP, lower is better)", SP_UNITS, False)
METRICS = {"hv": HV, "sp": SP}


@dataclass
class Cell:
    """One table cell: plain text (Markdown/HTML), its LaTeX form, and whether it is bold."""

    text: str
    latex: str | None = None
    bold: bool = False

    @property
    def tex(self) -> str:
        return self.latex if self.latex is not None else latex_escape(self.text)


@dataclass
class Table:
    title: str
    header: list[Cell]
    rows: list[list[Cell]]
    notes: list[str] = field(default_factory=list)
    n_label_columns: int = 3  # left-aligned label columns; the rest are numbers


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def unit_label(unit: float) -> str:
    return "1" if unit == 1 else f"1e{int(round(math.log10(unit)))}"


def unit_latex(unit: float) -> str:
    return "$1$" if unit == 1 else f"$\\times 10^{{{int(round(math.log10(unit)))}}}$"


def dataset_label(quality: str, entropy: str) -> str:
    """``expert high-H``; a coverage variant's entropy ``high-shattered`` reads ``expert high-H shattered``."""
    level, _, coverage = entropy.partition("-")
    return f"{quality} {level}-H" + (f" {coverage}" if coverage else "")


def sort_datasets(datasets: Iterable[Dataset]) -> list[Dataset]:
    """Env, then expert before amateur, then high, medium, low entropy (the paper's order), then the
    complete data before its coverage variants."""

    def key(d):
        env, q, h = d
        level, _, coverage = h.partition("-")
        return (
            env,
            QUALITIES.index(q) if q in QUALITIES else 9,
            ENTROPY_LEVELS.index(level) if level in ENTROPY_LEVELS else 9,
            coverage,
        )

    return sorted(set(datasets), key=key)


def ordered_models(models: Iterable[str] | None, metrics: pl.DataFrame) -> list[str]:
    """Models in the paper's column order: those asked for, else those evaluated, else every registered one."""
    chosen = set(models) if models is not None else set(metrics["model"].to_list())
    return model_order(chosen) or list(registry_order())


# Characters LaTeX treats specially, and the non-ASCII ones our tables use.
_LATEX_REPLACEMENTS = {
    **{ch: "\\" + ch for ch in "&%$#_{}"},
    "\\": "\\textbackslash{}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}",
    MISSING: "---", "±": "$\\pm$", "×": "$\\times$", PARTIAL_MARK: "$^\\dagger$",
    "τ": "$\\tau$", "−": "$-$", "§": "\\S{}", "Σ": "$\\Sigma$", "·": "$\\cdot$", "≥": "$\\geq$",
    "≤": "$\\leq$", "–": "--", "‖": "$\\|$", "₁": "$_1$", "₂": "$_2$",
}  # fmt: skip


def latex_escape(text: str) -> str:
    # Any other non-ASCII character becomes "?": pdflatex stops at a character it has no glyph for.
    return "".join(_LATEX_REPLACEMENTS.get(ch, ch if ord(ch) < 128 else "?") for ch in text)


# ---------------------------------------------------------------------------------------------
# HV / SP tables
# ---------------------------------------------------------------------------------------------

LONG_SCHEMA = {
    "metric": pl.String,
    "env": pl.String,
    "quality": pl.String,
    "entropy": pl.String,
    "model": pl.String,
    "seed": pl.Int64,
    "value": pl.Float64,
    "unit": pl.Float64,
    "value_in_units": pl.Float64,
}


def metric_long(
    metrics: pl.DataFrame,
    data_hv: Mapping[Dataset, float],
    datasets: Sequence[Dataset],
    metric: Metric,
    models: Sequence[str],
) -> pl.DataFrame:
    """One row per table cell and seed: metric, env, quality, entropy, model, seed, value (raw), unit,
    value_in_units. For HV, B (the dataset's own front, ``data_hv``) has a null seed, one row per
    dataset row that has it; the SP table has no B. Cells without evaluations have no rows."""
    schema = {"env": pl.String, "quality": pl.String, "entropy": pl.String, "_row": pl.Int64}
    cells = pl.DataFrame([(*d, i) for i, d in enumerate(datasets)], orient="row", schema=schema)
    runs = (
        metrics.filter(pl.col("model").is_in(list(models)))
        .select("env", "quality", "entropy", "model", pl.col("seed").cast(pl.Int64), pl.col(metric.key).alias("value"))
        .join(cells, on=["env", "quality", "entropy"], how="inner")
    )
    b_rows = [
        (*d, "B", None, b, i)
        for i, d in enumerate(datasets)
        if metric.key == HV.key and (b := b_of(data_hv, tuple(d))) is not None
    ]
    b_schema = {k: LONG_SCHEMA[k] for k in ("env", "quality", "entropy", "model", "seed", "value")}
    b = pl.DataFrame(b_rows, orient="row", schema={**b_schema, "_row": pl.Int64})
    units = pl.DataFrame({"env": list(metric.units), "unit": list(metric.units.values())})
    column = pl.DataFrame({"model": ["B", *models], "_col": list(range(len(models) + 1))})
    return (
        pl.concat([b, runs.with_columns(pl.col("value").cast(pl.Float64))])
        .join(units, on="env", how="left")
        .join(column, on="model", how="left")
        .with_columns(pl.col("unit").fill_null(1.0))
        .with_columns((pl.col("value") / pl.col("unit")).alias("value_in_units"), pl.lit(metric.key).alias("metric"))
        .sort("_row", "_col", "seed", nulls_last=True)
        .select(list(LONG_SCHEMA))
    )


def cell_stats(long: pl.DataFrame) -> dict[tuple[str, str, str, str], dict]:
    """{(env, quality, entropy, model): {mean, std, n}} in the paper's units; std over seeds (ddof 0)."""
    grouped = long.group_by("env", "quality", "entropy", "model").agg(
        pl.col("value_in_units").mean().alias("mean"),
        pl.col("value_in_units").std(ddof=0).alias("std"),
        pl.len().alias("n"),
    )
    return {(r["env"], r["quality"], r["entropy"], r["model"]): r for r in grouped.iter_rows(named=True)}


def fmt_number(x: float) -> tuple[str, str]:
    """``x`` with two decimals, as the paper prints; values too small for that get two significant
    digits (``3.1e-05``), so a small experiment's numbers do not all read 0.00. (text, LaTeX)."""
    if x == 0 or abs(x) >= 0.5 * 10**-DIGITS:
        s = f"{x:.{DIGITS}f}"
        return s, s
    mant, exp = f"{x:.1e}".split("e")
    return f"{mant}e{exp}", f"${mant}\\times 10^{{{int(exp)}}}$"


def _format_stat(stat: dict | None, expected_seeds: int | None) -> tuple[str, str]:
    if stat is None:
        return MISSING, "---"
    text, tex = fmt_number(stat["mean"])
    if stat["n"] > 1:
        # the std in the mean's style: two decimals beside two decimals, as the paper prints
        s_text, s_tex = fmt_number(stat["std"]) if "e" in text else (f"{stat['std']:.{DIGITS}f}",) * 2
        text, tex = f"{text} ± {s_text}", f"{tex} $\\pm$ {s_tex}"
    if expected_seeds is not None and stat["model"] != "B" and stat["n"] < expected_seeds:
        text, tex = text + PARTIAL_MARK, tex + "$^\\dagger$"
    return text, tex


def metric_table(
    metrics: pl.DataFrame,
    data_hv: Mapping[Dataset, float],
    datasets: Sequence[Dataset],
    metric: Metric,
    models: Sequence[str] | None = None,
    expected_seeds: int | None = None,
) -> Table:
    """HV or SP in the paper's layout (rows env x dataset; columns B (HV only), MODT(P), ..., BC)."""
    models = ordered_models(models, metrics)
    datasets = list(datasets)
    stats = cell_stats(metric_long(metrics, data_hv, datasets, metric, models))
    columns = ["B", *models] if metric.key == HV.key else list(models)
    header = [Cell("env"), Cell("dataset"), Cell("unit"), *[Cell(display_name(m)) for m in columns]]
    rows, any_missing, any_partial, b_missing = [], False, False, False
    for env, quality, entropy in datasets:
        unit = metric.units.get(env, 1.0)
        row = [Cell(env), Cell(dataset_label(quality, entropy)), Cell(f"×{unit_label(unit)}", unit_latex(unit))]
        cells = {}
        for m in columns:
            st = stats.get((env, quality, entropy, m))
            text, tex = _format_stat(st, expected_seeds)
            cells[m] = Cell(text, tex)
            if m == "B":
                b_missing |= st is None
            else:
                any_missing |= st is None
            any_partial |= PARTIAL_MARK in text
        # best model of the row: compare the means as displayed, so ties are bolded alike
        shown = {
            m: float(fmt_number(stats[(env, quality, entropy, m)]["mean"])[0])
            for m in models
            if (env, quality, entropy, m) in stats
        }
        if shown:
            best = max(shown.values()) if metric.higher_is_better else min(shown.values())
            for m, v in shown.items():
                cells[m].bold = v == best
        rows.append(row + [cells[m] for m in columns])
    units = ", ".join(f"{e} ×{unit_label(metric.units.get(e, 1.0))}" for e in dict.fromkeys(d[0] for d in datasets))
    notes = [
        f"Cells: mean ± std over training seeds (population std), divided by the paper's unit ({units or 'none'}); "
        "a single number is a single seed.",
    ]
    if metric.key == HV.key:
        notes.append(
            "B: the HV of the dataset's own front (its trajectories' returns), as the PEDA paper defines it; a "
            "coverage variant's row shows the B of the complete dataset it was cut from."
        )
    notes.append(
        f"Bold: the best model of the row ({'highest' if metric.higher_is_better else 'lowest'} mean as shown"
        + ("; B is not ranked)." if metric.key == HV.key else ").")
    )
    if not metric.higher_is_better and metric.key == "sp":
        notes.append(
            "SP alone misleads: a front that collapsed to one or two points scores 0 or near it; read it "
            "beside HV and the cardinality in the per-cell statistics."
        )
    if any_partial:
        notes.append(
            f"{PARTIAL_MARK} : fewer seeds evaluated than configured ({expected_seeds}); mean over the seeds found."
        )
    if any_missing:
        notes.append(f"{MISSING} : not evaluated yet (no evaluation file for this cell).")
    if b_missing:
        notes.append(f"{MISSING} under B: no card of the dataset was given, so its data HV is not known.")
    return Table(metric.title, header, rows, notes)


# ---------------------------------------------------------------------------------------------
# Paper comparison
# ---------------------------------------------------------------------------------------------


def comparison_long(
    metrics: pl.DataFrame,
    data_hv: Mapping[Dataset, float],
    datasets: Sequence[Dataset],
    models: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Per env, dataset and model: our mean HV and B (the dataset's own front; paper units), our
    HV / B, and the paper's."""
    models = ordered_models(models, metrics)
    stats = cell_stats(metric_long(metrics, data_hv, list(datasets), HV, models))
    rows = []
    for env, quality, entropy in datasets:
        b = stats.get((env, quality, entropy, "B"))
        for m in models:
            st = stats.get((env, quality, entropy, m))
            ours = st["mean"] / b["mean"] if st is not None and b is not None and b["mean"] > 0 else None
            rows.append(
                {
                    "env": env,
                    "quality": quality,
                    "entropy": entropy,
                    "model": m,
                    "n_seeds": st["n"] if st else 0,
                    "our_hv": st["mean"] if st else None,
                    "our_b_hv": b["mean"] if b else None,
                    "our_fraction": ours,
                    "paper_hv": published_hv(env, quality, entropy, m),
                    "paper_b_hv": published_hv(env, quality, entropy, "B"),
                    "paper_fraction": published_fraction(env, quality, entropy, m),
                }
            )
    schema = {
        "env": pl.String,
        "quality": pl.String,
        "entropy": pl.String,
        "model": pl.String,
        "n_seeds": pl.Int64,
        "our_hv": pl.Float64,
        "our_b_hv": pl.Float64,
        "our_fraction": pl.Float64,
        "paper_hv": pl.Float64,
        "paper_b_hv": pl.Float64,
        "paper_fraction": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall's tau-a between two rankings of the same items (None for fewer than two items)."""
    n = len(a)
    if n < 2:
        return None
    s = sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) for i in range(n) for j in range(i + 1, n))
    return float(s / (n * (n - 1) / 2))


def comparison_table(long: pl.DataFrame, datasets: Sequence[Dataset], models: Sequence[str]) -> Table:
    """Wide form of :func:`comparison_long`: one cell "ours / paper" per model, and how well the
    orderings of the models agree (Kendall's tau over the models both sides have)."""
    models = model_order(models)
    header = [
        Cell("env"),
        Cell("dataset"),
        Cell("B HV ours (unit)"),
        *[Cell(f"{display_name(m)} ours / paper") for m in models],
        Cell("rank agreement τ", "rank agreement $\\tau$"),
    ]
    by_key = {(r["env"], r["quality"], r["entropy"], r["model"]): r for r in long.iter_rows(named=True)}
    rows, any_missing, any_unpublished = [], False, False

    def frac(x):
        return MISSING if x is None else fmt_number(x)[0]

    for env, quality, entropy in datasets:
        b = next((by_key[(env, quality, entropy, m)]["our_b_hv"] for m in models), None)
        unit = HV_UNITS.get(env, 1.0)
        row = [
            Cell(env),
            Cell(dataset_label(quality, entropy)),
            Cell(
                MISSING if b is None else f"{fmt_number(b)[0]} (×{unit_label(unit)})",
                "---" if b is None else f"{fmt_number(b)[1]} ({unit_latex(unit)})",
            ),
        ]
        ours_v, paper_v = [], []
        for m in models:
            r = by_key[(env, quality, entropy, m)]
            any_missing |= r["our_fraction"] is None
            any_unpublished |= r["paper_fraction"] is None
            row.append(Cell(f"{frac(r['our_fraction'])} / {frac(r['paper_fraction'])}"))
            if r["our_fraction"] is not None and r["paper_fraction"] is not None:
                ours_v.append(r["our_fraction"])
                paper_v.append(r["paper_fraction"])
        tau = kendall_tau(ours_v, paper_v)
        row.append(Cell(MISSING if tau is None else f"{tau:+.2f}"))
        rows.append(row)
    notes = [
        "Each cell: the model's mean HV over seeds divided by B, the HV of the dataset's own front (its "
        "trajectories' returns), ours / the paper's (PEDA paper, High-H datasets; docs/protocol.md). 1.00 means as "
        "good as the data's front; above 1 the model stitched a better front than its data.",
        "Rank agreement: Kendall's τ between our and the paper's ordering of the models in the row "
        "(+1 same order, −1 reversed), over the models both sides have.",
    ]
    if any_unpublished:
        notes.append(
            f"{MISSING} after the slash: the paper publishes no number for this cell (it reports High-H "
            f"({PUBLISHED_ENTROPY}-entropy) datasets only)."
        )
    if any_missing:
        notes.append(
            f"{MISSING} before the slash: not evaluated yet (no evaluation file), or no B to divide by (no card "
            "of the dataset given, or a data HV of 0)."
        )
    return Table("Paper comparison: HV as a fraction of B, ours / published", header, rows, notes)


# ---------------------------------------------------------------------------------------------
# Renderers
# ---------------------------------------------------------------------------------------------


def to_markdown(table: Table) -> str:
    def md(c: Cell) -> str:
        return f"**{c.text}**" if c.bold else c.text

    lines = ["| " + " | ".join(md(c) for c in table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in table.rows]
    if table.notes:
        lines.append("")
        lines += [f"{n}  " for n in table.notes[:-1]] + [table.notes[-1]]
    return "\n".join(lines)


def to_latex(table: Table, label: str | None = None) -> str:
    """A booktabs ``table`` environment, ready to paste (needs ``\\usepackage{booktabs}``)."""

    def tex(c: Cell) -> str:
        return f"\\textbf{{{c.tex}}}" if c.bold else c.tex

    n_cols = len(table.header)
    spec = "l" * table.n_label_columns + "r" * (n_cols - table.n_label_columns)
    out = [
        "% Generated by morl.tables; needs \\usepackage{booktabs} and \\usepackage{graphicx}.",
        "\\begin{table}[t]",
        "\\centering",
        f"\\caption{{{latex_escape(table.title)}}}",
    ]
    if label:
        out.append(f"\\label{{{label}}}")
    out += [
        "\\resizebox{\\linewidth}{!}{%",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(tex(c) for c in table.header) + " \\\\",
        "\\midrule",
    ]
    out += [" & ".join(tex(c) for c in row) + " \\\\" for row in table.rows]
    out += ["\\bottomrule", "\\end{tabular}%", "}"]
    if table.notes:
        out.append("\\par\\smallskip\\footnotesize")
        out += [latex_escape(n) + ("\\\\" if i < len(table.notes) - 1 else "") for i, n in enumerate(table.notes)]
    out.append("\\end{table}")
    return "\n".join(out) + "\n"


def to_html(table: Table, table_id: str | None = None) -> str:
    def td(c: Cell, tag: str, i: int) -> str:
        cls = ' class="num"' if i >= table.n_label_columns else ""
        text = html.escape(c.text)
        return f"<{tag}{cls}>{'<strong>' + text + '</strong>' if c.bold else text}</{tag}>"

    ident = f' id="{table_id}"' if table_id else ""
    out = [f"<table{ident}>", f"<caption>{html.escape(table.title)}</caption>", "<thead><tr>"]
    out += [td(c, "th", i) for i, c in enumerate(table.header)]
    out += ["</tr></thead>", "<tbody>"]
    for row in table.rows:
        out.append("<tr>" + "".join(td(c, "td", i) for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    if table.notes:
        out.append('<ul class="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in table.notes) + "</ul>")
    return "\n".join(out)


HTML_STYLE = """
.morl-tables { font-family: system-ui, sans-serif; font-size: 13px; color: #111; overflow-x: auto; }
.morl-tables table { border-collapse: collapse; margin: 14px 0 4px; }
.morl-tables caption { text-align: left; font-weight: 700; font-size: 15px; padding: 4px 0; }
.morl-tables th, .morl-tables td { padding: 3px 8px; border-bottom: 1px solid #ddd; white-space: nowrap; }
.morl-tables thead th { border-bottom: 2px solid #444; text-align: left; }
.morl-tables .num { text-align: right; font-variant-numeric: tabular-nums; }
.morl-tables .notes { font-size: 12px; color: #444; margin: 4px 0 12px; padding-left: 18px; max-width: 60rem; }
.morl-tables figure { margin: 16px 0; }
.morl-tables figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
.morl-tables figcaption { font-size: 12px; color: #444; max-width: 60rem; }
/* inside the Snakemake report's front page: use the width left by the menu and the rule graph */
.max-w-lg:has(.morl-tables) { max-width: calc(100vw - 34rem); min-width: 30rem; }
/* ... and start at the top: a centred page taller than the window would lose its first lines */
.items-center:has(.morl-tables) { align-items: flex-start; }
.justify-center:has(.morl-tables) { justify-content: flex-start; }
"""


def html_document(
    tables: Sequence[str], figures: Sequence[tuple[str, str | bytes]] = (), title: str = "Results"
) -> str:
    """A self-contained HTML page: the given table HTML, then the figures, each (caption, PNG path
    or bytes) embedded as a data URI, so the page needs no other file."""
    import base64
    from pathlib import Path

    parts = list(tables)
    for caption, png in figures:
        data = png if isinstance(png, bytes) else Path(png).read_bytes()
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        parts.append(
            f'<figure><img src="{uri}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>\n<style>{HTML_STYLE}</style></head>\n"
        f'<body><div class="morl-tables">\n<h2>{html.escape(title)}</h2>\n{body}\n</div></body></html>\n'
    )


# ---------------------------------------------------------------------------------------------
# Interval statistics: per-cell bootstrap intervals, IQM and probability of improvement
# ---------------------------------------------------------------------------------------------

#: Coverage of every interval in the statistics tables, and the bootstrap's size and seed.
CONFIDENCE, REPS, STATS_SEED = 0.95, 2000, 0


#: The units RD is shown in, per env: MODULI's (``scale_wr`` of its table script), 1e3 and 1e2 for
#: Swimmer; other envs in raw returns. One unit per env, so every variant of a dataset reads alike.
RD_UNITS = {
    "MO-Ant-v2": 1e3,
    "MO-HalfCheetah-v2": 1e3,
    "MO-Hopper-v2": 1e3,
    "MO-Hopper-v3": 1e3,
    "MO-Walker2d-v2": 1e3,
    "MO-Swimmer-v2": 1e2,
}
#: MODULI's gradient steps for the front model of RD.
MODULI_FRONT_MODEL_STEPS = 100_000


def _finite(frame: pl.DataFrame, key: str) -> np.ndarray:
    """The finite values of a column (nulls and NaN dropped; none if there is no such column), as float64."""
    if key not in frame.columns:
        return np.empty(0)
    arr = np.asarray([v for v in frame[key].to_list() if v is not None], dtype=np.float64)
    return arr[np.isfinite(arr)]


def _mean_std(values: np.ndarray) -> tuple[float | None, float | None]:
    return (float(values.mean()), float(values.std())) if len(values) else (None, None)


def interval_long(
    metrics: pl.DataFrame, data_hv: Mapping[Dataset, float], datasets: Sequence[Dataset], models: Sequence[str]
) -> pl.DataFrame:
    """Per env, dataset and model: HV mean, std and 95% bootstrap interval over seeds (paper units),
    HV / B, the means of EUM, IGD and cardinality (:mod:`morl.stats`, :mod:`morl.metrics`), MODULI's
    ratio deviation (mean and std over seeds), and for a coverage variant the held-out HV with its
    interval, MODULI's RD (raw returns: mean and std over the seeds that have one; ``rd_unit`` is the
    unit the table shows it in) and the distance to the data front (mean)."""
    from morl.stats import cell_interval

    models = ordered_models(models, metrics)
    rows = []
    for env, quality, entropy in datasets:
        unit = HV_UNITS.get(env, 1.0)
        b_hv = b_of(data_hv, (env, quality, entropy))
        for m in models:
            runs = metrics.filter(
                (pl.col("env") == env)
                & (pl.col("quality") == quality)
                & (pl.col("entropy") == entropy)
                & (pl.col("model") == m)
            ).sort("seed")
            if not len(runs):
                continue
            hv = runs["hv"].to_numpy() / unit
            low, high = cell_interval(hv, CONFIDENCE, REPS, STATS_SEED)
            held = _finite(runs, "hv_held_out") / unit
            held_ci = cell_interval(held, CONFIDENCE, REPS, STATS_SEED) if len(held) else (None, None)
            ratio, rd, fd = (_finite(runs, k) for k in ("ratio_dev", "rd_held_out", "front_distance_held_out"))
            steps = sorted(set(runs["rd_front_model_steps"].drop_nulls().to_list())) if len(rd) else []
            rows.append(
                {
                    "env": env,
                    "quality": quality,
                    "entropy": entropy,
                    "model": m,
                    "n_seeds": len(runs),
                    "hv_mean": float(hv.mean()),
                    "hv_std": float(hv.std()),
                    "hv_ci_low": low,
                    "hv_ci_high": high,
                    "unit": unit,
                    "hv_over_b": float(hv.mean() * unit / b_hv) if b_hv else None,
                    "eum": runs["eum"].mean(),
                    "igd": runs["igd"].mean(),
                    "cardinality": runs["cardinality"].mean(),
                    **dict(zip(("ratio_dev_mean", "ratio_dev_std"), _mean_std(ratio), strict=True)),
                    "hv_held_out_mean": float(np.mean(held)) if len(held) else None,
                    "hv_held_out_ci_low": held_ci[0],
                    "hv_held_out_ci_high": held_ci[1],
                    **dict(zip(("rd_held_out_mean", "rd_held_out_std"), _mean_std(rd), strict=True)),
                    "rd_n_seeds": len(rd),
                    "rd_unit": RD_UNITS.get(env, 1.0),
                    "rd_front_model_steps": steps[0] if len(steps) == 1 else None,
                    "front_distance_held_out": float(fd.mean()) if len(fd) else None,
                }
            )
    schema = {
        "env": pl.String,
        "quality": pl.String,
        "entropy": pl.String,
        "model": pl.String,
        "n_seeds": pl.Int64,
        "hv_mean": pl.Float64,
        "hv_std": pl.Float64,
        "hv_ci_low": pl.Float64,
        "hv_ci_high": pl.Float64,
        "unit": pl.Float64,
        "hv_over_b": pl.Float64,
        "eum": pl.Float64,
        "igd": pl.Float64,
        "cardinality": pl.Float64,
        "ratio_dev_mean": pl.Float64,
        "ratio_dev_std": pl.Float64,
        "hv_held_out_mean": pl.Float64,
        "hv_held_out_ci_low": pl.Float64,
        "hv_held_out_ci_high": pl.Float64,
        "rd_held_out_mean": pl.Float64,
        "rd_held_out_std": pl.Float64,
        "rd_n_seeds": pl.Int64,
        "rd_unit": pl.Float64,
        "rd_front_model_steps": pl.Int64,
        "front_distance_held_out": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def _mean_pm_std(mean: float | None, std: float | None, unit: float = 1.0, shown_unit: bool = False) -> str:
    if mean is None:
        return MISSING
    text = f"{fmt_number(mean / unit)[0]} ± {fmt_number(std / unit)[0]}"
    return text + (f" (×{unit_label(unit)})" if shown_unit else "")


def interval_table(long: pl.DataFrame) -> Table:
    """:func:`interval_long` as a table, one row per env, dataset and model; with coverage variants
    among the datasets, also the HV over the held-out preferences (with its interval), MODULI's
    return deviation there and the distance to the data front there."""
    held = long["hv_held_out_mean"].drop_nulls().len() > 0
    titles = [
        "env",
        "dataset",
        "model",
        "seeds",
        "HV (unit)",
        "HV 95% CI",
        "HV / B",
        "EUM",
        "IGD",
        "cardinality",
        "ratio dev.",
    ]
    if held:
        titles += ["HV held-out (unit)", "held-out 95% CI", "RD held-out (unit)", "front distance held-out"]
    rows = []
    any_rd_missing = False
    for r in long.iter_rows(named=True):
        unit = f" (×{unit_label(r['unit'])})"
        row = [
            Cell(r["env"]),
            Cell(dataset_label(r["quality"], r["entropy"])),
            Cell(display_name(r["model"])),
            Cell(str(r["n_seeds"])),
            Cell(f"{fmt_number(r['hv_mean'])[0]} ± {fmt_number(r['hv_std'])[0]}{unit}"),
            Cell(f"[{fmt_number(r['hv_ci_low'])[0]}, {fmt_number(r['hv_ci_high'])[0]}]"),
            Cell(MISSING if r["hv_over_b"] is None else fmt_number(r["hv_over_b"])[0]),
            Cell(f"{r['eum']:.4g}"),
            Cell(f"{r['igd']:.4g}"),
            Cell(f"{r['cardinality']:.1f}"),
            Cell(_mean_pm_std(r["ratio_dev_mean"], r["ratio_dev_std"])),
        ]
        if held:
            if r["hv_held_out_mean"] is None:
                row += [Cell(MISSING)] * 4
            else:
                any_rd_missing |= r["rd_held_out_mean"] is None
                rd = _mean_pm_std(r["rd_held_out_mean"], r["rd_held_out_std"], r["rd_unit"], shown_unit=True)
                if r["rd_held_out_mean"] is not None and r["rd_n_seeds"] < r["n_seeds"]:
                    rd += f" ({r['rd_n_seeds']} seeds)"
                fd = r["front_distance_held_out"]
                row += [
                    Cell(f"{fmt_number(r['hv_held_out_mean'])[0]}{unit}"),
                    Cell(f"[{fmt_number(r['hv_held_out_ci_low'])[0]}, {fmt_number(r['hv_held_out_ci_high'])[0]}]"),
                    Cell(rd),
                    Cell(MISSING if fd is None else f"{fd:.3f}"),
                ]
        rows.append(row)
    notes = [
        "HV: mean ± std over training seeds in the paper's unit; 95% CI: percentile bootstrap of that mean over the "
        f"seeds ({REPS} resamples; with 3 seeds an interval is coarse, and a single seed has none).",
        "EUM: expected utility over 100 evenly spread weights (morl-baselines); IGD: inverted generational distance "
        "to the union front of the behavior policy's grid evaluation and every model evaluated on the dataset (raw "
        "returns, lower is better); cardinality: distinct non-dominated points. Means over seeds.",
        "Ratio dev.: MODULI's ratio deviation, the mean of ‖R / ΣR − w‖₂ over the grid points PEDA keeps (no negative "
        "objective, not dominated within the run's points); mean ± std over seeds, lower is better. metrics.csv "
        "also has ratio_dev_all, this project's variant over every point.",
    ]
    if held:
        steps = sorted(set(long["rd_front_model_steps"].drop_nulls().to_list()))
        fitted = ", ".join(f"{s:,}" for s in steps) if steps else "no front model given"
        departure = (
            ""
            if steps == [MODULI_FRONT_MODEL_STEPS]
            else (f" (MODULI: {MODULI_FRONT_MODEL_STEPS:,} steps)" if steps else "")
        )
        units = ", ".join(f"{e} ×{unit_label(u)}" for e, u in dict(zip(long["env"], long["rd_unit"])).items())
        notes.append(
            "Held-out: over the grid preferences inside the bands a coverage variant (shattered, narrow) removed from "
            "its data, with the HV of the returns achieved there and its bootstrap interval. RD held-out: MODULI's "
            "return deviation, the mean over those preferences of ‖g(w) − R(w)‖₂ in raw returns, g the front model "
            "(an MLP from preference to return) fitted on the complete dataset's non-negative non-dominated "
            f"trajectories with {fitted} gradient steps{departure}; mean ± std over seeds in the unit shown "
            f"({units}); lower is better. Front distance held-out (ours): the mean of ‖(R(w) − F(w)) / s‖₂, F(w) the "
            "complete data's trajectory return best at w and s per objective the largest |F| over the whole grid "
            f"(fixed per dataset); mean over seeds. {MISSING} for complete data, which holds nothing out."
        )
        if any_rd_missing:
            notes.append(
                f"{MISSING} in RD held-out of a variant row: no front model of its complete dataset was given, or "
                "none could be fitted (no trajectory of that dataset has a return with no negative objective that no "
                "other return dominates, so MODULI's RD is undefined there)."
            )
    return Table(
        "Per-cell statistics: HV with bootstrap intervals, EUM, IGD, cardinality, deviations",
        [Cell(t) for t in titles],
        rows,
        notes,
        n_label_columns=4,
    )


def normalised_scores(
    metrics: pl.DataFrame, data_hv: Mapping[Dataset, float], datasets: Sequence[Dataset], models: Sequence[str]
) -> tuple[dict[str, np.ndarray], list[Dataset]]:
    """HV / B per model as ``(n_seeds, n_rows)`` arrays over the dataset rows that have a B and where
    every model has the same number of seeds, the largest such number among the rows (the shape
    interval statistics need), and those rows."""
    per_row: dict[Dataset, dict[str, np.ndarray]] = {}
    for env, quality, entropy in datasets:
        b = b_of(data_hv, (env, quality, entropy))
        if not b:
            continue
        cell = metrics.filter((pl.col("env") == env) & (pl.col("quality") == quality) & (pl.col("entropy") == entropy))
        scores = {m: cell.filter(pl.col("model") == m).sort("seed")["hv"].to_numpy() / b for m in models}
        counts = {len(v) for v in scores.values()}
        if len(counts) == 1 and 0 not in counts:
            per_row[(env, quality, entropy)] = scores
    if not per_row:
        return {}, []
    # one array needs one seed count: while a grid runs, rows can have fewer seeds than others, and
    # only the rows with the most seeds enter
    most = max(len(next(iter(scores.values()))) for scores in per_row.values())
    rows = [r for r, scores in per_row.items() if len(next(iter(scores.values()))) == most]
    return {m: np.stack([per_row[r][m] for r in rows], axis=1) for m in models}, rows


def iqm_table(scores: Mapping[str, np.ndarray], rows: Sequence[Dataset]) -> tuple[Table, pl.DataFrame]:
    """Each model's interquartile mean of HV / B over every seed and row, with its 95% interval."""
    from morl.stats import iqm_intervals

    result = iqm_intervals(scores, CONFIDENCE, REPS, STATS_SEED) if scores else {}
    long = pl.DataFrame(
        [
            {
                "model": m,
                "iqm": v[0],
                "ci_low": v[1],
                "ci_high": v[2],
                "n_rows": len(rows),
                "n_seeds": int(scores[m].shape[0]),
            }
            for m, v in result.items()
        ],
        schema={
            "model": pl.String,
            "iqm": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "n_rows": pl.Int64,
            "n_seeds": pl.Int64,
        },
    )
    header = [Cell("model"), Cell("IQM of HV / B"), Cell("95% CI")]
    body = [
        [Cell(display_name(r["model"])), Cell(f"{r['iqm']:.3f}"), Cell(f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]")]
        for r in long.iter_rows(named=True)
    ]
    notes = [
        f"Interquartile mean (IQM) of each run's HV / B over {len(rows)} dataset rows × the seeds, with a "
        f"stratified-bootstrap 95% interval ({REPS} resamples, seeds resampled within each row), after Agarwal et al. "
        "(2021). Rows enter only where every model has the same number of seeds.",
        "Two models whose intervals overlap are not shown apart by this experiment.",
    ]
    return Table("Interquartile mean of HV / B across datasets", header, body, notes, n_label_columns=1), long


def improvement_table(scores: Mapping[str, np.ndarray]) -> tuple[Table, pl.DataFrame]:
    """P(X > Y) of HV / B for every ordered pair of models, with 95% intervals, as a matrix."""
    from morl.stats import probability_of_improvement

    models = list(scores)
    result = probability_of_improvement(scores, CONFIDENCE, REPS, STATS_SEED) if len(models) > 1 else {}
    long = pl.DataFrame(
        [{"model": x, "other": y, "p": v[0], "ci_low": v[1], "ci_high": v[2]} for (x, y), v in result.items()],
        schema={"model": pl.String, "other": pl.String, "p": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64},
    )
    header = [Cell("P(row > column)"), *[Cell(display_name(m)) for m in models]]
    body = []
    for x in models:
        cells = [Cell(display_name(x))]
        for y in models:
            v = result.get((x, y))
            cells.append(
                Cell(MISSING if v is None else f"{v[0]:.2f} [{v[1]:.2f}, {v[2]:.2f}]", bold=bool(v) and v[1] > 0.5)
            )
        body.append(cells)
    notes = [
        "Probability of improvement: the chance that a random seed of the row's model has a higher HV / B than a "
        "random seed of the column's model on a random dataset row (ties count half), with a stratified-bootstrap "
        "95% interval (Agarwal et al. 2021). Bold: the interval lies above 0.5.",
    ]
    return Table("Probability of improvement (HV / B)", header, body, notes, n_label_columns=1), long


def is_variant(entropy: str) -> bool:
    """Whether a dataset row's entropy label names a coverage variant (``high-shattered``)."""
    return "-" in entropy


def held_out_scores(metrics: pl.DataFrame, dataset: Dataset, model: str) -> pl.DataFrame:
    """One model's runs on one variant row, by seed, with its held-out HV as a share of B's HV at the
    same preferences (``variant``) and the same for the run of that model and seed on the complete
    data (``complete``, null where that run is not among the evaluations). Runs whose B there is 0
    or unknown have no score and are left out."""
    env, quality, entropy = dataset
    runs = metrics.filter(
        (pl.col("env") == env)
        & (pl.col("quality") == quality)
        & (pl.col("entropy") == entropy)
        & (pl.col("model") == model)
        & pl.col("hv_held_out").is_not_null()
        & pl.col("b_held_out").is_not_null()
        & (pl.col("b_held_out") > 0)
    ).sort("seed")
    return runs.select(
        "seed",
        (pl.col("hv_held_out") / pl.col("b_held_out")).alias("variant"),
        (pl.col("hv_held_out_complete") / pl.col("b_held_out")).alias("complete"),
    )


def generalisation_long(metrics: pl.DataFrame, datasets: Sequence[Dataset], models: Sequence[str]) -> pl.DataFrame:
    """Per coverage-variant row and model, on the held-out preferences: B's HV there (paper units);
    the HV / B of the runs trained on the variant and of the same model and seeds trained on the
    complete data, each with its mean and 95% bootstrap interval over seeds; and their paired
    difference (variant − complete, per seed) with its interval. A run has no score where B's HV
    at the held-out preferences is 0 (``n_seeds`` counts those scored)."""
    from morl.stats import cell_interval

    def stat(values: np.ndarray) -> tuple:
        if not len(values):
            return None, None, None
        return float(values.mean()), *cell_interval(values, CONFIDENCE, REPS, STATS_SEED)

    models = ordered_models(models, metrics)
    rows = []
    for env, quality, entropy in datasets:
        if not is_variant(entropy) or "b_held_out" not in metrics.columns:
            continue
        b_rows = metrics.filter(
            (pl.col("env") == env) & (pl.col("quality") == quality) & (pl.col("entropy") == entropy)
        )["b_held_out"].drop_nulls()
        for m in models:
            scores = held_out_scores(metrics, (env, quality, entropy), m)
            if not len(scores):
                continue
            paired = scores.drop_nulls()
            v, c = scores["variant"].to_numpy(), scores["complete"].drop_nulls().to_numpy()
            d = (paired["variant"] - paired["complete"]).to_numpy()
            rows.append(
                {
                    "env": env,
                    "quality": quality,
                    "entropy": entropy,
                    "coverage": entropy.partition("-")[2],
                    "model": m,
                    "n_seeds": len(scores),
                    "n_paired": len(paired),
                    "unit": HV_UNITS.get(env, 1.0),
                    "b_held_out": float(b_rows[0] / HV_UNITS.get(env, 1.0)) if len(b_rows) else None,
                    **dict(zip(("variant", "variant_ci_low", "variant_ci_high"), stat(v), strict=True)),
                    **dict(zip(("complete", "complete_ci_low", "complete_ci_high"), stat(c), strict=True)),
                    **dict(zip(("difference", "difference_ci_low", "difference_ci_high"), stat(d), strict=True)),
                }
            )
    schema = {
        "env": pl.String,
        "quality": pl.String,
        "entropy": pl.String,
        "coverage": pl.String,
        "model": pl.String,
        "n_seeds": pl.Int64,
        "n_paired": pl.Int64,
        "unit": pl.Float64,
        "b_held_out": pl.Float64,
        **{
            f"{k}{suffix}": pl.Float64
            for k in ("variant", "complete", "difference")
            for suffix in ("", "_ci_low", "_ci_high")
        },
    }
    return pl.DataFrame(rows, schema=schema)


def _mean_ci(r: dict, key: str, signed: bool = False) -> Cell:
    if r[key] is None:
        return Cell(MISSING)
    f = "{:+.2f}" if signed else "{:.2f}"

    def show(x: float) -> str:
        return f.format(round(x, 2) + 0.0)  # + 0.0: no "-0.00" for a difference that rounds to zero

    return Cell(f"{show(r[key])} [{show(r[key + '_ci_low'])}, {show(r[key + '_ci_high'])}]")


def generalisation_table(long: pl.DataFrame) -> Table:
    """:func:`generalisation_long` as a table, one row per env, variant and model."""
    header = [
        Cell(t)
        for t in (
            "env",
            "dataset",
            "model",
            "seeds",
            "B held-out (unit)",
            "HV / B, variant",
            "HV / B, complete data",
            "variant − complete",
        )
    ]
    rows = []
    for r in long.iter_rows(named=True):
        seeds = str(r["n_seeds"]) + (f" ({r['n_paired']} paired)" if r["n_paired"] != r["n_seeds"] else "")
        b = MISSING if r["b_held_out"] is None else f"{fmt_number(r['b_held_out'])[0]} (×{unit_label(r['unit'])})"
        rows.append(
            [
                Cell(r["env"]),
                Cell(dataset_label(r["quality"], r["entropy"])),
                Cell(display_name(r["model"])),
                Cell(seeds),
                Cell(b),
                _mean_ci(r, "variant"),
                _mean_ci(r, "complete"),
                _mean_ci(r, "difference", signed=True),
            ]
        )
    notes = [
        "On the held-out preferences only: the grid points whose w₁ lies in a band the variant removed from its data. "
        "HV / B there: the HV of the returns a run reached at those points divided by the HV of the behavior policy's "
        "returns at the same points (its evaluation on the grid: the data's own front, B elsewhere, has no returns "
        "per preference point). Variant: runs trained on the variant; complete data: the same model and seeds trained on the "
        "complete data, evaluated on the same grid.",
        f"Mean over seeds [95% percentile-bootstrap interval, {REPS} resamples]; variant − complete is paired by seed. "
        "A difference whose interval contains 0 is not resolved by this experiment; with 3 seeds intervals are coarse.",
    ]
    return Table(
        "Generalisation to held-out preferences: HV / B there, trained on the variant vs. the complete data",
        header,
        rows,
        notes,
        n_label_columns=4,
    )


def generalisation_iqm_table(metrics: pl.DataFrame, long: pl.DataFrame) -> tuple[Table, pl.DataFrame]:
    """Per coverage (each variant kind, then all together) and model: the interquartile mean over
    rows and seeds of the held-out HV / B of the runs trained on the variant and of those trained on
    the complete data, each with its stratified-bootstrap interval. A row enters only where every
    model has the same number of seeds with both scores (the shape :func:`morl.stats.iqm_intervals`
    needs)."""
    from morl.stats import iqm_intervals

    models = model_order(long["model"].unique().to_list()) if len(long) else []
    kinds = sorted(long["coverage"].unique().to_list()) if len(long) else []
    records = []
    for kind in [*kinds, "all"] if len(kinds) > 1 else kinds:
        part = long if kind == "all" else long.filter(pl.col("coverage") == kind)
        keys = part.select("env", "quality", "entropy").unique(maintain_order=True).iter_rows()
        per_row = {k: {m: held_out_scores(metrics, k, m).drop_nulls() for m in models} for k in keys}
        kept = [
            k
            for k, by_model in per_row.items()
            if len({len(v) for v in by_model.values()}) == 1 and len(next(iter(by_model.values())))
        ]
        if not kept:
            continue
        for data in ("variant", "complete"):
            scores = {m: np.stack([per_row[k][m][data].to_numpy() for k in kept], axis=1) for m in models}
            for m, (point, low, high) in iqm_intervals(scores, CONFIDENCE, REPS, STATS_SEED).items():
                records.append(
                    {
                        "coverage": kind,
                        "data": data,
                        "model": m,
                        "iqm": point,
                        "ci_low": low,
                        "ci_high": high,
                        "n_rows": len(kept),
                        "n_seeds": int(scores[m].shape[0]),
                    }
                )
    frame = pl.DataFrame(
        records,
        schema={
            "coverage": pl.String,
            "data": pl.String,
            "model": pl.String,
            "iqm": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "n_rows": pl.Int64,
            "n_seeds": pl.Int64,
        },
    )
    shown = [k for k in [*kinds, "all"] if k in set(frame["coverage"].to_list())]
    header = [Cell("model")] + [Cell(f"{k}: {data}") for k in shown for data in ("complete", "variant")]
    body = []
    for m in models:
        cells = [Cell(display_name(m))]
        for k in shown:
            for data in ("complete", "variant"):
                r = frame.filter((pl.col("coverage") == k) & (pl.col("data") == data) & (pl.col("model") == m))
                cells.append(
                    Cell(MISSING)
                    if not len(r)
                    else Cell(f"{r['iqm'][0]:.2f} [{r['ci_low'][0]:.2f}, {r['ci_high'][0]:.2f}]")
                )
        body.append(cells)
    counts = "; ".join(f"{k}: {frame.filter(pl.col('coverage') == k)['n_rows'][0]} rows" for k in shown)
    notes = [
        "Interquartile mean over variant rows and seeds of the HV / B reached at the held-out preferences, by runs "
        "trained on the complete data and by the same models and seeds trained on the variant, with stratified-"
        f"bootstrap 95% intervals ({REPS} resamples), after Agarwal et al. (2021). {counts or 'No rows yet'}. A row "
        "enters only where every model has the same number of seeds with both scores.",
        "A model generalises where its variant interval matches its complete one; where the two intervals overlap, "
        "this experiment does not show a cost of the cut.",
    ]
    return Table(
        "Generalisation to held-out preferences: IQM of HV / B there, complete data vs. variant",
        header,
        body,
        notes,
        n_label_columns=1,
    ), frame
