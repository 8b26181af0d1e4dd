"""Direct loss minimization for cost-sensitive multiclass policies (paper, Appendix A).

The policy is π(x) = argmax_a x·θ_a over k weight vectors (here on standardised
features with a constant feature appended). McAllester et al.'s "towards-better"
update for an example (x, r_1, …, r_k) with rewards r_a (the paper's losses l_a = −r_a)
is

    θ_{a1} ← θ_{a1} + η x,     θ_{a2} ← θ_{a2} − η x,
    a1 = argmax_a { x·θ_a + ε r_a },     a2 = argmax_a { x·θ_a },

batched over all examples (the mean of the per-example updates), with η = t^−0.3 / 2 at
batch iteration t and ε = 0.1. Iteration stops when the weights converge: their
relative change falls below ``tol``, or the best training loss has not improved for
``n_iter_no_change`` iterations (with η decaying slowly the weights keep drifting long
after the policy has settled), or after ``max_iter`` iterations; the training loss is
−(1/n) Σ_i r_{π(x_i)}. The loss is not convex, so the algorithm
runs from ``n_restarts`` randomly perturbed starts, all restarts at once as one matrix
product, and keeps the weights with the highest mean training reward of the learned policy.

Sparse X (scipy CSR) is scaled by its columns' standard deviations without centring
(scikit-learn's ``StandardScaler(with_mean=False)``), so it stays sparse. A column of the
design that is zero on every training row (a feature never seen; with centring, one that
never varies) gets no update: its weights start at 0 rather than at the random start, so
the learned policy ignores it instead of keeping random weights on it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_array, check_random_state

from dr_scale.learning.base import PolicyLearnerMixin, check_rewards


def scores_of(Z, theta: np.ndarray) -> np.ndarray:
    """x_i·θ_a for every restart, action and row: (R, k, n) from Z (n, d) and θ (R, k, d).

    Computed in Z's precision: the fit passes float32 features, as the scores only
    serve argmax comparisons (the weights themselves accumulate in float64).
    """
    R, k, d = theta.shape
    flat = theta.reshape(R * k, d).astype(Z.dtype, copy=False)
    scores = np.asarray(Z @ flat.T).T if sp.issparse(Z) else flat @ Z.T
    return scores.reshape(R, k, -1)


def first_argmax(scores: np.ndarray, penalty: np.ndarray | None = None) -> np.ndarray:
    """argmax_a (scores[:, a, :] − penalty[a]) over the middle axis, first maximum on ties: (R, n).

    A running maximum over the k actions: k passes over contiguous (R, n) slices rather than
    numpy's argmax over a short strided axis, and no (R, k, n) temporary.
    """
    k = scores.shape[1]
    best = scores[:, 0, :] - penalty[0] if penalty is not None else scores[:, 0, :].copy()
    index = np.zeros(best.shape, dtype=np.int32)
    value, better = np.empty_like(best), np.empty(best.shape, dtype=bool)
    for a in range(1, k):
        if penalty is not None:
            np.subtract(scores[:, a, :], penalty[a], out=value)
        else:
            value[...] = scores[:, a, :]
        np.greater(value, best, out=better)
        np.maximum(value, best, out=best)
        np.copyto(index, a, where=better)
    return index


def towards_better_update(Z, scores: np.ndarray, rewards: np.ndarray, eta: float, epsilon: float,
                          a2: np.ndarray | None = None) -> np.ndarray:
    """The batched update Δθ = (η/n) Σ_i (e_{a1(i)} − e_{a2(i)}) x_iᵀ for every restart, shape (R, k, d).

    ``scores`` (R, k, n) are x_i·θ_a under the current weights, ``rewards`` (n, k),
    ``a2`` (R, n) the current predictions argmax_a x_i·θ_a when already known.
    Only the (restart, example) pairs with a1 ≠ a2 contribute; their one-hot
    differences form a sparse (R·k, n) matrix D, so the sum over examples for all
    restarts is the single product D·Z. A sum over examples: over a log's partitions
    it is a map-reduce pass.
    """
    R, k, n = scores.shape
    a1 = first_argmax(scores, (-epsilon * rewards.T).astype(scores.dtype))
    if a2 is None:
        a2 = first_argmax(scores)
    restarts, rows = np.nonzero(a1 != a2)
    targets = np.concatenate([restarts * k + a1[restarts, rows], restarts * k + a2[restarts, rows]])
    signs = np.repeat([1.0, -1.0], rows.size)
    D = sp.csr_matrix((signs, (targets, np.tile(rows, 2))), shape=(R * k, n))
    product = D @ Z.astype(np.float64)
    product = product.toarray() if sp.issparse(product) else np.asarray(product)
    return (eta / n) * product.reshape(R, k, -1)


def towards_better_step(theta: np.ndarray, Z, rewards: np.ndarray, eta: float, epsilon: float) -> np.ndarray:
    """Weights θ (R, k, d) after one batched towards-better update on examples Z (n, d), rewards (n, k)."""
    return theta + towards_better_update(Z, scores_of(Z, theta), rewards, eta, epsilon)


class DirectLossMinimization(PolicyLearnerMixin, BaseEstimator):
    """Cost-sensitive linear policy trained by batched direct loss minimization.

    ``fit(X, rewards)`` takes every action's reward (n, k) (e.g. 1{a = c}, or
    IPS/DR-imputed rewards); ``predict(X)`` returns the actions argmax_a x·θ_a.
    """

    def __init__(self, epsilon: float = 0.1, n_restarts: int = 20, max_iter: int = 200, tol: float = 1e-4,
                 n_iter_no_change: int = 50, init_scale: float = 0.01, random_state=None):
        self.epsilon = epsilon
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.init_scale = init_scale
        self.random_state = random_state

    def _design(self, X):
        """Standardised features with a constant column: dense (n, d+1), or CSR when X is sparse."""
        X = check_array(X, accept_sparse="csr", dtype=np.float64)
        Z = self.scaler_.transform(X)
        if sp.issparse(Z):
            return sp.hstack([Z, np.ones((Z.shape[0], 1))], format="csr")
        return np.hstack([Z, np.ones((Z.shape[0], 1))])

    def fit(self, X, rewards):
        """Fit the scores on X and every action's (imputed) rewards (n, k); returns the learner."""
        X = check_array(X, accept_sparse="csr", dtype=np.float64)
        rewards = check_rewards(rewards, X.shape[0])
        self.scaler_ = StandardScaler(with_mean=not sp.issparse(X)).fit(X)
        Z = self._design(X).astype(np.float32)
        n, k = rewards.shape
        rng = check_random_state(self.random_state)
        theta = self.init_scale * rng.standard_normal((self.n_restarts, k, Z.shape[1]))
        unseen = np.asarray(abs(Z).sum(axis=0)).ravel() == 0  # no update moves these weights
        theta[:, :, unseen] = 0.0
        best_reward, best_theta, best_t = -np.inf, theta[0], 0
        columns = np.arange(n)[None, :]
        rewards_by_action = np.ascontiguousarray(rewards.T)
        self.n_iter_ = 0
        for t in range(1, self.max_iter + 1):
            # mean training reward of every restart's current policy; keep the best weights seen
            scores = scores_of(Z, theta)
            predictions = first_argmax(scores)
            means = rewards_by_action[predictions, columns].mean(axis=1)
            r = int(np.argmax(means))
            if means[r] > best_reward:
                best_reward, best_theta, best_t = float(means[r]), theta[r].copy(), t
            delta = towards_better_update(Z, scores, rewards, 0.5 * t ** -0.3, self.epsilon, a2=predictions)
            theta = theta + delta
            change = np.linalg.norm(delta, axis=(1, 2)) / np.maximum(np.linalg.norm(theta, axis=(1, 2)), 1e-12)
            self.n_iter_ = t
            if np.all(change < self.tol) or t - best_t >= self.n_iter_no_change:
                break
        self.theta_ = best_theta
        self.training_reward_ = best_reward
        self.n_actions_ = k
        return self

    def decision_function(self, X) -> np.ndarray:
        """The scores θ_a·z(x) of every action, (n, k), z the standardised features with a bias."""
        return np.asarray(self._design(X) @ self.theta_.T)

    def predict(self, X) -> np.ndarray:
        """The chosen actions π(x) = argmax_a θ_a·z(x)."""
        return np.argmax(self.decision_function(X), axis=1)

    def linear_policy(self):
        """The same policy on raw features: π(x) = argmax_a x·coef[:, a] + intercept[a]."""
        from dr_scale.policies import LinearPolicy

        scale = self.scaler_.scale_
        mean = self.scaler_.mean_ if self.scaler_.with_mean else np.zeros_like(scale)
        weights = self.theta_[:, :-1].T / scale[:, None]  # (d, k)
        return LinearPolicy(weights, self.theta_[:, -1] - mean @ weights)
