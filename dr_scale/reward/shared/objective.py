"""The shared model as an objective of the cross-fitting driver (:mod:`dr_scale.crossfit.engine`): per fold of a
part the sums (n, Σ r, Σ φ, Σ φ², Σ r φ); at λ the ridge fit min_θ Σ_i (r_i − b − φ_i·θ)² + λ‖θ‖² by conjugate
gradients, or the logistic one min_θ Σ_i [log(1 + e^{z_i}) − r_i z_i] + (λ/2)‖θ‖², z_i = b + φ_i·θ, by L-BFGS; the
out-of-fold squared error or log loss; and the model it makes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from dr_scale.crossfit.engine import Family, Objective, Solved
from dr_scale.crossfit.folded import used_columns
from dr_scale.crossfit.parts import Fits, GroupedPart
from dr_scale.crossfit.settings import FitSettings
from dr_scale.outofcore import glm, ridge
from dr_scale.outofcore.passes import PartSet
from dr_scale.reward.shared.features import fold_rows, phi, phi_t
from dr_scale.reward.shared.model import (
    SharedLogisticRewardModel,
    SharedRidgeRewardModel,
    present_item_columns,
    unflatten,
)


# Every function of one part below is summed over the parts by the pass engine (dr_scale.outofcore.passes); the
# parts are grouped by (fold, action) (dr_scale.crossfit.parts.group), so the rows of fold f are the contiguous run of
# blocks f·k … (f + 1)·k − 1, and the fits are those of :class:`~dr_scale.crossfit.parts.Fits` over the folds with one
# "action": fold model j on the folds f ≠ j, the full-data model on all of them.
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
    curvature = np.column_stack([(sxx * spread[:, None] + lam) / rows[:, None], spread]).astype(np.float32)

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
    item_columns: np.ndarray
    item_dimension: int
    name: str = "the log"
    logistic: bool = False
    chosen_by: str = "model"
    label: ClassVar[str] = "ρ̂"
    per_action: ClassVar[bool] = False

    def coefficients(self, n_features: int, n_actions: int) -> int:
        """A fold's coefficients over m = ``n_features`` context features and the c catalogue columns in use:
        1 + m + c + m·c (b, β_x, β_f, B)."""
        c = int(self.item_features.shape[1])
        return 1 + n_features + c + n_features * c

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
        """The :class:`SharedRidgeRewardModel` (or logistic) of the full-data θ, with the fold models' θ, over the
        catalogue's present columns (``item_columns``)."""
        F, d = self.item_features, n_features
        theta = np.column_stack([solved.x[:, -1], solved.x[:, :-1]])  # (b, β_x, β_f, vec B): the model's layout
        metadata = {"rows": int(sums[0].sum()), "kind": f"shared {self.kind}", "model": f"shared {self.kind}",
                    "model_chosen_by": self.chosen_by, "action_features": self.item_dimension,
                    "used_action_features": F.shape[1], "method": "L-BFGS" if self.logistic else "conjugate gradients"}
        cls = SharedLogisticRewardModel if self.logistic else SharedRidgeRewardModel
        return cls(*unflatten(theta[-1], d, F.shape[1]), F, metadata, theta[:-1].copy() if fits.folds else None,
                   settings.seed, item_columns=self.item_columns, item_dimension=self.item_dimension)


@dataclass
class SharedModels(Family):
    """The shared model over ``item_features`` (k, D_A), dense or sparse (the catalogue's): ridge, or logistic for
    0/1 rewards, as ``settings.model`` says, else by the rewards (the per-action rule,
    :func:`dr_scale.reward.fitting.model_kind`). Sized by use: fitted on the catalogue's present columns only
    (:func:`~dr_scale.reward.shared.model.present_item_columns`; ``item_features`` then holds those c columns,
    ``item_columns`` their ids) and, on a log (:func:`~dr_scale.crossfit.engine.fit_log`), on the context features
    the rows have — its sums, directions and θ (1 + m + c + m·c) never d × D_A."""

    item_features: np.ndarray
    name: str = "the log"
    item_columns: np.ndarray = field(init=False)
    item_dimension: int = field(init=False)
    sized_by_use: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.item_dimension = int(self.item_features.shape[1])
        self.item_columns = present_item_columns(self.item_features)
        self.item_features = np.asarray(used_columns(self.item_features, self.item_columns).toarray(), np.float64)

    def objective(self, parts: PartSet, settings: FitSettings) -> SharedObjective:
        """The shared ridge or logistic objective, as ``settings.model`` (or the rewards) choose."""
        from dr_scale.reward.fitting import model_kind

        kind, chosen_by = model_kind(parts, settings, self.name)
        return SharedObjective(self.item_features, self.item_columns, self.item_dimension, self.name,
                               kind == "logistic", chosen_by)
