"""Balanced inverse probability weighting (Sondhi, Arbour & Dimmery, AISTATS 2020): weights from a classifier,
no logging propensity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from dr_scale.core.errors import ParameterError
from dr_scale.ope import checks as check
from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.estimate import Estimate, checked
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.estimators.ips import SNIPS
from dr_scale.ope.moments import Moments


@dataclass(frozen=True, repr=False)
class BalancedIPW(Estimator):
    """Balanced inverse probability weighting, B-IPW (Sondhi, Arbour & Dimmery, AISTATS 2020).

        V̂_B-IPW = Σ_i ŵ_λ(x_i, a_i) r_i / Σ_i ŵ_λ(x_i, a_i),    ŵ_λ = min(ŵ, λ),
        ŵ(x, a) = Pr[C = 1 | x, a] / Pr[C = 0 | x, a]

    with ŵ from a classifier that tells the logged pairs (x_i, a_i) (C = 0) from pairs (x_i, a') with a'
    drawn from π (C = 1): with as many of each, its odds estimate π(a|x) / π₀(a|x), so B-IPW needs no
    logging propensity. The weights are given per row (``estimated_importance_weights``; in a log, the
    column ``importance_weight``): obp 0.5.7's ``BalancedInverseProbabilityWeighting`` with the weights of
    its ``ImportanceWeightEstimator``, with its clip ``lambda_`` (∞: none). The state holds the moments of
    (ŵ_λ r, ŵ_λ), SNIPS's, with its standard error (the delta method on the ratio; the weights taken as
    given) and normal and empirical-likelihood intervals.

    Parameters
    ----------
    lambda_ : float
        The largest weight kept, ≥ 0 (default ∞).

    See Also
    --------
    SNIPS : The same ratio with the weights π(a_i|x_i) / p̂_i.

    Examples
    --------
    >>> est = BalancedIPW().estimate(reward=[1.0, 0.0, 1.0], action=[0, 1, 1],
    ...                              target_probs=[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]],
    ...                              estimated_importance_weights=[2.0, 1.0, 1.0])
    >>> est.value  # (2 + 0 + 1) / (2 + 1 + 1)
    0.75
    >>> BalancedIPW(lambda_=1.0).estimate(reward=[1.0, 0.0, 1.0], action=[0, 1, 1], target_probs=[[1.0, 0.0]] * 3,
    ...                                   estimated_importance_weights=[2.0, 1.0, 1.0]).value
    0.6666666666666666
    """

    lambda_: float = math.inf
    name: ClassVar[str] = "BIPW"
    needs_model: ClassVar[bool] = False
    needs_propensity: ClassVar[bool] = False
    needs_importance_weight: ClassVar[bool] = True
    el_map: ClassVar[tuple] = ((1.0, 0.0), (0.0, 1.0))  # SNIPS's
    example: ClassVar[str] = "BIPW(lambda_=50)"

    def __post_init__(self) -> None:
        if self.lambda_ != math.inf or not isinstance(self.lambda_, float):  # BIPW(): no pydantic import
            object.__setattr__(self, "lambda_", checked("NonNegativeOrInf", "lambda_", self.lambda_))

    def __repr__(self) -> str:
        return "BalancedIPW()" if self.lambda_ == math.inf else f"BalancedIPW(lambda_={self.lambda_!r})"

    @property
    def label(self) -> str:
        """``BIPW``, or ``BIPW(lambda_=λ)`` with the weights clipped at λ."""
        return "BIPW" if self.lambda_ == math.inf else f"BIPW(lambda_={self.lambda_!r})"

    def balanced(self, rows: RowInputs) -> RowInputs:
        """``rows`` with the clipped estimated weights ŵ_λ in place of w (what the state's moments are of)."""
        if rows.importance_weight is None:
            raise ParameterError("BIPW needs the estimated importance weights ŵ(x_i, a_i) "
                                 "(`estimated_importance_weights`; in a log, the column importance_weight)")
        return RowInputs(rows.reward, np.minimum(rows.importance_weight, self.lambda_),
                         importance_weight=rows.importance_weight)

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """(ŵ_λ r_i, ŵ_λ) with ŵ_λ = min(ŵ(x_i, a_i), λ): V̂ = Σ ŵ_λ r_i / Σ ŵ_λ, self-normalized as SNIPS."""
        rows = self.balanced(rows)
        return [rows.weight * rows.reward, rows.weight]

    def state(self, rows: RowInputs) -> Moments:
        """The moments of :meth:`terms` over the rows with the clipped estimated weights in place of w."""
        return super().state(self.balanced(rows))  # the interval's weight range: the clipped weights'

    value_of = SNIPS.value_of
    gradient = SNIPS.gradient

    def estimate(self, *, reward: ArrayLike, action: ArrayLike, target_probs: ArrayLike,
                 estimated_importance_weights: ArrayLike | None = None, propensity: ArrayLike | None = None,
                 reward_hat: ArrayLike | None = None) -> Estimate:
        """Estimate from obp's arrays and the (n,) ``estimated_importance_weights`` ŵ(x_i, a_i) ≥ 0.

        ``action`` and ``target_probs`` are checked as obp checks them (and unused, as obp's); ``propensity``
        and ``reward_hat`` are accepted (and unused), so a log's arrays pass as they are.
        """
        reward = check.vector("reward", reward)
        n = reward.shape[0]
        target_probs = check.probabilities("target_probs", target_probs, n)
        check.actions("action", action, n, target_probs.shape[1])
        if estimated_importance_weights is None:
            raise ParameterError("BIPW needs `estimated_importance_weights`, ŵ(x_i, a_i) per row")
        weights = check.vector("estimated_importance_weights", estimated_importance_weights, n)
        if not np.all(weights >= 0):
            i = int(np.flatnonzero(~(weights >= 0))[0])
            raise ParameterError(f"`estimated_importance_weights` must be non-negative and not NaN (index {i}: "
                                 f"{weights[i]})")
        return self.result(self.state(RowInputs(reward, weights, importance_weight=weights)))
