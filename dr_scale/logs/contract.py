"""The logged-data contract: Parquet partitions of (row_id, features, action, reward, propensity).

A logged data set is a Parquet file, a folder of part files, or a hive-partitioned
folder, at any fsspec URL. Columns:

=============  =====================  ==============================================
``row_id``     int64                  unique, stable id of the decision
``features``   list<int32>            indices of the active features (sparse x)
``values``     list<float32>          optional: the features' values (default 1)
``action``     integer                the logged action a ∈ [0, k)
``reward``     floating               the observed reward r
``propensity`` floating               the logging probability p̂(a|x) ∈ (0, 1]
=============  =====================  ==============================================

plus optional columns a target policy reads (``target_action``, ``target_probs``).
The Parquet schema metadata may carry ``dr_scale.n_features`` (d) and
``dr_scale.n_actions`` (k), which the reader uses for validation.

A partition becomes a scipy CSR matrix and numpy arrays without Python loops over
rows: the list column's offsets are the CSR ``indptr`` and its flattened values the
``indices``. Bad data raises :class:`LogDataError` naming the file, the column, the
reason and an example row id; writing validates first and then writes each part
atomically, so nothing is written on failure.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from dr_scale.io.atomic import MANIFEST, MARKER, atomic_open, incomplete_folder, url_to_fs
from dr_scale.core.errors import ParameterError, UserError

REQUIRED_COLUMNS = ("row_id", "features", "action", "reward", "propensity")
#: The smallest propensity accepted: a weight 1/p̂ above 10⁹ means one row stands for a
#: billion decisions, no estimate rests on it, and squares of such weights overflow sums.
MIN_PROPENSITY = 1e-9
#: How far a row of target probabilities may sum from 1 (obp: ``np.allclose`` defaults).
ROW_SUM_TOLERANCE = 1e-5
META_FEATURES = b"dr_scale.n_features"
META_ACTIONS = b"dr_scale.n_actions"


class LogDataError(UserError):
    """Bad logged data: the message names the file, the column, the reason and a row."""

    def __init__(self, source: str, column: str | None, reason: str, row_id=None):
        where = f"{source}: column '{column}'" if column else source
        example = f" (e.g. row_id={row_id})" if row_id is not None else ""
        super().__init__(f"{where}: {reason}{example}")
        self.source, self.column, self.reason, self.row_id = source, column, reason, row_id


@dataclass
class Partition:
    """One partition of a logged data set, as arrays."""

    source: str
    row_id: np.ndarray
    X: sp.csr_matrix | None
    action: np.ndarray
    reward: np.ndarray
    propensity: np.ndarray
    table: pa.Table  # all columns read, for what a target policy needs

    def __len__(self) -> int:
        return self.row_id.shape[0]


# -- listing -------------------------------------------------------------------
def _parquet_files(fs, folder: str) -> list[str]:
    return sorted(p for p in fs.find(folder) if p.endswith(".parquet"))


def list_parts(url: str, storage_options: dict | None = None) -> tuple[object, list[str]]:
    """The filesystem and the sorted Parquet part files under ``url`` (file, folder or glob).

    A glob may match folders too (``logs/date=2026-11-0[1-5]``): their Parquet files count.
    """
    fs, path = url_to_fs(url, storage_options)
    if any(ch in path for ch in "*?["):
        paths = [p for match in sorted(fs.glob(path))
                 for p in (_parquet_files(fs, match) if fs.isdir(match) else [match])]
    elif fs.isdir(path):
        if incomplete_folder(fs, path):
            raise LogDataError(url, None, f"incomplete: dr-scale began writing this folder ({MARKER}) and was "
                                          f"interrupted before its {MANIFEST}; write it again (generate … --overwrite)")
        paths = _parquet_files(fs, path)
    elif fs.exists(path):
        paths = [path]
    else:
        raise FileNotFoundError(f"{url}: no such file or folder")
    paths = [p for p in paths if not posixpath.basename(p).startswith((".", "_"))]
    if not paths:
        raise FileNotFoundError(f"{url}: no Parquet files found")
    return fs, paths


def log_metadata(fs, path: str) -> dict[str, int]:
    """``n_features`` and ``n_actions`` from a part file's schema metadata, where present."""
    try:
        with fs.open(path, "rb") as f:
            meta = pq.read_schema(f).metadata or {}
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file
        raise LogDataError(path, None, f"unreadable Parquet file ({exc})") from exc
    out = {}
    if META_FEATURES in meta:
        out["n_features"] = int(meta[META_FEATURES])
    if META_ACTIONS in meta:
        out["n_actions"] = int(meta[META_ACTIONS])
    return out


@dataclass(frozen=True)
class Footprint:
    """What the part files' footers tell without reading a row: rows, the largest feature id and
    action (Parquet column statistics; None where a writer left them out) and the dr_scale metadata."""

    rows: int
    max_feature: int | None
    max_action: int | None
    metadata: dict


def log_footprint(url: str, storage_options: dict | None = None) -> Footprint:
    """The :class:`Footprint` of the log at ``url``, from its part files' footers (no data read)."""
    fs, paths = list_parts(url, storage_options)
    rows, maxima, meta = 0, {"features": [], "action": []}, {}
    for i, path in enumerate(paths):
        try:
            with fs.open(path, "rb") as f:
                footer = pq.ParquetFile(f).metadata
        except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file
            raise LogDataError(path, None, f"unreadable Parquet file ({exc})") from exc
        if i == 0:
            raw = footer.metadata or {}
            meta = {name: int(raw[key]) for key, name in ((META_FEATURES, "n_features"), (META_ACTIONS, "n_actions"))
                    if key in raw}
        rows += footer.num_rows
        for g in range(footer.num_row_groups):
            group = footer.row_group(g)
            for c in range(group.num_columns):
                column = group.column(c)
                name = {"features.list.element": "features", "features.list.item": "features",
                        "action": "action"}.get(column.path_in_schema)
                stats = column.statistics
                if name and stats is not None and stats.has_min_max and isinstance(stats.max, int):
                    maxima[name].append(stats.max)
                elif name and group.num_rows:
                    maxima[name].append(None)
    top = {k: (None if not v or None in v else max(v)) for k, v in maxima.items()}
    return Footprint(rows, top["features"], top["action"], meta)


# -- sparse features -----------------------------------------------------------
_ONES: dict = {}


def combined(array: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One Arrow array of a column: its only chunk as is (``combine_chunks`` would copy it)."""
    if not isinstance(array, pa.ChunkedArray):
        return array
    return array.chunk(0) if array.num_chunks == 1 else array.combine_chunks()


def ones(n: int, dtype=np.float64) -> np.ndarray:
    """A read-only view of ``n`` ones of ``dtype``, shared.

    The views come from shared arrays of 2^⌈log₂ n⌉ elements, so a view is never less
    than half its base: scipy's sparse constructors copy such smaller views (``prune``).
    """
    size = 1 << max(0, int(n - 1).bit_length())
    shared = _ONES.get((np.dtype(dtype), size))
    if shared is None:
        shared = np.ones(size, dtype=dtype)
        shared.setflags(write=False)
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
    return _csr(*feature_arrays(combined(features)), n_features, values)


def _csr(indptr, indices, n_features, values) -> sp.csr_matrix:
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


# -- validation ------------------------------------------------------------------
def _first_bad(mask: np.ndarray, row_id: np.ndarray):
    bad = np.flatnonzero(mask)
    return (int(row_id[bad[0]]) if row_id is not None and row_id.size else int(bad[0])) if bad.size else None


def first_null(array) -> int:
    """Position of the first null of an Arrow array or column."""
    return int(pc.index(pc.is_null(array), True).as_py())


def _check_type(table: pa.Table, source: str, column: str, predicate, expected: str) -> None:
    if column not in table.column_names:
        raise LogDataError(source, column, "missing column")
    typ = table.schema.field(column).type
    if not predicate(typ):
        raise LogDataError(source, column, f"wrong type {typ}, expected {expected}")
    if table.column(column).null_count:
        row_id = table.column("row_id").to_numpy() if "row_id" in table.column_names else None
        first = first_null(table.column(column))
        raise LogDataError(source, column, "null values", int(row_id[first]) if row_id is not None else first)


def numeric_values(array, source: str, column: str, row_id=None) -> np.ndarray:
    """A numeric Arrow array (or column) without nulls as a NumPy view of its data buffer.

    pyarrow's ``to_numpy`` imports pandas on first use, with the reading threads
    waiting; reading the buffer does not. A null is an error naming
    the row (when ``row_id`` is given).
    """
    array = combined(array)
    if not _is_number(array.type):
        raise LogDataError(source, column, f"expected numbers, found {array.type}")
    if array.null_count:
        raise LogDataError(source, column, "null values", None if row_id is None else int(row_id[first_null(array)]))
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def check_feature_indices(source: str, flat: np.ndarray, offsets: np.ndarray, n_features: int | None, row_id,
                          limit: int | None = None) -> None:
    """Every active feature index in [0, ``limit``) (default ``n_features``), else an error naming its row."""
    limit = n_features if limit is None else limit
    if flat.size and (flat.min() < 0 or flat.max() >= limit):  # two reductions, no temporaries, when all is well
        first = np.flatnonzero((flat < 0) | (flat >= limit))[0]
        row = np.searchsorted(offsets - offsets[0], first, side="right") - 1
        raise LogDataError(source, "features", f"feature index out of range [0, {n_features})", int(row_id[row]))


def _check_list_nulls(array: pa.Array, source: str, column: str, row_id: np.ndarray) -> None:
    """A null inside a list (``[1, null]``) is an error naming the row (null lists are checked by type)."""
    flat = pc.list_flatten(array)
    if flat.null_count:
        offsets = array.offsets.to_numpy() - array.offsets[0].as_py()
        row = np.searchsorted(offsets, first_null(flat), side="right") - 1
        raise LogDataError(source, column, "null inside a list", int(row_id[row]))


# -- the rules, stated once (the estimators' array checks and the policies use them) --------------
#: The words of the two propensity rules (:func:`propensity_fault`).
OUTSIDE_UNIT = "outside (0, 1]"
BELOW_FLOOR = f"below the floor {MIN_PROPENSITY:g} (a weight above {1 / MIN_PROPENSITY:g})"


def propensity_fault(p: np.ndarray) -> tuple[np.ndarray, str] | None:
    """The first propensity rule ``p`` breaks, as (mask of the rows breaking it, the rule's words), else None.

    p̂ ∈ (0, 1] (:data:`OUTSIDE_UNIT`), then p̂ ≥ :data:`MIN_PROPENSITY` (:data:`BELOW_FLOOR`).
    """
    bad = ~((p > 0) & (p <= 1))
    if bad.any():
        return bad, OUTSIDE_UNIT
    bad = p < MIN_PROPENSITY
    return (bad, BELOW_FLOOR) if bad.any() else None


def not_probabilities(p: np.ndarray) -> np.ndarray:
    """The entries of ``p`` that are not finite numbers ≥ 0 (a mask of ``p``'s shape)."""
    return ~(p >= 0) | ~np.isfinite(p)


def row_sums_off(sums: np.ndarray) -> np.ndarray:
    """The rows whose sums (of probabilities) are further than :data:`ROW_SUM_TOLERANCE` from 1."""
    return np.abs(sums - 1) > ROW_SUM_TOLERANCE


def row_sums(p: np.ndarray) -> np.ndarray:
    """Σ_a p[i, a], by one BLAS mat-vec (faster than a strided ``sum(axis=1)``)."""
    return p @ np.ones(p.shape[1])


def _is_int_list(t) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type)


def _is_float_list(t) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_floating(t.value_type)


def _is_number(t) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def partition_from_table(
    table: pa.Table,
    source: str,
    n_features: int | None = None,
    n_actions: int | None = None,
    with_features: bool = True,
) -> Partition:
    """Validate a table against the contract and convert it to a :class:`Partition`."""
    _check_type(table, source, "row_id", pa.types.is_integer, "int64")
    _check_type(table, source, "action", pa.types.is_integer, "an integer type")
    _check_type(table, source, "reward", _is_number, "a numeric type")
    _check_type(table, source, "propensity", pa.types.is_floating, "a floating type")
    row_id = numeric_values(table.column("row_id"), source, "row_id").astype(np.int64, copy=False)
    action = numeric_values(table.column("action"), source, "action").astype(np.int64, copy=False)
    reward = numeric_values(table.column("reward"), source, "reward").astype(np.float64, copy=False)
    propensity = numeric_values(table.column("propensity"), source, "propensity").astype(np.float64, copy=False)

    if row_id.size > 1 and not (row_id[1:] > row_id[:-1]).all():  # ids in increasing order need no sort
        ordered = np.sort(row_id)
        dup = np.flatnonzero(ordered[1:] == ordered[:-1])
        if dup.size:
            raise LogDataError(source, "row_id", "duplicate row id within the partition", int(ordered[dup[0]]))
    fault = propensity_fault(propensity)
    if fault is not None:
        bad, rule = fault
        fix = "; fix the logging probabilities" if rule is BELOW_FLOOR else ""
        raise LogDataError(source, "propensity", f"propensity {rule}{fix}", _first_bad(bad, row_id))
    bad = _first_bad(~np.isfinite(reward), row_id)
    if bad is not None:
        raise LogDataError(source, "reward", "NaN or infinite reward", bad)
    bad = _first_bad((action < 0) | (action >= (n_actions if n_actions is not None else np.iinfo(np.int64).max)), row_id)
    if bad is not None:
        raise LogDataError(source, "action", f"action out of range [0, {n_actions})", bad)

    X = None
    if with_features:
        _check_type(table, source, "features", _is_int_list, "list<int32>")
        features = combined(table.column("features"))
        _check_list_nulls(features, source, "features", row_id)
        indptr, flat = feature_arrays(features, source)
        check_feature_indices(source, flat, indptr, n_features, row_id,
                              n_features if n_features is not None else np.iinfo(np.int32).max)
        values = None
        if "values" in table.column_names:
            _check_type(table, source, "values", _is_float_list, "list<float32>")
            values = combined(table.column("values"))
            _check_list_nulls(values, source, "values", row_id)
            flat_values = pc.list_flatten(values).to_numpy(zero_copy_only=False)
            if not np.isfinite(flat_values).all():
                offsets = values.offsets.to_numpy() - values.offsets[0].as_py()
                row = np.searchsorted(offsets, np.flatnonzero(~np.isfinite(flat_values))[0], side="right") - 1
                raise LogDataError(source, "values", "NaN or infinite feature value", int(row_id[row]))
            lengths_differ = pc.not_equal(pc.list_value_length(values), pc.list_value_length(features))
            mismatch = lengths_differ.to_numpy(zero_copy_only=False)
            if mismatch.any():
                raise LogDataError(source, "values", "list length differs from 'features'", _first_bad(mismatch, row_id))
        d = n_features if n_features is not None else (int(flat.max()) + 1 if flat.size else 0)
        X = _csr(indptr, flat, d, values)
    return Partition(source, row_id, X, action, reward, propensity, table)


# -- reading -----------------------------------------------------------------
def read_table(fs, path: str, columns: list[str] | None = None, optional: tuple[str, ...] = ()) -> pa.Table:
    """Read one Parquet part: ``columns`` (all if None) plus those of ``optional`` present.

    An unreadable file or a missing column is a :class:`LogDataError`.
    """
    try:
        with fs.open(path, "rb") as f:
            pf = pq.ParquetFile(f)
            if columns is None:
                return pf.read()
            present = set(pf.schema_arrow.names)
            missing = [c for c in columns if c not in present]
            if missing:
                raise LogDataError(path, missing[0], "missing column")
            return pf.read(columns=list(columns) + [c for c in optional if c in present and c not in columns])
    except LogDataError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file
        raise LogDataError(path, None, f"unreadable Parquet file ({type(exc).__name__}: {exc})") from exc


def read_partition(
    fs,
    path: str,
    *,
    n_features: int | None = None,
    n_actions: int | None = None,
    with_features: bool = True,
    extra_columns: tuple[str, ...] = (),
) -> Partition:
    """Read and validate one part file of a logged data set."""
    columns = [c for c in REQUIRED_COLUMNS if with_features or c != "features"]
    columns += [c for c in extra_columns if c not in columns]
    table = read_table(fs, path, columns, optional=("values",) if with_features else ())
    return partition_from_table(table, path, n_features, n_actions, with_features)


def read_log(url: str, storage_options: dict | None = None, **kwargs) -> list[Partition]:
    """All partitions of a (small) logged data set, in memory. For big logs use Dask.

    ``kwargs`` are :func:`read_partition`'s: ``n_features``, ``n_actions``, ``with_features``
    and ``extra_columns`` (a list of names, e.g. ``["target_action"]``).
    """
    unknown = sorted(set(kwargs) - {"n_features", "n_actions", "with_features", "extra_columns"})
    if unknown:
        raise ParameterError(f"read_log has no parameter {unknown[0]!r}; it takes storage_options, n_features, "
                             "n_actions, with_features and extra_columns")
    if isinstance(kwargs.get("extra_columns"), str):
        raise ParameterError(f"`extra_columns` must be a list of column names, got the str "
                             f"{kwargs['extra_columns']!r} (write [{kwargs['extra_columns']!r}])")
    fs, paths = list_parts(url, storage_options)
    return [read_partition(fs, p, **kwargs) for p in paths]


# -- writing -----------------------------------------------------------------
def with_log_metadata(table: pa.Table, n_features: int | None, n_actions: int | None) -> pa.Table:
    meta = dict(table.schema.metadata or {})
    if n_features is not None:
        meta[META_FEATURES] = str(int(n_features)).encode()
    if n_actions is not None:
        meta[META_ACTIONS] = str(int(n_actions)).encode()
    return table.replace_schema_metadata(meta)


def write_parquet(table: pa.Table, url: str, storage_options: dict | None = None, fs=None) -> str:
    """Write one Parquet file atomically (temporary name, then rename)."""
    if fs is None:
        fs, url = url_to_fs(url, storage_options)
    with atomic_open(fs, url, "wb") as f:
        pq.write_table(table, f, compression="zstd")
    return url


def write_log(
    table: pa.Table,
    url: str,
    *,
    n_parts: int = 1,
    n_features: int | None = None,
    n_actions: int | None = None,
    storage_options: dict | None = None,
) -> list[str]:
    """Validate ``table`` against the whole contract and write it as a logged data set.

    ``url`` ending in ``.parquet`` gives one file; otherwise a folder of ``n_parts``
    part files ``part-00000.parquet`` … of near-equal, non-zero row counts
    (1 ≤ ``n_parts`` ≤ rows). Everything is validated before anything is written: the
    required columns (``features`` included), the optional ``values``, and the target
    policy columns ``target_action`` (integers in [0, k)) and ``target_probs`` (k
    probabilities per row summing to 1) when present. Each part is written atomically;
    docs/data-contract.md says what a crash part-way leaves.
    """
    if not isinstance(table, pa.Table):
        hint = (" (convert a pandas DataFrame with pyarrow.Table.from_pandas(df, preserve_index=False))"
                if type(table).__name__ == "DataFrame" else "")
        raise ParameterError(f"`table` must be a pyarrow.Table, got {type(table).__name__}{hint}")
    if table.num_rows == 0:
        raise LogDataError(url, None, "no rows to write")
    if isinstance(n_parts, bool) or not isinstance(n_parts, (int, np.integer)) or not 1 <= n_parts <= table.num_rows:
        raise UserError(f"{url}: n_parts = {n_parts!r}: give an integer from 1 to the number of rows "
                        f"({table.num_rows}), so that no part is empty")
    for name, value in (("n_features", n_features), ("n_actions", n_actions)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
            raise UserError(f"{url}: {name} = {value!r}: give a positive integer (or None)")
    part = partition_from_table(table, url, n_features, n_actions, with_features=True)
    check_target_columns(part, n_actions)
    table = with_log_metadata(table, n_features, n_actions)
    fs, path = url_to_fs(url, storage_options)
    if path.endswith(".parquet"):
        if n_parts != 1:
            raise UserError(f"{url}: a .parquet file holds one part; give a folder for n_parts = {n_parts}")
        return [write_parquet(table, path, fs=fs)]
    bounds = np.linspace(0, table.num_rows, n_parts + 1).astype(int)
    written = []
    for i in range(n_parts):
        piece = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        written.append(write_parquet(piece, posixpath.join(path, f"part-{i:05d}.parquet"), fs=fs))
    return written


# -- target-policy columns ---------------------------------------------------------
def check_target_actions(actions: np.ndarray, k: int, source: str, column: str, row_id: np.ndarray) -> np.ndarray:
    """``actions`` (a target policy's, one per row) in [0, k), else an error naming the row."""
    if actions.size and (actions.min() < 0 or actions.max() >= k):
        bad = np.flatnonzero((actions < 0) | (actions >= k))
        raise LogDataError(source, column, f"target action out of range [0, {k})", int(row_id[bad[0]]))
    return actions


def check_distributions(probs: np.ndarray, source: str, column: str, row_id: np.ndarray) -> np.ndarray:
    """Rows of (n, k) ``probs`` that are probability vectors: finite, ≥ 0, summing to 1 within
    :data:`ROW_SUM_TOLERANCE`; else an error naming the first row that is not."""
    bad = not_probabilities(probs).any(axis=1) | row_sums_off(row_sums(probs))
    if bad.any():
        raise LogDataError(source, column, "target probabilities are not a distribution", _first_bad(bad, row_id))
    return probs


def target_actions(part: Partition, column: str, k: int) -> np.ndarray:
    """The integer column ``column`` of target actions, each in [0, k)."""
    array = part.table.column(column)
    if not pa.types.is_integer(array.type):
        raise LogDataError(part.source, column, f"wrong type {array.type}: column: policies read integer "
                                                "actions (use probs:NAME for a list of probabilities)")
    actions = numeric_values(array, part.source, column, part.row_id).astype(np.int64, copy=False)
    return check_target_actions(actions, k, part.source, column, part.row_id)


def probability_lists(part: Partition, column: str) -> pa.Array:
    """The list<float> (or list<int>) column ``column``, without nulls, as one Arrow array."""
    col = combined(part.table.column(column))
    if not ((pa.types.is_list(col.type) or pa.types.is_large_list(col.type))
            and (pa.types.is_floating(col.type.value_type) or pa.types.is_integer(col.type.value_type))):
        raise LogDataError(part.source, column, f"wrong type {col.type}: probs: policies read a list<float> "
                                                "of k probabilities per row")
    flat = pc.list_flatten(col)
    if col.null_count or flat.null_count:
        row = first_null(col) if col.null_count else int(
            np.searchsorted(col.offsets.to_numpy() - col.offsets[0].as_py(), first_null(flat), side="right") - 1)
        raise LogDataError(part.source, column, "null values", int(part.row_id[row]))
    return col


def first_list_length(part: Partition, column: str) -> int:
    """The length of the first row's list in ``column`` (k, when nothing else tells it)."""
    col = probability_lists(part, column)
    return int(pc.list_value_length(col)[0].as_py()) if len(col) else 1


def target_probabilities(part: Partition, column: str, k: int) -> np.ndarray:
    """The (n, k) target probabilities of the list column ``column``: k per row, each row a distribution."""
    col = probability_lists(part, column)
    lengths = pc.list_value_length(col).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(lengths != k)
    if bad.size:
        raise LogDataError(part.source, column, f"expected {k} probabilities per row", int(part.row_id[bad[0]]))
    probs = pc.list_flatten(col).to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, k)
    return check_distributions(probs, part.source, column, part.row_id)


def check_target_columns(part: Partition, n_actions: int | None) -> None:
    """``target_action`` / ``target_probs``, where present: a target policy's valid decisions."""
    if "target_action" in part.table.column_names:
        target_actions(part, "target_action", n_actions or np.iinfo(np.int64).max)
    if "target_probs" in part.table.column_names:
        target_probabilities(part, "target_probs", n_actions or first_list_length(part, "target_probs"))
