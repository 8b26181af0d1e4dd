"""Small simulated bandit worlds with a known value: for examples, coverage tests and benchmarks.

A world has C contexts (drawn uniformly), k actions, Bernoulli rewards with known
means ρ (C, k), an ε-greedy logging policy around a noisy greedy choice, a
deterministic target policy (the best action) and a deliberately wrong reward model
ρ̂ = 0.5 ρ + 0.25 + noise. The logging policy's greedy action differs from the
target's in some contexts, where the target's action is logged with probability ε/k:
importance weights up to k/ε (250 for k = 5, ε = 0.02).

>>> world = BanditWorld.make(epsilon=0.02)
>>> round(world.max_weight)
250
>>> log = world.sample(1000, seed=1)
>>> sorted(log)
['action', 'propensity', 'reward', 'reward_hat', 'target_probs']
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BanditWorld:
    """Known expected rewards, logging and target policies, and a reward model (all (C, k))."""

    rho: np.ndarray
    logging: np.ndarray
    target: np.ndarray
    rho_hat: np.ndarray

    @classmethod
    def make(cls, epsilon: float, *, contexts: int = 100, actions: int = 5, seed: int = 0,
             target: str = "best") -> BanditWorld:
        """ε-greedy logging; ``target`` ``"best"`` (deterministic argmax ρ) or ``"second"`` (the runner-up)."""
        rng = np.random.default_rng(seed)
        rho = rng.uniform(0.1, 0.9, size=(contexts, actions))
        greedy = np.argmax(rho + rng.normal(0, 0.2, size=rho.shape), axis=1)
        logging = np.full(rho.shape, epsilon / actions)
        logging[np.arange(contexts), greedy] += 1 - epsilon
        order = np.argsort(-rho, axis=1)
        chosen = order[:, 0] if target == "best" else order[:, 1]
        rho_hat = np.clip(0.5 * rho + 0.25 + rng.normal(0, 0.1, size=rho.shape), 0, 1)
        return cls(rho, logging, np.eye(actions)[chosen], rho_hat)

    @property
    def value(self) -> float:
        """The target policy's true value E_x Σ_a π(a|x) ρ_a(x)."""
        return float(np.mean(np.sum(self.target * self.rho, axis=1)))

    @property
    def logging_value(self) -> float:
        """The logging policy's true value."""
        return float(np.mean(np.sum(self.logging * self.rho, axis=1)))

    @property
    def max_weight(self) -> float:
        """The largest importance weight max_{x,a} π(a|x) / π₀(a|x)."""
        return float(np.max(self.target / self.logging))

    def contexts(self, n: int, seed: int) -> np.ndarray:
        """The contexts of the rows ``sample(n, seed)`` logs (for another policy's probabilities on them)."""
        return np.random.default_rng(seed).integers(0, self.rho.shape[0], size=n)

    def sample(self, n: int, seed: int) -> dict:
        """n logged rows as the estimators' arrays (``reward``, ``action``, ``propensity``, …)."""
        rng = np.random.default_rng(seed)
        x = rng.integers(0, self.rho.shape[0], size=n)  # = contexts(n, seed)
        cdf = np.cumsum(self.logging[x], axis=1)
        action = (rng.random(n)[:, None] >= cdf).sum(axis=1).clip(max=self.rho.shape[1] - 1)
        reward = (rng.random(n) < self.rho[x, action]).astype(np.float64)
        return dict(reward=reward, action=action, propensity=self.logging[x, action],
                    target_probs=self.target[x], reward_hat=self.rho_hat[x])


def interval_coverage(world: BanditWorld, estimators: dict, reps: int, n: int = 2000, alpha: float = 0.05,
                      methods=("normal", "el"), first_seed: int = 1000) -> tuple[dict, dict]:
    """How often each estimator's (1 − α) interval covers ``world.value``, and its mean width.

    Over ``reps`` logs of n rows (seeds first_seed, first_seed + 1, …); both dicts are keyed
    (estimator name, interval method).
    """
    covered = {(e, m): 0 for e in estimators for m in methods}
    width = {(e, m): 0.0 for e in estimators for m in methods}
    for rep in range(reps):
        log = world.sample(n, seed=first_seed + rep)
        for name, estimator in estimators.items():
            est = estimator.estimate(**log)
            for method in methods:
                lo, hi = est.ci(alpha, method=method)
                covered[name, method] += lo <= world.value <= hi
                width[name, method] += hi - lo
    return {k: v / reps for k, v in covered.items()}, {k: v / reps for k, v in width.items()}
