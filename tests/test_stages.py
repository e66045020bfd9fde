"""Behavior, collection, evaluation and aggregation as Python functions, on tiny real artifacts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import morl.behavior.td3 as behavior_mod
from morl.aggregate import aggregate, collect_metrics
from morl.behavior import BehaviorPolicy, train_behavior
from morl.collect import amateur_actions, collect_dataset
from morl.conditioning import fit_return_regression, initial_targets
from morl.data import load_dataset, read_meta
from morl.evaluate import (
    evaluate_agent,
    evaluate_behavior,
    read_evaluation,
    write_evaluation,
)
from morl.metrics import hypervolume, sparsity


def test_behavior_checkpoint_describes_itself(tiny_policy):
    st = torch.load(tiny_policy, weights_only=True)
    assert st["env_id"] == "MO-HalfCheetah-v2" and st["n_obj"] == 2 and st["steps"] == 400
    pol = BehaviorPolicy(tiny_policy)
    a = pol.act(np.zeros((3, 17), np.float32), np.array([[1, 0], [0.5, 0.5], [0, 1]], np.float32))
    assert a.shape == (3, 6) and np.all(np.abs(a) <= 1)


def test_behavior_resumes_after_a_kill(tmp_path, smoke_config, monkeypatch):
    cfg = dict(smoke_config["behavior"], total_steps=400, start_steps=100, checkpoint_every=200)
    out = tmp_path / "policy.pt"
    real_save = behavior_mod._save_partial

    def save_then_die(*args, **kwargs):
        real_save(*args, **kwargs)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(behavior_mod, "_save_partial", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train_behavior("MO-HalfCheetah-v2", cfg, out, progress=False)
    partial = tmp_path / "policy.pt.partial"
    assert partial.exists() and not out.exists(), "a killed job leaves only its partial checkpoint"
    assert torch.load(partial, weights_only=True)["step"] == 200
    monkeypatch.setattr(behavior_mod, "_save_partial", real_save)
    summary = train_behavior("MO-HalfCheetah-v2", cfg, out, progress=False)
    assert summary["steps"] == 400 and out.exists() and not partial.exists()
    # only the remaining 200 steps were run after resuming
    assert summary["updates"] == pytest.approx((400 - 100) * cfg["updates_per_step"], abs=2)


def test_foreign_behavior_checkpoint_is_rejected(tmp_path):
    bad = tmp_path / "bad.pt"
    torch.save({"weights": torch.zeros(3)}, bad)
    with pytest.raises(ValueError, match="bad.pt: not a morl behavior checkpoint"):
        BehaviorPolicy(bad)
    (tmp_path / "junk.pt").write_bytes(b"\x00garbage")
    with pytest.raises(ValueError, match="junk.pt: not a readable behavior checkpoint"):
        BehaviorPolicy(tmp_path / "junk.pt")


def test_same_settings_and_seed_give_the_same_behavior_checkpoint_bytes(tmp_path, smoke_config, monkeypatch):
    cfg = dict(smoke_config["behavior"], total_steps=120, start_steps=40, checkpoint_every=80)
    partials = []
    real = behavior_mod._save_partial

    def save_and_keep(path, *args, **kwargs):
        real(path, *args, **kwargs)
        partials.append(path.read_bytes())

    monkeypatch.setattr(behavior_mod, "_save_partial", save_and_keep)
    for name in ("a.pt", "b.pt"):
        train_behavior("MO-HalfCheetah-v2", cfg, tmp_path / name, progress=False, hv_every=0)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    assert len(partials) == 2 and partials[0] == partials[1]


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_behavior_checkpoint_that_fails_the_safe_load_is_named_unsafe(tmp_path):
    evil = tmp_path / "evil.pt"
    torch.save({"kind": "morl-behavior", "hook": _RunsCode()}, evil)
    with pytest.raises(ValueError) as info:
        BehaviorPolicy(evil)
    message = str(info.value)
    assert message.startswith(f"{evil}: not a safe checkpoint")
    assert "posix.system" in message
    assert "weights_only" not in message and "will likely succeed" not in message


class _RunsCode:
    """Unpickling it would run a shell command (the safe loader must refuse it first)."""

    def __reduce__(self):
        import os

        return (os.system, ("true",))


def test_behavior_policy_of_another_env_is_refused_by_collect_and_behavior_front(tiny_policy, tmp_path):
    """The workflow passes each rule's {env}: a policy file of another env in its folder is refused."""
    message = f"{tiny_policy}: checkpoint is for env 'MO-HalfCheetah-v2', not 'MO-Hopper-v3'"
    with pytest.raises(ValueError) as info:
        collect_dataset(tiny_policy, "expert", "high", 2, tmp_path / "d.parquet", progress=False,
                        expect_env="MO-Hopper-v3")  # fmt: skip
    assert str(info.value) == message
    with pytest.raises(ValueError) as info:
        evaluate_behavior(tiny_policy, tmp_path / "f.parquet", divisions=2, progress=False, expect_env="MO-Hopper-v3")
    assert str(info.value) == message
    assert list(tmp_path.iterdir()) == []


def test_amateur_rule():
    rng = np.random.default_rng(0)
    det = np.full((20000, 2), 0.5, np.float32)
    out = amateur_actions(det, "MO-HalfCheetah-v2", -np.ones(2), np.ones(2), rng)
    kept = np.isclose(out[:, 0], 0.5)
    assert abs(kept.mean() - 0.35) < 0.02
    factor = out[~kept, 0] / 0.5
    assert factor.min() >= 0.35 - 1e-6 and factor.max() <= 1.65 + 1e-6
    np.testing.assert_allclose(out[:, 0], out[:, 1])  # one factor per step, not per dimension
    big = amateur_actions(np.full((1000, 2), 0.9, np.float32), "MO-HalfCheetah-v2", -np.ones(2), np.ones(2), rng)
    assert big.max() <= 1.0  # clipped to the bounds


def test_collection_follows_the_recipe_and_is_deterministic(tmp_path, tiny_policy):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    for path in (a, b):
        collect_dataset(tiny_policy, "expert", "low", 5, path, batch_size=3, seed=11, progress=False)
    da, db = load_dataset(a), load_dataset(b)
    for name in ("observations", "actions", "rewards", "preferences", "terminals", "timeouts"):
        np.testing.assert_array_equal(getattr(da, name), getattr(db, name), err_msg=name)
    assert da.n_trajectories == 5
    # low entropy: preferences inside the middle third of the covered range
    assert np.all(da.traj_preferences >= 1 / 3 - 1e-6) and np.all(da.traj_preferences <= 2 / 3 + 1e-6)
    # expert: the stored action is the policy's deterministic action for the stored state and preference
    pol = BehaviorPolicy(tiny_policy)
    np.testing.assert_allclose(pol.act(da.observations, da.preferences), da.actions, atol=1e-6)
    # every trajectory ends with exactly one terminal or timeout flag, at its last step
    ends = da.traj_starts + da.traj_lengths - 1
    assert np.all(da.terminals[ends] | da.timeouts[ends])
    assert (da.terminals | da.timeouts).sum() == da.n_trajectories
    meta = read_meta(a)
    assert meta["quality"] == "expert" and meta["entropy"] == "low" and len(meta["behavior_sha256"]) == 64


def test_amateur_dataset_differs_from_expert(tmp_path, tiny_policy, tiny_dataset):
    ds = load_dataset(tiny_dataset)
    pol = BehaviorPolicy(tiny_policy)
    det = pol.act(ds.observations, ds.preferences)
    same = np.all(np.isclose(det, ds.actions, atol=1e-6), axis=1)
    assert 0.2 < same.mean() < 0.6


def test_return_regression_and_targets():
    rng = np.random.default_rng(0)
    w = rng.dirichlet([1, 1], size=50)
    coef_true = np.array([[100.0, -20.0, 5.0], [-30.0, 40.0, 7.0]])
    R = w @ coef_true[:, :2].T + coef_true[:, 2]
    coef = fit_return_regression(w, R)
    # the intercept and the weights are not separately identifiable on the simplex; predictions are
    np.testing.assert_allclose(w @ coef[:, :2].T + coef[:, 2], R, atol=1e-8)
    g = initial_targets(coef, np.array([[0.25, 0.75]]))
    pred = np.array([0.25, 0.75]) @ coef_true[:, :2].T + coef_true[:, 2]
    np.testing.assert_allclose(g[0], np.array([0.25, 0.75]) * pred)


def test_behavior_front_file(tmp_path, tiny_policy):
    out = tmp_path / "front.parquet"
    summaries = evaluate_behavior(tiny_policy, out, divisions=3, episodes=1, seed=5, progress=False)
    meta, arr = read_evaluation(out)
    assert set(arr["policy"]) == {"behavior", "zero", "random"} and len(arr["policy"]) == 12
    beh = arr["return"][arr["policy"] == "behavior"]
    assert summaries["behavior"]["hv"] == pytest.approx(hypervolume(beh))
    np.testing.assert_allclose(arr["preference"][:4].sum(1), 1.0)
    # zero actions on MO-HalfCheetah-v2: energy is 5 per step, run about 1 per step
    zero = arr["return"][arr["policy"] == "zero"]
    np.testing.assert_allclose(zero[:, 1], 5.0 * arr["length"][arr["policy"] == "zero"], rtol=1e-6)


def test_evaluation_is_deterministic(tiny_policy):
    from morl.rollout import BehaviorAgent

    pol = BehaviorPolicy(tiny_policy)
    r1 = evaluate_agent("MO-HalfCheetah-v2", BehaviorAgent(pol), 2, 1, 9, progress=False)
    r2 = evaluate_agent("MO-HalfCheetah-v2", BehaviorAgent(pol), 2, 1, 9, progress=False)
    np.testing.assert_array_equal(r1["returns"], r2["returns"])
    assert r1["returns"].shape == (3, 2)


def _fake_eval(path, env, quality, entropy, model, seed, returns):
    prefs = np.linspace([0, 1], [1, 0], len(returns))
    res = {"preferences": prefs, "targets": np.zeros_like(prefs), "returns": np.asarray(returns, float),
           "lengths": np.full(len(returns), 500.0), "seeds": np.zeros((len(returns), 1), int), "summary": {}}  # fmt: skip
    meta = {"kind": "model", "env_id": env, "quality": quality, "entropy": entropy, "model": model, "train_seed": seed}
    write_evaluation(path, res, meta)


def test_aggregate_tables_match_hand_computation(tmp_path):
    env = "MO-HalfCheetah-v2"
    files = []
    # every run on the same two preference points (runs on other grids are refused)
    for seed, pts in enumerate([[[1e6, 2e6], [2e6, 1e6]], [[3e6, 1e6], [3e6, 1e6]]]):
        p = tmp_path / f"dtp{seed}.parquet"
        _fake_eval(p, env, "expert", "high", "dt-p", seed, pts)
        files.append(p)
    p = tmp_path / "bc0.parquet"
    _fake_eval(p, env, "expert", "high", "bc", 0, [[1e6, 1e6], [2e6, 2e6]])
    files.append(p)
    out = aggregate(files, [], tmp_path / "tables", datasets=[(env, "expert", "high"), (env, "amateur", "high")])
    metrics, _ = collect_metrics(files, [])
    hv = {(r["model"], r["seed"]): r["hv"] for r in metrics.iter_rows(named=True)}
    assert hv[("dt-p", 0)] == pytest.approx(3e12) and hv[("dt-p", 1)] == pytest.approx(3e12)
    assert hv[("bc", 0)] == pytest.approx(4e12)
    text = out["results"].read_text()
    # HV in units of 1e6 for HalfCheetah: dt-p 3e12/1e6 = 3e6 (mean), std 0
    assert "| MO-HalfCheetah-v2 | expert high-H | ×1e6 | — | 3000000.00 ± 0.00 |" in text
    # the amateur row has no evaluations yet: every cell is "—", with a footnote
    assert "| MO-HalfCheetah-v2 | amateur high-H | ×1e6 | — | — | — |" in text and "not evaluated yet" in text
    sp_dtp0 = sparsity(np.array([[1e6, 2e6], [2e6, 1e6]]))
    assert sp_dtp0 == pytest.approx(2e12)
    assert out["metrics"].read_text().count("\n") == 4  # header + 3 rows
    png = out["plot:MO-HalfCheetah-v2/expert-high"]
    assert png.stat().st_size > 5000 and png.read_bytes()[:4] == b"\x89PNG"


def test_behavior_checkpoint_of_older_physics_is_refused(tiny_policy, tmp_path):
    st = torch.load(tiny_policy, weights_only=True)
    assert st["physics_version"] == 1  # HalfCheetah: the original model is gymnasium's file
    old = tmp_path / "hopper_old.pt"
    torch.save({**st, "env_id": "MO-Hopper-v2", "physics_version": 1}, old)
    with pytest.raises(ValueError, match=r"hopper_old.pt: behavior checkpoint made under physics version 1 of "
                       r"MO-Hopper-v2 .* version 2"):  # fmt: skip
        BehaviorPolicy(old)
    del st["physics_version"]  # written before versions were recorded: version 1, still right for HalfCheetah
    torch.save(st, tmp_path / "cheetah_old.pt")
    assert BehaviorPolicy(tmp_path / "cheetah_old.pt").env_id == "MO-HalfCheetah-v2"


def test_a_collection_does_not_depend_on_the_folder_of_the_checkout(tmp_path, monkeypatch):
    """A dataset names its shipped policy relative to the checkout, so the same collection made
    from two checkouts, or with the policy's path given two ways, has the same bytes and SHA-256
    (slices of one grid run in several checkouts can then be merged)."""
    from morl.data import file_sha256

    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)
    paths = {"absolute": root / "behaviors" / "MO-Swimmer-v2.pt", "relative": Path("behaviors/MO-Swimmer-v2.pt")}
    out = {}
    for how, policy in paths.items():
        out[how] = tmp_path / f"{how}.parquet"
        collect_dataset(policy, "expert", "high", 2, out[how], batch_size=2, seed=3, progress=False)
    assert read_meta(out["absolute"])["behavior_path"] == "behaviors/MO-Swimmer-v2.pt"
    assert file_sha256(out["absolute"]) == file_sha256(out["relative"])
