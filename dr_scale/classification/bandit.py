"""Full-information → bandit conversion (paper, Sec. 5.1.1) and loss imputation.

A k-class example (x, c) becomes the cost-sensitive example (x, l_1, …, l_k) with
l_a = 1{a ≠ c}. A logging policy with probabilities p(·|x) draws a ~ p(·|x) and only
l_a is revealed: the bandit example (x, a, l_a, p(a|x)). The paper logs uniformly,
p ≡ 1/k. Draws are keyed by (seed, purpose, keys…, row_id) through
:mod:`dr_scale.keyed_random`, so a conversion does not depend on row order or on
how the work is split.

The revealed losses impute every action's loss for cost-sensitive learners (Sec. 5.1.3):

* IPS:  l̂_a(x_i) = l_{a_i} 1{a = a_i} / p_i,
* DR:   l̂_a(x_i) = ŵ_a·x_i + (l_{a_i} − ŵ_{a_i}·x_i) 1{a = a_i} / p_i,

both unbiased for l_a(x_i) when p_i is the true logging probability (eq. 1 per action).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dr_scale import keyed_random
from dr_scale.logdata import csr_to_features

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
        raise ValueError(f"logging probabilities must have shape ({row_id.shape[0]}, {n_actions}), got {probs.shape}")
    if np.any(probs < 0) or not np.allclose(probs.sum(axis=1), 1.0):
        raise ValueError("logging probabilities must be non-negative and sum to 1 in every row")
    action = keyed_random.categorical(probs, row_id, seed, LOGGING_PURPOSE, *keys)
    return action, probs[np.arange(row_id.shape[0]), action]


def to_bandit(X, losses, seed: int, *keys: int, row_id=None, probs=None) -> BanditData:
    """Reveal one loss per example: a ~ p(·|x) (uniform by default), keep (x, a, l_a, p(a|x))."""
    losses = np.asarray(losses, dtype=np.float64)
    n, k = losses.shape
    row_id = np.arange(n, dtype=np.int64) if row_id is None else np.asarray(row_id, dtype=np.int64)
    action, propensity = log_actions(row_id, k, seed, *keys, probs=probs)
    return BanditData(row_id, np.asarray(X), action, losses[np.arange(n), action], propensity, k)


def impute_losses(data: BanditData, method: str, loss_hat: np.ndarray | None = None) -> np.ndarray:
    """Every action's imputed loss, (n, k), by ``"ips"`` or ``"dr"`` (module docstring).

    ``loss_hat`` is the loss model's prediction ŵ_a·x_i, shape (n, k), needed by DR.
    """
    n, k = data.X.shape[0], data.n_actions
    revealed = np.zeros((n, k))
    revealed[np.arange(n), data.action] = data.loss / data.propensity
    if method == "ips":
        return revealed
    if method != "dr":
        raise ValueError(f"unknown imputation {method!r}; choose 'ips' or 'dr'")
    if loss_hat is None or loss_hat.shape != (n, k):
        raise ValueError(f"DR imputation needs loss_hat of shape ({n}, {k})")
    correction = np.zeros((n, k))
    correction[np.arange(n), data.action] = loss_hat[np.arange(n), data.action] / data.propensity
    return loss_hat + revealed - correction
