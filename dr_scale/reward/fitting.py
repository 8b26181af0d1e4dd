"""Per-action ridge reward models fitted out of core — the one fitter behind ``dr-scale fit``,
``evaluate --fit-reward-model`` and ``learn``'s ρ̂ (:func:`fit_reward_model`, :func:`fit_on_parts`).

For each action a, on the rows that logged a (the paper's ρ̂, Sec. 5: ridge regression),

    (w_a, b_a) = argmin_{w, b}  Σ_{i: a_i = a} (r_i − b − x_i·w)² + λ ‖w‖²        (b not penalised),

solved by :func:`dr_scale.outofcore.ridge.fit` (Jacobi-preconditioned block conjugate
gradients) for all fits at once: every CG iteration is one pass over the log's parts,
read once and then kept in memory (a cluster's workers, or this process) or spilled to
local files (:mod:`dr_scale.outofcore.passes`).

**Layout.** Every part's rows are sorted (stably) by the block b = f_i·k + a_i, with
f_i = ⌊K·u(row_id_i)⌋ the row's cross-fitting fold (:func:`dr_scale.reward.models.fold_of`;
f_i = 0 without folds) and a_i its logged action, so that the rows of block b are the
contiguous run [start_b, start_{b+1}) of the part (:class:`GroupedPart`). Fold model j of
action a has the Gram product Σ_{f≠j} X_{fa}ᵀ X_{fa} P_{ja} and the full-data model of a
Σ_f X_{fa}ᵀ X_{fa} P_a: one pair of sparse mat-vecs per block and fit that uses it, over
views of the part's arrays — a pass costs K mat-vec pairs per row (K − 1 fold models and
the full-data model), no lifted copy of the rows.

**Cross-fitting** (``folds=K``): fold model j is fitted on the rows of the other folds
and predicts the rows of fold j only. **The full-data model** (``coef``, ``intercept``)
is the ridge fit on all rows at the same λ, with or without folds — what predicts rows
without a row id, and the shrinkage centre of ``learn``'s policy; it is fitted in the
same passes as the fold models.

**λ = "auto"** (the default): the ridge penalty of a Gaussian prior w ~ N(0, τ²I) under
noise of variance σ² is λ = σ²/τ², which does not grow with the number of rows; so λ is
chosen on a keyed sample of at most ``search_rows`` rows (row i is in it when
u(row_id_i) < search_rows / n, u keyed by (seed, "lambda sample")): for each λ of the
grid the K·k fold models are fitted on the sample (K = ``folds``, or
:data:`SEARCH_FOLDS` without folds; the same folds as the model's), scored by the
sample's out-of-fold squared error Σ_i (r_i − ρ̂^{(f_i)}_{a_i}(x_i))² (cross-fitting
doubles as cross-validation), and the λ with the smallest error is used on all rows.

**An action without rows** in a fit (never logged; or, for a fold model, logged only in
that fold) has no data: its model is w_a = 0 and b_a = the mean reward of the fit's rows
over all actions (the pooled mean), with an :class:`UnloggedActionWarning`. DR then
corrects that constant guess with the importance-weighted residuals wherever the target
policy takes the action.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.engine import Family, Objective, Solved, fit_log, fit_parts
from dr_scale.crossfit.parts import (  # noqa: F401 — the parts and folds, re-exported for the fitters' callers
    SAMPLE_PURPOSE,
    Extent,
    Fits,
    GroupedPart,
    LogPart,
    concatenated,
    group,
    group_blocks,
    grouped,
    present_columns,
    read_grouped_part,
    read_grouped_parts,
    read_log_part,
    sample_of,
)
from dr_scale.crossfit.settings import (  # noqa: F401 — the settings, re-exported for the fitters' callers
    LAMBDA_GRID,
    MAX_ITER,
    RTOL,
    SEARCH_FOLDS,
    SEARCH_ROWS,
    FitSettings,
    Stages,
    check_int,
    check_lam,
)
from dr_scale.logs.listing import action_vocabulary
from dr_scale.outofcore import glm, ridge
from dr_scale.outofcore.passes import PartSet
from dr_scale.outofcore.products import add_transposed_product
from dr_scale.reward.calibration import calibration_record, calibration_terms
from dr_scale.reward.models import LinearRewardModel, LogisticRewardModel

if TYPE_CHECKING:
    from distributed import Client

    from dr_scale.logs.opened import OpenedLog


class UnloggedActionWarning(UserWarning):
    """An action has no rows to fit on; its model falls back to the pooled mean reward."""




# -- passes (functions of one part; their results are summed over the parts) ---------------
def block_counts(part: GroupedPart, n_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per block b: (n_b, Σ r, Σ (x² − x) (B, d); (B, 0) while the features are binary) over the part's rows."""
    n_blocks = part.start.size - 1
    excess = np.zeros((n_blocks, n_features if part.data is not None else 0))
    if part.data is not None:
        for b in range(n_blocks):
            X = part.block(b, n_features)
            add_transposed_product(excess[b], X.multiply(X) - X, np.ones(X.shape[0]))
    sy = np.array([part.reward[part.start[b]:part.start[b + 1]].sum() for b in range(n_blocks)])
    return np.diff(part.start).astype(np.float64), sy, excess


def add_block_products(total: np.ndarray | None, part: GroupedPart, n_features: int, weighted: bool) -> np.ndarray:
    """total += per block b the sum of the block's rows x_i (B, d), weighted by their rewards r_i if ``weighted``."""
    n_blocks = part.start.size - 1
    if total is None:
        total = np.zeros((n_blocks, n_features))
    for b in range(n_blocks):
        lo, hi = part.start[b], part.start[b + 1]
        weights = part.reward[lo:hi] if weighted else np.ones(hi - lo)
        add_transposed_product(total[b], part.block(b, n_features), weights)
    return total


def block_sums(parts: PartSet, n_features: int,
               counts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> tuple:
    """Per block b over the parts: (n_b, Σ r, Σ x (B, d), Σ r x (B, d), Σ (x² − x)) — the counts (:func:`block_counts`;
    given, or one pass), then Σ x and Σ r x in a pass each, so that a pass's terms are one (B, d) array (a task's
    summation tree holds a few of them at once)."""
    n, sy, excess = parts.sum(block_counts, n_features) if counts is None else counts
    return (n, sy, parts.accumulate(add_block_products, n_features, False),
            parts.accumulate(add_block_products, n_features, True), excess)



def add_fit_gram(total: np.ndarray | None, part: GroupedPart, P: np.ndarray, fits: Fits,
                 active: np.ndarray) -> np.ndarray:
    """total += the fits' Gram products: for fit F, Σ over the blocks of its rows of X_bᵀ X_b P_F; P is (F, d), and
    fits not ``active`` (converged: P_F = 0) are skipped."""
    if total is None:
        total = np.zeros_like(P)
    d = P.shape[1]
    for f in range(fits.groups):
        for a in range(fits.n_actions):
            using = [F for F in fits.of_block(f, a) if active[F]]
            if not using:
                continue
            X = part.block(f * fits.n_actions + a, d)
            if X.shape[0] == 0:
                continue
            for F in using:
                add_transposed_product(total[F], X, X @ P[F])
    out: np.ndarray = total
    return out


def out_of_fold_errors(part: GroupedPart, coef: np.ndarray, intercept: np.ndarray, folds: int) -> np.ndarray:
    """(3, k): per action Σ (r_i − ρ̂^{(f_i)}_{a_i}(x_i))², Σ r_i, Σ r_i² over the part's rows; coef (K·k, d),
    intercept (K·k,) the fold models."""
    k = coef.shape[0] // folds
    out = np.zeros((3, k))
    for b in range(folds * k):
        X = part.block(b, coef.shape[1])
        y = part.reward[part.start[b]:part.start[b + 1]]
        out[:, b % k] += [float(np.sum((y - X @ coef[b] - intercept[b]) ** 2)), float(y.sum()), float(y @ y)]
    return out


# -- fitting -----------------------------------------------------------------------------
def solve(parts: PartSet, stats: ridge.RidgeStats, lam: float, fits: Fits, *, rtol: float, max_iter: int,
          progress: bool = False) -> tuple[ridge.RidgeFit, np.ndarray]:
    """The fits at penalty λ by block CG, one pass over the parts per iteration; and their intercepts, where a
    fit had no rows the pooled mean reward of its rows over all actions (w = 0)."""
    def gram(P: np.ndarray) -> np.ndarray:
        """The fits' Gram products (X_fᵀX_f + …) P for the search directions ``P``, one pass (zeros when every fit has
        converged).
        """
        active = P.any(axis=1)  # CG zeroes the directions of converged fits
        if not active.any():
            return np.zeros_like(P)
        return parts.accumulate(add_fit_gram, P, fits, active)

    fit = ridge.fit(gram, stats, lam, rtol=rtol, max_iter=max_iter, progress=progress)
    n = stats.n.reshape(-1, fits.n_actions)
    sy = stats.sy.reshape(-1, fits.n_actions)
    pooled = sy.sum(axis=1, keepdims=True) / np.maximum(n.sum(axis=1, keepdims=True), 1.0)
    return fit, np.where(n > 0, fit.intercept.reshape(n.shape), pooled).ravel()


def reward_moments(part: GroupedPart, n_actions: int) -> np.ndarray:
    """(2, k): per action Σ r_i and Σ r_i² over the part's rows."""
    return np.stack([np.bincount(part.action, weights=part.reward, minlength=n_actions),
                     np.bincount(part.action, weights=part.reward ** 2, minlength=n_actions)])


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


@dataclass
class RewardModels(Family):
    """The per-action reward models ρ̂: ridge, or logistic for 0/1 rewards, as ``settings.model`` says, else by the
    rewards (:func:`model_kind`). ``name``: the log in warnings."""

    sized_by_use: ClassVar[bool] = True

    name: str = "the log"

    def objective(self, parts: PartSet, settings: FitSettings) -> Objective:
        """The ridge or logistic objective for these parts, as ``settings.model`` (or the rewards) choose."""
        kind, chosen_by = model_kind(parts, settings, self.name)
        return (LogisticObjective if kind == "logistic" else RidgeObjective)(self.name, chosen_by)


@dataclass
class RidgeObjective(Objective):
    """Per-action ridge ρ̂ (module docstring): block sums, block CG at λ, the out-of-fold squared error."""

    name: str = "the log"
    chosen_by: str = "model"
    label: ClassVar[str] = "ρ̂"
    loss: ClassVar[str] = "sse"
    what: ClassVar[str] = "ridge models"

    def count(self, part: GroupedPart, n_features: int, groups: int, n_actions: int) -> Any:
        """A part's rows per (fold, action) block and feature (:func:`block_counts`)."""
        return block_counts(part, n_features)

    def sums(self, parts: PartSet, n_features: int, counts: Any, fits: Fits) -> tuple[Any, int]:
        """The fits' ridge statistics (:meth:`Fits.stats`) from the block sums (:func:`block_sums`, two passes
        beside the counts): the (B, d) block sums are not kept beside them."""
        return fits.stats(block_sums(parts, n_features, counts)), 2

    def solve(self, parts: PartSet, sums: Any, n_features: int, lam: float, fits: Fits, settings: FitSettings,
              progress: bool) -> Solved:
        """The ridge fits min Σ (r_i − b − x_i·w)² + λ‖w‖² by conjugate gradients, the intercepts unpenalised."""
        fit, intercept = solve(parts, sums, lam, fits, rtol=settings.rtol, max_iter=settings.max_iter,
                               progress=progress)
        calibration = None
        if fits.full:  # one pass: the calibration on the rows (dr_scale.reward.calibration)
            rows = slice(0, fits.groups * fits.n_actions) if fits.folds else slice(-fits.n_actions, None)
            calibration = calibration_record(parts.sum(calibration_terms, fit.coef[rows], intercept[rows],
                                                       fits.groups, fits.n_actions, False), fits.folds > 0)
        return Solved(fit.coef, fit.iterations + fits.full, fit.converged, intercept, calibration)

    def out_of_fold(self, part: GroupedPart, solved: Solved, n_features: int, folds: int,
                    n_actions: int) -> np.ndarray:
        """A part's squared errors Σ (r_i − ρ̂^{(−f(i))}_{a_i}(x_i))² per action by the fold models that did not see
        the rows.
        """
        out: np.ndarray = out_of_fold_errors(part, solved.x, solved.extra, folds)[0]
        return out

    def search_record(self, sample: PartSet, sums: Any, n_features: int, folds: int, n_actions: int,
                      losses: list) -> dict:
        """The sample's rows (per action) and the out-of-fold R² = 1 − SSE / Σ (r − r̄)² per λ and action."""
        n = sums.n.reshape(folds, n_actions).sum(axis=0) / max(folds - 1, 1)  # each row is in K − 1 fold models
        sy, syy = sample.sum(reward_moments, n_actions)
        with np.errstate(invalid="ignore", divide="ignore"):
            r2 = [None if e is None else np.where(n > 1, 1.0 - e / (syy - sy * sy / np.where(n > 0, n, 1)), np.nan)
                  for e in losses]
        return {"sample_rows": int(round(n.sum())), "sample_rows_per_action": np.rint(n).astype(int).tolist(),
                "out_of_fold_r2": [None if r is None else [_finite(v) for v in r] for r in r2]}

    def model(self, solved: Solved, sums: Any, lam: float, fits: Fits, n_features: int, n_actions: int,
              settings: FitSettings) -> LinearRewardModel:
        """The :class:`~dr_scale.reward.models.LinearRewardModel` of the K fold models and the full-data one
        (actions never logged warned about).
        """
        d, k = n_features, n_actions
        n_fit = sums.n.reshape(-1, k)
        _warn_unlogged(self.name, n_fit, solved.extra.reshape(-1, k), fits.folds)
        coef = solved.x.reshape(-1, k, d).transpose(0, 2, 1)
        intercept = solved.extra.reshape(-1, k)
        rows = n_fit[-1].astype(int)
        model = LinearRewardModel(np.ascontiguousarray(coef[-1]), intercept[-1], fold_seed=settings.seed, metadata={
            "model": "ridge", "model_chosen_by": self.chosen_by, "method": "conjugate gradients",
            "rows": int(rows.sum()), "rows_per_action": rows.tolist(),
            "unlogged_actions": np.flatnonzero(rows == 0).tolist()})
        if fits.folds:
            model.fold_coef, model.fold_intercept = np.ascontiguousarray(coef[:-1]), intercept[:-1]
        return model


def fit_on_parts(parts: PartSet, n_rows: float, n_features: int, n_actions: int, settings: FitSettings, *,
                 progress: bool = False, stages: Stages | None = None, name: str = "the log"
                 ) -> LinearRewardModel:
    """ρ̂ on parts grouped by (fold, action) over ``settings.folds`` folds (:func:`group`), ``n_rows`` rows in all, by
    the cross-fitting driver (:func:`dr_scale.crossfit.engine.fit_parts`).

    λ as ``settings.lam`` says (``"auto"``: the out-of-fold error on the keyed sample); then the K·k fold models
    and the k full-data models in the same passes (module docstring). The model's metadata records λ (and its
    search), rows per action, folds, seed, rtol, the passes and the actions without rows.

    ``settings.model``: ``"ridge"``, ``"logistic"`` (a :class:`~dr_scale.reward.models.LogisticRewardModel`), or
    None — logistic when every reward is 0 or 1 (one pass counts the others), ridge otherwise.
    """
    model: LinearRewardModel = fit_parts(parts, n_rows, n_features, n_actions, settings, RewardModels(name),
                                         progress=progress, stages=stages)
    return model


# -- logistic ρ̂ for 0/1 rewards ----------------------------------------------------------------
def nonbinary_rewards(part: LogPart) -> int:
    """The part's rows whose reward is neither 0 nor 1."""
    return int(np.count_nonzero((part.reward != 0) & (part.reward != 1)))


def model_kind(parts: PartSet, settings: FitSettings, name: str) -> tuple[str, str]:
    """(the reward model to fit, why): ``settings.model`` if given — logistic refused (a
    :class:`~dr_scale.core.errors.ParameterError` naming ``model``) when a reward is not 0 or 1 —, else logistic
    when every reward is 0 or 1 and ridge otherwise (one pass over the parts)."""
    if settings.model == "ridge":
        return "ridge", "model"
    other = parts.sum(nonbinary_rewards)
    if settings.model == "logistic":
        if other:
            raise ParameterError(f"`model` logistic needs rewards 0 or 1, but {name} has {other:,} row(s) with other "
                                 "rewards; use `model` ridge")
        return "logistic", "model"
    return ("ridge", "rewards other than 0/1") if other else ("logistic", "every reward is 0 or 1")


def logistic_counts(part: GroupedPart, n_features: int) -> np.ndarray:
    """(2B + d,): per block b its rows, then its Σ r, then each feature's Σ x² over the rows (which features some
    row has, and the preconditioner's curvature)."""
    n_blocks = part.start.size - 1
    block = np.repeat(np.arange(n_blocks), np.diff(part.start))
    squares = None if part.data is None else part.data ** 2
    return np.concatenate([np.diff(part.start).astype(np.float64),
                           np.bincount(block, weights=part.reward, minlength=n_blocks),
                           np.bincount(part.indices, weights=squares, minlength=n_features)[:n_features]
                           .astype(np.float64)])


#: An action's intercept is solved without a prior (its mean prediction on its rows = its observed rate) when it has
#: at least this many rewarded and this many unrewarded rows (the "10 events per variable" of Peduzzi et al. 1996,
#: J. Clin. Epidemiol. 49:1373–1379); the actions with fewer are shrunk toward the pooled rate (:func:`rate_prior`).
EXACT_EVENTS = 10
#: Newton steps on the intercepts stop when every fit's score equation holds to this relative residual.
INTERCEPT_RTOL = 1e-12


@dataclass(frozen=True)
class RatePrior:
    """Per fit F of a logistic solve: the prior's pseudo-rows per row c_F (0: the intercept is exact), its centre p̄_F,
    and the score equation's target T_F = s_F + m p̄ (with c_F > 0; s_F without) and weight W_F = 1 + c_F; per fit
    group (fold model) m, p̄ and the prior's shrunk actions."""

    per_row: np.ndarray
    centre: np.ndarray
    target: np.ndarray
    weight: np.ndarray
    rows: np.ndarray
    pooled: np.ndarray
    shrunk: np.ndarray


def rate_prior(n: np.ndarray, s: np.ndarray, n_actions: int) -> RatePrior:
    """The conjugate prior of the logistic ρ̂ for 0/1 rewards, per fit group (fold model) of k per-action fits with
    n_a rows and s_a rewarded ones.

    An action with at least :data:`EXACT_EVENTS` rewarded and unrewarded rows has no prior: its intercept is
    unpenalised and its score equation says that its model's mean prediction on its rows is its rate s_a/n_a. Every
    other action a ("shrunk") gets m pseudo-rows of label p̄ spread over its rows — c = m/n_a per row, at the row's
    own x: Chen & Ibrahim's conjugate prior for generalised linear models (Statistica Sinica 13, 2003, 461–476),
    π(w, b) ∝ exp(c Σ_i [p̄ z_i − log(1 + e^{z_i})]) — so that the score equation of its intercept reads

        mean_{i: a_i = a} ρ̂_a(x_i) = (s_a + m p̄) / (n_a + m),

    the posterior mean of the action's rate under a Beta(m p̄, m(1 − p̄)) prior. Unclicked actions thus go to
    m p̄/(n_a + m) ≤ p̄, down as their rows grow (not to ½ on the logit, as an add-½ rate would), and actions with
    few rows stay near p̄.

    **m (empirical Bayes)**: the Beta-binomial moment estimate of the spread of the actions' rates (Kleinman 1973,
    JASA 68:46–54): with p = Σ s_a / Σ n_a and N = Σ n_a over the k' actions with rows,
    τ² = (Σ_a n_a (s_a/n_a − p)² − (k' − 1) p(1 − p)) / (N − Σ_a n_a²/N) and m = p(1 − p)/τ² − 1, kept in [1, N]
    (m = N where the rates spread no more than binomial noise: τ² ≤ 0).

    **p̄**: Σ_shrunk s_a/(n_a + m) / Σ_shrunk n_a/(n_a + m), the precision-weighted rate of the shrunk actions, the
    one centre for which Σ_shrunk n_a (s_a + m p̄)/(n_a + m) = Σ_shrunk s_a: the predictions' total on the shrunk
    actions' rows is their clicks, and with the exact actions' the whole fit's mean prediction is its pooled rate.
    (p = ½/(N + 1)-smoothed, (S + ½)/(N + 1), only where the group has no reward or no unrewarded row at all; p̄ the
    shrunk actions' smoothed rate where their rewards are all 0 or all 1, whose logit p̄ would be ∓∞; p̄ = p where
    no action is shrunk.) p̄ is also the prediction of an action the group never logged (w = 0, b = logit p̄).
    """
    n2, s2 = n.reshape(-1, n_actions).astype(np.float64), s.reshape(-1, n_actions).astype(np.float64)
    shrunk = ~((s2 >= EXACT_EVENTS) & (n2 - s2 >= EXACT_EVENTS)) & (n2 > 0)
    N, S = n2.sum(axis=1), s2.sum(axis=1)
    p = np.where((S > 0) & (S < N), S / np.maximum(N, 1.0), glm.smoothed_rate(S, N))
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(n2 > 0, s2 / np.where(n2 > 0, n2, 1.0), 0.0)
        spread = (n2 * (rates - p[:, None]) ** 2).sum(axis=1) - ((n2 > 0).sum(axis=1) - 1) * p * (1 - p)
        tau2 = spread / (N - (n2 ** 2).sum(axis=1) / np.maximum(N, 1.0))
        m = np.where(tau2 > 0, p * (1 - p) / tau2 - 1.0, np.inf)
    m = np.clip(m, 1.0, np.maximum(N, 1.0))
    weights = shrunk / (n2 + m[:, None])
    total = (weights * n2).sum(axis=1)
    pooled = np.where((total > 0) & (S > 0) & (S < N), (weights * s2).sum(axis=1) / np.where(total > 0, total, 1), p)
    # the shrunk actions' rewards all 0 (or all 1) while the exact actions' are not: p̄ = 0 (1) has logit ∓∞, so
    # their centre is their rows' smoothed rate instead (Σ_shrunk s + ½)/(Σ_shrunk n + 1)
    S_shrunk, N_shrunk = (shrunk * s2).sum(axis=1), (shrunk * n2).sum(axis=1)
    # (no action shrunk: p̄ stays the group's own rate p, the prediction of an action it never logged)
    degenerate = (N_shrunk > 0) & ((S_shrunk == 0) | (S_shrunk == N_shrunk))
    pooled = np.where(degenerate, glm.smoothed_rate(S_shrunk, N_shrunk), pooled)
    per_row = np.where(shrunk, m[:, None] / np.maximum(n2, 1.0), 0.0)
    centre = np.broadcast_to(pooled[:, None], n2.shape)
    return RatePrior(per_row.ravel(), centre.ravel().copy(), (s2 + np.where(shrunk, m[:, None], 0.0) * centre).ravel(),
                     1.0 + per_row.ravel(), m, pooled, shrunk.ravel())


def add_logistic_terms(total: np.ndarray | None, part: GroupedPart, x: np.ndarray, fits: Fits, active: np.ndarray,
                       columns: np.ndarray | None = None, prior: RatePrior | None = None) -> np.ndarray:
    """total (F, d + 2) += per fit its data log loss's gradient ((w, b): d + 1) and, in the last column, the log loss
    Σ log(1 + e^{z}) − r z (with its prior's pseudo-rows, :func:`rate_prior`), over the blocks of its rows (a pass
    of :meth:`PartSet.accumulate`); ``columns``: the features renumbered to the d present ones
    (:func:`~dr_scale.crossfit.parts.present_columns`)."""
    d = x.shape[1] - 1
    if total is None:
        total = np.zeros((x.shape[0], d + 2))
    loss, grad = total[:, d + 1], total[:, :d + 1]
    for f in range(fits.groups):
        for a in range(fits.n_actions):
            using = [F for F in fits.of_block(f, a) if active[F]]
            b = f * fits.n_actions + a
            if not using:
                continue
            for lo, hi, X in part.chunks(b, b + 1, d, columns):
                for F in using:
                    glm.add_binary_terms(loss, grad, X, part.reward[lo:hi], x[F, :d], x[F, d], F,
                                         0.0 if prior is None else prior.per_row[F],
                                         0.0 if prior is None else prior.centre[F])
    out: np.ndarray = total
    return out


def intercept_terms(part: GroupedPart, x: np.ndarray, fits: Fits, columns: np.ndarray | None = None) -> np.ndarray:
    """(F, 3): per fit Σ σ(z_i) and Σ σ(z_i)(1 − σ(z_i)) over its rows (Newton's step on its intercept), and, for the
    full-data fits, the rows on the wrong side of its boundary, (2r − 1) z ≤ 0 (0: separated)."""
    d = x.shape[1] - 1
    out = np.zeros((x.shape[0], 3))
    for f in range(fits.groups):
        for a in range(fits.n_actions):
            b = f * fits.n_actions + a
            for lo, hi, X in part.chunks(b, b + 1, d, columns):
                for F in fits.of_block(f, a):
                    z = X @ x[F, :d] + x[F, d]
                    p = glm.expit(z)
                    out[F, :2] += float(p.sum()), float(p @ (1 - p))
                    if F >= fits.folds * fits.n_actions:
                        out[F, 2] += np.count_nonzero((2 * part.reward[lo:hi] - 1) * z <= 0)
    return out


def out_of_fold_log_loss(part: GroupedPart, x: np.ndarray, folds: int, n_actions: int) -> np.ndarray:
    """(k,): per action Σ_i −log-likelihood of r_i under fold model f_i (x (K·k, d + 1) the fold models)."""
    d = x.shape[1] - 1
    out = np.zeros(n_actions)
    for b in range(folds * n_actions):
        lo, hi = int(part.start[b]), int(part.start[b + 1])
        if hi > lo:
            z = part.block(b, d) @ x[b, :d] + x[b, d]
            out[b % n_actions] -= float(np.sum(glm.log_expit(np.where(part.reward[lo:hi] > 0, z, -z))))
    return out


def solve_intercepts(parts: PartSet, x: np.ndarray, prior: RatePrior, fitted: np.ndarray, fits: Fits,
                     columns: np.ndarray | None, max_iter: int) -> tuple[np.ndarray, int]:
    """The fits' intercepts solved exactly for their weights w: Newton's method on log W_F Σ_i σ(x_i·w + b) = log T_F
    (the score equation of b, :func:`rate_prior`; nearly linear in b where σ ≈ e^z), one pass per step, until
    |W Σ σ − T| ≤ :data:`INTERCEPT_RTOL` · T for every ``fitted`` fit; (the last pass's :func:`intercept_terms`,
    the passes)."""
    d, passes = x.shape[1] - 1, 0
    while True:
        terms = parts.sum(intercept_terms, x, fits, columns)
        passes += 1
        predicted = prior.weight * terms[:, 0]
        with np.errstate(invalid="ignore", divide="ignore"):
            off = np.abs(predicted - prior.target) > INTERCEPT_RTOL * prior.target
        off &= fitted & (terms[:, 1] > 0)
        if not off.any() or passes >= max_iter:
            return terms, passes
        x[off, d] += (np.log(prior.target[off]) - np.log(predicted[off])) * terms[off, 0] / terms[off, 1]


def solve_logistic(parts: PartSet, n: np.ndarray, sy: np.ndarray, n_features: int, columns: np.ndarray | None,
                   squares: np.ndarray, n_all: float, lam: float, fits: Fits, *, rtol: float, max_iter: int,
                   progress: bool = False) -> tuple[glm.GLMFit, np.ndarray, np.ndarray, int]:
    """The binary fits at penalty λ: (the L-BFGS result, x (F, d + 1) = (w, b), :func:`intercept_terms` at x, the
    intercept passes), d = ``n_features`` the features ``columns`` renumbers the rows' to (None: the rows' own);
    n, sy (F,) the fits' rows and Σ r; ``squares`` (d,) the features' Σ x² over all ``n_all`` rows (the
    preconditioner: w_j's curvature ≈ (1 + c)(Σ_{i in the fit} x_ij² · p(1 − p) + λ)/n, p the fit's prior mean
    and the sum taken as the fit's share of Σ x²).

    Each fit minimises Σ_i [(1 + c) log(1 + e^{z_i}) − (r_i + c p̄) z_i] + (λ/2)‖w‖² (c, p̄ its
    :func:`rate_prior`; c = 0 where the intercept is exact) by L-BFGS, one pass per step
    (:mod:`dr_scale.outofcore.glm`), from w = 0 and b = the logit of its prior mean (s + m p̄)/(n + m); then its
    intercept b, unpenalised, is solved exactly for the w found (:func:`solve_intercepts`). A fit whose rewards are
    all equal has its optimum at the start (every row's label (r + c p̄)/(1 + c) is the same: w = 0, σ(b) the prior
    mean); a fit without rows is not fitted: w = 0, b = logit p̄ of its fold model."""
    d = n_features
    prior = rate_prior(n, sy, fits.n_actions)
    fitted = n > 0
    rate = np.where(fitted, prior.target / np.maximum(n * prior.weight, 1e-300), prior.centre)
    x0 = np.zeros((n.size, d + 1))
    x0[:, d] = glm.logit(rate)
    free = np.zeros((n.size, d + 1), bool)
    free[fitted & (sy > 0) & (sy < n)] = True  # all rewards equal: every row's label (r + c p̄)/(1 + c) is the same
    penalty = np.r_[np.ones(d, bool), False]
    spread = np.maximum(rate * (1 - rate), 1e-6)
    rows = np.maximum(n, 1.0)
    curvature = np.column_stack([(squares[None, :] * (rows / max(n_all, 1.0) * spread * prior.weight)[:, None] + lam)
                                 / rows[:, None], spread * prior.weight]).astype(np.float32)

    def evaluate(x: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The penalised log loss and its gradient of the fits at ``x`` (``active`` ones), one pass."""
        total = parts.accumulate(add_logistic_terms, x, fits, active, columns, prior)
        return glm.penalised(total[:, -1], total[:, :-1], x, lam, n, penalty)

    result = glm.minimize(evaluate, x0, rtol=rtol, max_iter=max_iter, free=free, curvature=curvature,
                          progress=progress, description="logistic ρ̂")
    x = result.x
    terms, passes = solve_intercepts(parts, x, prior, fitted, fits, columns, max_iter)
    return result, x, terms, passes


@dataclass
class LogisticObjective(Objective):
    """Logistic ρ̂_a(x) = σ(x·w_a + b_a) for 0/1 rewards, the sibling of the ridge fit (module docstring): for each
    action and fold model, on its rows,

        (w, b) = argmin Σ_i [log(1 + e^{z_i}) − r_i z_i] + (λ/2) ‖w‖²,   z_i = x_i·w + b   (b not penalised)

    — scikit-learn's ``LogisticRegression(C=1/λ)`` — by L-BFGS, all fits at once, one pass per step, on the
    features some row has (:func:`~dr_scale.crossfit.parts.present_columns`); scored by the out-of-fold log loss.
    A fit whose rows the features separate perfectly still has finite weights (the penalty λ‖w‖²/2 grows without
    bound along the separating direction): one warning names the actions and λ.
    """

    name: str = "the log"
    chosen_by: str = "model"
    label: ClassVar[str] = "ρ̂"
    loss: ClassVar[str] = "log_loss"
    what: ClassVar[str] = "logistic models"

    def count(self, part: GroupedPart, n_features: int, groups: int, n_actions: int) -> Any:
        """A part's rows, positive rewards and feature squares per block (:func:`logistic_counts`)."""
        return logistic_counts(part, n_features)

    def sums(self, parts: PartSet, n_features: int, counts: Any, fits: Fits) -> tuple[Any, int]:
        """(rows, positive rewards per block, feature squares) from the counts, no more passes."""
        blocks = (counts.size - n_features) // 2
        return (counts[:blocks], counts[blocks:2 * blocks], counts[2 * blocks:]), 0

    def solve(self, parts: PartSet, sums: Any, n_features: int, lam: float, fits: Fits, settings: FitSettings,
              progress: bool) -> Solved:
        """The fits by :func:`solve_logistic` on the present features, their weights put back in d columns (0
        elsewhere); with the full-data models, also each one's misclassified rows (:func:`intercept_terms`) and the
        calibration on the rows (:mod:`dr_scale.reward.calibration`, one pass)."""
        block_n, block_sy, squares = sums
        present = squares > 0
        columns, m = present_columns(present)
        result, x_m, terms, passes = solve_logistic(parts, fits.combine(block_n), fits.combine(block_sy), m, columns,
                                                    squares[present], float(block_n.sum()), lam, fits,
                                                    rtol=settings.rtol, max_iter=settings.max_iter, progress=progress)
        x = np.zeros((x_m.shape[0], n_features + 1))  # the features no row has: weight 0
        x[:, np.r_[present, True]] = x_m[:, np.r_[np.arange(int(present.sum())), m]]
        calibration = None
        if fits.full:
            predictors = x_m[:fits.groups * fits.n_actions] if fits.folds else x_m[-fits.n_actions:]
            calibration = calibration_record(parts.sum(calibration_terms, predictors[:, :m], predictors[:, m],
                                                       fits.groups, fits.n_actions, True, columns), fits.folds > 0)
        return Solved(x, result.passes + passes + fits.full, result.converged, terms[:, 2], calibration)

    def out_of_fold(self, part: GroupedPart, solved: Solved, n_features: int, folds: int,
                    n_actions: int) -> np.ndarray:
        """A part's log losses −Σ [r log σ(z) + (1 − r) log(1 − σ(z))] per action by the fold models that did
        not see the rows.
        """
        return out_of_fold_log_loss(part, solved.x, folds, n_actions)

    def search_record(self, sample: PartSet, sums: Any, n_features: int, folds: int, n_actions: int,
                      losses: list) -> dict:
        """The λ search's sample rows, in all and per action."""
        n = sums[0].reshape(folds, n_actions).sum(axis=0)
        return {"sample_rows": int(n.sum()), "sample_rows_per_action": n.astype(int).tolist()}

    def model(self, solved: Solved, sums: Any, lam: float, fits: Fits, n_features: int, n_actions: int,
              settings: FitSettings) -> LogisticRewardModel:
        """The :class:`~dr_scale.reward.models.LogisticRewardModel` of the K fold models and the full-data one
        (separated actions warned about).
        """
        d, k, x = n_features, n_actions, solved.x
        n, sy = fits.combine(sums[0]), fits.combine(sums[1])
        full = slice(fits.folds * k, None)
        mixed = (sy > 0) & (sy < n)
        prior = rate_prior(n, sy, k)  # the shrunk actions' pseudo-rows cannot be separated: only the exact ones
        separated = np.flatnonzero(mixed[full] & ~prior.shrunk[full] & (solved.extra[full] == 0))
        if separated.size:
            warnings.warn(f"{self.name}: the features separate the 0 and 1 rewards of action(s) "
                          f"{', '.join(map(str, separated))} perfectly; the L2 penalty λ = {lam:g} keeps their weights "
                          f"finite (‖w‖ up to {np.linalg.norm(x[full][separated, :d], axis=1).max():.3g})",
                          SeparatedRewardsWarning, stacklevel=4)
        n_fit = n.reshape(-1, k)
        _warn_unlogged(self.name, n_fit, x[:, d].reshape(-1, k), fits.folds, logit=True)
        constant = np.flatnonzero(~mixed[full] & (n[full] > 0))
        coef = x[:, :d].reshape(-1, k, d).transpose(0, 2, 1)
        intercept = x[:, d].reshape(-1, k)
        rows = n_fit[-1].astype(int)
        model = LogisticRewardModel(np.ascontiguousarray(coef[-1]), intercept[-1].copy(), fold_seed=settings.seed,
                                    metadata={
            "model": "logistic", "model_chosen_by": self.chosen_by, "method": "L-BFGS", "rows": int(rows.sum()),
            "rows_per_action": rows.tolist(), "unlogged_actions": np.flatnonzero(rows == 0).tolist(),
            "constant_actions": constant.tolist(), "separated_actions": separated.tolist(),
            "prior": {"rows": float(prior.rows[-1]), "centre": float(prior.pooled[-1]), "exact_events": EXACT_EVENTS,
                      "shrunk_actions": np.flatnonzero(prior.shrunk[full]).tolist()}})
        if fits.folds:
            model.fold_coef, model.fold_intercept = np.ascontiguousarray(coef[:-1]), intercept[:-1].copy()
        return model


class SeparatedRewardsWarning(UserWarning):
    """The features separate an action's 0 and 1 rewards perfectly; the L2 penalty keeps the weights finite."""




def _warn_unlogged(name: str, n: np.ndarray, intercept: np.ndarray, folds: int, logit: bool = False) -> None:
    """One :class:`UnloggedActionWarning` naming the actions never logged, and the fold models without rows
    (``logit``: the intercepts are logits, of the prior's centre p̄, :func:`rate_prior`)."""
    never = np.flatnonzero(n[-1] == 0)
    messages = []
    if never.size:
        value = intercept[-1, never[0]]
        messages.append(f"action(s) {', '.join(map(str, never))} never logged: ρ̂ for them is the pooled mean reward "
                        + (f"{glm.expit(value):.6g} (the prior's centre p̄, as the logit b = {value:.6g}; w = 0)"
                           if logit else
                           f"{value:.6g} (w = 0)"))
    for j in range(folds):
        missing = np.flatnonzero((n[j] == 0) & (n[-1] > 0))
        if missing.size:
            messages.append(f"action(s) {', '.join(map(str, missing))} logged only in fold {j}: fold model {j} "
                            f"for them is the pooled mean reward of the other folds (w = 0)")
    if messages:
        warnings.warn(f"{name}: " + "; ".join(messages), UnloggedActionWarning, stacklevel=3)


def fit_reward_model(logs: str | OpenedLog, settings: FitSettings | None = None, *,
                     client: Client | None = None,
                     storage_options: dict | None = None, progress: bool = False) -> LinearRewardModel:
    """Per-action ridge models ρ̂_a(x) = b_a + x·w_a on the log at ``logs`` (any fsspec URL), out of core.

    ``settings``: a :class:`FitSettings` (default: λ chosen by the out-of-fold error on a keyed sample, no
    folds); ``client``: a ``distributed.Client`` (else Dask's local threaded scheduler). d and k come from the
    log's schema metadata unless given, else from the data. The model's ``metadata`` records λ (and its search),
    rows per action, folds, the CG passes and the data's fingerprint (:class:`Extent`).

    Each ρ̂_a minimises Σ_{i: a_i = a} (r_i − b_a − x_i·w_a)² + λ ‖w_a‖², the regression of the reward
    on the features over the rows that logged action a, by conjugate gradients, one pass over the parts
    per iteration. It is the reward model of the direct method and of doubly robust estimation
    (Dudík, Langford & Li 2011, Sec. 2.1: ρ̂_a(x) estimates E[r_a | x]).

    Parameters
    ----------
    logs : str or OpenedLog
        The log: a Parquet file, a folder of parts or any fsspec URL, or opened with a filter
        (:func:`~dr_scale.logs.opened.open_log`: only its rows are read).
    settings : FitSettings or None
        How to fit (default ``FitSettings()``: λ by the out-of-fold error on a keyed sample, no folds).
    client : distributed.Client or None
        Run on this Dask cluster (default: Dask's local threaded scheduler).
    storage_options : dict or None
        fsspec's options for ``logs``.
    progress : bool
        Show each stage's progress on stderr.

    Returns
    -------
    LinearRewardModel
        ρ̂ with ``coef`` (d × k) and ``intercept`` (k); with ``folds``, the fold models too.

    See Also
    --------
    FitSettings : The settings.
    dr_scale.reward.models.LinearRewardModel : The model returned.

    Examples
    --------
    >>> import tempfile
    >>> from dr_scale.synthetic.bandit import generate_bandit
    >>> folder = tempfile.TemporaryDirectory()
    >>> logs = folder.name + "/log"
    >>> _ = generate_bandit(logs, rows=2000, features=100, actions=3)  # a generated 2,000-row log
    >>> model = fit_reward_model(logs, FitSettings(folds=2))  # 0/1 rewards: a logistic model by default
    >>> type(model).__name__, model.coef.shape, model.metadata["lam"], model.metadata["rows_per_action"]
    ('LogisticRewardModel', (100, 3), 10.0, [843, 828, 329])
    >>> folder.cleanup()
    """
    model = fit_log(logs, settings, RewardModels(str(logs)), client=client, storage_options=storage_options,
                    progress=progress)
    vocabulary = action_vocabulary(logs, storage_options)
    if vocabulary is not None:  # the values its columns predict: another log's must be the same (check_model_actions)
        model.metadata["actions"] = vocabulary
    out: LinearRewardModel = model
    return out
