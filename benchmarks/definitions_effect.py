"""Put two runs of one experiment side by side: HV as a fraction of B, per dataset and model.

Each argument is the ``tables`` folder that the aggregate rule wrote (it reads ``metrics.csv``,
the models' HV per seed, and ``baselines.csv``, B's HV per env).
The first is labelled as run under PEDA's training definitions, the second under the alternative
ones (``train.returns_to_go: weighted``, ``train.statistics_from: dataset``); docs/protocol.md
shows the output.

    python benchmarks/definitions_effect.py results/tables results-alt/tables
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from morl.families import display_names, model_order
from morl.paper import HV_UNITS, published_fraction


def fractions(tables: Path, b_of: str = "behavior") -> pl.DataFrame:
    """Per (env, quality, entropy, model): mean and population std over seeds of HV / B, where B
    is the behavior policy's front on the grid (one per env, ``baselines.csv``) or, with
    ``b_of="data"``, each dataset's own front (``paper_comparison.csv``, the paper's B)."""
    runs = pl.read_csv(tables / "metrics.csv")
    if b_of == "data":
        keys = ["env", "quality", "entropy"]
        unit = pl.col("env").replace_strict(HV_UNITS, default=1.0, return_dtype=pl.Float64)
        b = (
            pl.read_csv(tables / "paper_comparison.csv")
            .filter(pl.col("our_b_hv").is_not_null())
            .select(*keys, (pl.col("our_b_hv") * unit).alias("b"))  # paper units -> HV
            .unique(keys)
        )
    else:
        keys = ["env"]
        b = (
            pl.read_csv(tables / "baselines.csv")
            .filter(pl.col("policy") == "behavior")
            .select("env", pl.col("hv").alias("b"))
        )
    return (
        runs.join(b, on=keys)
        .with_columns((pl.col("hv") / pl.col("b")).alias("f"))
        .group_by("env", "quality", "entropy", "model")
        .agg(pl.col("f").mean().alias("mean"), pl.col("f").std(ddof=0).alias("std"), pl.len().alias("n"))
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("peda", type=Path, help="tables folder of the run under PEDA's definitions")
    p.add_argument("alternative", type=Path, help="tables folder of the run under the alternative definitions")
    p.add_argument("--b", choices=["behavior", "data"], default="behavior",
                   help="B: the behavior policy's front per env, or each dataset's own front (the paper's B)")  # fmt: skip
    args = p.parse_args(argv)
    both = fractions(args.peda, args.b).join(fractions(args.alternative, args.b),
                                             on=["env", "quality", "entropy", "model"], suffix="_alt")  # fmt: skip
    order = {m: i for i, m in enumerate(model_order())}
    both = both.sort("env", pl.col("quality").replace_strict({"expert": 0, "amateur": 1}, default=2),
                     pl.col("model").replace_strict(order, default=len(order)))  # fmt: skip
    print("| env | dataset | model | HV / B, PEDA's definitions | HV / B, alternative | alternative − PEDA "
          "| paper's HV / B |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---:|")
    for r in both.iter_rows(named=True):
        paper = published_fraction(r["env"], r["quality"], r["entropy"], r["model"])
        print(f"| {r['env']} | {r['quality']} {r['entropy']}-H | {display_names()[r['model']]} "
              f"| {r['mean']:.2f} ± {r['std']:.2f} | {r['mean_alt']:.2f} ± {r['std_alt']:.2f} "
              f"| {r['mean_alt'] - r['mean']:+.2f} | {'' if paper is None else f'{paper:.2f}'} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
