"""The target policy π(a|x) every estimator evaluates: the abstract :class:`Policy`, its errors and digest."""

from __future__ import annotations

import abc
import hashlib

import numpy as np

from dr_scale.logs.contract import LogDataError, Partition
from dr_scale.logs.targets import check_target_actions
from dr_scale.policies.distributions import ActionDistribution


def parameters_digest(*arrays: np.ndarray) -> str:
    """sha256 of arrays' shapes and float64 bytes: what a fitted model or policy computes with."""
    h = hashlib.sha256()
    for array in arrays:
        a = np.ascontiguousarray(array, dtype=np.float64)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


class PolicyMismatch(LogDataError):
    """The policy does not fit the log (its k actions or d features are not the log's): the policy's
    error, not the partition's — a report names the policy, not every partition."""


class Policy(abc.ABC):
    """The target policy π(a|x) the estimators evaluate (abstract).

    A subclass answers π(· | x_i) for a partition's rows through one method, :meth:`distribution`, whose result is
    an :class:`~dr_scale.policies.distributions.ActionDistribution` (dense, one action per row, listed actions or a
    closed-form mixture behind it). ``columns`` are extra log columns the policy reads, ``needs_features`` whether
    it reads the features X, ``n_actions`` k where the policy itself knows it (else None), ``needs_k`` whether
    its probabilities depend on k, ``on_policy`` whether it is the logging policy itself (weights 1).

    On a ranking's log (one row per slot) row i is a decision at slot ``part.slot[i]``: a policy that answers per
    slot, π(a | x_i, slot_i), reads the partition's slots there (as
    :class:`~dr_scale.policies.logged.LoggedPolicy` does); the others answer the same π at every slot.

    See Also
    --------
    dr_scale.policies.parse_policy : A policy from its command-line spelling.

    Examples
    --------
    A policy that picks the last action on every row:

    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> from dr_scale.policies.distributions import ChosenActions
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3), table=pa.table({}))
    >>> class Last(Policy):
    ...     def distribution(self, part, k):
    ...         return ChosenActions(np.full(len(part), k - 1), k)
    >>> target = Last().distribution(part, 3)
    >>> target.at(part.action).tolist(), target.dense().tolist()
    ([0.0, 0.0, 1.0], [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    """

    columns: tuple[str, ...] = ()
    needs_features = False
    n_actions: int | None = None  # known from the policy itself, where it is
    needs_k = False  # its probabilities depend on the number of actions k, which must then be known
    on_policy = False  # the logging policy: weights 1 (see LoggingPolicy)

    def resolve(self, actions: list | None) -> Policy:
        """This policy with actions named by value turned into ids, for a log whose action values are
        ``actions`` (id order; None: the log has no vocabulary)."""
        return self

    def check_named_actions(self, k: int) -> None:
        """Refuse (:class:`~dr_scale.core.errors.UserError`) an action this policy names by id (in its spec) that is
        not one of a log's k actions — what :meth:`distribution` refuses too, here before any row is read (a
        command checks it before it fits a model)."""
        return None  # a policy that names no action by id: nothing to check

    @abc.abstractmethod
    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(· | x_i) on the partition's rows, over k actions.

        Parameters
        ----------
        part : Partition
            The logged rows.
        k : int
            The number of actions.

        Returns
        -------
        ActionDistribution
            π(a | x_i) for every row i and action a in [0, k).
        """

    def _check_actions(self, actions: np.ndarray, k: int, part: Partition, column: str) -> np.ndarray:
        return check_target_actions(actions, k, part.source, column, part.row_id)
