"""What every policy learner shares: rewards checked on the way in, a policy's value as its score.

The learners follow scikit-learn's conventions (``fit`` returns the learner,
``predict(X)`` the chosen actions, ``get_params`` / ``set_params`` from
:class:`~sklearn.base.BaseEstimator`). Their ``score(X, rewards)`` is the mean reward
of the chosen actions, (1/n) Σ_i r_{π(x_i)}(x_i) — with imputed rewards, the DM / IPS /
DR estimate of the learned policy's value; higher is better, as scikit-learn expects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dr_scale.core.errors import ParameterError


def check_rewards(rewards, n_rows: int) -> np.ndarray:
    """Every action's reward as float64 (n, k), finite; errors name the problem."""
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.ndim != 2 or rewards.shape[0] != n_rows:
        raise ParameterError(f"`rewards` must have shape (n, k) with n={n_rows}, got {rewards.shape}")
    if not np.all(np.isfinite(rewards)):
        row = int(np.argwhere(~np.isfinite(rewards))[0, 0])
        raise ParameterError(f"`rewards` contain NaN or infinite values (e.g. row {row})")
    return rewards


class PolicyLearnerMixin:
    """``score(X, rewards)``: the mean reward of the learned policy's actions."""

    #: The learned policy's action for each row of X (the learner it is mixed into defines it).
    predict: Callable[[Any], np.ndarray]

    def score(self, X, rewards) -> float:
        """The mean reward of the chosen actions, (1/n) Σ_i r_{π(x_i)}(x_i) over ``rewards`` (n, k): higher is
        better."""
        rewards = check_rewards(rewards, X.shape[0])
        actions = np.asarray(self.predict(X), dtype=np.int64)
        return float(rewards[np.arange(rewards.shape[0]), actions].mean())
