"""The shared model on the pass engine: cross-fitted fold models, λ auto, the logistic form — each against
scikit-learn on the explicit φ(x, a) = (x, f_a, x ⊗ f_a) matrix of the rows it was fitted on."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale.crossfit.parts import fold_of
from dr_scale.crossfit.settings import FitSettings
from dr_scale.logs.contract import Partition
from dr_scale.reward.shared import (
    SharedLogisticRewardModel,
    SharedRidgeRewardModel,
    fit_shared_on_parts,
    in_memory_parts,
)


def _world(seed, n=1500, d=6, k=40, da=3, binary=False):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.5, format="csr", random_state=seed)
    F = rng.standard_normal((k, da))
    a = rng.integers(0, k, n)
    z = 0.2 + X @ rng.standard_normal(d) + F[a] @ rng.standard_normal(da) + np.einsum(
        "nd,nd->n", np.asarray(X @ rng.standard_normal((d, da))), F[a])
    r = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(float) if binary else z + rng.normal(0, 0.3, n)
    row_id = np.arange(n) * 7 + 3
    bounds = np.linspace(0, n, 4).astype(int)
    parts = [Partition("<p>", row_id[lo:hi], X[lo:hi], a[lo:hi], r[lo:hi], np.full(hi - lo, 1 / k), pa.table({}))
             for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    Xd = X.toarray()
    phi = np.hstack([Xd, F[a], (Xd[:, :, None] * F[a][:, None, :]).reshape(n, -1)])
    return parts, X, F, a, r, row_id, phi


def _fit(parts, F, d, folds, **settings):
    held, rows = in_memory_parts(parts, F.shape[0], folds, seed=5)
    return fit_shared_on_parts(held, rows, d, F, FitSettings(folds=folds, seed=5, spill="memory", **settings))


@pytest.mark.slow
def test_fold_models_are_sklearn_ridge_on_the_other_folds_and_predict_by_row_id():
    from sklearn.linear_model import Ridge

    parts, X, F, a, r, row_id, phi = _world(0)
    model = _fit(parts, F, X.shape[1], 3, lam=3.0, rtol=1e-12, model="ridge")
    assert isinstance(model, SharedRidgeRewardModel) and model.folds == 3
    fold = fold_of(row_id, 3, 5)
    for j in range(3):
        train = fold != j
        ref = Ridge(alpha=3.0, solver="cholesky").fit(phi[train], r[train])
        np.testing.assert_allclose(model.fold_theta[j], np.r_[ref.intercept_, ref.coef_], rtol=1e-7, atol=1e-9)
    full = Ridge(alpha=3.0, solver="cholesky").fit(phi, r)
    np.testing.assert_allclose(model.theta(), np.r_[full.intercept_, full.coef_], rtol=1e-7, atol=1e-9)
    # row i by the fold model that did not see it; without row ids, the full-data model
    crossed = model.predict(X, row_id=row_id)[np.arange(len(r)), a]
    expected = np.array([model._fold(f).predict(X[i])[0, a[i]] for i, f in enumerate(fold)])
    np.testing.assert_allclose(crossed, expected, rtol=1e-12)
    assert not np.allclose(crossed, model.predict(X)[np.arange(len(r)), a])
    pairs = np.random.default_rng(1).integers(0, F.shape[0], (len(r), 3))
    np.testing.assert_allclose(model.predict_pairs(X, pairs, row_id=row_id),
                               np.take_along_axis(model.predict(X, row_id=row_id), pairs, axis=1),
                               rtol=1e-12, atol=1e-14)


@pytest.mark.slow
def test_lambda_auto_picks_the_least_out_of_fold_error_of_the_grid():
    parts, X, F, a, r, row_id, phi = _world(2)
    grid = (0.1, 10.0, 1000.0)
    model = _fit(parts, F, X.shape[1], 2, lam="auto", lam_grid=grid, rtol=1e-10, model="ridge")
    search = model.metadata["lambda_search"]
    fold = fold_of(row_id, 2, 5)
    errors = []
    for lam in grid:  # the out-of-fold squared error, recomputed by direct solves
        total = 0.0
        for j in range(2):
            train = fold != j
            A = np.column_stack([np.ones(train.sum()), phi[train]])
            theta = np.linalg.solve(A.T @ A + lam * np.diag(np.r_[0.0, np.ones(phi.shape[1])]), A.T @ r[train])
            total += np.sum((r[~train] - np.column_stack([np.ones((~train).sum()), phi[~train]]) @ theta) ** 2)
        errors.append(total)
    fitted = [e for e in search["out_of_fold_sse"] if e is not None]
    assert model.metadata["lam"] == grid[int(np.argmin(errors))]
    for got, want in zip(search["out_of_fold_sse"], errors):
        if got is not None:
            assert sum(got) == pytest.approx(want, rel=1e-7)
    assert fitted


@pytest.mark.slow
def test_logistic_is_sklearns_on_the_explicit_features():
    from sklearn.linear_model import LogisticRegression

    parts, X, F, a, r, row_id, phi = _world(3, binary=True)
    lam = 2.0
    model = _fit(parts, F, X.shape[1], None, lam=lam, rtol=1e-8)
    assert isinstance(model, SharedLogisticRewardModel)
    assert model.metadata["model_chosen_by"] == "every reward is 0 or 1"
    sk = LogisticRegression(C=1 / lam, tol=1e-12, max_iter=10_000).fit(phi, r)
    A = np.column_stack([phi, np.ones(len(r))])
    penalty = np.r_[np.ones(phi.shape[1]), 0.0]

    def gradient(x):
        return A.T @ (1 / (1 + np.exp(-A @ x)) - r) + lam * penalty * x

    ours = np.r_[model.theta()[1:], model.theta()[0]]
    x_sk = np.r_[sk.coef_[0], sk.intercept_]
    p = 1 / (1 + np.exp(-A @ x_sk))
    mu = np.linalg.eigvalsh((A * (p * (1 - p))[:, None]).T @ A + lam * np.diag(penalty))[0]
    bound = 2 * (np.linalg.norm(gradient(ours)) + np.linalg.norm(gradient(x_sk))) / mu
    assert np.linalg.norm(ours - x_sk) <= bound < 1e-3
    predicted = model.predict(X)
    assert predicted.min() > 0 and predicted.max() < 1
    np.testing.assert_allclose(predicted[np.arange(len(r)), a], sk.predict_proba(phi)[:, 1], atol=bound * 10)


def test_logistic_refused_for_other_rewards_and_the_file_round_trips(tmp_path):
    from dr_scale.core.errors import ParameterError
    from dr_scale.reward.files import load_reward_model

    parts, X, F, a, r, row_id, phi = _world(4)
    with pytest.raises(ParameterError, match="model logistic needs rewards 0 or 1"):
        _fit(parts, F, X.shape[1], None, lam=1.0, model="logistic")
    parts, X, F, a, r, row_id, phi = _world(4, binary=True)
    model = _fit(parts, F, X.shape[1], 2, lam=1.0)
    model.save(str(tmp_path / "m.npz"))
    again = load_reward_model(str(tmp_path / "m.npz"))
    assert type(again) is SharedLogisticRewardModel and again.folds == 2
    np.testing.assert_array_equal(again.predict(X, row_id=row_id), model.predict(X, row_id=row_id))
