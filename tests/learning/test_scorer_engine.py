"""The item scorer on the pass engine: with a cross-fitted shared ρ̂, its fit is scikit-learn's ridge on the explicit
n·k pairs (φ(x_i, a), Γ_a(x_i)), Γ imputed by the fold model that did not see row i."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale.crossfit.parts import fold_of
from dr_scale.crossfit.settings import FitSettings
from dr_scale.learning.scorer import learn_item_scorer
from dr_scale.logs.contract import Partition
from dr_scale.reward.shared import fit_shared_on_parts, in_memory_parts


@pytest.mark.slow
def test_dr_scorer_with_fold_models_is_ridge_on_the_explicit_pairs():
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(7)
    n, d, k, da = 240, 3, 8, 2
    X = sp.csr_matrix(rng.integers(0, 2, (n, d)).astype(float))
    F = rng.standard_normal((k, da))
    a = rng.integers(0, k, n)
    p = rng.uniform(0.05, 0.3, n)
    r = np.einsum("nd,nd->n", np.asarray(X @ rng.standard_normal((d, da))), F[a]) + rng.normal(0, 0.5, n)
    row_id = np.arange(n) + 100
    parts = [Partition("<p>", row_id[lo:lo + 80], X[lo:lo + 80], a[lo:lo + 80], r[lo:lo + 80], p[lo:lo + 80],
                       pa.table({})) for lo in (0, 80, 160)]
    held, rows = in_memory_parts(parts, k, 3, seed=2)
    model = fit_shared_on_parts(held, rows, d, F, FitSettings(lam=5.0, folds=3, seed=2, rtol=1e-12, model="ridge",
                                                              spill="memory"))
    lam = 7.0
    policy = learn_item_scorer(lambda: parts, F, d, method="dr", reward_model=model, lam=lam, tol=1e-12)

    rho = model.predict(X, row_id=row_id)  # (n, k): row i by fold model fold(row_id_i)
    assert not np.allclose(rho, model.predict(X))
    gamma = rho.copy()
    gamma[np.arange(n), a] += (r - rho[np.arange(n), a]) / p
    x = X.toarray()
    phi = np.array([np.concatenate([x[i], F[b], np.outer(x[i], F[b]).ravel()]) for i in range(n) for b in range(k)])
    ref = Ridge(alpha=lam, solver="cholesky").fit(phi, gamma.ravel())
    B = ref.coef_[d + da:].reshape(d, da)
    np.testing.assert_allclose(policy.coef, B, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(policy.item_bias, F @ ref.coef_[d:d + da], rtol=1e-7, atol=1e-9)
    assert policy.metadata["reward_model_folds"] == 3 and set(fold_of(row_id, 3, 2)) == {0, 1, 2}


@pytest.mark.slow
def test_a_scorer_over_a_few_of_many_hashed_features_is_sized_by_use(tmp_path):
    """Rows with 12 distinct feature ids scattered in d = 2^22: the scorer (and its ρ̂) are fitted over those 12,
    its coef is 12 × D_A, its file holds them, and its scores are the scorer's on the same rows with the features
    numbered 0 … 11 (the dense fit over only those columns) — to rounding."""
    from dr_scale.policies import ItemScorerPolicy

    rng = np.random.default_rng(3)
    n, m, k, da, d = 300, 12, 6, 3, 2 ** 22
    ids = np.sort(rng.choice(d, m, replace=False))
    compact = sp.csr_matrix(rng.integers(0, 2, (n, m)).astype(float))
    hashed = sp.csr_matrix((compact.data, ids[compact.indices], compact.indptr), shape=(n, d))
    F = rng.standard_normal((k, da))
    a = rng.integers(0, k, n)
    r = np.einsum("nd,nd->n", np.asarray(compact @ rng.standard_normal((m, da))), F[a]) + rng.normal(0, 0.3, n)

    def parts(X):
        return lambda: [Partition("<p>", np.arange(n), X, a, r, np.full(n, 1 / k), pa.table({}))]

    sized = learn_item_scorer(parts(hashed), F, d, lam=3.0, model_lam=2.0, tol=1e-13)
    reference = learn_item_scorer(parts(compact), F, m, lam=3.0, model_lam=2.0, tol=1e-13)
    np.testing.assert_array_equal(sized.features, ids)
    assert sized.coef.shape == (m, da) and sized.n_features == d and sized.metadata["used_features"] == m
    np.testing.assert_allclose(sized.scores(hashed), reference.scores(compact), rtol=0, atol=1e-10)
    sized.save(str(tmp_path / "p.npz"))
    assert (tmp_path / "p.npz").stat().st_size < 10_000  # d × D_A float64 would be 100 MB
    again = ItemScorerPolicy.load(str(tmp_path / "p.npz"))
    np.testing.assert_array_equal(again.scores(hashed), sized.scores(hashed))
    assert again.digest == sized.digest
