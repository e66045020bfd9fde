"""The dataset card (morl.dataset_info, `morl dataset-info`): numbers against hand computations,
the preference-entropy ordering on collected data, and clear errors on bad files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from synthetic import at_rest

from morl.cli import main
from morl.data import DataFileError, Dataset, write_dataset
from morl.dataset_info import dataset_info, format_card, read_card, summarize_dataset
from morl.evaluate import write_evaluation
from morl.preferences import knn_preference_entropy, sample_preferences

# Three trajectories of lengths 2, 3, 1 whose returns are (3, 1), (1, 4), (2, 2).
LENGTHS = [2, 3, 1]
REWARDS = np.array([[1, 0.5], [2, 0.5], [0.5, 1], [0.25, 2], [0.25, 1], [2, 2]])
PREFS = np.array([[0.1, 0.9], [0.5, 0.5], [0.75, 0.25]])


def _hand_dataset(behavior_path: str | None = None) -> Dataset:
    n = len(REWARDS)
    terminal = np.zeros(n, bool)
    timeout = np.zeros(n, bool)
    terminal[1] = True  # trajectory 0 ends by termination
    timeout[4] = True  # trajectory 1 by the time limit; trajectory 2 by neither
    meta = {"env_id": "MO-HalfCheetah-v2", "quality": "expert", "entropy": "high"}
    if behavior_path:
        meta.update(behavior_path=behavior_path, behavior_sha256="abc")
    rng = np.random.default_rng(0)
    return Dataset.from_arrays(at_rest(rng.normal(size=(n, 17)), LENGTHS, meta["env_id"]), rng.uniform(-1, 1, (n, 6)), REWARDS, PREFS, LENGTHS,
                               terminals=terminal, timeouts=timeout, meta=meta)  # fmt: skip


def test_card_numbers_match_a_hand_computation():
    info = summarize_dataset(_hand_dataset())
    assert info["trajectories"] == 3 and info["steps"] == 6
    assert info["episode_length"] == {"min": 1, "mean": 2.0, "max": 3}
    assert info["ended_by"] == {"termination": 1, "timeout": 1, "neither": 1}
    r = info["returns"]
    np.testing.assert_allclose(r["mean"], [2.0, 7 / 3])
    var_energy = ((1 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2) / 3
    np.testing.assert_allclose(r["std"], [math.sqrt(2 / 3), math.sqrt(var_energy)])
    np.testing.assert_allclose(r["min"], [1, 1])
    np.testing.assert_allclose(r["max"], [3, 4])
    # HV of (3, 1), (1, 4), (2, 2) from the origin: 3*1 + 2*(2-1) + 1*(4-2) = 7, all three non-dominated
    assert info["data_hv"] == pytest.approx(7.0) and info["data_front_points"] == 3
    assert info["objectives"] == ["run", "energy"] and info["n_obj"] == 2
    assert info["preference_entropy"]["uniform_simplex"] == 0.0
    assert info["behavior_front"] is None
    text = format_card(info)
    assert "by termination 1, by timeout 1, neither 1" in text and "data HV          7" in text


def test_termination_wins_when_both_flags_end_a_trajectory():
    ds = _hand_dataset()
    term, tout = ds.terminals.copy(), ds.timeouts.copy()
    tout[1] = True
    both = Dataset.from_arrays(ds.observations, ds.actions, ds.rewards, PREFS, LENGTHS, terminals=term, timeouts=tout)
    assert summarize_dataset(both)["ended_by"] == {"termination": 1, "timeout": 1, "neither": 1}


def test_knn_entropy_hand_value_and_known_distributions():
    # 1-D chart, k = 1: nearest-neighbour distances of 0.1, 0.2, 0.4, 0.8 are 0.1, 0.1, 0.2, 0.4
    prefs = np.array([[w, 1 - w] for w in (0.1, 0.2, 0.4, 0.8)])
    psi4_minus_psi1 = 1 + 1 / 2 + 1 / 3
    hand = psi4_minus_psi1 + math.log(2) + np.mean(np.log([0.1, 0.1, 0.2, 0.4]))
    assert knn_preference_entropy(prefs, k=1) == pytest.approx(hand)
    # the uniform distribution on the simplex: 0 for 2 objectives, -log 2 for 3
    rng = np.random.default_rng(0)
    assert knn_preference_entropy(rng.dirichlet(np.ones(2), 20000)) == pytest.approx(0.0, abs=0.03)
    assert knn_preference_entropy(rng.dirichlet(np.ones(3), 20000)) == pytest.approx(-math.log(2), abs=0.03)
    # D4MORL's Medium distribution for 2 objectives is only 0.08 nats below High; with enough samples
    # the estimate still orders the three
    h = {e: knn_preference_entropy(sample_preferences(e, 4000, 2, rng)) for e in ("high", "medium", "low")}
    assert h["high"] > h["medium"] + 0.04 and h["medium"] > h["low"] + 1.5
    with pytest.raises(ValueError, match="at least 2 preferences"):
        knn_preference_entropy(prefs[:1])


@pytest.fixture(scope="module")
def hopper_policy(tmp_path_factory, smoke_config):
    """An untrained 3-objective behavior policy (no gradient steps: only the preference draws matter)."""
    from morl.behavior import train_behavior

    out = tmp_path_factory.mktemp("hopper") / "policy.pt"
    train_behavior(
        "MO-Hopper-v3", dict(smoke_config["behavior"], total_steps=8, start_steps=8), out, progress=False, hv_every=0
    )
    return out


def test_entropy_levels_are_ordered_on_collected_data(tmp_path, hopper_policy):
    """High > Medium > Low on datasets made by morl.collect (MO-Hopper-v3, 48 trajectories each).

    Three objectives: there the Medium distribution is 0.22 nats below High (for two objectives
    only 0.08, too little to resolve reliably with a few dozen trajectories; checked above on
    larger samples)."""
    from morl.collect import collect_dataset

    h = {}
    for entropy in ("high", "medium", "low"):
        out = tmp_path / f"{entropy}.parquet"
        collect_dataset(hopper_policy, "expert", entropy, 48, out, batch_size=48, seed=11, progress=False)
        info = dataset_info(out)
        assert info["entropy_label"] == entropy and info["trajectories"] == 48 and info["n_obj"] == 3
        h[entropy] = info["preference_entropy"]["knn"]
    assert h["high"] > h["medium"] > h["low"], h
    assert h["medium"] - h["low"] > 2.0  # Low is far narrower


def test_behavior_front_from_argument_and_from_metadata(tmp_path):
    behavior_dir = tmp_path / "behavior"
    data = tmp_path / "d.parquet"
    write_dataset(data, _hand_dataset(behavior_path=str(behavior_dir / "policy.pt")))
    assert dataset_info(data)["behavior_front"] is None  # no front file beside the checkpoint yet

    # a behavior front file: B's points (4, 1) and (1, 3) -> HV 4*1 + 1*(3-1) = 6; baselines ignored
    prefs = np.array([[1.0, 0.0], [0.0, 1.0]] * 2)
    returns = np.array([[4, 1], [1, 3], [9, 9], [9, 9.0]])
    result = {"preferences": prefs, "targets": np.zeros((4, 2)), "returns": returns, "lengths": np.ones(4),
              "seeds": np.zeros((4, 1), np.int64), "summary": {}}  # fmt: skip
    front = behavior_dir / "front.parquet"
    behavior_dir.mkdir()
    meta = {"kind": "behavior", "env_id": "MO-HalfCheetah-v2", "checkpoint_sha256": "abc"}
    write_evaluation(front, result, meta, policy_names=np.array(["behavior", "behavior", "zero", "zero"]))
    for info in (dataset_info(data, front=front), dataset_info(data)):  # explicit, then found via metadata
        bf = info["behavior_front"]
        assert bf["hv"] == pytest.approx(6.0) and bf["points"] == 2 and bf["same_behavior_checkpoint"] is True
        card = format_card(info)
        assert "behavior front   HV 6  (2-point grid" in card and "data HV / behavior front HV  1.167" in card

    # a damaged front beside the checkpoint is reported in the card; one passed explicitly is an error
    front.write_bytes(b"garbage")
    bf = dataset_info(data)["behavior_front"]
    assert "front.parquet: not a readable Parquet file" in bf["error"]
    assert "behavior front   not known: " in format_card(dataset_info(data))
    with pytest.raises(DataFileError, match="front.parquet: not a readable Parquet file"):
        dataset_info(data, front=front)

    other = tmp_path / "other_env_front.parquet"
    write_evaluation(other, result, {**meta, "env_id": "MO-Hopper-v2"}, policy_names=np.array(["behavior"] * 4))
    with pytest.raises(ValueError, match="d.parquet and .*other_env_front.parquet do not belong together: the "
                       "dataset is for env 'MO-HalfCheetah-v2', the front for 'MO-Hopper-v2'"):  # fmt: skip
        dataset_info(data, front=other)
    with pytest.raises(DataFileError, match=r"d.parquet: not a behavior front file \(its metadata kind is None\)"):
        dataset_info(data, front=data)


@pytest.mark.parametrize("front_meta, difference", [
    ({"checkpoint_sha256": "def"}, "the dataset was collected by behavior policy sha256 abc, the front evaluates def"),
    ({"env_id": "MO-Walker2d-v2"}, "the dataset is for env 'MO-HalfCheetah-v2', the front for 'MO-Walker2d-v2'"),
], ids=["behavior", "env"])  # fmt: skip
def test_front_of_another_behavior_policy_or_env_is_refused(tmp_path, front_meta, difference):
    """B of another policy or env would be shown as this dataset's; both files are named."""
    data = tmp_path / "d.parquet"
    write_dataset(data, _hand_dataset(behavior_path=str(tmp_path / "policy.pt")))
    result = {"preferences": np.eye(2), "targets": np.zeros((2, 2)), "returns": np.array([[4, 1], [1, 3.0]]),
              "lengths": np.ones(2), "seeds": np.zeros((2, 1), np.int64), "summary": {}}  # fmt: skip
    front = tmp_path / "front.parquet"
    meta = {"kind": "behavior", "env_id": "MO-HalfCheetah-v2", "checkpoint_sha256": "abc", **front_meta}
    write_evaluation(front, result, meta, policy_names=np.array(["behavior", "behavior"]))
    with pytest.raises(ValueError) as info:
        dataset_info(data, front=front)
    assert str(info.value) == f"{data} and {front} do not belong together: {difference}"
    assert main(["dataset-info", str(data), "--front", str(front)]) == 2


def test_bad_files_are_named(tmp_path, capsys):
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    with pytest.raises(DataFileError, match="junk.parquet: not a readable Parquet file"):
        dataset_info(junk)
    assert main(["dataset-info", str(junk)]) == 2
    err = capsys.readouterr().err
    assert "morl dataset-info: error: " in err and "junk.parquet: not a readable Parquet file" in err
    assert main(["dataset-info", str(tmp_path / "missing.parquet")]) == 2
    assert "missing.parquet: file does not exist" in capsys.readouterr().err


def test_cli_prints_the_card_and_json(tmp_path, capsys):
    data = tmp_path / "d.parquet"
    write_dataset(data, _hand_dataset())
    assert main(["dataset-info", str(data)]) == 0
    out = capsys.readouterr().out
    assert "trajectories     3   steps 6" in out and "episode length   min 1  mean 2.0  max 3" in out
    assert main(["dataset-info", str(data), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["data_hv"] == pytest.approx(7.0) and info["path"] == str(data)


def test_the_tables_read_the_data_hv_back_from_the_card(tmp_path, capsys):
    """B of a table row is the data HV on its dataset's card: `morl dataset-info FILE > card` must give
    a card `read_card` reads back, for a large HV too, and a broken card is refused naming it."""
    data = tmp_path / "d.parquet"
    write_dataset(data, _hand_dataset())
    assert main(["dataset-info", str(data)]) == 0
    card = tmp_path / "d.card.md"
    card.write_text(capsys.readouterr().out)
    got = read_card(card)
    assert (got["env"], got["quality"], got["entropy"]) == ("MO-HalfCheetah-v2", "expert", "high")
    assert got["data_hv"] == pytest.approx(7.0)
    # six significant digits: a Hopper-v3-sized HV comes back within 5e-6 of itself
    big = {**summarize_dataset(_hand_dataset()), "data_hv": 3.7312345678e10}
    card.write_text(format_card(big))
    assert read_card(card)["data_hv"] == pytest.approx(3.7312345678e10, rel=5e-6)

    card.write_text(format_card(big).replace("  data HV ", "  data XX "))
    with pytest.raises(DataFileError, match=r"d\.card\.md: the dataset card has no 'data HV' line"):
        read_card(card)
    card.write_text("something else\n")
    with pytest.raises(DataFileError, match=r"d\.card\.md: not a dataset card"):
        read_card(card)
    with pytest.raises(DataFileError, match=r"missing\.card\.md: cannot read the dataset card"):
        read_card(tmp_path / "missing.card.md")
