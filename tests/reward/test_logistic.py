"""Logistic reward models for 0/1 rewards (dr_scale.reward.fitting with model="logistic", LogisticRewardModel).

Checked against scikit-learn's ``LogisticRegression(C=1/λ)`` per action (full-data and fold models), to the
distance the solver's stopping rule allows (‖x̂ − x*‖ ≤ ‖∇L(x̂)‖ / μ, μ the least curvature); 1 vs many parts,
spilled vs in memory; the default choice by the rewards and ``--model``; bad input (``--model logistic`` on
rewards other than 0/1; a separable log); the files' kind; local vs a LocalCluster.
"""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from scipy.special import expit

from dr_scale.cli import main
from dr_scale.core import keyed_random
from dr_scale.core.errors import ParameterError
from dr_scale.io.parameter_files import ParameterFileError
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.reward.fitting import (
    FitSettings,
    SeparatedRewardsWarning,
    UnloggedActionWarning,
    fit_reward_model,
    rate_prior,
)
from dr_scale.reward.models import LinearRewardModel, LogisticRewardModel, fold_of

N, D, K = 4000, 25, 3


def make_log(n=N, d=D, k=K, seed=0, binary=True, unlogged=()):
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix((rng.random((n, d)) < np.linspace(0.3, 0.05, d)).astype(np.float64))
    beta = rng.normal(size=(d, k))
    probs = np.full((n, k), 1.0)
    probs[:, list(unlogged)] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    row_id = rng.permutation(10 * n)[:n].astype(np.int64)
    action = keyed_random.categorical(probs, row_id, seed, "test-action")
    mean = expit(np.asarray(X @ beta)[np.arange(n), action] - 1.0)
    reward = (rng.random(n) < mean).astype(np.float64) if binary else mean + 0.1 * rng.normal(size=n)
    table = pa.table({"row_id": row_id, "features": csr_to_features(X), "action": action.astype(np.int32),
                      "reward": reward, "propensity": probs[np.arange(n), action]})
    return table, X, action, reward, row_id


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("logistic")
    table, X, action, reward, row_id = make_log()
    out = {"data": (X, action, reward, row_id)}
    for parts in (1, 5):
        out[parts] = str(root / f"log-{parts}")
        write_log(table, out[parts], n_parts=parts, n_features=D, n_actions=K)
    out["continuous"] = str(root / "continuous")
    write_log(make_log(binary=False)[0], out["continuous"], n_features=D, n_actions=K)
    return out


def gradient_and_curvature(X, y, w, b, lam):
    """∇ of Σ_i [log(1 + e^{z_i}) − y_i z_i] + (λ/2)‖w‖² at (w, b), and its Hessian's least eigenvalue (dense)."""
    A = np.column_stack([X.toarray(), np.ones(X.shape[0])])
    p = expit(A @ np.r_[w, b])
    grad = A.T @ (p - y) + lam * np.r_[w, 0.0]
    H = (A * (p * (1 - p))[:, None]).T @ A + lam * np.diag(np.r_[np.ones(A.shape[1] - 1), 0.0])
    return grad, np.linalg.eigvalsh(H)[0]


def assert_is_sklearn_solution(w, b, X, y, lam):
    from sklearn.linear_model import LogisticRegression

    sk = LogisticRegression(C=1.0 / lam, tol=1e-12, max_iter=100_000).fit(X, y)
    g_hat, mu = gradient_and_curvature(X, y, w, b, lam)
    g_sk, _ = gradient_and_curvature(X, y, sk.coef_[0], sk.intercept_[0], lam)
    bound = 2 * (np.linalg.norm(g_hat) + np.linalg.norm(g_sk)) / mu  # 2: the curvature along the segment
    distance = np.linalg.norm(np.r_[w - sk.coef_[0], b - sk.intercept_[0]])
    assert distance <= bound, (distance, bound)
    assert bound < 1e-3  # tight, not vacuous


@pytest.mark.slow
def test_each_actions_model_is_sklearns_logistic_regression(logs):
    X, action, reward, _ = logs["data"]
    model = fit_reward_model(logs[5], FitSettings(lam=2.0, rtol=1e-7))  # 0/1 rewards: logistic by default
    assert isinstance(model, LogisticRewardModel) and model.metadata["model"] == "logistic"
    assert model.metadata["model_chosen_by"] == "every reward is 0 or 1"
    for a in range(K):
        assert_is_sklearn_solution(model.coef[:, a], model.intercept[a], X[action == a], reward[action == a], 2.0)
    p = model.predict(X)
    np.testing.assert_array_equal(p, expit(np.asarray(X @ model.coef) + model.intercept))
    assert ((p > 0) & (p < 1)).all()


@pytest.mark.slow
def test_a_pass_over_a_part_in_row_chunks_is_the_same_fit(logs, monkeypatch):
    """A pass covers a block's rows CHUNK_ROWS at a time (bounded temporaries): still scikit-learn's solution."""
    import dr_scale.crossfit.parts as parts

    X, action, reward, _ = logs["data"]
    monkeypatch.setattr(parts, "CHUNK_ROWS", 97)
    model = fit_reward_model(logs[1], FitSettings(lam=2.0, rtol=1e-7))
    for a in range(K):
        assert_is_sklearn_solution(model.coef[:, a], model.intercept[a], X[action == a], reward[action == a], 2.0)


@pytest.mark.slow
def test_fold_models_are_fitted_on_the_other_folds(logs):
    X, action, reward, row_id = logs["data"]
    model = fit_reward_model(logs[1], FitSettings(lam=1.5, folds=3, seed=2, rtol=1e-7, model="logistic"))
    fold = fold_of(row_id, 3, 2)
    for j in range(3):
        for a in range(K):
            rows = (fold != j) & (action == a)
            assert_is_sklearn_solution(model.fold_coef[j][:, a], model.fold_intercept[j][a], X[rows], reward[rows], 1.5)
    p = model.predict(X, row_id=row_id)
    for j in range(3):
        rows = fold == j
        expected = expit(np.asarray(X[rows] @ model.fold_coef[j]) + model.fold_intercept[j])
        np.testing.assert_array_equal(p[rows], expected)


@pytest.mark.slow
def test_one_and_many_parts_and_spilled_or_in_memory_parts_agree(logs):
    X, *_ = logs["data"]
    one = fit_reward_model(logs[1], FitSettings(lam=2.0, folds=2, rtol=1e-7))
    many = fit_reward_model(logs[5], FitSettings(lam=2.0, folds=2, rtol=1e-7))
    in_memory = fit_reward_model(logs[5], FitSettings(lam=2.0, folds=2, rtol=1e-7, spill="memory"))
    np.testing.assert_allclose(one.predict(X), many.predict(X), atol=1e-6)
    for name in ("coef", "intercept", "fold_coef", "fold_intercept"):
        np.testing.assert_array_equal(getattr(in_memory, name), getattr(many, name))


@pytest.mark.slow
def test_lambda_auto_picks_the_least_out_of_fold_log_loss(logs):
    model = fit_reward_model(logs[5], FitSettings(folds=2, lam_grid=(0.1, 1.0, 10.0, 100.0)))
    search = model.metadata["lambda_search"]
    fitted = [sum(v) for v in search["out_of_fold_log_loss"] if v is not None]
    assert len(fitted) >= 2 and model.metadata["lam"] == search["grid"][search["chosen"]]
    assert sum(search["out_of_fold_log_loss"][search["chosen"]]) == min(fitted)


def test_rewards_other_than_0_1_default_to_ridge_and_refuse_logistic(logs, tmp_path, capsys):
    model = fit_reward_model(logs["continuous"], FitSettings(lam=1.0))
    assert type(model) is LinearRewardModel and model.metadata["model"] == "ridge"
    with pytest.raises(ParameterError, match="model logistic needs rewards 0 or 1"):
        fit_reward_model(logs["continuous"], FitSettings(lam=1.0, model="logistic"))
    out = tmp_path / "m.npz"
    argv = ["fit", logs["continuous"], "--out", str(out), "--model", "logistic", "--lam", "1", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--model logistic needs rewards 0 or 1" in err[0] and "use --model ridge" in err[0]
    assert not out.exists()


@pytest.mark.slow
def test_the_command_prints_the_choice_and_evaluate_reads_the_file(logs, tmp_path, capsys):
    out = str(tmp_path / "m.npz")
    assert main(["fit", logs[5], "--out", out, "--folds", "2", "--lam", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("model: logistic (every reward is 0 or 1)") and "L-BFGS passes" in printed
    model = LinearRewardModel.load(out)
    assert isinstance(model, LogisticRewardModel) and model.folds == 2
    LinearRewardModel(model.coef, model.intercept).save(str(tmp_path / "r.npz"))
    with pytest.raises(ParameterFileError, match="holds a linear .ridge. reward model, not a logistic reward model"):
        LogisticRewardModel.load(str(tmp_path / "r.npz"))
    assert main(["evaluate", logs[5], "--policy", "uniform", "--reward-model", out]) == 0
    assert "DR" in capsys.readouterr().out
    assert main(["fit", logs[5], "--out", out, "--model", "ridge", "--lam", "1"]) == 0
    assert capsys.readouterr().out.startswith("model: ridge (--model)")
    assert type(LinearRewardModel.load(out)) is LinearRewardModel


def test_a_separable_log_keeps_finite_weights_and_says_so_naming_lambda(tmp_path):
    rng = np.random.default_rng(3)
    n = 600
    X = sp.csr_matrix((rng.random((n, 6)) < 0.5).astype(float))
    reward = np.asarray(X[:, 0].todense()).ravel()  # feature 0 decides the reward
    row_id = np.arange(n, dtype=np.int64)
    table = pa.table({"row_id": row_id, "features": csr_to_features(X), "action": np.zeros(n, np.int32),
                      "reward": reward, "propensity": np.full(n, 0.5)})
    write_log(table, str(tmp_path / "log"), n_features=6, n_actions=2)
    with pytest.warns(SeparatedRewardsWarning, match=r"separate the 0 and 1 rewards of action\(s\) 0 perfectly; "
                                                     r"the L2 penalty λ = 0.1 keeps their weights finite"):
        model = fit_reward_model(str(tmp_path / "log"), FitSettings(lam=0.1))
    assert np.isfinite(model.coef).all() and model.metadata["separated_actions"] == [0]
    p = model.predict(X)[:, 0]
    assert p[reward == 1].min() > 0.9 and p[reward == 0].max() < 0.1


@pytest.mark.slow
def test_an_action_never_logged_falls_back_to_the_pooled_rate_as_a_logit(tmp_path):
    table, X, action, reward, _ = make_log(unlogged=(1,))
    write_log(table, str(tmp_path / "log"), n_features=D, n_actions=K)
    with pytest.warns(UnloggedActionWarning, match=r"action\(s\) 1 never logged: ρ̂ for them is the pooled mean"):
        model = fit_reward_model(str(tmp_path / "log"), FitSettings(lam=1.0))
    n, s = np.bincount(action, minlength=K), np.bincount(action, weights=reward, minlength=K)
    expected = rate_prior(n, s, K).pooled[0]  # the prior's centre p̄ of the logged actions
    assert np.all(model.coef[:, 1] == 0)
    np.testing.assert_allclose(model.predict(X)[:, 1], expected, rtol=1e-12)


@pytest.mark.slow
def test_warnings_are_quiet_for_a_clean_log(logs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_reward_model(logs[5], FitSettings(lam=1.0, folds=2))


@pytest.mark.slow
def test_identical_locally_and_on_a_local_cluster(logs, local_cluster):
    from distributed import Client

    settings = FitSettings(folds=2, lam_grid=(1.0, 10.0))
    local = fit_reward_model(logs[5], settings)
    with Client(local_cluster, set_as_default=False) as client:
        remote = fit_reward_model(logs[5], settings, client=client)
    for name in ("coef", "intercept", "fold_coef", "fold_intercept"):
        np.testing.assert_array_equal(getattr(remote, name), getattr(local, name))
    assert remote.metadata == local.metadata
