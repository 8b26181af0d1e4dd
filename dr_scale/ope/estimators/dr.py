"""The doubly robust estimator (Dudík, Langford & Li 2011, Sec. 2.2, eq. 1), with obp's weight clipping, and
its self-normalized form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.estimators.shrinkage import Shrinkage


@dataclass(frozen=True, repr=False)
class DoublyRobust(Shrinkage):
    """Doubly robust estimator (Dudík, Langford & Li 2011, Sec. 2.2, eq. 1, for stochastic π).

        V̂_DR = (1/n) Σ_i [ ρ̂_π(x_i) + w_i (r_i − ρ̂_{a_i}(x_i)) ],
        ρ̂_π(x) = Σ_a π(a|x) ρ̂_a(x),    w_i = π(a_i|x_i) / p̂_i

    For a deterministic π this is eq. 1, (1/|S|) Σ [ (r_a − ρ̂_a(x)) 1(π(x) = a) / p̂(a|x, h) + ρ̂_{π(x)}(x) ]:
    its bias is |E_x[Δ δ]|, the product of ρ̂'s and p̂'s errors, so it is unbiased when either is exact
    (Theorem 1). The state holds the moments of (the bracket, w, ρ̂_π); the empirical-likelihood
    interval treats the bracket as IPS treats w r (docs/estimators.md).

    A finite ``lambda_`` clips the weights, min(w_i, λ), as obp 0.5.7's ``DoublyRobust(lambda_)``
    (DR with pessimistic shrinkage, Su et al. 2020; the same estimator as ``ClippedDR(max_weight=λ)``):
    a plain mean. ``lambda_=None`` (or :class:`DRTuning`) chooses λ from the data (``Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default inf
        The clip λ ≥ 0 (``inf``: DR), or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    See Also
    --------
    DirectMethod, IPS : The two estimators DR combines.
    SNDR, SwitchDR, ClippedDR, DRos, SubGaussianDR : Variants that trade bias for variance.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = DoublyRobust().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4)
    (0.7881, 0.043)
    >>> [round(x, 4) for x in est.ci(0.05, method="el")]
    [0.5233, 0.8835]
    """

    lambda_: float | None = math.inf
    name: ClassVar[str] = "DR"
    clt: ClassVar[bool] = True
    el_map: ClassVar[tuple] = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
    model_term: ClassVar[int | None] = 2
    descending: ClassVar[bool] = True
    example: ClassVar[str] = "DR(lambda_=50) or DRTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    plain_at_inf: ClassVar[bool] = True
    threshold: ClassVar[str] = "clip"

    def shrink(self, w: np.ndarray, lam: float) -> np.ndarray:
        """ŵ_λ(w) = min(w, λ): obp's weight clipping (λ = ∞: DR as in Dudík, Langford & Li 2011, eq. 1)."""
        out: np.ndarray = np.minimum(w, lam)
        return out


@dataclass(frozen=True)
class SNDR(Estimator):
    """Self-normalized DR, with the delta method's standard error on the three means.

        V̂_SNDR = (1/n) Σ_i ρ̂_π(x_i) + Σ_i w_i (r_i − ρ̂_{a_i}(x_i)) / Σ_i w_i

    DR (Dudík, Langford & Li 2011, eq. 1) with the correction's weights normalized to sum to 1, as
    obp's ``SelfNormalizedDoublyRobust``. Its empirical-likelihood interval is DR's (under E_Q[w] = 1
    the two agree). Takes no parameters (obp's ``SelfNormalizedDoublyRobust`` accepts a ``lambda_`` and
    ignores it).

    See Also
    --------
    DoublyRobust : The unnormalized form.
    SNIPS : The self-normalized estimator without a reward model.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(SNDR().estimate(**log).value, 4)
    0.8138
    """

    name: ClassVar[str] = "SNDR"
    clt: ClassVar[bool] = True
    el_map: ClassVar[tuple] = ((1.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    model_term: ClassVar[int | None] = 0

    def shared_terms(self) -> tuple[str, ...]:
        """(ρ̂_π, w d, w) (:data:`~dr_scale.ope.estimators.base.SHARED_TERMS`)."""
        return ("ρ̂_π", "w d", "w")

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """(ρ̂_π(x_i), w_i (r_i − ρ̂_{a_i}(x_i)), w_i)."""
        return [rows.reward_hat_pi, rows.weight * (rows.reward - rows.reward_hat_logged), rows.weight]

    def value_of(self, means: np.ndarray) -> float:
        """V̂_SNDR = t̄₁ + t̄₂ / t̄₃ = (1/n) Σ ρ̂_π(x_i) + Σ w_i (r_i − ρ̂_{a_i}(x_i)) / Σ w_i; NaN when Σ w_i = 0."""
        return float(means[0] + means[1] / means[2]) if means[2] != 0 else float("nan")

    def gradient(self, means: np.ndarray) -> np.ndarray:
        """∇(t̄₁ + t̄₂ / t̄₃) = (1, 1/t̄₃, −t̄₂/t̄₃²); NaN when t̄₃ = 0."""
        if means[2] == 0:  # no row with weight: the ratio, and its gradient, are undefined
            return np.full(3, np.nan)
        return np.array([1.0, 1.0 / means[2], -means[1] / means[2] ** 2])
