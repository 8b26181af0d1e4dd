"""Flexible reward models on arrays (dr_scale.reward.sklearn_models): per-action scikit-learn regressors,
cross-fitted."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.tree import DecisionTreeRegressor
from test_fitting import D, K, N, make_log

from dr_scale.logs.reading import read_log
from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import Evaluation, evaluate_partitions
from dr_scale.reward.fitting import FitSettings, UnloggedActionWarning, fit_reward_model
from dr_scale.reward.models import fold_of
from dr_scale.reward.sklearn_models import SklearnRewardModel, cross_fit


@pytest.fixture(scope="module")
def log():
    return make_log(valued=True, seed=4)


@pytest.mark.slow
def test_per_action_sklearn_ridge_is_the_objective_dr_scale_fit_solves(log, tmp_path):
    table, X, action, reward, row_id = log
    url = str(tmp_path / "log")
    write_log(table, url, n_parts=3, n_features=D, n_actions=K)
    ours = fit_reward_model(url, FitSettings(lam=2.5, rtol=1e-10))
    theirs = SklearnRewardModel.fit(Ridge(alpha=2.5, solver="sparse_cg", tol=1e-12), X, action, reward, K)
    np.testing.assert_allclose(theirs.predict(X), ours.predict(X), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(theirs.predict(X, actions=np.array([3, 1])), theirs.predict(X)[:, [3, 1]])


def test_cross_fitted_rows_are_predicted_by_a_model_that_did_not_see_them(log):
    table, X, action, reward, row_id = log
    tree = DecisionTreeRegressor(max_depth=5, random_state=0)  # a flexible model that needs dense rows
    model = cross_fit(tree, X, action, reward, row_id, folds=3, seed=2, n_actions=K, dense=True)
    fold = fold_of(row_id, 3, 2)
    predicted = model.predict(X, row_id=row_id)
    for j in range(3):
        np.testing.assert_array_equal(predicted[fold == j], model.fold_models[j].predict(X[fold == j]))
    np.testing.assert_array_equal(model.predict(X), model.full.predict(X))
    changed = cross_fit(tree, X, action, np.where(fold == 1, reward + 50.0, reward), row_id, folds=3, seed=2,
                        n_actions=K, dense=True)
    again = changed.predict(X, row_id=row_id)
    np.testing.assert_array_equal(again[fold == 1], predicted[fold == 1])
    assert np.abs(again[fold != 1] - predicted[fold != 1]).max() > 1.0


def test_an_evaluation_passes_row_ids_to_a_cross_fitted_model(log, tmp_path):
    from dr_scale.ope.estimators import DoublyRobust

    table, X, action, reward, row_id = log
    model = cross_fit(Ridge(alpha=1.0), X, action, reward, row_id, folds=4, n_actions=K)
    url = str(tmp_path / "log")
    write_log(table, url, n_parts=2, n_features=D, n_actions=K)
    result = evaluate_partitions(read_log(url), Evaluation("constant:0", ["DR"], reward_model=model))
    target = np.zeros((N, K))
    target[:, 0] = 1.0
    direct = DoublyRobust().estimate(reward=reward, action=action, propensity=table.column("propensity").to_numpy(),
                                     target_probs=target, reward_hat=model.predict(X, row_id=row_id))
    assert result.estimates["DR"].value == pytest.approx(direct.value, rel=1e-12)


def test_an_unlogged_action_predicts_the_pooled_mean(log):
    table, X, action, reward, row_id = log
    with pytest.warns(UnloggedActionWarning, match="action.s. 4 never logged"):
        model = SklearnRewardModel.fit(Ridge(), X, action, reward, K + 1)
    assert np.all(model.predict(X[:5], actions=np.array([4])) == reward.mean())
