"""The published D4MORL/PEDA numbers and the paper's units, in one place.

Source: Zhu, Dang, Grover, "Scaling Pareto-Efficient Decision Making via Offline Multi-Objective
RL", ICLR 2023 (arXiv 2305.00567), the HV and SP tables for the High-H datasets (docs/protocol.md
lists what they are compared with and how). The tables below are the paper's numbers, its
value-based baseline CQL(P) and CQL included (SP for the (P) models only), in the paper's units:
HV ×1e6 for Ant, HalfCheetah and Walker2d, ×1e7 for Hopper-v2, ×1e10 for Hopper-v3, ×1e4 for
Swimmer; SP ×1e4, ×1e5 for both Hoppers, ×1 for Swimmer.

The paper publishes High-H datasets only; :func:`published_hv` answers ``None`` for any other
cell, and for models it does not report.
"""

from __future__ import annotations

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

# The paper's HV (High-H), mean +- std over seeds, paper units.
_HV_TABLE = """
| dataset | env | B | MODT(P) | MORvS(P) | BC(P) | CQL(P) | MODT | MORvS | BC | CQL |
| Amateur | Ant | 5.61 | 5.92+-0.04 | 6.07+-0.02 | 4.37+-0.06 | 5.62+-0.23 | 4.88+-0.60 | 4.37+-0.56 | 2.34+-0.15 | 2.80+-0.68 |
| Amateur | HalfCheetah | 5.68 | 5.69+-0.01 | 5.77+-0.00 | 5.46+-0.02 | 5.54+-0.02 | 5.51+-0.01 | 4.66+-0.05 | 2.92+-0.38 | 4.41+-0.08 |
| Amateur | Hopper-v2 | 1.97 | 1.81+-0.05 | 1.76+-0.03 | 1.35+-0.03 | 1.64+-0.01 | 1.54+-0.08 | 1.57+-0.01 | 0.01+-0.01 | 0.00+-0.06 |
| Amateur | Hopper-v3 | 3.09 | 1.04+-0.16 | 2.77+-0.24 | 2.42+-0.18 | 0.59+-0.42 | 1.61+-0.23 | 1.30+-0.22 | 0.03+-0.01 | 0.10+-0.16 |
| Amateur | Swimmer | 2.11 | 1.67+-0.22 | 2.79+-0.03 | 2.82+-0.04 | 1.69+-0.93 | 0.96+-0.19 | 2.93+-0.03 | 0.46+-0.15 | 0.74+-0.47 |
| Amateur | Walker2d | 4.99 | 3.10+-0.34 | 4.98+-0.01 | 3.42+-0.42 | 1.78+-0.33 | 3.76+-0.34 | 4.32+-0.05 | 0.91+-0.36 | 0.76+-0.81 |
| Expert | Ant | 6.32 | 6.21+-0.01 | 6.41+-0.01 | 4.88+-0.17 | 5.76+-0.10 | 5.52+-0.16 | 5.52+-0.02 | 0.84+-0.60 | 3.52+-0.45 |
| Expert | HalfCheetah | 5.79 | 5.73+-0.00 | 5.78+-0.00 | 5.54+-0.05 | 5.63+-0.04 | 5.59+-0.03 | 4.19+-0.74 | 1.53+-0.09 | 3.78+-0.46 |
| Expert | Hopper-v2 | 2.09 | 2.00+-0.02 | 2.02+-0.02 | 1.23+-0.10 | 0.33+-0.39 | 1.68+-0.03 | 1.73+-0.07 | 0.28+-0.21 | 0.02+-0.02 |
| Expert | Hopper-v3 | 3.73 | 3.38+-0.05 | 3.42+-0.10 | 2.29+-0.07 | 0.78+-0.24 | 1.05+-0.43 | 2.53+-0.06 | 0.06+-0.02 | 0.00+-0.00 |
| Expert | Swimmer | 3.25 | 3.15+-0.02 | 3.24+-0.00 | 3.21+-0.00 | 3.22+-0.08 | 2.49+-0.19 | 3.19+-0.01 | 1.68+-0.38 | 2.08+-0.08 |
| Expert | Walker2d | 5.21 | 4.89+-0.05 | 5.14+-0.01 | 3.74+-0.11 | 3.21+-0.32 | 0.65+-0.46 | 5.10+-0.02 | 0.07+-0.02 | 0.82+-0.62 |
"""

# The paper's SP (High-H), mean +- std over seeds, paper units. Only the (P) models are published.
_SP_TABLE = """
| dataset | env | MODT(P) | MORvS(P) | BC(P) | CQL(P) |
| Amateur | Ant | 8.72+-0.77 | 5.24+-0.52 | 25.9+-16.4 | 1.06+-0.28 |
| Amateur | HalfCheetah | 1.16+-0.42 | 0.57+-0.09 | 2.22+-0.91 | 0.45+-0.27 |
| Amateur | Hopper-v2 | 1.61+-0.29 | 3.50+-1.54 | 2.42+-1.08 | 3.30+-5.25 |
| Amateur | Hopper-v3 | 10.23+-2.78 | 1.03+-0.11 | 0.87+-0.29 | 2.00+-1.72 |
| Amateur | Swimmer | 2.87+-1.32 | 1.03+-0.20 | 5.05+-1.82 | 8.87+-6.24 |
| Amateur | Walker2d | 164.2+-13.5 | 1.94+-0.06 | 53.1+-34.6 | 7.33+-5.89 |
| Expert | Ant | 8.26+-2.22 | 6.50+-0.81 | 46.2+-16.4 | 0.58+-0.10 |
| Expert | HalfCheetah | 1.24+-0.23 | 0.67+-0.05 | 1.78+-0.39 | 0.10+-0.00 |
| Expert | Hopper-v2 | 16.3+-10.6 | 3.03+-0.36 | 52.5+-4.88 | 2.84+-2.46 |
| Expert | Hopper-v3 | 1.40+-0.44 | 2.72+-1.93 | 0.72+-0.09 | 2.60+-3.14 |
| Expert | Swimmer | 15.0+-7.49 | 4.39+-0.07 | 4.50+-0.39 | 13.6+-5.31 |
| Expert | Walker2d | 0.99+-0.44 | 3.22+-0.73 | 75.6+-52.3 | 6.23+-10.7 |
"""


def _parse(table: str) -> dict[tuple[str, str, str], tuple[float, float | None]]:
    """{(env_id, quality, model): (mean, std or None)} from one of the tables above."""
    lines = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.strip().splitlines()]
    header, rows = lines[0], lines[1:]
    out = {}
    for row in rows:
        quality, env = row[0].lower(), _ENV_IDS[row[1]]
        for name, cell in zip(header[2:], row[2:]):
            mean, _, std = cell.partition("+-")
            out[(env, quality, _MODELS[name])] = (float(mean), float(std) if std else None)
    return out


#: Published HV, paper units: {(env_id, quality, model or "B"): (mean, std or None)}; High-H only.
PUBLISHED_HV = _parse(_HV_TABLE)
#: Published SP, paper units: {(env_id, quality, model): (mean, std)}; High-H, (P) models only.
PUBLISHED_SP = _parse(_SP_TABLE)
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
