"""Sparse products that add into an existing array (the summing passes' running sums)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

try:  # the compiled kernels behind scipy's ``A.T @ y`` and ``A.T @ Y``; they add into the output array they are given
    from scipy.sparse._sparsetools import csc_matvec as _csc_matvec
    from scipy.sparse._sparsetools import csc_matvecs as _csc_matvecs
except ImportError:  # private to scipy: should a release move them, the public product serves
    _csc_matvec = _csc_matvecs = None


def add_transposed_product(out: np.ndarray, A: sp.csr_matrix, y: np.ndarray) -> np.ndarray:
    """out += Aᵀ y, in place; returns ``out``.

    The public ``A.T @ y`` returns a new array — in the visits experiment's ridge passes a fresh 24 MB
    (F·d float64) array per part and pass, faulted in and zeroed by the kernel, then added
    into the task's sum. scipy's own kernel (``scipy.sparse._sparsetools.csc_matvec``,
    private) adds into ``out`` directly, with no array to allocate, zero and add. Where that
    kernel is missing, or the types do not match it exactly, the public product is used.
    """
    if (_csc_matvec is None or not out.flags.c_contiguous or A.dtype != out.dtype or y.dtype != out.dtype
            or A.indices.dtype != A.indptr.dtype):
        out += A.T @ y
    else:
        _csc_matvec(A.shape[1], A.shape[0], A.indptr, A.indices, A.data, np.ascontiguousarray(y), out)
    return out


def add_transposed_products(out: np.ndarray, A: sp.csr_matrix, Y: np.ndarray) -> np.ndarray:
    """out += Aᵀ Y for Y (n, F) and out (d, F), in place; returns ``out`` (:func:`add_transposed_product`
    for F vectors at once: one traversal of A's indices for all F)."""
    if (_csc_matvecs is None or not out.flags.c_contiguous or A.dtype != out.dtype or Y.dtype != out.dtype
            or A.indices.dtype != A.indptr.dtype):
        out += A.T @ Y
    else:
        _csc_matvecs(A.shape[1], A.shape[0], Y.shape[1], A.indptr, A.indices, A.data, np.ascontiguousarray(Y).ravel(),
                     out.ravel())
    return out
