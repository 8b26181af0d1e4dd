"""Every action's reward imputed from one logged reward (paper, Sec. 4).

A logged row (x_i, a_i, r_i, p_i) reveals the reward of one action. Policy learning
by reduction needs a reward for every action a; three imputations Γ_a(x_i):

* DM:   Γ_a(x_i) = ρ̂_a(x_i),
* IPS:  Γ_a(x_i) = 1{a = a_i} r_i / p_i,
* DR:   Γ_a(x_i) = ρ̂_a(x_i) + 1{a = a_i} (r_i − ρ̂_{a_i}(x_i)) / p_i   (eq. 1, per action),

IPS and DR unbiased for E[r | x_i, a] when p_i is the true logging probability, DR
with a variance that shrinks as ρ̂ improves (Sec. 3). The value of a policy π on the
imputed rewards, (1/n) Σ_i Γ_{π(x_i)}(x_i), is then the DM / IPS / DR estimate of π's
value, so maximising it over a policy class is the Sec. 4 reduction to cost-sensitive
classification. The functions are row-wise: a partition of a log imputes on its own.
"""

from __future__ import annotations

import numpy as np

from dr_scale.core.errors import ParameterError

METHODS = ("dr", "ips", "dm")


def impute_rewards(action, reward, propensity, n_actions: int, method: str,
                   reward_hat: np.ndarray | None = None) -> np.ndarray:
    """Γ (n, k) by ``"dr"``, ``"ips"`` or ``"dm"`` (module docstring).

    ``reward_hat`` is ρ̂_a(x_i), shape (n, k), needed by DR and DM. DR is computed as
    ρ̂ + 1{a = a_i} r_i/p_i − 1{a = a_i} ρ̂_{a_i}/p_i, so negating rewards and ρ̂
    negates Γ exactly (losses l = −r give the loss imputation bit for bit).
    """
    action = np.asarray(action, dtype=np.int64)
    reward = np.asarray(reward, dtype=np.float64)
    propensity = np.asarray(propensity, dtype=np.float64)
    n, k = action.shape[0], int(n_actions)
    if method not in METHODS:
        raise ParameterError(f"unknown imputation {method!r}; choose from {', '.join(METHODS)}")
    if action.size and (action.min() < 0 or action.max() >= k):
        raise ParameterError(f"logged actions (`action`) must lie in [0, {k})")
    flat = np.arange(n) * k + action  # positions of (i, a_i) in the flattened (n, k) array
    if method != "ips":
        if reward_hat is None or np.shape(reward_hat) != (n, k):
            raise ParameterError(f"{method.upper()} imputation needs `reward_hat` of shape ({n}, {k})")
        rho = np.asarray(reward_hat, dtype=np.float64)
        if method == "dm":
            return rho.copy()
    gamma = np.zeros((n, k)) if method == "ips" else rho.copy()
    gamma.reshape(-1)[flat] += reward / propensity
    if method == "dr":
        gamma.reshape(-1)[flat] -= rho.reshape(-1)[flat] / propensity
    return gamma
