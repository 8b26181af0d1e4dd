"""Policies stored in the log, one decision per row: an action column, a probabilities column, listed actions.

The first two read the contract's target-policy columns (:mod:`dr_scale.logs.targets`); the listed actions are
a list<struct<action, prob>> column, read by :func:`sparse_target_lists` and written by :func:`sparse_target_column`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dr_scale.logs.contract import LogDataError, Partition, combined, first_bad, first_null, is_number
from dr_scale.logs.targets import (
    check_distributions,
    check_target_actions,
    first_list_length,
    target_actions,
    target_probabilities,
)
from dr_scale.policies.base import Policy
from dr_scale.policies.distributions import ActionDistribution, ChosenActions, DenseProbs, SparseProbs


@dataclass
class ActionColumnPolicy(Policy):
    """A deterministic π stored in the log: π(a|x_i) = 1{a = target_i}, target_i from an integer column.

    Spec ``column:NAME``. Each target_i must be in [0, k); a null or out-of-range value is a
    :class:`LogDataError` naming the file, column and row.

    Parameters
    ----------
    column : str, default "target_action"
        The integer column holding π(x_i).

    See Also
    --------
    ProbsColumnPolicy : A stochastic π stored in the log.

    Examples
    --------
    >>> from dr_scale import read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()  # the bundled example: 3 actions, a candidate policy in ``target_action``
    >>> part = read_log(logs + "/date=2026-11-01", extra_columns=["target_action"])[0]
    >>> policy = ActionColumnPolicy()
    >>> policy.columns, str(policy)
    (('target_action',), 'column:target_action')
    >>> policy.distribution(part, 3).actions[:5].tolist()
    [0, 0, 0, 0, 0]
    """

    column: str = "target_action"

    def __post_init__(self) -> None:
        self.columns = (self.column,)

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(a|x_i) = 1{a = the column's action on row i}."""
        return ChosenActions(target_actions(part, self.column, k), k)

    def __str__(self) -> str:
        return f"column:{self.column}"


@dataclass
class ProbsColumnPolicy(Policy):
    """A stochastic π stored in the log: π(·|x_i) read from a list<float> column of length k per row.

    Spec ``probs:NAME``. Each row's list must hold k probabilities summing to 1; anything else is a
    :class:`LogDataError` naming the file, column and row.

    Parameters
    ----------
    column : str, default "target_probs"
        The list<float> column holding π(·|x_i).

    See Also
    --------
    ActionColumnPolicy : A deterministic π stored in the log.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3),
    ...                  table=pa.table({"target_probs": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]}))
    >>> policy = ProbsColumnPolicy()
    >>> policy.distribution(part, 3).probs.tolist()
    [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]
    >>> policy.first_length(part), str(policy)
    (3, 'probs:target_probs')
    """

    column: str = "target_probs"

    def __post_init__(self) -> None:
        self.columns = (self.column,)

    def first_length(self, part: Partition) -> int:
        """The length of the first row's list (k, when nothing else tells it)."""
        return first_list_length(part, self.column)

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(·|x_i) = the column's (k,) probabilities on row i, as a dense matrix."""
        return DenseProbs(target_probabilities(part, self.column, k))

    def __str__(self) -> str:
        return f"probs:{self.column}"


@dataclass(eq=False)
class SparsePolicy(Policy):
    """A policy stored per row as the actions it may take with their probabilities: spec ``sparse:NAME``.

    The column NAME is a list<struct<action: int, prob: float>> (:func:`sparse_target_lists`):
    row i's pairs (a, π(a|x_i)), the probabilities summing to 1, every action not listed at probability 0.
    Its distribution is :class:`~dr_scale.policies.distributions.SparseProbs`: O(n·K) for lists of at most K
    actions, whatever k.

    Parameters
    ----------
    column : str
        The column.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> lists = pa.array([[{"action": 7, "prob": 0.5}, {"action": 2, "prob": 0.5}], [{"action": 9, "prob": 1.0}]])
    >>> part = Partition("<example>", row_id=np.arange(2), X=sp.csr_matrix((2, 1)), action=np.array([7, 3]),
    ...                  reward=np.array([1.0, 0.0]), propensity=np.full(2, 0.01), table=pa.table({"top": lists}))
    >>> target = SparsePolicy("top").distribution(part, 10)
    >>> target.actions.tolist(), target.probs.tolist()
    ([[7, 2], [9, 0]], [[0.5, 0.5], [1.0, 0.0]])
    """

    column: str = "target_topk"

    def __post_init__(self) -> None:
        self.columns = (self.column,)

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(·|x_i) = the column's listed (action, probability) pairs on row i, never an (n, k) matrix."""
        return SparseProbs(*sparse_target_lists(part, self.column, k), k)

    def __str__(self) -> str:
        return f"sparse:{self.column}"


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
            or not is_number(typ.value_type.field("prob").type):
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
            raise LogDataError(part.source, column, "an action listed twice", first_bad(repeated, part.row_id))
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
