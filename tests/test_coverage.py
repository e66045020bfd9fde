"""Coverage variants (complete, shattered, narrow): bands, whole trajectories, settings, metadata."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from morl.coverage import (
    COVERAGES,
    DEFAULTS,
    bands_for,
    check_derived_from,
    check_settings,
    coverage_record,
    derive,
    derive_file,
    front_model_steps,
    held_out,
)
from morl.data import META_KEY, Dataset, FileMismatchError, file_sha256, load_dataset, write_dataset
from morl.errors import InputError

N_TRAJ = 200
OBS_DIM, ACT_DIM = 3, 2


def make_dataset(w1=None, n_obj=2, seed=0, n_traj=N_TRAJ) -> Dataset:
    """``n_traj`` trajectories of 1-6 steps; w_1 uniform on [0.05, 0.95] unless given."""
    rng = np.random.default_rng(seed)
    if w1 is None:
        w1 = rng.uniform(0.05, 0.95, size=n_traj)
    w1 = np.asarray(w1, dtype=np.float64)
    n_traj = len(w1)
    if n_obj == 2:
        prefs = np.stack([w1, 1.0 - w1], axis=1)
    else:  # the rest of the weight split at random between the other objectives
        split = rng.dirichlet(np.ones(n_obj - 1), size=n_traj)
        prefs = np.concatenate([w1[:, None], (1.0 - w1)[:, None] * split], axis=1)
    lengths = rng.integers(1, 7, size=n_traj)
    n = int(lengths.sum())
    ends = np.cumsum(lengths) - 1
    terminals = np.zeros(n, bool)
    timeouts = np.zeros(n, bool)
    terminals[ends[::2]] = True
    timeouts[ends[1::2]] = True
    observations = rng.normal(size=(n, OBS_DIM))
    actions = rng.uniform(-1, 1, size=(n, ACT_DIM))
    rewards = rng.uniform(0, 3, size=(n, n_obj))
    # each step starts where the previous one ended; a trajectory's last step goes somewhere new
    next_observations = np.roll(observations, -1, axis=0)
    next_observations[ends] = rng.normal(size=(n, OBS_DIM))[ends]
    return Dataset.from_arrays(
        observations,
        actions,
        rewards,
        prefs.astype(np.float32),
        lengths,
        next_observations=next_observations,
        terminals=terminals,
        timeouts=timeouts,
        meta={"env_id": "Toy-v0", "quality": "expert", "entropy": "high"},
    )


@pytest.fixture(scope="module")
def ds():
    return make_dataset()


def traj_w1(ds: Dataset) -> np.ndarray:
    return ds.traj_preferences[:, 0].astype(np.float64)


def trajectories(ds: Dataset) -> list[tuple]:
    """Each trajectory's rows, as bytes, for comparing whole trajectories."""
    out = []
    for start, length in zip(ds.traj_starts, ds.traj_lengths, strict=True):
        rows = slice(start, start + length)
        out.append(
            tuple(
                a[rows].tobytes()
                for a in (ds.observations, ds.actions, ds.next_observations, ds.rewards, ds.preferences)
            )
            + (ds.terminals[rows].tobytes(), ds.timeouts[rows].tobytes())
        )
    return out


# ------------------------------------------------------------------------------------------- bands
def test_shattered_removes_three_bands_of_a_tenth_each_at_the_given_quantiles(ds):
    w1 = traj_w1(ds)
    out = derive(ds, "shattered", None)
    rec = out.meta["coverage"]
    assert rec["coverage"] == "shattered" and rec["objective"] == 0
    assert abs(rec["removed_trajectories"] - 0.3 * N_TRAJ) <= 2
    assert rec["kept_trajectories"] == out.n_trajectories == N_TRAJ - rec["removed_trajectories"]
    assert len(rec["bands"]) == 3
    for (lo, hi), c in zip(rec["bands"], [0.2, 0.5, 0.8], strict=True):
        np.testing.assert_allclose([lo, hi], np.quantile(w1, [c - 0.05, c + 0.05]), rtol=0, atol=1e-12)
        inside = int(((w1 >= lo) & (w1 <= hi)).sum())
        assert abs(inside - 0.1 * N_TRAJ) <= 1, (lo, hi, inside)
    kept = traj_w1(out)
    for lo, hi in rec["bands"]:
        assert not np.any((kept >= lo) & (kept <= hi))
    # what was removed is exactly what lay in a band
    assert N_TRAJ - out.n_trajectories == int(held_out(ds.traj_preferences, rec["bands"]).sum())


def test_narrow_keeps_only_the_middle_and_its_bands_reach_the_simplex_edges(ds):
    w1 = traj_w1(ds)
    out = derive(ds, "narrow", None)
    rec = out.meta["coverage"]
    q_low, q_high = np.quantile(w1, [0.15, 0.85])
    assert rec["bands"] == [[0.0, pytest.approx(q_low, abs=1e-12)], [pytest.approx(q_high, abs=1e-12), 1.0]]
    kept = traj_w1(out)
    assert np.all((kept > q_low) & (kept < q_high))
    assert abs(out.n_trajectories - 0.7 * N_TRAJ) <= 2
    assert out.n_trajectories == int(((w1 > q_low) & (w1 < q_high)).sum())


def test_narrow_with_a_quantile_at_the_end_removes_one_side_only(ds):
    out = derive(ds, "narrow", {"narrow": {"keep": [0.0, 0.6]}})
    [(lo, hi)] = out.meta["coverage"]["bands"]
    assert hi == 1.0 and lo == pytest.approx(np.quantile(traj_w1(ds), 0.6))
    assert traj_w1(out).min() == traj_w1(ds).min()  # the lowest trajectory stays


@pytest.mark.parametrize("coverage", ["shattered", "narrow"])
def test_variants_keep_whole_source_trajectories_in_order(ds, coverage):
    out = derive(ds, coverage, None)
    keep = ~held_out(ds.traj_preferences, out.meta["coverage"]["bands"])
    source = trajectories(ds)
    assert trajectories(out) == [t for t, k in zip(source, keep, strict=True) if k]
    np.testing.assert_array_equal(out.traj_lengths, ds.traj_lengths[keep])
    np.testing.assert_array_equal(out.traj_ids, np.repeat(np.arange(out.n_trajectories), out.traj_lengths))
    rec = out.meta["coverage"]
    assert rec["source_steps"] == ds.n_steps and rec["kept_steps"] == out.n_steps == int(ds.traj_lengths[keep].sum())


def test_complete_keeps_everything_and_records_no_band(ds):
    out = derive(ds, "complete", None)
    assert trajectories(out) == trajectories(ds)
    rec = out.meta["coverage"]
    assert rec["bands"] == [] and rec["settings"] == {} and rec["removed_trajectories"] == 0
    assert rec["kept_trajectories"] == rec["source_trajectories"] == N_TRAJ
    assert not held_out(ds.traj_preferences, rec["bands"]).any()


def test_bands_lie_on_the_first_preference_coordinate_for_three_objectives():
    ds3 = make_dataset(n_obj=3, seed=3)
    out = derive(ds3, "shattered", None)
    bands = out.meta["coverage"]["bands"]
    assert bands == [list(b) for b in bands_for(traj_w1(ds3), "shattered", None)]
    kept = out.traj_preferences
    assert not held_out(kept, bands).any()
    # the other coordinates play no part: the same w_1 with another split of the rest is tagged alike
    probe = np.array([[b[0], 1 - b[0], 0.0] for b in bands] + [[b[0], 0.0, 1 - b[0]] for b in bands])
    assert held_out(probe, bands).all()


# --------------------------------------------------------------------------------------- held out
def test_held_out_tags_evaluation_points_beyond_the_data_range_for_narrow(ds):
    bands = derive(ds, "narrow", None).meta["coverage"]["bands"]
    w1 = traj_w1(ds)
    assert w1.min() > 0.04 and w1.max() < 0.96  # the points below lie outside the data's w_1
    points = np.array([0.0, 0.02, w1.min(), 0.5, w1.max(), 0.98, 1.0])
    prefs = np.stack([points, 1 - points], axis=1)
    np.testing.assert_array_equal(held_out(prefs, bands), [True, True, True, False, True, True, True])


def test_held_out_tags_the_shattered_bands_and_nothing_between_them(ds):
    bands = derive(ds, "shattered", None).meta["coverage"]["bands"]
    (a_lo, a_hi), (b_lo, b_hi), (c_lo, c_hi) = bands
    inside = [a_lo, (a_lo + a_hi) / 2, a_hi, (b_lo + b_hi) / 2, c_hi]
    outside = [0.0, np.nextafter(a_lo, 0), (a_hi + b_lo) / 2, (b_hi + c_lo) / 2, np.nextafter(c_hi, 1), 1.0]
    points = np.array(inside + outside)
    got = held_out(np.stack([points, 1 - points], axis=1), bands)
    np.testing.assert_array_equal(got, [True] * len(inside) + [False] * len(outside))


# ---------------------------------------------------------------------------------------- settings
def test_check_settings_fills_defaults_and_keeps_what_is_given():
    assert check_settings(None) == DEFAULTS
    assert check_settings({"shattered": None}) == DEFAULTS
    got = check_settings({"shattered": {"fraction": 0.15}, "narrow": {"keep": [0, 0.9]}})
    assert got == {"shattered": {"centers": [0.2, 0.5, 0.8], "fraction": 0.15}, "narrow": {"keep": [0.0, 0.9]}}
    json.dumps(got)  # JSON-able, for the metadata


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"shatered": {}}, "coverage.shatered:"),
        ({"shattered": {"width": 0.1}}, "coverage.shattered.width:"),
        ({"narrow": {"keep": [0.1, 0.9], "x": 1}}, "coverage.narrow.x:"),
        ({"shattered": []}, "coverage.shattered:"),
        ({"shattered": {"fraction": 0}}, "coverage.shattered.fraction:"),
        ({"shattered": {"fraction": 1.0}}, "coverage.shattered.fraction:"),
        ({"shattered": {"fraction": -0.2}}, "coverage.shattered.fraction:"),
        ({"shattered": {"fraction": "0.3"}}, "coverage.shattered.fraction:"),
        ({"shattered": {"fraction": float("nan")}}, "coverage.shattered.fraction:"),
        ({"shattered": {"centers": []}}, "coverage.shattered.centers:"),
        ({"shattered": {"centers": 0.5}}, "coverage.shattered.centers:"),
        ({"shattered": {"centers": [0.2, 1.2, 0.8]}}, "coverage.shattered.centers[1]:"),
        ({"shattered": {"centers": [-0.1, 0.5]}}, "coverage.shattered.centers[0]:"),
        ({"shattered": {"centers": [0.2, True, 0.8]}}, "coverage.shattered.centers[1]:"),
        ({"shattered": {"centers": [0.5, 0.2, 0.8]}}, "coverage.shattered.centers[1]:"),
        ({"shattered": {"centers": [0.2, 0.5, 0.5]}}, "coverage.shattered.centers[2]:"),
        ({"shattered": {"centers": [0.2, 0.25, 0.8]}}, "coverage.shattered.centers[1]:"),  # overlap
        ({"shattered": {"centers": [0.2, 0.3, 0.8]}}, "coverage.shattered.centers[1]:"),  # touching
        ({"shattered": {"centers": [0.02, 0.5, 0.8]}}, "coverage.shattered.centers[0]:"),  # leaves below 0
        ({"shattered": {"centers": [0.2, 0.5, 0.97]}}, "coverage.shattered.centers[2]:"),  # leaves above 1
        ({"shattered": {"centers": [0.3], "fraction": 0.8}}, "coverage.shattered.centers[0]:"),
        ({"narrow": {"keep": [0.2]}}, "coverage.narrow.keep:"),
        ({"narrow": {"keep": [0.8, 0.2]}}, "coverage.narrow.keep:"),  # reversed
        ({"narrow": {"keep": [0.5, 0.5]}}, "coverage.narrow.keep:"),  # empty
        ({"narrow": {"keep": [0, 1]}}, "coverage.narrow.keep:"),  # removes nothing
        ({"narrow": {"keep": [-0.1, 0.9]}}, "coverage.narrow.keep[0]:"),
        ({"narrow": {"keep": [0.1, 1.5]}}, "coverage.narrow.keep[1]:"),
        ({"narrow": {"keep": [0.1, None]}}, "coverage.narrow.keep[1]:"),
        ([0.2, 0.5], "coverage:"),
        ({"front_model_steps": 0}, "coverage.front_model_steps:"),
        ({"front_model_steps": 1.5}, "coverage.front_model_steps:"),
        ({"front_model_steps": True}, "coverage.front_model_steps:"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(settings, key):
    with pytest.raises(InputError) as err:
        check_settings(settings)
    assert str(err.value).startswith(key), str(err.value)


def test_front_model_steps_default_to_moduli_s_and_stay_out_of_the_band_settings():
    assert front_model_steps(None) == front_model_steps({"narrow": {"keep": [0.1, 0.9]}}) == 100_000
    assert front_model_steps({"front_model_steps": 200}) == 200
    # the variants' settings do not change with the step count, so neither do the derived files
    assert check_settings({"front_model_steps": 200}) == check_settings(None) == DEFAULTS


def test_settings_key_prefix_follows_where():
    with pytest.raises(InputError, match=r"^overrides\[2\]\.coverage\.narrow\.keep:"):
        check_settings({"narrow": {"keep": [0.9, 0.1]}}, where="overrides[2].coverage")


def test_unknown_coverage_is_refused(ds):
    assert COVERAGES == ("complete", "shattered", "narrow")
    with pytest.raises(InputError, match="coverage: unknown coverage 'sparse'"):
        derive(ds, "sparse", None)


# ------------------------------------------------------------------------------- data-level refusals
@pytest.mark.parametrize("coverage", ["shattered", "narrow"])
def test_a_dataset_whose_w1_are_all_equal_is_refused(tmp_path, coverage):
    path = tmp_path / "flat.parquet"
    write_dataset(path, make_dataset(w1=np.full(50, 0.4)))
    with pytest.raises(InputError) as err:
        derive_file(path, coverage, None, tmp_path / "out.parquet")
    msg = str(err.value)
    assert str(path) in msg and repr(coverage) in msg and "every one of the 50" in msg
    assert not (tmp_path / "out.parquet").exists()


def test_bands_that_fall_between_the_data_values_are_refused_as_removing_nothing():
    two = make_dataset(w1=[0.1, 0.9])  # the quantile bands lie strictly between the two values
    with pytest.raises(InputError, match=r"the-source: coverage 'shattered' removes no trajectory"):
        derive(two, "shattered", None, source="the-source")


def test_a_variant_is_not_derived_again(ds):
    once = derive(ds, "narrow", None)
    with pytest.raises(InputError, match="already a 'narrow' coverage variant"):
        derive(once, "shattered", None)


# ----------------------------------------------------------------------------------------- files
@pytest.fixture(scope="module")
def source_file(tmp_path_factory, ds):
    path = tmp_path_factory.mktemp("cov") / "expert-high.parquet"
    write_dataset(path, ds)
    return path


@pytest.mark.parametrize("coverage", COVERAGES)
def test_metadata_round_trips_through_a_file_and_records_the_source_hash(tmp_path, source_file, coverage):
    out_path = tmp_path / f"{coverage}.parquet"
    record = derive_file(source_file, coverage, None, out_path)
    loaded = load_dataset(out_path)
    assert coverage_record(loaded.meta, out_path) == record
    assert record == derive(load_dataset(source_file), coverage, None).meta["coverage"]
    assert loaded.meta["coverage_source"] == str(source_file)
    assert loaded.meta["coverage_source_sha256"] == file_sha256(source_file)
    # the writer's counts are the derived file's own, the source's descriptive keys carry over
    raw = json.loads(pq.read_schema(out_path).metadata[META_KEY])
    assert raw["n_trajectories"] == loaded.n_trajectories == record["kept_trajectories"]
    assert raw["n_steps"] == loaded.n_steps == record["kept_steps"]
    assert (raw["env_id"], raw["quality"], raw["entropy"]) == ("Toy-v0", "expert", "high")
    # the bands read back tag the same trajectories as in memory
    source = load_dataset(source_file)
    assert int(held_out(source.traj_preferences, record["bands"]).sum()) == record["removed_trajectories"]
    assert not held_out(loaded.traj_preferences, record["bands"]).any()
    assert check_derived_from(out_path, source_file) == record


def test_a_derived_file_checked_against_another_source_is_refused_naming_both(tmp_path, source_file):
    out_path = tmp_path / "shattered.parquet"
    derive_file(source_file, "shattered", None, out_path)
    other = tmp_path / "other.parquet"
    write_dataset(other, make_dataset(seed=1))
    with pytest.raises(FileMismatchError) as err:
        check_derived_from(out_path, other)
    msg = str(err.value)
    assert str(out_path) in msg and str(other) in msg and file_sha256(other)[:12] in msg
    with pytest.raises(FileMismatchError, match="no coverage variant"):
        check_derived_from(other, source_file)


def test_a_variant_is_not_written_over_its_source(source_file):
    before = file_sha256(source_file)
    with pytest.raises(InputError, match="would overwrite its source"):
        derive_file(source_file, "narrow", None, source_file)
    assert file_sha256(source_file) == before


def test_a_malformed_record_is_refused_naming_the_file():
    with pytest.raises(InputError, match=r"^x\.parquet: coverage record has malformed bands"):
        coverage_record({"coverage": {"coverage": "narrow", "bands": [[0.1]]}}, "x.parquet")
    assert coverage_record({"env_id": "Toy-v0"}) is None
