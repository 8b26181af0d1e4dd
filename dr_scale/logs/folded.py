"""Linear scores with cross-fitted fold models, as the fitted models predict them: the checks of a ``predict``
call's ``actions`` and ``row_id``, the linear scores X·coef + intercept, and predictions fold by fold (row i by
fold model fold(row_id_i), :func:`dr_scale.logs.parts.fold_of`, which never saw it).

Shared by the reward models (:mod:`dr_scale.reward.models`) and the estimated logging policy
(:mod:`dr_scale.propensity.model`).
"""

from __future__ import annotations

import io
import json

import numpy as np

from dr_scale.core.errors import ParameterError
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.io.parameter_files import ParameterFileError, read_linear_file


def checked_actions(actions, k: int) -> np.ndarray | None:
    """``actions`` of a ``predict`` call as int64 indices in [0, k), or None for all; anything else a
    :class:`~dr_scale.core.errors.ParameterError` naming ``actions`` (a negative index would silently
    pick another action's column)."""
    if actions is None:
        return None
    a = np.asarray(actions)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise ParameterError(f"`actions` must be a 1-d sequence of integer actions in [0, {k}), got "
                             f"{a.dtype} of shape {a.shape}")
    a = a.astype(np.int64, copy=False)
    if a.size and (a.min() < 0 or a.max() >= k):
        bad = int(a[(a < 0) | (a >= k)][0])
        raise ParameterError(f"`actions` must be in [0, {k}) (the model's k actions), got {bad}")
    return a


def checked_row_id(row_id, n: int) -> np.ndarray | None:
    """``row_id`` of a ``predict`` call: one integer id per row of ``X`` (n), or None."""
    if row_id is None:
        return None
    rid = np.asarray(row_id)
    if rid.ndim != 1 or rid.shape[0] != n:
        raise ParameterError(f"`row_id` has {rid.shape[0] if rid.ndim == 1 else rid.shape} id(s) for the {n} rows of "
                             "`X`: give one per row")
    if rid.size and rid.dtype.kind not in "iu":
        raise ParameterError(f"`row_id` must be integers, got {rid.dtype}")
    return rid


def predict_by_fold(X, fold: np.ndarray, width: int, predict_fold) -> np.ndarray:
    """(n, width) predictions, the rows of fold j by ``predict_fold(j, X[rows of fold j])``."""
    out = np.empty((X.shape[0], width))
    for j in np.unique(fold):
        rows = np.flatnonzero(fold == j)
        out[rows] = predict_fold(int(j), X[rows])
    return out


def _linear(X, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """X·coef + intercept. Up to three columns are one sparse mat-vec each: scipy's multi-vector kernel
    (``csr_matvecs``) is slower than that for so few columns (docs/data-contract.md)."""
    if coef.shape[1] <= 3:
        return np.column_stack([X @ np.ascontiguousarray(c) for c in coef.T]) + intercept
    return np.asarray(X @ coef) + intercept


def model_arrays(model, kind: str | None = None) -> dict:
    """The arrays of a linear model's ``.npz``: ``coef``, ``intercept``, the fold models if any, ``metadata`` (JSON)
    and, for models other than the linear reward model, ``kind`` (what the scores mean: ``"logistic"``,
    ``"propensity"``)."""
    arrays = {"coef": model.coef, "intercept": model.intercept}
    if model.folds:
        arrays.update(fold_coef=model.fold_coef, fold_intercept=model.fold_intercept,
                      fold_seed=np.array(model.fold_seed, dtype=np.int64))
    if model.metadata:
        arrays["metadata"] = np.array(json.dumps(model.metadata, sort_keys=True))
    if kind is not None:
        arrays["kind"] = np.array(kind)
    return arrays


def save_model(model, url: str, storage_options: dict | None = None, kind: str | None = None) -> None:
    """Write :func:`model_arrays` as a ``.npz``, atomically (never a pickle)."""
    buf = io.BytesIO()
    np.savez(buf, **model_arrays(model, kind))
    fs, path = url_to_fs(url, storage_options)
    atomic_write(fs, path, buf.getvalue())


def file_kind(arrays: dict) -> str:
    """The ``kind`` of a model file's arrays: ``"linear"`` when it has none (the ridge reward model's files)."""
    return str(arrays["kind"]) if "kind" in arrays else "linear"


KIND_NAMES = {"linear": "a linear (ridge) reward model", "logistic": "a logistic reward model",
              "propensity": "a propensity model (the estimated logging policy)"}


def load_model(cls, url: str, storage_options: dict | None, where: str, kind: str = "linear",
               arrays: dict | None = None):
    """``cls(coef, intercept)`` with the fold models and metadata of the ``.npz`` at ``url`` (``arrays``: already
    read), a file of ``kind`` (:func:`file_kind`); anything else a ``ParameterFileError`` naming ``where``."""
    arrays = read_linear_file(url, storage_options, where) if arrays is None else arrays
    if file_kind(arrays) != kind:
        found = file_kind(arrays)
        raise ParameterFileError(f"{where}: holds {KIND_NAMES.get(found, repr(found))}, not "
                                 f"{KIND_NAMES.get(kind, repr(kind))}")
    model = cls(arrays["coef"], arrays["intercept"])
    try:
        if "fold_coef" in arrays:
            model.fold_coef = np.asarray(arrays["fold_coef"], dtype=np.float64).reshape(-1, *model.coef.shape)
            model.fold_intercept = np.asarray(arrays["fold_intercept"], dtype=np.float64).reshape(
                -1, model.coef.shape[1])
            model.fold_seed = int(arrays["fold_seed"])
            if model.fold_coef.shape[0] != model.fold_intercept.shape[0] or not model.fold_coef.shape[0]:
                raise ValueError("the fold models' coef and intercept disagree on the number of folds")
            if not (np.isfinite(model.fold_coef).all() and np.isfinite(model.fold_intercept).all()):
                raise ValueError("the fold models have NaN or infinite entries")
        if "metadata" in arrays:
            model.metadata = json.loads(str(arrays["metadata"]))
    except (KeyError, ValueError, TypeError) as exc:
        raise ParameterFileError(f"{where}: bad cross-fitting arrays or metadata ({type(exc).__name__}: {exc})") \
            from None
    return model
