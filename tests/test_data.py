"""The Parquet dataset format: round trip, self-description, and clear errors on bad files."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from morl.data import DataFileError, Dataset, load_dataset, read_meta, write_dataset


def _synthetic(rng, lengths=(3, 5, 2), obs_dim=4, act_dim=2, n_obj=2) -> Dataset:
    n = sum(lengths)
    return Dataset.from_arrays(
        rng.normal(size=(n, obs_dim)), rng.uniform(-1, 1, size=(n, act_dim)), rng.normal(size=(n, n_obj)),
        rng.dirichlet(np.ones(n_obj), size=len(lengths)), lengths,
        terminals=np.isin(np.arange(n), [2]), timeouts=np.isin(np.arange(n), [9]),
        meta={"env_id": "MO-HalfCheetah-v2", "quality": "expert", "entropy": "high", "seed": 1},
    )  # fmt: skip


def test_round_trip_keeps_every_field(tmp_path):
    ds = _synthetic(np.random.default_rng(0))
    path = tmp_path / "d.parquet"
    write_dataset(path, ds)
    back = load_dataset(path)
    for name in ("observations", "actions", "next_observations", "rewards", "preferences", "terminals",
                 "timeouts", "traj_ids", "steps", "traj_starts", "traj_lengths", "traj_preferences"):  # fmt: skip
        np.testing.assert_array_equal(getattr(back, name), getattr(ds, name), err_msg=name)
    np.testing.assert_allclose(back.traj_returns, ds.traj_returns)
    assert back.meta["env_id"] == "MO-HalfCheetah-v2" and back.meta["n_obj"] == 2 and back.meta["seed"] == 1
    assert not list(tmp_path.glob(".*tmp")), "no temporary file is left behind"


def test_derived_fields():
    ds = _synthetic(np.random.default_rng(1))
    np.testing.assert_array_equal(ds.traj_starts, [0, 3, 8])
    np.testing.assert_array_equal(ds.steps, [0, 1, 2, 0, 1, 2, 3, 4, 0, 1])
    np.testing.assert_allclose(ds.traj_returns[1], ds.rewards[3:8].sum(0), rtol=1e-6)
    # next observation within a trajectory is the following observation
    np.testing.assert_array_equal(ds.next_observations[3], ds.observations[4])


def test_readable_without_project_code(tmp_path):
    ds = _synthetic(np.random.default_rng(2))
    path = tmp_path / "d.parquet"
    write_dataset(path, ds)
    df = pl.read_parquet(path)
    returns = df.group_by("traj_id").agg(pl.col("reward").arr.get(0).sum()).sort("traj_id")
    np.testing.assert_allclose(returns["reward"].to_numpy(), ds.traj_returns[:, 0], rtol=1e-5)
    assert pq.read_table(path).num_rows == ds.n_steps


def test_preference_must_be_constant_within_a_trajectory():
    rng = np.random.default_rng(3)
    prefs = rng.dirichlet(np.ones(2), size=4)
    with pytest.raises(ValueError, match="constant within each trajectory"):
        Dataset.from_arrays(np.zeros((4, 3)), np.zeros((4, 1)), np.zeros((4, 2)), prefs, [2, 2])


def test_bad_files_are_named(tmp_path):
    missing = tmp_path / "nope.parquet"
    with pytest.raises(DataFileError, match="nope.parquet: file does not exist"):
        load_dataset(missing)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"this is not parquet")
    with pytest.raises(DataFileError, match="garbage.parquet: not a readable Parquet file"):
        read_meta(garbage)
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), foreign)
    with pytest.raises(DataFileError, match="no 'morl' metadata"):
        load_dataset(foreign)
    # a file with the metadata but a column removed
    ds = _synthetic(np.random.default_rng(4))
    good = tmp_path / "good.parquet"
    write_dataset(good, ds)
    table = pq.read_table(good)
    pq.write_table(table.drop_columns(["action"]), tmp_path / "cut.parquet")
    with pytest.raises(DataFileError, match="missing column"):
        load_dataset(tmp_path / "cut.parquet")
