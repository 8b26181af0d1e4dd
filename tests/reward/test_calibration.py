"""The logistic reward model on rare clicks: exact per-action calibration where an action has enough clicks, the
conjugate prior's shrinkage toward the pooled rate elsewhere (a 3-row item, an unclicked item), and the calibration
record printed with every fit (dr_scale.reward.calibration), cross-fitted by default in evaluate."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from scipy.special import expit

from dr_scale.cli import main
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.reward.fitting import EXACT_EVENTS, FitSettings, fit_reward_model, rate_prior

D, K = 12, 5
# rows and clicks per action: two actions with ≥ EXACT_EVENTS clicks (exact), one rare, a 3-row item with one
# click, an unclicked item with 1,500 rows
ROWS = (2500, 2000, 1500, 3, 1500)
CLICKS = (40, 25, 3, 1, 0)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    rng = np.random.default_rng(7)
    n = sum(ROWS)
    X = sp.csr_matrix((rng.random((n, D)) < 0.3).astype(np.float64))
    action = np.repeat(np.arange(K), ROWS)
    reward = np.zeros(n)
    for a, (lo, c) in enumerate(zip(np.cumsum((0,) + ROWS[:-1]), CLICKS)):
        score = np.asarray(X[lo:lo + ROWS[a], :3].sum(axis=1)).ravel() + rng.random(ROWS[a])  # clicks follow x
        reward[lo + np.argsort(-score)[:c]] = 1.0
    row_id = rng.permutation(10 * n)[:n].astype(np.int64)
    table = pa.table({"row_id": row_id, "features": csr_to_features(X), "action": action.astype(np.int32),
                      "reward": reward, "propensity": np.full(n, 1.0 / K)})
    path = str(tmp_path_factory.mktemp("calibration") / "log")
    write_log(table, path, n_features=D, n_actions=K)
    return path, X, action, reward, row_id


def _mean_per_action(p, action):
    return np.bincount(action, weights=p, minlength=K) / np.bincount(action, minlength=K)


def test_calibration_is_exact_per_action_above_the_events_and_for_the_pooled_rate(log):
    path, X, action, reward, _ = log
    model = fit_reward_model(path, FitSettings(lam=1.0))
    p = expit(np.asarray(X @ model.coef)[np.arange(action.size), action] + model.intercept[action])
    n, s = np.bincount(action, minlength=K), np.bincount(action, weights=reward, minlength=K)
    exact = (s >= EXACT_EVENTS) & (n - s >= EXACT_EVENTS)
    assert exact.tolist() == [True, True, False, False, False]
    mean = _mean_per_action(p, action)
    # the score equation of an unpenalised intercept: mean prediction = observed rate on the training rows
    np.testing.assert_allclose(mean[exact], (s / n)[exact], rtol=1e-8)
    # the shrunk actions: the Beta posterior mean (s + m p̄)/(n + m), and all rows together: the pooled rate
    m, centre = model.metadata["prior"]["rows"], model.metadata["prior"]["centre"]
    np.testing.assert_allclose(mean[~exact], ((s + m * centre) / (n + m))[~exact], rtol=1e-8)
    np.testing.assert_allclose(p.mean(), reward.mean(), rtol=1e-8)
    assert model.metadata["calibration"]["dm"] == pytest.approx(reward.mean(), rel=1e-8)


def test_each_fold_model_is_calibrated_on_its_training_rows(log):
    path, X, action, reward, row_id = log
    model = fit_reward_model(path, FitSettings(lam=1.0, folds=3))
    from dr_scale.reward.models import fold_of

    fold = fold_of(row_id, 3, model.fold_seed)
    for j in range(3):
        train = fold != j
        a, r = action[train], reward[train]
        z = np.asarray(X[train] @ model.fold_coef[j])[np.arange(a.size), a] + model.fold_intercept[j][a]
        n, s = np.bincount(a, minlength=K), np.bincount(a, weights=r, minlength=K)
        exact = (s >= EXACT_EVENTS) & (n - s >= EXACT_EVENTS)
        np.testing.assert_allclose(_mean_per_action(expit(z), a)[exact], (s / n)[exact], rtol=1e-8)
        np.testing.assert_allclose(expit(z).mean(), r.mean(), rtol=1e-8)


def test_a_three_row_item_is_shrunk_toward_the_pooled_rate_and_an_unclicked_item_is_not_lifted(log):
    path, X, action, reward, _ = log
    model = fit_reward_model(path, FitSettings(lam=1.0))
    p = expit(np.asarray(X @ model.coef)[np.arange(action.size), action] + model.intercept[action])
    mean = _mean_per_action(p, action)
    centre, m = model.metadata["prior"]["centre"], model.metadata["prior"]["rows"]
    # the 3-row item with 1 click (rate 1/3): its mean prediction sits between p̄ and 1/3, nearer p̄ (m ≫ 3)
    assert centre < mean[3] < 1 / 3
    assert mean[3] - centre < 3 / (3 + m) * (1 / 3 - centre) * (1 + 1e-8)
    # the unclicked item: m p̄ / (n + m), below the pooled rate (not lifted above it), and the predictions' total
    # over all rows is the clicks (no item is lifted at another's expense)
    assert mean[4] == pytest.approx(m * centre / (ROWS[4] + m), rel=1e-8)
    assert mean[4] < centre
    assert p.sum() == pytest.approx(reward.sum(), rel=1e-8)


def test_the_prior_is_the_beta_binomial_moment_estimate():
    n = np.array([1000.0, 1000.0, 1000.0, 1000.0])
    s = np.array([2.0, 10.0, 4.0, 0.0])
    prior = rate_prior(n, s, 4)
    p = s.sum() / n.sum()
    tau2 = (np.sum(n * (s / n - p) ** 2) - 3 * p * (1 - p)) / (n.sum() - np.sum(n ** 2) / n.sum())
    assert prior.rows[0] == pytest.approx(p * (1 - p) / tau2 - 1)
    shrunk = prior.shrunk  # action 1 has 10 clicks: exact
    assert shrunk.tolist() == [True, False, True, True]
    w = shrunk / (n + prior.rows[0])
    assert prior.pooled[0] == pytest.approx(np.sum(w * s) / np.sum(w * n))
    # the predicted total of the shrunk actions is their clicks: the pooled rate stays exact
    assert np.sum((n * prior.target / (n * prior.weight))[shrunk]) == pytest.approx(s[shrunk].sum())


def test_the_calibration_record_is_the_cross_fitted_predictions(log):
    path, X, action, reward, row_id = log
    model = fit_reward_model(path, FitSettings(lam=1.0, folds=3))
    p = model.predict(X, row_id=row_id)[np.arange(action.size), action]
    record = model.metadata["calibration"]
    assert record["predicted"] == "out of fold"
    assert record["dm"] == pytest.approx(p.mean(), rel=1e-10)
    half = 1.959963984540054 * p.std(ddof=1) / np.sqrt(p.size)
    np.testing.assert_allclose(record["dm_interval"], [p.mean() - half, p.mean() + half], rtol=1e-9)
    rows = np.array([g[0] for g in record["deciles"]])
    assert rows.sum() == p.size
    # each group's mean prediction and reward are those of its rows: the groups weigh back to the totals
    assert np.dot(rows, [g[1] for g in record["deciles"]]) == pytest.approx(p.sum(), rel=1e-10)
    assert np.dot(rows, [g[2] for g in record["deciles"]]) == pytest.approx(reward.sum(), rel=1e-10)
    means = [g[1] for g in record["deciles"]]
    assert means == sorted(means)


@pytest.mark.slow
def test_evaluate_cross_fits_by_default_and_labels_an_in_sample_model(log, capsys):
    path = log[0]
    args = ["evaluate", path, "--policy", "logging", "--fit-reward-model", "--lam", "1", "--estimators", "DM,IPS",
            "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "cross-fitted over 5 folds" in out and "cross-fitted: each row by the fold model" in out
    assert "DM of the logging policy" in out and "reliability by decile" in out
    assert main([*args, "--folds", "1"]) == 0
    out = capsys.readouterr().out
    assert "in-sample reward model (no folds)" in out and "cross-fitted over" not in out


def test_with_no_action_shrunk_the_centre_is_the_logs_rate_not_a_half():
    # two clicked actions with enough rows of both kinds (calibrated exactly) and one never logged: the unlogged
    # action's ρ̂ is the prior's centre, which must be the log's click rate, 3%, not the ½ of an empty smoothed rate
    prior = rate_prior(np.array([1000.0, 1000.0, 0.0]), np.array([20.0, 40.0, 0.0]), 3)
    assert not prior.shrunk.any()
    assert prior.pooled[0] == pytest.approx(60 / 2000)
