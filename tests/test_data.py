"""The Parquet dataset format: round trip, self-description, and clear errors on bad files."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from synthetic import at_rest

from morl.data import DataFileError, Dataset, load_dataset, read_meta, write_dataset
from morl.envs import ENV_SPECS, get_spec


def _synthetic(rng, lengths=(3, 5, 2), env_id="MO-HalfCheetah-v2") -> Dataset:
    spec = get_spec(env_id)
    n = sum(lengths)
    return Dataset.from_arrays(
        at_rest(rng.normal(size=(n, spec.obs_dim)), lengths, env_id), rng.uniform(-1, 1, size=(n, spec.act_dim)),
        rng.normal(size=(n, spec.n_obj)), rng.dirichlet(np.ones(spec.n_obj), size=len(lengths)), lengths,
        terminals=np.arange(n) == lengths[0] - 1, timeouts=np.arange(n) == n - 1,  # ends of the first and last
        meta={"env_id": env_id, "quality": "expert", "entropy": "high", "seed": 1},
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
    np.testing.assert_allclose(ds.traj_returns[1], ds.rewards[3:8].sum(0), rtol=1e-6, atol=1e-6)
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


# --------------------------------------------------------------------------- bad input, one case each
def _table(ds: Dataset) -> pa.Table:
    from morl.data import to_table

    return to_table(ds)


def _write_table(path, table: pa.Table):
    pq.write_table(table, path)
    return path


def _replace(table: pa.Table, name: str, column) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, column)


def _good_file(tmp_path, name="good.parquet", seed=5):
    path = tmp_path / name
    write_dataset(path, _synthetic(np.random.default_rng(seed)))
    return path


@pytest.mark.parametrize("keep", ["all but 1 byte", "all but the footer", "half", "12 bytes"])
def test_truncated_file_is_named(tmp_path, keep):
    good = _good_file(tmp_path)
    raw = good.read_bytes()
    footer = pq.ParquetFile(good).metadata.serialized_size + 8
    n = {"all but 1 byte": len(raw) - 1, "all but the footer": len(raw) - footer, "half": len(raw) // 2,
         "12 bytes": 12}[keep]  # fmt: skip
    cut = tmp_path / "cut_short.parquet"
    cut.write_bytes(raw[:n])
    with pytest.raises(DataFileError, match=r"cut_short.parquet: not a readable Parquet file: the file is truncated"):
        load_dataset(cut)


def test_corrupt_data_pages_are_detected(tmp_path):
    """A damaged byte in the data region is caught (page CRCs) or is harmless (an unused page-header
    field such as statistics); it never comes back as silently different data."""
    good = _good_file(tmp_path)
    expected = load_dataset(good)
    raw = good.read_bytes()
    data_end = len(raw) - pq.ParquetFile(good).metadata.serialized_size - 8
    bad = tmp_path / "flipped.parquet"
    caught = 0
    for offset in range(4, data_end, 7):
        damaged = bytearray(raw)
        damaged[offset] ^= 0x10
        bad.write_bytes(bytes(damaged))
        try:
            back = load_dataset(bad)
        except DataFileError as exc:
            assert "flipped.parquet: could not read Parquet data; the file is corrupt" in str(exc)
            caught += 1
            continue
        for name in ("observations", "actions", "next_observations", "rewards", "preferences", "terminals",
                     "timeouts", "steps"):  # fmt: skip
            np.testing.assert_array_equal(getattr(back, name), getattr(expected, name), err_msg=f"{offset=}")
    assert caught > 0.5 * len(range(4, data_end, 7))


def test_not_parquet_at_all(tmp_path):
    junk = tmp_path / "notes.parquet"
    junk.write_bytes(b"x" * 100)
    with pytest.raises(DataFileError, match="notes.parquet: not a readable Parquet file: not a Parquet file"):
        load_dataset(junk)


def _wrong_width(t):
    obs = np.asarray(t.column("observation").combine_chunks().flatten()).reshape(-1, 17)
    return _replace(t, "observation", pa.FixedSizeListArray.from_arrays(pa.array(obs[:, :3].reshape(-1)), 3))


def _int_vectors(t):
    obs = np.asarray(t.column("observation").combine_chunks().flatten()).reshape(-1, 17)
    return _replace(t, "observation", pa.FixedSizeListArray.from_arrays(pa.array(obs.astype(np.int32).reshape(-1)), 17))


def _variable_lists(t):
    return _replace(t, "reward", pa.array(t.column("reward").to_pylist(), pa.list_(pa.float32())))


def _terminal_as_int(t):
    return _replace(t, "terminal", pa.array(np.asarray(t.column("terminal")).astype(np.int8)))


def _traj_id_as_float(t):
    return _replace(t, "traj_id", pa.array(np.asarray(t.column("traj_id")).astype(np.float64)))


def _null_timeout(t):
    vals = t.column("timeout").to_pylist()
    vals[3] = None
    return _replace(t, "timeout", pa.array(vals, pa.bool_()))


def _null_action(t):
    vals = t.column("action").to_pylist()
    vals[2] = None
    return _replace(t, "action", pa.array(vals, t.column("action").type))


WRONG_SCHEMA = {
    "width": (_wrong_width, r"column 'observation' has type fixed_size_list<\w+: float>\[3\]; expected "
              r"fixed_size_list<float>\[17\]"),
    "int-values": (_int_vectors, r"column 'observation' has type fixed_size_list<\w+: int32>\[17\]; expected "
                   r"fixed_size_list<float>\[17\]"),
    "variable-lists": (_variable_lists, r"column 'reward' has type list<\w+: float>; expected fixed_size_list"),
    "terminal-int": (_terminal_as_int, r"column 'terminal' has type int8; expected bool"),
    "traj_id-float": (_traj_id_as_float, r"column 'traj_id' has type double; expected an integer type"),
    "null-scalar": (_null_timeout, r"column 'timeout' has 1 null value"),
    "null-vector": (_null_action, r"column 'action' has 1 null value"),
}  # fmt: skip


@pytest.mark.parametrize("case", WRONG_SCHEMA, ids=list(WRONG_SCHEMA))
def test_wrong_schema_is_named(tmp_path, case):
    change, problem = WRONG_SCHEMA[case]
    table = _table(_synthetic(np.random.default_rng(6)))
    path = _write_table(tmp_path / "odd_schema.parquet", change(table))
    with pytest.raises(DataFileError, match=r"odd_schema.parquet: " + problem):
        load_dataset(path)


@pytest.mark.parametrize(
    "meta, problem",
    [
        (None, "Parquet file has no 'morl' metadata"),
        (b"{not json", "'morl' metadata is not valid JSON"),
        (b"[1, 2]", "'morl' metadata is a JSON list, not an object"),
        ("drop obs_dim", "metadata lacks 'obs_dim'"),
        ("bad n_obj", "metadata obs_dim/act_dim/n_obj are not integers"),
    ],
)
def test_missing_or_bad_metadata(tmp_path, meta, problem):
    import json

    table = _table(_synthetic(np.random.default_rng(7)))
    if isinstance(meta, str):
        m = json.loads(table.schema.metadata[b"morl"])
        if meta == "drop obs_dim":
            del m["obs_dim"]
        else:
            m["n_obj"] = "two"
        meta = json.dumps(m).encode()
    table = table.replace_schema_metadata(None if meta is None else {b"morl": meta})
    path = _write_table(tmp_path / "meta_case.parquet", table)
    with pytest.raises(DataFileError, match=r"meta_case.parquet: " + problem.replace("[", r"\[")):
        load_dataset(path)


@pytest.mark.parametrize("column", ["observation", "action", "next_observation", "reward", "preference"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_nan_and_inf_are_named(tmp_path, column, bad):
    table = _table(_synthetic(np.random.default_rng(8)))
    col = table.column(column).combine_chunks()
    values = np.asarray(col.flatten()).copy()
    values[5] = bad
    table = _replace(table, column, pa.FixedSizeListArray.from_arrays(pa.array(values), col.type.list_size))
    path = _write_table(tmp_path / "nonfinite.parquet", table)
    with pytest.raises(DataFileError, match=rf"nonfinite.parquet: column '{column}' contains NaN or infinite"):
        load_dataset(path)


@pytest.mark.parametrize(
    "prefs, problem",
    [
        ([[0.5, 0.5], [0.5, 0.6], [1.0, 0.0]], r"preferences do not sum to 1: trajectory 1 sums to 1.1"),
        (
            [[0.5, 0.5], [0.3, 0.3], [0.2, 0.2]],
            r"preferences do not sum to 1: trajectory 1 sums to 0.6 .*2 trajectories affected",
        ),
        ([[1.2, -0.2], [0.5, 0.5], [0.5, 0.5]], r"preference of trajectory 0 has a negative entry"),
    ],
)
def test_preferences_must_lie_on_the_simplex(tmp_path, prefs, problem):
    ds = _synthetic(np.random.default_rng(9))
    bad = Dataset.from_arrays(ds.observations, ds.actions, ds.rewards, np.array(prefs), ds.traj_lengths,
                              meta=ds.meta)  # fmt: skip
    path = tmp_path / "offsimplex.parquet"
    write_dataset(path, bad)
    with pytest.raises(DataFileError, match=r"offsimplex.parquet: " + problem):
        load_dataset(path)


def test_preference_tolerance_accepts_float32_rounding(tmp_path):
    ds = _synthetic(np.random.default_rng(10))
    prefs = np.array([[1 / 3, 2 / 3 + 5e-5], [0.1, 0.9], [0.7, 0.3]])
    ok = Dataset.from_arrays(ds.observations, ds.actions, ds.rewards, prefs, ds.traj_lengths, meta=ds.meta)
    write_dataset(tmp_path / "ok.parquet", ok)
    load_dataset(tmp_path / "ok.parquet")


def test_env_mismatch_is_named(tmp_path):
    path = _good_file(tmp_path, "cheetah.parquet")
    assert load_dataset(path, expect_env="MO-HalfCheetah-v2").meta["env_id"] == "MO-HalfCheetah-v2"
    with pytest.raises(DataFileError, match=r"cheetah.parquet: dataset is for env 'MO-HalfCheetah-v2', but "
                       r"'MO-Hopper-v2' was expected \(env mismatch\)"):  # fmt: skip
        load_dataset(path, expect_env="MO-Hopper-v2")


def test_train_and_evaluate_pass_the_expected_env_through(tmp_path):
    from morl.evaluate import evaluate_checkpoint
    from morl.families import train

    path = _good_file(tmp_path, "cheetah.parquet")
    with pytest.raises(DataFileError, match="cheetah.parquet: .*env mismatch"):
        train(path, "bc", 0, {"steps": 1}, tmp_path / "m.pt", device="cpu", progress=False, expect_env="MO-Ant-v2")
    with pytest.raises(DataFileError, match="cheetah.parquet: .*env mismatch"):
        evaluate_checkpoint(tmp_path / "m.pt", path, tmp_path / "e.parquet", 3, progress=False, expect_env="MO-Ant-v2")
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "e.parquet").exists()


def test_write_is_atomic(tmp_path, monkeypatch):
    import morl.data

    ds = _synthetic(np.random.default_rng(11))
    fresh = tmp_path / "fresh.parquet"
    existing = _good_file(tmp_path, "existing.parquet")
    before = existing.read_bytes()

    def half_then_fail(table, where, **kwargs):
        with open(where, "wb") as f:
            f.write(b"PAR1 and then the process died")
        raise KeyboardInterrupt  # also a kill-like interruption, not only an Exception

    monkeypatch.setattr(morl.data.pq, "write_table", half_then_fail)
    for dest in (fresh, existing):
        with pytest.raises(KeyboardInterrupt):
            write_dataset(dest, ds)
    assert not fresh.exists()
    assert existing.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.parquet"]


def test_dataset_made_under_older_physics_is_refused(tmp_path):
    """A Hopper dataset written before the original model parameters (no physics_version, or
    version 1) would mix two robots; HalfCheetah's physics did not change, so its files stay."""
    rng = np.random.default_rng(7)
    base = _synthetic(rng, env_id="MO-Hopper-v2")
    for version, name in ((None, "old.parquet"), (1, "v1.parquet")):
        meta = {**base.meta, "env_id": "MO-Hopper-v2"}
        if version is not None:
            meta["physics_version"] = version
        ds = Dataset.from_arrays(base.observations, base.actions, base.rewards, base.traj_preferences,
                                 base.traj_lengths, meta=meta)  # fmt: skip
        write_dataset(tmp_path / name, ds)
        with pytest.raises(DataFileError, match=rf"{name}: dataset made under physics version 1 of MO-Hopper-v2 "
                           r"\(gymnasium's model files.*\), but this morl simulates version 2 .*rebuild it"):  # fmt: skip
            load_dataset(tmp_path / name)
    current = Dataset.from_arrays(base.observations, base.actions, base.rewards, base.traj_preferences,
                                  base.traj_lengths, meta={**base.meta, "env_id": "MO-Hopper-v2", "physics_version": 2})  # fmt: skip
    write_dataset(tmp_path / "new.parquet", current)
    assert load_dataset(tmp_path / "new.parquet").meta["physics_version"] == 2
    load_dataset(_good_file(tmp_path, "cheetah.parquet"))  # HalfCheetah without a version: still version 1


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)],
                         ids=["umask022", "umask077", "umask002"])  # fmt: skip
def test_outputs_get_the_mode_of_a_normal_write(tmp_path, umask, mode):
    """The temporary file of an atomic write must not pass its private mode on to the output."""
    import os
    import stat
    from pathlib import Path

    from morl.curves import write_curve
    from morl.data import atomic_write

    old = os.umask(umask)
    try:
        write_dataset(tmp_path / "d.parquet", _synthetic(np.random.default_rng(12)))
        write_curve(tmp_path / "curve.csv", [[1, 0.5, 1e-3]])
        atomic_write(tmp_path / "t.txt", lambda tmp: Path(tmp).write_text("x"))
        with open(tmp_path / "normal.txt", "w") as f:
            f.write("x")
    finally:
        os.umask(old)
    modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in tmp_path.iterdir()}
    assert modes == dict.fromkeys(["d.parquet", "curve.csv", "t.txt", "normal.txt"], oct(mode))


def test_a_dataset_whose_sizes_are_not_its_envs_is_refused_at_load(tiny_dataset, write_copy, tmp_path):
    """Another objective count, or a file relabelled to an env of other sizes, is named when read
    (before training), not left to fail later in a numpy traceback."""
    from morl.data import load_dataset

    three = write_copy(tiny_dataset, tmp_path / "three.parquet", extra_objective=True)
    with pytest.raises(
        ValueError, match=r"three.parquet: dataset has 3 objectives per step, but MO-HalfCheetah-v2 has 2"
    ):
        load_dataset(three)
    hopper = write_copy(tiny_dataset, tmp_path / "hopper.parquet", env_id="MO-Hopper-v2")
    with pytest.raises(
        ValueError, match=r"hopper.parquet: dataset has 17 observations per step, but MO-Hopper-v2 has 11"
    ):
        load_dataset(hopper)


def test_partial_readers_agree_with_the_full_load(tmp_path):
    """Evaluation reads only the per-trajectory columns and a reference dataset only its states;
    both must give exactly what the full load gives."""
    from morl.data import load_observations, load_trajectories

    ds = _synthetic(np.random.default_rng(12), lengths=(4, 1, 7, 3))
    path = tmp_path / "d.parquet"
    write_dataset(path, ds)
    full = load_dataset(path)
    trajectories = load_trajectories(path, expect_env="MO-HalfCheetah-v2")
    for name in ("traj_lengths", "traj_preferences", "traj_returns"):
        np.testing.assert_array_equal(getattr(trajectories, name), getattr(full, name), err_msg=name)
    assert (trajectories.obs_dim, trajectories.act_dim, trajectories.n_obj) == (17, 6, 2)
    assert trajectories.meta == full.meta
    np.testing.assert_array_equal(load_observations(path), full.observations)
    with pytest.raises(DataFileError, match=r"d.parquet: dataset is for env .*env mismatch"):
        load_trajectories(path, expect_env="MO-Hopper-v2")


@pytest.mark.parametrize("column", ["reward", "preference"])
def test_the_per_trajectory_reader_refuses_what_the_full_load_refuses(tmp_path, column):
    from morl.data import load_trajectories

    table = _table(_synthetic(np.random.default_rng(13)))
    col = table.column(column).combine_chunks()
    values = np.asarray(col.flatten()).copy()
    values[3] = np.nan
    table = _replace(table, column, pa.FixedSizeListArray.from_arrays(pa.array(values), col.type.list_size))
    path = _write_table(tmp_path / "nonfinite.parquet", table)
    with pytest.raises(DataFileError, match=rf"nonfinite.parquet: column '{column}' contains NaN or infinite"):
        load_trajectories(path)
    table = _table(_synthetic(np.random.default_rng(13)))
    prefs = table.column("preference").combine_chunks()
    values = np.asarray(prefs.flatten()).copy().reshape(-1, 2)
    values[1] = values[1][::-1]  # step 1 of trajectory 0 has another preference than step 0
    table = _replace(table, "preference", pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), 2))
    path = _write_table(tmp_path / "changing.parquet", table)
    with pytest.raises(DataFileError, match=r"changing.parquet: the preference must be constant"):
        load_trajectories(path)


def test_a_dataset_relabelled_to_an_env_of_the_same_sizes_is_refused(tiny_dataset, write_copy, tmp_path):
    """MO-HalfCheetah-v2 and MO-Walker2d-v2 have the same sizes; relabelled with the other's physics
    version as well, only the data can tell them apart. Every trajectory of a task starts at one of
    its reset states, and the two tasks' reset states are far apart, so a relabelled file is named
    before any training."""
    from morl.families import train

    load_dataset(tiny_dataset, expect_env="MO-HalfCheetah-v2")  # the real file passes
    walker = write_copy(tiny_dataset, tmp_path / "walker.parquet", env_id="MO-Walker2d-v2")
    problem = (r"walker.parquet: \d+ of \d+ trajectories do not start at a reset state of MO-Walker2d-v2 "
               r"\(trajectory 0: observation\[0\] = .*, every reset of MO-Walker2d-v2 gives 1.25 \+- 0.05\)")  # fmt: skip
    with pytest.raises(DataFileError, match=problem):
        load_dataset(walker)
    with pytest.raises(DataFileError, match=problem):
        train(walker, "bc", 0, {"steps": 1}, tmp_path / "m.pt", device="cpu", progress=False, reference_dataset=walker)
    assert not (tmp_path / "m.pt").exists()


@pytest.mark.parametrize("env_id", sorted(ENV_SPECS))
def test_every_reset_lies_within_the_start_tolerance_of_the_rest_observation(env_id):
    """The start check must never refuse a file this morl collected: resets of every task, across
    seeds, stay within the tolerance of the rest observation (with a wide margin)."""
    from morl.envs import START_TOLERANCE, make_env, rest_observation

    env = make_env(env_id)
    rest = rest_observation(get_spec(env_id))
    worst = max(float(np.abs(env.reset(seed=seed)[0] - rest).max()) for seed in range(50))
    assert worst < START_TOLERANCE / 5


@pytest.mark.parametrize(
    "column, row, problem",
    [("terminal", 4, "trajectory 1, step 1: the terminal flag is set before the trajectory's last step (4)"),
     ("timeout", 0, "trajectory 0, step 0: the timeout flag is set before the trajectory's last step (2)")],
)  # fmt: skip
def test_a_trajectory_that_ends_before_its_last_row_is_refused(tmp_path, column, row, problem):
    """A terminal or timeout flag inside a trajectory is refused naming the file, the trajectory and
    the step; at a trajectory's last row it is the format's own."""
    ds = _synthetic(np.random.default_rng(7))
    path = tmp_path / "d.parquet"
    write_dataset(path, ds)
    table = pq.read_table(path)
    values = table.column(column).to_pylist()
    values[row] = True
    at = table.schema.get_field_index(column)
    changed = table.set_column(at, column, pa.array(values, table.schema.field(column).type))
    pq.write_table(changed.replace_schema_metadata(table.schema.metadata), path)
    with pytest.raises(DataFileError) as caught:
        load_dataset(path)
    assert str(caught.value) == f"{path}: {problem}"
    # at the last row of trajectory 0 (row 2) every one of them is allowed
    values = table.column(column).to_pylist()
    values[2] = True
    ok = table.set_column(at, column, pa.array(values, table.schema.field(column).type))
    pq.write_table(ok.replace_schema_metadata(table.schema.metadata), path)
    assert load_dataset(path).n_steps == ds.n_steps


@pytest.mark.parametrize(
    "column, row, entry, problem",
    [("next_observation", 4, 5, "trajectory 1, step 1: next_observation differs from the observation of step 2 (entry 5"),
     ("observation", 9, 0, "trajectory 2, step 0: next_observation differs from the observation of step 1 (entry 0")],
)  # fmt: skip
def test_a_trajectory_whose_steps_do_not_follow_one_another_is_refused(tmp_path, column, row, entry, problem):
    """Within a trajectory, next_observation[t] is observation[t + 1] exactly; a file where they
    differ (rows of different episodes joined, reordered, damaged) is refused naming the file, the
    trajectory and the step. Across a trajectory's end they need not agree."""
    ds = _synthetic(np.random.default_rng(7))  # trajectories of 3, 5 and 2 steps
    path = tmp_path / "d.parquet"
    write_dataset(path, ds)
    table = pq.read_table(path)
    col = table.column(column).combine_chunks()
    values = np.asarray(col.flatten()).copy().reshape(len(table), -1)
    values[row, entry] = np.nextafter(values[row, entry], np.float32(np.inf))  # one float32 ulp away
    changed = _replace(table, column, pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), values.shape[1]))
    pq.write_table(changed.replace_schema_metadata(table.schema.metadata), path)
    with pytest.raises(DataFileError) as caught:
        load_dataset(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {problem}") and "1 step(s) affected" in message and "\n" not in message
    # the next_observation of a trajectory's last step (row 2) begins no row: anything goes there
    values = np.asarray(table.column("next_observation").combine_chunks().flatten()).copy().reshape(len(table), -1)
    values[2] += 1.0
    ok = _replace(table, "next_observation", pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), 17))
    pq.write_table(ok.replace_schema_metadata(table.schema.metadata), path)
    assert load_dataset(path).n_steps == ds.n_steps


def test_the_next_observation_check_is_fast():
    """Vectorised: a million rows of 17 observations are compared in well under a second."""
    import time

    from morl.data import check_next_observations

    n = 1_000_000
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(n, 17)).astype(np.float32)
    ds = Dataset.from_arrays(obs, np.zeros((n, 1)), np.zeros((n, 2)), [[0.5, 0.5]] * 2000, [500] * 2000)
    start = time.perf_counter()
    check_next_observations(ds, "big.parquet")
    assert time.perf_counter() - start < 1.0  # about 0.02 s on one quiet core
    ds.next_observations[n - 2, 3] += 1.0  # inside the last trajectory
    with pytest.raises(DataFileError, match=r"big.parquet: trajectory 1999, step 498: next_observation differs"):
        check_next_observations(ds, "big.parquet")
