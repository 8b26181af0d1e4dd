"""The first principal component of the features, out of core (paper, Sec. 5.2).

x̄ is the leading eigenvector of the covariance of the rows x_i,

    C = (1/N) Σ_i (x_i − μ)(x_i − μ)ᵀ = (1/N) XᵀX − μ μᵀ,    μ = (1/N) Σ_i x_i,

found by the Lanczos iteration (:func:`dr_scale.outofcore.lanczos.leading_eigenpair`) whose matrix-vector product
is one map-reduce pass, Σ_parts X_pᵀ (X_p v); the centring is applied to the summed
product (−μ(μ·v)), so the N × d centred matrix is never formed and XᵀX (about 91% dense
per part, and slow to form) never is either.

The iteration starts from the leading eigenvector of a keyed sample's covariance: the
first pass collects, with the column sums, the ``START_ROWS`` rows with the smallest
keyed draws u(row_id) (a bottom-k sample, the same for any partitioning), whose
component is computed in memory. From that start the Lanczos iteration needs 11 more
passes at the paper's size (docs/visits.md).

Sign convention: x̄ is scaled to unit length with Σ_j x̄_j > 0, so the projection
t_i = x_i·x̄ grows with the breadth of a user's (popular) features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.logs.sparse import binary_csr
from dr_scale.outofcore.lanczos import leading_eigenpair, orient
from dr_scale.outofcore.passes import PartSet
from dr_scale.outofcore.progress import Passes

#: Rows of the keyed sample whose principal component starts the Lanczos iteration.
START_ROWS = 20_000


@dataclass
class Component:
    vector: np.ndarray  # x̄, unit length, Σ x̄ > 0
    variance: float  # its eigenvalue: the variance of t along x̄
    mean: np.ndarray  # μ, the column means
    n: int
    passes: int


@dataclass
class RowSample:
    """The ``size`` rows with the smallest keyed draws u(row_id), in the order of u (a bottom-k sample).

    ``a + b`` is the sample of the union of a's and b's rows, so the sample of all rows
    tree-reduces like a sum and is the same for any partitioning.
    """

    size: int
    keys: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    n_features: int

    @classmethod
    def of(cls, size: int, keys: np.ndarray, X: sp.csr_matrix) -> RowSample:
        """The ``size`` rows of X with the smallest keys, sorted by key: a sample that merges to the same rows in any
        order."""
        rows = np.arange(keys.shape[0]) if keys.shape[0] <= size else np.argpartition(keys, size - 1)[:size]
        rows = rows[np.argsort(keys[rows], kind="stable")]  # only the kept rows are sorted
        X = X[rows]
        return cls(size, keys[rows], X.indptr, X.indices, X.shape[1])

    @property
    def X(self) -> sp.csr_matrix:
        """The sampled rows as a binary CSR matrix."""
        return binary_csr(self.indptr, self.indices, self.n_features)

    def __add__(self, other: RowSample) -> RowSample:
        return RowSample.of(self.size, np.concatenate([self.keys, other.keys]),
                                  sp.vstack([self.X, other.X], format="csr"))


@dataclass
class FirstPass:
    """Column sums Σ x_i, row count n and keyed sample of some rows (merge with ``+``): μ = Σ x_i / n and
    the Lanczos start."""

    column_sums: np.ndarray
    n: int
    sample: RowSample

    @classmethod
    def of(cls, part, sample_size: int) -> FirstPass:
        """One part's column sums, row count and keyed row sample (the first pass of the principal component)."""
        X = part.X
        keys = keyed_random.uniform(part.row_id, 0, "principal-component-start")
        return cls(np.asarray(X.sum(axis=0)).ravel(), len(part), RowSample.of(sample_size, keys, X))

    def __add__(self, other: FirstPass) -> FirstPass:
        return FirstPass(self.column_sums + other.column_sums, self.n + other.n, self.sample + other.sample)


def _gram_matvec(part, v):
    X = part.X
    return X.T @ (X @ v)


def _covariance_matvec(gram, mu: np.ndarray, n: int):
    """v ↦ C v = (1/n) Xᵀ(X v) − μ(μ·v), with ``gram(v)`` = Xᵀ(X v) in memory or as a pass over the parts."""

    def matvec(v):
        """C v = XᵀX v / n − μ (μ·v): the covariance times v, without forming C."""
        v = np.asarray(v, dtype=np.float64).ravel()
        return gram(v) / n - mu * (mu @ v)
    return matvec


def first_component(parts: PartSet, *, tol: float = 1e-11, progress: bool = False) -> Component:
    """x̄ of the rows held by ``parts`` (one pass for μ and the start, then one pass per Lanczos step)."""
    first = parts.sum(FirstPass.of, START_ROWS)
    n, sample = first.n, first.sample
    mu = first.column_sums / n
    d = mu.shape[0]
    Xs = sample.X
    sample_mu = np.asarray(Xs.mean(axis=0)).ravel()
    _, start = leading_eigenpair(_covariance_matvec(lambda v: _gram_matvec(sample, v), sample_mu, Xs.shape[0]),
                                 np.full(d, 1.0 / np.sqrt(d)), tol)
    with Passes("principal component: Lanczos", progress) as passes:
        def gram(v):
            """XᵀX v over every part: one pass."""
            total = parts.sum(_gram_matvec, v)
            passes.step()
            return total

        value, vector = leading_eigenpair(_covariance_matvec(gram, mu, n), start, tol)
    return Component(orient(vector), value, mu, int(n), passes.count + 1)
