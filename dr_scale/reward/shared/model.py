"""The shared reward models over the actions' features: ρ̂(x, a) = b + x·β_x + f_a·β_f + x·B·f_a (ridge) and
σ(b + x·β_x + f_a·β_f + x·B·f_a) (0/1 rewards), their predictions, fold models, parameter layout and ``.npz`` files."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.special import expit

from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.folded import load_model_file, read_metadata, register_kind
from dr_scale.io.atomic import atomic_write, url_to_fs

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

    Parameters
    ----------
    intercept : float
        b.
    beta_x : numpy.ndarray, shape (d,)
        The context's main effect.
    beta_f : numpy.ndarray, shape (D_A,)
        The action features' main effect.
    interaction : numpy.ndarray, shape (d, D_A)
        B.
    item_features : numpy.ndarray, shape (k, D_A)
        f_a per action.
    metadata : dict, optional
        What the fitter recorded.
    fold_theta : numpy.ndarray, shape (K, 1 + d + D_A + d·D_A), optional
        The K fold models' (b, β_x, β_f, vec B).
    fold_seed : int
        The key of the folds.

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
    """

    intercept: float
    beta_x: np.ndarray
    beta_f: np.ndarray
    interaction: np.ndarray
    item_features: np.ndarray
    metadata: dict = field(default_factory=dict)
    fold_theta: np.ndarray | None = None
    fold_seed: int = 0
    #: How the linear score z maps to ρ̂: ``"identity"`` (ridge) or ``"logistic"`` (σ(z), 0/1 rewards).
    LINK: ClassVar[str] = "identity"
    #: The ``kind`` its file records (:data:`KIND`).
    KIND: ClassVar[str] = KIND

    def __post_init__(self) -> None:
        self.beta_x = np.asarray(self.beta_x, dtype=np.float64)
        self.beta_f = np.asarray(self.beta_f, dtype=np.float64)
        self.interaction = np.asarray(self.interaction, dtype=np.float64)
        self.item_features = np.asarray(self.item_features, dtype=np.float64)
        d, da = self.interaction.shape
        if self.beta_x.shape != (d,) or self.beta_f.shape != (da,) or self.item_features.shape[1:] != (da,):
            raise ParameterError("`interaction` must be (d, D_A), `beta_x` (d,), `beta_f` (D_A,) and "
                                 "`item_features` (k, D_A)")
        if self.fold_theta is not None:
            self.fold_theta = np.asarray(self.fold_theta, dtype=np.float64)
            if self.fold_theta.ndim != 2 or self.fold_theta.shape[1] != 1 + d + da + d * da or not len(self.fold_theta):
                raise ParameterError(f"`fold_theta` must be (K, {1 + d + da + d * da}): each fold model's "
                                     "(b, β_x, β_f, vec B)")

    @property
    def n_features(self) -> int:
        """d, the context features."""
        return self.beta_x.size

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
        return SharedRidgeRewardModel(*unflatten(self.fold_theta[j], self.n_features, self.item_features.shape[1]),
                                      self.item_features)

    def _context(self, X: Features) -> tuple[np.ndarray, np.ndarray]:
        X = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        if X.shape[1] > self.n_features:
            raise ParameterError(f"`X` has {X.shape[1]} features, the model {self.n_features}")
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
        """The full-data model's (b, β_x, β_f, vec B) (:func:`unflatten`'s layout)."""
        return np.concatenate([[self.intercept], self.beta_x, self.beta_f, self.interaction.ravel()])

    def parameters(self) -> tuple[np.ndarray, ...]:
        """The arrays that determine the predictions (for digests: a report's state cache keys on them)."""
        own: tuple[np.ndarray, ...] = (np.array([self.intercept]), self.beta_x, self.beta_f, self.interaction,
                                       self.item_features, np.array([self.LINK == "logistic"], dtype=np.float64))
        if self.fold_theta is None or not self.folds:
            return own
        return own + (self.fold_theta, np.array([self.fold_seed]))

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` atomically, its ``kind`` :data:`KIND` (:func:`dr_scale.reward.files.load_reward_model`
        dispatches on it) and
        its ``link``."""
        buf = io.BytesIO()
        extra: dict[str, Any] = {} if not self.folds else {"fold_theta": self.fold_theta,
                                                           "fold_seed": np.array(self.fold_seed, dtype=np.int64)}
        np.savez(buf, intercept=np.array(self.intercept), beta_x=self.beta_x, beta_f=self.beta_f,
                 interaction=self.interaction, item_features=self.item_features,
                 metadata=np.array(json.dumps(self.metadata)), kind=np.array(KIND), link=np.array(self.LINK),
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
        """The model of a shared model file's arrays, its class by the file's ``link``."""
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
        try:
            return target(float(a["intercept"]), a["beta_x"], a["beta_f"], a["interaction"], a["item_features"],
                          read_metadata(str(a["metadata"])) if "metadata" in a else {},
                          a.get("fold_theta"), int(a.get("fold_seed", 0)))
        except (ParameterError, ValueError) as exc:
            raise ParameterFileError(f"{where}: {exc}") from None


@dataclass(eq=False)
class SharedLogisticRewardModel(SharedRidgeRewardModel):
    """ρ̂(x, a) = σ(b + x·β_x + f_a·β_f + x·B·f_a), σ(z) = 1/(1 + e^{−z}): the shared model for 0/1 rewards
    (predictions in (0, 1)); fields, folds and file as :class:`SharedRidgeRewardModel`'s, the file's ``link``
    ``"logistic"``.

    Parameters
    ----------
    intercept : float
        b (a logit).
    beta_x : numpy.ndarray, shape (d,)
        The context's main effect.
    beta_f : numpy.ndarray, shape (D_A,)
        The action features' main effect.
    interaction : numpy.ndarray, shape (d, D_A)
        B.
    item_features : numpy.ndarray, shape (k, D_A)
        f_a per action.
    metadata : dict, optional
        What the fitter recorded.
    fold_theta : numpy.ndarray, shape (K, 1 + d + D_A + d·D_A), optional
        The K fold models' (b, β_x, β_f, vec B).
    fold_seed : int
        The key of the folds.

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


def unflatten(theta: np.ndarray, d: int, da: int) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(b, β_x, β_f, B) from θ = (b, β_x, β_f, vec B) (B row-major, (d, D_A))."""
    return (float(theta[0]), theta[1:1 + d], theta[1 + d:1 + d + da], theta[1 + d + da:].reshape(d, da))
