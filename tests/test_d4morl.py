"""Import of original D4MORL pickles: values, preference forms, timeouts, bad files, hostile pickles."""

from __future__ import annotations

import codecs
import hashlib
import os
import pickle

import numpy as np
import pytest
from synthetic import at_rest

import morl.data
from morl.cli import main
from morl.d4morl import import_d4morl, load_restricted_pickle
from morl.data import DataFileError, load_dataset
from morl.envs import get_spec
from morl.errors import OutputError

TWO_OBJ, THREE_OBJ = "MO-HalfCheetah-v2", "MO-Hopper-v3"


def make_trajectories(env_id, lengths=(4, 7, 3), per_step_pref=True, terminal_at_end=None, seed=0):
    """Trajectories in the original D4MORL layout (float64 arrays, one dict each)."""
    spec = get_spec(env_id)
    rng = np.random.default_rng(seed)
    terminal_at_end = terminal_at_end or [False] * len(lengths)
    trajs = []
    for T, term_end in zip(lengths, terminal_at_end):
        pref = rng.dirichlet(np.ones(spec.n_obj))
        terminals = np.zeros(T, bool)
        terminals[-1] = term_end
        # T + 1 states: step t goes from state t to state t + 1, as D4MORL's collector stored them
        states = at_rest(rng.normal(size=(T + 1, spec.obs_dim)), [T + 1], env_id).astype(np.float64)
        trajs.append({
            "observations": states[:-1].copy(),
            "actions": rng.uniform(spec.act_low, spec.act_high, size=(T, spec.act_dim)),
            "next_observations": states[1:].copy(),
            "raw_rewards": rng.normal(size=(T, spec.n_obj)),
            "terminals": terminals,
            "preference": np.tile(pref, (T, 1)) if per_step_pref else pref,
        })  # fmt: skip
    return trajs


def write_pickle(path, obj, protocol=pickle.DEFAULT_PROTOCOL):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)
    return path


def _vec_pref(traj):
    return np.asarray(traj["preference"]).reshape(-1, np.shape(traj["raw_rewards"])[1])[0]


@pytest.mark.parametrize("env_id", [TWO_OBJ, THREE_OBJ])
@pytest.mark.parametrize("per_step_pref", [True, False], ids=["pref-per-step", "pref-per-trajectory"])
def test_round_trip_keeps_values(tmp_path, env_id, per_step_pref):
    trajs = make_trajectories(env_id, per_step_pref=per_step_pref)
    pkl = write_pickle(tmp_path / "MO_data.pkl", trajs)
    out = tmp_path / "data" / "expert-high.parquet"
    summary = import_d4morl(pkl, env_id, "expert", "high", out, progress=False)
    ds = load_dataset(out, expect_env=env_id)

    np.testing.assert_array_equal(ds.traj_lengths, [4, 7, 3])
    for field, attr in (("observations", "observations"), ("actions", "actions"),
                        ("next_observations", "next_observations"), ("raw_rewards", "rewards")):  # fmt: skip
        expected = np.concatenate([t[field] for t in trajs]).astype(np.float32)
        np.testing.assert_array_equal(getattr(ds, attr), expected, err_msg=field)
    prefs = np.stack([_vec_pref(t) for t in trajs]).astype(np.float32)
    np.testing.assert_array_equal(ds.traj_preferences, prefs)
    np.testing.assert_array_equal(ds.preferences, np.repeat(prefs, [4, 7, 3], axis=0))
    spec = get_spec(env_id)
    assert ds.n_obj == spec.n_obj and ds.obs_dim == spec.obs_dim and ds.act_dim == spec.act_dim
    meta = ds.meta
    assert meta["origin"] == "d4morl" and meta["env_id"] == env_id
    assert meta["quality"] == "expert" and meta["entropy"] == "high"
    assert meta["source_file"] == "MO_data.pkl"
    assert meta["source_sha256"] == hashlib.sha256(pkl.read_bytes()).hexdigest() == summary["source_sha256"]
    assert summary["trajectories"] == 3 and summary["steps"] == 14 and summary["actions_clipped"] == 0
    assert not ds.terminals.any() and not ds.timeouts.any()  # short, unterminated: neither
    assert not list(out.parent.glob(".*tmp"))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_every_pickle_protocol_loads(tmp_path, protocol):
    trajs = make_trajectories(TWO_OBJ, lengths=(2, 3))
    trajs[0]["extra"] = {"ids": {1, 2}, "blob": bytearray(b"ab"), "z": 1j, "s": np.float64(0.5)}
    pkl = write_pickle(tmp_path / f"p{protocol}.pkl", trajs, protocol=protocol)
    back = load_restricted_pickle(pkl)
    np.testing.assert_array_equal(back[1]["observations"], trajs[1]["observations"])
    assert back[0]["extra"]["ids"] == {1, 2} and back[0]["extra"]["s"] == 0.5
    import_d4morl(pkl, TWO_OBJ, "amateur", "low", tmp_path / "o.parquet", progress=False)


def test_numpy1_pickles_naming_numpy_core_load(tmp_path):
    """Files written with numpy 1.x name ``numpy.core.multiarray``; they load under numpy 2 too."""
    trajs = make_trajectories(TWO_OBJ, lengths=(2,))
    raw = pickle.dumps(trajs, protocol=2)  # protocol 2 names globals as text lines
    if b"numpy._core.multiarray" in raw:
        raw = raw.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    assert b"numpy.core.multiarray\n_reconstruct" in raw
    pkl = tmp_path / "old.pkl"
    pkl.write_bytes(raw)
    back = load_restricted_pickle(pkl)
    np.testing.assert_array_equal(back[0]["actions"], trajs[0]["actions"])


def test_timeouts_and_terminals(tmp_path):
    from morl.envs import rest_observation

    lengths = (500, 120, 500, 37, 500)
    trajs = make_trajectories(THREE_OBJ, lengths=lengths, terminal_at_end=[False, False, True, True, True])
    trajs[1]["terminals"] = trajs[1]["terminals"].astype(np.float64)[:, None]  # (T, 1) floats also accepted
    # D4MORL flagged the 500-step cut too (gym's TimeLimit sets `done`): a flag at the cap is a
    # termination only where the final state breaks Hopper's health rule (here: height 0.3 < 0.4)
    rest = rest_observation(get_spec(THREE_OBJ)).astype(np.float64)
    trajs[2]["next_observations"][-1] = rest
    trajs[4]["next_observations"][-1] = rest
    trajs[4]["next_observations"][-1, 0] = 0.3
    pkl = write_pickle(tmp_path / "hopper.pkl", trajs)
    summary = import_d4morl(pkl, THREE_OBJ, "amateur", "narrow", tmp_path / "o.parquet", progress=False)
    ds = load_dataset(tmp_path / "o.parquet")
    ends = ds.traj_starts + ds.traj_lengths - 1
    np.testing.assert_array_equal(np.flatnonzero(ds.timeouts), ends[[0, 2, 4]])  # every 500-step one
    np.testing.assert_array_equal(np.flatnonzero(ds.terminals), ends[[3, 4]])
    assert summary["timeouts"] == 3 and summary["terminated"] == 2
    assert ds.meta["entropy"] == "low" and ds.meta["max_episode_steps"] == 500  # D4MORL alias mapped


def test_a_full_length_halfcheetah_trajectory_flagged_by_the_time_limit_is_a_timeout(tmp_path):
    """Every full-length trajectory of an original HalfCheetah file carries the terminal flag (the
    TimeLimit's done); HalfCheetah upright at the end never terminates, so each is a timeout."""
    from morl.envs import rest_observation

    trajs = make_trajectories(TWO_OBJ, lengths=(500, 500), terminal_at_end=[True, True])
    for traj in trajs:
        traj["next_observations"][-1] = rest_observation(get_spec(TWO_OBJ))
    summary = import_d4morl(write_pickle(tmp_path / "c.pkl", trajs), TWO_OBJ, "expert", "uniform",
                            tmp_path / "c.parquet", progress=False)  # fmt: skip
    ds = load_dataset(tmp_path / "c.parquet")
    assert ds.timeouts.sum() == 2 and not ds.terminals.any()
    assert summary["timeouts"] == 2 and summary["terminated"] == 0


def test_out_of_bound_actions_are_clipped_and_counted(tmp_path):
    trajs = make_trajectories(TWO_OBJ, lengths=(3,))
    trajs[0]["actions"][0, :2] = [5.0, -5.0]
    pkl = write_pickle(tmp_path / "a.pkl", trajs)
    summary = import_d4morl(pkl, TWO_OBJ, "amateur", "high", tmp_path / "o.parquet", progress=False)
    ds = load_dataset(tmp_path / "o.parquet")
    spec = get_spec(TWO_OBJ)
    assert summary["actions_clipped"] == 2 == ds.meta["actions_clipped"]
    assert ds.actions[0, 0] == spec.act_high[0] and ds.actions[0, 1] == spec.act_low[1]


def _set(field, fn):
    def mutate(trajs, spec):
        trajs[1][field] = fn(trajs[1][field], spec)

    return mutate


def _drop(field):
    def mutate(trajs, spec):
        del trajs[1][field]

    return mutate


def _nan(a, spec):
    a = a.copy()
    a[1, 0] = np.nan
    return a


def _varying(a, spec):
    a = a.copy()
    a[-1] = a[-1][::-1]
    return a


def _early_terminal(a, spec):
    a = a.copy()
    a[2] = True
    return a


BAD_TRAJECTORIES = {
    "obs-width": (_set("observations", lambda a, s: a[:, :-1]), "observations", "expected (T >= 1, 17)"),
    "empty": (_set("observations", lambda a, s: a[:0]), "observations", "expected (T >= 1"),
    "next-obs-length": (_set("next_observations", lambda a, s: a[:-1]), "next_observations", "expected (7, 17)"),
    "act-width": (_set("actions", lambda a, s: np.zeros((len(a), 5))), "actions", "act_dim=6"),
    "reward-n_obj": (_set("raw_rewards", lambda a, s: np.zeros((len(a), 3))), "raw_rewards", "n_obj=2"),
    "terminals-length": (_set("terminals", lambda a, s: a[:-2]), "terminals", "expected (7,)"),
    "terminal-early": (_set("terminals", _early_terminal), "terminals", "before the last step"),
    "pref-shape": (_set("preference", lambda a, s: np.ones(3) / 3), "preference", "has shape (3,)"),
    "pref-varies": (_set("preference", _varying), "preference", "changes within the trajectory"),
    "pref-sum": (_set("preference", lambda a, s: a * 0.9), "preference", "not 1"),
    "pref-negative": (_set("preference", lambda a, s: np.tile([1.5, -0.5], (len(a), 1))), "preference", "negative"),
    "nan-reward": (_set("raw_rewards", _nan), "raw_rewards", "NaN or infinite"),
    "inf-next-obs": (_set("next_observations", lambda a, s: a * np.inf), "next_observations", "NaN or infinite"),
    "beyond-float32": (_set("observations", lambda a, s: np.full(a.shape, 1e39)), "observations", "beyond float32's"),
    "strings": (_set("actions", lambda a, s: a.astype(str)), "actions", "expected numbers"),
    "missing": (_drop("next_observations"), "next_observations", "has no field"),
    "too-long": (lambda trajs, s: trajs.__setitem__(1, make_trajectories(TWO_OBJ, lengths=(501,))[0]),
                 "observations", "at most 500"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD_TRAJECTORIES, ids=list(BAD_TRAJECTORIES))
def test_bad_trajectories_name_file_index_and_field(tmp_path, case):
    mutate, field, problem = BAD_TRAJECTORIES[case]
    trajs = make_trajectories(TWO_OBJ)
    mutate(trajs, get_spec(TWO_OBJ))
    pkl = write_pickle(tmp_path / "broken_source.pkl", trajs)
    out = tmp_path / "out.parquet"
    with pytest.raises(DataFileError) as info:
        import_d4morl(pkl, TWO_OBJ, "expert", "high", out, progress=False)
    msg = str(info.value)
    assert "broken_source.pkl" in msg and "trajectory 1" in msg and repr(field) in msg, msg
    assert problem in msg, msg
    assert not out.exists() and not list(tmp_path.glob(".*tmp"))


def test_next_observations_that_do_not_follow_are_refused(tmp_path):
    """D4MORL's collector stored next_observations[t] and observations[t + 1] from the same array, so
    within a trajectory they agree exactly once converted to the float32 the dataset stores; a
    pickle where they differ is refused naming the file, the trajectory and the step, and nothing is
    written."""
    trajs = make_trajectories(TWO_OBJ)
    trajs[1]["next_observations"][3, 2] += 1e-3
    pkl = write_pickle(tmp_path / "joined.pkl", trajs)
    out = tmp_path / "out.parquet"
    with pytest.raises(DataFileError) as info:
        import_d4morl(pkl, TWO_OBJ, "expert", "high", out, progress=False)
    assert str(info.value).startswith(
        f"{pkl}: trajectory 1, step 3: next_observation differs from the observation of step 4 (entry 2"
    )
    assert not out.exists() and not list(tmp_path.glob(".*tmp"))
    # the last step's next state begins no row, and what float32 cannot tell apart is the same state
    trajs = make_trajectories(TWO_OBJ)
    trajs[1]["next_observations"][-1] += 1.0
    trajs[1]["next_observations"][3, 2] *= 1 + 1e-12
    import_d4morl(write_pickle(tmp_path / "ok.pkl", trajs), TWO_OBJ, "expert", "high", out, progress=False)
    assert load_dataset(out).n_trajectories == 3


@pytest.mark.parametrize(
    "obj, problem",
    [({"observations": 1}, "expected a list"), ([], "no trajectories"), ([[1, 2]], "trajectory 0 is a list")],
)
def test_bad_top_level(tmp_path, obj, problem):
    pkl = write_pickle(tmp_path / "top.pkl", obj)
    with pytest.raises(DataFileError, match=problem) as info:
        import_d4morl(pkl, TWO_OBJ, "expert", "high", tmp_path / "o.parquet", progress=False)
    assert "top.pkl" in str(info.value)


def test_wrong_env_for_the_data(tmp_path):
    """3-objective Hopper data declared as 2-objective HalfCheetah: the first shape check fails."""
    pkl = write_pickle(tmp_path / "hopper3.pkl", make_trajectories(THREE_OBJ))
    with pytest.raises(DataFileError, match=r"hopper3.pkl: trajectory 0, field 'observations'.*17"):
        import_d4morl(pkl, TWO_OBJ, "expert", "high", tmp_path / "o.parquet", progress=False)


def test_data_of_an_env_with_the_same_sizes_is_refused_before_writing(tmp_path):
    """HalfCheetah's pickle imported as Walker2d (both 17/6/2): the trajectories' first states are
    HalfCheetah's resets, not Walker2d's; the import names the file and writes nothing."""
    pkl = write_pickle(tmp_path / "cheetah.pkl", make_trajectories(TWO_OBJ))
    with pytest.raises(DataFileError, match=r"cheetah.pkl: 3 of 3 trajectories do not start at a reset state "
                       r"of MO-Walker2d-v2"):  # fmt: skip
        import_d4morl(pkl, "MO-Walker2d-v2", "expert", "high", tmp_path / "o.parquet", progress=False)
    assert not (tmp_path / "o.parquet").exists()


def test_bad_names_and_missing_and_truncated_files(tmp_path):
    pkl = write_pickle(tmp_path / "ok.pkl", make_trajectories(TWO_OBJ))
    with pytest.raises(ValueError, match="unknown environment id"):
        import_d4morl(pkl, "MO-Nope-v0", "expert", "high", tmp_path / "o.parquet")
    with pytest.raises(ValueError, match="unknown quality"):
        import_d4morl(pkl, TWO_OBJ, "medium", "high", tmp_path / "o.parquet")
    with pytest.raises(ValueError, match="unknown entropy"):
        import_d4morl(pkl, TWO_OBJ, "expert", "huge", tmp_path / "o.parquet")
    with pytest.raises(DataFileError, match="absent.pkl: file does not exist"):
        import_d4morl(tmp_path / "absent.pkl", TWO_OBJ, "expert", "high", tmp_path / "o.parquet")
    cut = tmp_path / "cut.pkl"
    cut.write_bytes(pkl.read_bytes()[: pkl.stat().st_size // 2])
    with pytest.raises(DataFileError, match="cut.pkl: not a readable pickle"):
        import_d4morl(cut, TWO_OBJ, "expert", "high", tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()


class _RunsShell:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class _Evals:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return eval, (f"open({str(self.marker)!r}, 'w').close()",)


class _OtherCodec:
    def __reduce__(self):
        return codecs.encode, ("abc", "rot13")


@pytest.mark.parametrize("payload, refused", [(_RunsShell, "system"), (_Evals, "builtins.eval")])
def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path, payload, refused):
    marker = tmp_path / "pwned"
    trajs = make_trajectories(TWO_OBJ)
    trajs[1]["observations"] = payload(marker)  # hidden after legitimate arrays
    pkl = write_pickle(tmp_path / "evil.pkl", trajs)
    existing = tmp_path / "out.parquet"
    existing.write_bytes(b"an earlier result")
    with pytest.raises(DataFileError) as info:
        import_d4morl(pkl, TWO_OBJ, "expert", "high", existing, progress=False)
    msg = str(info.value)
    assert "evil.pkl" in msg and "refused to load the global" in msg and refused in msg, msg
    assert not marker.exists(), "the pickle's code ran"
    assert existing.read_bytes() == b"an earlier result"
    # the plain unpickler would indeed have run it: the test pickle is really hostile
    with open(pkl, "rb") as f:
        pickle.load(f)
    assert marker.exists()


def test_codecs_only_for_latin1_bytes(tmp_path):
    pkl = write_pickle(tmp_path / "codec.pkl", [_OtherCodec()], protocol=2)
    with pytest.raises(DataFileError, match="codec.pkl: not a readable pickle.*latin-1"):
        load_restricted_pickle(pkl)


def test_failed_write_leaves_existing_output_untouched(tmp_path, monkeypatch):
    pkl = write_pickle(tmp_path / "ok.pkl", make_trajectories(TWO_OBJ))
    out = tmp_path / "out.parquet"
    out.write_bytes(b"previous dataset")

    def half_then_fail(table, where, **kwargs):
        with open(where, "wb") as f:
            f.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(morl.data.pq, "write_table", half_then_fail)
    with pytest.raises(OutputError, match=f"{out}: could not be written: disk full; nothing was changed there"):
        import_d4morl(pkl, TWO_OBJ, "expert", "high", out, progress=False)
    assert out.read_bytes() == b"previous dataset"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.pkl", "out.parquet"]


def test_cli_import(tmp_path, capsys):
    pkl = write_pickle(tmp_path / "MO-Hopper-v3_50000_amateur_wide.pkl", make_trajectories(THREE_OBJ))
    out = tmp_path / "results" / THREE_OBJ / "data" / "amateur-medium.parquet"
    args = ["import-d4morl", str(pkl), "--env", THREE_OBJ, "--quality", "amateur", "--entropy", "wide"]
    assert main([*args, "--out", str(out)]) == 0
    assert '"trajectories": 3' in capsys.readouterr().out
    assert load_dataset(out, expect_env=THREE_OBJ).meta["entropy"] == "medium"
    assert main([*args[:3], TWO_OBJ, *args[4:], "--out", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err
    assert "morl import-d4morl: error:" in err and pkl.name in err and "trajectory 0" in err
