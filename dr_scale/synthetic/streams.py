"""Growing logs of a :class:`~dr_scale.synthetic.finite_world.BanditWorld`, day by day, at the level of moments.

A daily report estimates a policy's value on the log so far after every day: "one
estimate per day on the growing log". Simulating that over thousands of streams row by
row (or through Parquet) costs far more than it needs to: in a finite world with a
deterministic target policy, every per-row quantity (r, w, ρ̂_π, ρ̂_a) of a row is fixed
by four things — its context x, whether the logged action is π's, and its reward
r ∈ {0, 1} — so a day is a multinomial draw of counts over these 4 C *cells*, and the
:class:`~dr_scale.ope.moments.Moments` of any estimator's terms on the log so far follow
from the cumulative counts: n = Σ_c N_c, mean = Σ_c N_c z_c / n, comoment =
Σ_c N_c (z_c − mean)(z_c − mean)ᵀ. These are exactly the states the estimator would
merge from the rows themselves (``tests/synthetic/test_streams.py`` checks it).

>>> from dr_scale.ope.estimators import IPS
>>> world = BanditWorld.make(epsilon=0.3)
>>> days = next(running_states(world, IPS(), streams=1, days=3, rows_per_day=100, seed=1))
>>> [state.n for state in days]
[100, 200, 300]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dr_scale.core.errors import ParameterError
from dr_scale.ope.estimators import Estimator, RowInputs
from dr_scale.ope.moments import Moments
from dr_scale.synthetic.finite_world import BanditWorld


@dataclass(frozen=True)
class Cells:
    """The 4 C kinds of row of a world: their probabilities and their per-row quantities (``rows``)."""

    prob: np.ndarray  # (K,)
    rows: RowInputs  # K "rows", one per cell

    @classmethod
    def of(cls, world: BanditWorld) -> Cells:
        """Cells (x, logged action = π's or not, r) of a world whose target policy is deterministic."""
        contexts = world.rho.shape[0]
        taken = np.argmax(world.target, axis=1)
        if not np.allclose(world.target.max(axis=1), 1.0):
            raise ParameterError("the target policy of `world` must be deterministic")
        x = np.arange(contexts)
        p_taken = world.logging[x, taken]  # μ(π(x) | x)
        rho_taken = world.rho[x, taken]
        p_other_reward = (world.logging * world.rho).sum(axis=1) - p_taken * rho_taken  # P(a ≠ π(x), r = 1 | x)
        prob = np.stack([p_taken * rho_taken, p_taken * (1 - rho_taken),
                         p_other_reward, (1 - p_taken) - p_other_reward], axis=1) / contexts
        reward = np.tile([1.0, 0.0, 1.0, 0.0], contexts)
        weight = np.repeat(1.0 / p_taken, 4) * np.tile([1.0, 1.0, 0.0, 0.0], contexts)
        hat = np.repeat(world.rho_hat[x, taken], 4)  # ρ̂_π(x); also ρ̂_a(x) wherever w ≠ 0
        return cls(np.clip(prob.ravel(), 0.0, None), RowInputs(reward, weight, hat, hat))


def running_states(world: BanditWorld, estimator: Estimator, *, streams: int, days: int, rows_per_day: int,
                   seed: int) -> Iterator[list[Moments]]:
    """For each of ``streams`` independent streams, the estimator's state on the log so far after each day.

    Stream s draws its days' counts from ``numpy.random.default_rng([seed, s])``, so a stream
    does not depend on how many others are drawn.
    """
    cells = Cells.of(world)
    z = np.stack(estimator.terms(cells.rows), axis=1)  # (K, m)
    prob = cells.prob / cells.prob.sum()
    for s in range(streams):
        counts = np.random.default_rng([seed, s]).multinomial(rows_per_day, prob, size=days).cumsum(axis=0)
        n = counts.sum(axis=1)
        mean = counts @ z / n[:, None]
        second = np.einsum("dk,ki,kj->dij", counts, z, z)
        comoment = second - n[:, None, None] * mean[:, :, None] * mean[:, None, :]
        seen = counts > 0
        low = np.stack([np.where(seen, q, np.inf).min(axis=1) for q in (cells.rows.reward, cells.rows.weight)], 1)
        high = np.stack([np.where(seen, q, -np.inf).max(axis=1) for q in (cells.rows.reward, cells.rows.weight)], 1)
        yield [Moments(int(n[d]), mean[d], comoment[d], low[d], high[d]) for d in range(days)]


def daily_logs(world: BanditWorld, *, days: int, rows_per_day: int, seed: int, stop_action: int | None = None,
               stop_day: int | None = None) -> Iterator[dict]:
    """A stream's logged rows, day by day (days 1 … ``days``), as :meth:`BanditWorld.sample`'s arrays plus the
    ``context`` and the target policy's ``target_action``.

    From day ``stop_day`` on, the logging policy never takes ``stop_action``: its probability is spread
    over the other actions in proportion to theirs, and the logged propensities are the new ones (a
    logging policy whose support shrinks, correctly logged). Day d of stream ``seed`` draws from
    ``numpy.random.default_rng([seed, d])``.

    >>> world = BanditWorld.make(epsilon=0.3)
    >>> logs = list(daily_logs(world, days=3, rows_per_day=500, seed=1, stop_action=0, stop_day=3))
    >>> [int((day["action"] == 0).sum() > 0) for day in logs]
    [1, 1, 0]
    """
    contexts, k = world.rho.shape
    stopped = world.logging.copy()
    if stop_action is not None:
        stopped[:, stop_action] = 0.0
        stopped /= stopped.sum(axis=1, keepdims=True)
    for day in range(1, days + 1):
        logging = stopped if stop_day is not None and day >= stop_day else world.logging
        rng = np.random.default_rng([seed, day])
        x = rng.integers(0, contexts, size=rows_per_day)
        cdf = np.cumsum(logging[x], axis=1)
        action = (rng.random(rows_per_day)[:, None] >= cdf).sum(axis=1).clip(max=k - 1)
        reward = (rng.random(rows_per_day) < world.rho[x, action]).astype(np.float64)
        yield dict(context=x, action=action, reward=reward, propensity=logging[x, action],
                   target_action=np.argmax(world.target[x], axis=1), reward_hat=world.rho_hat[x])
