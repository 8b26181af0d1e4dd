"""Full-information → bandit conversion."""

from __future__ import annotations

import numpy as np
import pytest

from dr_scale.experiments.classification.bandit import log_actions, losses_from_labels, to_bandit
from dr_scale.experiments.classification.loss_models import PerActionRidge
from dr_scale.logs.reading import partition_from_table, read_log
from dr_scale.logs.writing import write_log


def _problem(n=60, d=3, k=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = rng.integers(0, k, n)
    return X, y, losses_from_labels(y, k)


def test_losses_from_labels():
    np.testing.assert_array_equal(losses_from_labels(np.array([0, 2]), 3), [[0, 1, 1], [1, 1, 0]])


def test_uniform_conversion_reveals_exactly_one_loss_with_p_one_over_k():
    X, y, L = _problem()
    data = to_bandit(X, L, 7, 1)
    n, k = L.shape
    np.testing.assert_array_equal(data.propensity, np.full(n, 1 / k))
    np.testing.assert_array_equal(data.loss, L[np.arange(n), data.action])
    assert data.action.min() >= 0 and data.action.max() < k
    np.testing.assert_array_equal(to_bandit(X, np.ones_like(L), 7, 1).action, data.action)  # draws ignore losses


def test_conversion_is_keyed_by_row_id_not_order():
    X, y, L = _problem()
    row_id = np.arange(100, 160)
    whole = to_bandit(X, L, 3, 5, row_id=row_id)
    order = np.random.default_rng(1).permutation(60)
    shuffled = to_bandit(X[order], L[order], 3, 5, row_id=row_id[order])
    np.testing.assert_array_equal(shuffled.action, whole.action[order])
    assert not np.array_equal(to_bandit(X, L, 3, 6, row_id=row_id).action, whole.action)


def test_uniform_actions_are_uniform():
    n, k = 40_000, 5
    action, _ = log_actions(np.arange(n), k, 11, 2)
    counts = np.bincount(action, minlength=k)
    expected = n / k
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 18.5  # chi-square with 4 dof: P(> 18.5) ≈ 0.001


def test_logging_policy_given_as_probabilities():
    n = 20_000
    probs = np.tile([0.7, 0.2, 0.1], (n, 1))
    action, propensity = log_actions(np.arange(n), 3, 0, probs=probs)
    np.testing.assert_array_equal(propensity, probs[np.arange(n), action])
    freq = np.bincount(action, minlength=3) / n
    se = np.sqrt(probs[0] * (1 - probs[0]) / n)
    assert np.all(np.abs(freq - probs[0]) < 4 * se)
    with pytest.raises(ValueError, match="sum to 1"):
        log_actions(np.arange(2), 3, 0, probs=np.ones((2, 3)))


def test_bandit_table_meets_the_logged_data_contract(tmp_path):
    X, y, L = _problem(n=30, d=4, k=3)
    X[X < 0] = 0  # sparse rows
    data = to_bandit(X, L, 0, 0)
    table = data.to_table()
    part = partition_from_table(table, "converted", n_features=4, n_actions=3)
    np.testing.assert_allclose(part.X.toarray(), X.astype(np.float32))
    np.testing.assert_array_equal(part.reward, -data.loss)
    write_log(table, str(tmp_path / "log"), n_parts=2, n_features=4, n_actions=3)
    assert sum(len(p) for p in read_log(str(tmp_path / "log"))) == 30


def test_per_action_ridge_on_bandit_rows():
    from sklearn.linear_model import Ridge
    from sklearn.preprocessing import StandardScaler

    X, y, L = _problem(n=200, d=3, k=3)
    data = to_bandit(X, L, 0, 0)
    model = PerActionRidge(alpha=2.0).fit_bandit(X, data.action, data.loss, 3)
    Z = StandardScaler().fit_transform(X)
    for a in range(3):
        rows = data.action == a
        ref = Ridge(alpha=2.0).fit(Z[rows], data.loss[rows])
        np.testing.assert_allclose(model.predict(X)[:, a], ref.predict(Z), atol=1e-10)
    np.testing.assert_allclose(model.to_reward_model().predict(X), -model.predict(X), atol=1e-10)
