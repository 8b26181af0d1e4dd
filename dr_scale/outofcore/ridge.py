"""Ridge regression ρ̂(x) = b + w·x with an unpenalized intercept, many fits at once.

For a fit on rows S with n = |S| rows, column sums s_x = Σ_S x_i, s_y = Σ_S y_i,
X_Sᵀy and the Gram product G(P) = X_SᵀX_S P, the estimate

    (w, b) = argmin Σ_S (y_i − b − x_i·w)² + λ ‖w‖²

is the solution of the centred normal equations (μ = s_x/n, ȳ = s_y/n)

    (X_SᵀX_S − n μ μᵀ + λ I) w = X_Sᵀy − μ s_y,        b = ȳ − μ·w,

solved here by conjugate gradients with the Jacobi preconditioner
diag(X_SᵀX_S) − n μ² + λ, for F independent fits at once (one row of each (F, d)
array per fit). Each iteration needs one G(P) for all fits together, which the caller
computes as a map-reduce pass over the data (:mod:`dr_scale.outofcore.passes`) or in
memory; the centring is applied to G's result, so X is never densified. CG rather than
forming X_SᵀX_S: in the visits experiment a 5000 × 5000 Gram per fit is ~91% dense,
slow to form and to factor, and there are 600 fits (see docs/visits.md for the
measurements).

A fit with n = 0 rows has no data: w = 0, b = 0 (ρ̂ ≡ 0, so DR reduces to IPS there);
with n = 1, w = 0 and b = y. λ > 0 keeps every fit well-posed, however small.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dr_scale.core.errors import ParameterError
from dr_scale.outofcore.passes import Held
from dr_scale.outofcore.progress import Passes


def _rowdot(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Row-wise dot products Σ_j A_fj B_fj."""
    return np.einsum("fd,fd->f", A, B)


@dataclass
class RidgeStats(Held):
    """Sufficient statistics of F fits: counts (F,), Σx (F,d), diag Σx² (F,d), Σy (F,), Xᵀy (F,d)."""

    n: np.ndarray
    sx: np.ndarray
    sxx_diag: np.ndarray
    sy: np.ndarray
    xy: np.ndarray


@dataclass
class RidgeFit:
    coef: np.ndarray  # (F, d)
    intercept: np.ndarray  # (F,)
    iterations: int
    converged: np.ndarray  # (F,) bool


def fit(gram: Callable[[np.ndarray], np.ndarray], stats: RidgeStats, lam: float | np.ndarray, *,
        rtol: float = 1e-10, max_iter: int = 1000, progress: bool = False) -> RidgeFit:
    """Solve the F ridge problems; ``gram(P)`` returns X_SᵀX_S P row-wise for P of shape (F, d).

    ``lam``: one λ for every fit, or an (F,) array of one λ per fit (a grid of penalties
    fitted in the same passes).
    """
    lam = np.asarray(lam, dtype=np.float64)
    if not np.all(lam > 0):
        raise ParameterError(f"the ridge penalty λ (`lam`) must be positive, got {lam}")
    if lam.ndim:
        lam = lam[:, None]
    n = np.asarray(stats.n, dtype=np.float64)
    safe_n = np.where(n > 0, n, 1.0)[:, None]
    mu = stats.sx / safe_n
    ybar = stats.sy / safe_n[:, 0]

    R = stats.xy - mu * stats.sy[:, None]  # the residual of W = 0: the right-hand side
    target = rtol * np.sqrt(_rowdot(R, R))
    inv_diag = 1.0 / (stats.sxx_diag - n[:, None] * mu * mu + lam)
    W = np.zeros_like(R)
    P = inv_diag * R
    scratch = np.empty_like(R)  # the (F, d) updates run in place: no fresh 24 MB arrays per iteration
    rz = _rowdot(R, P)
    active = np.sqrt(_rowdot(R, R)) > target
    it = 0
    passes = Passes(f"ridge: {active.size} fits by conjugate gradients", progress)
    while active.any() and it < max_iter:
        it += 1
        Q = gram(P)  # then Q = (X_SᵀX_S − n μμᵀ + λI) P
        Q -= np.multiply(mu, (n * _rowdot(mu, P))[:, None], out=scratch)
        Q += np.multiply(P, lam, out=scratch)
        alpha = np.where(active, rz / np.where(active, _rowdot(P, Q), 1.0), 0.0)
        W += np.multiply(P, alpha[:, None], out=scratch)
        R -= np.multiply(Q, alpha[:, None], out=scratch)
        active &= np.sqrt(_rowdot(R, R)) > target
        Z = np.multiply(inv_diag, R, out=scratch)  # the preconditioned residual
        rz_new = _rowdot(R, Z)
        beta = np.where(active, rz_new / np.where(rz != 0, rz, 1.0), 0.0)
        P *= beta[:, None]
        P += Z
        P[~active] = 0.0
        rz = rz_new
        passes.step(f"{int(active.sum())} of {active.size} fits not yet converged")
    passes.close()
    intercept = np.where(n > 0, ybar - _rowdot(mu, W), 0.0)
    return RidgeFit(W, intercept, it, ~active)


def in_memory_stats(X, y) -> RidgeStats:
    """Statistics of one fit on in-memory rows (X sparse or dense, y)."""
    X2 = X.multiply(X) if hasattr(X, "multiply") else X * X
    return RidgeStats(np.array([X.shape[0]]), np.asarray(X.sum(axis=0)).reshape(1, -1),
                      np.asarray(X2.sum(axis=0)).reshape(1, -1), np.array([float(np.sum(y))]),
                      np.asarray(X.T @ y).reshape(1, -1))


def fit_in_memory(X, y, lam: float, **kwargs) -> RidgeFit:
    """One ridge fit on in-memory rows, through the same solver."""
    return fit(lambda P: (X.T @ (X @ P.T)).T, in_memory_stats(X, np.asarray(y, dtype=np.float64)), lam, **kwargs)
