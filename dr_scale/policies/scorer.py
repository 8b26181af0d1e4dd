"""A scorer over the actions' features that takes the top K (spec ``scorer:``), and its file."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dr_scale.core.errors import UserError
from dr_scale.crossfit.folded import used_columns
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.io.parameter_files import (
    ParameterFileError,
    checked_features,
    file_metadata,
    read_npz_file,
    stored_layout,
    used_rows,
)
from dr_scale.logs.contract import Partition
from dr_scale.policies.base import Policy, PolicyMismatch, parameters_digest
from dr_scale.policies.distributions import SparseProbs


def top_k_softmax(scores: np.ndarray, top_k: int, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """The K highest scores of each row (ties: the lower action) and their softmax at temperature T, (n, K) each,
    in decreasing score order."""
    n, k = scores.shape
    top_k = min(top_k, k)
    if top_k < k:
        part = np.argpartition(scores, k - top_k, axis=1)[:, k - top_k:]
    else:
        part = np.broadcast_to(np.arange(k), (n, k))
    chosen = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -chosen), axis=1) if n else np.zeros((0, top_k), dtype=np.int64)
    actions = np.take_along_axis(part, order, axis=1).astype(np.int64)
    chosen = np.take_along_axis(chosen, order, axis=1)
    with np.errstate(over="ignore", under="ignore"):
        probs = np.exp((chosen - chosen[:, :1]) / temperature)
    probs /= probs.sum(axis=1, keepdims=True)
    return actions, probs


@dataclass(eq=False)
class ItemScorerPolicy(Policy):
    """A policy that scores the actions by their features and takes the top K: spec ``scorer:POLICY.npz``.

        s(x, a) = x·coef·f_a + bias_a,    π(a|x) = exp(s(x, a)/T) / Σ_{b ∈ top_K(x)} exp(s(x, b)/T)  for a ∈ top_K(x)

    (0 for the other actions), with f_a the action's features (row a of ``item_features``), top_K(x) the K
    highest scores (ties to the lower action) and T > 0 the temperature; K = 1 is the deterministic
    argmax_a s(x, a). The distribution is :class:`~dr_scale.policies.distributions.SparseProbs`: scores are
    computed ``chunk`` rows at a time, so memory is O(chunk·k + n·K), never (n, k).

    Sized by use: with ``features``, coef has a row for each of those context feature ids only (of d = ``dimension``
    hashed ones; the others weigh 0), and each chunk's X is read at them
    (:func:`~dr_scale.crossfit.folded.used_columns`); a learned scorer holds the features its training rows have,
    and :meth:`save` writes the rows of coef that are not all 0.

    Parameters
    ----------
    coef : numpy.ndarray, shape (d, D_A)
        The bilinear weights between the context's d features and the action's D_A features.
    item_features : numpy.ndarray, shape (k, D_A)
        f_a per action.
    item_bias : numpy.ndarray, shape (k,), optional
        bias_a (default 0).
    top_k : int, default 10
        K.
    temperature : float, default 1.0
        T > 0.
    source : str, default "<in memory>"
        Where the parameters came from, for messages.
    chunk : int, default 1024
        Rows scored at a time (memory O(chunk·k)).
    metadata : dict, optional
        How it was made (a learned scorer's method, λ and training record), saved with it as JSON.
    features : numpy.ndarray, shape (m,), optional
        The sorted context feature ids of coef's rows (None: the rows are the features 0 … d − 1).
    dimension : int
        d, the hashed context space, with ``features``.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0]]))  # 2 rows, d = 2
    >>> part = Partition("<example>", row_id=np.arange(2), X=X, action=np.array([0, 1]),
    ...                  reward=np.array([1.0, 0.0]), propensity=np.full(2, 0.25), table=pa.table({}))
    >>> policy = ItemScorerPolicy(coef=np.eye(2), item_features=np.array([[1.0, 0], [0, 1], [2, 0], [0.5, 0.5]]),
    ...                           top_k=2, temperature=1.0)
    >>> target = policy.distribution(part, 4)
    >>> target.actions.tolist(), target.probs.round(3).tolist()
    ([[2, 0], [1, 3]], [[0.731, 0.269], [0.622, 0.378]])
    """

    coef: np.ndarray
    item_features: np.ndarray
    item_bias: np.ndarray | None = None
    top_k: int = 10
    temperature: float = 1.0
    source: str = "<in memory>"
    chunk: int = 1024
    metadata: dict = field(default_factory=dict)
    features: np.ndarray | None = None
    dimension: int = 0
    needs_features = True

    def __post_init__(self) -> None:
        self.coef = np.asarray(self.coef, dtype=np.float64)
        self.item_features = np.asarray(self.item_features, dtype=np.float64)
        if self.coef.ndim != 2 or self.item_features.ndim != 2 or self.coef.shape[1] != self.item_features.shape[1]:
            raise UserError(f"policy {self.source}: coef must be (d, D_A) and item_features (k, D_A), got "
                            f"{self.coef.shape} and {self.item_features.shape}")
        k = self.item_features.shape[0]
        self.item_bias = np.zeros(k) if self.item_bias is None else np.asarray(self.item_bias, dtype=np.float64)
        if self.item_bias.shape != (k,):
            raise UserError(f"policy {self.source}: item_bias must have one value per action ({k})")
        if self.features is not None:
            try:
                self.features = checked_features(self.features, self.coef.shape[0], int(self.dimension))
            except ValueError as exc:
                raise UserError(f"policy {self.source}: {exc}") from None
        if not all(np.isfinite(a).all() for a in (self.coef, self.item_features, self.item_bias)):
            raise UserError(f"policy {self.source}: its parameters must be finite")
        if isinstance(self.top_k, bool) or int(self.top_k) != self.top_k or not 1 <= self.top_k:
            raise UserError(f"policy {self.source}: top_k must be a positive integer, got {self.top_k}")
        self.top_k = int(self.top_k)
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise UserError(f"policy {self.source}: the temperature must be a positive finite number, "
                            f"got {self.temperature}")
        self.n_actions = k
        rows = np.arange(self.coef.shape[0]) if self.features is None else self.features
        self.digest = parameters_digest(self.coef, self.item_features, self.item_bias,
                                        np.array([self.top_k, self.temperature]), rows)

    @property
    def n_features(self) -> int:
        """d, the context features (coef has a row for each of ``features`` only, if set)."""
        return int(self.dimension) if self.features is not None else self.coef.shape[0]

    def scores(self, X: sp.csr_matrix | np.ndarray) -> np.ndarray:
        """s(x_i, a) for every action, (n, k), for a few rows at a time; X's features beyond d weigh 0."""
        X = sp.csr_matrix(X)
        if self.features is not None:
            X = used_columns(X, self.features)
        else:
            d = self.coef.shape[0]
            X = X[:, :d] if X.shape[1] > d else X
        coef = self.coef if X.shape[1] == self.coef.shape[0] else self.coef[:X.shape[1]]
        out: np.ndarray = np.asarray(X @ coef) @ self.item_features.T + self.item_bias
        return out

    def distribution(self, part: Partition, k: int) -> SparseProbs:
        """The top K items by s(x_i, a) and their softmax probabilities at the temperature, in chunks of rows."""
        if k != self.n_actions:
            raise PolicyMismatch(part.source, "action", f"the log has {k} actions, the policy {self.source} has "
                                                        f"{self.n_actions}")
        X = part.X
        assert X is not None  # read with its features (needs_features)
        n, width = len(part), min(self.top_k, k)
        actions, probs = np.zeros((n, width), dtype=np.int64), np.zeros((n, width))
        for lo in range(0, n, self.chunk):
            hi = min(n, lo + self.chunk)
            actions[lo:hi], probs[lo:hi] = top_k_softmax(self.scores(X[lo:hi]), width, self.temperature)
        return SparseProbs(actions, probs, k)

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` (coef, item_features, item_bias, top_k, temperature, metadata as JSON) atomically,
        sized by use: coef's rows that are not all 0, ``features`` their sorted ids and ``n_features`` d."""
        buf = io.BytesIO()
        assert self.item_bias is not None  # set in __post_init__
        rows = np.arange(self.coef.shape[0]) if self.features is None else self.features
        keep = used_rows(self.coef)
        np.savez(buf, coef=self.coef[keep], features=rows[keep], n_features=np.array(self.n_features, dtype=np.int64),
                 item_features=self.item_features, item_bias=self.item_bias,
                 top_k=np.array(self.top_k), temperature=np.array(self.temperature),
                 metadata=np.array(json.dumps(self.metadata)))
        fs, path = url_to_fs(url, storage_options)
        atomic_write(fs, path, buf.getvalue())

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> ItemScorerPolicy:
        """Read a policy saved by :meth:`save`; anything else is a ``ParameterFileError`` naming the file."""
        arrays = read_npz_file(url, storage_options, f"policy {url}")
        missing = [key for key in ("coef", "item_features", "top_k", "temperature") if key not in arrays]
        if missing:
            raise ParameterFileError(f"policy {url}: no {', '.join(missing)} in the file (a scorer policy has coef, "
                                     "item_features, item_bias, top_k, temperature)")
        meta = file_metadata(arrays, f"policy {url}")
        stored = stored_layout(arrays, f"policy {url}", len(np.atleast_1d(arrays["coef"])))
        features, dimension = (None, 0) if stored is None else stored
        return cls(arrays["coef"], arrays["item_features"], arrays.get("item_bias"), int(arrays["top_k"]),
                   float(arrays["temperature"]), url, metadata=meta, features=features,
                   dimension=dimension)

    def __str__(self) -> str:
        return f"scorer:{self.source} (sha256 {self.digest[:12]})"
