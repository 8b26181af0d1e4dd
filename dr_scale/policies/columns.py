"""Policies stored in the log, one decision per row: an action column, a probabilities column, listed actions."""

from __future__ import annotations

from dataclasses import dataclass

from dr_scale.logs.contract import (
    Partition,
    first_list_length,
    sparse_target_lists,
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

    The column NAME is a list<struct<action: int, prob: float>> (:func:`dr_scale.logs.contract.sparse_target_lists`):
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
