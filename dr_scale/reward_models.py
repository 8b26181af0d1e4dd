"""Reward models ρ̂_a(x): anything with ``predict(X) -> (n, k)``.

:class:`LinearRewardModel` is ρ̂_a(x) = x·w_a + b_a, the form of the paper's ridge
models, saved as a small ``.npz`` (no pickle) so a file from a colleague is data,
not code. A model whose ``predict`` also takes ``actions`` (as this one does) lets an
evaluation compute only the columns it uses (:func:`predict_columns`).
"""

from __future__ import annotations

import inspect
import io
from dataclasses import dataclass

import numpy as np

from dr_scale.atomic import atomic_write, url_to_fs


@dataclass
class LinearRewardModel:
    """ρ̂_a(x) = x·coef[:, a] + intercept[a];  coef has shape (d, k)."""

    coef: np.ndarray
    intercept: np.ndarray

    @property
    def n_actions(self) -> int:
        return self.coef.shape[1]

    @property
    def n_features(self) -> int:
        return self.coef.shape[0]

    def predict(self, X, actions=None) -> np.ndarray:
        """ρ̂ for the rows of X: (n, k), or (n, len(actions)) for the given actions' columns only.

        Up to three columns are one sparse mat-vec each: scipy's multi-vector kernel
        (``csr_matvecs``) takes ~15.5 ms for two columns of a 100,000 × 5000 CSR with 40
        stored values per row where two products take ~9 ms (docs/data-contract.md).
        """
        coef, intercept = (self.coef, self.intercept) if actions is None else (self.coef[:, actions],
                                                                                self.intercept[actions])
        if coef.shape[1] <= 3:
            return np.column_stack([X @ np.ascontiguousarray(c) for c in coef.T]) + intercept
        return np.asarray(X @ coef) + intercept

    def save(self, url: str, storage_options: dict | None = None) -> None:
        buf = io.BytesIO()
        np.savez(buf, coef=self.coef, intercept=self.intercept)
        fs, path = url_to_fs(url, storage_options)
        atomic_write(fs, path, buf.getvalue())

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> "LinearRewardModel":
        fs, path = url_to_fs(url, storage_options)
        with fs.open(path, "rb") as f, np.load(io.BytesIO(f.read()), allow_pickle=False) as z:
            coef = np.asarray(z["coef"], dtype=np.float64)
            return cls(coef.reshape(coef.shape[0], -1), np.asarray(z["intercept"], dtype=np.float64).ravel())


def predict_columns(model, X, actions: np.ndarray) -> np.ndarray:
    """ρ̂_a(x_i) for the given actions only: (n, len(actions)).

    A model whose ``predict`` takes ``actions`` computes just those columns; any other
    model predicts all k and the columns are picked.
    """
    if actions.size == 0:
        return np.zeros((X.shape[0], 0))
    if "actions" in inspect.signature(model.predict).parameters:
        return np.asarray(model.predict(X, actions=actions), dtype=np.float64)
    return np.asarray(model.predict(X), dtype=np.float64)[:, actions]
