"""The logged-data contract: Parquet partitions of (row_id, features, action, reward, propensity).

A logged data set is a Parquet file, a folder of part files, or a hive-partitioned
folder, at any fsspec URL. Columns:

=============  =====================  ==============================================
``row_id``     int64                  unique, stable id of the decision
``features``   list<int32>            indices of the active features (sparse x)
``values``     list<float32>          optional: the features' values (default 1)
``action``     integer                the logged action a ∈ [0, k)
``reward``     floating               the observed reward r
``propensity`` floating               the logging probability p̂(a|x) ∈ (0, 1]; optional
=============  =====================  ==============================================

A log without ``propensity`` (the logging system never recorded its probabilities) is read
with NaN propensities and :attr:`Partition.has_propensity` false: the direct method needs
none, the estimators that weight by 1/p̂ need an estimated logging policy
(:mod:`dr_scale.propensity`, ``--estimate-propensity``; docs/propensities.md).

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

import abc
import hashlib
import posixpath
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.io.atomic import MANIFEST, MARKER, atomic_open, incomplete_folder, url_to_fs
from dr_scale.logs.filters import LogFilter, log_root, part_paths, partition_date, unpacked

REQUIRED_COLUMNS = ("row_id", "features", "action", "reward", "propensity")
#: The column a log may lack: the logging probabilities (estimated then from the log, docs/propensities.md).
PROPENSITY = "propensity"
#: The smallest propensity accepted: a weight 1/p̂ above 10⁹ means one row stands for a
#: billion decisions, no estimate rests on it, and squares of such weights overflow sums.
MIN_PROPENSITY = 1e-9
#: How far a row of target probabilities may sum from 1 (obp: ``np.allclose`` defaults).
ROW_SUM_TOLERANCE = 1e-5
META_FEATURES = b"dr_scale.n_features"
META_ACTIONS = b"dr_scale.n_actions"


class LogDataError(UserError):
    """Bad logged data: the message names the file, the column, the reason and a row.

    The message reads ``SOURCE: column 'COLUMN': REASON (e.g. row_id=ROW)``; the command line
    prints it as one line and exits with status 2. A :class:`~dr_scale.core.errors.UserError`,
    hence a ``ValueError``.

    Parameters
    ----------
    source : str
        The file (or other source) of the bad data.
    column : str or None
        The column at fault; None for the whole file (e.g. unreadable).
    reason : str
        What is wrong, e.g. ``"propensity outside (0, 1]"``.
    row_id : int, optional
        An example row's id.

    See Also
    --------
    read_log, write_log : Both raise it, naming the first bad row.

    Examples
    --------
    >>> error = LogDataError("logs/part-00000.parquet", "reward", "NaN or infinite reward", 12)
    >>> str(error)
    "logs/part-00000.parquet: column 'reward': NaN or infinite reward (e.g. row_id=12)"
    >>> error.column, error.row_id, isinstance(error, ValueError)
    ('reward', 12, True)

    ``write_log`` checks the whole table before writing anything:

    >>> import os, tempfile
    >>> import pyarrow as pa
    >>> from dr_scale import write_log
    >>> table = pa.table({"row_id": pa.array([7, 8], pa.int64()),
    ...                   "features": pa.array([[0, 3], [1]], pa.list_(pa.int32())),
    ...                   "action": [0, 1], "reward": [1.0, 0.0], "propensity": [0.5, 0.0]})  # row 8: p̂ = 0
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     try:
    ...         write_log(table, os.path.join(folder, "logs"))
    ...     except LogDataError as exc:
    ...         print(exc.column, exc.row_id, exc.reason, os.listdir(folder))
    propensity 8 propensity outside (0, 1] []
    """

    def __init__(self, source: str, column: str | None, reason: str, row_id=None):
        where = f"{source}: column '{column}'" if column else source
        example = f" (e.g. row_id={row_id})" if row_id is not None else ""
        super().__init__(f"{where}: {reason}{example}")
        self.source, self.column, self.reason, self.row_id = source, column, reason, row_id


@dataclass
class Partition:
    """One partition of a logged data set, as arrays: the rows (x_i, a_i, r_i, p̂_i) of one part file.

    What :func:`read_log` returns (one per part file) and what a :class:`~dr_scale.policies.Policy`
    decides on. ``len(part)`` is its number of rows n.

    Parameters
    ----------
    source : str
        Where the rows came from (the part file's path), for messages.
    row_id : numpy.ndarray of int64, shape (n,)
        The rows' unique, stable ids.
    X : scipy.sparse.csr_matrix or None, shape (n, d)
        The features x_i; None when read without them (``with_features=False``).
    action : numpy.ndarray of int64, shape (n,)
        The logged actions a_i ∈ [0, k).
    reward : numpy.ndarray of float64, shape (n,)
        The observed rewards r_i.
    propensity : numpy.ndarray of float64, shape (n,)
        The logging probabilities p̂(a_i|x_i) ∈ (0, 1]; NaN where the log has no propensity column
        (:attr:`has_propensity`).
    table : pyarrow.Table
        Every column read, for what a target policy needs (``target_action``, ``target_probs``).

    See Also
    --------
    read_log : Reads and validates a log's partitions.
    dr_scale.evaluate_partitions : Evaluates a policy on partitions.

    Examples
    --------
    >>> from dr_scale import read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()  # the bundled example: a week, one part file a day
    >>> parts = read_log(logs)
    >>> len(parts), len(parts[0]), parts[0].X.shape
    (7, 2000, (2000, 50))
    >>> parts[0].source
    '...date=2026-11-01/part-00000.parquet'
    >>> parts[0].action[:5].tolist(), parts[0].propensity.dtype
    ([1, 0, 0, 2, 1], dtype('float64'))
    """

    source: str
    row_id: np.ndarray
    X: sp.csr_matrix | None
    action: np.ndarray
    reward: np.ndarray
    propensity: np.ndarray
    table: pa.Table  # all columns read, for what a target policy needs

    def __len__(self) -> int:
        return self.row_id.shape[0]

    @property
    def has_propensity(self) -> bool:
        """Whether the log recorded the logging probabilities (its ``propensity`` column)."""
        return PROPENSITY in self.table.column_names


# -- listing -------------------------------------------------------------------
class ListedLog(abc.ABC):
    """A log whose part files are listed, and whose footers, schema, vocabulary and catalogue are read, once
    (:class:`dr_scale.logs.opened.OpenedLog`): the functions below that take a log's URL return its cached
    facts when given one."""

    @abc.abstractmethod
    def listing(self) -> tuple[object, list]:
        """(the filesystem, the part files as :func:`list_parts` returns them)."""

    @property
    @abc.abstractmethod
    def metadata(self) -> dict[str, int]:
        """:func:`log_metadata` of the first part."""

    @property
    @abc.abstractmethod
    def has_propensity(self) -> bool:
        """:func:`has_propensity` of the first part."""

    @property
    @abc.abstractmethod
    def footprint(self) -> Footprint:
        """:func:`log_footprint`."""

    @property
    @abc.abstractmethod
    def vocabulary(self) -> list | None:
        """:func:`action_vocabulary`."""

    @property
    @abc.abstractmethod
    def catalogue(self) -> Catalogue | None:
        """:func:`read_catalogue`."""


def _parquet_files(fs, folder: str) -> list[str]:
    return sorted(p for p in fs.find(folder) if p.endswith(".parquet"))


def list_parts(url, storage_options: dict | None = None,
               log_filter: LogFilter | None = None) -> tuple[object, list]:
    """The filesystem and the sorted Parquet part files under ``url`` (file, folder or glob).

    A glob may match folders too (``logs/date=2026-11-0[1-5]``): their Parquet files count.
    ``log_filter`` keeps the parts of its days; with a split, each part is a
    :class:`~dr_scale.logs.filters.PartFile` carrying the filter, so that :func:`read_partition` keeps the
    split's rows. An opened log (:class:`ListedLog`) gives its listing, made once, with its own filter.
    """
    if isinstance(url, ListedLog):
        if log_filter is not None:
            raise ParameterError("`log_filter`: an opened log carries its own filter (open_log(url, log_filter=…))")
        return url.listing()
    if log_filter is not None and not isinstance(log_filter, LogFilter):
        raise ParameterError(f"`log_filter` must be a LogFilter, got {type(log_filter).__name__}")
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
        others = [p for p in (fs.find(path) if fs.isdir(path) else []) if not posixpath.basename(p).startswith(".")]
        if others:
            raise LogDataError(url, None, f"no Parquet files found, only {len(others)} other file(s) such as "
                                          f"{posixpath.basename(others[0])}; {IMPORT_HINT}")
        raise FileNotFoundError(f"{url}: no Parquet files found")
    return fs, part_paths(url, paths, log_filter)


#: What to do with a table that is not in the contract.
IMPORT_HINT = ("a raw table becomes a log with `dr-scale import RAW --spec SPEC.toml --out LOGS` "
               "(dr_scale.import_log, dr_scale.from_pandas; docs/import.md)")


def _not_parquet(fs, path: str) -> str | None:
    """What a file that is not Parquet looks like (``"CSV or text"``, ``"JSON"``, ``"gzip-compressed"``…), else None."""
    try:
        with fs.open(path, "rb") as f:
            head = f.read(512)
    except Exception:  # noqa: BLE001 - unreadable: the caller's own error says so
        return None
    if head[:4] == b"PAR1":
        return None
    if head[:2] == b"\x1f\x8b":
        return "a gzip-compressed file"
    text = head.lstrip()
    if text[:1] in (b"{", b"["):
        return "JSON"
    if head and all(32 <= b < 127 or b in (9, 10, 13) or b >= 128 for b in head):
        return "CSV or text"
    return "not Parquet" if head else "an empty file"


def _unreadable(fs, path: str, exc: Exception) -> LogDataError:
    kind = _not_parquet(fs, path)
    if kind is not None:
        return LogDataError(path, None, f"not a Parquet log file (it looks like {kind}); {IMPORT_HINT}")
    return LogDataError(path, None, f"unreadable Parquet file ({type(exc).__name__}: {exc})")


def log_metadata(fs, path=None) -> dict[str, int]:
    """``n_features`` and ``n_actions`` from a part file's schema metadata, where present; of an opened log
    (:class:`ListedLog`, given alone), its first part's, read once."""
    if isinstance(fs, ListedLog):
        return fs.metadata
    return schema_facts(read_footer(fs, path))[0]


def has_propensity(fs, path=None) -> bool:
    """Whether the part file at ``path`` has the ``propensity`` column (the logging probabilities were logged);
    true also for a file that lacks other columns of the contract, which the reader refuses for those. Of an
    opened log (:class:`ListedLog`, given alone), its first part's, read once."""
    if isinstance(fs, ListedLog):
        return fs.has_propensity
    return schema_facts(read_footer(fs, path))[1]


def read_footer(fs, path) -> pq.FileMetaData:
    """The Parquet footer of the part file at ``path`` (one read of the file's tail, no data); an unreadable
    file is a :class:`LogDataError` naming it."""
    path = str(path)
    try:
        with fs.open(path, "rb") as f:
            return pq.ParquetFile(f).metadata
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file
        raise _unreadable(fs, path, exc) from exc


def schema_facts(footer: pq.FileMetaData) -> tuple[dict[str, int], bool]:
    """(``n_features`` and ``n_actions`` of the dr_scale schema metadata where present, whether the file has
    the ``propensity`` column or is not a log of the contract at all) of a part file's footer."""
    meta, names = footer.metadata or {}, footer.schema.to_arrow_schema().names
    out = {}
    if META_FEATURES in meta:
        out["n_features"] = int(meta[META_FEATURES])
    if META_ACTIONS in meta:
        out["n_actions"] = int(meta[META_ACTIONS])
    return out, PROPENSITY in names or not {"row_id", "action", "reward"} <= set(names)


#: The file at a log's root describing how it was imported; its ``actions`` list is the action
#: vocabulary: the value of action id a is ``actions[a]``.
SPEC_FILE = "_dr_scale_spec.json"


def action_vocabulary(url, storage_options: dict | None = None) -> list | None:
    """The action values of the log at ``url`` in id order (``action.values`` of :data:`SPEC_FILE` at the
    log's root, :func:`~dr_scale.logs.filters.log_root`, as ``dr-scale import`` writes it), or None when the
    log has no vocabulary; of an opened log (:class:`ListedLog`), read once.

    A vocabulary that is not a list of distinct values is a :class:`LogDataError` naming the file.
    """
    import json

    if isinstance(url, ListedLog):
        return url.vocabulary
    fs, path = url_to_fs(url, storage_options)
    root = log_root(path)
    if fs.isfile(root):  # one part file, or a file that is no log (the reader says so)
        root = posixpath.dirname(root)
    spec_path = posixpath.join(root, SPEC_FILE)
    try:
        with fs.open(spec_path, "rb") as f:
            document = json.load(f)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        raise LogDataError(spec_path, None, f"unreadable JSON ({exc})") from None
    action = document.get("action") if isinstance(document, dict) else None
    actions = action.get("values") if isinstance(action, dict) else None
    if actions is None:
        return None
    if not isinstance(actions, list) or not actions:
        raise LogDataError(spec_path, None, "'action.values' must be a non-empty list of the action values in id order")
    names = [str(a) for a in actions]
    if len(set(names)) != len(names):
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise LogDataError(spec_path, None, f"'action.values' names {dup!r} twice")
    return actions


@dataclass(frozen=True)
class Footprint:
    """What the part files' footers tell without reading a row: rows, the largest feature id and
    action (Parquet column statistics; None where a writer left them out) and the dr_scale metadata."""

    rows: int
    max_feature: int | None
    max_action: int | None
    metadata: dict


def log_footprint(url, storage_options: dict | None = None) -> Footprint:
    """The :class:`Footprint` of the log at ``url``, from its part files' footers (no data read); of an opened
    log (:class:`ListedLog`), its footers read once."""
    if isinstance(url, ListedLog):
        return url.footprint
    fs, paths = list_parts(url, storage_options)
    return footprint_of([read_footer(fs, p) for p in paths])


def footprint_of(footers: list[pq.FileMetaData]) -> Footprint:
    """The :class:`Footprint` of the part files of these footers (the metadata: the first part's)."""
    rows, maxima = 0, {"features": [], "action": []}
    meta = schema_facts(footers[0])[0] if footers else {}
    for footer in footers:
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
        row_id = table.column("row_id").to_numpy() if column != "row_id" and "row_id" in table.column_names else None
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
    log_filter: LogFilter | None = None,
) -> Partition:
    """Validate a table against the contract and convert it to a :class:`Partition`.

    ``log_filter`` (else the one a :class:`~dr_scale.logs.filters.PartFile` ``source`` carries) keeps the rows
    of its split (:mod:`dr_scale.logs.filters`), and of its days by the table's ``date`` column where it has
    one, before the rows are validated.
    """
    source, log_filter = unpacked(source, log_filter)
    if log_filter:
        table = filter_table(table, source, log_filter)
    _check_type(table, source, "row_id", pa.types.is_integer, "int64")
    _check_type(table, source, "action", pa.types.is_integer, "an integer type")
    _check_type(table, source, "reward", _is_number, "a numeric type")
    logged_p = PROPENSITY in table.column_names
    if logged_p:
        _check_type(table, source, "propensity", pa.types.is_floating, "a floating type")
    row_id = numeric_values(table.column("row_id"), source, "row_id").astype(np.int64, copy=False)
    action = numeric_values(table.column("action"), source, "action").astype(np.int64, copy=False)
    reward = numeric_values(table.column("reward"), source, "reward").astype(np.float64, copy=False)
    propensity = (numeric_values(table.column("propensity"), source, "propensity").astype(np.float64, copy=False)
                  if logged_p else np.full(row_id.shape[0], np.nan))

    if row_id.size > 1 and not (row_id[1:] > row_id[:-1]).all():  # ids in increasing order need no sort
        ordered = np.sort(row_id)
        dup = np.flatnonzero(ordered[1:] == ordered[:-1])
        if dup.size:
            raise LogDataError(source, "row_id", "duplicate row id within the partition", int(ordered[dup[0]]))
    fault = propensity_fault(propensity) if logged_p else None
    if fault is not None:
        bad, rule = fault
        fix = "; fix the logging probabilities" if rule is BELOW_FLOOR else ""
        raise LogDataError(source, "propensity", f"propensity {rule}{fix}", _first_bad(bad, row_id))
    bad = _first_bad(~np.isfinite(reward), row_id)
    if bad is not None:
        raise LogDataError(source, "reward", "NaN or infinite reward", bad)
    k = n_actions if n_actions is not None else np.iinfo(np.int64).max
    bad = _first_bad((action < 0) | (action >= k), row_id)
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
                raise LogDataError(source, "values", "list length differs from 'features'",
                                   _first_bad(mismatch, row_id))
        d = n_features if n_features is not None else (int(flat.max()) + 1 if flat.size else 0)
        X = _csr(indptr, flat, d, values)
    return Partition(source, row_id, X, action, reward, propensity, table)


# -- filtering ------------------------------------------------------------------
def filter_table(table: pa.Table, source: str, log_filter: LogFilter) -> pa.Table:
    """The rows of ``table`` that ``log_filter`` keeps: its split's (by ``row_id``), its days' (by a
    ``date`` column, for a table that is not a date partition's file)."""
    if log_filter.days is not None and partition_date(source) is None:
        if "date" not in table.column_names:
            raise ParameterError(f"`days` {log_filter.days} needs date partitions (date=YYYY-MM-DD/…) or a 'date' "
                                 f"column; {source} has neither")
        day = pc.utf8_slice_codeunits(pc.cast(table.column("date"), pa.string()), 0, 10)  # ISO days sort as text
        keep = pc.is_valid(day)
        if log_filter.days.first is not None:
            keep = pc.and_(keep, pc.greater_equal(day, log_filter.days.first.isoformat()))
        if log_filter.days.last is not None:
            keep = pc.and_(keep, pc.less_equal(day, log_filter.days.last.isoformat()))
        table = table.filter(pc.fill_null(keep, False))
    if log_filter.split is not None:
        if "row_id" not in table.column_names:
            raise LogDataError(source, "row_id", f"missing column: the {log_filter.split} split is keyed by "
                                                 "each row's row_id")
        _check_type(table, source, "row_id", pa.types.is_integer, "int64")
        row_id = numeric_values(table.column("row_id"), source, "row_id").astype(np.int64, copy=False)
        table = table.filter(pa.array(log_filter.row_mask(row_id)))
    return table


# -- reading -----------------------------------------------------------------
def read_table(fs, path: str, columns: list[str] | None = None, optional: tuple[str, ...] = ()) -> pa.Table:
    """Read one Parquet part: ``columns`` (all if None) plus those of ``optional`` present.

    An unreadable file or a missing column is a :class:`LogDataError`. ``path`` may be a
    :class:`~dr_scale.logs.filters.PartFile` (its filter is the reader's to apply).
    """
    path = str(path)
    try:
        with fs.open(path, "rb") as f:
            pf = pq.ParquetFile(f)
            if columns is None:
                return pf.read()
            present = set(pf.schema_arrow.names)
            missing = [c for c in columns if c not in present]
            if len([c for c in missing if c in REQUIRED_COLUMNS]) > 1:  # not one column lost: another table
                shown = ", ".join(pf.schema_arrow.names[:8]) + (", …" if len(pf.schema_arrow.names) > 8 else "")
                raise LogDataError(path, None, f"not in the log contract: no {', '.join(missing[:3])} column (its "
                                               f"columns: {shown}); {IMPORT_HINT}")
            if missing:
                raise LogDataError(path, missing[0], "missing column")
            return pf.read(columns=list(columns) + [c for c in optional if c in present and c not in columns])
    except LogDataError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file
        raise _unreadable(fs, path, exc) from exc


def read_partition(
    fs,
    path: str,
    *,
    n_features: int | None = None,
    n_actions: int | None = None,
    with_features: bool = True,
    extra_columns: tuple[str, ...] = (),
    log_filter: LogFilter | None = None,
) -> Partition:
    """Read and validate one part file of a logged data set.

    ``log_filter`` (else the one a :class:`~dr_scale.logs.filters.PartFile` ``path`` carries, from
    :func:`list_parts`) keeps its split's rows.
    """
    path, log_filter = unpacked(path, log_filter)
    columns = [c for c in REQUIRED_COLUMNS if (with_features or c != "features") and c != PROPENSITY]
    columns += [c for c in extra_columns if c not in columns]
    optional = ("values", PROPENSITY) if with_features else (PROPENSITY,)
    try:
        table = read_table(fs, path, columns, optional=optional)
    except LogDataError as exc:
        if log_filter is not None and log_filter.split and exc.column == "row_id" and exc.reason == "missing column":
            raise LogDataError(path, "row_id", f"missing column: the {log_filter.split} split is keyed by each "
                                               "row's row_id") from None
        raise
    return partition_from_table(table, path, n_features, n_actions, with_features, log_filter)


def read_log(url, storage_options: dict | None = None, *, log_filter: LogFilter | None = None,
             **kwargs) -> list[Partition]:
    """All partitions of a (small) logged data set, in memory, each validated against the contract.

    For big logs use the out-of-core functions (:func:`~dr_scale.ope.evaluation.evaluate_log`), which
    read one part per task.

    Parameters
    ----------
    url : str or OpenedLog
        The log: a Parquet file, a folder of parts, or any fsspec URL of them, or the log opened
        (:func:`~dr_scale.logs.opened.open_log`, with its filter).
    storage_options : dict or None
        fsspec's options for ``url`` (credentials, endpoint).
    log_filter : LogFilter or None
        Read only its days and its split's rows (:class:`~dr_scale.logs.filters.LogFilter`).
    **kwargs : dict
        :func:`read_partition`'s: ``n_features``, ``n_actions``, ``with_features`` and
        ``extra_columns`` (a list of names, e.g. ``["target_action"]``); any other is refused.

    Returns
    -------
    list of Partition
        One per part file, in the log's order.

    See Also
    --------
    write_log : Writes a log this reads.

    Examples
    --------
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()
    >>> parts = read_log(logs)
    >>> len(parts), sum(len(p) for p in parts), parts[0].X.shape
    (7, 14000, (2000, 50))
    >>> from dr_scale import LogFilter
    >>> sum(len(p) for p in read_log(logs, log_filter=LogFilter(split="test")))  # its keyed 20 %
    2792
    """
    unknown = sorted(set(kwargs) - {"n_features", "n_actions", "with_features", "extra_columns"})
    if unknown:
        raise ParameterError(f"read_log has no parameter {unknown[0]!r}; it takes storage_options, log_filter, "
                             "n_features, n_actions, with_features and extra_columns")
    if isinstance(kwargs.get("extra_columns"), str):
        raise ParameterError(f"`extra_columns` must be a list of column names, got the str "
                             f"{kwargs['extra_columns']!r} (write [{kwargs['extra_columns']!r}])")
    fs, paths = list_parts(url, storage_options, log_filter)
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
    partition_by: str | None = None,
    catalogue: Catalogue | None = None,
) -> list[str]:
    """Validate ``table`` against the whole contract and write it as a logged data set.

    ``partition_by="date"``: one folder ``date=VALUE/`` per value of the table's ``date``
    column (text ``YYYY-MM-DD`` or a date type; the column itself is not written into the
    parts), each holding ``n_parts`` parts (fewer for a day with fewer rows).

    ``url`` ending in ``.parquet`` gives one file; otherwise a folder of ``n_parts``
    part files ``part-00000.parquet`` … of near-equal, non-zero row counts
    (1 ≤ ``n_parts`` ≤ rows). Everything is validated before anything is written: the
    required columns (``features`` included), the optional ``values``, and the target
    policy columns ``target_action`` (integers in [0, k)) and ``target_probs`` (k
    probabilities per row summing to 1) when present. Each part is written atomically;
    docs/data-contract.md says what a crash part-way leaves.

    Parameters
    ----------
    table : pyarrow.Table
        The rows: ``row_id``, ``features`` (lists of feature indices), ``action``, ``reward``,
        ``propensity`` and the optional columns of docs/data-contract.md.
    url : str
        Where to write: a ``.parquet`` file or a folder (any fsspec URL).
    n_parts : int
        The number of part files (per day with ``partition_by``), 1 ≤ ``n_parts`` ≤ rows.
    n_features : int or None
        The number of features d, stored in the parts' metadata (None: worked out when read).
    n_actions : int or None
        The number of actions k, stored in the parts' metadata (None: worked out when read).
    storage_options : dict or None
        fsspec's options for ``url``.
    partition_by : str or None
        ``"date"`` for one folder per day, or None.
    catalogue : Catalogue or None
        The action catalogue (each action's features and embedding), written as :data:`CATALOGUE_FILE` at the
        folder's root (:func:`read_catalogue` reads it); its k must be the log's.

    Returns
    -------
    list of str
        The paths written.

    See Also
    --------
    read_log : Reads them back.

    Examples
    --------
    >>> import tempfile, pyarrow as pa
    >>> table = pa.table({"row_id": [0, 1, 2, 3], "features": [[0], [1], [0, 1], []], "action": [0, 1, 1, 0],
    ...                   "reward": [1.0, 0.0, 1.0, 0.0], "propensity": [0.5, 0.5, 0.5, 0.5]})
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     paths = write_log(table, folder + "/log", n_parts=2, n_actions=2)
    ...     parts = read_log(folder + "/log")
    >>> [p.rsplit("/", 1)[1] for p in paths]
    ['part-00000.parquet', 'part-00001.parquet']
    >>> [len(p) for p in parts], parts[0].X.shape, parts[1].action.tolist()
    ([2, 2], (2, 2), [1, 0])
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
    if partition_by is not None:
        if partition_by != "date":
            raise ParameterError(f"`partition_by` must be None or 'date', got {partition_by!r}")
        if "date" not in table.column_names:
            raise LogDataError(url, "date", "missing column (partition_by='date' writes one folder per date)")
        dates = table.column("date")
        if dates.null_count:
            raise LogDataError(url, "date", "null values", int(table.column("row_id")[first_null(dates)].as_py()))
        dates = pc.cast(dates, pa.string())
        table = table.drop_columns(["date"])
    part = partition_from_table(table, url, n_features, n_actions, with_features=True)
    check_target_columns(part, n_actions)
    table = with_log_metadata(table, n_features, n_actions)
    fs, path = url_to_fs(url, storage_options)
    if catalogue is not None:
        k = n_actions if n_actions is not None else int(part.action.max(initial=0)) + 1
        if not isinstance(catalogue, Catalogue) or catalogue.n_actions < k:
            raise ParameterError(f"`catalogue` must be a Catalogue of the log's {k} actions")
        if path.endswith(".parquet"):
            raise UserError(f"{url}: a catalogue is stored beside the parts; give a folder, not a .parquet file")
        write_parquet(catalogue.table(), posixpath.join(path, CATALOGUE_FILE), fs=fs)
    if partition_by is not None:
        if path.endswith(".parquet"):
            raise UserError(f"{url}: partition_by='date' writes a folder per date; give a folder, not a .parquet file")
        written = []
        for day in sorted(pc.unique(dates).to_pylist()):
            piece = table.filter(pc.equal(dates, day))
            written += _write_parts(piece, fs, posixpath.join(path, f"date={day}"), min(n_parts, piece.num_rows))
        return written
    if path.endswith(".parquet"):
        if n_parts != 1:
            raise UserError(f"{url}: a .parquet file holds one part; give a folder for n_parts = {n_parts}")
        return [write_parquet(table, path, fs=fs)]
    return _write_parts(table, fs, path, n_parts)


def _write_parts(table: pa.Table, fs, path: str, n_parts: int) -> list[str]:
    bounds = np.linspace(0, table.num_rows, n_parts + 1).astype(int)
    written = []
    for i in range(n_parts):
        piece = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        written.append(write_parquet(piece, posixpath.join(path, f"part-{i:05d}.parquet"), fs=fs))
    return written


#: The contract's list columns and their value types, for :func:`table_from_pandas`.
LIST_COLUMNS = {"features": pa.int32(), "values": pa.float32(), "target_probs": pa.float64()}


def table_from_pandas(frame, source: str = "<DataFrame>") -> pa.Table:
    """A pandas DataFrame (e.g. a Dask partition) as an Arrow table, its list columns as lists.

    Dask's ``dataframe.convert-string`` (on by default) turns an object column of Python
    lists into text (``"[3, 17]"``) when the DataFrame is made; the contract's list columns
    (``features``, ``values``, ``target_probs``) that arrive as text are parsed back as
    JSON arrays. Text that is not one — numpy's ``"[3 17]"``, or a long array shortened
    with ``...`` — is an error saying how to keep the lists (Arrow list dtypes, which Dask
    leaves alone, or ``dr_scale.from_dask``).
    """
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for name, value_type in LIST_COLUMNS.items():
        if name not in table.column_names:
            continue
        column = table.column(name)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        table = table.set_column(table.column_names.index(name), name,
                                 _lists_from_text(combined(column), value_type, source, name))
    return table


def _lists_from_text(text: pa.Array, value_type, source: str, column: str) -> pa.Array:
    import io

    import pyarrow.json as pj

    if text.null_count:
        raise LogDataError(source, column, "null values")
    body = "\n".join(f'{{"v":{t}}}' for t in text.to_pylist()).encode()
    try:
        parsed = pj.read_json(io.BytesIO(body), parse_options=pj.ParseOptions(
            explicit_schema=pa.schema([("v", pa.list_(value_type))]))).column("v")
    except pa.ArrowInvalid:
        import json

        def not_a_list(t: str) -> bool:
            try:
                return not isinstance(json.loads(t), list)
            except ValueError:
                return True

        example = next(t for t in text.to_pylist() if not_a_list(t))
        raise LogDataError(source, column, f"wrong type {text.type}: a list column became text (e.g. "
                                           f"{example[:40]!r}), as Dask's dataframe.convert-string does to "
                                           "object columns, and the text is not a list of numbers; keep the lists "
                                           "as pandas.ArrowDtype(pyarrow.list_(...)) columns, or build the log with "
                                           "dr_scale.from_dask") from None
    return combined(parsed)


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


# -- sparse target policies ----------------------------------------------------------------------
#: The struct fields of a sparse target-policy column: list<struct<action: integer, prob: floating>>.
SPARSE_FIELDS = ("action", "prob")


def sparse_target_lists(part: Partition, column: str, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """A policy's listed actions and their probabilities per row, from ``column`` (list<struct<action, prob>>).

    Returns ``(actions, probs)``, both (n, K) with K the longest list; shorter rows are padded with action 0 at
    probability 0. Each row's probabilities must be a distribution (:func:`check_distributions`), its actions in
    [0, k) when k is known, each listed at most once. Memory is O(n·K), whatever the number of actions k.
    """
    col = combined(part.table.column(column))
    typ = col.type
    ok = (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and pa.types.is_struct(typ.value_type)
    names = [typ.value_type.field(i).name for i in range(typ.value_type.num_fields)] if ok else []
    if not ok or not set(SPARSE_FIELDS) <= set(names) \
            or not pa.types.is_integer(typ.value_type.field("action").type) \
            or not _is_number(typ.value_type.field("prob").type):
        raise LogDataError(part.source, column, f"wrong type {typ}: sparse: policies read a "
                                                "list<struct<action: int, prob: float>> per row")
    if col.null_count:
        raise LogDataError(part.source, column, "null list", int(part.row_id[first_null(col)]))
    flat = pc.list_flatten(col)
    offsets = (col.offsets.to_numpy() - col.offsets[0].as_py()).astype(np.int64)
    n = len(col)
    lengths = np.diff(offsets)
    width = int(lengths.max(initial=0))
    if n and width == 0 or (lengths == 0).any():
        row = int(np.flatnonzero(lengths == 0)[0]) if n else 0
        raise LogDataError(part.source, column, "an empty list of actions", int(part.row_id[row]))
    action_flat, prob_flat = flat.field("action"), flat.field("prob")
    for values, name in ((action_flat, "action"), (prob_flat, "prob")):
        if values.null_count:
            row = int(np.searchsorted(offsets, first_null(values), side="right") - 1)
            raise LogDataError(part.source, column, f"null {name}", int(part.row_id[row]))
    row_of = np.repeat(np.arange(n), lengths)
    slot = np.arange(len(flat)) - offsets[row_of]
    actions = np.zeros((n, width), dtype=np.int64)
    probs = np.zeros((n, width))
    actions[row_of, slot] = action_flat.to_numpy(zero_copy_only=False)
    probs[row_of, slot] = prob_flat.to_numpy(zero_copy_only=False)
    if k is not None:
        check_target_actions(actions.ravel(), k, part.source, column, np.repeat(part.row_id, width))
    elif actions.size and actions.min() < 0:
        check_target_actions(actions.ravel(), np.iinfo(np.int64).max, part.source, column,
                             np.repeat(part.row_id, width))
    check_distributions(probs, part.source, column, part.row_id)
    if width > 1:
        ordered = np.sort(np.where(probs > 0, actions, -1 - np.arange(width)), axis=1)
        repeated = (np.diff(ordered, axis=1) == 0).any(axis=1)
        if repeated.any():
            raise LogDataError(part.source, column, "an action listed twice", _first_bad(repeated, part.row_id))
    return actions, probs


def sparse_target_column(actions: np.ndarray, probs: np.ndarray) -> pa.Array:
    """The list<struct<action: int64, prob: float64>> column of (n, K) ``actions`` and ``probs`` (slots of
    probability 0 dropped): what :func:`sparse_target_lists` reads."""
    keep = probs > 0
    offsets = np.zeros(actions.shape[0] + 1, dtype=np.int32)
    np.cumsum(keep.sum(axis=1), out=offsets[1:])
    values = pa.StructArray.from_arrays([pa.array(actions[keep].astype(np.int64)), pa.array(probs[keep])],
                                        names=list(SPARSE_FIELDS))
    return pa.ListArray.from_arrays(pa.array(offsets), values)


# -- the action catalogue ------------------------------------------------------------------------
#: The optional action catalogue stored at a log's root: per action, its features and embedding.
CATALOGUE_FILE = "_actions.parquet"


@dataclass(frozen=True)
class Catalogue:
    """A log's action catalogue: each action's sparse features and, optionally, its categorical embedding.

    Read from :data:`CATALOGUE_FILE` at the log's root (``dr-scale import`` with an ``[actions]`` table and
    ``dr-scale generate bandit --action-features`` write it) by :func:`read_catalogue`. Columns: ``action``
    (int, 0 … k−1, each once), ``features`` (list<int32>), ``values`` (list<float32>), optionally ``key``
    (the action's value) and ``embedding`` (int e(a) ∈ [0, L): the category the marginalized estimators
    (MIPS) use, p(e|x, a) = 1{e = e(a)}).

    Parameters
    ----------
    features : scipy.sparse.csr_matrix, shape (k, D_A)
        Row a: action a's features.
    embedding : numpy.ndarray of int, shape (k,), or None
        e(a), or None when the catalogue has no ``embedding`` column.
    source : str
        The file, for messages.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> cat = Catalogue(sp.csr_matrix(np.array([[1.0, 0.5], [0.0, 2.0], [1.0, 0.0]])), np.array([0, 1, 1]))
    >>> cat.n_actions, cat.n_categories, cat.table().column_names
    (3, 2, ['action', 'features', 'values', 'embedding'])
    """

    features: sp.csr_matrix
    embedding: np.ndarray | None = None
    source: str = "<catalogue>"

    @property
    def n_actions(self) -> int:
        return self.features.shape[0]

    @property
    def n_categories(self) -> int:
        """L = max e(a) + 1 (0 without an embedding)."""
        return 0 if self.embedding is None else int(self.embedding.max(initial=-1)) + 1

    def digest(self) -> str:
        """sha256 of the catalogue's features (CSR arrays) and embedding: what an evaluation using it depends on
        (a report's state cache keys its states by it, so an edited catalogue is recomputed)."""
        X = self.features.tocsr()
        h = hashlib.sha256()
        arrays = (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64),
                  np.asarray(X.shape, dtype=np.int64),
                  np.zeros(0, np.int64) if self.embedding is None else self.embedding.astype(np.int64))
        for a in arrays:
            h.update(str(a.shape).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        h.update(b"embedding" if self.embedding is not None else b"none")
        return h.hexdigest()

    def table(self) -> pa.Table:
        """The catalogue as the Parquet table :func:`read_catalogue` reads."""
        X = self.features
        columns = {"action": pa.array(np.arange(self.n_actions, dtype=np.int32)),
                   "features": pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)),
                                                        pa.array(X.indices.astype(np.int32))),
                   "values": pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)),
                                                      pa.array(X.data.astype(np.float32)))}
        if self.embedding is not None:
            columns["embedding"] = pa.array(self.embedding.astype(np.int32))
        return pa.table(columns)


def catalogue_of(table: pa.Table, source: str) -> Catalogue:
    """A :class:`Catalogue` from its table; a missing or duplicate action, a bad embedding: a LogDataError."""
    for name in ("action", "features"):
        if name not in table.column_names:
            raise LogDataError(source, name, "missing column")
    action = np.asarray(combined(table.column("action")).to_numpy(zero_copy_only=False), dtype=np.int64)
    k = action.size
    if k == 0:
        raise LogDataError(source, "action", "the catalogue has no actions")
    if action.min() < 0 or np.bincount(action).max() > 1 or action.max() != k - 1:
        raise LogDataError(source, "action", f"the actions must be 0 … k−1, each once ({k} rows)")
    order = np.argsort(action, kind="stable")
    table = table.take(pa.array(order))
    values = combined(table.column("values")) if "values" in table.column_names else None
    X = features_to_csr(table.column("features"), int(_max_feature(table)) + 1, values)
    embedding = None
    if "embedding" in table.column_names:
        embedding = np.asarray(combined(table.column("embedding")).to_numpy(zero_copy_only=False))
        if embedding.dtype.kind not in "iu" or embedding.min() < 0:
            raise LogDataError(source, "embedding", "the embedding must be a non-negative integer per action")
        embedding = embedding.astype(np.int64)
    return Catalogue(X, embedding, source)


def _max_feature(table: pa.Table) -> int:
    flat = pc.list_flatten(combined(table.column("features")))
    return int(pc.max(flat).as_py()) if len(flat) else -1


def read_catalogue(url, storage_options: dict | None = None) -> Catalogue | None:
    """The action catalogue of the log at ``url`` (:data:`CATALOGUE_FILE` at its root), or None without one.

    Parameters
    ----------
    url : str or OpenedLog
        The log (any fsspec URL), a part file of it or its root folder; an opened log's catalogue is read once.
    storage_options : dict, optional
        fsspec's options for ``url``.

    Returns
    -------
    Catalogue or None

    Examples
    --------
    >>> import os, tempfile, numpy as np, scipy.sparse as sp
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     cat = Catalogue(sp.csr_matrix(np.eye(3)), np.array([0, 1, 1]))
    ...     _ = write_parquet(cat.table(), os.path.join(folder, CATALOGUE_FILE))
    ...     again = read_catalogue(folder)
    >>> again.n_actions, again.n_categories, again.embedding.tolist()
    (3, 2, [0, 1, 1])
    """
    if isinstance(url, ListedLog):
        return url.catalogue
    fs, path = url_to_fs(url, storage_options)
    root = log_root(path)
    if fs.isfile(root):
        root = posixpath.dirname(root)
    cat_path = posixpath.join(root, CATALOGUE_FILE)
    if not fs.exists(cat_path):
        return None
    try:
        with fs.open(cat_path, "rb") as f:
            table = pq.read_table(f)
    except Exception as exc:  # noqa: BLE001 - a corrupt file, named
        raise LogDataError(cat_path, None, f"unreadable Parquet ({exc})") from None
    return catalogue_of(table, cat_path)
