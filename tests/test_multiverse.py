"""The multiverse analysis: universes, the choices' effects, and the committed outputs rebuilt from the slices."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from tables_compare import csv_differences, text_differences

from morl.cli import main
from morl.config import ConfigError, validate_config
from morl.errors import InputError
from morl.multiverse import (
    CHOICES,
    Runs,
    card_minimum,
    expand_universes,
    flip_rates,
    multiverse_options,
    score,
    sublattice_mask,
    universe_findings,
)
from morl.preferences import simplex_grid
from morl.targets import read_comparison, targets_table

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "docs" / "paper-cpu-small"
CONFIG = ROOT / "configs" / "paper-cpu-small.yaml"


@pytest.fixture(scope="module")
def small_config() -> dict:
    config = yaml.safe_load(CONFIG.read_text())
    config["multiverse"]["definitions_slices"] = str(ROOT / config["multiverse"]["definitions_slices"])
    return config


def test_the_universes_are_every_allowed_combination_of_the_configured_options(small_config):
    options = multiverse_options(small_config)
    assert options["seeds"] == ["all", "drop-0", "drop-1", "drop-2"]
    universes = expand_universes(options)
    # 2 x 2 reference points and Bs less the one without a universe, x 3 grids x 2 filters x 4 seed
    # sets x 3 metrics x 2 definitions
    assert len(universes) == 3 * 3 * 2 * 4 * 3 * 2 == 432
    assert len({tuple(u.values()) for u in universes}) == len(universes)
    assert universes[0] == {c: o[0] for c, o in CHOICES.items()} | {"seeds": "all"}
    assert not [u for u in universes if u["reference_point"] == "data-min" and u["b"] == "data"]
    # without a multiverse section: every post-hoc option, the paper's definitions only
    plain = {k: v for k, v in small_config.items() if k != "multiverse"}
    assert len(expand_universes(multiverse_options(plain))) == 3 * 3 * 2 * 4 * 3
    with pytest.raises(InputError, match="leave-one-out needs two seeds"):
        multiverse_options({**small_config, "seeds": [0]})


def test_the_config_section_is_validated_with_the_rest(small_config):
    validate_config(small_config, "paper-cpu-small.yaml")
    for section, message in [
        ({"reference_point": ["data-min"]}, r"multiverse.reference_point: \['data-min'\] must include 'origin'"),
        ({"definitions": ["peda", "self-consistent"]}, "missing required key multiverse.definitions_slices"),
        ({"grid": [501, 500]}, r"multiverse.grid\[1\]: 500 is not one of 501, 101, 51"),
        ({"episodes": [3]}, r"multiverse.episodes: \[3\] must include 1"),
        ({"episodes": [1, 5]}, r"multiverse.episodes\[1\]: 5 is not one of 1, 3"),
    ]:
        bad = copy.deepcopy(small_config)
        bad["multiverse"] = section
        with pytest.raises(ConfigError, match=message):
            validate_config(bad, "x.yaml")


def test_a_grid_option_keeps_exactly_its_sub_lattice():
    two = simplex_grid(2, 500)
    assert [sublattice_mask(two, d).sum() for d in (500, 100, 50)] == [501, 101, 51]
    assert np.allclose(two[sublattice_mask(two, 50)][:3], [[0.0, 1.0], [0.02, 0.98], [0.04, 0.96]])
    three = simplex_grid(3, 24)
    kept = three[sublattice_mask(three, 6)]
    assert [sublattice_mask(three, d).sum() for d in (24, 12, 6)] == [325, 91, 28]
    assert np.allclose(kept * 6, np.rint(kept * 6))
    with pytest.raises(InputError, match="not part of the evaluated one"):
        sublattice_mask(three, 5)
    with pytest.raises(InputError, match="no simplex lattice"):
        sublattice_mask(three[:-1], 6)


def test_the_reference_point_and_the_point_filter_change_hv_by_hand_computable_amounts():
    preferences = simplex_grid(2, 500)
    returns = np.where(np.arange(501)[:, None] < 167, [3.0, 1.0], np.where(np.arange(501)[:, None] < 334,
                       [2.0, 2.0], [1.0, 3.0]))  # fmt: skip
    returns[500] = [-1.0, 4.0]  # on every sub-lattice
    options = {"grid": [501, 51], "negative_returns": ["count", "drop"], "reference_point": ["origin", "data-min"]}
    for nadir, counted, dropped in [((-2.0, 0.0), 13.0, 12.0), ((1.0, 1.0), 1.0, 1.0)]:
        scored = score(preferences, returns, np.array(nadir), options)
        for grid in (501, 51):
            # from the origin the staircase (3, 1), (2, 2), (1, 3) covers 3 + 2 + 1; (-1, 4) adds nothing
            assert scored[("origin", grid, "count")][0] == scored[("origin", grid, "drop")][0] == 6.0
            # from (-2, 0) the strips y in [0, 1], [1, 2], [2, 3], [3, 4] reach x = 3, 2, 1, -1: 5 + 4 + 3 + 1;
            # without (-1, 4) the last strip goes; from (1, 1) only (2, 2) lies above it: 1 x 1
            assert scored[("data-min", grid, "count")][0] == counted
            assert scored[("data-min", grid, "drop")][0] == dropped
            # cardinality counts (-1, 4) only when it counts; SP is over PEDA's non-negative front anyway
            assert scored[("origin", grid, "count")][2] == 4 and scored[("origin", grid, "drop")][2] == 3
            assert scored[("origin", grid, "count")][1] == scored[("origin", grid, "drop")][1]


def test_the_data_min_point_is_the_cards_lowest_return_per_objective():
    assert card_minimum(SMALL / "runs/MO-Ant-v2/data/amateur-high.card.md").tolist() == [358.8, 399.2]
    assert card_minimum(SMALL / "runs/MO-Hopper-v3/data/amateur-high.card.md").tolist() == [45.6, -379.7, 329.6]


def test_a_flip_rate_counts_the_pairs_that_differ_in_one_choice_alone():
    options = {c: [o[0]] for c, o in CHOICES.items()} | {"b": ["data", "behavior"], "grid": [501, 101]}
    universes = expand_universes(options)
    rates = flip_rates(universes, [u["b"] == "data" for u in universes])
    assert rates["b"] == 1.0 and rates["grid"] == 0.0 and rates["seeds"] is None
    rates = flip_rates(universes, [u["b"] == "data" and u["grid"] == 501 for u in universes])
    assert rates["b"] == 0.5 and rates["grid"] == 0.5


@pytest.fixture(scope="module")
def runs(small_config) -> Runs:
    """The committed slices scored in the paper's choices, under both training definitions."""
    options = {c: [o[0]] for c, o in CHOICES.items()} | {"definitions": ["peda", "self-consistent"]}
    return Runs(small_config, SMALL / "runs", options, small_config["multiverse"]["definitions_slices"])


def test_the_papers_universe_finds_what_paper_targets_reads_off_the_committed_table(runs):
    paper = {c: o[0] for c, o in CHOICES.items()}
    found = universe_findings(runs, paper, {})
    frame = read_comparison(SMALL / "paper_comparison.csv")
    tally = "\n".join(targets_table(frame)[1])
    assert f"MODT(P) within ±0.10 of the paper's HV / B on {found['modt_close']} of {found['modt_rows']} rows" in tally
    assert (
        f"MORvS(P) within ±0.10 of the paper's HV / B on {found['morvs_close']} of {found['morvs_rows']} rows" in tally
    )
    assert f"clearly below: {found['naive_below']} of {found['naive_rows']} rows" in tally
    assert f"mean {found['tau_mean']:+.2f} over {found['tau_rows']} rows" in tally
    assert "MO-Ant-v2 yes, MO-Swimmer-v2 yes" in tally and found["stitch_met"] == found["stitch_rows"] == 2
    # each row's best model and order are those of the table's HV / B
    for (env, quality, _), group in frame.group_by(["env", "quality", "entropy"]):
        ours = dict(zip(group["model"], group["our_fraction"]))
        assert found[f"best:{env}:{quality}"] == max(ours, key=ours.get)
        assert found[f"order:{env}:{quality}"] == ">".join(sorted(("dt-p", "rvs-p", "bc-p"), key=lambda m: -ours[m]))


def test_the_definitions_replace_only_peda_models_where_their_runs_are(runs):
    key = ("origin", 501, "count")
    peda, other = runs.measures[("peda", 1, *key)], runs.measures[("self-consistent", 1, *key)]
    assert not np.isnan(peda).any()
    for i, (env, quality, _) in enumerate(runs.rows):
        for j, model in enumerate(runs.models):
            same = np.array_equal(peda[i, j], other[i, j])
            # the runs of PEDA's models on HalfCheetah, Hopper-v2 and Walker2d differ, but for (naive)
            # BC on expert data, which neither definition touches there (their statistics are the
            # expert data's own under both): its runs repeat byte for byte
            moved = model in ("dt-p", "rvs-p", "dt", "rvs") or (model in ("bc-p", "bc") and quality == "amateur")
            assert same != (env in ("MO-HalfCheetah-v2", "MO-Hopper-v2", "MO-Walker2d-v2") and moved), (env, model)


def _evaluate_again(slices: Path, env: str, episodes, scale: float) -> None:
    """Beside each run evaluation of ``env`` in ``slices``, an ``eval-episodes3.parquet`` that
    records ``episodes`` episodes per point and ``scale`` times the returns (a stand-in for the
    runs' checkpoints evaluated again with 3 episodes)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in sorted((slices / env).glob("*/*/seed*/eval.parquet")):
        table = pq.read_table(path)
        meta = json.loads(table.schema.metadata[b"morl"])
        meta["episodes"] = episodes
        returns = table.column("return").combine_chunks()
        scaled = pa.FixedSizeListArray.from_arrays(
            pa.array(returns.values.to_numpy() * scale, pa.float64()), returns.type.list_size
        )
        table = table.set_column(table.schema.get_field_index("return"), "return", scaled)
        again = table.replace_schema_metadata({b"morl": json.dumps(meta, sort_keys=True)})
        pq.write_table(again, path.with_name("eval-episodes3.parquet"))


def test_three_episodes_score_every_runs_second_evaluation(small_config, tmp_path):
    """multiverse.episodes 3 scores the eval-episodes3.parquet beside each run's evaluation; a run
    without one, or one of another episode count, is refused, naming the file."""
    import shutil

    slices = tmp_path / "runs"
    shutil.copytree(SMALL / "runs", slices)
    for env in {r[0] for r in expand_rows(small_config)}:
        _evaluate_again(slices, env, 3, 0.5 if env == "MO-HalfCheetah-v2" else 1.0)
    options = {c: [o[0]] for c, o in CHOICES.items()} | {"episodes": [1, 3]}
    runs = Runs(small_config, slices, options)
    one, three = runs.measures[("peda", 1, "origin", 501, "count")], runs.measures[("peda", 3, "origin", 501, "count")]
    assert not np.isnan(three).any()
    for i, (env, _, _) in enumerate(runs.rows):
        if env == "MO-HalfCheetah-v2":  # both objectives halved: a quarter of the HV
            assert np.allclose(three[i, ..., 0], 0.25 * one[i, ..., 0], rtol=1e-12)
        else:
            assert np.array_equal(three[i], one[i])
    universes = expand_universes(multiverse_options({**small_config, "multiverse": {"episodes": [1, 3]}}))
    assert {u["episodes"] for u in universes} == {1, 3}
    both = expand_universes(options | {"definitions": ["peda", "self-consistent"]})
    assert not [u for u in both if u["definitions"] == "self-consistent" and u["episodes"] == 3]
    first = sorted((slices / "MO-Swimmer-v2").glob("*/*/seed*/eval-episodes3.parquet"))[0]
    _evaluate_again(slices, "MO-Swimmer-v2", 1, 1.0)
    with pytest.raises(InputError, match=r"evaluated with 1 episodes per preference, where the multiverse reads 3"):
        Runs(small_config, slices, options)
    first.unlink()
    with pytest.raises(InputError, match=rf"{re.escape(str(first))}: missing \(1 of 360 runs"):
        Runs(small_config, slices, options)


def expand_rows(config) -> list[tuple[str, str, str]]:
    return [(e, q, h) for e in config["envs"] for q in config["qualities"] for h in config["entropies"]]


@pytest.mark.skipif(not (SMALL / "multiverse").is_dir(), reason="no multiverse of paper-cpu-small is committed yet")
def test_the_committed_multiverse_is_what_the_committed_slices_give(tmp_path, monkeypatch):
    """docs/paper-cpu-small/multiverse is what `morl multiverse` makes from the committed slices: the
    tables and the README as tests/tables_compare.py compares them; the figures are there."""
    monkeypatch.chdir(ROOT)  # the config names the definitions' slices from the checkout
    out = tmp_path / "multiverse"
    argv = ["multiverse", "--config", str(CONFIG), "--slices", str(SMALL / "runs"), "--out-dir", str(out)]
    assert main(argv) == 0
    made = sorted(p.name for p in out.iterdir())
    assert made == sorted(p.name for p in (SMALL / "multiverse").iterdir())
    for name in ("universes.csv", "findings.csv"):
        assert csv_differences(name, (SMALL / "multiverse" / name).read_text(), (out / name).read_text()) == []
    committed, rebuilt = (SMALL / "multiverse/README.md").read_text(), (out / "README.md").read_text()
    assert text_differences("README.md", committed, rebuilt) == []
    assert re.search(r"\b432 universes\b", rebuilt)
