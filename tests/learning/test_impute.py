"""Imputed rewards Γ_a(x_i) (paper, Sec. 4): the formulas entry by entry, and unbiasedness."""

from __future__ import annotations

import numpy as np
import pytest

from dr_scale.experiments.classification.bandit import log_actions
from dr_scale.learning.impute import impute_rewards


def test_formulas_entry_by_entry():
    action = np.array([0, 2, 1, 2, 0])
    reward = np.array([1.0, 0.5, -2.0, 0.0, 3.0])
    propensity = np.array([0.5, 0.25, 1.0, 0.1, 0.2])
    reward_hat = np.arange(15, dtype=float).reshape(5, 3) / 10
    dr = impute_rewards(action, reward, propensity, 3, "dr", reward_hat)
    ips = impute_rewards(action, reward, propensity, 3, "ips")
    dm = impute_rewards(action, reward, propensity, 3, "dm", reward_hat)
    for i in range(5):
        for a in range(3):
            hit = float(action[i] == a)
            assert ips[i, a] == pytest.approx(hit * reward[i] / propensity[i])
            assert dm[i, a] == reward_hat[i, a]
            assert dr[i, a] == pytest.approx(
                reward_hat[i, a] + hit * (reward[i] - reward_hat[i, action[i]]) / propensity[i])


def test_negated_rewards_give_negated_imputations_exactly():
    """Losses l = −r impute to −Γ bit for bit (the classification experiments rely on it)."""
    rng = np.random.default_rng(1)
    action, reward, p = rng.integers(0, 4, 50), rng.random(50), rng.uniform(0.1, 1, 50)
    reward_hat = rng.random((50, 4))
    for method in ("dr", "ips", "dm"):
        np.testing.assert_array_equal(impute_rewards(action, -reward, p, 4, method, -reward_hat),
                                      -impute_rewards(action, reward, p, 4, method, reward_hat))


def test_bad_input_is_a_clear_error():
    a, r, p = np.array([0, 1]), np.array([1.0, 0.0]), np.array([0.5, 0.5])
    with pytest.raises(ValueError, match="needs reward_hat of shape"):
        impute_rewards(a, r, p, 2, "dr")
    with pytest.raises(ValueError, match="unknown imputation 'snips'"):
        impute_rewards(a, r, p, 2, "snips")
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        impute_rewards(np.array([0, 2]), r, p, 2, "ips")


@pytest.mark.parametrize("method", ["ips", "dr"])
def test_imputed_rewards_are_unbiased(method):
    """The mean over R keyed loggings of every entry is within 4.5 standard errors of E[r | x_i, a].

    Rewards are deterministic given (i, a) here, so with uniform logging over k actions
    Var[Γ_a] = (k − 1) r_a² for IPS and (k − 1)(r_a − ρ̂_a)² for DR.
    """
    rng = np.random.default_rng(3)
    n, k, R = 40, 4, 3000
    truth = rng.random((n, k))
    reward_hat = truth + rng.normal(0, 0.2, (n, k))
    total = np.zeros((n, k))
    for rep in range(R):
        action, propensity = log_actions(np.arange(n), k, 99, rep)
        total += impute_rewards(action, truth[np.arange(n), action], propensity, k, method, reward_hat)
    residual = truth if method == "ips" else truth - reward_hat
    z = (total / R - truth) / (np.abs(residual) * np.sqrt((k - 1) / R))
    assert np.max(np.abs(z)) < 4.5  # 160 entries: P(max |z| > 4.5) ≈ 1e-3
    assert np.std(z) == pytest.approx(1.0, abs=0.2)  # the tolerance is the real spread, not a loose bound
