"""Linear scores with cross-fitted fold models, as the fitted models predict them: the checks of a ``predict``
call's ``actions`` and ``row_id``, the linear scores X·coef + intercept, and predictions fold by fold (row i by
fold model fold(row_id_i), :func:`dr_scale.crossfit.parts.fold_of`, which never saw it).

:class:`FoldedLinearModel` is the one base of the models fitted so: the reward models
(:mod:`dr_scale.reward.models`) and the estimated logging policy (:mod:`dr_scale.propensity.model`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, overload

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.parts import fold_of
from dr_scale.io.parameter_files import (
    ParameterFileError,
    checked_features,
    checked_linear,
    linear_arrays,
    read_npz_file,
    spread_rows,
    stored_layout,
    used_rows,
    write_npz,
)


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


@overload
def checked_row_id(row_id: None, n: int) -> None:
    """No ids: None."""


@overload
def checked_row_id(row_id: ArrayLike, n: int) -> np.ndarray:
    """The ids as an array."""


def checked_row_id(row_id: ArrayLike | None, n: int) -> np.ndarray | None:
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


def used_columns(X, features: np.ndarray) -> sp.csr_matrix:
    """X's columns at the sorted feature ids ``features`` (m of them), as a CSR matrix (n, m): entry (i, j) is
    x_i[features[j]]. Each stored entry's id is looked up by ``np.searchsorted`` on ``features``; ids not among
    them are dropped (their coefficient is 0), so X'·coef_used = X·coef_dense term for term, in the same order.

    >>> X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0, 3.0]]))
    >>> used_columns(X, np.array([2, 3])).toarray()
    array([[2., 3.]])
    """
    X = sp.csr_matrix(X)
    ids = X.indices.astype(np.int64, copy=False)
    at = np.searchsorted(features, ids)
    hit = features[np.minimum(at, features.size - 1)] == ids
    indptr = np.concatenate([[0], np.cumsum(hit)])[X.indptr]  # the kept entries before each row's start
    return sp.csr_matrix((X.data[hit], at[hit].astype(np.int32), indptr), shape=(X.shape[0], features.size))


def model_arrays(model, kind: str | None = None) -> dict:
    """The arrays of a linear model's ``.npz``: ``coef``, ``intercept``, the fold models if any, ``metadata`` (JSON)
    and, for models other than the linear reward model, ``kind`` (what the scores mean: ``"logistic"``,
    ``"propensity"``); a model sized by use also ``features`` (the sorted ids of coef's rows) and ``n_features``
    (d, the hashed space)."""
    arrays = {"coef": model.coef, "intercept": model.intercept}
    if model.features is not None:
        arrays.update(features=model.features, n_features=np.array(model.n_features, dtype=np.int64))
    if model.folds:
        arrays.update(fold_coef=model.fold_coef, fold_intercept=model.fold_intercept,
                      fold_seed=np.array(model.fold_seed, dtype=np.int64))
    if model.metadata:
        arrays["metadata"] = np.array(json.dumps(model.metadata, sort_keys=True))
    if kind is not None:
        arrays["kind"] = np.array(kind)
    return arrays


def read_metadata(text: str) -> dict:
    """A model file's metadata from its JSON, λ as ``lam`` (files of the shared models written ``lambda``).

    >>> read_metadata('{"lambda": 10.0, "rows": 5}')
    {'lam': 10.0, 'rows': 5}
    """
    metadata = json.loads(text)
    if "lambda" in metadata and "lam" not in metadata:
        metadata = {("lam" if key == "lambda" else key): value for key, value in metadata.items()}
    return metadata


def save_model(model, url: str, storage_options: dict | None = None, kind: str | None = None) -> None:
    """Write :func:`model_arrays` as a ``.npz``, atomically (never a pickle)."""
    write_npz(url, storage_options, **model_arrays(model, kind))


def file_kind(arrays: dict) -> str:
    """The ``kind`` of a model file's arrays: ``"linear"`` when it has none (the ridge reward model's files)."""
    return str(arrays["kind"]) if "kind" in arrays else "linear"


class ModelFile(Protocol):
    """A class of model files: its ``KIND``, and ``from_arrays(arrays, where)`` reading a file's arrays."""

    KIND: ClassVar[str]

    @classmethod
    def from_arrays(cls, arrays: dict, where: str) -> Any:
        """The model of a file's ``arrays``; ``where`` names the file in errors."""


KIND_NAMES = {"linear": "a linear (ridge) reward model", "logistic": "a logistic reward model",
              "propensity": "a propensity model (the estimated logging policy)",
              "shared": "a shared reward model (over the actions' features)"}
#: Each model file's ``kind`` → the class that reads it (``cls.from_arrays``): the one table every loader
#: dispatches on (:func:`register_kind`, :func:`load_model_file`).
MODEL_FILES: dict[str, type[ModelFile]] = {}


def register_kind(cls):
    """Class decorator: files whose ``kind`` is ``cls.KIND`` are read by ``cls.from_arrays(arrays, where)``."""
    MODEL_FILES[cls.KIND] = cls
    return cls


def load_model_file(url: str, storage_options: dict | None, what: str, kinds: tuple[str, ...]):
    """The model in the ``.npz`` at ``url``, read once and made by the class registered for its ``kind``
    (:data:`MODEL_FILES`); a file of a kind not in ``kinds`` is a ``ParameterFileError`` naming the file (as
    ``what``, e.g. "reward model") and what it holds."""
    where = f"{what} {url}"
    arrays = read_npz_file(url, storage_options, where)
    kind = file_kind(arrays)
    if kind not in kinds or kind not in MODEL_FILES:
        raise ParameterFileError(f"{where}: holds {KIND_NAMES.get(kind, repr(kind))}, not "
                                 + " or ".join(KIND_NAMES.get(k, repr(k)) for k in kinds))
    return MODEL_FILES[kind].from_arrays(arrays, where)


def linear_model(cls, arrays: dict, where: str):
    """``cls(coef, intercept)`` with the fold models and metadata of a linear model file's ``arrays``; bad arrays
    a ``ParameterFileError`` naming ``where``."""
    arrays = linear_arrays(arrays, where)
    model = cls(arrays["coef"], arrays["intercept"])
    stored = stored_layout(arrays, where, model.coef.shape[0])
    if stored is not None:
        model.features, model.dimension = stored
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
            model.metadata = read_metadata(str(arrays["metadata"]))
    except (KeyError, ValueError, TypeError) as exc:
        raise ParameterFileError(f"{where}: bad cross-fitting arrays or metadata ({type(exc).__name__}: {exc})") \
            from None
    return model if model.features is not None else sized_by_use(model)


def sized_by_use(model):
    """A dense model (coef's rows are features 0 … d − 1) kept to the rows where it or a fold model has a non-zero
    weight: the same predictions, term for term (a feature of weight 0 adds exactly 0)."""
    used = used_rows(model.coef, model.fold_coef)
    model.dimension = model.coef.shape[0]
    model.coef = np.ascontiguousarray(model.coef[used])
    if model.fold_coef is not None:
        model.fold_coef = np.ascontiguousarray(model.fold_coef[:, used])
    model.features = used.astype(np.int64)
    return model


#: Where a fold model's docstring lists its fields (``FoldedLinearModel.__init_subclass__`` writes them).
FOLD_PARAMETERS = "    (the parameters of FoldedLinearModel)\n"


@dataclass
class FoldedLinearModel:
    """A linear model of k actions' scores s_a(x) = x·coef[:, a] + intercept[a], cross-fitted: the full-data model
    and, optionally, K fold models, fold model j fitted without the rows of fold j.

    A subclass maps the scores to what it predicts (ρ̂ for the reward models, π̂₀ for the propensity model) and
    names its file's ``KIND``. Given the rows' ids, row i is predicted by fold model fold(row_id_i)
    (:func:`~dr_scale.crossfit.parts.fold_of` keyed by ``fold_seed``), which never saw it; without ids, by the
    full-data model. Saved as a ``.npz`` of arrays and JSON (:func:`save_model`, :func:`load_model_file`), never a
    pickle.

    Parameters
    ----------
    coef : numpy.ndarray, shape (d, k)
        The full-data model's weights, finite.
    intercept : numpy.ndarray, shape (k,)
        The full-data model's intercepts, finite.
    fold_coef : numpy.ndarray, shape (K, d, k), optional
        The fold models' weights (cross-fitted models only).
    fold_intercept : numpy.ndarray, shape (K, k), optional
        The fold models' intercepts (with ``fold_coef``).
    fold_seed : int, default 0
        The key of the rows' folds (:func:`~dr_scale.crossfit.parts.fold_of`).
    metadata : dict, optional
        What the fit recorded (λ, rows per action, folds, the data's fingerprint …; saved as JSON).
    features : numpy.ndarray, shape (m,), optional
        The sorted feature ids of coef's rows (the features the training rows have; all others weigh 0), with
        ``dimension`` = d; None: coef's rows are the features 0 … d − 1.
    dimension : int, default 0
        d, the hashed feature space, for a model with ``features``.
    """

    coef: np.ndarray
    intercept: np.ndarray
    fold_coef: np.ndarray | None = None
    fold_intercept: np.ndarray | None = None
    fold_seed: int = 0
    metadata: dict = field(default_factory=dict)
    features: np.ndarray | None = None
    dimension: int = 0
    #: Per thread, the last ``X`` mapped to the used features and its mapping, ``.last = (X, mapped)``
    #: (:meth:`checked_call`): one holder shared with the fold models (:meth:`fold_model`), so that every action,
    #: fold model and policy predicted on a part shares one mapping while other threads predict other parts.
    _mapped: threading.local = field(default_factory=threading.local, init=False, repr=False, compare=False)
    #: The fold models made so far (:meth:`fold_model`), each made once.
    _fold_models: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    #: What the scores mean, saved in the file (a linear reward model's file has no ``kind``: "linear").
    KIND: ClassVar[str] = "linear"
    #: The model in messages: ``"reward model"`` → "reward model FILE: …".
    WHAT: ClassVar[str] = "model"

    def __init_subclass__(cls, **kwargs):
        """Write this class's Parameters into a subclass's docstring where it says :data:`FOLD_PARAMETERS` (the
        fields are these, documented once)."""
        super().__init_subclass__(**kwargs)
        if cls.__doc__ and FOLD_PARAMETERS in cls.__doc__:
            ours = FoldedLinearModel.__doc__
            start = ours.index("    ----------\n", ours.index("Parameters")) + len("    ----------\n")
            cls.__doc__ = cls.__doc__.replace(FOLD_PARAMETERS, ours[start:].rstrip() + "\n")

    def __post_init__(self):
        self.coef, self.intercept = checked_linear(self.coef, self.intercept, type(self).__name__)
        if self.features is not None:
            self.check_features()

    def __getstate__(self) -> dict:
        """The fields without the mapping of the last ``X`` and the fold models made (a model sent to a worker carries
        no part, and its fold models are made again from ``fold_coef``)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_mapped", "_fold_models")}

    def __setstate__(self, state: dict) -> None:
        """The fields, with an empty mapping holder and no fold models made."""
        self.__dict__.update(state, _mapped=threading.local(), _fold_models={})

    def check_features(self) -> None:
        """``features``: int64, strictly increasing ids in [0, ``dimension``), one per row of ``coef`` (else a
        ``ValueError``; :func:`~dr_scale.io.parameter_files.checked_features`)."""
        self.features = checked_features(self.features, self.coef.shape[0], self.dimension)

    @property
    def n_actions(self) -> int:
        """k, the number of actions."""
        return self.coef.shape[1]

    @property
    def n_features(self) -> int:
        """d, the number of features (the hashed space; coef has a row for each of ``features`` only, if set)."""
        return self.dimension if self.features is not None else self.coef.shape[0]

    def full_coef(self) -> np.ndarray:
        """The full-data model's weights over all d features (d, k), zeros where ``features`` has no row."""
        if self.features is None:
            return self.coef
        return spread_rows(self.coef, self.features, self.n_features)

    @property
    def folds(self) -> int:
        """K, the number of fold models (0: not cross-fitted)."""
        return 0 if self.fold_coef is None else self.fold_coef.shape[0]

    def checked_call(self, X, actions, row_id) -> tuple:
        """(X, actions, row_id) of a ``predict`` call, checked: ``X`` a 2-d array or sparse matrix of at most d
        columns (fewer: the absent features are 0, as for a linear policy), :func:`checked_actions`,
        :func:`checked_row_id`."""
        if not (sp.issparse(X) or isinstance(X, np.ndarray)) or X.ndim != 2:
            raise ParameterError(f"`X` must be a 2-d numpy array or scipy sparse matrix (n, d), got "
                                 f"{type(X).__name__}{f' of shape {X.shape}' if hasattr(X, 'shape') else ''}")
        actions = checked_actions(actions, self.n_actions)
        row_id = checked_row_id(row_id, X.shape[0])
        if X.shape[1] > self.n_features:
            raise ParameterError(f"`X` has {X.shape[1]} columns; the model has d = {self.n_features} features")
        if self.features is not None:  # once per part: the same X again (another action, policy) reuses it
            seen, mapped = getattr(self._mapped, "last", (None, None))
            if seen is not X:
                mapped = used_columns(X, self.features)
                self._mapped.last = (X, mapped)
            return mapped, actions, row_id
        if X.shape[1] < self.n_features:
            X = sp.csr_matrix(X)
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], self.n_features))
        return X, actions, row_id

    def by_fold(self, X, row_id, width: int, predict: Callable) -> np.ndarray:
        """``predict(coef, intercept, X)`` of the full-data model, or, given the rows' ids and fold models, of
        each row's fold model (:func:`predict_by_fold`): (n, ``width``)."""
        fold_coef, fold_intercept = self.fold_coef, self.fold_intercept
        if row_id is None or fold_coef is None or fold_intercept is None or not self.folds:
            return predict(self.coef, self.intercept, X)
        return predict_by_fold(X, fold_of(np.asarray(row_id), self.folds, self.fold_seed), width,
                               lambda j, rows: predict(fold_coef[j], fold_intercept[j], rows))

    def fold_model(self, j: int):
        """Fold model j alone, as a model without folds (it predicts every row; the fold models' spread gives the
        reward model's standard error, :func:`dr_scale.ope.estimators.fold_jackknife`)."""
        if self.fold_coef is None or self.fold_intercept is None or not 0 <= j < self.folds:
            raise ParameterError(f"the model has {self.folds} fold models; there is no fold model {j}")
        model = self._fold_models.get(j)
        if model is None:  # made (and its arrays checked) once, not on every part it predicts
            model = replace(self, coef=self.fold_coef[j], intercept=self.fold_intercept[j], fold_coef=None,
                            fold_intercept=None, metadata={})
            model._mapped = self._mapped  # the same features: the same mapping of a part's X
            self._fold_models[j] = model
        return model

    def parameters(self) -> tuple[np.ndarray, ...]:
        """The arrays that determine the predictions (for digests)."""
        used = () if self.features is None else (self.features, np.array([self.dimension]))
        if self.fold_coef is None or self.fold_intercept is None or not self.folds:
            return (self.coef, self.intercept, *used)
        return (self.coef, self.intercept, self.fold_coef, self.fold_intercept, np.array([self.fold_seed]), *used)

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` atomically: ``coef``, ``intercept``, the fold models if any, ``metadata`` (JSON) and,
        but for a linear reward model, ``kind``.

        Parameters
        ----------
        url : str
            The file to write, any fsspec URL.
        storage_options : dict, optional
            fsspec's options for ``url`` (credentials otherwise from the environment).
        """
        save_model(self, url, storage_options, None if self.KIND == "linear" else self.KIND)

    @classmethod
    def from_arrays(cls, arrays: dict, where: str):
        """The model of a file's arrays (:func:`linear_model`)."""
        return linear_model(cls, arrays, where)

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None):
        """Read a model saved by :meth:`save`, a file of this class's ``KIND``; anything else is a
        ``ParameterFileError`` naming the file.

        Parameters
        ----------
        url : str
            The ``.npz`` file, any fsspec URL.
        storage_options : dict, optional
            fsspec's options for ``url``.

        Returns
        -------
        FoldedLinearModel
            The model, with its fold models and metadata if the file has them.
        """
        return load_model_file(url, storage_options, cls.WHAT, (cls.KIND,))
