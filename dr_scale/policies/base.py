"""The target policy π(a|x) every estimator evaluates: the abstract :class:`Policy`, its errors and digest."""

from __future__ import annotations

import hashlib

import numpy as np

from dr_scale.logs.contract import LogDataError, Partition, check_target_actions
from dr_scale.policies.distributions import SparseProbs, UniformMixture, one_hot


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


class Policy:
    """Base class of the target policies π(a|x) the estimators evaluate.

    A subclass defines :meth:`decisions`; :meth:`probs` is π(a|x_i) as an (n, k) matrix either way.
    ``columns`` are extra log columns the policy reads, ``needs_features`` whether it reads the
    features X, ``n_actions`` k where the policy itself knows it (else None). The base class takes
    no parameters.

    See Also
    --------
    ConstantPolicy, ActionColumnPolicy, ProbsColumnPolicy, CallablePolicy, LinearPolicy, SoftmaxPolicy :
        The six kinds.
    parse_policy : A policy from its command-line spelling.

    Examples
    --------
    A policy that picks the last action on every row:

    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3),
    ...                  table=pa.table({"target_probs": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]}))
    >>> class Last(Policy):
    ...     def decisions(self, part, k):
    ...         return np.full(len(part), k - 1)
    >>> Last().probs(part, 3).tolist()
    [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
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

    def decisions(self, part: Partition, k: int) -> np.ndarray:
        """π's decisions on the partition's rows: (n,) actions if π is deterministic, else (n, k) probabilities.

        Parameters
        ----------
        part : Partition
            The logged rows.
        k : int
            The number of actions.

        Returns
        -------
        numpy.ndarray
            (n,) int actions in [0, k), or (n, k) float probabilities with rows summing to 1.
        """
        raise NotImplementedError

    def probs(self, part: Partition, k: int) -> np.ndarray:
        """π(a|x_i) as an (n, k) matrix (one-hot rows for a deterministic π).

        Parameters
        ----------
        part : Partition
            The logged rows.
        k : int
            The number of actions.

        Returns
        -------
        numpy.ndarray
            (n, k) float probabilities.
        """
        target = self.decisions(part, k)
        if isinstance(target, (SparseProbs, UniformMixture)):
            return target.dense(k)
        return one_hot(target, k) if target.ndim == 1 else target

    def _check_actions(self, actions: np.ndarray, k: int, part: Partition, column: str) -> np.ndarray:
        return check_target_actions(actions, k, part.source, column, part.row_id)
