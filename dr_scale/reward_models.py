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
from dr_scale.errors import UserError


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

    def __post_init__(self):
        self.coef, self.intercept = checked_parameters(self.coef, self.intercept, "LinearRewardModel")

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> "LinearRewardModel":
        """Read a model saved by :meth:`save`; anything else is a :class:`ModelError` naming the file."""
        fs, path = url_to_fs(url, storage_options)
        if fs.isdir(path):
            raise ModelError(f"reward model {url}: is a folder; give the .npz file")
        if not fs.exists(path):
            raise ModelError(f"reward model {url}: no such file")
        with fs.open(path, "rb") as f:
            raw = f.read()
        try:
            with np.load(io.BytesIO(raw), allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files} if isinstance(z, np.lib.npyio.NpzFile) else None
        except Exception as exc:  # noqa: BLE001 - any reader failure is a bad model file
            raise ModelError(f"reward model {url}: not a readable .npz file ({type(exc).__name__}: {exc})") from None
        if arrays is None or "coef" not in arrays or "intercept" not in arrays:
            found = ", ".join(sorted(arrays)) if arrays else "a single array"
            raise ModelError(f"reward model {url}: expected arrays 'coef' (d × k) and 'intercept' (k), found {found}")
        coef, intercept = checked_parameters(arrays["coef"], arrays["intercept"], f"reward model {url}")
        return cls(coef, intercept)


class ModelError(UserError):
    """A reward model file or object that cannot be used: the message names it and what is wrong."""


def checked_parameters(coef, intercept, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(coef (d, k), intercept (k,)) as finite float64 arrays, or a :class:`ModelError`."""
    coef, intercept = np.asarray(coef), np.asarray(intercept)
    for name, a in (("coef", coef), ("intercept", intercept)):
        if a.dtype.kind not in "biuf":
            raise ModelError(f"{where}: '{name}' holds {a.dtype}, expected numbers")
    if coef.ndim == 1:
        coef = coef[:, None]
    if coef.ndim != 2 or coef.shape[0] < 1 or coef.shape[1] < 1:
        raise ModelError(f"{where}: 'coef' has shape {coef.shape}, expected (d, k) with d, k ≥ 1")
    intercept = intercept.reshape(-1) if intercept.ndim <= 1 or intercept.size == coef.shape[1] else intercept
    if intercept.shape != (coef.shape[1],):
        raise ModelError(f"{where}: 'intercept' has shape {intercept.shape}, expected ({coef.shape[1]},) — one per "
                         f"action of 'coef' {coef.shape}")
    coef, intercept = coef.astype(np.float64), intercept.astype(np.float64)
    for name, a in (("coef", coef), ("intercept", intercept)):
        if not np.isfinite(a).all():
            raise ModelError(f"{where}: '{name}' has NaN or infinite entries (e.g. at index "
                             f"{tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])})")
    return coef, intercept


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
