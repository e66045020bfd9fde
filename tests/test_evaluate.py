"""Evaluation over the preference grid: the batched evaluator against the sequential reference.

The batched path (:func:`morl.evaluate.evaluate_agent`: one ``BatchedEnv``, one forward per step
for the whole grid) must give, point by point, the returns and lengths of the reference
(:func:`morl.evaluate.evaluate_sequential`: one ``MOMujocoEnv``, batch size 1, one preference
after another) with the same seeds: for every model type and the behavior policy, on
MO-HalfCheetah-v2 (500-step episodes, MODT's context window rolls) and MO-Hopper-v3 (untrained
policies fall within tens of steps at different times, so finished slots must be masked).

Float rounding and chaos: the physics of both paths is bit-identical (tests/test_envs.py) and a
batched rollout of one point is bit-identical to the reference, but a float32 matrix product
rounds differently for 1 row than for B rows (~6e-8 of an action, and differently again for
other B or thread counts). HalfCheetah's contact dynamics amplify such a difference about
e-fold every few steps, to whole units of return within ~50 steps. So the comparisons run the
networks in float64 (:class:`Float64Network`, inputs and outputs stay float32, every line of the
agents and the evaluators is the production one), where the two roundings almost never differ
after the cast back to float32; one test runs the plain float32 networks on the short Hopper
episodes, where the amplification stays small.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from morl.behavior import BehaviorPolicy, train_behavior
from morl.checkpoints import CheckpointError
from morl.conditioning import fit_return_regression
from morl.data import load_dataset
from morl.envs import get_spec
from morl.evaluate import (
    evaluate_agent,
    evaluate_checkpoint,
    evaluate_sequential,
    read_evaluation,
)
from morl.families import family, load_agent, train
from morl.families.peda_agent import Agent, agent_kind
from morl.families.peda_networks import MODEL_NAMES, build_model
from morl.normalisation import observation_stats
from morl.preferences import default_divisions, simplex_grid
from morl.rollout import BehaviorAgent, episode_seeds, rollout, rollout_sequential


def full(settings: dict) -> dict:
    """PEDA's settings with its defaults filled in, as the training core hands them to the networks."""
    return family("peda").resolve_settings(settings)


CHEETAH, HOPPER = "MO-HalfCheetah-v2", "MO-Hopper-v3"
DIVISIONS = 4  # 5 points for 2 objectives, 15 for 3
TRAIN_HP = dict(
    steps=8, batch_size=16, lr=1e-3, warmup_steps=2, return_scale=1e-3, checkpoint_every=0,
    hidden=32, depth=2, embed_dim=16, n_layer=1, n_head=1, dropout=0.1,
    context_length=5, eval_context_length=3, statistics_from="dataset",
)  # fmt: skip
# Float64 networks: here the two paths agree bit for bit; the tolerance only leaves room for another
# BLAS (any real difference, a wrong seed, a slot stepped after it finished, a shifted context
# window, changes returns by whole units). Float32 networks on Hopper: the batch-1/batch-B
# rounding, amplified over fewer than 100 steps.
RTOL, ATOL = 1e-9, 1e-9
RTOL_F32, ATOL_F32 = 1e-3, 1e-2


class Float64Network(torch.nn.Module):
    """Runs ``net`` in float64: floating-point tensor arguments are cast up, the output back to
    float32, so callers see the same interface as the float32 network."""

    def __init__(self, net: torch.nn.Module):
        super().__init__()
        self.net = net.double()

    def forward(self, *args):
        up = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        return self.net(*up).float()


def in_float64(agent: Agent) -> Agent:
    agent.model = Float64Network(agent.model).eval()
    return agent


def assert_same_points(batched: dict, sequential: dict, rtol: float = RTOL, atol: float = ATOL) -> None:
    for key in ("preferences", "targets", "seeds"):
        np.testing.assert_array_equal(batched[key], sequential[key], err_msg=key)
    np.testing.assert_array_equal(batched["lengths"], sequential["lengths"])
    np.testing.assert_allclose(batched["returns"], sequential["returns"], rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------ the grid
@pytest.mark.parametrize(
    "n_obj, divisions, n_points", [(2, 500, 501), (3, 24, 325), (2, DIVISIONS, 5), (3, DIVISIONS, 15)]
)
def test_grid_sizes_and_row_sums(n_obj, divisions, n_points):
    grid = simplex_grid(n_obj, divisions)
    assert grid.shape == (n_points, n_obj)
    np.testing.assert_allclose(grid.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert grid.min() >= 0.0
    assert len(np.unique(grid, axis=0)) == n_points
    if divisions != DIVISIONS:
        assert default_divisions(n_obj) == divisions


# ------------------------------------------------------------------------------- the policies
def untrained_agent(name: str, env_id: str, seed: int = 0) -> Agent:
    """A freshly initialised network of type ``name`` wrapped as an evaluation agent, with
    non-trivial state normalisation, so every input path of the agent is exercised."""
    spec = get_spec(env_id)
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = build_model(name, spec.obs_dim, spec.act_dim, spec.n_obj, full(TRAIN_HP),
                            act_low=spec.act_low, act_high=spec.act_high,
                            max_episode_steps=spec.max_episode_steps)  # fmt: skip
    return Agent(
        model,
        model_name=name,
        kind=agent_kind(name),
        obs_mean=0.1 * torch.randn(spec.obs_dim, generator=gen),
        obs_std=0.5 + torch.rand(spec.obs_dim, generator=gen),
        return_scale=1e-3,
        max_episode_steps=spec.max_episode_steps,
        context_length=TRAIN_HP["eval_context_length"],
        n_obj=spec.n_obj,
        act_dim=spec.act_dim,
        device=torch.device("cpu"),
    )


def hopper_coef() -> np.ndarray:
    """A made-up return regression for MO-Hopper-v3 (R_i(w) = 300 w_i + 200)."""
    n = get_spec(HOPPER).n_obj
    return np.hstack([300.0 * np.eye(n), np.full((n, 1), 200.0)])


@pytest.fixture(scope="module")
def cheetah_checkpoints(tmp_path_factory, tiny_dataset):
    """Every model type trained for a few steps on the tiny MO-HalfCheetah-v2 dataset."""
    out = tmp_path_factory.mktemp("models")
    paths = {}
    for name in MODEL_NAMES:
        paths[name] = out / f"{name}.pt"
        train(tiny_dataset, name, 0, TRAIN_HP, paths[name], device="cpu", progress=False)
    return paths


@pytest.fixture(scope="module")
def hopper_policy(tmp_path_factory, smoke_config):
    out = tmp_path_factory.mktemp("behavior-hopper") / "policy.pt"
    cfg = dict(smoke_config["behavior"], total_steps=300, start_steps=200, checkpoint_every=10**6)
    train_behavior(HOPPER, cfg, out, progress=False)
    return out


# ------------------------------------------------------------------ batched == sequential
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_batched_equals_sequential_halfcheetah(name, cheetah_checkpoints, tiny_dataset):
    ds = load_dataset(tiny_dataset)
    coef = fit_return_regression(ds.traj_preferences, ds.traj_returns)
    agent = in_float64(load_agent(cheetah_checkpoints[name]))
    batched = evaluate_agent(CHEETAH, agent, DIVISIONS, 1, 3, coef=coef, progress=False)
    sequential = evaluate_sequential(CHEETAH, agent, DIVISIONS, 1, 3, coef=coef, progress=False)
    assert batched["returns"].shape == (5, 2)
    assert np.any(batched["targets"] != 0)
    assert_same_points(batched, sequential)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_batched_equals_sequential_hopper_with_early_termination(name):
    agent = in_float64(untrained_agent(name, HOPPER))
    batched = evaluate_agent(HOPPER, agent, DIVISIONS, 1, 5, coef=hopper_coef(), progress=False)
    sequential = evaluate_sequential(HOPPER, agent, DIVISIONS, 1, 5, coef=hopper_coef(), progress=False)
    assert batched["returns"].shape == (15, 3)
    # real episodes that end early by the health check
    assert 1 < batched["lengths"].min() and batched["lengths"].max() < get_spec(HOPPER).max_episode_steps
    assert_same_points(batched, sequential)


@pytest.mark.parametrize("name", ["rvs-p", "dt-p"])
def test_finished_slots_are_masked_at_different_steps(name):
    """Slots that fall at different steps: the batched rollout matches the reference only if a
    finished slot contributes nothing more (no reward, no step) while the others run on."""
    agent = in_float64(untrained_agent(name, HOPPER))
    prefs = simplex_grid(3, DIVISIONS)
    targets = prefs * 250.0
    seeds = episode_seeds(5, len(prefs), 1)[0]
    ret_b, len_b = rollout(HOPPER, agent, prefs, targets, seeds)
    ret_s, len_s = rollout_sequential(HOPPER, agent, prefs, targets, seeds)
    assert len(np.unique(len_b)) > 3, len_b  # the slots really finish at different times
    np.testing.assert_array_equal(len_b, len_s)
    np.testing.assert_allclose(ret_b, ret_s, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_float32_networks_agree_on_short_episodes(name):
    """The production float32 networks: on Hopper's short episodes the batch-1/batch-B rounding
    is amplified only a little; lengths agree exactly."""
    agent = untrained_agent(name, HOPPER)
    batched = evaluate_agent(HOPPER, agent, DIVISIONS, 1, 5, coef=hopper_coef(), progress=False)
    sequential = evaluate_sequential(HOPPER, agent, DIVISIONS, 1, 5, coef=hopper_coef(), progress=False)
    assert_same_points(batched, sequential, rtol=RTOL_F32, atol=ATOL_F32)


@pytest.mark.parametrize("env_id", [CHEETAH, HOPPER])
def test_batched_equals_sequential_behavior_policy(env_id, tiny_policy, hopper_policy):
    policy = BehaviorPolicy(tiny_policy if env_id == CHEETAH else hopper_policy)
    assert policy.env_id == env_id
    policy.actor = Float64Network(policy.actor).eval()
    agent = BehaviorAgent(policy)
    batched = evaluate_agent(env_id, agent, DIVISIONS, 1, 2, progress=False)
    sequential = evaluate_sequential(env_id, agent, DIVISIONS, 1, 2, progress=False)
    assert_same_points(batched, sequential)


# ------------------------------------------------------------------------ several episodes
def test_two_episodes_average_return_vectors_with_distinct_deterministic_seeds():
    agent = in_float64(untrained_agent("dt-p", HOPPER))
    coef = hopper_coef()
    res = evaluate_agent(HOPPER, agent, 2, 2, 11, coef=coef, progress=False)
    n = len(simplex_grid(3, 2))
    seeds = episode_seeds(11, n, 2)  # (episodes, points)
    assert res["seeds"].shape == (n, 2)
    np.testing.assert_array_equal(res["seeds"], seeds.T)
    np.testing.assert_array_equal(episode_seeds(11, n, 2), seeds)  # deterministic
    assert len(np.unique(seeds)) == seeds.size  # distinct across episodes and points
    assert not np.array_equal(episode_seeds(12, n, 2), seeds)

    targets = res["targets"]
    prefs = res["preferences"]
    (r0, l0), (r1, l1) = (rollout(HOPPER, agent, prefs, targets, seeds[e]) for e in range(2))
    assert np.all(np.abs(r0 - r1).max(axis=1) > 1e-3)  # different seeds, different episodes
    np.testing.assert_allclose(res["returns"], (r0 + r1) / 2, rtol=1e-12)
    np.testing.assert_allclose(res["lengths"], (l0 + l1) / 2, rtol=1e-12)

    again = evaluate_agent(HOPPER, agent, 2, 2, 11, coef=coef, progress=False)
    np.testing.assert_array_equal(again["returns"], res["returns"])
    sequential = evaluate_sequential(HOPPER, agent, 2, 2, 11, coef=coef, progress=False)
    assert_same_points(res, sequential)


# ------------------------------------------------------------------------ statistics_from
@pytest.fixture(scope="module")
def cheetah_expert_high(tmp_path_factory, tiny_policy):
    from morl.collect import collect_dataset

    out = tmp_path_factory.mktemp("data-expert") / "expert-high.parquet"
    collect_dataset(tiny_policy, "expert", "high", 4, out, batch_size=4, seed=5, progress=False)
    return out


def test_expert_high_regression_and_statistics_serve_an_amateur_dataset(tiny_dataset, cheetah_expert_high, tmp_path):
    hp = dict(TRAIN_HP, statistics_from="expert-high")
    train(tiny_dataset, "rvs-p", 0, hp, tmp_path / "m.pt", device="cpu", progress=False,
          reference_dataset=cheetah_expert_high)  # fmt: skip
    ref = load_dataset(cheetah_expert_high)
    agent = load_agent(tmp_path / "m.pt")
    np.testing.assert_array_equal(agent.obs_mean.numpy(), observation_stats(ref.observations)[0])
    evaluate_checkpoint(tmp_path / "m.pt", tiny_dataset, tmp_path / "e.parquet", DIVISIONS, progress=False,
                        reference_dataset=cheetah_expert_high)  # fmt: skip
    meta, arr = read_evaluation(tmp_path / "e.parquet")
    coef = fit_return_regression(ref.traj_preferences, ref.traj_returns)
    own = load_dataset(tiny_dataset)
    assert not np.allclose(coef, fit_return_regression(own.traj_preferences, own.traj_returns))
    np.testing.assert_allclose(meta["target_regression"], coef)
    assert meta["quality"] == "amateur" and meta["statistics_from"] == "expert-high"
    assert meta["reference_dataset"] == str(cheetah_expert_high)
    w = arr["preference"]
    np.testing.assert_allclose(arr["target_return"], w * (w @ coef[:, :-1].T + coef[:, -1]))
    # without the expert-high file, or with another file, the evaluation is refused
    with pytest.raises(ValueError, match="needs the env's expert-high dataset"):
        evaluate_checkpoint(tmp_path / "m.pt", tiny_dataset, tmp_path / "x.parquet", DIVISIONS, progress=False)
    with pytest.raises(ValueError, match="not the expert-high dataset .*m.pt was trained with"):
        evaluate_checkpoint(tmp_path / "m.pt", tiny_dataset, tmp_path / "x.parquet", DIVISIONS, progress=False,
                            reference_dataset=tiny_dataset)  # fmt: skip
    assert not (tmp_path / "x.parquet").exists()


def test_evaluating_under_other_definitions_is_refused(tiny_dataset, tmp_path):
    train(tiny_dataset, "dt", 0, TRAIN_HP, tmp_path / "m.pt", device="cpu", progress=False)
    said = {"returns_to_go": "weighted", "statistics_from": "dataset"}
    with pytest.raises(CheckpointError) as info:
        evaluate_checkpoint(tmp_path / "m.pt", tiny_dataset, tmp_path / "e.parquet", DIVISIONS, progress=False,
                            definitions=said)  # fmt: skip
    assert str(info.value) == (
        f"{tmp_path / 'm.pt'}: trained with returns_to_go: peda, statistics_from: dataset, but the settings say "
        "returns_to_go: weighted, statistics_from: dataset; evaluate it with the settings it was trained with, "
        "or retrain it"
    )
    assert not (tmp_path / "e.parquet").exists()
    evaluate_checkpoint(tmp_path / "m.pt", tiny_dataset, tmp_path / "e.parquet", DIVISIONS, progress=False,
                        definitions=dict(said, returns_to_go="peda"))  # fmt: skip
    assert read_evaluation(tmp_path / "e.parquet")[0]["returns_to_go"] == "peda"


# ------------------------------------------------------------------------ files that do not belong together
@pytest.mark.parametrize("case", ["other env", "other objective count", "other dataset"])
def test_checkpoint_and_dataset_that_do_not_belong_together_are_refused(case, cheetah_checkpoints, tiny_dataset,
                                                                         cheetah_expert_high, write_copy,
                                                                         tmp_path):  # fmt: skip
    """Nothing would fail but the label (another env of the same sizes) or a shape error naming neither
    file (another objective count); both files are named."""
    ckpt = cheetah_checkpoints["dt-p"]
    dataset, difference = {
        "other env": (
            write_copy(tiny_dataset, tmp_path / "walker.parquet", env_id="MO-Walker2d-v2"),
            "the checkpoint is for env 'MO-HalfCheetah-v2', the dataset for 'MO-Walker2d-v2'",
        ),
        # a file whose sizes are not its env's is refused when it is read, whatever it is read for
        "other objective count": (
            write_copy(tiny_dataset, tmp_path / "three.parquet", extra_objective=True),
            "dataset has 3 objectives per step, but MO-HalfCheetah-v2 has 2",
        ),
        "other dataset": (cheetah_expert_high, "the checkpoint was trained on another dataset"),
    }[case]
    with pytest.raises(ValueError) as info:
        evaluate_checkpoint(ckpt, dataset, tmp_path / "e.parquet", DIVISIONS, progress=False)
    if case == "other objective count":
        assert str(info.value).startswith(f"{dataset}: {difference}"), str(info.value)
    else:
        assert str(info.value).startswith(f"{ckpt} and {dataset} do not belong together: {difference}")
    assert not (tmp_path / "e.parquet").exists()


def test_the_policy_runs_on_one_torch_thread_whoever_calls(cheetah_checkpoints, tiny_dataset, tmp_path, monkeypatch):
    """`morl evaluate`, the evaluate rule and a notebook give the same numbers: the evaluation sets
    torch's thread count itself (float32 results depend on it) and gives the caller's back."""
    import morl.evaluate as evaluate_module

    seen = []
    real = evaluate_module.rollout

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluate_module, "rollout", recording)
    torch.set_num_threads(2)
    try:
        evaluate_checkpoint(cheetah_checkpoints["dt-p"], tiny_dataset, tmp_path / "e.parquet", DIVISIONS,
                            progress=False)  # fmt: skip
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)


# ------------------------------------------------------------------------ coverage variants
def test_an_evaluation_on_a_coverage_variant_tags_the_held_out_preferences(tiny_dataset, tmp_path):
    from morl.coverage import derive_file, held_out
    from morl.data import FileMismatchError, write_dataset
    from morl.errors import InputError
    from morl.metrics import front_at

    variant = tmp_path / "amateur-high-narrow.parquet"
    record = derive_file(tiny_dataset, "narrow", None, variant)
    train(variant, "bc-p", 0, TRAIN_HP, tmp_path / "m.pt", device="cpu", progress=False)
    out = tmp_path / "e.parquet"
    with pytest.raises(InputError, match="give the complete dataset it was derived from"):
        evaluate_checkpoint(tmp_path / "m.pt", variant, out, 20, progress=False)
    other = tmp_path / "other.parquet"  # the same trajectories, other bytes: not the file it was cut from
    ds = load_dataset(tiny_dataset)
    ds.meta["seed"] = 99
    write_dataset(other, ds)
    with pytest.raises(FileMismatchError) as info:
        evaluate_checkpoint(tmp_path / "m.pt", variant, out, 20, progress=False, coverage_source=other)
    assert str(variant) in str(info.value) and str(other) in str(info.value)
    assert not out.exists()

    evaluate_checkpoint(tmp_path / "m.pt", variant, out, 20, progress=False, coverage_source=tiny_dataset)
    meta, arr = read_evaluation(out)
    assert meta["coverage"] == "narrow" and meta["coverage_bands"] == record["bands"]
    np.testing.assert_array_equal(arr["held_out"], held_out(arr["preference"], record["bands"]))
    assert arr["held_out"][0] and arr["held_out"][-1] and not arr["held_out"].all()  # both ends of w_1 are cut
    np.testing.assert_array_equal(arr["data_front_return"], front_at(arr["preference"], load_dataset(tiny_dataset)
                                                                     .traj_returns))  # fmt: skip
    # a complete dataset takes no coverage source
    train(tiny_dataset, "bc-p", 0, TRAIN_HP, tmp_path / "complete.pt", device="cpu", progress=False)
    with pytest.raises(InputError, match="not a coverage variant"):
        evaluate_checkpoint(tmp_path / "complete.pt", tiny_dataset, out, 20, progress=False,
                            coverage_source=tiny_dataset)  # fmt: skip


# ------------------------------------------------------------------ the target regression
def plain_lstsq(w: np.ndarray, returns: np.ndarray) -> np.ndarray:
    """A least-squares fit of ``[w, 1]`` as the regression used to be fitted: no centring."""
    x = np.hstack([np.asarray(w, np.float64), np.ones((len(w), 1))])
    coef, *_ = np.linalg.lstsq(x, np.asarray(returns, np.float64), rcond=None)
    return coef.T


def at(coef: np.ndarray, w: np.ndarray) -> np.ndarray:
    return w @ coef[:, :-1].T + coef[:, -1]


def returns_of(w: np.ndarray, seed: int) -> np.ndarray:
    """Returns of the size the tasks give (thousands), linear in the preference plus noise."""
    rng = np.random.default_rng(seed)
    n_obj = w.shape[1]
    truth = rng.uniform(-1000.0, 3000.0, size=(n_obj, n_obj + 1))
    return np.asarray(w, np.float64) @ truth[:, :-1].T + truth[:, -1] + rng.normal(0.0, 300.0, size=(len(w), n_obj))


@pytest.mark.parametrize("n_obj", [2, 3])
def test_the_regression_predicts_as_a_plain_fit_where_that_is_well_conditioned(n_obj):
    """Preferences that sum to 1 exactly (float64): the fit predicts what a plain least-squares fit
    of [w, 1] does, at every grid point, and its coefficients are of the size of the returns."""
    w = np.random.default_rng(n_obj).dirichlet(np.ones(n_obj), size=400)
    w /= w.sum(axis=1, keepdims=True)
    returns = returns_of(w, n_obj)
    coef = fit_return_regression(w, returns)
    assert coef.shape == (n_obj, n_obj + 1) and coef.dtype == np.float64
    grid = simplex_grid(n_obj, 20)
    expected = at(plain_lstsq(w, returns), grid)
    np.testing.assert_allclose(at(coef, grid), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    assert np.abs(coef).max() < 10 * np.abs(returns).max()
    np.testing.assert_allclose(coef[:, :-1].sum(axis=1), 0.0, atol=1e-9 * np.abs(coef).max())


@pytest.mark.parametrize("n_obj", [2, 3])
def test_float32_preferences_do_not_make_the_regression_fit_their_rounding(n_obj):
    """Float32 preferences sum to 1 only to ~1e-7: a plain fit of [w, 1] takes that rounding for a
    regressor, with coefficients of 1e6 and more that cancel, and its predictions move. The fit
    gives the predictions of the exact fit on the same preferences summing to 1 exactly."""
    w32 = np.random.default_rng(10 + n_obj).dirichlet(np.ones(n_obj), size=500).astype(np.float32)
    exact = w32.astype(np.float64)
    exact /= exact.sum(axis=1, keepdims=True)
    returns = returns_of(exact, 20 + n_obj)
    grid = simplex_grid(n_obj, 20)
    truth = at(plain_lstsq(exact, returns), grid)
    scale = np.abs(truth).max()
    old = plain_lstsq(w32, returns)
    assert np.abs(old).max() > 1e6  # the old fit: ill-conditioned
    assert np.abs(at(old, grid) - truth).max() > 1e-6 * scale  # and its predictions off
    coef = fit_return_regression(w32, returns)
    assert np.abs(coef).max() < 10 * np.abs(returns).max()
    np.testing.assert_allclose(at(coef, grid), truth, rtol=0, atol=1e-8 * scale)
    # the fit does not depend on the float type the preferences come in
    np.testing.assert_allclose(at(fit_return_regression(exact, returns), grid), truth, rtol=0, atol=1e-9 * scale)


def test_a_direction_the_data_do_not_vary_along_gets_no_slope():
    """One trajectory, or every trajectory at one preference: the prediction is the mean return."""
    coef = fit_return_regression(np.array([[0.3, 0.7]], np.float32), np.array([[100.0, 250.0]]))
    np.testing.assert_allclose(coef, [[0.0, 0.0, 100.0], [0.0, 0.0, 250.0]], atol=1e-9)
    w = np.tile(np.array([[0.2, 0.3, 0.5]], np.float32), (4, 1))
    returns = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [2.0, 2.0, 2.0], [2.0, 2.0, 2.0]])
    coef = fit_return_regression(w, returns)
    np.testing.assert_allclose(coef[:, :-1], 0.0, atol=1e-9)
    np.testing.assert_allclose(at(coef, simplex_grid(3, 4)), 2.0, atol=1e-9)
