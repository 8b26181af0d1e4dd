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
:func:`dr_scale.logs.parts.fold_of`: fold model f is fitted on the pairs of the rows of the other folds and
gives the weights ŵ_i = exp(z_{f, a_i}(x_i)) of the rows of fold f, so no row's weight comes from a model
that saw it. Every L-BFGS step is one pass over the parts (one task per part, the states summed in the
parts' order), so the fit is the same locally and on a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError
from dr_scale.logs.contract import Partition
from dr_scale.logs.opened import open_log
from dr_scale.logs.parts import fold_of
from dr_scale.logs.reading import read_partition
from dr_scale.outofcore import glm
from dr_scale.policies import Policy, parse_policy

#: The purpose of the keyed draw of a'_i ~ π(·|x_i).
BALANCE_PURPOSE = "balancing draw"


@dataclass(frozen=True)
class BalancingModel:
    """Per fold f and action a, the classifier's log odds z = x·coef[f, :, a] + intercept[f, a] (module docstring).

    ``weights`` gives ŵ_i = exp(z) at the logged action with fold model fold(row_id_i), which was fitted on the
    other folds' rows.
    """

    coef: np.ndarray  # (folds, d, k)
    intercept: np.ndarray  # (folds, k)
    seed: int = 0
    passes: int = 0
    converged: bool = True

    @property
    def folds(self) -> int:
        return self.coef.shape[0]

    def weights(self, X, action: np.ndarray, row_id: np.ndarray) -> np.ndarray:
        """ŵ(x_i, a_i) = Pr[C = 1 | x_i, a_i] / Pr[C = 0 | x_i, a_i], each row by the fold model that did not see it."""
        X = sp.csr_matrix(X)
        action = np.asarray(action)
        fold = fold_of(np.asarray(row_id), self.folds, self.seed)
        # z_i = Σ_j x_ij coef[f_i, j, a_i] + intercept[f_i, a_i] over row i's stored features: O(nnz), never (n, k)
        per_entry = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        terms = X.data * self.coef[fold[per_entry], X.indices, action[per_entry]]
        z = np.bincount(per_entry, weights=terms, minlength=X.shape[0]) + self.intercept[fold, action]
        return np.exp(z)


def _pass_terms(part: Partition, policy: Policy, x: np.ndarray, active: np.ndarray, k: int, d: int, folds: int,
                seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One part's (loss (F,), gradient (F, d + 1), pairs (F,)) of the F = folds · k fits at their points x."""
    F = folds * k
    loss, grad, count = np.zeros(F), np.zeros((F, d + 1)), np.zeros(F)
    if len(part) == 0:
        return loss, grad, count
    fold = fold_of(part.row_id, folds, seed)
    drawn = policy.distribution(part, k).draw(part.row_id, seed, BALANCE_PURPOSE)  # a'_i ~ π(·|x_i)
    for label, actions in ((0.0, part.action), (1.0, drawn)):
        for f in range(folds):
            for a in range(k):
                j = f * k + a
                rows = np.flatnonzero((fold != f) & (actions == a))
                count[j] += rows.size
                if active[j] and rows.size:
                    glm.add_binary_terms(loss, grad, part.X[rows], np.full(rows.size, label), x[j, :-1], x[j, -1], j)
    return loss, grad, count


def fit_balancing_model(parts, policy: Policy | str, n_actions: int, n_features: int, *, folds: int = 2,
                        lam: float = 1.0, seed: int = 0, rtol: float = 1e-6, max_iter: int = 200,
                        client=None) -> BalancingModel:
    """Fit the cross-fitted classifier of logged against π-drawn pairs (module docstring) by L-BFGS passes.

    Parameters
    ----------
    parts : list of Partition, or of zero-argument callables returning one
        The log's parts; a callable is called in its task on every pass (out of core: one part in memory per task).
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
    import dask

    from dr_scale.outofcore.compute import compute

    if folds < 2:
        raise ParameterError(f"`folds` must be at least 2 (the weights are cross-fitted), got {folds}")
    policy = parse_policy(policy)
    k, d, F = n_actions, n_features, folds * n_actions
    penalty = np.r_[np.ones(d, bool), False]

    def task(part, x, active):
        return _pass_terms(part() if callable(part) else part, policy, x, active, k, d, folds, seed)

    def evaluate(x, active):
        terms = compute(*[dask.delayed(task)(p, x, active) for p in parts], client=client)
        loss, grad, count = (np.sum([t[i] for t in terms], axis=0) for i in range(3))
        return glm.penalised(loss, grad, x, lam, count, penalty)

    x0 = np.zeros((F, d + 1))  # w = 0, b = 0: the balanced classes' log odds at the start
    fit = glm.minimize(evaluate, x0, rtol=rtol, max_iter=max_iter)
    coef = fit.x[:, :-1].reshape(folds, k, d).transpose(0, 2, 1)
    return BalancingModel(np.ascontiguousarray(coef), fit.x[:, -1].reshape(folds, k), seed, fit.passes,
                          bool(fit.converged.all()))


def fit_balancing_model_on_log(logs, policy: Policy | str, *, folds: int = 2, lam: float = 1.0, seed: int = 0,
                               storage_options: dict | None = None, client=None, log_filter=None,
                               **settings) -> BalancingModel:
    """:func:`fit_balancing_model` on the Parquet log ``logs`` (a URL or an opened log; d and k by the log's rule,
    :meth:`~dr_scale.logs.opened.OpenedLog.dimensions`): each pass's task
    reads its part, so memory is one part per task. ``Evaluation(balancing_model=…)`` then gives BIPW these
    weights in place of the ``importance_weight`` column.

    Examples
    --------
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()
    >>> model = fit_balancing_model_on_log(logs, "column:target_action", lam=10.0)
    >>> model.coef.shape, model.converged  # 2 folds, d = 50 features, k = 3 actions
    ((2, 50, 3), True)
    """
    policy = parse_policy(policy, storage_options)
    logs = open_log(logs, storage_options, log_filter)
    fs, paths = logs.listing()
    d, k = logs.dimensions(fitted=(policy,))
    if k is None or d is None:
        raise ParameterError(f"`logs` {logs}: its metadata has no dr_scale.n_actions / dr_scale.n_features; write "
                             "it with dr_scale.write_log")

    def reader(path):
        return lambda: read_partition(fs, path, n_features=d, n_actions=k, extra_columns=policy.columns)

    return fit_balancing_model([reader(p) for p in paths], policy, k, d, folds=folds, lam=lam, seed=seed,
                               client=client, **settings)
