"""The target-policy columns a log may carry: ``target_action`` (an integer action per row, in [0, k)) and
``target_probs`` (k probabilities per row, a distribution), read from a partition and checked.

:func:`check_target_columns` is what :func:`~dr_scale.logs.writing.write_log` checks before writing; the
column policies (:mod:`dr_scale.policies.columns`, ``column:NAME`` and ``probs:NAME``) read their decisions
through :func:`target_actions` and :func:`target_probabilities`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dr_scale.logs.contract import (
    LogDataError,
    Partition,
    combined,
    first_bad,
    first_null,
    not_probabilities,
    numeric_values,
    row_sums,
    row_sums_off,
)


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
        raise LogDataError(source, column, "target probabilities are not a distribution", first_bad(bad, row_id))
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
