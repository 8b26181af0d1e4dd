"""The four per-row quantities every estimator is built from (:class:`RowInputs`), from arrays in several
layouts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dr_scale.core.errors import ParameterError
from dr_scale.ope import checks as check


@dataclass(frozen=True)
class RowInputs:
    """The four per-row quantities every estimator is built from."""

    reward: np.ndarray  # r_i
    weight: np.ndarray  # w_i = π(a_i|x_i) / p̂_i
    reward_hat_pi: np.ndarray | None = None  # ρ̂_π(x_i) = Σ_a π(a|x_i) ρ̂_a(x_i)
    reward_hat_logged: np.ndarray | None = None  # ρ̂_{a_i}(x_i)
    embedding_weight: np.ndarray | None = None  # w(x_i, e_i) = p_π(e_i|x_i) / p_π₀(e_i|x_i) (MIPS)
    target_prob: np.ndarray | None = None  # π(a_i|x_i), the target policy's probability of the logged action (RM)
    importance_weight: np.ndarray | None = None  # ŵ(x_i, a_i) estimated by a classifier (BIPW)

    @functools.cached_property
    def ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """(min, max) of (r, w), computed once for all estimators (the EL interval's bounds; ±∞ for no rows)."""
        if self.reward.size == 0:
            return np.full(2, np.inf), np.full(2, -np.inf)
        return (np.array([self.reward.min(), self.weight.min()]), np.array([self.reward.max(), self.weight.max()]))

    @functools.cached_property
    def _shared(self) -> dict:
        """The quantities several estimators of these rows read, by key (:meth:`shared`)."""
        return {}

    def shared(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """``make()``, computed once for these rows under ``key``: what several estimators of one batch read (the
        plain estimators' moments, :func:`~dr_scale.ope.estimators.base.shared_moments`; a threshold grid's per-bin
        sums, :func:`~dr_scale.ope.estimators.shrinkage.grid_moments`)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    @classmethod
    def from_arrays(cls, reward: ArrayLike, action: ArrayLike, propensity: ArrayLike, target_probs: ArrayLike,
                    reward_hat: ArrayLike | None = None) -> RowInputs:
        """Build the per-row quantities from obp-style arrays, checked as obp checks them.

        ``target_probs`` and ``reward_hat`` have shape (n, k); ``action`` holds
        integers in [0, k). Bad input raises a ``ValueError`` naming the argument and
        an example index (:mod:`dr_scale.ope.checks`).
        """
        reward = check.vector("reward", reward, allow_empty=True)
        n = reward.shape[0]
        target_probs = check.probabilities("target_probs", target_probs, n)
        k = target_probs.shape[1]
        action = check.actions("action", action, n, k)
        propensity = check.propensities(propensity, n)
        logged = np.arange(n) * k + action  # flat positions of (i, a_i): ~2× faster to take than [i, a_i]
        chosen = target_probs.take(logged)
        weight = chosen / propensity
        if reward_hat is None:
            return cls(reward, weight, target_prob=chosen)
        reward_hat = check.matrix("reward_hat", reward_hat, target_probs.shape)
        return cls(
            reward,
            weight,
            reward_hat_pi=(target_probs * reward_hat) @ np.ones(k),  # BLAS row sums: ~3× faster than einsum
            reward_hat_logged=reward_hat.take(logged),
            target_prob=chosen,
        )

    @classmethod
    def from_actions(cls, reward: ArrayLike, action: ArrayLike, propensity: ArrayLike, target_action: ArrayLike,
                     reward_hat_target: ArrayLike | None = None) -> RowInputs:
        """The per-row quantities for a deterministic π, from its actions π(x_i) — no (n, k) arrays.

        w_i = 1{a_i = π(x_i)} / p̂_i and ρ̂_π(x_i) = ρ̂_{π(x_i)}(x_i) (``reward_hat_target``).
        That array also serves as ρ̂_{a_i}(x_i): the two agree wherever w_i ≠ 0, and every
        estimator multiplies ρ̂_{a_i}(x_i) by w_i. Checked as :meth:`from_arrays`.
        """
        reward = check.vector("reward", reward, allow_empty=True)
        n = reward.shape[0]
        action = check.actions("action", action, n, None)
        target_action = check.actions("target_action", target_action, n, None)
        propensity = check.propensities(propensity, n)
        if reward_hat_target is not None:
            reward_hat_target = check.vector("reward_hat_target", reward_hat_target, n)
        matched = (action == target_action).astype(np.float64)
        return cls(reward, matched / propensity, reward_hat_target, reward_hat_target, target_prob=matched)

    @classmethod
    def from_sparse(cls, reward: ArrayLike, action: ArrayLike, propensity: ArrayLike, target_actions: ArrayLike,
                    target_probs: ArrayLike, reward_hat_listed: ArrayLike | None = None) -> RowInputs:
        """The per-row quantities for a policy given as each row's listed actions — no (n, k) arrays.

        Row i's policy takes ``target_actions[i, j]`` with probability ``target_probs[i, j]`` (both (n, K),
        padded with probability 0): w_i = Σ_j π_ij 1{a_ij = a_i} / p̂_i and ρ̂_π(x_i) = Σ_j π_ij ρ̂_{a_ij}(x_i)
        from ``reward_hat_listed`` (n, K), ρ̂ at the listed actions. ρ̂_{a_i}(x_i) is taken from the listed
        slot of a_i (0 where a_i is not listed): every estimator multiplies it by w_i, which is then 0.
        O(n·K) whatever the number of actions.

        Examples
        --------
        >>> import numpy as np
        >>> rows = RowInputs.from_sparse(np.array([1.0, 0.0]), np.array([7, 3]), np.array([0.5, 0.25]),
        ...                              np.array([[7, 2], [9, 0]]), np.array([[0.5, 0.5], [1.0, 0.0]]),
        ...                              np.array([[0.8, 0.2], [0.4, 0.1]]))
        >>> rows.weight.tolist(), rows.reward_hat_pi.tolist(), rows.reward_hat_logged.tolist()
        ([1.0, 0.0], [0.5, 0.4], [0.8, 0.0])
        """
        reward = check.vector("reward", reward, allow_empty=True)
        n = reward.shape[0]
        action = check.actions("action", action, n, None)
        propensity = check.propensities(propensity, n)
        target_probs = np.asarray(target_probs, dtype=np.float64).reshape(n, -1)
        target_actions = np.asarray(target_actions).reshape(n, -1)
        logged = (target_actions == action[:, None]) & (target_probs > 0)
        chosen = (target_probs * logged).sum(axis=1)
        if reward_hat_listed is None:
            return cls(reward, chosen / propensity, target_prob=chosen)
        reward_hat_listed = check.matrix("reward_hat_listed", reward_hat_listed, target_probs.shape)
        return cls(reward, chosen / propensity, (target_probs * reward_hat_listed).sum(axis=1),
                   (reward_hat_listed * logged).sum(axis=1), target_prob=chosen)

    @classmethod
    def from_logged_probability(cls, reward: ArrayLike, action: ArrayLike, propensity: ArrayLike,
                                target_prob: ArrayLike, reward_hat_pi: np.ndarray | None = None,
                                reward_hat_logged: np.ndarray | None = None) -> RowInputs:
        """The per-row quantities from π(a_i|x_i) itself (``target_prob``, (n,)), for a policy whose probabilities
        have a closed form (the uniform policy and its mixtures): w_i = π(a_i|x_i) / p̂_i, and ρ̂_π(x_i),
        ρ̂_{a_i}(x_i) as given. Checked as :meth:`from_arrays`; no (n, k) array.

        Examples
        --------
        >>> import numpy as np
        >>> RowInputs.from_logged_probability(np.ones(2), np.array([0, 9]), np.array([0.5, 0.1]),
        ...                                   np.full(2, 0.1)).weight.tolist()
        [0.2, 1.0]
        """
        reward = check.vector("reward", reward, allow_empty=True)
        n = reward.shape[0]
        check.actions("action", action, n, None)
        propensity = check.propensities(propensity, n)
        target_prob = check.vector("target_prob", target_prob, n)
        return cls(reward, target_prob / propensity, reward_hat_pi, reward_hat_logged, target_prob=target_prob)

    def marginalized(self) -> RowInputs:
        """These rows with the marginal weights w(x_i, e_i) in place of w_i (what MIPS and SNMIPS see)."""
        if self.embedding_weight is None:
            raise ParameterError("MIPS needs the marginal weights p_π(e|x) / p_π₀(e|x) (`embedding_weight`): the "
                                 "action catalogue's embedding and the logging policy's embedding propensity")
        return RowInputs(self.reward, self.embedding_weight, embedding_weight=self.embedding_weight)
