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
``slot``       integer                optional: the row's position in a ranking, 0 = top
``impression`` int64                  optional: the id shared by the rows (slots) of one impression
=============  =====================  ==============================================

A log without ``propensity`` (the logging system never recorded its probabilities) is read
with NaN propensities and :attr:`Partition.has_propensity` false: the direct method needs
none, the estimators that weight by 1/p̂ need an estimated logging policy
(:mod:`dr_scale.propensity`, ``--estimate-propensity``; docs/propensities.md).

A ranking is logged one row per slot: ``slot`` is the position the action was shown at, counted from 0
(the import spec's ``first_slot`` maps a raw column counted from 1), and ``impression`` groups the slots
shown together. :attr:`Partition.slot` and :attr:`Partition.impression` read them (None without them).

plus optional columns a target policy reads (``target_action``, ``target_probs``).
The Parquet schema metadata may carry ``dr_scale.n_features`` (d) and
``dr_scale.n_actions`` (k), which the reader uses for validation.

A partition becomes a scipy CSR matrix and numpy arrays without Python loops over
rows: the list column's offsets are the CSR ``indptr`` and its flattened values the
``indices``. Bad data raises :class:`LogDataError` naming the file, the column, the
reason and an example row id; writing validates first and then writes each part
atomically, so nothing is written on failure.

This module holds the schema, :class:`LogDataError`, :class:`Partition` and the rules a column obeys; the
contract's other modules, one idea each: :mod:`~dr_scale.logs.listing` (a log's part files, their footers,
the action vocabulary), :mod:`~dr_scale.logs.sparse` (list columns ↔ CSR), :mod:`~dr_scale.logs.reading`
(a table validated into a :class:`Partition`, parts read), :mod:`~dr_scale.logs.writing`,
:mod:`~dr_scale.logs.catalogue` (the action catalogue) and :mod:`~dr_scale.logs.targets` (the target-policy
columns ``target_action`` and ``target_probs``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from dr_scale.core.errors import UserError

REQUIRED_COLUMNS = ("row_id", "features", "action", "reward", "propensity")
#: The column a log may lack: the logging probabilities (estimated then from the log, docs/propensities.md).
PROPENSITY = "propensity"
#: The optional ranking columns: a row's position (0 = top) and the id of the impression it belongs to.
SLOT = "slot"
IMPRESSION = "impression"
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

    def __init__(self, source: str, column: str | None, reason: str, row_id: int | None = None) -> None:
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
        Every column read, for what a target policy needs (``target_action``, ``target_probs``), and the
        ranking columns :attr:`slot` and :attr:`impression` where the log has them.

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
        return int(self.row_id.shape[0])

    @property
    def has_propensity(self) -> bool:
        """Whether the log recorded the logging probabilities (its ``propensity`` column)."""
        return PROPENSITY in self.table.column_names

    @cached_property
    def slot(self) -> np.ndarray | None:
        """The rows' slots (int64, 0 = the top position) from the ``slot`` column; None when the log has none.

        >>> import pyarrow as pa, scipy.sparse as sp
        >>> part = Partition("<p>", np.arange(3), sp.csr_matrix((3, 1)), np.array([4, 1, 4]), np.zeros(3),
        ...                  np.full(3, 0.1), pa.table({"slot": pa.array([0, 1, 2], pa.int32()),
        ...                                             "impression": pa.array([9, 9, 9], pa.int64())}))
        >>> part.slot.tolist(), part.impression.tolist()
        ([0, 1, 2], [9, 9, 9])
        """
        if SLOT not in self.table.column_names:
            return None
        return numeric_values(self.table.column(SLOT), self.source, SLOT).astype(np.int64, copy=False)

    @cached_property
    def impression(self) -> np.ndarray | None:
        """The rows' impression ids (int64) from the ``impression`` column; None when the log has none."""
        if IMPRESSION not in self.table.column_names:
            return None
        return numeric_values(self.table.column(IMPRESSION), self.source, IMPRESSION).astype(np.int64, copy=False)


#: What to do with a table that is not in the contract.
IMPORT_HINT = ("a raw table becomes a log with `dr-scale import RAW --spec SPEC.toml --out LOGS` "
               "(dr_scale.import_log, dr_scale.from_pandas; docs/import.md)")


# -- column checks ---------------------------------------------------------------
def combined(array: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One Arrow array of a column: its only chunk as is (``combine_chunks`` would copy it)."""
    if not isinstance(array, pa.ChunkedArray):
        return array
    return array.chunk(0) if array.num_chunks == 1 else array.combine_chunks()


def first_bad(mask: np.ndarray, row_id: np.ndarray | None) -> int | None:
    """The id of the first row where ``mask`` holds (its position when there are no row ids), or None."""
    bad = np.flatnonzero(mask)
    return (int(row_id[bad[0]]) if row_id is not None and row_id.size else int(bad[0])) if bad.size else None


def first_null(array: pa.Array | pa.ChunkedArray) -> int:
    """Position of the first null of an Arrow array or column."""
    return int(pc.index(pc.is_null(array), True).as_py())


def check_type(table: pa.Table, source: str, column: str, predicate: Callable[[pa.DataType], bool],
               expected: str) -> None:
    """``column`` of ``table`` present, of a type ``predicate`` accepts (``expected`` names it) and without nulls;
    else a :class:`LogDataError` naming the first null row."""
    if column not in table.column_names:
        raise LogDataError(source, column, "missing column")
    typ = table.schema.field(column).type
    if not predicate(typ):
        raise LogDataError(source, column, f"wrong type {typ}, expected {expected}")
    if table.column(column).null_count:
        row_id = table.column("row_id").to_numpy() if column != "row_id" and "row_id" in table.column_names else None
        first = first_null(table.column(column))
        raise LogDataError(source, column, "null values", int(row_id[first]) if row_id is not None else first)


def numeric_values(array: pa.Array | pa.ChunkedArray, source: str, column: str, row_id: np.ndarray | None = None
                   ) -> np.ndarray:
    """A numeric Arrow array (or column) without nulls as a NumPy view of its data buffer.

    pyarrow's ``to_numpy`` imports pandas on first use, with the reading threads
    waiting; reading the buffer does not. A null is an error naming
    the row (when ``row_id`` is given).
    """
    array = combined(array)
    if not is_number(array.type):
        raise LogDataError(source, column, f"expected numbers, found {array.type}")
    if array.null_count:
        raise LogDataError(source, column, "null values", None if row_id is None else int(row_id[first_null(array)]))
    dtype = np.dtype(array.type.to_pandas_dtype())
    values: np.ndarray = np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array),
                                       offset=array.offset * dtype.itemsize)
    return values


def check_feature_indices(source: str, flat: np.ndarray, offsets: np.ndarray, n_features: int | None,
                          row_id: np.ndarray, limit: int | None = None) -> None:
    """Every active feature index in [0, ``limit``) (default ``n_features``), else an error naming its row."""
    limit = n_features if limit is None else limit
    if flat.size and (flat.min() < 0 or flat.max() >= limit):  # two reductions, no temporaries, when all is well
        first = np.flatnonzero((flat < 0) | (flat >= limit))[0]
        row = np.searchsorted(offsets - offsets[0], first, side="right") - 1
        raise LogDataError(source, "features", f"feature index out of range [0, {n_features})", int(row_id[row]))


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
    mask: np.ndarray = ~(p >= 0) | ~np.isfinite(p)
    return mask


def row_sums_off(sums: np.ndarray) -> np.ndarray:
    """The rows whose sums (of probabilities) are further than :data:`ROW_SUM_TOLERANCE` from 1."""
    off: np.ndarray = np.abs(sums - 1) > ROW_SUM_TOLERANCE
    return off


def row_sums(p: np.ndarray) -> np.ndarray:
    """Σ_a p[i, a], by one BLAS mat-vec (faster than a strided ``sum(axis=1)``)."""
    sums: np.ndarray = p @ np.ones(p.shape[1])
    return sums


def is_number(t: pa.DataType) -> bool:
    """Whether the Arrow type ``t`` is an integer or a floating type."""
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))

