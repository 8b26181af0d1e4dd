"""The item scorer on the pass engine: with a cross-fitted shared ρ̂, its fit is scikit-learn's ridge on the explicit
n·k pairs (φ(x_i, a), Γ_a(x_i)), Γ imputed by the fold model that did not see row i."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from dr_scale.crossfit.parts import fold_of
from dr_scale.crossfit.settings import FitSettings
from dr_scale.learning.scorer import learn_item_scorer
from dr_scale.logs.contract import Partition
from dr_scale.reward.shared import fit_shared_on_parts, in_memory_parts


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
