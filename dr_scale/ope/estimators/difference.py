"""The logging policy's on-policy value and the paired difference V̂(A) − V̂(B) of two policies on the same rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dr_scale.ope.estimators.base import Estimator, reward_bounds
from dr_scale.ope.estimators.estimate import Estimate
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.estimators.shrinkage import Shrinkage, with_ties
from dr_scale.ope.intervals import summary_of
from dr_scale.ope.moments import Moments


@dataclass(frozen=True)
class OnPolicy(Estimator):
    """The logging policy's value from its own rewards, on-policy: (1/n) Σ_i r_i.

    The baseline ``logging`` of a paired comparison.
    """

    name: ClassVar[str] = "logging"
    needs_model: ClassVar[bool] = False
    clt: ClassVar[bool] = True

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """(r_i,): the logging policy's value is the plain mean of the logged rewards."""
        return [rows.reward]


@dataclass(frozen=True)
class Difference:
    """V̂(A) − V̂(B) from paired per-row terms of two policies on the same rows.

    The state is one :class:`~dr_scale.ope.moments.Moments` of A's terms and B's stacked,
    so the standard error uses their covariance (delta method with the gradient
    (∇g_A, −∇g_B)), which two separate intervals cannot. ``baseline`` is the same
    estimator for policy B, or :class:`OnPolicy` for the logging policy.

    Examples
    --------
    >>> import numpy as np
    >>> from dr_scale.ope.estimators import IPS
    >>> rows = RowInputs.from_actions(np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 1, 1, 0]),
    ...                               np.array([0.5, 0.5, 0.8, 0.4]), np.array([0, 0, 1, 1]))
    >>> diff = Difference(IPS(), OnPolicy())
    >>> est = diff.result(diff.state(rows, rows))
    >>> round(est.value, 4)  # IPS 0.8125 − mean reward 0.75
    0.0625
    """

    estimator: Estimator
    baseline: Estimator

    def state(self, rows: RowInputs, baseline_rows: RowInputs) -> Moments:
        """The moments of both estimators' terms on the same rows (the baseline's after the estimator's), so that
        the delta method sees their covariance; a tuned estimator's ties kept.
        """
        a, b = self.estimator.terms(rows), self.baseline.terms(baseline_rows)
        state = Moments.of(*a, *b, ranges=rows.ranges)
        if not isinstance(self.estimator, Shrinkage):
            return state
        tied_b = self.baseline.tie_sources(b) if isinstance(self.baseline, Shrinkage) else range(len(b))
        return with_ties(state, [*self.estimator.tie_sources(a), *(len(a) + s for s in tied_b)])

    def result(self, state: Moments) -> Estimate:
        """The difference, its paired standard error, and the EL summary of the linearised paired terms.

        The empirical-likelihood interval of a difference is that of a plain mean (Owen 2001): of
        the per-row terms ψ_i = D̂ + (∇g_A, −∇g_B)·(z_i − z̄), whose mean is D̂ and whose variance is
        the delta method's, so it is D̂ ± √(δ S_ψψ / n) with δ = F⁻¹_{1,n}(1 − α), cut to the
        range of a difference of two values in the rewards' range, [min r − max r, max r − min r].
        """
        if state.n == 0:
            return Estimate(float("nan"), float("nan"), 0)
        m_a = state.m - (1 if isinstance(self.baseline, OnPolicy) else state.m // 2)
        v_a, g_a, chosen = self.estimator.linearize(state.take(np.arange(m_a)))
        v_b, g_b, _ = self.baseline.linearize(state.take(np.arange(m_a, state.m)))
        grad = np.concatenate([g_a, -g_b])
        variance = float(grad @ state.covariance() @ grad) / state.n
        value = v_a - v_b
        spread = float(state.high[0] - state.low[0]) if state.low.size else float("inf")
        summary = summary_of(state.n, np.array([value]), np.array([[float(grad @ state.comoment @ grad) / state.n]]),
                             0.0, (0.0, 0.0), (0.0, 0.0), (-spread, spread), weighted=False, estimate=value)
        bounds = reward_bounds(state)
        return Estimate(value, float(np.sqrt(max(variance, 0.0))), state.n, summary, chosen,
                        bounds=None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0]),
                        guarantee=self.estimator.guarantee and self.baseline.guarantee,
                        model_based=self.estimator.model_based or self.baseline.model_based,
                        tuning=self.estimator.tuning(state.take(np.arange(m_a))))
