"""The logging policy π₀(a | x) estimated from a log, out of core and cross-fitted: :func:`fit_propensity_model`.

On the rows i of a log with contexts x_i and logged actions a_i (its propensity column, if any, is not used),
the multinomial logistic model π̂₀(a | x) = softmax_a(x·W[:, a] + b_a) minimises

    Σ_i [log Σ_a e^{x_i·W[:, a] + b_a} − (x_i·W[:, a_i] + b_{a_i})] + (λ/2) ‖W‖²_F        (b not penalised)

— scikit-learn's ``LogisticRegression(C=1/λ)`` multinomial objective — solved by L-BFGS with one pass over
the parts per step for all models at once (:mod:`dr_scale.outofcore.glm`, which says why L-BFGS). The parts
are read once, grouped by (fold, action) as the reward fitter groups them (:mod:`dr_scale.crossfit.parts`), and
kept between passes in memory or spilled to local files.

**Cross-fitting** (``folds=K``): fold model j is fitted on the rows whose fold is not j, with the same keyed
folds fold(i) = ⌊K · u(row_id_i)⌋ as the reward model ρ̂ of the same ``seed``, and predicts the rows of fold j
(:meth:`~dr_scale.propensity.model.PropensityModel.predict_proba` given row ids). The full-data model is
fitted in the same passes.

**λ = "auto"**: the driver's rule (:func:`dr_scale.crossfit.engine.scan_lambdas`): on a keyed sample of at most
``search_rows`` rows the K fold models are fitted for each λ of the grid (from the largest down, stopping at the
first λ whose error rises) and the λ with the smallest out-of-fold log loss Σ_i −log π̂₀^{(f_i)}(a_i | x_i)
is used on all rows.

**An action a fit has no rows of** (never logged, or logged only in the held-out fold) has no data: its
weights are 0 and its intercept log(½ / (n + k/2)) (its add-½ share), since its maximum-likelihood
probability is 0; the metadata lists such actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa
from scipy.special import logsumexp

from dr_scale.crossfit.engine import Objective, Solved, fit_log, fit_parts
from dr_scale.crossfit.parts import Fits, GroupedPart, LogPart, present_columns
from dr_scale.crossfit.settings import FitSettings, Stages
from dr_scale.logs.reading import partition_from_table, read_table
from dr_scale.outofcore import glm
from dr_scale.outofcore.passes import PartSet
from dr_scale.propensity.model import PropensityModel

if TYPE_CHECKING:
    from distributed import Client
    from fsspec import AbstractFileSystem

    from dr_scale.logs.opened import OpenedLog

#: The columns a propensity fit reads (``propensity`` too where the log has it, unused).
COLUMNS = ("row_id", "features", "action", "reward")


def read_policy_part(fs: AbstractFileSystem, path: str, n_features: int | None, n_actions: int | None) -> LogPart:
    """One part through the logged-data contract, with or without its ``propensity`` column (absent: ones, never
    used by the fit)."""
    table = read_table(fs, path, list(COLUMNS), optional=("values", "propensity"))
    if "propensity" not in table.column_names:
        table = table.append_column("propensity", pa.array(np.ones(table.num_rows)))
    part = partition_from_table(table, path, n_features, n_actions, True)
    X = part.X
    assert X is not None  # read with its features
    data = np.asarray(X.data, dtype=np.float64) if "values" in part.table.column_names else None
    return LogPart(part.row_id, X.indptr, X.indices, data, part.action, part.reward, part.propensity)


# -- passes ---------------------------------------------------------------------------------
def counts(part: GroupedPart, n_features: int) -> np.ndarray:
    """(B + d,): the rows of each block b = fold·k + action, then each feature's Σ x² over the rows (which features
    some row has, and the preconditioner's curvature)."""
    squares = None if part.data is None else part.data ** 2
    return np.concatenate([np.diff(part.start).astype(np.float64),
                           np.bincount(part.indices, weights=squares, minlength=n_features)[:n_features]
                           .astype(np.float64)])


def model_fits(fits: Fits, f: int) -> list[int]:
    """The models whose rows include fold f: fold models j ≠ f, and the full-data model."""
    return [j for j in range(fits.folds) if j != f] + ([fits.folds] if fits.full else [])


def add_softmax_terms(total: np.ndarray | None, part: GroupedPart, x: np.ndarray, fits: Fits, n_actions: int,
                      n_features: int, active: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
    """total (F, D + 1) += per model F its data log loss's gradient (D = (d + 1)·k: W row-major, then b) and, in
    the last column, the log loss, over the part's rows (a pass of :meth:`PartSet.accumulate`); ``columns``: the
    features renumbered to the d present ones (:func:`~dr_scale.crossfit.parts.present_columns`)."""
    k, d = n_actions, n_features
    D = (d + 1) * k
    if total is None:
        total = np.zeros((x.shape[0], D + 1))
    loss, grad = total[:, D], total[:, :D]
    for f in range(fits.groups):
        using = [F for F in model_fits(fits, f) if active[F]]
        if not using:
            continue
        for lo, hi, X in part.chunks(f * k, (f + 1) * k, d, columns):
            for F in using:
                glm.add_multinomial_terms(loss, grad, X, part.action[lo:hi], x[F, :d * k].reshape(d, k), x[F, d * k:D],
                                          F)
    out: np.ndarray = total
    return out


def out_of_fold_log_loss(part: GroupedPart, coef: np.ndarray, intercept: np.ndarray, folds: int) -> np.ndarray:
    """(k,): per logged action Σ_i −log π̂₀^{(f_i)}(a_i | x_i), fold model f_i predicting the rows of fold f_i;
    coef (K, d, k), intercept (K, k)."""
    K, d, k = coef.shape
    out = np.zeros(k)
    for f in range(folds):
        lo, hi = int(part.start[f * k]), int(part.start[(f + 1) * k])
        if hi == lo:
            continue
        Z = np.asarray(part.blocks(f * k, (f + 1) * k, d) @ coef[f]) + intercept[f]
        a = part.action[lo:hi]
        terms = logsumexp(Z, axis=1) - Z[np.arange(hi - lo), a]
        out += np.bincount(a, weights=terms, minlength=k)
    return out


# -- fitting ----------------------------------------------------------------------------------
def solve(parts: PartSet, block_n: np.ndarray, columns: np.ndarray | None, squares: np.ndarray, lam: float,
          fits: Fits, n_features: int, n_actions: int, *, rtol: float, max_iter: int,
          progress: bool = False) -> tuple[np.ndarray, np.ndarray, glm.GLMFit]:
    """The fits' multinomial models at penalty λ: (coef (F, d, k), intercept (F, k), the L-BFGS result); d =
    ``n_features`` the features ``columns`` renumbers the rows' to (None: the rows' own), ``squares`` (d,) their
    Σ x² over all rows (the preconditioner: W[j, a]'s curvature ≈ (Σ_i x_ij² · s_a(1 − s_a) + λ)/n, s_a the
    action's share)."""
    d, k = n_features, n_actions
    n_fit = _fit_counts(block_n, fits, k)
    x0, free = glm.multinomial_start(n_fit, d)
    n_all = max(float(block_n.sum()), 1.0)
    share = n_fit / np.maximum(n_fit.sum(axis=1, keepdims=True), 1.0)
    spread = np.maximum(share * (1 - share), 1e-3)  # (F, k)
    rows = np.maximum(n_fit.sum(axis=1), 1.0)
    curvature = np.concatenate([
        ((squares[None, :, None] * (rows / n_all)[:, None, None] * spread[:, None, :] + lam) / rows[:, None, None])
        .reshape(len(rows), -1), spread], axis=1, dtype=np.float32)
    penalty = np.r_[np.ones(d * k, bool), np.zeros(k, bool)]
    n = n_fit.sum(axis=1)

    def evaluate(x: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The penalised multinomial log loss and its gradient of the fits at ``x`` (``active`` ones), one pass."""
        total = parts.accumulate(add_softmax_terms, x, fits, k, d, active, columns)
        return glm.penalised(total[:, -1], total[:, :-1], x, lam, n, penalty)

    result = glm.minimize(evaluate, x0, rtol=rtol, max_iter=max_iter, free=free, curvature=curvature,
                          progress=progress, description="propensity")
    x = result.x
    return x[:, :d * k].reshape(-1, d, k), x[:, d * k:], result


def _fit_counts(block_n: np.ndarray, fits: Fits, k: int) -> np.ndarray:
    """(F, k): each model's rows per action (fold models: the other folds' rows; the full model: all)."""
    per_fold = block_n.reshape(fits.groups, k)
    rows = [per_fold[[f for f in range(fits.folds) if f != j]].sum(axis=0) for j in range(fits.folds)]
    if fits.full:
        rows.append(per_fold.sum(axis=0))
    return np.stack(rows)


@dataclass
class PropensityObjective(Objective):
    """π̂₀ as the cross-fitting driver fits it (module docstring): rows per (fold, action) block and Σ x² per feature,
    the multinomial fits at λ on the present features (:func:`solve`), the out-of-fold log loss."""

    sized_by_use: ClassVar[bool] = True

    label: ClassVar[str] = "π̂₀"
    loss: ClassVar[str] = "log_loss"
    per_action: ClassVar[bool] = False
    what: ClassVar[str] = "multinomial model(s)"

    def coefficients(self, n_features: int, n_actions: int) -> int:
        """A multinomial fit's coefficients: a weight per (feature, action) and an intercept per action."""
        return (n_features + 1) * n_actions

    def read_part(self, fs: AbstractFileSystem, path: str, n_features: int | None,
                  n_actions: int | None) -> LogPart:
        """One part, with or without its propensity column (:func:`read_policy_part`)."""
        return read_policy_part(fs, path, n_features, n_actions)

    def count(self, part: GroupedPart, n_features: int, groups: int, n_actions: int) -> Any:
        """A part's rows per (fold, action) block and its feature squares (:func:`counts`)."""
        return counts(part, n_features)

    def sums(self, parts: PartSet, n_features: int, counted: Any, fits: Fits) -> tuple[Any, int]:
        """(rows per block, feature squares) from the counts, no more passes."""
        return (counted[:counted.size - n_features], counted[counted.size - n_features:]), 0

    def solve(self, parts: PartSet, sums: Any, n_features: int, lam: float, fits: Fits, settings: FitSettings,
              progress: bool) -> Solved:
        """The fits by :func:`solve` on the features some row has, their weights put back in d rows (0 elsewhere)."""
        block_n, squares = sums
        present = squares > 0
        columns, m = present_columns(present)
        k = block_n.size // fits.groups
        coef_m, intercept, result = solve(parts, block_n, columns, squares[present], lam, fits, m, k,
                                          rtol=settings.rtol, max_iter=settings.max_iter, progress=progress)
        coef = np.zeros((coef_m.shape[0], n_features, k))
        coef[:, present] = coef_m[:, :int(present.sum())]
        return Solved(coef, result.passes, result.converged, (intercept, result))

    def out_of_fold(self, part: GroupedPart, solved: Solved, n_features: int, folds: int,
                    n_actions: int) -> np.ndarray:
        """A part's log losses −Σ log π̂₀^{(−f(i))}(a_i|x_i) by the fold models that did not see the rows."""
        return out_of_fold_log_loss(part, solved.x, solved.extra[0], folds)

    def search_record(self, sample: PartSet, sums: Any, n_features: int, folds: int, n_actions: int,
                      losses: list) -> dict:
        """The λ search's sample rows and mean out-of-fold log loss per λ (None where not fitted)."""
        rows = int(sums[0].sum())
        return {"sample_rows": rows,
                "mean_log_loss": [None if v is None else float(v.sum() / max(rows, 1)) for v in losses]}

    def model(self, solved: Solved, sums: Any, lam: float, fits: Fits, n_features: int, n_actions: int,
              settings: FitSettings) -> PropensityModel:
        """The :class:`~dr_scale.propensity.model.PropensityModel` of the K fold models and the full-data one."""
        coef, (intercept, result) = solved.x, solved.extra
        n_fit = _fit_counts(sums[0], fits, n_actions).astype(int)
        rows = n_fit[-1]
        metadata = {"rows": int(rows.sum()), "rows_per_action": rows.tolist(),
                    "relative_gradient": [float(v) for v in result.relative_gradient],
                    "mean_log_loss": float(result.loss[-1] - 0.5 * lam * float(np.sum(coef[-1] ** 2))
                                           / max(rows.sum(), 1)),
                    "unlogged_actions": np.flatnonzero(rows == 0).tolist(),
                    "unlogged_in_fold_models": [np.flatnonzero((n_fit[j] == 0) & (rows > 0)).tolist()
                                                for j in range(fits.folds)],
                    "method": "L-BFGS", "model": "multinomial logistic"}
        model = PropensityModel(np.ascontiguousarray(coef[-1]), intercept[-1].copy(), fold_seed=settings.seed,
                                metadata=metadata)
        if fits.folds:
            model.fold_coef, model.fold_intercept = np.ascontiguousarray(coef[:-1]), intercept[:-1].copy()
        return model


def fit_on_parts(parts: PartSet, n_rows: int, n_features: int, n_actions: int, settings: FitSettings, *,
                 progress: bool = False, stages: Stages | None = None) -> PropensityModel:
    """π̂₀ on parts grouped by (fold, action) over ``settings.folds`` folds, ``n_rows`` rows in all (module
    docstring), by the cross-fitting driver (:func:`dr_scale.crossfit.engine.fit_parts`): λ as ``settings.lam``
    says, then the K fold models and the full-data model in the same passes."""
    model: PropensityModel = fit_parts(parts, n_rows, n_features, n_actions, settings, PropensityObjective(),
                                       progress=progress, stages=stages)
    return model


def fit_propensity_model(logs: str | OpenedLog, settings: FitSettings | None = None, *,
                         client: Client | None = None,
                         storage_options: dict | None = None, progress: bool = False) -> PropensityModel:
    """The logging policy π̂₀(a | x) estimated from the log at ``logs`` by multinomial logistic regression, out of core.

    Minimises Σ_i −log π̂₀(a_i | x_i) + (λ/2) ‖W‖² over the log's rows (module docstring), by L-BFGS with one
    pass over the parts per step (:mod:`dr_scale.outofcore.glm`); with ``settings.folds = K``, K fold models
    beside the full-data one, on the same keyed folds as the reward model's (cross-fitting, so that each row's
    estimated propensity comes from a model that did not see it). Reads the log's contexts and actions only: a
    log without a ``propensity`` column is fine. The estimated propensity π̂₀(a_i | x_i) replaces the logged
    p̂ of inverse propensity scoring (Dudík, Langford & Li 2011, Sec. 2.1: p̂ may itself be estimated).

    Parameters
    ----------
    logs : str
        The log: a Parquet file, a folder of parts or any fsspec URL.
    settings : FitSettings or None
        λ (default ``"auto"``: by the out-of-fold log loss on a keyed sample), ``folds``, ``seed``, ``rtol``
        (L-BFGS stops at ‖∇L‖ ≤ rtol ‖∇L(x₀)‖), ``max_iter`` (passes), ``spill`` …; ``model`` is not used.
    client : distributed.Client or None
        Run on this Dask cluster (default: Dask's local threaded scheduler).
    storage_options : dict or None
        fsspec's options for ``logs``.
    progress : bool
        Show each stage's progress on stderr.

    Returns
    -------
    PropensityModel
        π̂₀ with ``coef`` (d × k) and ``intercept`` (k); with ``folds``, the fold models too. Its ``metadata``
        records λ (and its search), rows per action, folds, passes and the data's fingerprint.

    See Also
    --------
    dr_scale.propensity.model.PropensityModel : The model returned.

    Examples
    --------
    >>> import tempfile
    >>> from dr_scale.synthetic.bandit import generate_bandit
    >>> folder = tempfile.TemporaryDirectory()
    >>> logs = folder.name + "/log"
    >>> _ = generate_bandit(logs, rows=2000, features=100, actions=3)  # a generated 2,000-row log
    >>> model = fit_propensity_model(logs, FitSettings(folds=2, lam=10.0))
    >>> model.coef.shape, model.folds, model.metadata["rows_per_action"]
    ((100, 3), 2, [843, 828, 329])
    >>> from dr_scale.logs.reading import read_log
    >>> part = read_log(logs)[0]
    >>> p = model.predict_proba(part.X, row_id=part.row_id)  # each row by the fold model that did not see it
    >>> p.shape, bool(abs(p.sum(axis=1) - 1).max() < 1e-12)
    ((2000, 3), True)
    >>> folder.cleanup()
    """
    model: PropensityModel = fit_log(logs, settings, PropensityObjective(), client=client,
                                     storage_options=storage_options, progress=progress)
    return model
