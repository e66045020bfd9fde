"""The front model of MODULI's return deviation (morl.front_model): what it is fitted on, how, that a
fit repeats exactly, and its file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import morl.front_model as fm
from morl.cli import main as morl_main
from morl.data import DataFileError, file_sha256
from morl.errors import InputError
from morl.front_model import fit_front_model, fit_front_model_file, front_training_mask, load_front_model

# A front on a line: every return sums to 1200, so no trajectory dominates another and all are kept.
W1 = np.linspace(0.0, 1.0, 40)
LINE_PREFS = np.stack([W1, 1.0 - W1], axis=1)
LINE_RETURNS = 1000.0 * LINE_PREFS + 100.0


def test_training_points_are_the_non_negative_trajectories_no_other_dominates():
    prefs = [[0.9, 0.1], [0.1, 0.9], [0.5, 0.5], [1.0, 0.0], [0.8, 0.2], [0.3, 0.7]]
    # (300, 100) and (100, 300) are kept; (100, 100) is dominated by both; (400, -10) has a negative
    # objective although nothing dominates it; the copy (300, 100) is kept as often as it occurs;
    # (50, 250) is dominated by (100, 300)
    returns = [[300.0, 100.0], [100.0, 300.0], [100.0, 100.0], [400.0, -10.0], [300.0, 100.0], [50.0, 250.0]]
    np.testing.assert_array_equal(front_training_mask(returns), [True, True, False, False, True, False])
    model = fit_front_model(prefs, returns, steps=2)
    np.testing.assert_array_equal(model.points_preference, [[0.9, 0.1], [0.1, 0.9], [0.8, 0.2]])
    np.testing.assert_array_equal(model.points_return, [[300.0, 100.0], [100.0, 300.0], [300.0, 100.0]])
    assert (model.info["n_points"], model.info["n_trajectories"]) == (3, 6)


def test_network_optimiser_and_batches_are_moduli_s(monkeypatch):
    batch_sizes = []
    build = fm.build_network

    def recording(n_obj):
        network = build(n_obj)
        network.register_forward_pre_hook(lambda module, args: batch_sizes.append(args[0].shape[0]))
        return network

    monkeypatch.setattr(fm, "build_network", recording)
    w1 = np.linspace(0.0, 1.0, 600)  # 600 points on a line, all kept
    prefs = np.stack([w1, 1.0 - w1], axis=1)
    model = fit_front_model(prefs, 1000.0 * prefs, steps=3)
    # batches of 512 from a reshuffled pass, the last batch of a pass holding the rest; then one
    # forward over every point for the fitted error
    assert batch_sizes == [512, 88, 512, 600]
    layers = [(type(m).__name__, getattr(m, "in_features", None), getattr(m, "out_features", None))
              for m in model.network]  # fmt: skip
    assert layers == [("Linear", 2, 128), ("Mish", None, None), ("Linear", 128, 512), ("Mish", None, None),
                      ("Linear", 512, 512), ("Mish", None, None), ("Linear", 512, 2)]  # fmt: skip
    assert all(p.dtype == torch.float32 for p in model.network.parameters())
    info = model.info
    assert (info["steps"], info["seed"], info["batch_size"], info["lr"]) == (3, 0, 512, 1e-3)
    assert info["weight_decay"] == 0.01 and info["threads"] == 1  # AdamW's default weight decay
    three = fit_front_model(np.hstack([prefs[:, :1], prefs[:, 1:] / 2, prefs[:, 1:] / 2]),
                            np.hstack([prefs, prefs[:, :1]]), steps=1)  # fmt: skip
    assert three.network[0].in_features == three.network[-1].out_features == 3


def test_a_fit_repeats_exactly_and_leaves_the_global_random_state_alone():
    torch.manual_seed(123)
    np.random.seed(5)
    before_torch, before_np = torch.random.get_rng_state(), np.random.get_state()[1].copy()
    a = fit_front_model(LINE_PREFS, LINE_RETURNS, steps=30, seed=0)
    b = fit_front_model(LINE_PREFS, LINE_RETURNS, steps=30, seed=0)
    c = fit_front_model(LINE_PREFS, LINE_RETURNS, steps=30, seed=1)
    grid = np.stack([np.linspace(0, 1, 7), 1 - np.linspace(0, 1, 7)], axis=1)
    np.testing.assert_array_equal(a.predict(grid), b.predict(grid))
    for pa, pb in zip(a.network.parameters(), b.network.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert not np.array_equal(a.predict(grid), c.predict(grid))
    assert torch.equal(torch.random.get_rng_state(), before_torch)
    np.testing.assert_array_equal(np.random.get_state()[1], before_np)


def test_the_fit_learns_the_front_in_raw_returns():
    model = fit_front_model(LINE_PREFS, LINE_RETURNS, steps=300)
    # targets of 100 to 1100, not normalised: after 300 steps the fit is within a few units
    assert model.info["fitted_rmse"] < 15.0
    between = np.array([[0.3125, 0.6875], [0.8, 0.2]])  # preferences between the training points
    np.testing.assert_allclose(model.predict(between), 1000.0 * between + 100.0, atol=25.0)
    assert model.predict(np.empty((0, 2))).shape == (0, 2)
    with pytest.raises(ValueError, match=r"\(P, 2\)"):
        model.predict([[0.2, 0.3, 0.5]])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="nothing to fit"):
        fit_front_model([[0.5, 0.5], [1.0, 0.0]], [[-1.0, 4.0], [3.0, -2.0]], steps=1)
    with pytest.raises(ValueError, match="steps must be an integer of at least 1"):
        fit_front_model(LINE_PREFS, LINE_RETURNS, steps=0)
    with pytest.raises(ValueError, match="one shape"):
        fit_front_model(LINE_PREFS, LINE_RETURNS[:5], steps=1)
    with pytest.raises(ValueError, match="finite"):
        fit_front_model([[0.5, 0.5]], [[np.nan, 1.0]], steps=1)


def test_a_front_model_file_reads_back_and_a_bad_one_is_named(tmp_path):
    model = fit_front_model(LINE_PREFS, LINE_RETURNS, steps=20)
    path = tmp_path / "front_model.pt"
    fm.save_front_model(path, model, {"source_sha256": "ab" * 32, "env_id": "MO-HalfCheetah-v2"})
    again = load_front_model(path)
    np.testing.assert_array_equal(again.predict(LINE_PREFS), model.predict(LINE_PREFS))
    np.testing.assert_array_equal(again.points_return, LINE_RETURNS)
    assert again.info["source_sha256"] == "ab" * 32 and again.info["steps"] == 20
    # the same model gives the same bytes
    fm.save_front_model(tmp_path / "again.pt", model, {"source_sha256": "ab" * 32, "env_id": "MO-HalfCheetah-v2"})
    assert (tmp_path / "again.pt").read_bytes() == path.read_bytes()

    other = tmp_path / "other.pt"
    torch.save({"kind": "morl-behavior"}, other)
    with pytest.raises(DataFileError, match=f"{other}: not a morl front model"):
        load_front_model(other)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a torch file at all")
    with pytest.raises(InputError, match=str(garbage)):
        load_front_model(garbage)
    obj = torch.load(path, weights_only=True)
    obj["state_dict"]["6.weight"] = torch.zeros(3, 512)
    torch.save(obj, other)
    with pytest.raises(DataFileError, match=f"{other}: front model weights do not fit the network for 2 objectives"):
        load_front_model(other)


def test_fitted_on_a_complete_dataset_file_and_never_on_a_variant(tiny_dataset, tmp_path, capsys):
    from morl.coverage import derive_file

    out = tmp_path / "amateur-high.front_model.pt"
    info = fit_front_model_file(tiny_dataset, out, steps=5, progress=False)
    model = load_front_model(out)
    assert info["source_sha256"] == model.info["source_sha256"] == file_sha256(tiny_dataset)
    assert model.info["env_id"] == "MO-HalfCheetah-v2" and model.info["steps"] == 5
    variant = tmp_path / "amateur-high-narrow.parquet"
    derive_file(tiny_dataset, "narrow", None, variant)
    with pytest.raises(
        InputError, match=f"{variant}: a 'narrow' coverage variant; fit the front model on the complete"
    ):
        fit_front_model_file(variant, tmp_path / "v.pt", steps=5, progress=False)

    # the command: steps from --steps, else the config's coverage.front_model_steps
    config = Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"
    assert morl_main(["fit-front-model", "--config", str(config), "--dataset", str(tiny_dataset), "--output",
                      str(tmp_path / "cli.pt")]) == 0  # fmt: skip
    assert load_front_model(tmp_path / "cli.pt").info["steps"] == 200  # configs/smoke.yaml
    assert morl_main(["fit-front-model", "--config", str(config), "--dataset", str(variant), "--output",
                      str(tmp_path / "v.pt"), "--steps", "3"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"morl fit-front-model: error: {variant}: a 'narrow' coverage variant")


def test_a_dataset_with_nothing_to_fit_gets_a_file_that_says_so(tiny_dataset, tmp_path):
    from morl.data import Dataset, load_dataset, write_dataset

    ds = load_dataset(tiny_dataset)
    derived = ("n_obj", "obs_dim", "act_dim", "n_trajectories", "n_steps", "format_version")
    meta = {k: v for k, v in ds.meta.items() if k not in derived}
    # each step loses more on the first objective than any reward gives: every return has a negative objective
    rewards = ds.rewards - np.array([10.0 + np.abs(ds.rewards).max(), 0.0], dtype=np.float32)
    negative = tmp_path / "negative.parquet"
    write_dataset(negative, Dataset.from_arrays(ds.observations, ds.actions, rewards, ds.traj_preferences,
                                                ds.traj_lengths, next_observations=ds.next_observations,
                                                terminals=ds.terminals, timeouts=ds.timeouts, meta=meta))  # fmt: skip
    info = fit_front_model_file(negative, tmp_path / "m.pt", steps=50, progress=False)
    assert info["n_points"] == 0 and "nothing to fit and its RD is undefined" in info["unfitted"]
    model = load_front_model(tmp_path / "m.pt")
    assert not model.fitted and model.info["source_sha256"] == file_sha256(negative)
    with pytest.raises(ValueError, match="never fitted"):
        model.predict([[0.5, 0.5]])
