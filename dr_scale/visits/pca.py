"""The first principal component of the features, out of core (paper, Sec. 5.2).

x̄ is the leading eigenvector of the covariance of the rows x_i,

    C = (1/N) Σ_i (x_i − μ)(x_i − μ)ᵀ = (1/N) XᵀX − μ μᵀ,    μ = (1/N) Σ_i x_i,

found by Lanczos iteration (ARPACK's ``eigsh`` through a ``LinearOperator``) whose
matrix-vector product is one map-reduce pass, Σ_parts X_pᵀ (X_p v); the centring is
applied to the summed product (−μ(μ·v)), so the N × d centred matrix is never formed
and XᵀX (about 91% dense per part, and slow to form) never is either.

Sign convention: x̄ is scaled to unit length with Σ_j x̄_j > 0, so the projection
t_i = x_i·x̄ grows with the breadth of a user's (popular) features.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigsh

from dr_scale.visits.passes import PartSet


@dataclass
class Component:
    vector: np.ndarray  # x̄, unit length, Σ x̄ > 0
    variance: float  # its eigenvalue: the variance of t along x̄
    mean: np.ndarray  # μ, the column means
    n: int
    passes: int


def _column_sums(part):
    return np.asarray(part.X.sum(axis=0)).ravel(), len(part)


def _gram_matvec(part, v):
    X = part.X
    return X.T @ (X @ v)


def orient(v: np.ndarray) -> np.ndarray:
    """Unit vector with a positive sum (first non-zero entry positive if the sum is 0)."""
    v = v / np.linalg.norm(v)
    s = v.sum()
    if s == 0:
        s = v[np.flatnonzero(v)[0]]
    return v if s > 0 else -v


def first_component(parts: PartSet, *, tol: float = 1e-10, progress: bool = False) -> Component:
    """x̄ of the rows held by ``parts`` (one pass for μ, then one pass per Lanczos step)."""
    sums, n = parts.sum(_column_sums)
    mu = sums / n
    d = mu.shape[0]
    count = 0

    def matvec(v):
        nonlocal count
        count += 1
        if progress:
            print(f"\rprincipal component: Lanczos pass {count}", end="", file=sys.stderr, flush=True)
        v = np.asarray(v, dtype=np.float64).ravel()
        return parts.sum(_gram_matvec, v) / n - mu * (mu @ v)

    op = LinearOperator((d, d), matvec=matvec, dtype=np.float64)
    values, vectors = eigsh(op, k=1, which="LA", v0=np.full(d, 1.0 / np.sqrt(d)), tol=tol)
    if progress:
        print(file=sys.stderr)
    return Component(orient(vectors[:, 0]), float(values[0]), mu, int(n), count + 1)
