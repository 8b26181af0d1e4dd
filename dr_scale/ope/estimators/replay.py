"""The replay method (Li, Chu, Langford & Wang, WSDM 2011): obp's estimator without the logging propensity
for a deterministic π.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dr_scale.core.errors import ParameterError
from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.estimators.ips import SNIPS
from dr_scale.ope.intervals import Summary, summary_of
from dr_scale.ope.moments import Moments


def _plain_mean_summary(state: Moments, grad: np.ndarray, value: float | None) -> Summary:
    """The empirical-likelihood summary of a plain mean of the linearised per-row terms
    ψ_i = V̂ + ∇g · (t_i − t̄) (mean V̂, the delta method's variance), cut to the rewards' range."""
    var = float(grad @ state.comoment @ grad) / state.n if np.all(np.isfinite(grad)) else float("nan")
    return summary_of(state.n, np.array([value if value is not None else np.nan]), np.array([[var]]),
                      0.0, (0.0, 0.0), (0.0, 0.0), (state.low[0], state.high[0]), weighted=False, estimate=value)


@dataclass(frozen=True)
class ReplayMethod(Estimator):
    """The replay method (Li, Chu, Langford & Wang, WSDM 2011): the mean reward of the rows where π agrees with the log.

        V̂_RM = Σ_i 1{π(a_i|x_i) = 1} r_i / Σ_i 1{π(a_i|x_i) = 1}

    Li et al. replay a deterministic policy on a log of uniformly random actions: the rows whose logged
    action is π's are a sample of π's rows, so their mean reward is unbiased for V(π) under uniform
    logging; under any other logging policy it is biased (it ignores the propensities, which it does not
    read). A row counts when π gives its logged action probability exactly 1, as in obp 0.5.7's
    ``ReplayMethod`` (a stochastic π's rows never count). The state holds the moments of
    (1{π(a_i|x_i) = 1} r_i, 1{π(a_i|x_i) = 1}); the standard error is the delta method's on their ratio
    (as SNIPS's), and the empirical-likelihood interval that of a plain mean of the linearised terms
    (its weights' mean is the match rate, not 1, so IPS's weighted constraint does not apply). With no
    matching row the value is NaN (obp returns 0). Takes no parameters.

    See Also
    --------
    SNIPS : The same ratio with the weights π(a_i|x_i) / p̂_i.

    Examples
    --------
    >>> est = ReplayMethod().estimate(reward=[1.0, 0.0, 1.0, 1.0], action=[0, 1, 1, 0], propensity=[0.5] * 4,
    ...                               target_probs=[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    >>> est.value, est.n  # rows 0 and 2 match: (1 + 1) / 2
    (1.0, 4)
    """

    name: ClassVar[str] = "RM"
    needs_model: ClassVar[bool] = False
    needs_propensity: ClassVar[bool] = False

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """(1{π(a_i|x_i) = 1} r_i, 1{π(a_i|x_i) = 1}): the mean reward of the rows where the deterministic
        π chose the logged action (Li, Chu, Langford & Wang 2011).
        """
        if rows.target_prob is None:
            raise ParameterError("RM needs π(a_i|x_i) (`rows.target_prob`), the target policy's probability "
                                 "of the logged action")
        matched = (rows.target_prob == 1.0).astype(np.float64)
        return [matched * rows.reward, matched]

    value_of = SNIPS.value_of
    gradient = SNIPS.gradient

    def summary(self, state: Moments, grad: np.ndarray, value: float | None = None) -> Summary:
        """The empirical-likelihood summary of a plain mean of the linearised terms."""
        return _plain_mean_summary(state, grad, value)
