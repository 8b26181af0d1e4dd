"""Inverse propensity scoring (Dudík, Langford & Li 2011, Sec. 2.1), with obp's weight clipping, and its
self-normalized form.
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
class IPS(Shrinkage):
    """Inverse propensity scoring (Dudík, Langford & Li 2011, Sec. 2.1), with obp's weight clipping λ.

        V̂_IPS = (1/n) Σ_i min(w_i, λ) r_i,    w_i = π(a_i|x_i) / p̂_i

    (the paper's r_a 1(π(x) = a) / p̂(a|x, h) for a deterministic π, at λ = ∞, the default). No reward
    model. At λ = ∞ the state holds the moments of (w r, w): the empirical-likelihood interval uses the
    constraint E[w] = 1 (:mod:`dr_scale.ope.intervals`). A finite λ clips the weights as obp 0.5.7's
    ``InverseProbabilityWeighting(lambda_)`` does (Strehl et al. 2010; Su et al. 2020): a plain mean.
    ``lambda_=None`` (or :class:`IPSTuning`) chooses λ from the data (``Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default inf
        The clip λ ≥ 0 (``inf``: no clipping), or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    See Also
    --------
    SNIPS : The self-normalized form.
    DoublyRobust : IPS of the reward model's residuals, plus the direct method.
    SubGaussianIPS : The weights shrunk smoothly rather than clipped.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = IPS().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4)
    (0.7083, 0.1768)
    >>> [round(float(x), 4) for x in est.ci(0.05)]
    [0.3619, 1.0548]
    >>> [round(x, 4) for x in est.ci(0.05, method="el")]
    [0.5342, 0.9353]
    >>> IPS(lambda_=50)
    IPS(lambda_=50.0)
    >>> round(IPS(lambda_=50).estimate(**log).value, 4)
    0.5083
    """

    lambda_: float | None = math.inf
    name: ClassVar[str] = "IPS"
    clt: ClassVar[bool] = True
    needs_model: ClassVar[bool] = False
    el_map: ClassVar[tuple] = ((1.0, 0.0), (0.0, 1.0))
    descending: ClassVar[bool] = True
    example: ClassVar[str] = "IPS(lambda_=50) or IPSTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    plain_at_inf: ClassVar[bool] = True
    threshold: ClassVar[str] = "clip"

    def shrink(self, w: np.ndarray, lam: float) -> np.ndarray:
        """ŵ_λ(w) = min(w, λ): obp's weight clipping (λ = ∞: plain IPS)."""
        out: np.ndarray = np.minimum(w, lam)
        return out


@dataclass(frozen=True)
class SNIPS(Estimator):
    """Self-normalized IPS, with the delta method's standard error on the ratio of means.

        V̂_SNIPS = Σ_i w_i r_i / Σ_i w_i,    w_i = π(a_i|x_i) / p̂_i

    (Swaminathan & Joachims 2015; not in Dudík, Langford & Li 2011). Under the empirical-likelihood
    constraint E_Q[w] = 1 the ratio is E_Q[w r], so its EL interval is IPS's. Takes no parameters
    (obp's ``SelfNormalizedInverseProbabilityWeighting`` accepts a ``lambda_`` and ignores it).

    See Also
    --------
    IPS : The unnormalized mean.
    SNDR : The self-normalized doubly robust estimator.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = SNIPS().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4)
    (0.8479, 0.0333)
    >>> est.ci(0.05, method="el") == IPS().estimate(**log).ci(0.05, method="el")
    True
    """

    name: ClassVar[str] = "SNIPS"
    clt: ClassVar[bool] = True
    needs_model: ClassVar[bool] = False
    el_map: ClassVar[tuple] = ((1.0, 0.0), (0.0, 1.0))

    def shared_terms(self) -> tuple[str, ...]:
        """(w r, w) (:data:`~dr_scale.ope.estimators.base.SHARED_TERMS`)."""
        return ("w r", "w")

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """(w_i r_i, w_i)."""
        return [rows.weight * rows.reward, rows.weight]

    def value_of(self, means: np.ndarray) -> float:
        """V̂_SNIPS = t̄₁ / t̄₂ = Σ w_i r_i / Σ w_i; NaN when Σ w_i = 0."""
        return float(means[0] / means[1]) if means[1] != 0 else float("nan")

    def gradient(self, means: np.ndarray) -> np.ndarray:
        """∇(t̄₁ / t̄₂) = (1/t̄₂, −t̄₁/t̄₂²); NaN when t̄₂ = 0."""
        if means[1] == 0:  # no row with weight: the ratio, and its gradient, are undefined
            return np.full(2, np.nan)
        return np.array([1.0 / means[1], -means[0] / means[1] ** 2])
