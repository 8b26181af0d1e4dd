"""The shared model's feature map φ(x, a) = (x, f_a, x ⊗ f_a) on a part's rows, never formed: Φ v and Φᵀ u, and the
rows of one fold of a part grouped by (fold, action)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from dr_scale.crossfit.parts import GroupedPart

if TYPE_CHECKING:
    from dr_scale.reward.models import Features


def fold_rows(part: GroupedPart, f: int, k: int, d: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """(X, the logged actions, the rewards) of the part's rows in fold f (views of the part's arrays)."""
    lo, hi = int(part.start[f * k]), int(part.start[(f + 1) * k])
    return part.blocks(f * k, (f + 1) * k, d), part.action[lo:hi], part.reward[lo:hi]


def phi(X: Features, Fl: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Φ v for the rows' φ_i = (x_i, f_i, x_i ⊗ f_i) and v = (β_x, β_f, vec B): x·β_x + f·β_f + x·B·f.

    The dense products are numpy's own loops (``einsum``), not BLAS: a multithreaded BLAS may split a sum
    differently in this process and in a worker process, and a pass must give the same bits wherever it runs
    (the sparse products are scipy's, single-threaded)."""
    d, da = X.shape[1], Fl.shape[1]
    out: np.ndarray = (X @ v[:d] + np.einsum("na,a->n", Fl, v[d:d + da])
                       + np.einsum("nd,nd->n", np.asarray(X @ v[d + da:].reshape(d, da)), Fl))
    return out


def phi_t(X: Features, Fl: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Φᵀ u = (Xᵀu, Fᵀu, vec Xᵀ(F ∘ u)) without forming Φ (dense sums by ``einsum``, :func:`phi`)."""
    return np.concatenate([X.T @ u, np.einsum("na,n->a", Fl, u), np.asarray(X.T @ (Fl * u[:, None])).ravel()])
