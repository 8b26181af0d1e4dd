"""A ridge reward model shared across actions: context × action-feature interactions plus both main effects.

    ρ̂(x, a) = b + x·β_x + f_a·β_f + x·B·f_a

with f_a the action's features (the log's action catalogue, :class:`~dr_scale.logs.catalogue.Catalogue`),
so the parameter count, 1 + d + D_A + d·D_A, does not grow with the number of actions k. Fitted by
ridge regression on the logged rows' features φ(x_i, a_i) = (x_i, f_{a_i}, x_i ⊗ f_{a_i}),

    min_θ Σ_i (r_i − b − φ_i·θ)² + λ ‖θ‖²     (the intercept b not penalised),

on the pass engine of the per-action fitters (:func:`fit_shared_model`): the log's parts read once by
:func:`dr_scale.crossfit.parts.read_grouped_parts` and kept between passes (in memory, spilled to local files, or on a
Dask cluster's workers), then :func:`dr_scale.outofcore.ridge.fit`'s conjugate gradients, each iteration one pass
over the parts that computes Φᵀ(Φ v) without forming Φ or ΦᵀΦ (memory O(part + d·D_A)). For 0/1 rewards the
logistic form (:class:`SharedLogisticRewardModel`),

    ρ̂(x, a) = σ(b + φ(x, a)·θ),   min_θ Σ_i [log(1 + e^{z_i}) − r_i z_i] + (λ/2) ‖θ‖²,   z_i = b + φ_i·θ,

by :func:`dr_scale.outofcore.glm.minimize` (L-BFGS, one pass per step). Cross-fitting (``folds=K``): K fold
models by the keyed folds of :func:`dr_scale.crossfit.parts.fold_of`, beside the full-data model, in the same passes;
λ = ``"auto"`` by the per-action models' rule (:func:`dr_scale.crossfit.engine.scan_lambdas`). Predictions for a
policy's listed actions only (:meth:`SharedRidgeRewardModel.predict_pairs`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.special import expit

from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.engine import Family, Objective, Solved, fit_log, fit_parts
from dr_scale.crossfit.folded import load_model_file, read_metadata, register_kind
from dr_scale.crossfit.parts import Fits, GroupedPart, LogPart
from dr_scale.crossfit.settings import FitSettings, Stages
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.outofcore import glm, ridge
from dr_scale.outofcore.passes import PartSet

if TYPE_CHECKING:
    from distributed import Client

    from dr_scale.logs.catalogue import Catalogue
    from dr_scale.logs.contract import Partition
    from dr_scale.logs.opened import OpenedLog
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


def check_log_catalogue(models: Iterable[tuple[object, str]], logs: str | OpenedLog,
                        storage_options: dict | None = None) -> None:
    """:func:`check_model_catalogue` of each (model, name) pair against the catalogue of the log at ``logs``, read
    once and only if a model is a shared one."""
    from dr_scale.logs.catalogue import read_catalogue

    shared = [(m, name) for m, name in models if isinstance(m, SharedRidgeRewardModel)]
    if shared:
        catalogue = read_catalogue(logs, storage_options)
        for model, name in shared:
            check_model_catalogue(model, catalogue, name)


def unflatten(theta: np.ndarray, d: int, da: int) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(b, β_x, β_f, B) from θ = (b, β_x, β_f, vec B) (B row-major, (d, D_A))."""
    return (float(theta[0]), theta[1:1 + d], theta[1 + d:1 + d + da], theta[1 + d + da:].reshape(d, da))


def check_model_catalogue(model: object, catalogue: Catalogue | None, name: str) -> None:
    """Refuse a shared model on a log whose action catalogue is not the one it was fitted on (its f_a would score
    other items): a :class:`~dr_scale.core.errors.UserError` naming ``name``. No check for other models, or
    without a catalogue (a log with none is refused where its catalogue is needed)."""
    from dr_scale.core.errors import UserError

    if not isinstance(model, SharedRidgeRewardModel) or catalogue is None:
        return
    features = catalogue.features.toarray() if sp.issparse(catalogue.features) else np.asarray(catalogue.features)
    if features.shape != model.item_features.shape or not np.array_equal(features, model.item_features):
        same = features.shape == model.item_features.shape
        raise UserError(f"{name} is a shared model fitted over another action catalogue ({model.n_actions} actions × "
                        f"{model.item_features.shape[1]} features; this log's {catalogue.source}: "
                        f"{features.shape[0]} × {features.shape[1]}{', other values' if same else ''}); "
                        "refit it on this log (dr-scale fit --model shared)")


# -- fitting on the pass engine -------------------------------------------------------------
# Every function of one part below is summed over the parts by the pass engine (dr_scale.outofcore.passes); the
# parts are grouped by (fold, action) (dr_scale.crossfit.parts.group), so the rows of fold f are the contiguous run of
# blocks f·k … (f + 1)·k − 1, and the fits are those of :class:`~dr_scale.crossfit.parts.Fits` over the folds with one
# "action": fold model j on the folds f ≠ j, the full-data model on all of them.
def fold_rows(part: GroupedPart, f: int, k: int, d: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """(X, the logged actions, the rewards) of the part's rows in fold f (views of the part's arrays)."""
    lo, hi = int(part.start[f * k]), int(part.start[(f + 1) * k])
    return part.blocks(f * k, (f + 1) * k, d), part.action[lo:hi], part.reward[lo:hi]


def phi(X: Features, Fl: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Φ v for the rows' φ_i = (x_i, f_i, x_i ⊗ f_i) and v = (β_x, β_f, vec B): x·β_x + f·β_f + x·B·f.

    The dense products are numpy's own loops (``einsum``), not BLAS: a multithreaded BLAS may split a sum
    differently in this process and in a worker process, and a pass must give the same bits wherever it runs
    (the sparse products are scipy's, single-threaded)."""
    d, da = X.shape[1], Fl.shape[1]
    out: np.ndarray = (X @ v[:d] + np.einsum("na,a->n", Fl, v[d:d + da])
                       + np.einsum("nd,nd->n", np.asarray(X @ v[d + da:].reshape(d, da)), Fl))
    return out


def phi_t(X: Features, Fl: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Φᵀ u = (Xᵀu, Fᵀu, vec Xᵀ(F ∘ u)) without forming Φ (dense sums by ``einsum``, :func:`phi`)."""
    return np.concatenate([X.T @ u, np.einsum("na,n->a", Fl, u), np.asarray(X.T @ (Fl * u[:, None])).ravel()])


def shared_sums(part: GroupedPart, item_features: np.ndarray, d: int, groups: int, k: int) -> tuple:
    """Per fold f of the part: (n_f, Σ r, Σ φ, Σ φ², Σ r φ) — (G,), (G,), (G, D) × 3, D = d + D_A + d·D_A."""
    da = item_features.shape[1]
    size = d + da + d * da
    n, sy = np.zeros(groups), np.zeros(groups)
    sx, sxx, xy = np.zeros((groups, size)), np.zeros((groups, size)), np.zeros((groups, size))
    for f in range(groups):
        X, a, y = fold_rows(part, f, k, d)
        if not X.shape[0]:
            continue
        Fl = item_features[a]
        ones = np.ones(X.shape[0])
        n[f], sy[f] = X.shape[0], float(y.sum())
        sx[f], xy[f] = phi_t(X, Fl, ones), phi_t(X, Fl, y)
        sxx[f] = phi_t(X.multiply(X).tocsr(), Fl * Fl, ones)
    return n, sy, sx, sxx, xy


def add_shared_gram(total: np.ndarray | None, part: GroupedPart, P: np.ndarray, item_features: np.ndarray, fits: Fits,
                    active: np.ndarray, d: int, k: int) -> np.ndarray:
    """total (F, D) += per fit F the Gram product Σ over its folds' rows Φᵀ(Φ P_F) (fits not ``active``: skipped)."""
    if total is None:
        total = np.zeros_like(P)
    for using, X, Fl, _ in _fits_rows(part, item_features, fits, active, d, k):
        for F in using:
            total[F] += phi_t(X, Fl, phi(X, Fl, P[F]))
    return total


def _fits_rows(part: GroupedPart, item_features: np.ndarray, fits: Fits, active: np.ndarray, d: int,
               k: int) -> Iterator[tuple[list[int], sp.csr_matrix, np.ndarray, np.ndarray]]:
    """Per fold of the part with rows and an ``active`` fit using it: (those fits, X, the logged items' f_a, r)."""
    for f in range(fits.groups):
        using = [F for F in fits.of_block(f, 0) if active[F]]
        X, a, y = fold_rows(part, f, k, d)
        if using and X.shape[0]:
            yield using, X, item_features[a], y


def shared_out_of_fold(part: GroupedPart, theta: np.ndarray, item_features: np.ndarray, d: int, k: int, folds: int,
                       logistic: bool) -> np.ndarray:
    """(3, 1): Σ of row i's loss under fold model f_i (squared error, or the log loss if ``logistic``), Σ r, Σ r²;
    theta (K, D + 1) the fold models' (β_x, β_f, vec B, b)."""
    out = np.zeros((3, 1))
    for f in range(folds):
        X, a, y = fold_rows(part, f, k, d)
        if not X.shape[0]:
            continue
        z = phi(X, item_features[a], theta[f, :-1]) + theta[f, -1]
        loss = -np.sum(glm.log_expit(np.where(y > 0, z, -z))) if logistic else np.sum((y - z) ** 2)
        out[:, 0] += [float(loss), float(y.sum()), float(np.sum(y * y))]
    return out


def add_shared_logistic_terms(total: np.ndarray | None, part: GroupedPart, x: np.ndarray, item_features: np.ndarray,
                              fits: Fits, active: np.ndarray,
                              d: int, k: int) -> np.ndarray:
    """total (F, D + 2) += per fit its data log loss's gradient ((θ, b): D + 1) and, in the last column, the log loss
    Σ log(1 + e^z) − r z, z = b + φ·θ, over its folds' rows (:func:`dr_scale.outofcore.glm.add_binary_terms`'s
    terms with Φ applied by :func:`phi`)."""
    size = x.shape[1] - 1
    if total is None:
        total = np.zeros((x.shape[0], size + 2))
    for using, X, Fl, y in _fits_rows(part, item_features, fits, active, d, k):
        for F in using:
            z = phi(X, Fl, x[F, :size]) + x[F, size]
            total[F, size + 1] -= float(np.sum(glm.log_expit(np.where(y > 0, z, -z))))
            residual = glm.expit(z) - y
            total[F, :size] += phi_t(X, Fl, residual)
            total[F, size] += float(residual.sum())
    return total


def _stats(sums: tuple, fits: Fits) -> ridge.RidgeStats:
    n, sy, sx, sxx, xy = sums
    return ridge.RidgeStats(fits.combine(n), fits.combine(sx), fits.combine(sxx), fits.combine(sy), fits.combine(xy))


def _solve_ridge(parts: PartSet, stats: ridge.RidgeStats, lam: float, fits: Fits, item_features: np.ndarray, d: int,
                 k: int, settings: FitSettings, progress: bool) -> tuple[ridge.RidgeFit, np.ndarray]:
    """The fits at penalty λ by :func:`dr_scale.outofcore.ridge.fit` (conjugate gradients, one pass per iteration):
    (the fit, θ (F, D + 1) as (β_x, β_f, vec B, b))."""
    def gram(P: np.ndarray) -> np.ndarray:
        """The shared fits' Gram products for the search directions ``P``, one pass (zeros when all converged)."""
        active = P.any(axis=1)
        if not active.any():
            return np.zeros_like(P)
        return parts.accumulate(add_shared_gram, P, item_features, fits, active, d, k)

    fit = ridge.fit(gram, stats, lam, rtol=settings.rtol, max_iter=settings.max_iter, progress=progress)
    return fit, np.column_stack([fit.coef, fit.intercept])


def _solve_logistic(parts: PartSet, sums: tuple, lam: float, fits: Fits, item_features: np.ndarray, d: int, k: int,
                    settings: FitSettings, progress: bool) -> tuple[glm.GLMFit, np.ndarray]:
    """The fits at penalty λ by L-BFGS (:func:`dr_scale.outofcore.glm.minimize`, one pass per step): (the result,
    θ (F, D + 1) as (β_x, β_f, vec B, b)). The start, the fits not fitted (all rewards equal: w = 0, b = the logit
    of the add-½ rate) and the diagonal preconditioner follow the per-action logistic fit
    (:func:`dr_scale.reward.fitting.solve_logistic`)."""
    n_block, sy_block, _, sxx_block, _ = sums
    n, sy, sxx = fits.combine(n_block), fits.combine(sy_block), fits.combine(sxx_block)
    size = sxx.shape[1]
    mixed = (sy > 0) & (sy < n)
    rate = np.where(mixed, sy / np.maximum(n, 1), glm.smoothed_rate(sy, n))
    x0 = np.zeros((n.size, size + 1))
    x0[:, size] = glm.logit(rate)
    free = np.zeros_like(x0, dtype=bool)
    free[mixed] = True
    penalty = np.r_[np.ones(size, bool), False]
    spread = np.maximum(rate * (1 - rate), 1e-6)
    rows = np.maximum(n, 1.0)
    curvature = np.column_stack([(sxx * spread[:, None] + lam) / rows[:, None], spread])

    def evaluate(x: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The penalised log loss and its gradient of the shared fits at ``x`` (``active`` ones), one pass."""
        total = parts.accumulate(add_shared_logistic_terms, x, item_features, fits, active, d, k)
        return glm.penalised(total[:, -1], total[:, :-1], x, lam, n, penalty)

    result = glm.minimize(evaluate, x0, rtol=settings.rtol, max_iter=settings.max_iter, free=free,
                          curvature=curvature, progress=progress, description="shared logistic ρ̂")
    return result, result.x


@dataclass
class SharedObjective(Objective):
    """The shared model (module docstring) as the cross-fitting driver fits it: per fold (n, Σ r, Σ φ, Σ φ², Σ r φ),
    conjugate gradients (ridge) or L-BFGS (``logistic``) at λ, the out-of-fold squared error or log loss; one fit
    per fold for all actions."""

    item_features: np.ndarray
    name: str = "the log"
    logistic: bool = False
    chosen_by: str = "model"
    label: ClassVar[str] = "ρ̂"
    per_action: ClassVar[bool] = False

    @property
    def loss(self) -> str:
        """``"log_loss"`` (logistic) or ``"sse"`` (ridge)."""
        return "log_loss" if self.logistic else "sse"

    @property
    def kind(self) -> str:
        """``"logistic"`` or ``"ridge"``."""
        return "logistic" if self.logistic else "ridge"

    @property
    def what(self) -> str:
        """What a fit is in stage lines: ``shared ridge model(s)`` or ``shared logistic model(s)``."""
        return f"shared {self.kind} model(s)"

    def count(self, part: GroupedPart, n_features: int, groups: int, n_actions: int) -> Any:
        """A part's shared sums per fold (n, Σ r, Σ φ, Σ φ², Σ r φ) (:func:`shared_sums`)."""
        return shared_sums(part, self.item_features, n_features, groups, n_actions)

    def solve(self, parts: PartSet, sums: Any, n_features: int, lam: float, fits: Fits, settings: FitSettings,
              progress: bool) -> Solved:
        """The shared fits at λ: conjugate gradients (ridge) or L-BFGS (logistic), θ = (β_x, β_f, vec B, b) per fit."""
        F, k = self.item_features, self.item_features.shape[0]
        if self.logistic:
            result, theta = _solve_logistic(parts, sums, lam, fits, F, n_features, k, settings, progress)
            return Solved(theta, result.passes, result.converged)
        fit, theta = _solve_ridge(parts, _stats(sums, fits), lam, fits, F, n_features, k, settings, progress)
        return Solved(theta, fit.iterations, fit.converged)

    def out_of_fold(self, part: GroupedPart, solved: Solved, n_features: int, folds: int,
                    n_actions: int) -> np.ndarray:
        """A part's out-of-fold squared errors or log losses by the fold models that did not see the rows."""
        errors: np.ndarray = shared_out_of_fold(part, solved.x, self.item_features, n_features, n_actions, folds,
                                                self.logistic)[0]
        return errors

    def search_record(self, sample: PartSet, sums: Any, n_features: int, folds: int, n_actions: int,
                      losses: list) -> dict:
        """The λ search's sample rows."""
        return {"sample_rows": int(sums[0].sum())}

    def model(self, solved: Solved, sums: Any, lam: float, fits: Fits, n_features: int, n_actions: int,
              settings: FitSettings) -> SharedRidgeRewardModel:
        """The :class:`SharedRidgeRewardModel` (or logistic) of the full-data θ, with the fold models' θ."""
        F, d = self.item_features, n_features
        theta = np.column_stack([solved.x[:, -1], solved.x[:, :-1]])  # (b, β_x, β_f, vec B): the model's layout
        metadata = {"rows": int(sums[0].sum()), "kind": f"shared {self.kind}", "model": f"shared {self.kind}",
                    "model_chosen_by": self.chosen_by, "action_features": F.shape[1],
                    "method": "L-BFGS" if self.logistic else "conjugate gradients"}
        cls = SharedLogisticRewardModel if self.logistic else SharedRidgeRewardModel
        return cls(*unflatten(theta[-1], d, F.shape[1]), F, metadata, theta[:-1].copy() if fits.folds else None,
                   settings.seed)


@dataclass
class SharedModels(Family):
    """The shared model over ``item_features``: ridge, or logistic for 0/1 rewards, as ``settings.model`` says,
    else by the rewards (the per-action rule, :func:`dr_scale.reward.fitting.model_kind`)."""

    item_features: np.ndarray
    name: str = "the log"

    def __post_init__(self) -> None:
        self.item_features = np.asarray(self.item_features, dtype=np.float64)

    def objective(self, parts: PartSet, settings: FitSettings) -> SharedObjective:
        """The shared ridge or logistic objective, as ``settings.model`` (or the rewards) choose."""
        from dr_scale.reward.fitting import model_kind

        kind, chosen_by = model_kind(parts, settings, self.name)
        return SharedObjective(self.item_features, self.name, kind == "logistic", chosen_by)


def fit_shared_on_parts(parts: PartSet, n_rows: float, n_features: int, item_features: np.ndarray,
                        settings: FitSettings, *, progress: bool = False, stages: Stages | None = None,
                        name: str = "the log") -> SharedRidgeRewardModel:
    """The shared model on parts grouped by (fold, action) over ``settings.folds`` folds
    (:func:`dr_scale.crossfit.parts.read_grouped_parts`), ``n_rows`` rows in all, by the cross-fitting driver
    (:func:`dr_scale.crossfit.engine.fit_parts`): ridge or logistic as ``settings.model`` says (None: logistic when
    every reward is 0 or 1); λ as ``settings.lam`` says (``"auto"``: the grid's λ with the least out-of-fold loss on
    the keyed sample); then the K fold models and the full-data model in the same passes.
    """
    family = SharedModels(item_features, name)
    model: SharedRidgeRewardModel = fit_parts(parts, n_rows, int(n_features), family.item_features.shape[0],
                                              settings, family, progress=progress, stages=stages)
    return model


def log_and_catalogue(logs: str | OpenedLog, storage_options: dict | None, needs: str) -> tuple:
    """(fs, the log's part paths, its action catalogue); a log without a catalogue is a
    :class:`~dr_scale.core.errors.UserError` saying what ``needs`` it."""
    from dr_scale.core.errors import UserError
    from dr_scale.logs.catalogue import read_catalogue
    from dr_scale.logs.listing import list_parts

    fs, paths = list_parts(logs, storage_options)  # a missing log is said as such, before its catalogue
    catalogue = read_catalogue(logs, storage_options)
    if catalogue is None:
        raise UserError(f"{logs}: the log has no action catalogue (_actions.parquet): {needs} (dr-scale import with "
                        "an [actions] table, or generate bandit --action-features)")
    return fs, paths, catalogue


def fit_shared_model(logs: str | OpenedLog, settings: FitSettings | None = None, *, client: Client | None = None,
                     storage_options: dict | None = None,
                     progress: bool = False) -> SharedRidgeRewardModel:
    """The reward model shared across actions on the log at ``logs`` over its action catalogue, out of core: the
    parts read once, kept between passes (in memory, spilled to local files, or on a Dask cluster's workers) and one
    pass per conjugate-gradient iteration (ridge) or L-BFGS step (logistic) — the per-action fitters' engine, so a
    run on a cluster gives the same bits as a local one.

    Ridge: min_θ Σ_i (r_i − b − φ_i·θ)² + λ‖θ‖² (the module docstring); logistic (0/1 rewards):
    min_θ Σ_i [log(1 + e^{z_i}) − r_i z_i] + (λ/2)‖θ‖², z_i = b + φ_i·θ — scikit-learn's
    ``LogisticRegression(C=1/λ)`` on the explicit φ.

    Parameters
    ----------
    logs : str or OpenedLog
        The log (any fsspec URL, or opened with a filter, :func:`~dr_scale.logs.opened.open_log`: its rows only),
        with ``_actions.parquet``.
    settings : FitSettings or None
        λ (or ``"auto"``), folds, seed, rtol, spill as for the per-action models; ``model``: ``"ridge"``,
        ``"logistic"`` or None (logistic when every reward is 0 or 1). Default ``FitSettings()``.
    client : distributed.Client or None
        Run on this Dask cluster (default: Dask's local threaded scheduler).
    storage_options : dict or None
        fsspec's options for ``logs``.
    progress : bool
        Show each stage's progress on stderr.

    Returns
    -------
    SharedRidgeRewardModel or SharedLogisticRewardModel
        With the K fold models if ``settings.folds``; ``metadata`` records λ (and its search), the passes, the
        rows, the log's fingerprint and actions.

    Examples
    --------
    >>> import tempfile
    >>> from dr_scale.crossfit.settings import FitSettings
    >>> from dr_scale.synthetic.item_world import generate_item_bandit
    >>> folder = tempfile.TemporaryDirectory()
    >>> _ = generate_item_bandit(folder.name + "/log", rows=2000, seed=1, features=100, actions=200,
    ...                          action_features=4, embedding_categories=5)
    >>> model = fit_shared_model(folder.name + "/log", FitSettings(lam=10.0, folds=2))
    >>> type(model).__name__, model.folds, model.metadata["model_chosen_by"]
    ('SharedLogisticRewardModel', 2, 'every reward is 0 or 1')
    >>> folder.cleanup()
    """
    from dr_scale.logs.listing import action_vocabulary

    if settings is not None and not isinstance(settings, FitSettings):
        raise ParameterError(f"`settings` must be a FitSettings, got {type(settings).__name__}")
    _, _, catalogue = log_and_catalogue(logs, storage_options, "a model shared across actions needs their features")
    k = catalogue.n_actions
    if settings is not None and settings.n_actions is not None and settings.n_actions != k:
        raise ParameterError(f"`n_actions` is {settings.n_actions}, but the log's action catalogue lists {k} actions")
    model: SharedRidgeRewardModel = fit_log(logs, settings, SharedModels(catalogue.features.toarray(), str(logs)),
                                            client=client, storage_options=storage_options, progress=progress,
                                            n_actions=k)
    model.metadata["logs"] = str(logs)
    vocabulary = action_vocabulary(logs, storage_options)
    if vocabulary is not None:
        model.metadata["actions"] = vocabulary
    return model


def fit_shared_from_log(logs: str | OpenedLog, *, lam: float = 1.0, tol: float = 1e-8, max_iter: int = 500,
                        n_features: int | None = None, storage_options: dict | None = None) -> SharedRidgeRewardModel:
    """The shared ridge model on the log at ``logs`` at penalty ``lam``: :func:`fit_shared_model` with
    ``FitSettings(lam=lam, rtol=tol, max_iter=max_iter, n_features=n_features, model="ridge")`` on the local
    scheduler (``fit --model shared-ridge``).

    Parameters
    ----------
    logs : str
        The log (any fsspec URL), with ``_actions.parquet``.
    lam, tol, max_iter
        λ > 0; conjugate gradients stop at ‖residual‖ ≤ tol · ‖rhs‖ or after ``max_iter`` passes.
    n_features : int or None
        d (default: the log's metadata, else the data).
    storage_options : dict or None
        fsspec's options for ``logs``.

    Returns
    -------
    SharedRidgeRewardModel
    """
    return fit_shared_model(logs, FitSettings(lam=lam, rtol=tol, max_iter=max_iter, n_features=n_features,
                                              model="ridge"), storage_options=storage_options)


def in_memory_parts(parts: Iterable[Partition], n_actions: int, folds: int | None = None,
                    seed: int = 0) -> tuple[PartSet, int]:
    """(a :class:`~dr_scale.outofcore.passes.PartSet` on the local scheduler, rows) of in-memory
    :class:`~dr_scale.logs.contract.Partition` objects, grouped by (fold, action) as the log's parts are."""
    from dr_scale.crossfit.parts import group
    from dr_scale.outofcore.passes import given

    grouped_parts = []
    for part in parts:
        X = sp.csr_matrix(part.X, dtype=np.float64)
        grouped_parts.append(group(LogPart(np.asarray(part.row_id), X.indptr, X.indices, X.data,
                                           np.asarray(part.action), np.asarray(part.reward, dtype=np.float64),
                                           np.asarray(part.propensity, dtype=np.float64)), folds, n_actions, seed))
    return PartSet.build(given, [(p,) for p in grouped_parts]), sum(len(p) for p in grouped_parts)


def fit_shared_ridge(parts: Callable[[], Iterable], item_features: np.ndarray, n_features: int, lam: float = 1.0,
                     tol: float = 1e-10, max_iter: int = 500) -> SharedRidgeRewardModel:
    """Ridge on φ(x_i, a_i) = (x_i, f_{a_i}, x_i ⊗ f_{a_i}) with an unpenalised intercept, on in-memory parts:
    :func:`fit_shared_on_parts` (the pass engine on the local scheduler) with ``FitSettings(lam=lam, rtol=tol,
    max_iter=max_iter, model="ridge")``.

    Parameters
    ----------
    parts : callable returning an iterable of Partition
        The logged rows (``lambda: read_log(url)``), read once.
    item_features : numpy.ndarray, shape (k, D_A)
        f_a per action.
    n_features : int
        d.
    lam : float, default 1.0
        λ > 0.
    tol : float
        Conjugate gradients stop when ‖residual‖ ≤ tol · ‖rhs‖ (:func:`dr_scale.outofcore.ridge.fit`).
    max_iter : int
        At most this many passes.

    Returns
    -------
    SharedRidgeRewardModel
        With ``metadata`` recording λ, the passes and the rows.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, pyarrow as pa
    >>> from dr_scale.logs.contract import Partition
    >>> rng = np.random.default_rng(0)
    >>> X = sp.csr_matrix(rng.integers(0, 2, (500, 3)).astype(float))
    >>> F = rng.standard_normal((20, 2))
    >>> a = rng.integers(0, 20, 500)
    >>> r = 0.3 + X @ np.array([0.1, 0.0, -0.2]) + np.einsum("nd,nd->n", np.asarray(X @ np.ones((3, 2))), F[a])
    >>> part = Partition("<p>", np.arange(500), X, a, r, np.full(500, 0.05), pa.table({}))
    >>> model = fit_shared_ridge(lambda: [part], F, 3, lam=1e-6)
    >>> bool(np.allclose(model.interaction, 1.0, atol=1e-4)), round(model.intercept, 3)
    (True, 0.3)
    """
    F = np.asarray(item_features, dtype=np.float64)
    held, rows = in_memory_parts(parts(), F.shape[0])
    return fit_shared_on_parts(held, rows, n_features, F,
                               FitSettings(lam=lam, rtol=tol, max_iter=max_iter, model="ridge", spill="memory"))
