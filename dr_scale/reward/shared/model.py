"""The shared reward models over the actions' features: ρ̂(x, a) = b + x·β_x + f_a·β_f + x·B·f_a (ridge) and
σ(b + x·β_x + f_a·β_f + x·B·f_a) (0/1 rewards), their predictions, fold models, parameter layout and ``.npz`` files.

Sized by use: β_x and B's rows are kept for the context features the training rows have (``features``, of the
d = ``dimension`` hashed ones), β_f, B's columns and the catalogue's f_a for the item-feature columns some action
has non-zero (``item_columns``, of the D_A = ``item_dimension``). A feature no row has gets weight 0 under the L2
penalty, and a column every f_a has 0 adds 0 to every score, so the model predicts as the dense one over d × D_A.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.special import expit

from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.folded import load_model_file, read_metadata, register_kind, used_columns
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.io.parameter_files import checked_features, stored_layout, used_rows

if TYPE_CHECKING:
    from dr_scale.reward.models import Features

#: The ``kind`` a shared model's ``.npz`` records.
KIND = "shared"


@register_kind
@dataclass(eq=False)
class SharedRidgeRewardModel:
    """ρ̂(x, a) = b + x·β_x + f_a·β_f + x·B·f_a (the module docstring); ``predict`` and ``predict_pairs``.

    Cross-fitted (``fold_theta`` given): fold model j, fitted on the rows whose fold
    (:func:`~dr_scale.crossfit.parts.fold_of`, keyed by ``fold_seed``) is not j, predicts the rows of fold j when
    ``predict``/``predict_pairs`` are given their ``row_id`` — as :class:`~dr_scale.reward.models.LinearRewardModel`'s
    fold models do; without row ids the full-data model predicts.

    Sized by use (``features`` and ``item_columns``, the fitter's and every file's layout): β_x and B have a row per
    context feature of ``features`` (m of them), β_f, B and ``item_features`` a column per item column of
    ``item_columns`` (c); the others weigh 0. None: the rows are the features 0 … d − 1, the columns 0 … D_A − 1.

    Parameters
    ----------
    intercept : float
        b.
    beta_x : numpy.ndarray, shape (m,)
        The context's main effect.
    beta_f : numpy.ndarray, shape (c,)
        The action features' main effect.
    interaction : numpy.ndarray, shape (m, c)
        B.
    item_features : numpy.ndarray, shape (k, c)
        f_a per action.
    metadata : dict, optional
        What the fitter recorded.
    fold_theta : numpy.ndarray, shape (K, 1 + m + c + m·c), optional
        The K fold models' (b, β_x, β_f, vec B).
    fold_seed : int
        The key of the folds.
    features : numpy.ndarray, shape (m,), optional
        The sorted context feature ids of β_x's and B's rows, in [0, ``dimension``); None: m = d.
    dimension : int
        d, the hashed context space, with ``features``.
    item_columns : numpy.ndarray, shape (c,), optional
        The sorted catalogue columns of β_f's, B's and ``item_features``' columns, in [0, ``item_dimension``);
        None: c = D_A.
    item_dimension : int
        D_A, the catalogue's feature columns, with ``item_columns``.

    Examples
    --------
    >>> import numpy as np
    >>> F = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # k = 3 actions, D_A = 2
    >>> model = SharedRidgeRewardModel(0.5, np.array([1.0, 0.0]), np.array([0.0, 2.0]),
    ...                                np.array([[1.0, 0.0], [0.0, 0.0]]), F)
    >>> model.predict(np.array([[1.0, 0.0]])).tolist()  # 0.5 + 1 + f_a·(0, 2) + f_a[0]
    [[2.5, 3.5, 4.5]]
    >>> model.predict_pairs(np.array([[1.0, 0.0]]), np.array([[2, 0]])).tolist()
    [[4.5, 2.5]]
    >>> sized = model.sized()  # feature 1 weighs 0: dropped
    >>> sized.features.tolist(), sized.item_columns.tolist(), sized.predict(np.array([[1.0, 0.0]])).tolist()
    ([0], [0, 1], [[2.5, 3.5, 4.5]])
    """

    intercept: float
    beta_x: np.ndarray
    beta_f: np.ndarray
    interaction: np.ndarray
    item_features: np.ndarray
    metadata: dict = field(default_factory=dict)
    fold_theta: np.ndarray | None = None
    fold_seed: int = 0
    features: np.ndarray | None = None
    dimension: int = 0
    item_columns: np.ndarray | None = None
    item_dimension: int = 0
    #: How the linear score z maps to ρ̂: ``"identity"`` (ridge) or ``"logistic"`` (σ(z), 0/1 rewards).
    LINK: ClassVar[str] = "identity"
    #: The ``kind`` its file records (:data:`KIND`).
    KIND: ClassVar[str] = KIND

    def __post_init__(self) -> None:
        self.beta_x = np.asarray(self.beta_x, dtype=np.float64)
        self.beta_f = np.asarray(self.beta_f, dtype=np.float64)
        self.interaction = np.asarray(self.interaction, dtype=np.float64)
        self.item_features = np.asarray(self.item_features, dtype=np.float64)
        if self.interaction.ndim != 2:
            raise ParameterError(f"`interaction` must be (m, c), got shape {self.interaction.shape}")
        m, c = self.interaction.shape
        if self.beta_x.shape != (m,) or self.beta_f.shape != (c,) or self.item_features.shape[1:] != (c,):
            raise ParameterError("`interaction` must be (m, c), `beta_x` (m,), `beta_f` (c,) and "
                                 "`item_features` (k, c)")
        if self.features is not None:
            self.features = checked_features(self.features, m, int(self.dimension), per="entry of 'beta_x'")
        if self.item_columns is not None:
            self.item_columns = checked_features(self.item_columns, c, int(self.item_dimension), "item_columns",
                                                 "column of 'item_features'", "n_item_features")
        if self.fold_theta is not None:
            self.fold_theta = np.asarray(self.fold_theta, dtype=np.float64)
            if self.fold_theta.ndim != 2 or self.fold_theta.shape[1] != 1 + m + c + m * c or not len(self.fold_theta):
                raise ParameterError(f"`fold_theta` must be (K, {1 + m + c + m * c}): each fold model's "
                                     "(b, β_x, β_f, vec B)")

    @property
    def n_features(self) -> int:
        """d, the context features (the hashed space; β_x has a row for each of ``features`` only, if set)."""
        return int(self.dimension) if self.features is not None else self.beta_x.size

    @property
    def n_item_features(self) -> int:
        """D_A, the catalogue's feature columns (``item_features`` has one for each of ``item_columns`` only, if
        set)."""
        return int(self.item_dimension) if self.item_columns is not None else self.beta_f.size

    @property
    def n_actions(self) -> int:
        """k, the items (rows of ``item_features``)."""
        return int(self.item_features.shape[0])

    @property
    def folds(self) -> int:
        """K, the number of fold models (0: not cross-fitted)."""
        return 0 if self.fold_theta is None else self.fold_theta.shape[0]

    def _fold(self, j: int) -> SharedRidgeRewardModel:
        """Fold model j as a model of its own (its linear score)."""
        assert self.fold_theta is not None  # a cross-fitted model's fold
        b, bx, bf, B = unflatten(self.fold_theta[j], self.beta_x.size, self.beta_f.size)
        return replace(self, intercept=b, beta_x=bx, beta_f=bf, interaction=B, metadata={}, fold_theta=None)

    def _context(self, X: Features) -> tuple[np.ndarray, np.ndarray]:
        """(x·β_x, xᵀB) per row: X's columns at ``features`` (:func:`~dr_scale.crossfit.folded.used_columns`) when
        sized by use."""
        X = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        if X.shape[1] > self.n_features:
            raise ParameterError(f"`X` has {X.shape[1]} features, the model {self.n_features}")
        if self.features is not None:
            X = used_columns(X, self.features)
        d = X.shape[1]
        return np.asarray(X @ self.beta_x[:d]), np.asarray(X @ self.interaction[:d])

    def _fold_ids(self, row_id: ArrayLike | None, n: int) -> np.ndarray | None:
        """Each row's fold, or None when the full-data model predicts (no row ids, or no fold models)."""
        from dr_scale.crossfit.folded import checked_row_id
        from dr_scale.crossfit.parts import fold_of

        row_id = checked_row_id(row_id, n)
        return None if row_id is None or not self.folds else fold_of(np.asarray(row_id), self.folds, self.fold_seed)

    def scores(self, X: Features, actions: np.ndarray | None = None, row_id: ArrayLike | None = None) -> np.ndarray:
        """The linear score z(x_i, a) = b + x·β_x + f_a·β_f + x·B·f_a for every action (or the given ones)."""
        fold = self._fold_ids(row_id, X.shape[0])
        if fold is not None:
            from dr_scale.crossfit.folded import predict_by_fold

            width = self.n_actions if actions is None else len(actions)
            return predict_by_fold(sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X), fold, width,
                                   lambda j, rows: self._fold(j).scores(rows, actions))
        main, projected = self._context(X)
        F = self.item_features if actions is None else self.item_features[np.asarray(actions)]
        out: np.ndarray = self.intercept + main[:, None] + (F @ self.beta_f)[None, :] + projected @ F.T
        return out

    def pair_scores(self, X: Features, actions: np.ndarray, row_id: ArrayLike | None = None) -> np.ndarray:
        """z(x_i, a_ij) for each row's own actions (n, K)."""
        actions = np.asarray(actions)
        fold = self._fold_ids(row_id, X.shape[0])
        if fold is not None:
            X = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X)
            out = np.empty(actions.shape)
            for j in np.unique(fold):
                rows = np.flatnonzero(fold == j)
                out[rows] = self._fold(int(j)).pair_scores(X[rows], actions[rows])
            return out
        main, projected = self._context(X)
        F = self.item_features[actions]  # (n, K, D_A); numpy's loops, not BLAS: the same bits in any process
        scores: np.ndarray = self.intercept + main[:, None] + np.einsum("nkd,d->nk", F, self.beta_f) + np.einsum(
            "nkd,nd->nk", F, projected)
        return scores

    def link(self, z: np.ndarray) -> np.ndarray:
        """ρ̂ from the linear score: z itself (ridge)."""
        return z

    def predict(self, X: Features, actions: np.ndarray | None = None, row_id: ArrayLike | None = None
                ) -> np.ndarray:
        """ρ̂(x_i, a) for every action, or the given ones: (n, k) or (n, len(actions)); with ``row_id`` and fold
        models, row i by fold model fold(row_id_i), which did not see it."""
        return self.link(self.scores(X, actions, row_id))

    def predict_pairs(self, X: Features, actions: np.ndarray, row_id: ArrayLike | None = None) -> np.ndarray:
        """ρ̂(x_i, a_ij) for each row's own actions, (n, K) for (n, K) ``actions``: O(n·K·D_A), never (n, k)."""
        return self.link(self.pair_scores(X, actions, row_id))

    def theta(self) -> np.ndarray:
        """The full-data model's (b, β_x, β_f, vec B) in its own layout, m rows × c columns (:func:`unflatten`'s)."""
        return np.concatenate([[self.intercept], self.beta_x, self.beta_f, self.interaction.ravel()])

    def _ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(the context feature ids of β_x's rows, the catalogue columns of β_f's): ``features`` and
        ``item_columns``, or 0 … m − 1 and 0 … c − 1 where None."""
        rows = np.arange(self.beta_x.size) if self.features is None else self.features
        return rows, np.arange(self.beta_f.size) if self.item_columns is None else self.item_columns

    def _thetas(self) -> list[np.ndarray]:
        """The full-data model's θ and the fold models', in the model's layout."""
        return [self.theta()] + ([] if self.fold_theta is None else list(self.fold_theta))

    def _with(self, thetas: list[np.ndarray], item_features: np.ndarray, **layout: Any) -> SharedRidgeRewardModel:
        """This model with the θ of the full-data model and the fold models (``thetas``, in that order) and
        ``item_features`` over the ``layout`` (features, dimension, item_columns, item_dimension)."""
        c = item_features.shape[1]
        b, bx, bf, B = unflatten(thetas[0], (thetas[0].size - 1 - c) // (1 + c), c)  # 1 + m + c + m·c
        folds = np.stack(thetas[1:]) if len(thetas) > 1 else None
        return replace(self, intercept=b, beta_x=bx, beta_f=bf, interaction=B, item_features=item_features,
                       fold_theta=folds, **layout)

    def over(self, features: np.ndarray | None = None, item_columns: np.ndarray | None = None
             ) -> SharedRidgeRewardModel:
        """The same model laid over the sorted context ids ``features`` and catalogue columns ``item_columns`` (None:
        all d, all D_A), zeros at those it does not hold: the layout of an item scorer's θ (its rows' features) or
        of a dense model (``over()``). A weight at an id or column left out is dropped — the caller's rows have 0
        there, so their predictions do not change."""
        rows, cols = self._ids()
        to_r = np.arange(self.n_features) if features is None else np.asarray(features, dtype=np.int64)
        to_c = np.arange(self.n_item_features) if item_columns is None else np.asarray(item_columns, dtype=np.int64)
        at_r, at_c = _positions(rows, to_r), _positions(cols, to_c)

        def relaid(theta: np.ndarray) -> np.ndarray:
            """θ over (rows, cols) laid over (to_r, to_c)."""
            b, bx, bf, B = unflatten(theta, rows.size, cols.size)
            return np.concatenate([[b], _taken(bx, at_r), _taken(bf, at_c), _taken(_taken(B, at_r).T, at_c).T.ravel()])

        return self._with([relaid(t) for t in self._thetas()], _taken(self.item_features.T, at_c).T,
                          features=None if features is None else to_r,
                          dimension=0 if features is None else self.n_features,
                          item_columns=None if item_columns is None else to_c,
                          item_dimension=0 if item_columns is None else self.n_item_features)

    def sized(self) -> SharedRidgeRewardModel:
        """The same model sized by use (itself if it is): the item columns some action has non-zero
        (:func:`present_item_columns`), then the context features where it or a fold model has a non-zero weight
        on them (:func:`~dr_scale.io.parameter_files.used_rows`) — a dropped feature or column adds exactly 0 to
        every score."""
        if self.features is not None and self.item_columns is not None:
            return self
        rows, cols = self._ids()
        m, c = rows.size, cols.size
        keep_c = present_item_columns(self.item_features) if self.item_columns is None else np.arange(c)
        parts = [unflatten(t, m, c) for t in self._thetas()]
        weights = [np.column_stack([bx, B[:, keep_c]]) for _, bx, _, B in parts]
        keep_r = used_rows(weights[0], np.stack(weights[1:]) if len(weights) > 1 else None) \
            if self.features is None else np.arange(m)
        thetas = [np.concatenate([[b], bx[keep_r], bf[keep_c], B[np.ix_(keep_r, keep_c)].ravel()])
                  for b, bx, bf, B in parts]
        return self._with(thetas, np.ascontiguousarray(self.item_features[:, keep_c]), features=rows[keep_r],
                          dimension=self.n_features, item_columns=cols[keep_c], item_dimension=self.n_item_features)

    def parameters(self) -> tuple[np.ndarray, ...]:
        """The arrays that determine the predictions (for digests: a report's state cache keys on them)."""
        rows, cols = self._ids()
        own: tuple[np.ndarray, ...] = (np.array([self.intercept]), self.beta_x, self.beta_f, self.interaction,
                                       self.item_features, np.array([self.LINK == "logistic"], dtype=np.float64),
                                       rows, cols, np.array([self.n_features, self.n_item_features]))
        if self.fold_theta is None or not self.folds:
            return own
        return own + (self.fold_theta, np.array([self.fold_seed]))

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` atomically, sized by use (:meth:`sized`): ``intercept``, ``beta_x`` (m), ``beta_f``
        (c), ``interaction`` (m × c), ``item_features`` (k × c), ``features`` (the m context feature ids) and
        ``n_features`` (d), ``item_columns`` (the c catalogue columns) and ``n_item_features`` (D_A), the fold
        models' ``fold_theta`` (K × (1 + m + c + m·c)) and ``fold_seed`` if any, ``metadata`` (JSON), its ``kind``
        :data:`KIND` (:func:`dr_scale.reward.files.load_reward_model` dispatches on it) and its ``link``."""
        model = self.sized()
        assert model.features is not None and model.item_columns is not None  # sized
        buf = io.BytesIO()
        extra: dict[str, Any] = {} if not model.folds else {"fold_theta": model.fold_theta,
                                                            "fold_seed": np.array(model.fold_seed, dtype=np.int64)}
        np.savez(buf, intercept=np.array(model.intercept), beta_x=model.beta_x, beta_f=model.beta_f,
                 interaction=model.interaction, item_features=model.item_features, features=model.features,
                 n_features=np.array(model.n_features, dtype=np.int64), item_columns=model.item_columns,
                 n_item_features=np.array(model.n_item_features, dtype=np.int64),
                 metadata=np.array(json.dumps(model.metadata)), kind=np.array(KIND), link=np.array(model.LINK),
                 **extra)
        fs, path = url_to_fs(url, storage_options)
        atomic_write(fs, path, buf.getvalue())

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> SharedRidgeRewardModel:
        """Read a model saved by :meth:`save` — a :class:`SharedLogisticRewardModel` if its ``link`` is logistic;
        anything else is a ``ParameterFileError`` naming the file."""
        out: SharedRidgeRewardModel = load_model_file(url, storage_options, "reward model", (KIND,))
        return out

    @classmethod
    def from_arrays(cls, a: dict, where: str) -> SharedRidgeRewardModel:
        """The model of a shared model file's arrays, its class by the file's ``link``; a file without ``features``
        or ``item_columns`` (dense over d × D_A) sized by use (:meth:`sized`)."""
        from dr_scale.io.parameter_files import ParameterFileError

        missing = [k for k in ("intercept", "beta_x", "beta_f", "interaction", "item_features") if k not in a]
        if missing:
            raise ParameterFileError(f"{where}: not a shared reward model (no {', '.join(missing)})")
        link = str(a.get("link", "identity"))
        target = {"identity": SharedRidgeRewardModel, "logistic": SharedLogisticRewardModel}.get(link)
        if target is None:
            raise ParameterFileError(f"{where}: unknown link {link!r} (identity or logistic)")
        if cls is SharedLogisticRewardModel and target is not cls:
            raise ParameterFileError(f"{where}: a shared ridge model, not a shared logistic one")
        layout: dict[str, Any] = {}
        for ids, size, rows, per, fields in (
                ("features", "n_features", np.size(a["beta_x"]), "entry of 'beta_x'", ("features", "dimension")),
                ("item_columns", "n_item_features", np.size(a["beta_f"]), "column of 'item_features'",
                 ("item_columns", "item_dimension"))):
            stored = stored_layout(a, where, rows, ids, size, per)
            if stored is not None:
                layout.update(zip(fields, stored, strict=True))
        try:
            model = target(float(a["intercept"]), a["beta_x"], a["beta_f"], a["interaction"], a["item_features"],
                           read_metadata(str(a["metadata"])) if "metadata" in a else {},
                           a.get("fold_theta"), int(a.get("fold_seed", 0)), **layout)
        except (ParameterError, ValueError, TypeError, KeyError) as exc:
            raise ParameterFileError(f"{where}: {exc}") from None
        return model.sized()


@dataclass(eq=False)
class SharedLogisticRewardModel(SharedRidgeRewardModel):
    """ρ̂(x, a) = σ(b + x·β_x + f_a·β_f + x·B·f_a), σ(z) = 1/(1 + e^{−z}): the shared model for 0/1 rewards
    (predictions in (0, 1)); fields, folds and file as :class:`SharedRidgeRewardModel`'s, the file's ``link``
    ``"logistic"``.

    Parameters
    ----------
    intercept : float
        b, a logit.
    beta_x : numpy.ndarray, shape (m,)
        The context's main effect.
    beta_f : numpy.ndarray, shape (c,)
        The action features' main effect.
    interaction : numpy.ndarray, shape (m, c)
        B.
    item_features : numpy.ndarray, shape (k, c)
        f_a per action.
    metadata : dict, optional
        What the fitter recorded.
    fold_theta : numpy.ndarray, shape (K, 1 + m + c + m·c), optional
        The K fold models' (b, β_x, β_f, vec B).
    fold_seed : int
        The key of the folds.
    features : numpy.ndarray, shape (m,), optional
        The sorted context feature ids of β_x's and B's rows, in [0, ``dimension``); None: m = d.
    dimension : int
        d, the hashed context space, with ``features``.
    item_columns : numpy.ndarray, shape (c,), optional
        The sorted catalogue columns of β_f's, B's and ``item_features``' columns, in [0, ``item_dimension``);
        None: c = D_A.
    item_dimension : int
        D_A, the catalogue's feature columns, with ``item_columns``.

    Examples
    --------
    >>> import numpy as np
    >>> F = np.array([[1.0], [-1.0]])
    >>> model = SharedLogisticRewardModel(0.0, np.zeros(1), np.array([2.0]), np.zeros((1, 1)), F)
    >>> model.predict(np.array([[1.0]])).round(3).tolist()  # σ(±2)
    [[0.881, 0.119]]
    """

    LINK: ClassVar[str] = "logistic"

    def link(self, z: np.ndarray) -> np.ndarray:
        """σ(z)."""
        out: np.ndarray = expit(z)
        return out


def _positions(held: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Each of the sorted ids ``wanted``'s index in the sorted ids ``held``, −1 where it is not held."""
    at = np.searchsorted(held, wanted)
    hit = held[np.minimum(at, max(held.size - 1, 0))] == wanted if held.size else np.zeros(wanted.size, dtype=bool)
    return np.where(hit, at, -1)


def _taken(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``values``' entries (rows) at the indices ``at`` along the first axis, 0 where ``at`` is −1."""
    out = np.zeros((at.size, *values.shape[1:]))
    out[at >= 0] = values[at[at >= 0]]
    return out


def unflatten(theta: np.ndarray, d: int, da: int) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(b, β_x, β_f, B) from θ = (b, β_x, β_f, vec B) (B row-major, (d, D_A))."""
    return (float(theta[0]), theta[1:1 + d], theta[1 + d:1 + d + da], theta[1 + d + da:].reshape(d, da))


def present_item_columns(item_features: np.ndarray | sp.spmatrix) -> np.ndarray:
    """The sorted catalogue columns where some action's f_a is non-zero, of a dense or sparse (k, D_A)
    ``item_features`` (:func:`~dr_scale.io.parameter_files.used_rows` of Σ_a |f_a|: column 0 alone where none is)."""
    return used_rows(np.asarray(abs(item_features).sum(axis=0), dtype=np.float64).reshape(-1, 1))
