"""Sparse features x as CSR matrices: a list<int> column's offsets are the CSR ``indptr`` and its flattened
values the ``indices`` (no Python loop over rows); binary features share one read-only array of ones."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from dr_scale.logs.contract import combined, numeric_values

_ONES: dict = {}
#: The largest shared array of ones (elements): a larger one, a whole big part's, is the matrix's own and goes with it.
SHARED_ONES = 1 << 22


def ones(n: int, dtype=np.float64) -> np.ndarray:
    """A read-only view of ``n`` ones of ``dtype``, shared up to :data:`SHARED_ONES` elements.

    The views come from shared arrays of 2^⌈log₂ n⌉ elements, so a view is never less
    than half its base: scipy's sparse constructors copy such smaller views (``prune``). Beyond
    :data:`SHARED_ONES` (a part of millions of entries, read once to be grouped and spilled by a fit)
    the array is not kept: held for the process's life, it would be 128 MiB of a fit's working set.
    """
    size = 1 << max(0, int(n - 1).bit_length())
    shared = _ONES.get((np.dtype(dtype), size))
    if shared is None:
        shared = np.ones(size, dtype=dtype)
        shared.setflags(write=False)
        if size <= SHARED_ONES:
            _ONES[np.dtype(dtype), size] = shared
    return shared[:n]


def compact_index(indptr: np.ndarray, indices: np.ndarray, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """``indptr`` and ``indices`` in one index type (int32 when it fits), as scipy wants them uncast."""
    dtype = np.int32 if max(n_cols, int(indptr[-1]) if indptr.size else 0) < np.iinfo(np.int32).max else np.int64
    return indptr.astype(dtype, copy=False), indices.astype(dtype, copy=False)


def binary_csr(indptr: np.ndarray, indices: np.ndarray, n_cols: int, dtype=np.float64) -> sp.csr_matrix:
    """A CSR matrix with all stored values 1 (of ``dtype``), sharing ``indptr`` and ``indices``.

    Its ``data`` is a read-only view of shared ones (:func:`ones`): binary features cost
    no value array per partition.
    """
    return sp.csr_matrix((ones(indices.shape[0], dtype), indices, indptr), shape=(indptr.shape[0] - 1, n_cols),
                         copy=False)


def feature_arrays(features: pa.Array, source: str = "<features>") -> tuple[np.ndarray, np.ndarray]:
    """(offsets from 0, flat indices) of a list<int> array: views of its buffers, no pandas."""
    offsets = numeric_values(features.offsets, source, "features")
    return offsets - offsets[0], numeric_values(pc.list_flatten(features), source, "features")


def features_to_csr(features: pa.ChunkedArray | pa.Array, n_features: int, values=None) -> sp.csr_matrix:
    """CSR matrix from a list<int> column (and optional list<float> values), no row loop.

    Without ``values`` the features are binary and the matrix's data is shared ones
    (:func:`binary_csr`, read-only).
    """
    return csr_from_lists(*feature_arrays(combined(features)), n_features, values)


def csr_from_lists(indptr, indices, n_features, values) -> sp.csr_matrix:
    """CSR from ``indptr`` (from 0) and flat ``indices``; data from the list<float> ``values``, or shared ones."""
    indptr, indices = compact_index(indptr, indices.astype(np.int32, copy=False), n_features)
    if values is None:
        return binary_csr(indptr, indices, n_features)
    data = pc.list_flatten(combined(values)).to_numpy(zero_copy_only=False).astype(np.float64)
    return sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1, n_features))


def csr_to_features(X: sp.csr_matrix) -> pa.Array:
    """list<int32> column of a CSR matrix's active indices (inverse of :func:`features_to_csr`)."""
    X = sp.csr_matrix(X)
    return pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)), pa.array(X.indices.astype(np.int32)))
