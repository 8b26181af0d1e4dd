"""The L-BFGS logistic solver (dr_scale.outofcore.glm) in memory against scikit-learn's LogisticRegression(C=1/λ).

Both solve to their own tolerance; the distance allowed is the stopping rule's ‖x̂ − x*‖ ≤ ‖∇L(x̂)‖ / μ,
μ the Hessian's least eigenvalue (2×: its change along the segment), which holds on any CPU whatever the
last digits of ∇L.

The tolerance asked of the solver is one every CPU reaches: near the optimum an Armijo step decreases the
per-row loss L/n by about ‖∇(L/n)‖² / (2μ/n), which at ``RTOL`` = 1e-6 here is ~1e-12, far above the rounding of
the loss's sum (~1e-16); at 1e-8 the decrease is of the rounding's order, and on some BLAS kernels the line
search stalls there (3.5e-8 after 1,000 passes with OpenBLAS's Haswell kernels, 2e-10 after 42 with its
SkylakeX ones).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import softmax

from dr_scale.outofcore import glm

#: The relative gradient the solver is asked for (module docstring: reached on any CPU).
RTOL = 1e-6


def data(n=2000, d=15, seed=1):
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix((rng.random((n, d)) < np.linspace(0.4, 0.02, d)).astype(float))
    return rng, X


def test_binary_fit_is_sklearns():
    from sklearn.linear_model import LogisticRegression

    rng, X = data()
    y = (rng.random(X.shape[0]) < 1 / (1 + np.exp(-(X @ rng.normal(size=X.shape[1]) - 1)))).astype(float)
    lam = 1.5
    fit = glm.fit_binary_in_memory(X, y, lam, rtol=RTOL)
    sk = LogisticRegression(C=1 / lam, tol=1e-12, max_iter=10_000).fit(X, y)
    A = np.column_stack([X.toarray(), np.ones(X.shape[0])])

    def gradient(x):
        return A.T @ (1 / (1 + np.exp(-A @ x)) - y) + lam * np.r_[x[:-1], 0.0]

    # the stopping rule's guarantee: ‖∇L(x̂)‖ ≤ rtol · ‖∇L(x₀)‖, x₀ = (0, logit ȳ)
    x0 = np.r_[np.zeros(X.shape[1]), np.log(y.mean() / (1 - y.mean()))]
    assert fit.converged.all() and fit.relative_gradient[0] <= RTOL
    assert np.linalg.norm(gradient(fit.x[0])) <= RTOL * np.linalg.norm(gradient(x0)) * (1 + 1e-6)
    x_sk = np.r_[sk.coef_[0], sk.intercept_]
    p = 1 / (1 + np.exp(-A @ x_sk))
    mu = np.linalg.eigvalsh((A * (p * (1 - p))[:, None]).T @ A + lam * np.diag(np.r_[np.ones(X.shape[1]), 0.0]))[0]
    bound = 2 * (np.linalg.norm(gradient(fit.x[0])) + np.linalg.norm(gradient(x_sk))) / mu
    assert np.linalg.norm(fit.x[0] - x_sk) <= bound < 1e-4


def test_multinomial_fit_is_sklearns_up_to_the_softmax_constant():
    from sklearn.linear_model import LogisticRegression

    rng, X = data(seed=2)
    k, lam = 4, 2.0
    a = np.array([rng.choice(k, p=p) for p in softmax(np.asarray(X @ rng.normal(size=(X.shape[1], k))), axis=1)])
    fit = glm.fit_multinomial_in_memory(X, a, k, lam, rtol=1e-9)
    sk = LogisticRegression(C=1 / lam, tol=1e-12, max_iter=10_000).fit(X, a)
    d = X.shape[1]
    W, b = fit.x[0, :d * k].reshape(d, k), fit.x[0, d * k:]
    np.testing.assert_allclose(W, sk.coef_.T, atol=1e-6)  # the penalty centres W's rows: no constant to remove
    np.testing.assert_allclose(b - b.mean(), sk.intercept_ - sk.intercept_.mean(), atol=1e-6)


def test_fits_in_lockstep_are_the_fits_one_by_one():
    rng, X = data(seed=3)
    ys = [(rng.random(X.shape[0]) < p).astype(float) for p in (0.1, 0.5)]
    alone = [glm.fit_binary_in_memory(X, y, 1.0, rtol=1e-8).x[0] for y in ys]
    d = X.shape[1]

    def evaluate(x, active):
        loss, grad = np.zeros(2), np.zeros((2, d + 1))
        for F, y in enumerate(ys):
            if active[F]:
                glm.add_binary_terms(loss, grad, X, y, x[F, :d], x[F, d], F)
        return glm.penalised(loss, grad, x, 1.0, np.full(2, float(X.shape[0])), np.r_[np.ones(d, bool), False])

    x0 = np.zeros((2, d + 1))
    x0[:, d] = [glm.logit(y.mean()) for y in ys]
    together = glm.minimize(evaluate, x0, rtol=1e-8, max_iter=1000)
    np.testing.assert_allclose(together.x, np.stack(alone), rtol=1e-6, atol=1e-9)  # sums over 1 or 2 rows' order


def test_a_problem_too_large_for_the_history_budget_keeps_fewer_pairs_and_reaches_the_same_minimiser(monkeypatch):
    """Fewer pairs (s, y) change the path, not the minimiser: with the budget cut to three pairs' bytes the fits
    reach the point MEMORY pairs reach, each within ‖∇L(x)‖ / μ of the minimiser (μ = λ/n, the strong convexity
    of the penalised mean loss in w; the intercept's curvature p̄(1 − p̄) is larger), ‖∇L(x)‖ ≤ rtol ‖∇L(x₀)‖."""
    rng, X = data(seed=5)
    ys = [(rng.random(X.shape[0]) < p).astype(float) for p in (0.2, 0.6)]
    n, d, rtol = X.shape[0], X.shape[1], 1e-7

    def evaluate(x, active):
        loss, grad = np.zeros(2), np.zeros((2, d + 1))
        for F, y in enumerate(ys):
            if active[F]:
                glm.add_binary_terms(loss, grad, X, y, x[F, :d], x[F, d], F)
        return glm.penalised(loss, grad, x, 1.0, np.full(2, float(n)), np.r_[np.ones(d, bool), False])

    def start():
        x0 = np.zeros((2, d + 1))
        x0[:, d] = [glm.logit(y.mean()) for y in ys]
        return x0

    g0 = np.linalg.norm(evaluate(start(), np.ones(2, bool))[1], axis=1)
    assert glm.history_pairs(2 * (d + 1), np.float64) == glm.MEMORY
    wide = glm.minimize(evaluate, start(), rtol=rtol, max_iter=1000)
    monkeypatch.setattr(glm, "HISTORY_BYTES", 3 * 2 * 2 * (d + 1) * 8)
    assert glm.history_pairs(2 * (d + 1), np.float64) == 3
    narrow = glm.minimize(evaluate, start(), rtol=rtol, max_iter=1000)
    assert narrow.converged.all() and wide.converged.all() and narrow.passes > wide.passes
    bound = 2 * rtol * g0 / (1.0 / n)  # each within rtol g0 / μ of the minimiser
    assert np.all(np.linalg.norm(narrow.x - wide.x, axis=1) <= bound)
    assert np.linalg.norm(narrow.x - wide.x) > 0  # a different path


def test_the_solvers_working_set_is_three_float64_and_two_float32_arrays_beside_the_history_and_the_pass():
    """The working set minimize's docstring states, measured by tracemalloc on F·D = 800,000 coordinates: during a
    pass, the point, the gradient and the trial point (float64), the direction and the preconditioner (float32),
    the float32 history's 2·m arrays and the pass's own gradient — not the previous pass's gradient beside it."""
    import tracemalloc

    F, D, m = 4, 200_000, 3
    rng = np.random.default_rng(0)
    centre, scale = rng.normal(size=(F, D)), rng.uniform(0.5, 2.0, size=(F, D))
    peaks = []

    def evaluate(x, active):
        """½ Σ c (x − a)² per fit and its gradient (one new array); records the traced memory of the pass."""
        grad = np.subtract(x, centre)
        grad *= scale
        peaks.append(tracemalloc.get_traced_memory()[0])
        return 0.5 * np.einsum("fd,fd->f", grad, x - centre), grad

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fit = glm.minimize(evaluate, np.zeros((F, D)), rtol=1e-3, max_iter=30, memory=m,
                           curvature=np.ones((F, D), np.float32))
    finally:
        tracemalloc.stop()
    assert fit.passes >= 4 and fit.converged.all()
    per_coordinate = 3 * 8 + 2 * 4 + 2 * m * 4 + 8  # + the pass's gradient; x0 and curvature are taken over
    small = F * D + 2 * D * 8 + 2 ** 20  # the mask of free coordinates, the last pair (s, y) in float64, 1 MiB
    assert max(peaks) - before <= per_coordinate * F * D + small
