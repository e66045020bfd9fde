"""Behavior training picks its device: CUDA when present, a clear refusal when asked for one that is not."""

from __future__ import annotations

import pytest
import torch
import yaml

import morl.behavior as behavior_mod
from morl.behavior import BehaviorPolicy, train_behavior
from morl.cli import main

ENV = "MO-HalfCheetah-v2"
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture
def cfg(smoke_config):
    return dict(smoke_config["behavior"], total_steps=200, start_steps=100, checkpoint_every=100)


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
    real_save = behavior_mod._save_partial

    def save_then_die(*args, **kw):
        real_save(*args, **kw)
        raise KeyboardInterrupt("killed")

    with monkeypatch.context() as m:
        m.setattr(behavior_mod, "_save_partial", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            train_behavior(ENV, cfg, out, progress=False, hv_every=0, device="cuda")
    resumed = train_behavior(ENV, cfg, out, progress=False, device="cuda")
    straight = train_behavior(ENV, cfg, tmp_path / "straight.pt", progress=False, device="cuda")
    assert resumed["device"].startswith("cuda") and resumed["updates"] == straight["updates"]
    state = torch.load(out, weights_only=True)
    assert all(t.device.type == "cpu" for t in state["actor"].values())
    policy = BehaviorPolicy(out)
    act = policy.act([[0.0] * 17] * 2, [[1.0, 0.0], [0.0, 1.0]])
    assert act.shape == (2, 6) and (abs(act) <= 1).all()
    assert resumed["hv_estimate"] > 0
