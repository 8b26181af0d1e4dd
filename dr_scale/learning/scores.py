"""The per-action scores a policy is learned as, fitted out of core to the imputed rewards Γ (:mod:`.learn`): Γ of a
part (:class:`Imputation`), the rows that take part (:class:`Rows`), the passes over the parts, the ridge scores

    (w_a, b_a) = argmin Σ_i (Γ_a(x_i) − b_a − x_i·w_a)² + λ ‖w_a − w⁰_a‖²

for all k actions (and a λ grid) in the same block-CG passes, λ by the validation rows' imputed value, and DLM's
batched updates (Appendix A)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.crossfit.parts import LogPart
from dr_scale.learning.impute import impute_rewards
from dr_scale.outofcore import ridge
from dr_scale.outofcore.passes import PartSet
from dr_scale.outofcore.products import add_transposed_products
from dr_scale.outofcore.progress import Passes
from dr_scale.reward.models import predict_columns

if TYPE_CHECKING:
    from dr_scale.propensity.model import PropensityModel
    from dr_scale.reward.models import RewardModel


#: λ grid of ``lam="auto"``, relative to the policy λ's unit (:func:`lam_scale`).
AUTO_GRID = (1.0, 10.0, 100.0)
VALIDATION_PURPOSE = "learn validation"


@dataclass
class Imputation:
    """How Γ is formed on a part: the method, the log's shape (d, k) and ρ̂ (None for IPS)."""

    method: str
    n_features: int
    n_actions: int
    reward_model: RewardModel | None = None
    center: tuple | None = None  # (coef (d, k), intercept (k,)): scores the ridge fit shrinks towards
    propensity_model: PropensityModel | None = None  # π̂₀: p̂_i = max(π̂₀(a_i | x_i), propensity_floor), cross-fitted
    propensity_floor: float = 1e-3
    source: str = "the log"  # for messages

    def targets(self, part: LogPart, X: sp.csr_matrix) -> np.ndarray:
        """Γ minus the centre's scores x·c_a + c0_a (Γ itself without a centre): what the ridge fit regresses."""
        gamma = self.rewards(part, X)
        if self.center is not None:
            gamma -= np.asarray(X @ self.center[0]) + self.center[1]
        return gamma

    def rewards(self, part: LogPart, X: sp.csr_matrix | None = None) -> np.ndarray:
        """Γ (n, k) of the part's rows; ρ̂ gets the row ids, so a cross-fitted model predicts out of fold."""
        X = part.matrix(self.n_features) if X is None else X
        reward_hat = None
        if self.reward_model is not None:
            reward_hat = predict_columns(self.reward_model, X, np.arange(self.n_actions), part.row_id)
        return impute_rewards(part.action, part.reward, self.propensities(part, X), self.n_actions, self.method,
                              reward_hat)

    def propensities(self, part: LogPart, X: sp.csr_matrix) -> np.ndarray:
        """The p of each row: the logged one, or the propensity model's (floored, from the fold model that did not
        see the row); a log without propensities needs a model unless the imputation is DM (which reads none)."""
        if self.propensity_model is not None:
            probs = np.asarray(self.propensity_model.predict_proba(X, row_id=part.row_id), dtype=np.float64)
            floored: np.ndarray = np.maximum(probs[np.arange(len(part)), part.action], self.propensity_floor)
            return floored
        if self.method != "dm" and len(part) and np.isnan(part.propensity).any():
            from dr_scale.logs.contract import LogDataError

            raise LogDataError(self.source, "propensity", f"missing column: the log records no logging probabilities, "
                                                        f"and {self.method.upper()} imputation weights each row by "
                                                        "1/p; estimate them (--estimate-propensity [--folds K], or "
                                                        "--propensity-model FILE from dr-scale fit-propensity), or "
                                                        "learn with --method dm (docs/propensities.md)")
        return part.propensity


@dataclass(frozen=True)
class Rows:
    """Which rows of a part take part: all, or those in / outside the validation fold of ``lam="auto"``."""

    which: str = "all"  # "all" | "training" | "validation"
    share: float = 0.2
    seed: int = 0

    def of(self, part: LogPart, n_features: int) -> LogPart:
        """The part's rows of this selection: all, or those of the keyed validation split (u(row_id) < share) or the
        rest."""
        if self.which == "all":
            return part
        in_validation = keyed_random.uniform(part.row_id, self.seed, VALIDATION_PURPOSE) < self.share
        return part.rows(in_validation if self.which == "validation" else ~in_validation, n_features)


# -- passes (functions of one part; their results are summed over the parts) --------------
def ridge_sums(part: LogPart, imputation: Imputation, rows: Rows) -> tuple:
    """(n, Σ_i x_i, Σ_i x_i², Σ_i Γ_i, XᵀΓ (k, d)) over the part's rows: every right-hand side in one pass."""
    part = rows.of(part, imputation.n_features)
    X = part.matrix(imputation.n_features)
    gamma = imputation.targets(part, X)
    sx = np.asarray(X.sum(axis=0)).ravel()
    sxx = sx.copy() if part.data is None else np.asarray(X.multiply(X).sum(axis=0)).ravel()  # x² = x if binary
    xy = add_transposed_products(np.zeros((X.shape[1], gamma.shape[1])), X, gamma)
    return np.array([float(len(part))]), sx, sxx, gamma.sum(axis=0), np.ascontiguousarray(xy.T)


def add_gram_product(total: np.ndarray | None, part: LogPart, PT: np.ndarray, rows: Rows) -> np.ndarray:
    """total += XᵀX Pᵀ over the part's rows, (d, F): one sparse × dense (d, F) product and its transpose for all
    F fits, which share X (Pᵀ is given C-ordered, as scipy's multi-vector kernel wants it)."""
    X = rows.of(part, PT.shape[0]).matrix(PT.shape[0])
    if total is None:
        total = np.zeros_like(PT)
    return add_transposed_products(total, X, X @ PT)


def policy_values(part: LogPart, imputation: Imputation, coef: np.ndarray, intercept: np.ndarray,
                  rows: Rows) -> tuple:
    """(Σ_i Γ_{π_g(x_i)}(x_i) for every candidate policy g, row count): coef (G, d, k), intercept (G, k)."""
    part = rows.of(part, imputation.n_features)
    X = part.matrix(imputation.n_features)
    gamma = imputation.rewards(part, X)
    index = np.arange(len(part))
    totals = np.array([gamma[index, np.argmax(np.asarray(X @ c) + b, axis=1)].sum() for c, b in zip(coef, intercept)])
    return totals, np.array([float(len(part))])


def dlm_step(part: LogPart, imputation: Imputation, weights: np.ndarray, bias: np.ndarray,
             epsilon: float) -> tuple:
    """One part's share of DLM's batched update on raw-scale weights (k, d) and bias (k,).

    Returns (Σ_i (e_{a1} − e_{a2}) x_iᵀ (k, d), Σ_i (e_{a1} − e_{a2}) (k,), Σ_i Γ_{a2(i)}(x_i), n)
    with a1 = argmax_a x·w_a + b_a + ε Γ_a, a2 = argmax_a x·w_a + b_a (:mod:`.dlm`).
    """
    from dr_scale.learning.dlm import first_argmax  # dlm imports scikit-learn: only for this learner

    X = part.matrix(imputation.n_features)
    gamma = imputation.rewards(part, X)
    scores = (np.asarray(X @ weights.T) + bias).T[None]  # (1, k, n)
    a1 = first_argmax(scores, -epsilon * gamma.T)[0]
    a2 = first_argmax(scores)[0]
    moved = np.flatnonzero(a1 != a2)
    k, n = weights.shape[0], len(part)
    D = sp.csr_matrix((np.repeat([1.0, -1.0], moved.size), (np.concatenate([a1[moved], a2[moved]]), np.tile(moved, 2))),
                      shape=(k, n))
    return (np.asarray((D @ X).todense()), np.asarray(D.sum(axis=1)).ravel(),
            np.array([gamma[np.arange(n), a2].sum()]), np.array([float(n)]))


# -- the learners ---------------------------------------------------------------------
def ridge_stats(sums: tuple, copies: int = 1) -> ridge.RidgeStats:
    """The k fits' statistics (repeated ``copies`` times for a λ grid): all fits share n, Σx and Σx²."""
    n, sx, sxx, sy, xy = sums
    F = sy.shape[0] * copies
    return ridge.RidgeStats(np.full(F, n[0]), np.broadcast_to(sx, (F, sx.size)), np.broadcast_to(sxx, (F, sxx.size)),
                            np.tile(sy, copies), np.tile(xy, (copies, 1)))


def fit_ridge_scores(parts: PartSet, imputation: Imputation, lam: float | np.ndarray, rows: Rows = Rows(), *,
                     rtol: float,
                     max_iter: int, progress: bool = False) -> tuple[np.ndarray, np.ndarray, dict]:
    """(coef (G, d, k), intercept (G, k), passes and convergence): ridge scores on Γ for each λ of ``lam``
    (G of them), in the same passes; CG starts at the centre (δ = 0) and stops at ``rtol`` or ``max_iter``."""
    lams = np.atleast_1d(np.asarray(lam, dtype=np.float64))
    k = imputation.n_actions
    stats = ridge_stats(parts.sum(ridge_sums, imputation, rows), lams.size)

    def gram(P: np.ndarray) -> np.ndarray:
        """XᵀX P over the parts for the fits' directions P (F, d): one pass."""
        return np.ascontiguousarray(parts.accumulate(add_gram_product, np.ascontiguousarray(P.T), rows).T)

    fit = ridge.fit(gram, stats, np.repeat(lams, k), rtol=rtol, max_iter=max_iter, progress=progress)
    coef = fit.coef.reshape(lams.size, k, -1).transpose(0, 2, 1)
    intercept = fit.intercept.reshape(lams.size, k)
    if imputation.center is not None:
        coef, intercept = coef + imputation.center[0], intercept + imputation.center[1]
    return np.ascontiguousarray(coef), intercept, {"passes": 1 + fit.iterations, "converged": bool(fit.converged.all())}


def lam_scale(mean_active: float, n_rows: float) -> float:
    """The policy λ's unit: mean active features per row × n / 1000 (XᵀX's mean diagonal entry × d / 1000)."""
    return max(mean_active * n_rows / 1000.0, 1e-3)


def auto_lambda(parts: PartSet, imputation: Imputation, mean_active: float, n_rows: float, *, rtol: float,
                max_iter: int, seed: int = 0, progress: bool = False, passes: list | None = None) -> tuple[float, dict]:
    """λ from :data:`AUTO_GRID` × :func:`lam_scale` by the validation rows' imputed value."""
    grid = np.asarray(AUTO_GRID) * lam_scale(mean_active, n_rows)
    coef, intercept, info = fit_ridge_scores(parts, imputation, grid, Rows("training", seed=seed), rtol=rtol,
                                             max_iter=max_iter, progress=progress)
    totals, count = parts.sum(policy_values, imputation, coef, intercept, Rows("validation", seed=seed))
    if passes is not None:
        passes.append(info["passes"] + 1)
    values = totals / max(count[0], 1.0)
    best = int(np.argmax(values))
    return float(grid[best]), {"grid": grid.tolist(), "validation_values": values.tolist()}


def fit_dlm_scores(parts: PartSet, imputation: Imputation, scale: np.ndarray, *, epsilon: float, max_iter: int,
                   n_iter_no_change: int, seed: int, progress: bool = False,
                   seen: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """DLM (Appendix A) out of core: one pass per batched update; the weights with the best training value.

    The weights θ act on z = (x ∘ s, 1) with s = ``scale`` (1/std of each feature);
    on raw features they are w = θ ∘ s and b = θ_const. They start at small random values (keyed by
    ``seed``), except for the features not ``seen`` (d,) — never non-zero in the log: no update moves
    their weights, so they start and stay at 0, and the policy ignores those features rather than
    keeping a random start's weights on them.
    """
    k, d = imputation.n_actions, scale.size
    theta = 0.01 * np.random.default_rng([seed, 0xD1A]).standard_normal((k, d + 1))
    if seen is not None:
        theta[:, :d][:, ~seen] = 0.0
    best = (-np.inf, theta, 0)
    passes = Passes("dlm", progress)
    for t in range(1, max_iter + 1):
        weights, bias = theta[:, :d] * scale, theta[:, d]
        moved, moved_bias, value, n = parts.sum(dlm_step, imputation, weights, bias, epsilon)
        mean_value = float(value[0] / n[0])
        if mean_value > best[0]:
            best = (mean_value, theta.copy(), t)
        passes.step(f"training value {mean_value:.6g}")
        eta = 0.5 * t ** -0.3 / n[0]
        theta[:, :d] += eta * moved * scale
        theta[:, d] += eta * moved_bias
        if t - best[2] >= n_iter_no_change:
            break
    passes.close()
    theta = best[1]
    return theta[:, :d].T * scale[:, None], theta[:, d].copy(), {"passes": t, "training_value": best[0]}
