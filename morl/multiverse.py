"""A multiverse analysis of the paper comparison: which findings survive which analysis choices.

Every number of the paper comparison rests on choices the PEDA paper made one way and other work
makes another. After Steegen, Tuerlinckx, Gelman and Vanpaemel, "Increasing transparency through a
multiverse analysis" (2016), and Bell et al., "Modeling the machine learning multiverse" (NeurIPS
2022), this module crosses the choices into universes, computes in each universe the findings
``morl paper-targets`` reads (:func:`morl.targets.row_checks`) from the committed evaluation files
alone, and reports for each finding the share of universes where it holds and the single choice
that flips it most often. The choices (:data:`CHOICES`; the first option of each is the paper's):

- ``reference_point``: the HV reference point. ``origin`` is PEDA's (``modt/utils.py`` computes HV
  from ``np.zeros(n)``; :func:`morl.metrics.hypervolume`'s default). ``data-min`` is the data's
  worst point: per objective, the minimum of the dataset's trajectory returns as its card prints it
  (to 0.1; the nadir of the data's front lies at or above it). Points not above it add nothing.
- ``b``: what B, the denominator of HV / B, is. ``data``: the HV of the dataset's own trajectory
  returns, from its card (the paper's B; origin reference only: from the data-min point it would
  need the trajectory returns, which a slice does not hold, so ``data-min`` with ``data`` is no
  universe). ``behavior``: the HV of the behavior policy's evaluation on the same grid
  (``behavior/front.parquet``), with the universe's reference point and point filter.
- ``grid``: the preference points counted: 501 (every point of the 2-objective lattice of 500
  divisions), 101 (every 5th: 100 divisions) or 51 (every 10th: 50 divisions). The 3-objective
  lattice of 24 divisions (325 points) has no sub-lattice of a fifth or a tenth of its step; 101
  and 51 take its sub-lattices of 12 divisions (every 2nd step, 91 points) and 6 divisions (every
  4th step, 28 points), the nearest that halve the resolution once and twice. Models and the
  behavior policy are scored on the same points.
- ``negative_returns``: ``count`` every point, or ``drop`` the points with a negative objective.
  Under the origin reference a negative point adds no HV either way; the choice moves HV only from
  a data-min point with a negative coordinate, and moves cardinality everywhere (SP is always taken
  over PEDA's non-negative front).
- ``seeds``: ``all`` training seeds, or leave one out (``drop-<seed>``, one universe per seed).
- ``ordering_metric``: what ranks the models for Kendall's tau against the paper's HV ordering and
  for each row's best model and order of MODT(P), MORvS(P), BC(P): ``hv`` (HV / B), ``sp``
  (sparsity, lower is better) or ``cardinality`` (higher is better). The other findings are HV / B.
- ``definitions``: the training definitions of PEDA's six models: ``peda`` (the released code's)
  or ``self-consistent`` (``train.peda.returns_to_go: weighted``, ``statistics_from: dataset``),
  whose runs come from a second slices folder (``definitions_slices``); in rows that folder has no
  runs of, and for the value-based models, the runs are the same in both universes.
- ``episodes``: episodes per preference point, whose mean return is the point: 1 (PEDA's
  ``experiment.py``) or 3 (MODULI's evaluation). Not post hoc: every run of the slices needs its
  checkpoint evaluated again with 3 episodes per point, ``eval-episodes3.parquet`` beside its
  ``eval.parquet`` (the workflow's ``evaluate_episodes`` jobs make them when the config asks for
  the option, and the slice rule exports them); each is checked to record 3 episodes. The runs of
  ``definitions_slices`` have none, so the self-consistent definitions with 3 episodes are no
  universe. B stays the same in both (the behavior front as evaluated, the data's HV).

Outputs (:func:`write_multiverse`): ``universes.csv`` (one row per universe: a column per choice,
the tallies with a bootstrap interval over seeds, each row's best model and order),
``findings.csv`` (per finding: its value in the paper's universe, the share of universes where it
holds, the rate at which each choice flips it), ``specification-<statistic>.{png,pdf}`` (the
specification curves) and ``README.md`` (a reading of the shares).
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from morl.aggregate import read_data_fronts
from morl.data import atomic_write
from morl.dataset_info import read_card
from morl.errors import InputError
from morl.evaluate import read_evaluation
from morl.metrics import cardinality, hypervolume, sparsity
from morl.paper import published_fraction
from morl.slices import slice_files
from morl.stats import percentile_interval
from morl.tables import display_name, kendall_tau, sort_datasets
from morl.targets import CLOSE, HEADLINE, PEDA_MODELS, STITCHING_ROWS, TAU_TARGET, row_checks

#: Each analysis choice and its options; the first option is the paper's (PEDA's).
CHOICES: dict[str, tuple] = {
    "reference_point": ("origin", "data-min"),
    "b": ("data", "behavior"),
    "grid": (501, 101, 51),
    "negative_returns": ("count", "drop"),
    "seeds": ("all", "leave-one-out"),
    "ordering_metric": ("hv", "sp", "cardinality"),
    "definitions": ("peda", "self-consistent"),
    "episodes": (1, 3),
}
#: The choices whose other options need runs (definitions_slices) or evaluations (evaluate_episodes) of their own.
NOT_POST_HOC = ("definitions", "episodes")
#: The options crossed when a config has no ``multiverse`` section: every post-hoc one.
DEFAULT_OPTIONS = {c: list(o) if c not in NOT_POST_HOC else [o[0]] for c, o in CHOICES.items()}
#: Combinations that are no universe, and why.
EXCLUDED = ((
    {"reference_point": "data-min", "b": "data"},
    "the data's HV from its data-min point needs the trajectory returns, which the slices do not hold",
), (
    {"definitions": "self-consistent", "episodes": 3},
    "the runs under the self-consistent definitions have no 3-episode evaluations",
))  # fmt: skip
#: Lattice divisions of each grid option, per number of objectives (module docstring).
GRID_DIVISIONS = {501: {2: 500, 3: 24}, 101: {2: 100, 3: 12}, 51: {2: 50, 3: 6}}
#: What the runs of PEDA's six models record under each ``definitions`` option.
DEFINITIONS = {
    "peda": {"returns_to_go": "peda", "statistics_from": "expert-high"},
    "self-consistent": {"returns_to_go": "weighted", "statistics_from": "dataset"},
}
#: MODT(P) and MORvS(P) reproduce the paper when within CLOSE on at least this share of the rows (10 of 12).
CLOSE_SHARE = 10 / 12
#: The models whose per-row order is a finding.
ORDERED = ("dt-p", "rvs-p", "bc-p")
#: Bootstrap replicates of the seeds inside a universe, the seed of their draw, the interval's coverage.
BOOTSTRAP_REPS, BOOTSTRAP_SEED, CONFIDENCE = 1000, 0, 0.95
#: A share at or above this reads as a finding that holds robustly (at or below 1 - this: robustly fails).
ROBUST = 0.95
_METRICS = ("hv", "sp", "cardinality")


def multiverse_options(config: Mapping[str, Any]) -> dict[str, list]:
    """The options of each choice the config's ``multiverse`` section lists (the schema checks
    them), the others at :data:`DEFAULT_OPTIONS`; ``seeds`` expanded into ``all`` and one
    ``drop-<seed>`` per training seed of the config."""
    section = config.get("multiverse") or {}
    options = {c: list(section.get(c, DEFAULT_OPTIONS[c])) for c in CHOICES}
    seeds = []
    for option in options["seeds"]:
        if option == "leave-one-out":
            if len(config["seeds"]) < 2:
                raise InputError(
                    f"multiverse.seeds: leave-one-out needs two seeds or more; the config has {config['seeds']}"
                )
            seeds += [f"drop-{s}" for s in config["seeds"]]
        else:
            seeds.append(option)
    options["seeds"] = seeds
    return options


def expand_universes(options: Mapping[str, Sequence]) -> list[dict[str, Any]]:
    """Every combination of the options but the :data:`EXCLUDED` ones, in a fixed order (the
    paper's universe first when every choice offers the paper's option)."""
    out = []
    for combo in itertools.product(*(options[c] for c in CHOICES)):
        universe = dict(zip(CHOICES, combo))
        if not any(all(universe[k] == v for k, v in rule.items()) for rule, _ in EXCLUDED):
            out.append(universe)
    return out


def is_paper_universe(universe: Mapping[str, Any]) -> bool:
    return all(universe[c] == CHOICES[c][0] for c in CHOICES)


# ---------------------------------------------------------------------------------------------
# Reading the slices and scoring every run once per (reference point, grid, point filter)


def card_minimum(path: str | os.PathLike) -> np.ndarray:
    """Per objective, the minimum trajectory return a dataset card prints (``returns per
    trajectory`` table, columns mean, std, min, max)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if m := re.match(r"\s*returns per trajectory \((\d+) objectives\):", line):
            rows = lines[i + 2 : i + 2 + int(m[1])]
            try:
                return np.array([float(r.split()[-2]) for r in rows])
            except (ValueError, IndexError):
                break
    raise InputError(f"{path}: not a dataset card with a 'returns per trajectory' table")


def sublattice_mask(preferences: np.ndarray, divisions: int) -> np.ndarray:
    """The rows of an evaluated preference lattice that lie on its sub-lattice of ``divisions``;
    an error when the grid is no simplex lattice or ``divisions`` does not divide its own."""
    n, n_obj = preferences.shape
    own = next((d for d in range(1, 100_000) if math.comb(d + n_obj - 1, n_obj - 1) >= n), None)
    if own is None or math.comb(own + n_obj - 1, n_obj - 1) != n:
        raise InputError(f"{n} preference points of {n_obj} objectives are no simplex lattice")
    steps = preferences * own
    index = np.rint(steps).astype(np.int64)
    if np.abs(steps - index).max() > 1e-6 or np.any(index.sum(axis=1) != own):
        raise InputError(f"the {n} preference points are not the lattice of {own} divisions")
    if own % divisions:
        raise InputError(f"the sub-lattice of {divisions} divisions is not part of the evaluated one of {own}")
    mask = np.all(index % (own // divisions) == 0, axis=1)
    assert mask.sum() == math.comb(divisions + n_obj - 1, n_obj - 1)
    return mask


def score(preferences, returns, nadir, options: Mapping[str, Sequence]) -> dict[tuple, np.ndarray]:
    """One evaluation scored in every (reference point, grid, point filter) of ``options``:
    ``(reference_point, grid, negative_returns) -> [HV, SP, cardinality]``."""
    n_obj = returns.shape[1]
    if n_obj not in GRID_DIVISIONS[501]:
        raise InputError(f"the multiverse's grid options are defined for 2 and 3 objectives, not {n_obj}")
    out = {}
    for grid in options["grid"]:
        on_grid = returns[sublattice_mask(preferences, GRID_DIVISIONS[grid][n_obj])]
        for negative in options["negative_returns"]:
            points = on_grid if negative == "count" else on_grid[np.all(on_grid >= 0, axis=1)]
            sp, card = sparsity(points), cardinality(points)
            for ref in options["reference_point"]:
                hv = hypervolume(points, None if ref == "origin" else nadir) if len(points) else 0.0
                out[(ref, grid, negative)] = np.array([hv, sp, card], dtype=np.float64)
    return out


class Runs:
    """Every run of the config's grid in the slices, scored once per (reference point, grid, point
    filter): ``measures[(definitions, episodes, ref, grid, negative)]`` is an array (rows, models,
    seeds, 3) of HV, SP and cardinality (NaN: no run); ``b[(b, ref, grid, negative)]`` the B of each row."""

    def __init__(self, config, slices_dir, options, definitions_slices=None):
        self.rows = sort_datasets((e, q, h) for e in config["envs"] for q in config["qualities"]
                                  for h in config["entropies"])  # fmt: skip
        self.models, self.seeds = list(config["models"]), list(config["seeds"])
        found = slice_files(slices_dir)
        data_hv = read_data_fronts(found["data_cards"])
        nadir = {}
        for path in found["data_cards"]:
            card = read_card(path)
            nadir[(card["env"], card["quality"], card["entropy"])] = card_minimum(path)
        missing = [r for r in self.rows if r not in data_hv]
        if missing:
            raise InputError(f"{slices_dir}: no dataset card of {', '.join('/'.join(r) for r in missing)}")
        self.data_hv, self.nadir = data_hv, nadir
        shape = (len(self.rows), len(self.models), len(self.seeds), len(_METRICS))
        keys = list(itertools.product(options["reference_point"], options["grid"], options["negative_returns"]))
        self.measures = {(d, 1, *k): np.full(shape, np.nan) for d in options["definitions"] for k in keys}
        behavior_sha = self._score_runs(found["evaluations"], ("peda", 1), options, keys)
        if "self-consistent" in options["definitions"]:
            if not definitions_slices:
                raise InputError("multiverse.definitions: self-consistent needs multiverse.definitions_slices")
            other = slice_files(definitions_slices)
            for path in other["data_cards"]:
                card = read_card(path)
                key = (card["env"], card["quality"], card["entropy"])
                if key in data_hv and (card["data_hv"] != data_hv[key] or np.any(card_minimum(path) != nadir[key])):
                    raise InputError(f"{path}: another dataset than the card of {'/'.join(key)} in {slices_dir}")
            for k in keys:  # the runs of the self-consistent definitions where there are some, else the same runs
                self.measures[("self-consistent", 1, *k)] = self.measures[("peda", 1, *k)].copy()
            self._score_runs(other["evaluations"], ("self-consistent", 1), options, keys, behavior_sha)
        for episodes in options["episodes"]:
            if episodes == 1:
                continue
            again = [Path(e).with_name(f"eval-episodes{episodes}.parquet") for e in found["evaluations"]]
            missing = [str(p) for p in again if not p.is_file()]
            if missing:
                raise InputError(
                    f"{missing[0]}: missing ({len(missing)} of {len(again)} runs have no evaluation with "
                    f"{episodes} episodes per point); `snakemake multiverse` with multiverse.episodes "
                    f"{options['episodes']} evaluates the runs' checkpoints again and exports them with the slices"
                )
            for k in keys:
                self.measures[("peda", episodes, *k)] = np.full(shape, np.nan)
            self._score_runs([str(p) for p in again], ("peda", episodes), options, keys, behavior_sha)
        self.b = {}
        for k in keys:
            if k[0] == "origin":
                self.b[("data", *k)] = np.array([data_hv[r] for r in self.rows])
            self.b[("behavior", *k)] = np.full(len(self.rows), np.nan)
        for path in found["fronts"]:
            meta, arrays = read_evaluation(path)
            behavior = arrays["policy"] == "behavior"
            for i, row in enumerate(self.rows):
                if row[0] == meta["env_id"]:
                    scored = score(arrays["preference"][behavior], arrays["return"][behavior], nadir[row], options)
                    for k in keys:
                        self.b[("behavior", *k)][i] = scored[k][0]

    def _score_runs(self, evaluations, universe, options, keys, behavior_sha=None) -> dict:
        """Score each evaluation of a run of the grid into ``measures``; check that PEDA's models
        were trained under the universe's definitions, that the evaluation ran its number of
        episodes per point and (``behavior_sha``: env -> SHA-256) that it is of the same data."""
        definitions, episodes = universe
        seen = {}
        for path in evaluations:
            meta, arrays = read_evaluation(path)
            row = (meta.get("env_id"), meta.get("quality"), meta.get("entropy"))
            model, seed = meta.get("model"), meta.get("train_seed")
            if row not in self.rows or model not in self.models or seed not in self.seeds:
                continue
            if definitions == "self-consistent" and model not in PEDA_MODELS:
                continue
            if meta.get("episodes") != episodes:
                raise InputError(f"{path}: evaluated with {meta.get('episodes')} episodes per preference, where "
                                 f"the multiverse reads {episodes}")  # fmt: skip
            if model in PEDA_MODELS:
                wrong = {k: meta.get(k) for k, v in DEFINITIONS[definitions].items() if meta.get(k) != v}
                if wrong:
                    raise InputError(f"{path}: trained under {wrong}, not the {definitions} definitions "
                                     f"{DEFINITIONS[definitions]}")  # fmt: skip
            if behavior_sha is not None and meta.get("behavior_sha256") != behavior_sha.get(row[0]):
                raise InputError(f"{path}: made from another behavior policy's data than the runs it stands in for")
            seen[row[0]] = meta.get("behavior_sha256")
            scored = score(arrays["preference"], arrays["return"], self.nadir[row], options)
            i, j, s = self.rows.index(row), self.models.index(model), self.seeds.index(seed)
            for k in keys:
                self.measures[(definitions, episodes, *k)][i, j, s] = scored[k]
        return seen


# ---------------------------------------------------------------------------------------------
# The findings of one universe


def _ranked(scores: Mapping[str, float], models: Sequence[str]) -> str:
    """``models`` best first (``a>b``; equal scores ``a=b``); empty when one has no score."""
    if any(m not in scores for m in models):
        return ""
    ordered = sorted(models, key=lambda m: -scores[m])
    return ordered[0] + "".join(("=" if scores[b] == scores[a] else ">") + b for a, b in itertools.pairwise(ordered))


def _tau_replicates(scores: np.ndarray, paper: np.ndarray) -> np.ndarray:
    """Kendall's tau-a (:func:`morl.tables.kendall_tau`) of each replicate's scores (reps, n)
    against ``paper`` (n,)."""
    i, j = np.triu_indices(paper.size, k=1)
    agree = np.sign(scores[:, i] - scores[:, j]) * np.sign(paper[i] - paper[j])
    return agree.sum(axis=1) / i.size


def universe_findings(runs: Runs, universe: Mapping[str, Any], draws: Mapping[int, np.ndarray]) -> dict[str, Any]:
    """The findings of one universe: the tallies ``morl paper-targets`` reads (each with a
    bootstrap interval over seeds when every cell has its runs; ``draws``: seed-position draws
    (reps, rows, models, seeds) per seed count), each row's best model and order of :data:`ORDERED`."""
    key = (universe["reference_point"], universe["grid"], universe["negative_returns"])
    drop = universe["seeds"]
    seeds = [k for k, s in enumerate(runs.seeds) if drop == "all" or drop != f"drop-{s}"]
    values = runs.measures[(universe["definitions"], universe["episodes"], *key)][:, :, seeds, :]
    b = runs.b[(universe["b"], *key)]
    metric = _METRICS.index(universe["ordering_metric"])
    with np.errstate(invalid="ignore", divide="ignore"):
        present = ~np.isnan(values[..., 0]).any(axis=2)  # every chosen seed of the cell has its run
        mean = np.where(present[..., None], values.mean(axis=2), np.nan)
        fraction = mean[..., 0] / b[:, None]
    out: dict[str, Any] = {}
    close = {m: [0, 0] for m in HEADLINE}
    naive, taus, stitch, counted = [0, 0], [], [], []
    for i, (env, quality, entropy) in enumerate(runs.rows):
        paper = {m: published_fraction(env, quality, entropy, m) for m in runs.models}
        ours = {
            m: (None if not math.isfinite(fraction[i, j]) else float(fraction[i, j])) for j, m in enumerate(runs.models)
        }
        checks = row_checks({m: (ours[m], paper[m]) for m in runs.models}, env, quality)
        label = f"{env}:{quality}" + ("" if entropy == "high" else f"-{entropy}")
        sign = -1.0 if universe["ordering_metric"] == "sp" else 1.0
        scores = {m: sign * (fraction[i, j] if metric == 0 else mean[i, j, metric])
                  for j, m in enumerate(runs.models) if present[i, j] and math.isfinite(fraction[i, j])}  # fmt: skip
        best = max(scores.values(), default=None)
        out[f"best:{label}"] = "=".join(m for m in runs.models if scores.get(m) == best) if best is not None else ""
        out[f"order:{label}"] = _ranked(scores, ORDERED)
        if all(checks[m] is None for m in HEADLINE) and checks["tau"] is None:
            continue  # as paper-targets: a row without the numbers is pending
        counted.append(i)
        for m in HEADLINE:
            if checks[m] is not None:
                close[m][0] += checks[m][2]
                close[m][1] += 1
        known = [ok for *_, ok in checks["naive"] if ok is not None]
        if known:
            naive[0] += all(known)
            naive[1] += 1
        pairs = [(scores[m], paper[m]) for m in PEDA_MODELS if m in scores and paper[m] is not None]
        tau = kendall_tau([a for a, _ in pairs], [p for _, p in pairs]) if len(pairs) == len(PEDA_MODELS) else None
        if tau is not None:
            taus.append(tau)
        if checks.get("stitch") is not None:
            stitch.append(checks["stitch"][2])
    for m, name in zip(HEADLINE, ("modt", "morvs")):
        out[f"{name}_close"], out[f"{name}_rows"] = close[m]
    out["naive_below"], out["naive_rows"] = naive
    out["tau_mean"] = round(sum(taus) / len(taus), 6) if taus else None
    out["tau_rows"] = len(taus)
    out["stitch_met"], out["stitch_rows"] = sum(stitch), len(stitch)
    out.update(_intervals(runs, values, b, present, universe, counted, draws.get(len(seeds))))
    return out


def _intervals(runs, values, b, present, universe, counted, draw) -> dict[str, float | None]:
    """Bootstrap intervals of the MODT(P) and MORvS(P) tallies and mean tau: the seeds of every
    cell resampled with replacement, independently per cell (rliable's stratified bootstrap with
    one stratum per cell), B and the paper's numbers fixed."""
    names = ("modt_close", "morvs_close", "tau_mean")
    if draw is None or not counted or not present[counted].all():
        return {f"{n}_{end}": None for n in names for end in ("low", "high")}
    rows = np.array(counted)
    cells = (np.arange(rows.size)[None, :, None, None], np.arange(len(runs.models))[None, None, :, None], draw[:, rows])
    chosen = values[rows]  # (rows, models, seeds, metrics)
    fraction = chosen[..., 0][cells].mean(axis=3) / b[rows][None, :, None]  # (reps, rows, models)
    paper = np.array([[np.nan if (p := published_fraction(*runs.rows[i], m)) is None else p for m in runs.models]
                      for i in rows])  # fmt: skip
    out = {}
    for m, name in zip(HEADLINE, ("modt_close", "morvs_close")):
        j = runs.models.index(m)
        known = ~np.isnan(paper[:, j])
        hits = (np.abs(fraction[:, known, j] - paper[known, j]) <= CLOSE + 1e-12).sum(axis=1)
        out[f"{name}_low"], out[f"{name}_high"] = percentile_interval(hits.astype(np.float64), CONFIDENCE)
    metric = _METRICS.index(universe["ordering_metric"])
    if metric == 0:
        scores = fraction
    else:
        sign = -1.0 if universe["ordering_metric"] == "sp" else 1.0
        scores = sign * chosen[..., metric][cells].mean(axis=3)
    peda = [runs.models.index(m) for m in PEDA_MODELS if m in runs.models]
    taus = [_tau_replicates(scores[:, r, peda], paper[r, peda]) for r in range(len(rows))
            if len(peda) == len(PEDA_MODELS) and not np.isnan(paper[r, peda]).any()]  # fmt: skip
    if taus:
        out["tau_mean_low"], out["tau_mean_high"] = percentile_interval(np.mean(taus, axis=0), CONFIDENCE)
    else:
        out["tau_mean_low"] = out["tau_mean_high"] = None
    return {k: None if v is None else round(v, 6) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------
# Findings across universes


def _tally_findings() -> list[tuple[str, str, str, Any]]:
    """(finding, statistic column, when it holds, test on a universe's row)."""
    return [
        (f"MODT(P) within ±{CLOSE:.2f} of the paper's HV / B", "modt_close", "on at least 10 of 12 rows",
         lambda u: u["modt_rows"] > 0 and u["modt_close"] >= CLOSE_SHARE * u["modt_rows"] - 1e-9),
        (f"MORvS(P) within ±{CLOSE:.2f} of the paper's HV / B", "morvs_close", "on at least 10 of 12 rows",
         lambda u: u["morvs_rows"] > 0 and u["morvs_close"] >= CLOSE_SHARE * u["morvs_rows"] - 1e-9),
        ("naive models below their (P) counterparts where the paper has them >10% below", "naive_below",
         "on every row", lambda u: u["naive_rows"] > 0 and u["naive_below"] == u["naive_rows"]),
        ("Kendall's τ over PEDA's six models against the paper's HV ordering, mean over rows", "tau_mean",
         f"at least {TAU_TARGET}", lambda u: u["tau_mean"] is not None and u["tau_mean"] >= TAU_TARGET),
        ("MORvS(P) ≥ B on Ant's and Swimmer's amateur data", "stitch_met", "on both rows",
         lambda u: u["stitch_rows"] == len(STITCHING_ROWS) and u["stitch_met"] == u["stitch_rows"]),
    ]  # fmt: skip


def flip_rates(universes: Sequence[Mapping[str, Any]], holds: Sequence[bool]) -> dict[str, float | None]:
    """Per choice: of the pairs of universes that differ in that choice alone, the share that
    disagree on whether the finding holds (None: no such pair)."""
    out = {}
    for choice in CHOICES:
        groups: dict[tuple, list[bool]] = {}
        for u, h in zip(universes, holds):
            groups.setdefault(tuple(u[c] for c in CHOICES if c != choice), []).append(h)
        pairs = sum(len(g) * (len(g) - 1) // 2 for g in groups.values())
        flips = sum(sum(g) * (len(g) - sum(g)) for g in groups.values())
        out[choice] = flips / pairs if pairs else None
    return out


def findings_table(rows: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> list[dict[str, Any]]:
    """One record per finding: its value and whether it holds in the paper's universe, the share of
    universes where it holds, and how often each choice flips it (``rows``: universes.csv's rows)."""
    paper = next((u for u in rows if is_paper_universe(u)), None)
    if paper is None:
        raise InputError("the multiverse has no paper's universe: every choice must offer the paper's option")
    tests = list(_tally_findings())
    for label in labels:
        env, quality = label.split(":")
        tests.append((f"best model, {env} {quality}", f"best:{label}", "as in the paper's universe",
                      lambda u, k=f"best:{label}": u[k] == paper[k]))  # fmt: skip
        tests.append((f"order of {', '.join(display_name(m) for m in ORDERED)}, {env} {quality}", f"order:{label}",
                      "as in the paper's universe", lambda u, k=f"order:{label}": u[k] == paper[k]))  # fmt: skip
    out = []
    for finding, statistic, when, test in tests:
        holds = [bool(test(u)) for u in rows]
        rates = flip_rates(rows, holds)
        ranked = [c for c in CHOICES if rates[c] is not None]
        top = max((rates[c] for c in ranked), default=0.0)
        most = [c for c in ranked if rates[c] == top] if top > 0 else []
        # the share among the universes that take the paper's option of the choice(s) flipping it most
        kept = [h for u, h in zip(rows, holds) if all(u[c] == CHOICES[c][0] for c in most)]
        numbers = [u[statistic] for u in rows if isinstance(u[statistic], (int, float))]
        out.append({
            "finding": finding, "statistic": statistic, "holds_when": when, "paper_universe": paper[statistic],
            "holds_there": "yes" if test(paper) else "no", "min": min(numbers, default=None),
            "max": max(numbers, default=None), "universes": len(rows), "holds": round(sum(holds) / len(rows), 4),
            "flips_most": ";".join(most) or "none", "flip_rate": round(top, 4),
            "holds_with_its_paper_option": round(sum(kept) / len(kept), 4) if most else None,
            **{f"flips:{c}": "" if rates[c] is None else round(rates[c], 4) for c in CHOICES},
        })  # fmt: skip
    return out


def _csv(records: Sequence[Mapping[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(records[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in records)
    return buffer.getvalue()


def _readme(options, universes, findings) -> str:
    """The folder's README: what was crossed, how to read a share, what holds and what flips it."""
    lines = ["# Multiverse: which of the paper's findings survive which analysis choices", "",
             f"Built by `morl multiverse` (or `snakemake multiverse`) from the slices and the config's multiverse "
             f"section: {len(universes)} universes. "
             "docs/protocol.md (\"Analysis choices (multiverse)\") states each choice and the papers' options; "
             "`morl/multiverse.py` says how each is computed.", "",
             "| choice | options crossed | the paper's |", "|---|---|---|"]  # fmt: skip
    for c in CHOICES:
        lines.append(f"| {c} | {', '.join(map(str, options[c]))} | {CHOICES[c][0]} |")
    for rule, why in EXCLUDED:
        if all(v in options[k] for k, v in rule.items()):
            lines += ["", f"No universe has {' with '.join(f'{k} {v}' for k, v in rule.items())}: {why}."]
    needs = {"definitions": "the definitions_slices of the grid trained under the self-consistent definitions",
             "episodes": "every run's checkpoint evaluated again with 3 episodes per point"}  # fmt: skip
    alone = [c for c in NOT_POST_HOC if len(options[c]) == 1]
    if alone:
        lines += ["", "Not crossed here: " + "; ".join(f"{c} (it needs {needs[c]})" for c in alone) + "."]
    lines += ["", "## How to read a share", "",
              "A finding's share is the fraction of universes in which it holds. The universes weigh alike; they "
              "are the analyses one could defensibly have run, not a sample of anything, so a share is no "
              f"probability. A share of at least {ROBUST} reads as holding whatever the choices "
              f"(robust), at most {1 - ROBUST:.2f} as failing whatever the choices; anything between, a 51% "
              "included, says the choices decide it, and the flip rates say which one. A flip rate is, of "
              "the pairs of universes that differ in that choice alone, the share that disagree on whether "
              "the finding holds. A per-row finding (best model, order) holds where it equals the paper's "
              f"universe. universes.csv gives each tally a {CONFIDENCE:.0%} bootstrap interval over seeds "
              f"({BOOTSTRAP_REPS} replicates, each cell's seeds resampled).", "",
              "## Findings", "",
              "| finding | holds when | paper's universe | range | share holding | flipped most by (rate) | share holding "
              "where that choice takes the paper's option |", "|---|---|---|---|---:|---|---:|"]  # fmt: skip
    for f in findings:
        flips = "—" if f["flips_most"] == "none" else f"{f['flips_most']} ({f['flip_rate']:.2f})"
        kept = f["holds_with_its_paper_option"]
        spread = "" if f["min"] is None else f"{f['min']:g} to {f['max']:g}"
        lines.append(f"| {f['finding']} | {f['holds_when']} | {f['paper_universe']} ({f['holds_there']}) | {spread} | "
                     f"{f['holds']:.2f} | {flips} | {'—' if kept is None else f'{kept:.2f}'} |")  # fmt: skip
    robust = [f["finding"] for f in findings if f["holds"] >= ROBUST]
    fails = [f["finding"] for f in findings if f["holds"] <= 1 - ROBUST]
    between = [f for f in findings if 1 - ROBUST < f["holds"] < ROBUST]
    counts: dict[str, int] = {}
    for f in between:
        for c in f["flips_most"].split(";"):
            counts[c] = counts.get(c, 0) + 1
    lines += ["", "## Reading", "",
              f"- Robust (share ≥ {ROBUST}): {len(robust)} of {len(findings)} findings" +
              (": " + "; ".join(robust[:5]) + ("; …" if len(robust) > 5 else "") if robust else "") + ".",
              f"- Failing in (nearly) every universe (share ≤ {1 - ROBUST:.2f}): {len(fails)}" +
              (": " + "; ".join(fails[:5]) + ("; …" if len(fails) > 5 else "") if fails else "") + ".",
              f"- Decided by the choices: {len(between)}" +
              (" (the choice that flips each most often: " + ", ".join(f"{c} {n}" for c, n in
               sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) + ")" if between else "") + "."]  # fmt: skip
    return "\n".join(lines) + "\n"


def specification_figure(rows: Sequence[Mapping[str, Any]], statistic: str, label: str, target: float, options):
    """A specification curve: the universes sorted by ``statistic`` (its bootstrap interval as a
    bar, the target as a line, the paper's universe marked), and beneath, which option of each
    choice every universe took."""
    from morl.plots import pyplot

    plt = pyplot()
    order = sorted(range(len(rows)), key=lambda k: (rows[k][statistic] is None, rows[k][statistic] or 0.0, k))
    x = np.arange(len(order))
    value = np.array([np.nan if rows[k][statistic] is None else rows[k][statistic] for k in order], dtype=float)
    low = np.array([rows[k].get(f"{statistic}_low") or np.nan for k in order], dtype=float)
    high = np.array([rows[k].get(f"{statistic}_high") or np.nan for k in order], dtype=float)
    shown = [(c, o) for c in CHOICES if len(options[c]) > 1 for o in options[c]]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(11, 3 + 0.22 * len(shown) + 2.5),
                                      gridspec_kw={"height_ratios": [2.5, 0.22 * len(shown) + 0.5]})  # fmt: skip
    top.vlines(x, low, high, color="0.8", linewidth=0.8, label=f"{CONFIDENCE:.0%} bootstrap interval over seeds")
    held = value >= target
    top.scatter(x[held], value[held], s=6, color="tab:green", label=f"≥ {target:g}", zorder=3)
    top.scatter(x[~held], value[~held], s=6, color="tab:red", label=f"< {target:g}", zorder=3)
    paper = [i for i, k in enumerate(order) if is_paper_universe(rows[k])]
    top.scatter(x[paper], value[paper], s=60, marker="*", color="black", label="the paper's universe", zorder=4)
    top.axhline(target, color="0.4", linestyle="--", linewidth=0.8)
    top.set_ylabel(label)
    top.set_title(f"Specification curve: {label}, {len(rows)} universes")
    top.legend(fontsize=7, loc="upper left")
    for y, (c, o) in enumerate(shown):
        used = [i for i, k in enumerate(order) if rows[k][c] == o]
        bottom.scatter(used, np.full(len(used), y), marker="|", s=12, color="tab:blue", linewidths=0.6)
    bottom.set_yticks(range(len(shown)), [f"{c}: {o}" for c, o in shown], fontsize=7)
    bottom.set_ylim(len(shown) - 0.5, -0.5)
    bottom.set_xlabel("universe (sorted by the statistic)")
    fig.tight_layout()
    return fig


#: The specification curves drawn: statistic, axis label, target.
CURVES = (("morvs_close", "rows with MORvS(P) within ±0.10", 10), ("tau_mean", "mean Kendall's τ", TAU_TARGET))


def write_multiverse(config: Mapping[str, Any], slices_dir, out_dir, plots: bool = True) -> dict[str, Path]:
    """Compute every universe of the config's ``multiverse`` section from the slices in
    ``slices_dir`` (and ``multiverse.definitions_slices``) and write the outputs into ``out_dir``."""
    options = multiverse_options(config)
    universes = expand_universes(options)
    runs = Runs(config, slices_dir, options, (config.get("multiverse") or {}).get("definitions_slices"))
    rng = np.random.RandomState(BOOTSTRAP_SEED)
    shape = (BOOTSTRAP_REPS, len(runs.rows), len(runs.models))
    draws = {k: rng.randint(0, k, size=(*shape, k)) for k in sorted({len(runs.seeds), len(runs.seeds) - 1} - {0})}
    records = [{"universe": n, **u, **universe_findings(runs, u, draws)} for n, u in enumerate(universes)]
    labels = [k.partition(":")[2] for k in records[0] if k.startswith("best:")]
    columns = ["universe", *CHOICES, "modt_close", "modt_close_low", "modt_close_high", "modt_rows", "morvs_close",
               "morvs_close_low", "morvs_close_high", "morvs_rows", "naive_below", "naive_rows", "tau_mean",
               "tau_mean_low", "tau_mean_high", "tau_rows", "stitch_met", "stitch_rows",
               *[f"best:{label}" for label in labels], *[f"order:{label}" for label in labels]]  # fmt: skip
    records = [{c: r[c] for c in columns} for r in records]
    findings = findings_table(records, labels)
    out = Path(out_dir)
    written = {"universes": out / "universes.csv", "findings": out / "findings.csv", "readme": out / "README.md"}
    texts = [_csv(records), _csv(findings), _readme(options, records, findings)]
    for path, text in zip(written.values(), texts):
        atomic_write(path, lambda tmp, t=text: Path(tmp).write_text(t, encoding="utf-8"))
    if plots:
        from morl.plots import save_figure

        for statistic, label, target in CURVES:
            fig = specification_figure(records, statistic, label, target, options)
            written[f"specification-{statistic}"] = save_figure(fig, out / f"specification-{statistic}")[0]
    return written
