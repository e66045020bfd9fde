"""Tests for morl.preferences: evaluation lattice, dataset samplers, preference entropy."""

import itertools
import math

import numpy as np
import pytest

from morl.preferences import (
    ENTROPY_LEVELS,
    default_divisions,
    preference_entropy,
    sample_preferences,
    simplex_grid,
)

# ---------------------------------------------------------------------------------------------
# simplex_grid
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_obj, divisions, n_rows", [(2, 500, 501), (3, 24, 325), (4, 5, 56)])
def test_grid_size_sums_nonneg_unique(n_obj, divisions, n_rows):
    g = simplex_grid(n_obj, divisions)
    assert g.shape == (n_rows, n_obj)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(g >= 0.0)
    assert np.unique(g, axis=0).shape[0] == n_rows
    # every entry is a multiple of 1 / divisions
    np.testing.assert_allclose(g * divisions, np.round(g * divisions), atol=1e-9)


def test_grid_matches_brute_force_compositions_in_lexicographic_order():
    for n_obj, divisions in ((2, 7), (3, 6), (4, 4)):
        expected = [
            k for k in itertools.product(range(divisions + 1), repeat=n_obj) if sum(k) == divisions
        ]  # itertools.product is lexicographic
        np.testing.assert_array_equal(np.round(simplex_grid(n_obj, divisions) * divisions).astype(int), expected)


def test_grid_endpoints_and_default_divisions():
    g2 = simplex_grid(2, default_divisions(2))
    np.testing.assert_array_equal(g2[0], [0.0, 1.0])
    np.testing.assert_array_equal(g2[-1], [1.0, 0.0])
    np.testing.assert_allclose(g2[1], [1 / 500, 499 / 500])
    g3 = simplex_grid(3, default_divisions(3))
    np.testing.assert_array_equal(g3[0], [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(g3[-1], [1.0, 0.0, 0.0])
    assert default_divisions(2) == 500 and default_divisions(3) == 24
    np.testing.assert_array_equal(simplex_grid(1, 3), [[1.0]])


def test_grid_and_divisions_reject_bad_arguments():
    with pytest.raises(ValueError, match="n_obj=4"):
        default_divisions(4)
    with pytest.raises(ValueError, match="divisions"):
        simplex_grid(2, 0)
    with pytest.raises(ValueError, match="n_obj"):
        simplex_grid(0, 10)
    with pytest.raises(ValueError, match="integer"):
        simplex_grid(2, 2.5)
    with pytest.raises(ValueError, match="rows"):
        simplex_grid(10, 1000)


# ---------------------------------------------------------------------------------------------
# sample_preferences
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entropy", ENTROPY_LEVELS)
@pytest.mark.parametrize("n_obj", [2, 3])
def test_samples_shape_sum_range(entropy, n_obj):
    w = sample_preferences(entropy, 5000, n_obj, np.random.default_rng(0))
    assert w.shape == (5000, n_obj)
    assert np.all(np.isfinite(w))
    assert np.all(w >= 0.0) and np.all(w <= 1.0)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("entropy", ENTROPY_LEVELS)
def test_samples_deterministic_under_seed(entropy):
    a = sample_preferences(entropy, 300, 3, np.random.default_rng(42))
    b = sample_preferences(entropy, 300, 3, np.random.default_rng(42))
    c = sample_preferences(entropy, 300, 3, np.random.default_rng(43))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_high_entropy_is_uniform_on_the_simplex():
    w = sample_preferences("high", 40000, 2, np.random.default_rng(1))
    # Dirichlet(1, 1): the first weight is U(0, 1)
    for t in (0.1, 0.25, 0.5, 0.9):
        assert np.mean(w[:, 0] < t) == pytest.approx(t, abs=0.01)
    w3 = sample_preferences("high", 40000, 3, np.random.default_rng(1))
    # Dirichlet(1, 1, 1): each weight has density 2 (1 - x), so P(w_i < t) = 1 - (1 - t)^2
    for i in range(3):
        assert np.mean(w3[:, i] < 0.3) == pytest.approx(1 - 0.7**2, abs=0.01)


def test_high_entropy_rejection_stays_inside_the_box():
    low, high = np.array([0.2, 0.1, 0.0]), np.array([0.7, 0.6, 0.5])
    w = sample_preferences("high", 4000, 3, np.random.default_rng(2), low=low, high=high)
    assert np.all(w >= low) and np.all(w <= high)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    # 2 objectives, box [0.2, 0.9] x [0.1, 0.8]: first weight uniform on [0.2, 0.9]
    w2 = sample_preferences("high", 20000, 2, np.random.default_rng(3), low=[0.2, 0.1], high=[0.9, 0.8])
    assert w2[:, 0].min() >= 0.2 and w2[:, 0].max() <= 0.9
    assert np.mean(w2[:, 0] < 0.55) == pytest.approx(0.5, abs=0.015)


def test_medium_entropy_follows_ratio_of_uniform_concentrations():
    # alpha_i ~ U(0, 1e7) makes Dirichlet(alpha) ~ alpha / sum(alpha) (its spread is ~1e-3.5),
    # and for two objectives P(a1 / (a1 + a2) < t) = t / (2 (1 - t)) for t <= 1/2.
    w = sample_preferences("medium", 40000, 2, np.random.default_rng(4))
    for t in (0.1, 0.25, 0.4):
        assert np.mean(w[:, 0] < t) == pytest.approx(t / (2 * (1 - t)), abs=0.01)


def test_medium_entropy_maps_affinely_into_the_box():
    # With w1 in (0, 1) mapped to low + w (high - low) and renormalised, two objectives with
    # low = (0.2, 0.2), high = (0.6, 0.6) give (0.2 + 0.4 w1) / (0.4 + 0.4) -> in (0.25, 0.75).
    w = sample_preferences("medium", 20000, 2, np.random.default_rng(5), low=0.2, high=0.6)
    assert w[:, 0].min() >= 0.25 and w[:, 0].max() <= 0.75
    assert w[:, 0].min() < 0.26 and w[:, 0].max() > 0.74


def test_low_entropy_is_scaled_by_the_full_width_and_shifted_by_a_third():
    # 2 objectives: a1 / (a1 + a2) in [1/3, 2/3]; w <- 1/3 + w, then renormalised by 1/3 + 1/3 + 1:
    # (1/3 + 1/3) / (5/3) = 0.4 to (1/3 + 2/3) / (5/3) = 0.6
    w = sample_preferences("low", 20000, 2, np.random.default_rng(6))
    assert w[:, 0].min() >= 0.4 - 1e-3 and w[:, 0].max() <= 0.6 + 1e-3
    assert w[:, 0].min() < 0.4 + 0.01 and w[:, 0].max() > 0.6 - 0.01
    # with a box [0.3, 0.9]: w <- 0.3 + 0.2 + 0.6 w, sum 1.6 -> (0.5 + 0.6 [1/3, 2/3]) / 1.6 = [0.4375, 0.5625]
    w = sample_preferences("low", 20000, 2, np.random.default_rng(7), low=0.3, high=0.9)
    assert w[:, 0].min() >= 0.4375 - 1e-3 and w[:, 0].max() <= 0.5625 + 1e-3
    assert w[:, 0].min() < 0.4375 + 0.01 and w[:, 0].max() > 0.5625 - 0.01


def test_sample_preferences_rejects_bad_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="entropy"):
        sample_preferences("uniform", 10, 2, rng)
    with pytest.raises(ValueError, match="n must be"):
        sample_preferences("high", -1, 2, rng)
    with pytest.raises(ValueError, match="Generator"):
        sample_preferences("high", 10, 2, np.random.RandomState(0))
    with pytest.raises(ValueError, match="simplex"):
        sample_preferences("medium", 10, 2, rng, low=[0.6, 0.6], high=[1.0, 1.0])
    with pytest.raises(ValueError, match="low must be <= high"):
        sample_preferences("medium", 10, 2, rng, low=[0.5, 0.0], high=[0.4, 1.0])
    with pytest.raises(ValueError, match="shape"):
        sample_preferences("medium", 10, 3, rng, low=[0.0, 0.0])
    with pytest.raises(ValueError, match="positive area"):
        sample_preferences("high", 10, 2, rng, low=[0.5, 0.0], high=[0.5, 1.0])
    assert sample_preferences("low", 0, 3, rng).shape == (0, 3)


# ---------------------------------------------------------------------------------------------
# preference_entropy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_obj", [2, 3])
def test_entropy_orders_high_medium_low(n_obj):
    rng = np.random.default_rng(8)
    h = {e: preference_entropy(sample_preferences(e, 20000, n_obj, rng)) for e in ENTROPY_LEVELS}
    assert h["high"] > h["medium"] > h["low"]


def test_entropy_reference_values():
    # uniform on [0, 1] for the first weight: about log(1) = 0
    rng = np.random.default_rng(9)
    w1 = rng.random(100000)
    assert preference_entropy(np.c_[w1, 1 - w1]) == pytest.approx(0.0, abs=0.01)
    # all in one cell: -log(bins) per free coordinate
    assert preference_entropy([[0.5, 0.5]] * 10, bins=20) == pytest.approx(-math.log(20))
    assert preference_entropy([[0.2, 0.3, 0.5]] * 10, bins=20) == pytest.approx(-2 * math.log(20))
    # the lattice covers the simplex evenly: about log(1/2) for 3 objectives
    g = simplex_grid(3, 200)
    assert preference_entropy(g) == pytest.approx(math.log(0.5), abs=0.05)


def test_entropy_rejects_bad_input():
    with pytest.raises(ValueError, match="shape"):
        preference_entropy(np.empty((0, 2)))
    with pytest.raises(ValueError, match="shape"):
        preference_entropy([0.5, 0.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        preference_entropy([[1.5, -0.5]])
    with pytest.raises(ValueError, match="non-finite"):
        preference_entropy([[np.nan, 0.5]])
