"""Learn a linear policy from a logged data set, out of core (paper, Sec. 4, with a regression learner).

Every row's reward is imputed for every action (:mod:`.impute`: DR, IPS or DM, with
ρ̂ cross-fitted for DR), and a score per action is fitted to the imputed rewards:

* ``learner="ridge"`` — for each action a the ridge regression over ALL rows

      (w_a, b_a) = argmin Σ_i (Γ_a(x_i) − b_a − x_i·w_a)² + λ ‖w_a − w⁰_a‖²,

  shrunk towards the linear reward model's own weights w⁰_a = w^ρ̂_a (DR, DM; w⁰ = 0
  for IPS or a non-linear ρ̂): as λ grows the policy tends to argmax_a ρ̂_a(x) (the
  direct method's policy), as λ → 0 to the unpenalised regression on Γ. With
  w_a = w⁰_a + δ_a it is a ridge fit of δ_a to Γ_a − x·w⁰_a − b⁰_a, whose normal
  equations (XᵀX − n μμᵀ + λI) δ_a = Xᵀy_a − μ Σy_a share one operator
  for all k actions: one pass per block-CG iteration computes XᵀX P for the k
  right-hand sides together (:func:`dr_scale.outofcore.ridge.fit`), and the first
  pass gathers every right-hand side. The policy is π(x) = argmax_a b_a + x·w_a, the
  regression estimate of argmax_a E[Γ_a | x] = argmax_a E[r | x, a].
* ``learner="dlm"`` — direct loss minimization (Appendix A, :mod:`.dlm`) on Γ, its
  batched towards-better update as one map-reduce pass per iteration, on features
  scaled by their standard deviations (no centring: sparse) plus a constant. A feature
  the log never shows (never non-zero) gets weight 0; in the ridge learner it stays at
  the shrinkage centre w⁰ (0 for IPS and for a ρ̂ fitted on the log).

**λ** of the policy: by default λ = 10 × (mean active features per row × n / 1000)
(:data:`LAMBDA_FACTOR`, :func:`lam_scale`; the scale is XᵀX's mean diagonal entry × d / 1000).
With ``lam="auto"`` the ridge learner fits the grid :data:`AUTO_GRID` × that scale in the
same passes on the rows outside a validation fold (row i is in it when u(row_id_i) < 1/5,
u keyed by (seed, "learn validation")), picks the λ whose policy has the highest imputed
value on the validation rows, (1/m) Σ_{i ∈ val} Γ_{π(x_i)}(x_i), and refits on all rows with it.

**Passes.** Every CG solve (ρ̂'s and the policy's) stops when ‖residual‖ ≤ :data:`RTOL` ‖rhs‖
for all its fits (the reward-model fitter's tolerance), the policy's also after
:data:`MAX_PASSES` passes: the policy needs only the argmax, and CG stopped early from the
shrinkage centre (δ = 0) is itself a regulariser. ρ̂ (for DR and DM, unless given) is fitted
on the same parts, read once and grouped by (fold, action), by the one reward-model fitter
(:func:`dr_scale.reward.fitting.fit_on_parts`: cross-fitted over K folds, its λ chosen by the
out-of-fold error on a keyed sample).

The parts are read once and kept (Dask memory, or spilled to local files,
:mod:`dr_scale.outofcore.passes`); every pass maps over them and tree-reduces.
Additions happen in the parts' fixed batches, so the policy is bit-identical on a
laptop and on any cluster, for any number of workers.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.parts import Extent, LogPart, read_grouped_part
from dr_scale.crossfit.settings import MODELS, RTOL, FitSettings, Stages, check_int, check_lam
from dr_scale.io.config import PositiveFinite, check, tolerance
from dr_scale.learning.impute import METHODS, impute_rewards
from dr_scale.logs.opened import OpenedLog, open_log
from dr_scale.outofcore import ridge
from dr_scale.outofcore.passes import PartSet
from dr_scale.outofcore.products import add_transposed_products
from dr_scale.outofcore.progress import Passes
from dr_scale.policies import LinearPolicy
from dr_scale.reward.fitting import UnloggedActionWarning, fit_on_parts
from dr_scale.reward.models import check_fitted_log, check_model_actions, checks_fitted_log, predict_columns

if TYPE_CHECKING:
    from distributed import Client

    from dr_scale.propensity.model import PropensityModel
    from dr_scale.reward.models import RewardModel

LEARNERS = ("ridge", "dlm")
#: The policy's default λ, relative to the mean number of active features per row times n / 1000 (:func:`lam_scale`).
LAMBDA_FACTOR = 10.0
#: λ grid of ``lam="auto"``, relative to the same scale.
AUTO_GRID = (1.0, 10.0, 100.0)
#: Every CG solve stops at ‖residual‖ ≤ RTOL ‖rhs‖ for all its fits (the reward-model fitter's tolerance), a
#: policy's also after MAX_PASSES passes.
MAX_PASSES = 30
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


# -- the entry point --------------------------------------------------------------------
def log_shape(logs: OpenedLog, n_features: int | None, n_actions: int | None, reward_model: Any) -> tuple[int, int]:
    """(d, k) by the log's rule (:meth:`~dr_scale.logs.opened.OpenedLog.dimensions`: as given, else the log's
    metadata, else the reward model's); a given d or k the log's metadata contradicts, or none at all, is an error."""
    meta, first = logs.metadata, logs.paths[0]
    for key, given, what in (("n_features", n_features, "features"), ("n_actions", n_actions, "actions")):
        if given is not None and meta.get(key, given) != given:
            raise ParameterError(f"{first}: the log's {what} number {meta[key]} (its metadata) differs from the "
                                 f"given {given}")
    d, k = logs.dimensions(n_features, n_actions, (reward_model,))
    if d is None or k is None:
        missing = "n_features (d)" if d is None else "n_actions (k)"
        raise ParameterError(f"{first}: the log's metadata has no {missing}; give it (--n-features / --n-actions)")
    if reward_model is not None and (reward_model.n_features, reward_model.n_actions) != (d, k):
        raise ParameterError(f"the reward model has {reward_model.n_features} features and "
                             f"{reward_model.n_actions} actions, the log {d} and {k}")
    return int(d), int(k)


@dataclass(frozen=True)
class LearnSettings:
    """How :func:`learn_policy` learns; checked at construction (errors name the parameter).

    ``method``: the reward imputation, one of :data:`~dr_scale.learning.impute.METHODS`; ``learner``: one of
    :data:`LEARNERS`; ``lam``: the policy's ridge penalty — None: :data:`LAMBDA_FACTOR` × (mean active
    features · n / 1000); a number; or ``"auto"`` (a validation fold); ``folds``: the cross-fitting folds of
    the ρ̂ fitted on the log (DR, DM) when no reward model is given — fitted by the one fitter,
    :func:`dr_scale.reward.fitting.fit_on_parts`, with its defaults (λ by the out-of-fold error on a keyed sample);
    ``rtol``: every CG solve — ρ̂'s and the policy's — stops when ‖residual‖ ≤ rtol ‖rhs‖ for every fit (the
    default is the fitter's, :data:`dr_scale.reward.fitting.RTOL`); ``max_iter``: the policy's solves also stop after
    ``max_iter`` passes (early-stopped CG from the shrinkage centre is itself a regulariser); DLM runs at most
    ``max_iter`` updates with step ``epsilon``; ``seed``: the key of the folds, the samples and DLM's start;
    ``n_features``, ``n_actions``: d and k when the log's metadata lacks them; ``allow_unlogged_actions``: let the
    policy choose actions the log never took (by default they are excluded, with a warning saying on how many
    rows the scores would have chosen them); ``model``: the ρ̂ fitted on the log, ``"ridge"``
    (the default, the paper's ρ̂: also the policy's shrinkage centre) or ``"logistic"`` (whose logits cannot be
    that centre); None: the fitter's default, logistic when every reward is 0 or 1.

    Parameters
    ----------
    method : str
        The reward imputation: ``"dr"``, ``"ips"`` or ``"dm"``.
    learner : str
        ``"ridge"`` (ridge scores on the imputed rewards) or ``"dlm"``.
    lam : float, str or None
        The policy's ridge penalty: None (scaled to the data), a number > 0, or ``"auto"``.
    folds : int
        The cross-fitting folds (≥ 2) of the ρ̂ fitted on the log.
    rtol : float
        Every conjugate-gradient solve stops when ‖residual‖ ≤ rtol ‖rhs‖.
    max_iter : int
        The policy's solves stop after this many passes; DLM's updates after this many.
    epsilon : float
        DLM's step size.
    seed : int
        The key of the folds, the samples and DLM's start.
    n_features : int or None
        The number of features d when the log's metadata lacks it.
    n_actions : int or None
        The number of actions k when the log's metadata lacks it.
    allow_unlogged_actions : bool
        Let the policy choose actions the log never took (default False: excluded).
    model : str or None
        The reward model fitted on the log: ``"ridge"`` (default), ``"logistic"``, or None (logistic for 0/1 rewards).

    See Also
    --------
    learn_policy : Learns with these settings.

    Examples
    --------
    >>> settings = LearnSettings(method="ips", lam=100.0)
    >>> settings.method, settings.learner, settings.lam, settings.folds
    ('ips', 'ridge', 100.0, 2)
    >>> LearnSettings(method="ols")
    Traceback (most recent call last):
    ...
    dr_scale.core.errors.ParameterError: method must be one of dr, ips, dm, got 'ols'
    """

    method: str = "dr"
    learner: str = "ridge"
    lam: float | str | None = None
    folds: int = 2
    rtol: float = RTOL
    max_iter: int = MAX_PASSES
    epsilon: float = 0.1
    seed: int = 0
    n_features: int | None = None
    n_actions: int | None = None
    allow_unlogged_actions: bool = False
    model: str | None = "ridge"

    def __post_init__(self) -> None:
        put = object.__setattr__
        if not isinstance(self.allow_unlogged_actions, (bool, np.bool_)):
            raise ParameterError(f"`allow_unlogged_actions` must be True or False, got {self.allow_unlogged_actions!r}")
        if self.model is not None and self.model not in MODELS:
            raise ParameterError(f"`model` must be one of {', '.join(MODELS)} (or None), got {self.model!r}")
        if self.method not in METHODS:
            raise ParameterError(f"`method` must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.learner not in LEARNERS:
            raise ParameterError(f"`learner` must be one of {', '.join(LEARNERS)}, got {self.learner!r}")
        put(self, "lam", check_lam(self.lam, allow_none=True))
        put(self, "folds", check_int(self.folds, "folds", 2))
        put(self, "rtol", tolerance(self.rtol, "rtol"))
        put(self, "max_iter", check_int(self.max_iter, "max_iter", 1))
        put(self, "epsilon", float(check(PositiveFinite, "epsilon", self.epsilon)))
        put(self, "seed", check_int(self.seed, "seed", 0))
        put(self, "n_features", check_int(self.n_features, "n_features", 1, allow_none=True))
        put(self, "n_actions", check_int(self.n_actions, "n_actions", 1, allow_none=True))

    def reward_fit(self, n_features: int, n_actions: int) -> FitSettings:
        """The settings of the ρ̂ fitted on the log: the fitter's defaults, these folds, seed and rtol."""
        return FitSettings(folds=self.folds, seed=self.seed, rtol=self.rtol, n_features=n_features,
                           n_actions=n_actions, model=self.model)


def learn_policy(logs: str | OpenedLog, settings: LearnSettings | None = None, *,
                 reward_model: RewardModel | str | None = None, client: Client | None = None,
                 storage_options: dict | None = None, spill: str | None = None,
                 progress: bool = False, stages: Stages | None = None, allow_other_log: bool = False,
                 propensity_model: PropensityModel | None = None,
                 propensity_floor: float = 1e-3) -> LinearPolicy:
    """A linear policy learned from the log at ``logs`` (module docstring); ``metadata`` records how.

    ``settings``: a :class:`LearnSettings` (default: DR-imputed rewards, ridge scores, ρ̂ cross-fitted over 2
    folds). ``reward_model``: ρ̂ for DR / DM (a model or an ``.npz`` path; a cross-fitted one predicts every
    row out of fold); without one, DR and DM fit ρ̂ on the log with the one fitter
    (:func:`dr_scale.reward.fitting.fit_on_parts`), cross-fitted over ``settings.folds`` folds. ``spill``: a folder
    for the parts between passes (local runs), else they stay in memory. ``stages``: collects each stage's
    passes and seconds.

    Policy optimization by reduction (Dudík, Langford & Li 2011, Sec. 4): every row's reward is imputed for
    every action, for DR Γ_a(x_i) = ρ̂_a(x_i) + 1{a = a_i} (r_i − ρ̂_{a_i}(x_i)) / p̂_i (:mod:`.impute`), and a
    score per action is fitted to Γ; the policy takes the action of highest score.

    Parameters
    ----------
    logs : str or OpenedLog
        The log: a Parquet file, a folder of parts or any fsspec URL, or the log opened with its storage options and
        filter (:func:`~dr_scale.logs.opened.open_log`; ``log_filter=``: its rows only).
    settings : LearnSettings or None
        How to learn (default ``LearnSettings()``).
    reward_model : LinearRewardModel, str or None
        ρ̂ for DR and DM, or its ``.npz`` path; None: fitted on the log, cross-fitted.
    client : distributed.Client or None
        Run on this Dask cluster (default: Dask's local threaded scheduler).
    storage_options : dict or None
        fsspec's options for ``logs`` and ``reward_model``.
    spill : str or None
        A folder for the parts between passes (local runs); None keeps them in memory.
    progress : bool
        Show each stage's progress on stderr.
    stages : Stages or None
        Collects each stage's passes and seconds.
    allow_other_log : bool
        Use a cross-fitted ``reward_model`` fitted on another log (by default refused:
        :func:`dr_scale.reward.models.check_fitted_log`, one more pass for the rows' fingerprint).
    propensity_model : object or None
        An estimated logging policy (``predict_proba(X, row_id=…)``, e.g. a cross-fitted
        :class:`~dr_scale.propensity.model.PropensityModel` of this log) whose propensities replace the logged
        ones in the DR and IPS imputations; needed for a log without propensities (docs/propensities.md).
    propensity_floor : float
        The floor of the estimated propensities, in (0, 1).

    Returns
    -------
    LinearPolicy
        The learned deterministic policy, π(x) = argmax_a (x·w_a + b_a), with ``metadata``.

    See Also
    --------
    LearnSettings : The settings.
    dr_scale.ope.evaluation.evaluate_log : Evaluates it, on rows it did not learn from.

    Examples
    --------
    Learn on the keyed split's training rows, then evaluate on its test rows against the uniform policy:

    >>> import tempfile
    >>> from dr_scale import Evaluation, LogFilter, evaluate_log, open_log
    >>> from dr_scale.synthetic.bandit import generate_bandit
    >>> folder = tempfile.TemporaryDirectory()
    >>> logs = folder.name + "/log"
    >>> _ = generate_bandit(logs, rows=2000, features=100, actions=3)  # a generated 2,000-row log
    >>> policy = learn_policy(open_log(logs, log_filter=LogFilter(split="train")))
    >>> policy.metadata["method"], policy.metadata["rows"], round(policy.metadata["lam"], 2)
    ('dr', 1594, 477.28)
    >>> result = evaluate_log(logs, Evaluation(policy, ["IPS"], baseline="uniform"),
    ...                       log_filter=LogFilter(split="test"))
    >>> round(result.differences["IPS"].value, 4), round(result.differences["IPS"].stderr, 4)
    (0.0548, 0.021)
    >>> folder.cleanup()
    """
    settings = settings or LearnSettings()
    if not isinstance(settings, LearnSettings):
        raise ParameterError(f"`settings` must be a LearnSettings, e.g. LearnSettings(method='ips'), got "
                             f"{type(settings).__name__} {settings!r:.80}")
    if reward_model is not None and not isinstance(reward_model, str) and not callable(
            getattr(reward_model, "predict", None)):
        raise ParameterError(f"`reward_model` must be a reward model with predict(X) or an .npz path, got "
                             f"{type(reward_model).__name__} {reward_model!r:.80}")
    method, learner, lam, folds, seed = settings.method, settings.learner, settings.lam, settings.folds, settings.seed
    rtol, max_iter = settings.rtol, settings.max_iter
    stages = stages or Stages(progress)
    logs = open_log(logs, storage_options)
    fs, paths = logs.listing()
    model_name = f"the reward model {reward_model}" if isinstance(reward_model, str) else "the reward model"
    if isinstance(reward_model, str):
        from dr_scale.reward.files import load_reward_model

        reward_model = load_reward_model(reward_model, storage_options)
    d, k = log_shape(logs, settings.n_features, settings.n_actions, reward_model)
    crossfit = method != "ips" and reward_model is None
    with stages.stage("read", f"{len(paths)} part(s)") as passes:
        parts = PartSet.build(read_grouped_part, [(fs, p, d, k, folds if crossfit else None, seed) for p in paths],
                              client, progress, spill)
        counts, active, logged = parts.sum(_rows_active_features_and_actions, k)
        passes.append(2)
    n, mean_active = float(counts[0]), float(active[0] / max(counts[0], 1))
    if method != "ips" and not allow_other_log and checks_fitted_log(reward_model):
        extent = parts.sum(Extent.of)  # the rows' fingerprint, as the fitter records it
        check_fitted_log(reward_model, f"{extent.n}:{extent.fingerprint:016x}", model_name, logs.log_filter)
    meta = {"method": method, "learner": learner, "logs": str(logs), "n_features": d, "n_actions": k,
            "rows": int(n)}
    vocabulary = logs.vocabulary
    check_model_actions(reward_model, vocabulary, model_name)
    if vocabulary is not None:  # the values its action ids name: another log's vocabulary reorders them
        meta["actions"] = vocabulary
    if crossfit:
        reward_model = fit_on_parts(parts, n, d, k, settings.reward_fit(d, k), progress=progress, stages=stages,
                                    name=str(logs))
    rho: Any = reward_model if method != "ips" else None  # any reward model: its fields are read where it has them
    meta["reward_model_folds"] = getattr(rho, "folds", None)
    if crossfit:
        assert rho is not None  # just fitted
        meta["reward_model_lam"] = rho.metadata["lam"]
        meta["reward_model"] = rho.metadata.get("model", "ridge")
    linear = hasattr(rho, "coef") and getattr(rho, "KIND", "linear") == "linear"  # a logistic ρ̂'s logits: no centre
    from dr_scale.io.config import PropensityFloor, check

    imputation = Imputation(method, d, k, rho, (rho.coef, rho.intercept) if linear and rho is not None else None,
                            propensity_model, check(PropensityFloor, "propensity_floor", propensity_floor), str(logs))
    if propensity_model is not None:
        meta["propensities"] = "estimated"
        meta["propensity_floor"] = imputation.propensity_floor
    if learner == "ridge":
        if lam == "auto":
            with stages.stage("policy λ", "a grid on the training rows, the imputed value on the validation fold") as p:
                lam, meta["lam_search"] = auto_lambda(parts, imputation, mean_active, n, rtol=rtol,
                                                      max_iter=max_iter, seed=seed, progress=progress, passes=p)
        elif lam is None:
            lam = LAMBDA_FACTOR * lam_scale(mean_active, n)
        with stages.stage("policy", f"ridge scores on the {method.upper()}-imputed rewards, λ = {lam:g}") as p:
            coef, intercept, info = fit_ridge_scores(parts, imputation, float(lam), rtol=rtol, max_iter=max_iter,
                                                     progress=progress)
            p.append(info["passes"])
        coef, intercept = coef[0], intercept[0]
        meta.update(lam=float(lam), converged=info["converged"])
    else:
        with stages.stage("policy", f"DLM on the {method.upper()}-imputed rewards") as p:
            m, sx, sxx = parts.sum(_moments, d)
            var = sxx / m[0] - (sx / m[0]) ** 2
            scale = np.where(var > 1e-12, 1.0 / np.sqrt(np.maximum(var, 1e-12)), 1.0)
            coef, intercept, info = fit_dlm_scores(parts, imputation, scale, epsilon=settings.epsilon,
                                                   max_iter=max_iter, n_iter_no_change=max(10, max_iter // 4),
                                                   seed=seed, progress=progress, seen=sxx > 0)
            p.append(1 + info["passes"])
        meta.update(info, epsilon=settings.epsilon)
    excluded = _unlogged_actions(parts, coef, intercept, logged, settings.allow_unlogged_actions, meta, stages,
                                 str(logs))
    meta["stage_passes"] = stages.passes()
    return LinearPolicy(coef, intercept, meta, "<learned>", excluded)


def _unlogged_actions(parts: PartSet, coef: np.ndarray, intercept: np.ndarray, logged: np.ndarray, allow: bool,
                      meta: dict, stages: Stages, name: str) -> tuple:
    """The actions to exclude from the policy: those the log never took (``logged`` counts its rows per action),
    unless ``allow``; one :class:`UnloggedActionWarning` saying on how many rows the scores choose them (one pass)."""
    never = np.flatnonzero(logged == 0)
    if not never.size:
        return ()
    with stages.stage("never-logged actions", "the rows whose scores choose them") as p:
        picks = parts.sum(_choices, coef, intercept)
        p.append(1)
    rows, n = int(picks[never].sum()), int(picks.sum())
    listed = ", ".join(map(str, never))
    meta.update(unlogged_actions=never.tolist(), unlogged_action_rows=rows, excluded_actions=[] if allow else
                never.tolist())
    share = f"{rows:,} of {n:,} rows ({rows / max(n, 1):.1%})"
    if allow:
        warnings.warn(f"{name}: the policy chooses action(s) {listed}, which the log never took, on {share}: the "
                      "log says nothing about their rewards", UnloggedActionWarning, stacklevel=3)
        return ()
    warnings.warn(f"{name}: action(s) {listed} never logged: excluded from the policy (its scores would have chosen "
                  f"them on {share}; the log says nothing about their rewards); allow_unlogged_actions "
                  "(--allow-unlogged-actions) keeps them", UnloggedActionWarning, stacklevel=3)
    return tuple(int(a) for a in never)


def _choices(part: LogPart, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """Per action, the part's rows whose scores x·coef + intercept choose it (ties to the lowest action)."""
    X = part.matrix(coef.shape[0])
    return np.bincount(np.argmax(np.asarray(X @ coef) + intercept, axis=1), minlength=coef.shape[1]).astype(float)


def _rows_active_features_and_actions(part: LogPart, n_actions: int) -> tuple:
    return (np.array([float(len(part))]), np.array([float(part.indices.size)]),
            np.bincount(part.action, minlength=n_actions).astype(float))


def _moments(part: LogPart, n_features: int) -> tuple:
    X = part.matrix(n_features)
    return (np.array([float(len(part))]), np.asarray(X.sum(axis=0)).ravel(),
            np.asarray(X.multiply(X).sum(axis=0)).ravel())

