"""Every stage as a `morl` subcommand, chained on a tiny config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

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


def test_stages_chain_through_the_cli(tmp_path, config, tiny_policy):
    config["train"].update(steps=8, checkpoint_every=4)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config))
    data = tmp_path / "d.parquet"
    ckpt = tmp_path / "m.pt"
    ev = tmp_path / "e.parquet"
    front = tmp_path / "f.parquet"
    c = ["--config", str(cfg)]
    assert main(["collect", *c, "--policy", str(tiny_policy), "--quality", "expert", "--entropy", "medium",
                 "--output", str(data), "--n-trajectories", "3"]) == 0  # fmt: skip
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
    config["train"].update(steps=4, checkpoint_every=4, statistics_from="expert-high")
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
    config["train"]["returns_to_go"] = "weighted"
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(config))
    assert main([*evaluate, "--config", str(tmp_path / "w.yaml")]) == 2
    err = capsys.readouterr().err
    assert "m.pt: trained with returns_to_go: peda" in err and "the settings say returns_to_go: weighted" in err


def test_evaluating_a_model_on_another_env_s_dataset_is_refused(tmp_path, config, tiny_dataset, write_copy, capsys):
    """A MO-HalfCheetah-v2 model and a MO-Walker2d-v2 dataset have the same observation, action and
    objective sizes; nothing would fail but the label of the result."""
    config["train"].update(steps=4, checkpoint_every=4)
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
