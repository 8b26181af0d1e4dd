"""Reading a log: a table validated against the contract into a :class:`~dr_scale.logs.contract.Partition`
(:func:`partition_from_table`, the rows a filter keeps: :func:`filter_table`), one part file read
(:func:`read_table`, :func:`read_partition`), a small log in memory (:func:`read_log`).

A partition's features become a CSR matrix without a loop over rows (:mod:`dr_scale.logs.sparse`); bad data
is a :class:`~dr_scale.logs.contract.LogDataError` naming the file, the column, the reason and a row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dr_scale.core.errors import ParameterError
from dr_scale.logs.contract import (
    BELOW_FLOOR,
    IMPORT_HINT,
    IMPRESSION,
    PROPENSITY,
    REQUIRED_COLUMNS,
    SLOT,
    LogDataError,
    Partition,
    check_feature_indices,
    check_type,
    combined,
    first_bad,
    first_null,
    is_number,
    numeric_values,
    propensity_fault,
)
from dr_scale.logs.filters import DayRange, LogFilter, PartFile, partition_date, unpacked
from dr_scale.logs.listing import list_parts, unreadable
from dr_scale.logs.sparse import csr_from_lists, feature_arrays

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


def _is_int_list(t: pa.DataType) -> bool:
    return bool((pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type))


def _is_float_list(t: pa.DataType) -> bool:
    return bool((pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_floating(t.value_type))


def _check_list_nulls(array: pa.Array, source: str, column: str, row_id: np.ndarray) -> None:
    """A null inside a list (``[1, null]``) is an error naming the row (null lists are checked by type)."""
    flat = pc.list_flatten(array)
    if flat.null_count:
        offsets = array.offsets.to_numpy() - array.offsets[0].as_py()
        row = np.searchsorted(offsets, first_null(flat), side="right") - 1
        raise LogDataError(source, column, "null inside a list", int(row_id[row]))



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
    check_type(table, source, "row_id", pa.types.is_integer, "int64")
    check_type(table, source, "action", pa.types.is_integer, "an integer type")
    check_type(table, source, "reward", is_number, "a numeric type")
    logged_p = PROPENSITY in table.column_names
    if logged_p:
        check_type(table, source, "propensity", pa.types.is_floating, "a floating type")
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
        outside, rule = fault
        fix = "; fix the logging probabilities" if rule is BELOW_FLOOR else ""
        raise LogDataError(source, "propensity", f"propensity {rule}{fix}", first_bad(outside, row_id))
    check_ranking(table, source, row_id)
    bad = first_bad(~np.isfinite(reward), row_id)
    if bad is not None:
        raise LogDataError(source, "reward", "NaN or infinite reward", bad)
    k = n_actions if n_actions is not None else np.iinfo(np.int64).max
    bad = first_bad((action < 0) | (action >= k), row_id)
    if bad is not None:
        raise LogDataError(source, "action", f"action out of range [0, {n_actions})", bad)

    X = None
    if with_features:
        check_type(table, source, "features", _is_int_list, "list<int32>")
        features = combined(table.column("features"))
        _check_list_nulls(features, source, "features", row_id)
        indptr, flat = feature_arrays(features, source)
        check_feature_indices(source, flat, indptr, n_features, row_id,
                              n_features if n_features is not None else np.iinfo(np.int32).max)
        values = None
        if "values" in table.column_names:
            check_type(table, source, "values", _is_float_list, "list<float32>")
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
                                   first_bad(mismatch, row_id))
        d = n_features if n_features is not None else (int(flat.max()) + 1 if flat.size else 0)
        X = csr_from_lists(indptr, flat, d, values)
    return Partition(source, row_id, X, action, reward, propensity, table)


def check_ranking(table: pa.Table, source: str, row_id: np.ndarray) -> None:
    """The optional ranking columns: ``slot`` integers ≥ 0 and ``impression`` integers, without nulls."""
    for column in (SLOT, IMPRESSION):
        if column in table.column_names:
            check_type(table, source, column, pa.types.is_integer, "an integer type")
    if SLOT in table.column_names:
        bad = first_bad(numeric_values(table.column(SLOT), source, SLOT) < 0, row_id)
        if bad is not None:
            raise LogDataError(source, SLOT, "negative slot (slots count from 0, the top position)", bad)


def filter_table(table: pa.Table, source: str, log_filter: LogFilter) -> pa.Table:
    """The rows of ``table`` that ``log_filter`` keeps: its split's (by ``row_id``), its days' (by a
    ``date`` column, for a table that is not a date partition's file)."""
    if log_filter.days is not None and partition_date(source) is None:
        if "date" not in table.column_names:
            raise ParameterError(f"`days` {log_filter.days} needs date partitions (date=YYYY-MM-DD/…) or a 'date' "
                                 f"column; {source} has neither")
        days = log_filter.days
        assert isinstance(days, DayRange)  # LogFilter parses a text range when it is made
        day = pc.utf8_slice_codeunits(pc.cast(table.column("date"), pa.string()), 0, 10)  # ISO days sort as text
        keep = pc.is_valid(day)
        if days.first is not None:
            keep = pc.and_(keep, pc.greater_equal(day, days.first.isoformat()))
        if days.last is not None:
            keep = pc.and_(keep, pc.less_equal(day, days.last.isoformat()))
        table = table.filter(pc.fill_null(keep, False))
    if log_filter.split is not None:
        if "row_id" not in table.column_names:
            raise LogDataError(source, "row_id", f"missing column: the {log_filter.split} split is keyed by "
                                                 "each row's row_id")
        check_type(table, source, "row_id", pa.types.is_integer, "int64")
        row_id = numeric_values(table.column("row_id"), source, "row_id").astype(np.int64, copy=False)
        table = table.filter(pa.array(log_filter.row_mask(row_id)))
    return table


def read_table(fs: AbstractFileSystem, path: str, columns: list[str] | None = None,
               optional: tuple[str, ...] = ()) -> pa.Table:
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
        raise unreadable(fs, path, exc) from exc


def read_partition(
    fs: AbstractFileSystem,
    path: str | PartFile,
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
    optional = (PROPENSITY, SLOT, IMPRESSION) + (("values",) if with_features else ())
    try:
        table = read_table(fs, path, columns, optional=optional)
    except LogDataError as exc:
        if log_filter is not None and log_filter.split and exc.column == "row_id" and exc.reason == "missing column":
            raise LogDataError(path, "row_id", f"missing column: the {log_filter.split} split is keyed by each "
                                               "row's row_id") from None
        raise
    return partition_from_table(table, path, n_features, n_actions, with_features, log_filter)


def read_log(url: str, storage_options: dict[str, Any] | None = None, *, log_filter: LogFilter | None = None,
             **kwargs: Any) -> list[Partition]:
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
