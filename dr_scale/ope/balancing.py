"""Balanced IPW's importance weights from a classifier, cross-fitted, by passes over the log's parts.

Sondhi, Arbour & Dimmery (*Balanced off-policy evaluation in general action spaces*, AISTATS 2020): every
logged row i gives two pairs — its logged (x_i, a_i), class C = 0, and (x_i, a'_i) with a'_i drawn from the
target policy π(·|x_i), class C = 1 — and a classifier of C given (x, a) has odds

    Pr[C = 1 | x, a] / Pr[C = 0 | x, a] = π(a|x) / π₀(a|x)

(as many pairs of each class, the same contexts), the importance weight, with no logging propensity. Here
the classifier is one L2-regularised logistic regression per action over the context's features,
z = x·w_a + b_a — the per-action form of :mod:`dr_scale.outofcore.glm` (binary), so its log odds
can follow π / π₀ in x separately for every action: k (d + 1) parameters per fold, for logs with a
modest number of actions. a'_i is drawn by the row's id (:mod:`dr_scale.core.keyed_random`, purpose
``BALANCE_PURPOSE``): the same pair whatever the partitioning. It is cross-fitted with the keyed folds of
:func:`dr_scale.crossfit.parts.fold_of`: fold model f is fitted on the pairs of the rows of the other folds and
gives the weights ŵ_i = exp(z_{f, a_i}(x_i)) of the rows of fold f, so no row's weight comes from a model
that saw it. The fit is the per-action logistic objective on the pairs, the class as the reward, driven by the
cross-fitting engine (:mod:`dr_scale.crossfit.engine`): every L-BFGS step is one pass over the parts (one task per
part, the states summed in the parts' order), so the fit is the same locally and on a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.engine import fit_log, fit_parts
from dr_scale.crossfit.folded import used_columns
from dr_scale.crossfit.parts import GroupedPart, LogPart, fold_of, group
from dr_scale.crossfit.settings import FitSettings
from dr_scale.io.config import penalty
from dr_scale.logs.contract import Partition
from dr_scale.logs.opened import open_log
from dr_scale.logs.reading import read_partition
from dr_scale.outofcore.passes import PartSet
from dr_scale.policies import Policy, parse_policy
from dr_scale.reward.fitting import LogisticObjective

#: The purpose of the keyed draw of a'_i ~ π(·|x_i).
BALANCE_PURPOSE = "balancing draw"


@dataclass
class BalancingModel:
    """Per fold f and action a, the classifier's log odds z = x·coef[f, :, a] + intercept[f, a] (module docstring).

    ``weights`` gives ŵ_i = exp(z) at the logged action with fold model fold(row_id_i), which was fitted on the
    other folds' rows. Fitted on a log (:func:`fit_balancing_model_on_log`) it is sized by use: coef has a row per
    feature some row has, ``features`` their sorted ids in [0, ``dimension``), and a row's other features weigh 0
    (:func:`~dr_scale.crossfit.folded.used_columns`); ``features`` None: the rows are the features 0 … d − 1.
    """

    coef: np.ndarray  # (folds, m, k)
    intercept: np.ndarray  # (folds, k)
    seed: int = 0
    passes: int = 0
    converged: bool = True
    metadata: dict = field(default_factory=dict)
    features: np.ndarray | None = None
    dimension: int = 0

    @property
    def folds(self) -> int:
        """K, the fold models."""
        return self.coef.shape[0]

    def weights(self, X, action: np.ndarray, row_id: np.ndarray) -> np.ndarray:
        """ŵ(x_i, a_i) = Pr[C = 1 | x_i, a_i] / Pr[C = 0 | x_i, a_i], each row by the fold model that did not see it."""
        X = sp.csr_matrix(X) if self.features is None else used_columns(X, self.features)
        action = np.asarray(action)
        fold = fold_of(np.asarray(row_id), self.folds, self.seed)
        # z_i = Σ_j x_ij coef[f_i, j, a_i] + intercept[f_i, a_i] over row i's stored features: O(nnz), never (n, k)
        per_entry = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        terms = X.data * self.coef[fold[per_entry], X.indices, action[per_entry]]
        z = np.bincount(per_entry, weights=terms, minlength=X.shape[0]) + self.intercept[fold, action]
        return np.exp(z)


def pairs(part: Partition, policy: Policy, n_actions: int, seed: int) -> LogPart:
    """The part's 2n pairs (module docstring): each row as (x_i, a_i) of class 0 and (x_i, a'_i), a'_i ~ π(·|x_i)
    drawn by the row's id, of class 1 — the class in ``reward``, both pairs under the row's id (so its fold)."""
    X = sp.csr_matrix(sp.vstack([part.X, part.X], format="csr"), dtype=np.float64)
    drawn = policy.distribution(part, n_actions).draw(part.row_id, seed, BALANCE_PURPOSE)  # a'_i ~ π(·|x_i)
    n = len(part)
    return LogPart(np.concatenate([part.row_id, part.row_id]), X.indptr, X.indices, X.data,
                   np.concatenate([np.asarray(part.action, dtype=np.int64), drawn]),
                   np.r_[np.zeros(n), np.ones(n)], np.ones(2 * n))


def _pairs_of(part, policy: Policy, n_actions: int, folds: int, seed: int) -> GroupedPart:
    """The pairs of ``part`` (a Partition, or a callable giving one) grouped by (fold, action)."""
    return group(pairs(part() if callable(part) else part, policy, n_actions, seed), folds, n_actions, seed)


@dataclass
class BalancingObjective(LogisticObjective):
    """The classifier of logged against π-drawn pairs as an objective of the cross-fitting driver: the per-action
    logistic regression (:class:`~dr_scale.reward.fitting.LogisticObjective`) on the pairs, the class as the reward,
    fold models only — fold model f gives the weights of the rows of fold f."""

    policy: Policy | None = None
    seed: int = 0
    sized_by_use: ClassVar[bool] = True
    label: ClassVar[str] = "balancing weights"
    what: ClassVar[str] = "classifiers"
    full: ClassVar[bool] = False

    def read_part(self, fs, path, n_features, n_actions):
        """One part's classifier rows (:func:`pairs`): (x_i, a_i) of class 0 and (x_i, a'_i), a'_i ~ π(·|x_i), of
        class 1.
        """
        part = read_partition(fs, path, n_features=n_features, n_actions=n_actions, extra_columns=self.policy.columns)
        return pairs(part, self.policy, n_actions, self.seed)

    def model(self, solved, sums, lam, fits, n_features, n_actions, settings):
        """The :class:`BalancingModel` of the K fold classifiers' solutions (no full-data model)."""
        d, k = n_features, n_actions
        coef = solved.x[:, :d].reshape(-1, k, d).transpose(0, 2, 1)
        return BalancingModel(np.ascontiguousarray(coef), solved.x[:, d].reshape(-1, k), settings.seed,
                              int(solved.passes), bool(solved.converged.all()), {"rows": int(sums[0].sum()) // 2})


def _settings(folds: int, lam: float, seed: int, rtol: float, max_iter: int) -> FitSettings:
    """The driver's settings of a balancing fit (λ and rtol by the fitters' one rule; K ≥ 2 folds)."""
    if folds < 2:
        raise ParameterError(f"`folds` must be at least 2 (the weights are cross-fitted), got {folds}")
    return FitSettings(lam=penalty(lam, "lam", auto=False), folds=folds, seed=seed, rtol=rtol, max_iter=max_iter)


def fit_balancing_model(parts, policy: Policy | str, n_actions: int, n_features: int, *, folds: int = 2,
                        lam: float = 1.0, seed: int = 0, rtol: float = 1e-6, max_iter: int = 200,
                        client=None) -> BalancingModel:
    """Fit the cross-fitted classifier of logged against π-drawn pairs (module docstring) by the cross-fitting
    driver (:func:`dr_scale.crossfit.engine.fit_parts`): L-BFGS, one pass over the pairs per step. The parts are
    the caller's and are not renumbered: the model holds all d features (:func:`fit_balancing_model_on_log` holds
    only those the rows have).

    For each fold f and action a, on the pairs of the rows of the other folds whose action (logged or drawn) is a,

        (w, b) = argmin Σ_i [log(1 + e^{z_i}) − C_i z_i] + (λ/2) ‖w‖²,   z_i = x_i·w + b   (b not penalised).

    Parameters
    ----------
    parts : list of Partition, or of zero-argument callables returning one
        The log's parts; each is read once and its pairs kept between passes (in memory, or on ``client``'s
        workers).
    policy : Policy or str
        The target policy π.
    n_actions, n_features : int
        k and d.
    folds : int
        The keyed folds (≥ 2).
    lam : float
        The L2 penalty λ > 0 on each fit's weights, not its intercept (scikit-learn's C = 1/λ).
    seed : int
        Keys the folds and the draws a'_i.
    rtol, max_iter :
        glm's stopping rule and its most passes.
    client : distributed.Client, optional
        Runs each pass's tasks there (None: the local threaded scheduler).

    Returns
    -------
    BalancingModel
    """
    settings = _settings(folds, lam, seed, rtol, max_iter)
    policy = parse_policy(policy)
    held = PartSet.build(_pairs_of, [(p, policy, n_actions, folds, seed) for p in parts], client)
    rows = held.sum(len)
    return fit_parts(held, rows, n_features, n_actions, settings, BalancingObjective(policy=policy, seed=seed))


def fit_balancing_model_on_log(logs, policy: Policy | str, *, folds: int = 2, lam: float = 1.0, seed: int = 0,
                               storage_options: dict | None = None, client=None, log_filter=None,
                               **settings) -> BalancingModel:
    """:func:`fit_balancing_model` on the Parquet log ``logs`` (a URL or an opened log,
    :func:`~dr_scale.logs.opened.open_log`) by the cross-fitting driver (:func:`dr_scale.crossfit.engine.fit_log`:
    its parts read once as their pairs and kept between passes in memory, on a cluster's workers, or spilled to
    local files); k and d from its metadata, else π's k and the data.
    ``Evaluation(balancing_model=…)`` then gives BIPW these weights in place of the ``importance_weight`` column.

    Examples
    --------
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()
    >>> model = fit_balancing_model_on_log(logs, "column:target_action", lam=10.0)
    >>> model.coef.shape, model.dimension, model.converged  # 2 folds, the 50 features of d = 50 in use, k = 3
    ((2, 50, 3), 50, True)
    """
    policy = parse_policy(policy, storage_options)
    fit = _settings(folds, lam, seed, settings.get("rtol", 1e-6), settings.get("max_iter", 200))
    logs = open_log(logs, storage_options, log_filter)
    return fit_log(logs, fit, BalancingObjective(policy=policy, seed=seed), client=client,
                   storage_options=storage_options, n_actions=policy.n_actions)
