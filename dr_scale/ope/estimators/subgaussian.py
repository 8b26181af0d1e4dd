"""Sub-Gaussian IPS and DR (Metelli, Russo & Restelli, NeurIPS 2021): the weights shrunk by a power mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dr_scale.ope.estimators.dr import DoublyRobust
from dr_scale.ope.estimators.ips import IPS
from dr_scale.ope.estimators.shrinkage import SUBGAUSSIAN_LAMBDAS


class _SubGaussian:
    """The sub-Gaussian weight of :class:`SubGaussianIPS` and :class:`SubGaussianDR` (Metelli, Russo & Restelli
    2021): ŵ_λ(w) = w / (1 − λ + λ w), λ in [0, 1] (0 where the denominator is 0), its candidates
    :data:`SUBGAUSSIAN_LAMBDAS` in increasing order, always a plain mean (λ = 0 is IPS's or DR's value)."""

    lambda_rule: ClassVar[str] = "Share"
    default_lambdas: ClassVar[tuple] = SUBGAUSSIAN_LAMBDAS
    descending: ClassVar[bool] = False
    plain_at_inf: ClassVar[bool] = False
    threshold: ClassVar[str] = ""  # a smooth weight

    def shrink(self, w: np.ndarray, lam: float) -> np.ndarray:
        """ŵ_λ(w) = w / (1 − λ + λ w) (Metelli, Russo & Restelli 2021, the power-mean correction; 0 where the
        denominator is 0).
        """
        denominator = 1 - lam + lam * w
        out: np.ndarray = np.divide(w, denominator, out=np.zeros_like(w), where=denominator != 0)
        return out


@dataclass(frozen=True, repr=False)
class SubGaussianIPS(_SubGaussian, IPS):
    """Sub-Gaussian IPS (Metelli, Russo & Restelli, NeurIPS 2021), as obp's
    ``SubGaussianInverseProbabilityWeighting``.

        V̂ = (1/n) Σ_i ŵ_i r_i,    ŵ_i = w_i / (1 − λ + λ w_i),    λ ∈ [0, 1]

    the power-mean correction of the weights, which makes the estimator's tail sub-Gaussian: λ = 0
    is IPS, λ = 1 weighs every row with w > 0 by 1. ``SubGaussianIPS()`` (λ = None, the default)
    chooses λ from :data:`SUBGAUSSIAN_LAMBDAS` with obp's ``SubGaussianInverseProbabilityWeightingTuning``
    rule over honest variances (``Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default None
        λ in [0, 1], or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(SubGaussianIPS(lambda_=0.1).estimate(**log).value, 4)
    0.4672
    """

    lambda_: float | None = None
    name: ClassVar[str] = "SubGaussianIPS"
    example: ClassVar[str] = ("SubGaussianIPS(lambda_=0.1) or SubGaussianIPS(lambdas=[0, 0.01, 0.1], "
                                "tuning_method=mse)")


@dataclass(frozen=True, repr=False)
class SubGaussianDR(_SubGaussian, DoublyRobust):
    """Sub-Gaussian DR (Metelli, Russo & Restelli, NeurIPS 2021), as obp's ``SubGaussianDoublyRobust``.

        V̂ = (1/n) Σ_i [ ρ̂_π(x_i) + ŵ_i (r_i − ρ̂_{a_i}(x_i)) ],    ŵ_i = w_i / (1 − λ + λ w_i),    λ ∈ [0, 1]

    λ = 0 is DR. ``SubGaussianDR()`` (λ = None, the default) chooses λ from :data:`SUBGAUSSIAN_LAMBDAS`
    with obp's ``SubGaussianDoublyRobustTuning`` rule over honest variances (``Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default None
        λ in [0, 1], or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(SubGaussianDR(lambda_=0.1).estimate(**log).value, 4)
    0.7312
    """

    lambda_: float | None = None
    name: ClassVar[str] = "SubGaussianDR"
    example: ClassVar[str] = "SubGaussianDR(lambda_=0.1) or SubGaussianDR(lambdas=[0, 0.01, 0.1], tuning_method=mse)"
