"""The published D4MORL/PEDA numbers and the paper's units, in one place.

Source: Zhu, Dang, Grover, "Scaling Pareto-Efficient Decision Making via Offline Multi-Objective
RL", ICLR 2023 (arXiv 2305.00567), the HV and SP tables for the High-H datasets (docs/protocol.md
lists what they are compared with and how). The tables below are the paper's numbers, its
value-based baseline CQL(P) and CQL included (SP for the (P) models only), in the paper's units
(``peda_published.csv`` beside this module):
HV ×1e6 for Ant, HalfCheetah and Walker2d, ×1e7 for Hopper-v2, ×1e10 for Hopper-v3, ×1e4 for
Swimmer; SP ×1e4, ×1e5 for both Hoppers, ×1 for Swimmer.

The paper publishes High-H datasets only; :func:`published_hv` answers ``None`` for any other
cell, and for models it does not report.
"""

from __future__ import annotations

import csv
from pathlib import Path

from morl.families import display_names

#: Divide a raw HV / SP by these to get the paper's units.
HV_UNITS = {
    "MO-Ant-v2": 1e6,
    "MO-HalfCheetah-v2": 1e6,
    "MO-Walker2d-v2": 1e6,
    "MO-Hopper-v2": 1e7,
    "MO-Hopper-v3": 1e10,
    "MO-Swimmer-v2": 1e4,
}
SP_UNITS = {
    "MO-Ant-v2": 1e4,
    "MO-HalfCheetah-v2": 1e4,
    "MO-Walker2d-v2": 1e4,
    "MO-Hopper-v2": 1e5,
    "MO-Hopper-v3": 1e5,
    "MO-Swimmer-v2": 1.0,
}

# The paper's short env names -> our env ids.
_ENV_IDS = {
    "Ant": "MO-Ant-v2",
    "HalfCheetah": "MO-HalfCheetah-v2",
    "Hopper-v2": "MO-Hopper-v2",
    "Hopper-v3": "MO-Hopper-v3",
    "Swimmer": "MO-Swimmer-v2",
    "Walker2d": "MO-Walker2d-v2",
}
_MODELS = {display: name for name, display in display_names().items()}

#: The paper's HV and SP tables (High-H), one row per cell: metric (HV or SP), dataset, env and
#: model as the paper names them, mean and std over seeds in the paper's units (std empty for B).
#: SP is published for the (P) models only.
PUBLISHED_CSV = Path(__file__).with_name("peda_published.csv")


def _read(metric: str) -> dict[tuple[str, str, str], tuple[float, float | None]]:
    """{(env_id, quality, model): (mean, std or None)} for one metric of :data:`PUBLISHED_CSV`."""
    with open(PUBLISHED_CSV, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["metric"] == metric]
    return {
        (_ENV_IDS[r["env"]], r["dataset"].lower(), _MODELS[r["model"]]): (
            float(r["mean"]),
            float(r["std"]) if r["std"] else None,
        )
        for r in rows
    }


#: Published HV, paper units: {(env_id, quality, model or "B"): (mean, std or None)}; High-H only.
PUBLISHED_HV = _read("HV")
#: Published SP, paper units: {(env_id, quality, model): (mean, std)}; High-H, (P) models only.
PUBLISHED_SP = _read("SP")
#: The one preference distribution the paper's tables cover.
PUBLISHED_ENTROPY = "high"


def published_hv(env: str, quality: str, entropy: str, model: str) -> float | None:
    """The paper's mean HV (paper units) of ``model`` ("B" for the behavior data), or None."""
    if entropy != PUBLISHED_ENTROPY:
        return None
    hit = PUBLISHED_HV.get((env, quality, model))
    return None if hit is None else hit[0]


def published_fraction(env: str, quality: str, entropy: str, model: str) -> float | None:
    """The paper's HV of ``model`` divided by the paper's HV of B for the same dataset, or None."""
    hv, b = published_hv(env, quality, entropy, model), published_hv(env, quality, entropy, "B")
    if hv is None or not b:
        return None
    return hv / b
