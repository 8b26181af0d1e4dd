"""Learners: the DLM update rule by hand, and DLM / Filter / Offset Trees finding a known best policy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from dr_scale.experiments.classification.bandit import losses_from_labels, to_bandit
from dr_scale.learning import DirectLossMinimization, FilterTree, OffsetTree, impute_rewards
from dr_scale.learning.dlm import towards_better_step


def rewards_from_labels(y, k):
    return 1.0 - losses_from_labels(y, k)


def test_towards_better_step_by_hand():
    """Two examples x=(1,0) of class 0 and x=(0,1) of class 1, θ = 0, η = 0.5, ε = 0.1.

    Scores are all 0, so a2 = 0 (first maximum) for both; a1 = argmax(−ε l) is each
    example's own class. Example 1 alone moves: θ_1 += (η/n) x, θ_0 −= (η/n) x with
    η/n = 0.25. A second step changes nothing (a1 = a2 everywhere).
    """
    Z = np.eye(2)
    R = np.array([[1.0, 0.0], [0.0, 1.0]])  # rewards 1{a = c}
    theta = np.zeros((1, 2, 2))  # (restarts, k, d)
    theta = towards_better_step(theta, Z, R, eta=0.5, epsilon=0.1)
    np.testing.assert_allclose(theta[0], [[0.0, -0.25], [0.0, 0.25]])  # rows θ_0, θ_1
    np.testing.assert_allclose(towards_better_step(theta, Z, R, eta=0.5, epsilon=0.1), theta)
    np.testing.assert_array_equal(towards_better_step(theta, sp.csr_matrix(Z), R, eta=0.5, epsilon=0.1), theta)


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
    model = DirectLossMinimization(n_restarts=5, random_state=0).fit(X, rewards_from_labels(y, 3))
    X_test, y_test = _regions(2000, 2)
    assert model.training_reward_ > 0.95
    assert np.mean(model.predict(X_test) != y_test) < 0.05
    assert model.score(X_test, rewards_from_labels(y_test, 3)) == np.mean(model.predict(X_test) == y_test)
    # the same policy on raw features, as a LinearPolicy file would carry it
    np.testing.assert_array_equal(model.linear_policy().predict(sp.csr_matrix(X_test)), model.predict(X_test))


def test_dlm_on_sparse_features_learns_a_separable_problem():
    """One-hot bands of x₀ as sparse features: the best action is the band's third."""
    X, y = _regions(600, 1)
    bands = np.minimum((X[:, 0] * 9).astype(int), 8)
    S = sp.csr_matrix((np.ones(600), (np.arange(600), bands)), shape=(600, 9))
    model = DirectLossMinimization(n_restarts=3, random_state=0).fit(S, rewards_from_labels(y, 3))
    assert np.mean(model.predict(S) != y) < 0.02
    np.testing.assert_array_equal(model.linear_policy().predict(S), model.predict(S))


def test_learners_follow_scikit_learn_conventions():
    for learner in (DirectLossMinimization(n_restarts=2, max_iter=7), FilterTree(tree_params={"max_depth": 2}),
                    OffsetTree(3)):
        params = learner.get_params()
        assert clone(learner).get_params() == params
        assert learner.set_params(random_state=5) is learner and learner.get_params()["random_state"] == 5


@pytest.mark.parametrize("k", [3, 5])
def test_filter_tree_finds_the_best_policy(k):
    X, y = _regions(1500, 3, k)
    rng = np.random.default_rng(4)
    rewards = -losses_from_labels(y, k) * rng.uniform(0.5, 1.0, (len(y), k))  # cost-sensitive, best = y
    model = FilterTree(random_state=0).fit(X, rewards)
    X_test, y_test = _regions(3000, 5, k)
    assert np.mean(model.predict(X_test) == y_test) > 0.97


@pytest.mark.parametrize("k", [3, 5])
def test_offset_tree_finds_the_best_policy_from_bandit_data(k):
    X, y = _regions(6000, 6, k)
    data = to_bandit(X, losses_from_labels(y, k), 0, 0)
    model = OffsetTree(k, random_state=0).fit(sp.csr_matrix(X), data.action, 1 - data.loss, data.propensity)
    X_test, y_test = _regions(3000, 7, k)
    assert np.mean(model.predict(X_test) == y_test) > 0.95


def test_filter_tree_on_dr_imputed_bandit_data_finds_the_best_policy():
    X, y = _regions(6000, 8)
    data = to_bandit(X, losses_from_labels(y, 3), 0, 0)
    imputed = impute_rewards(data.action, 1 - data.loss, data.propensity, 3, "dr", np.full((6000, 3), 1 / 3))
    model = FilterTree(random_state=0).fit(X, imputed)
    X_test, y_test = _regions(3000, 9)
    assert np.mean(model.predict(X_test) == y_test) > 0.95


def test_offset_tree_rejects_rewards_outside_unit_interval():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        OffsetTree(2).fit(np.zeros((2, 1)), np.array([0, 1]), np.array([0.0, 2.0]), np.array([0.5, 0.5]))
