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


def fractions(tables: Path) -> pl.DataFrame:
    """Per (env, quality, entropy, model): mean and population std over seeds of HV / B."""
    runs = pl.read_csv(tables / "metrics.csv")
    b = (
        pl.read_csv(tables / "baselines.csv")
        .filter(pl.col("policy") == "behavior")
        .select("env", pl.col("hv").alias("b"))
    )
    return (
        runs.join(b, on="env")
        .with_columns((pl.col("hv") / pl.col("b")).alias("f"))
        .group_by("env", "quality", "entropy", "model")
        .agg(pl.col("f").mean().alias("mean"), pl.col("f").std(ddof=0).alias("std"), pl.len().alias("n"))
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("peda", type=Path, help="tables folder of the run under PEDA's definitions")
    p.add_argument("alternative", type=Path, help="tables folder of the run under the alternative definitions")
    args = p.parse_args(argv)
    both = fractions(args.peda).join(fractions(args.alternative), on=["env", "quality", "entropy", "model"],
                                     suffix="_alt")  # fmt: skip
    order = {m: i for i, m in enumerate(model_order())}
    both = both.sort("env", pl.col("quality").replace_strict({"expert": 0, "amateur": 1}, default=2),
                     pl.col("model").replace_strict(order, default=len(order)))  # fmt: skip
    print("| env | dataset | model | HV / B, PEDA's definitions | HV / B, alternative | alternative − PEDA |")
    print("|---|---|---|---:|---:|---:|")
    for r in both.iter_rows(named=True):
        print(f"| {r['env']} | {r['quality']} {r['entropy']}-H | {display_names()[r['model']]} "
              f"| {r['mean']:.2f} ± {r['std']:.2f} | {r['mean_alt']:.2f} ± {r['std_alt']:.2f} "
              f"| {r['mean_alt'] - r['mean']:+.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
