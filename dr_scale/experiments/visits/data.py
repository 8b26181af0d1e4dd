"""Parts of a visits set as binary CSR blocks, read once and (optionally) kept in memory.

A part holds ``row_id``, the active feature indices as CSR ``indptr``/``indices``
(the list column's offsets and values, no per-row Python) and ``visits``. The
features are binary, so the CSR data array is a read-only view of one shared array of
ones: in memory a part costs 4 bytes per active feature, not 12.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dr_scale.logs.contract import LogDataError, check_feature_indices, combined, first_null, numeric_values
from dr_scale.logs.listing import list_parts, log_metadata
from dr_scale.logs.reading import read_table
from dr_scale.logs.sparse import binary_csr, compact_index, feature_arrays
from dr_scale.outofcore.passes import Held

COLUMNS = ["row_id", "features", "visits"]


@dataclass
class VisitsPart(Held):
    """One part: row ids, binary features (CSR arrays) and visit counts."""

    source: str
    row_id: np.ndarray  # int64
    indptr: np.ndarray  # n + 1 (int32 when it fits)
    indices: np.ndarray  # same type as indptr
    visits: np.ndarray  # float64
    n_features: int

    def __len__(self) -> int:
        return self.row_id.shape[0]

    @property
    def X(self) -> sp.csr_matrix:
        """The part's binary features as CSR (n, d): x_ij = 1 for each listed feature."""
        return binary_csr(self.indptr, self.indices, self.n_features)


def part_from_arrays(row_id, X: sp.csr_matrix, visits, source: str = "<memory>") -> VisitsPart:
    """A part from in-memory arrays (tests, benchmarks)."""
    X = sp.csr_matrix(X)
    return VisitsPart(source, np.asarray(row_id, dtype=np.int64), *compact_index(X.indptr, X.indices, X.shape[1]),
                      np.asarray(visits, dtype=np.float64), X.shape[1])


def read_visits_part(fs, path: str, n_features: int) -> VisitsPart:
    """Read and validate one part file (columns row_id, features, visits)."""
    table = read_table(fs, path, COLUMNS)
    row_id = numeric_values(table.column("row_id"), path, "row_id").astype(np.int64, copy=False)
    visits = numeric_values(table.column("visits"), path, "visits", row_id).astype(np.float64)
    bad = np.flatnonzero(~(np.isfinite(visits) & (visits >= 0)))
    if bad.size:
        raise LogDataError(path, "visits", "visits must be finite and non-negative", int(row_id[bad[0]]))
    features = combined(table.column("features"))
    if features.null_count:
        raise LogDataError(path, "features", "null feature lists", int(row_id[first_null(features)]))
    indptr, indices = feature_arrays(features, path)
    check_feature_indices(path, indices, indptr, n_features, row_id)
    return VisitsPart(path, row_id, *compact_index(indptr, indices.astype(np.int32, copy=False), n_features), visits,
                      n_features)


def visits_parts(url: str, storage_options: dict | None = None, n_features: int | None = None):
    """(filesystem, part paths, d) of the set at ``url``; d from the schema metadata unless given."""
    fs, paths = list_parts(url, storage_options)
    if n_features is None:
        n_features = log_metadata(fs, paths[0]).get("n_features")
        if n_features is None:
            raise LogDataError(paths[0], "features", "no dr_scale.n_features in the schema metadata; give n_features")
    return fs, paths, int(n_features)
