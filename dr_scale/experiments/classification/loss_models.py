"""Per-action ridge loss models l̂(x, a) = w_a·x + b_a (paper, Secs. 5.1.2–5.1.3).

With full information (policy evaluation, Sec. 5.1.2) every w_a is fitted on every
training row. With bandit data (policy optimization, Sec. 5.1.3) w_a is fitted only on
the rows whose logged action is a: ``fit(X, L, mask=onehot(action))``. Features are
standardised first; each w_a minimises Σ_i mask_ia (l_ia − w_a·z_i − b_a)² + α‖w_a‖².

Not the out-of-core fitter of :mod:`dr_scale.reward.fitting`: in-memory arrays of a few thousand rows, standardised
dense features, refitted in each of 500 repetitions — scikit-learn's direct solve is the paper's protocol.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler

from dr_scale.reward.models import LinearRewardModel


class PerActionRidge(RegressorMixin, BaseEstimator):
    """k ridge regressions of the loss on standardised features, one per action."""

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha

    def fit(self, X, L, mask=None):
        """Fit w_a on the rows where ``mask[:, a]`` is true (all rows when ``mask`` is None)."""
        X = np.asarray(X, dtype=np.float64)
        L = np.asarray(L, dtype=np.float64)
        self.scaler_ = StandardScaler().fit(X)
        Z = self.scaler_.transform(X)
        k = L.shape[1]
        if mask is None:
            ridge = Ridge(alpha=self.alpha).fit(Z, L)
            self.coef_, self.intercept_ = ridge.coef_.T.copy(), np.asarray(ridge.intercept_, dtype=np.float64)
            return self
        mask = np.asarray(mask, dtype=bool)
        self.coef_ = np.zeros((X.shape[1], k))
        self.intercept_ = np.zeros(k)
        for a in range(k):
            rows = mask[:, a]
            if rows.sum() == 0:
                continue  # never logged: predict 0
            ridge = Ridge(alpha=self.alpha).fit(Z[rows], L[rows, a])
            self.coef_[:, a], self.intercept_[a] = ridge.coef_, ridge.intercept_
        return self

    def fit_bandit(self, X, action, loss, n_actions: int):
        """Fit on bandit data: w_a from the rows whose logged action is a (Sec. 5.1.3)."""
        action = np.asarray(action, dtype=np.int64)
        mask = np.arange(n_actions)[None, :] == action[:, None]
        return self.fit(X, np.broadcast_to(np.asarray(loss, dtype=np.float64)[:, None], mask.shape), mask=mask)

    def predict(self, X) -> np.ndarray:
        """l̂(x, a) for every row and action, shape (n, k)."""
        return self.scaler_.transform(np.asarray(X, dtype=np.float64)) @ self.coef_ + self.intercept_

    def to_reward_model(self) -> LinearRewardModel:
        """The same model on raw features as a core reward model ρ̂ = −l̂ (for ``dr-scale evaluate``)."""
        scale = self.scaler_.scale_[:, None]
        coef = self.coef_ / scale
        intercept = self.intercept_ - self.scaler_.mean_ @ coef
        return LinearRewardModel(-coef, -intercept)
