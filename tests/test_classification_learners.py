"""Learners: the DLM update rule by hand, and Filter/Offset Trees finding a known best policy."""

from __future__ import annotations

import numpy as np
import pytest

from dr_scale.classification.bandit import impute_losses, losses_from_labels, to_bandit
from dr_scale.classification.dlm import DirectLossMinimization, towards_better_step
from dr_scale.classification.filter_tree import FilterTree
from dr_scale.classification.offset_tree import OffsetTree


def test_towards_better_step_by_hand():
    """Two examples x=(1,0) of class 0 and x=(0,1) of class 1, θ = 0, η = 0.5, ε = 0.1.

    Scores are all 0, so a2 = 0 (first maximum) for both; a1 = argmax(−ε l) is each
    example's own class. Example 1 alone moves: θ_1 += (η/n) x, θ_0 −= (η/n) x with
    η/n = 0.25. A second step changes nothing (a1 = a2 everywhere).
    """
    Z = np.eye(2)
    L = np.array([[0.0, 1.0], [1.0, 0.0]])
    theta = np.zeros((1, 2, 2))  # (restarts, k, d)
    theta = towards_better_step(theta, Z, L, eta=0.5, epsilon=0.1)
    np.testing.assert_allclose(theta[0], [[0.0, -0.25], [0.0, 0.25]])  # rows θ_0, θ_1
    np.testing.assert_allclose(towards_better_step(theta, Z, L, eta=0.5, epsilon=0.1), theta)


def test_towards_better_step_restarts_are_independent():
    rng = np.random.default_rng(0)
    Z, L = rng.standard_normal((20, 3)), rng.random((20, 4))
    theta = rng.standard_normal((3, 4, 3))
    both = towards_better_step(theta, Z, L, 0.3, 0.1)
    for r in range(3):
        np.testing.assert_allclose(both[r], towards_better_step(theta[[r]], Z, L, 0.3, 0.1)[0])


def _regions(n, seed, k=3):
    """x uniform on [0,1]²; the best action is the third of the x₀ axis x falls in (k bands)."""
    X = np.random.default_rng(seed).random((n, 2))
    return X, np.minimum((X[:, 0] * k).astype(int), k - 1)


def test_dlm_learns_a_separable_problem():
    X, y = _regions(600, 1)
    model = DirectLossMinimization(n_restarts=5, random_state=0).fit(X, losses_from_labels(y, 3))
    X_test, y_test = _regions(2000, 2)
    assert model.training_loss_ < 0.05
    assert np.mean(model.predict(X_test) != y_test) < 0.05


@pytest.mark.parametrize("k", [3, 5])
def test_filter_tree_finds_the_best_policy(k):
    X, y = _regions(1500, 3, k)
    rng = np.random.default_rng(4)
    costs = losses_from_labels(y, k) * rng.uniform(0.5, 1.0, (len(y), k))  # cost-sensitive, best = y
    model = FilterTree(random_state=0).fit(X, costs)
    X_test, y_test = _regions(3000, 5, k)
    assert np.mean(model.predict(X_test) == y_test) > 0.97


@pytest.mark.parametrize("k", [3, 5])
def test_offset_tree_finds_the_best_policy_from_bandit_data(k):
    X, y = _regions(6000, 6, k)
    data = to_bandit(X, losses_from_labels(y, k), 0, 0)
    model = OffsetTree(k, random_state=0).fit(X, data.action, data.loss, data.propensity)
    X_test, y_test = _regions(3000, 7, k)
    assert np.mean(model.predict(X_test) == y_test) > 0.95


def test_filter_tree_on_dr_imputed_bandit_data_finds_the_best_policy():
    X, y = _regions(6000, 8)
    data = to_bandit(X, losses_from_labels(y, 3), 0, 0)
    model = FilterTree(random_state=0).fit(X, impute_losses(data, "dr", np.full((6000, 3), 2 / 3)))
    X_test, y_test = _regions(3000, 9)
    assert np.mean(model.predict(X_test) == y_test) > 0.95


def test_offset_tree_rejects_losses_outside_unit_interval():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        OffsetTree(2).fit(np.zeros((2, 1)), np.array([0, 1]), np.array([0.0, 2.0]), np.array([0.5, 0.5]))
