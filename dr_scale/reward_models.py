"""Reward models ρ̂_a(x): anything with ``predict(X) -> (n, k)``.

:class:`LinearRewardModel` is ρ̂_a(x) = x·w_a + b_a, the form of the paper's ridge
models, saved as a small ``.npz`` (no pickle) so a file from a colleague is data,
not code.
"""

from __future__ import annotations

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

    def predict(self, X) -> np.ndarray:
        return np.asarray(X @ self.coef) + self.intercept

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
