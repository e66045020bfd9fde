"""Every stage as a `morl` subcommand, chained on a tiny config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
import yaml

import morl.cpu as cpu
from morl import families
from morl.cli import main
from morl.evaluate import read_evaluation


def test_envs_lists_the_registry(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "MO-HalfCheetah-v2" in out and "MO-Hopper-v3" in out and " 17 " in out and " 11 " in out


def test_bad_config_exit_code_and_message(tmp_path, capsys, config):
    config["collect"]["n_trajectories"] = 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    assert main(["validate-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "collect.n_trajectories" in err


def test_stages_chain_through_the_cli(tmp_path, config, tiny_policy, monkeypatch):
    config["train"]["peda"].update(steps=8, checkpoint_every=4)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config))
    data = tmp_path / "d.parquet"
    ckpt = tmp_path / "m.pt"
    ev = tmp_path / "e.parquet"
    front = tmp_path / "f.parquet"
    c = ["--config", str(cfg)]
    assert main(["collect", *c, "--policy", str(tiny_policy), "--quality", "expert", "--entropy", "medium",
                 "--output", str(data), "--n-trajectories", "3"]) == 0  # fmt: skip
    seen = []  # `morl train` computes on one torch thread unless told otherwise, and restores the caller's count
    before = torch.get_num_threads()
    with monkeypatch.context() as m:
        m.setattr(families, "train", lambda *a, **k: seen.append(torch.get_num_threads()) or {})
        # two idle cores of two (how many are idle on this machine now is not what this tests)
        m.setattr(cpu, "available_cores", lambda: 2)
        m.setattr(cpu, "idle_cores", lambda interval=0.25: 2.0)
        assert main(["train", *c, "--dataset", str(data), "--model", "rvs-p", "--output", str(ckpt)]) == 0
        assert (
            main(["train", *c, "--dataset", str(data), "--model", "rvs-p", "--output", str(ckpt), "--threads", "2"])
            == 0
        )
    assert seen == [1, 2] and torch.get_num_threads() == before
    assert main(["train", *c, "--dataset", str(data), "--model", "rvs-p", "--output", str(ckpt)]) == 0
    assert main(["evaluate", *c, "--checkpoint", str(ckpt), "--dataset", str(data), "--output", str(ev)]) == 0
    assert main(["behavior-front", *c, "--policy", str(tiny_policy), "--output", str(front)]) == 0
    assert main(["aggregate", "--evaluations", str(ev), "--fronts", str(front), "--out-dir", str(tmp_path / "t")]) == 0
    meta, arr = read_evaluation(ev)
    assert meta["model"] == "rvs-p" and len(arr["return"]) == 4
    assert "MORvS(P)" in (tmp_path / "t/results.md").read_text()


def test_console_script_is_installed():
    exe = Path(sys.executable).parent / "morl"
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "behavior" in res.stdout and "aggregate" in res.stdout


def test_reference_dataset_option_and_definition_mismatch(tmp_path, config, tiny_policy, capsys):
    """Under statistics_from: expert-high, train and evaluate an amateur dataset with the expert-high
    one as --reference-dataset; evaluating under a config that says otherwise is refused."""
    config["train"]["peda"].update(steps=4, checkpoint_every=4, statistics_from="expert-high")
    config.update(envs=["MO-HalfCheetah-v2"], qualities=["expert", "amateur"], entropies=["high"])
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config))
    c = ["--config", str(cfg)]
    data = {q: tmp_path / f"{q}-high.parquet" for q in ("expert", "amateur")}
    for quality, path in data.items():
        assert main(["collect", *c, "--policy", str(tiny_policy), "--quality", quality, "--entropy", "high",
                     "--output", str(path), "--n-trajectories", "3"]) == 0  # fmt: skip
    ckpt, ev = tmp_path / "m.pt", tmp_path / "e.parquet"
    train = ["train", *c, "--dataset", str(data["amateur"]), "--model", "bc", "--output", str(ckpt)]
    assert main(train) == 2
    assert "needs the env's expert-high dataset" in capsys.readouterr().err
    ref = ["--reference-dataset", str(data["expert"])]
    assert main(train + ref) == 0
    evaluate = ["evaluate", "--checkpoint", str(ckpt), "--dataset", str(data["amateur"]), "--output", str(ev), *ref]
    assert main([*evaluate, *c]) == 0
    assert read_evaluation(ev)[0]["statistics_from"] == "expert-high"
    config["train"]["peda"]["returns_to_go"] = "weighted"
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(config))
    assert main([*evaluate, "--config", str(tmp_path / "w.yaml")]) == 2
    err = capsys.readouterr().err
    assert "m.pt: trained with returns_to_go: peda" in err and "the settings say returns_to_go: weighted" in err


def test_evaluating_a_model_on_another_env_s_dataset_is_refused(tmp_path, config, tiny_dataset, write_copy, capsys):
    """A MO-HalfCheetah-v2 model and a MO-Walker2d-v2 dataset have the same observation, action and
    objective sizes; nothing would fail but the label of the result."""
    config["train"]["peda"].update(steps=4, checkpoint_every=4)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config))
    ckpt, ev = tmp_path / "m.pt", tmp_path / "e.parquet"
    assert main(["train", "--config", str(cfg), "--dataset", str(tiny_dataset), "--model", "dt-p",
                 "--output", str(ckpt)]) == 0  # fmt: skip
    walker = write_copy(tiny_dataset, tmp_path / "walker.parquet", env_id="MO-Walker2d-v2")
    capsys.readouterr()
    assert main(["evaluate", "--config", str(cfg), "--checkpoint", str(ckpt), "--dataset", str(walker),
                 "--output", str(ev)]) == 2  # fmt: skip
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"morl evaluate: error: {ckpt} and {walker} do not belong together: the checkpoint is for env "
        "'MO-HalfCheetah-v2', the dataset for 'MO-Walker2d-v2'"
    )
    assert not ev.exists()


def test_arguments_are_checked_before_any_work(tmp_path, config, tiny_policy, tiny_dataset, capsys):
    """0 trajectories is an error, not "use the config's count"; an output path that is a folder, or
    lies below a file, and an out-of-range seed are refused by the argument parser."""
    import pytest

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config))
    (tmp_path / "folder").mkdir()
    cases = [
        (["collect", "--policy", str(tiny_policy), "--quality", "expert", "--entropy", "high", "--output",
          str(tmp_path / "d.parquet"), "--n-trajectories", "0"], "argument --n-trajectories: must be at least 1, got 0"),
        (["train", "--dataset", str(tiny_dataset), "--model", "bc", "--output", str(tmp_path / "folder")],
         f"argument --output: {tmp_path / 'folder'} is a directory; give the path of the file to write"),
        (["train", "--dataset", str(tiny_dataset), "--model", "bc", "--output", str(cfg / "m.pt")],
         f"argument --output: {cfg / 'm.pt'}: {cfg} is a file, so nothing can be written below it"),
        (["train", "--dataset", str(tiny_dataset), "--model", "bc", "--output", str(tmp_path / "m.pt"),
          "--seed", str(10**30)], "argument --seed: a seed lies in 0 .. 2147483647, got 10000000000"),
        (["aggregate", "--out-dir", str(cfg)], f"argument --out-dir: {cfg} is a file"),
        (["collect", "--policy", str(tiny_policy), "--quality", "expert", "--entropy", "high", "--output",
          str(tmp_path / "d.parquet"), "--workers", "0"], "argument --workers: must be at least 1, got 0"),
        (["collect", "--policy", str(tiny_policy), "--quality", "expert", "--entropy", "high", "--output",
          str(tmp_path / "d.parquet"), "--n-trajectories", "2000000000"],
         "argument --n-trajectories: at most 100,000,000 trajectories, got 2,000,000,000"),
        (["behavior-front", "--policy", str(tiny_policy), "--output", str(tmp_path / "f.parquet"), "--workers", "-2"],
         "argument --workers: must be at least 1, got -2"),
        (["behavior", "--env", "MO-HalfCheetah-v2", "--output", str(tmp_path / "p.pt"), "--threads", "0"],
         "argument --threads: must be at least 1, got 0"),
    ]  # fmt: skip
    for argv, message in cases:
        if argv[0] != "aggregate":
            argv = [argv[0], "--config", str(cfg), *argv[1:]]
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"morl {argv[0]}: error: {message}" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "folder"]  # nothing was written


def test_a_full_disk_names_the_file_that_was_not_written(tmp_path, config, tiny_dataset, monkeypatch, capsys):
    """The disk fills while `morl train` writes its checkpoint. Before, torch's archive writer
    reported "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos ..."."""
    import builtins
    import errno

    real_open = builtins.open

    class FullDisk:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    def open_on_a_full_disk(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return FullDisk(f) if "w" in mode and str(file).endswith(".tmp") else f

    config["train"]["peda"].update(steps=4, checkpoint_every=2)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config))
    out = tmp_path / "run" / "model.pt"
    monkeypatch.setattr(builtins, "open", open_on_a_full_disk)
    code = main(
        ["train", "--config", str(cfg), "--dataset", str(tiny_dataset), "--model", "dt-p", "--output", str(out)]
    )
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 2
    assert (f"morl train: error: {out}.partial: could not be written: No space left on device; nothing was "
            "changed there\n") in err  # fmt: skip
    assert "Traceback" not in err
    assert not any(p.name.endswith(".tmp") for p in out.parent.iterdir())  # no temporary file left behind


def test_expected_errors_are_one_line_and_bugs_keep_their_traceback(tmp_path, capsys, monkeypatch):
    """An expected error prints one line; --debug adds its traceback; a bug is not turned into a
    one-line message."""
    import pytest

    missing = tmp_path / "missing.parquet"
    assert main(["dataset-info", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"morl dataset-info: error: {missing}: file does not exist"]

    monkeypatch.delenv("MORL_DEBUG", raising=False)
    assert main(["--debug", "dataset-info", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.strip().splitlines()[-1] == f"morl dataset-info: error: {missing}: file does not exist"
    assert "MORL_DEBUG" not in os.environ  # --debug does not outlive the call

    import morl.dataset_info

    def bug(*args, **kwargs):
        raise ValueError("operands could not be broadcast together")  # as a numpy bug would

    monkeypatch.setattr(morl.dataset_info, "dataset_info", bug)
    with pytest.raises(ValueError, match="broadcast"):
        main(["dataset-info", str(missing)])


def test_no_command_overwrites_its_own_input(tmp_path, config, tiny_policy, tiny_dataset, capsys):
    """An output naming one of the command's inputs (or another of its outputs) is refused before
    any work, naming both, and the input keeps its bytes."""
    import shutil

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config))
    policy, data = tmp_path / "policy.pt", tmp_path / "data.parquet"
    shutil.copy(tiny_policy, policy)
    shutil.copy(tiny_dataset, data)
    pickle = tmp_path / "x.pkl"
    pickle.write_bytes(b"not really a pickle")
    link = tmp_path / "link.parquet"
    link.symlink_to(data)  # another name for the same file
    c = ["--config", str(cfg)]
    cases = [
        (["behavior", *c, "--env", "MO-HalfCheetah-v2", "--output", str(cfg)], "--output", "--config"),
        (["behavior-front", *c, "--policy", str(policy), "--output", str(policy)], "--output", "--policy"),
        (["thin-population", "--policy", str(policy), "--max-policies", "2", "--output", str(policy)], "--output",
         "--policy"),
        (["collect", *c, "--policy", str(policy), "--quality", "expert", "--entropy", "high", "--output", str(policy)],
         "--output", "--policy"),
        (["train", *c, "--dataset", str(data), "--model", "bc", "--output", str(link)], "--output", "--dataset"),
        (["train", *c, "--dataset", str(data), "--model", "bc", "--output", str(tmp_path / "m.pt"), "--curve",
          str(data)], "--curve", "--dataset"),
        (["train", *c, "--dataset", str(data), "--model", "bc", "--output", str(tmp_path / "m.pt"), "--curve",
          str(tmp_path / "m.pt")], "--curve", "--output"),
        (["evaluate", *c, "--checkpoint", str(policy), "--dataset", str(data), "--output", str(policy)], "--output",
         "--checkpoint"),
        (["evaluate", *c, "--checkpoint", str(policy), "--dataset", str(data), "--output", str(data)], "--output",
         "--dataset"),
        (["derive-coverage", *c, "--dataset", str(data), "--coverage", "narrow", "--output", str(data)], "--output",
         "--dataset"),
        (["fit-front-model", *c, "--dataset", str(data), "--output", str(link)], "--output", "--dataset"),
        (["import-d4morl", str(pickle), "--env", "MO-HalfCheetah-v2", "--quality", "expert", "--entropy", "high",
          "--out", str(pickle)], "--out", "the positional argument"),
    ]  # fmt: skip
    before = {p: p.read_bytes() for p in (cfg, policy, data, pickle)}
    for argv, out_flag, in_flag in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and out_flag in err and in_flag in err and "overwrite" in err, err
    assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "m.pt").exists()


def _refused(argv: list[str], capsys) -> str:
    import pytest

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path, config, tiny_dataset,
                                                                            monkeypatch, capsys):  # fmt: skip
    """Each output of train (its --curve too), evaluate, collect and behavior, and the tables folder
    of aggregate, in a folder this process may not write: refused by the argument parser, before the
    dataset is read. Root may write anywhere, so the permission is taken from a stubbed os.access;
    a folder that does not exist yet counts by the nearest one that does."""
    config["train"]["peda"].update(steps=4, checkpoint_every=2)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config))
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    asked = []

    def access(path, mode, *args, **kwargs):
        asked.append(Path(path))
        return False if Path(path) == locked else real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    why = f"the folder {locked} cannot be written to (no permission, or a read-only file system)"
    train = ["train", "--config", str(cfg), "--dataset", str(tiny_dataset), "--model", "bc"]
    cases = [
        ([*train, "--output", str(locked / "m.pt")], f"argument --output: {locked / 'm.pt'}: {why}"),
        ([*train, "--output", str(tmp_path / "m.pt"), "--curve", str(locked / "run" / "curve.csv")],
         f"argument --curve: {locked / 'run' / 'curve.csv'}: {why}"),
        (["evaluate", "--config", str(cfg), "--checkpoint", str(tmp_path / "m.pt"), "--dataset", str(tiny_dataset),
          "--output", str(locked / "e.parquet")], f"argument --output: {locked / 'e.parquet'}: {why}"),
        (["collect", "--config", str(cfg), "--policy", str(tmp_path / "p.pt"), "--quality", "expert", "--entropy",
          "high", "--output", str(locked / "d.parquet")], f"argument --output: {locked / 'd.parquet'}: {why}"),
        (["behavior", "--config", str(cfg), "--env", "MO-HalfCheetah-v2", "--output", str(locked / "p.pt")],
         f"argument --output: {locked / 'p.pt'}: {why}"),
        (["aggregate", "--out-dir", str(locked)], f"argument --out-dir: {locked}: {why}"),
        (["aggregate", "--out-dir", str(locked / "tables")], f"argument --out-dir: {locked / 'tables'}: {why}"),
    ]  # fmt: skip
    for argv, message in cases:
        err = _refused(argv, capsys)
        assert f"morl {argv[0]}: error: {message}" in err, err
    assert locked in asked
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "locked"] and not any(locked.iterdir())
    # a writable folder passes the same check (train then runs; nothing is left behind by the check)
    monkeypatch.setattr(os, "access", real_access)
    assert main([*train, "--output", str(tmp_path / "out" / "m.pt"), "--curve", str(tmp_path / "out" / "c.csv")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["c.csv", "m.pt"]


def test_a_read_only_folder_is_refused_for_a_user_without_root(tmp_path, config, tiny_dataset, capsys):
    """The same check without a stub: a folder made read-only (root ignores that, so this runs only
    for a user without root), and a path below a regular file (which holds for root too)."""
    import pytest

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config))
    train = ["train", "--config", str(cfg), "--dataset", str(tiny_dataset), "--model", "bc"]
    err = _refused([*train, "--output", str(tmp_path / "m.pt"), "--curve", str(cfg / "curve.csv")], capsys)
    assert f"argument --curve: {cfg / 'curve.csv'}: {cfg} is a file, so nothing can be written below it" in err
    if os.geteuid() == 0:
        pytest.skip("root may write in a read-only folder; the stubbed test above covers the check")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        err = _refused([*train, "--output", str(locked / "m.pt")], capsys)
        assert f"the folder {locked} cannot be written to" in err
    finally:
        locked.chmod(0o755)
