"""Full-information → bandit conversion (paper, Sec. 5.1.1).

A k-class example (x, c) becomes the cost-sensitive example (x, l_1, …, l_k) with
l_a = 1{a ≠ c}. A logging policy with probabilities p(·|x) draws a ~ p(·|x) and only
l_a is revealed: the bandit example (x, a, l_a, p(a|x)). The paper logs uniformly,
p ≡ 1/k. Draws are keyed by (seed, purpose, keys…, row_id) through
:mod:`dr_scale.core.keyed_random`, so a conversion does not depend on row order or on
how the work is split.

The learners (:mod:`dr_scale.learning`) take rewards: r_a = −l_a, imputed for every
action by :func:`dr_scale.learning.impute.impute_rewards`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dr_scale.core import keyed_random
from dr_scale.core.errors import ParameterError
from dr_scale.logs.sparse import csr_to_features

LOGGING_PURPOSE = "classification-logging"


def losses_from_labels(y: np.ndarray, n_classes: int) -> np.ndarray:
    """The cost-sensitive form of labels: L[i, a] = 1{a ≠ y_i}, shape (n, k)."""
    y = np.asarray(y, dtype=np.int64)
    return (np.arange(n_classes)[None, :] != y[:, None]).astype(np.float64)


@dataclass
class BanditData:
    """Partially labelled data: the logged action, its revealed loss and its propensity."""

    row_id: np.ndarray  # int64 (n,)
    X: np.ndarray  # (n, d)
    action: np.ndarray  # int64 (n,)
    loss: np.ndarray  # float64 (n,), l_{a_i}
    propensity: np.ndarray  # float64 (n,), p(a_i | x_i)
    n_actions: int

    def to_table(self) -> pa.Table:
        """The core's logged-data contract (reward = −loss; dense x as features + values)."""
        import scipy.sparse as sp

        X = sp.csr_matrix(self.X)
        values = pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)), pa.array(X.data.astype(np.float32)))
        return pa.table({
            "row_id": pa.array(self.row_id, pa.int64()),
            "features": csr_to_features(X),
            "values": values,
            "action": pa.array(self.action, pa.int32()),
            "reward": pa.array(-self.loss, pa.float64()),
            "propensity": pa.array(self.propensity, pa.float64()),
        })


def log_actions(row_id: np.ndarray, n_actions: int, seed: int, *keys: int, probs: np.ndarray | None = None):
    """Logged actions a_i ~ p(·|x_i) and their propensities, keyed by row id.

    ``probs`` (n, k) is the logging policy; None is uniform logging, p ≡ 1/k.
    """
    row_id = np.asarray(row_id, dtype=np.int64)
    if probs is None:
        u = keyed_random.uniform(row_id, seed, LOGGING_PURPOSE, *keys)
        action = np.minimum((u * n_actions).astype(np.int64), n_actions - 1)
        return action, np.full(row_id.shape[0], 1.0 / n_actions)
    probs = np.asarray(probs, dtype=np.float64)
    if probs.shape != (row_id.shape[0], n_actions):
        raise ParameterError(f"logging probabilities `probs` must have shape ({row_id.shape[0]}, {n_actions}), "
                             f"got {probs.shape}")
    if np.any(probs < 0) or not np.allclose(probs.sum(axis=1), 1.0):
        raise ParameterError("logging probabilities `probs` must be non-negative and sum to 1 in every row")
    action = keyed_random.categorical(probs, row_id, seed, LOGGING_PURPOSE, *keys)
    return action, probs[np.arange(row_id.shape[0]), action]


def to_bandit(X, losses, seed: int, *keys: int, row_id=None, probs=None) -> BanditData:
    """Reveal one loss per example: a ~ p(·|x) (uniform by default), keep (x, a, l_a, p(a|x))."""
    losses = np.asarray(losses, dtype=np.float64)
    n, k = losses.shape
    row_id = np.arange(n, dtype=np.int64) if row_id is None else np.asarray(row_id, dtype=np.int64)
    action, propensity = log_actions(row_id, k, seed, *keys, probs=probs)
    return BanditData(row_id, np.asarray(X), action, losses[np.arange(n), action], propensity, k)
