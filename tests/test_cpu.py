"""The runtime every command sets up: subnormal floats flushed, so long fits keep their speed.

Dead units (a ReLU that never fires) get zero gradients; Adam's moments for them then decay
geometrically, and after a few hundred steps they are subnormal unless the CPU flushes them. x86
arithmetic on subnormals is many times slower, which made 200,000-step fits slow down threefold.
The tests below hold without timing anything: they look at the optimiser state itself. Each runs
in a fresh interpreter, whose floating-point mode is the default one (no flushing).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

# A PEDA-shaped MLP trained with the library's own optimiser for MORvS/BC; after 200 steps, half of
# its first layer's units die (bias -1e3 on inputs of unit scale), so the moments of their weights
# and of the next layer's weights from them decay from then on. Prints the share of subnormal entries
# in the optimiser state after `steps` steps.
DEAD_UNITS = textwrap.dedent(
    """
    import sys, torch
    from morl.families.peda import make_optimizer
    {setup}
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                              torch.nn.ReLU(), torch.nn.Linear(128, 2))
    opt, sched = make_optimizer(net, {{"lr": 1e-3, "weight_decay": 1e-4, "warmup_steps": 10}},
                                torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    for step in range({steps}):
        if step == 200:
            with torch.no_grad():
                net[0].bias[:64] = -1e3
        x = torch.randn(32, 8, generator=gen)
        loss = ((net(x) - x[:, :2]) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    tiny = torch.finfo(torch.float32).tiny
    n = sub = 0
    for state in opt.state.values():
        for key in ("exp_avg", "exp_avg_sq"):
            v = state[key].abs()
            sub += int(((v > 0) & (v < tiny)).sum())
            n += v.numel()
    print(sub / n)
    """
)


def _subnormal_share(setup: str, steps: int = 1200) -> float:
    code = DEAD_UNITS.format(setup=setup, steps=steps)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def test_dead_units_leave_no_subnormal_optimiser_state_once_the_runtime_is_configured():
    share = _subnormal_share("from morl.cpu import configure; configure()")
    assert share == 0.0, f"{share:.1%} of the optimiser state is subnormal after configure()"


def test_without_flushing_the_same_fit_does_leave_subnormal_state():
    """The control: the model above does produce subnormal moments in IEEE mode, so the test above
    can fail."""
    share = _subnormal_share("")
    assert share > 0.01, f"only {share:.2%} subnormal: the dead-unit model no longer makes any"


FLUSHED = "import torch; print(bool((torch.tensor([1e-39]) * 1.0 == 0).item()))"


def _flushed_after(code: str) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", code + "\n" + FLUSHED], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1] == "True"


def test_a_fresh_interpreter_does_not_flush():
    assert not _flushed_after("pass")


def test_the_morl_command_flushes_before_it_runs():
    assert _flushed_after("from morl.cli import main\nmain(['envs'])")


def test_a_workflow_job_flushes_before_it_runs():
    assert _flushed_after("from morl.errors import run_stage\nrun_stage('probe', lambda: None)")


def test_a_library_fit_flushes_by_itself(tiny_dataset, smoke_config):
    """Training called from Python, not through a command, flushes too."""
    code = textwrap.dedent(
        f"""
        from morl.families import train
        from morl.config import train_settings
        import yaml
        config = yaml.safe_load(open({str(ROOT / "configs" / "smoke.yaml")!r}))
        s = dict(train_settings(config, "MO-HalfCheetah-v2", "rvs-p"), steps=5, checkpoint_every=0)
        train({str(tiny_dataset)!r}, "rvs-p", 0, s, {str(tiny_dataset.parent / "flush.pt")!r}, progress=False)
        """
    )
    assert _flushed_after(code)


# --------------------------------------------------------------------------- threads
@pytest.mark.parametrize(
    "requested, cores, idle, expected, says",
    [
        (1, 2, 0.0, 1, None),  # one thread is always allowed, and no core is measured for it
        (2, 2, 2.0, 2, None),
        (2, 2, 0.9, 1, "only 0.9 of"),  # beside a busy job: threads would wait on one another
        (4, 2, 2.0, 2, "may run on 2 cores"),  # never more than the process's cores
        (4, 8, 2.6, 3, "only 2.6 of"),
        (2, 2, None, 2, None),  # no /proc/stat: the cores the process may use
    ],
)
def test_threads_never_outnumber_the_free_cores(monkeypatch, requested, cores, idle, expected, says):
    import morl.cpu as cpu

    monkeypatch.setattr(cpu, "available_cores", lambda: cores)
    monkeypatch.setattr(cpu, "idle_cores", lambda interval=0.25: idle)
    threads, why = cpu.usable_threads(requested)
    assert threads == expected
    assert (why is None) if says is None else (says in why and f"computing with {expected}" in why)


def test_idle_cores_reads_the_machine():
    from morl.cpu import idle_cores

    idle = idle_cores(0.05)
    assert idle is None or 0.0 <= idle <= (os.cpu_count() or 1) + 1e-9


def test_morl_train_reports_the_threads_it_used(tiny_dataset, tmp_path, capsys, monkeypatch):
    import json

    import morl.cpu as cpu
    from morl.cli import main

    monkeypatch.setattr(cpu, "idle_cores", lambda interval=0.25: 0.4)
    out = tmp_path / "m.pt"
    argv = ["train", "--config", str(ROOT / "configs/smoke.yaml"), "--dataset", str(tiny_dataset), "--model", "rvs-p"]
    assert main([*argv, "--output", str(out), "--threads", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["threads"] == 1
