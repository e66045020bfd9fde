"""Behavior training: the HV estimate (shown in the bar and the log, invisible to training), resuming
from a killed run, evaluating a run in progress, and the device it trains on."""

from __future__ import annotations

import math
import re

import pytest
import torch
import yaml

import morl.behavior.td3 as behavior_mod
from morl.behavior import BehaviorPolicy, train_behavior
from morl.behavior.td3 import HV_ESTIMATE_DIVISIONS
from morl.cli import main

ENV = "MO-HalfCheetah-v2"
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture
def cfg(smoke_config):
    # updates start at step 100; checkpoints (and HV estimates) at step 100, plus a final estimate
    return dict(smoke_config["behavior"], total_steps=200, start_steps=100, checkpoint_every=100)


def _actor(path):
    return torch.load(path, weights_only=True)["actor"]


def _same_weights(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_hv_estimate_is_logged_shown_and_leaves_training_unchanged(tmp_path, cfg, caplog, capsys):
    with caplog.at_level("INFO", logger="morl"):
        with_hv = train_behavior(ENV, cfg, tmp_path / "hv.pt", progress=True)
    # the log: one line per estimate, each a positive finite HV
    lines = [r.getMessage() for r in caplog.records if "HV estimate" in r.getMessage()]
    assert len(lines) == 2, lines
    for line, step in zip(lines, (100, 200)):
        m = re.search(rf"step {step}, HV estimate (\S+) \(deterministic policy on the 101-point preference grid", line)
        assert m, line
        hv = float(m.group(1))
        assert math.isfinite(hv) and hv > 0
    assert HV_ESTIMATE_DIVISIONS[2] + 1 == 101
    # the summary and the bar's postfix carry the latest estimate
    assert [s for s, _ in with_hv["hv_estimates"]] == [100, 200]
    assert with_hv["hv_estimate"] == with_hv["hv_estimates"][-1][1] > 0 and math.isfinite(with_hv["hv_estimate"])
    assert f"HV~={with_hv['hv_estimate']:.4g}" in capsys.readouterr().err
    assert 0 < with_hv["hv_estimate_s"] < with_hv["wall_s"]

    # the same run without estimates trains exactly the same weights: the estimate uses no training RNG
    without = train_behavior(ENV, cfg, tmp_path / "plain.pt", progress=False, hv_every=0)
    assert without["hv_estimates"] == [] and without["hv_estimate"] is None
    assert without["updates"] == with_hv["updates"] and without["episodes"] == with_hv["episodes"]
    assert _same_weights(_actor(tmp_path / "hv.pt"), _actor(tmp_path / "plain.pt"))


def _killed_at_first_checkpoint(out, cfg, monkeypatch, **kwargs):
    """Train until the first partial checkpoint is written, then die there; return its path."""
    real_save = behavior_mod._save_partial

    def save_then_die(*args, **kw):
        real_save(*args, **kw)
        raise KeyboardInterrupt("killed")

    with monkeypatch.context() as m:
        m.setattr(behavior_mod, "_save_partial", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            train_behavior(ENV, cfg, out, progress=False, **kwargs)
    partial = out.with_name(out.name + ".partial")
    assert partial.exists() and not out.exists()
    return partial


def _killed_then_resumed(out, cfg, monkeypatch, **kwargs):
    _killed_at_first_checkpoint(out, cfg, monkeypatch, **kwargs)
    return train_behavior(ENV, cfg, out, progress=False, **kwargs)


def test_resumed_run_keeps_its_estimates_and_trains_as_without_them(tmp_path, cfg, monkeypatch):
    monkeypatch.setitem(behavior_mod.HV_ESTIMATE_DIVISIONS, 2, 1)  # a 2-point grid keeps this test quick
    resumed = _killed_then_resumed(tmp_path / "hv.pt", cfg, monkeypatch)
    # the estimate made before the kill came back from the partial checkpoint
    assert [s for s, _ in resumed["hv_estimates"]] == [100, 200]
    assert all(math.isfinite(hv) and hv > 0 for _, hv in resumed["hv_estimates"])
    plain = _killed_then_resumed(tmp_path / "plain.pt", cfg, monkeypatch, hv_every=0)
    assert plain["updates"] == resumed["updates"]
    assert _same_weights(_actor(tmp_path / "hv.pt"), _actor(tmp_path / "plain.pt"))


def test_a_resumed_run_writes_the_same_bytes_as_an_uninterrupted_one(tmp_path, cfg, monkeypatch):
    """The envs are put back mid-episode (same seeds, preferences and states), not reset anew."""
    cfg = dict(cfg, total_steps=300, n_envs=3)  # episodes of 500 steps: all in flight at the checkpoint
    train_behavior(ENV, cfg, tmp_path / "whole.pt", progress=False, hv_every=0)
    _killed_then_resumed(tmp_path / "cut.pt", cfg, monkeypatch, hv_every=0)
    assert (tmp_path / "cut.pt").read_bytes() == (tmp_path / "whole.pt").read_bytes()


def test_a_run_in_progress_can_be_evaluated_from_its_partial_checkpoint(tmp_path, cfg, monkeypatch):
    """`morl behavior-front --policy X.pt.partial`: how good is the behavior so far?"""
    partial = _killed_at_first_checkpoint(tmp_path / "b.pt", cfg, monkeypatch, hv_every=0)
    policy = BehaviorPolicy(partial)
    assert policy.env_id == ENV and policy.meta["partial"] is True and policy.meta["steps"] == 100
    saved = torch.load(partial, weights_only=True)["agent"]["actor"]
    assert _same_weights(policy.actor.state_dict(), saved)
    act = policy.act([[0.0] * 17] * 3, [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    assert act.shape == (3, 6) and (abs(act) <= 1).all()
    # a damaged partial checkpoint is named, not half-loaded
    state = torch.load(partial, weights_only=True)
    del state["settings"]
    torch.save(state, tmp_path / "bad.pt.partial")
    with pytest.raises(ValueError, match=r"bad\.pt\.partial: incomplete partial behavior checkpoint"):
        BehaviorPolicy(tmp_path / "bad.pt.partial")


@no_cuda
def test_cuda_asked_for_without_one_is_refused_before_anything_is_written(tmp_path, cfg, smoke_config, capsys):
    out = tmp_path / "policy.pt"
    with pytest.raises(ValueError, match="CUDA is not available"):
        train_behavior(ENV, cfg, out, progress=False, device="cuda")
    assert list(tmp_path.iterdir()) == []
    # the same through the command line: exit code 2 and the reason
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(smoke_config))
    assert main(["behavior", "--config", str(config), "--env", ENV, "--output", str(out), "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err and not out.exists()


def test_auto_trains_on_what_is_present_and_says_so(tmp_path, cfg):
    summary = train_behavior(ENV, cfg, tmp_path / "policy.pt", progress=False, hv_every=0)
    assert summary["device"].startswith("cuda" if torch.cuda.is_available() else "cpu")


@needs_cuda
def test_a_cuda_run_resumes_and_writes_a_checkpoint_that_loads_on_the_cpu(tmp_path, cfg, monkeypatch):
    out = tmp_path / "policy.pt"
    resumed = _killed_then_resumed(out, cfg, monkeypatch, device="cuda")
    straight = train_behavior(ENV, cfg, tmp_path / "straight.pt", progress=False, device="cuda")
    assert resumed["device"].startswith("cuda") and resumed["updates"] == straight["updates"]
    assert all(t.device.type == "cpu" for t in torch.load(out, weights_only=True)["actor"].values())
    policy = BehaviorPolicy(out)
    act = policy.act([[0.0] * 17] * 2, [[1.0, 0.0], [0.0, 1.0]])
    assert act.shape == (2, 6) and (abs(act) <= 1).all()
    assert resumed["hv_estimate"] > 0
