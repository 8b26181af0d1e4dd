"""The estimators that choose a threshold or a shrinkage from the data: obp's ``…Tuning`` classes (IPS, DR,
Switch-DR), DR with optimistic shrinkage, and Switch-DR and clipped DR with SLOPE's choice of a threshold.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dr_scale.core.errors import ParameterError
from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.dr import DoublyRobust
from dr_scale.ope.estimators.estimate import checked
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.estimators.ips import IPS
from dr_scale.ope.estimators.shrinkage import OBP_TUNING_DELTA, slope, slope_widths, tuning_reason
from dr_scale.ope.moments import Moments

#: The thresholds (weights) among which SwitchDR's τ and ClippedDR's M are chosen when not given.
TUNING_GRID = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


@dataclass(frozen=True, repr=False)
class IPSTuning(IPS):
    """:class:`IPS` with its clip λ chosen from the data, as obp's ``InverseProbabilityWeightingTuning``.

    ``IPS(lambda_=None)`` under obp's name: the candidates ``lambdas`` (default :data:`CLIPPING_LAMBDAS`),
    ``tuning_method`` ``"slope"`` (default) or ``"mse"``, ``use_bias_upper_bound``, ``delta`` (0.1), as
    ``Shrinkage`` describes.

    Parameters
    ----------
    lambda_ : None
        Always None: the clip is chosen (a fixed one is ``IPS(lambda_=…)``).
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)
    >>> IPSTuning().estimate(**log).chosen  # SLOPE
    {'lambda_': 10.0}
    >>> IPSTuning(tuning_method="mse").estimate(**log).chosen  # the bias bound keeps IPS itself
    {'lambda_': inf}
    """

    lambda_: float | None = None
    name: ClassVar[str] = "IPSTuning"
    example: ClassVar[str] = "IPSTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    fixed_form: ClassVar[str] = "IPS(lambda_={})"


@dataclass(frozen=True, repr=False)
class DRTuning(DoublyRobust):
    """:class:`DoublyRobust` with its clip λ chosen from the data, as obp's ``DoublyRobustTuning``.

    ``DR(lambda_=None)`` under obp's name (candidates default :data:`CLIPPING_LAMBDAS`; ``Shrinkage``).

    Parameters
    ----------
    lambda_ : None
        Always None: the clip is chosen (a fixed one is ``DR(lambda_=…)``).
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)
    >>> DRTuning(lambdas=[5, 20, float("inf")], tuning_method="mse")
    DRTuning(lambdas=[inf, 20.0, 5.0], tuning_method=mse)
    """

    lambda_: float | None = None
    name: ClassVar[str] = "DRTuning"
    example: ClassVar[str] = "DRTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    fixed_form: ClassVar[str] = "DR(lambda_={})"


@dataclass(frozen=True)
class _Thresholded(Estimator):
    """DR with a threshold on the weights: fixed, or chosen from :data:`TUNING_GRID` ∪ {∞} by SLOPE.

    With the threshold not given, the state holds the terms at every grid value and
    DR's (one pass, mergeable); at the end the threshold is chosen by SLOPE (Su, Srinath &
    Krishnamurthy 2020, in obp's SLOPE++ form, :func:`~dr_scale.ope.estimators.shrinkage.slope`):
    in decreasing interval width — DR (t = ∞) first, the least biased and, where the weights
    are heavy, the widest — each threshold is accepted while its interval (Student t,
    δ = 0.1, as obp) meets those of all the wider ones; the last accepted is chosen. Where
    a few rows carry huge weights, DR's interval is wide and a finite threshold whose value
    lies inside it is preferred; where the weights are light, the intervals are alike and
    a bias would show as a disagreement, which stops the walk at a larger threshold.
    The standard error is that of the chosen V̂_t, not accounting for the choice.
    """

    parameter: ClassVar[str] = ""
    clips: ClassVar[bool] = False  # a row above the threshold t keeps t (r − ρ̂_a) (clipping) or nothing (switch)

    @abstractmethod
    def corrected(self, rows: RowInputs, threshold: float) -> np.ndarray:
        """The correction added to ρ̂_π(x_i) on each row at the threshold t: w_i (r_i − ρ̂_{a_i}(x_i)) where
        w_i ≤ t, and above it t (r_i − ρ̂_{a_i}(x_i)) (clipping) or 0 (switching)."""

    @property
    def thresholds(self) -> tuple[float, ...]:
        """The thresholds: the one given, or the tuning grid and ∞."""
        value = getattr(self, self.parameter)
        return (value,) if value is not None else (*TUNING_GRID, float("inf"))

    @property
    def guarantee(self) -> bool:
        """Only at a given threshold of ∞ (DR itself); a finite or chosen one adds a bias."""
        return bool(getattr(self, self.parameter) == math.inf)

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """ρ̂_π(x_i) + the corrected term at each threshold (:meth:`corrected`), one array per threshold."""
        return [rows.reward_hat_pi + self.corrected(rows, t) for t in self.thresholds]

    def state(self, rows: RowInputs) -> Moments:
        """With the threshold tuned, the state of the grid's terms from sums per weight bin (no (G, n) stack)."""
        if getattr(self, self.parameter) is not None:
            return super().state(rows)
        if rows.reward_hat_pi is None:
            raise ParameterError(f"{self.name} needs a reward model ρ̂ (`reward_hat`); none was given")
        grid = np.array(self.thresholds)
        return grid_moments(rows, grid, grid if self.clips else np.zeros(grid.size))

    def choose(self, state: Moments) -> int:
        """The index of the chosen threshold: SLOPE over the thresholds' means and their 1/n variances, δ = 0.1, the
        thresholds in obp's order (decreasing, so that ties go as obp's ``…Tuning(tuning_method="slope")``)."""
        if state.n < 2:
            return state.m - 1
        widths = slope_widths(np.diag(state.comoment) / state.n, state.n, OBP_TUNING_DELTA)
        return state.m - 1 - slope(state.mean[::-1], widths[::-1])

    def tuning(self, state: Moments) -> str | None:
        """With the threshold chosen: which and why (:func:`~dr_scale.ope.estimators.shrinkage.tuning_reason`)."""
        if getattr(self, self.parameter) is not None or state.n < 2:
            return None
        return tuning_reason("slope", self.parameter, self.thresholds, self.choose(state))

    def linearize(self, state: Moments) -> tuple[float, np.ndarray, dict]:
        """At a given threshold, the base's; tuned, the mean at the SLOPE threshold (:meth:`choose`), its unit
        gradient and the chosen threshold."""
        if getattr(self, self.parameter) is not None:
            return super().linearize(state)
        best = self.choose(state)
        return float(state.mean[best]), np.eye(state.m)[best], {self.parameter: self.thresholds[best]}


def grid_moments(rows: RowInputs, grid: np.ndarray, above: np.ndarray) -> Moments:
    """:class:`Moments` of t_j = ρ̂_π + a_j, j over the increasing thresholds ``grid`` (last ∞), in O(n + G²).

    With d = r − ρ̂_a, a row whose weight w lies in bin b (the first threshold ≥ w) has
    a_j = w d for b ≤ j and a_j = above_j · d for b > j (``above`` = grid: clipping at
    the threshold; 0: switching the correction off). So every Σ a_j, Σ c a_j and Σ a_j a_k
    (c = ρ̂_π − its mean) is a cumulative sum over the bins of seven per-bin sums:

        Σ a_j a_k (j ≤ k) = Σ_{b≤j} (wd)² + above_j Σ_{j<b≤k} w d² + above_j above_k Σ_{b>k} d².

    Equal to ``Moments.of`` of the G terms up to rounding; G = 11 terms cost ~7 bin
    sums instead of an (11, n) stack and product.
    """
    c, logged, w = rows.reward_hat_pi, rows.reward_hat_logged, rows.weight
    if c is None or logged is None:
        raise ParameterError("`rows` need a reward model ρ̂ (`reward_hat`); none was given")
    n, size = c.size, grid.size
    if n == 0:
        return Moments.empty(size, 2)
    c_mean = c.mean()
    cc = c - c_mean
    sum_cc, sum_c = float(cc @ cc), float(cc.sum())
    positive = np.flatnonzero(w > 0)  # a row of weight 0 has a_j = 0 for every j (bin 0 is above no threshold)
    if positive.size < n:
        cc, w = cc[positive], w[positive]
        d = rows.reward[positive] - logged[positive]
    else:
        d = rows.reward - logged
    wd = w * d
    bins = np.searchsorted(grid, w, side="left")

    def per_bin(x: np.ndarray) -> np.ndarray:
        """Σ of ``x`` per weight bin, (size,)."""
        return np.bincount(bins, weights=x, minlength=size)

    def scaled(factor: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``factor`` · ``x`` with ∞ · 0 = 0 (nothing lies above the last threshold, ∞)."""
        return np.where(x == 0, 0.0, factor * np.where(x == 0, 1.0, x))

    head = {k: np.cumsum(per_bin(x)) for k, x in
            (("wd", wd), ("d", d), ("wd2", wd * wd), ("wdd", wd * d), ("dd", d * d), ("cwd", cc * wd), ("cd", cc * d))}
    tail = {k: head[k][-1] - head[k] for k in ("d", "dd", "cd")}  # Σ over the bins above j
    sum_a = head["wd"] + scaled(above, tail["d"])
    sum_ca = head["cwd"] + scaled(above, tail["cd"])
    lo, hi = np.minimum.outer(np.arange(size), np.arange(size)), np.maximum.outer(np.arange(size), np.arange(size))
    sum_aa = (head["wd2"][lo] + scaled(above[lo], head["wdd"][hi] - head["wdd"][lo])
              + scaled(above[lo] * above[hi], tail["dd"][hi]))
    mean_a = sum_a / n
    comoment = (sum_cc + sum_ca[:, None] + sum_ca[None, :] - sum_c * (mean_a[:, None] + mean_a[None, :])
                + sum_aa - n * np.outer(mean_a, mean_a))
    return Moments(n, c_mean + mean_a, comoment, *rows.ranges)


@dataclass(frozen=True)
class SwitchDR(_Thresholded):
    """Switch-DR (Wang, Agarwal & Dudík 2017), in obp's form for logged propensities.

        V̂ = (1/n) Σ_i [ ρ̂_π(x_i) + w_i 1{w_i ≤ τ} (r_i − ρ̂_{a_i}(x_i)) ]

    The correction is switched off for rows whose weight exceeds τ: τ = ∞ is DR, τ = 0
    is DM. ``tau=None`` (the default) chooses τ from :data:`TUNING_GRID` ∪ {∞} by
    SLOPE (see ``_Thresholded``); ``Estimate.chosen`` says which.

    Parameters
    ----------
    tau : float or None, default None
        The switching threshold τ ≥ 0 (``inf`` allowed: DR), or None to tune it.

    See Also
    --------
    ClippedDR : The weights clipped at a threshold rather than the correction switched off.
    DoublyRobust : τ = ∞.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(SwitchDR(tau=20).estimate(**log).value, 4)
    0.729
    >>> SwitchDR().estimate(**log).chosen  # SLOPE: DR's wide interval holds τ = 200's (= τ = 2's: no weight between)
    {'tau': 200.0}
    """

    tau: float | None = None
    name: ClassVar[str] = "SwitchDR"
    parameter: ClassVar[str] = "tau"

    def __post_init__(self) -> None:
        if self.tau is not None:
            object.__setattr__(self, "tau", checked("NonNegativeOrInf", "tau", self.tau))

    def corrected(self, rows: RowInputs, threshold: float) -> np.ndarray:
        """w_i (r_i − ρ̂_{a_i}(x_i)) 1{w_i ≤ τ}: the correction switched off above the threshold τ."""
        return np.where(rows.weight <= threshold, rows.weight * (rows.reward - rows.reward_hat_logged), 0.0)


@dataclass(frozen=True)
class ClippedDR(_Thresholded):
    """DR (Dudík, Langford & Li 2011, eq. 1) with importance weights clipped at M.

        V̂ = (1/n) Σ_i [ ρ̂_π(x_i) + min(w_i, M) (r_i − ρ̂_{a_i}(x_i)) ]

    M = ∞ is DR. ``max_weight=None`` (the default) chooses M from :data:`TUNING_GRID` ∪ {∞}
    by SLOPE (see ``_Thresholded``); ``Estimate.chosen`` says which.

    Parameters
    ----------
    max_weight : float or None, default None
        The clip M > 0 (``inf`` allowed: DR), or None to tune it.

    See Also
    --------
    SwitchDR : The correction switched off above a threshold rather than the weights clipped.
    DoublyRobust : M = ∞.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> ClippedDR(max_weight=5)
    ClippedDR(max_weight=5.0)
    >>> round(ClippedDR(max_weight=5).estimate(**log).value, 4)
    0.7302
    """

    max_weight: float | None = None
    name: ClassVar[str] = "ClippedDR"
    parameter: ClassVar[str] = "max_weight"
    clips: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.max_weight is not None:
            object.__setattr__(self, "max_weight", checked("PositiveOrInf", "max_weight", self.max_weight))

    def corrected(self, rows: RowInputs, threshold: float) -> np.ndarray:
        """min(w_i, M) (r_i − ρ̂_{a_i}(x_i)): the correction with its weight clipped at M."""
        out: np.ndarray = np.minimum(rows.weight, threshold) * (rows.reward - rows.reward_hat_logged)
        return out


@dataclass(frozen=True, repr=False)
class SwitchDRTuning(DoublyRobust):
    """Switch-DR with its threshold λ chosen as obp's ``SwitchDoublyRobustTuning`` chooses it.

        V̂_λ = (1/n) Σ_i [ ρ̂_π(x_i) + 1{w_i ≤ λ} w_i (r_i − ρ̂_{a_i}(x_i)) ]

    (:class:`SwitchDR` at τ = λ, Wang, Agarwal & Dudík 2017), λ chosen among ``lambdas`` by obp's
    ``"slope"`` or ``"mse"`` rule (``Shrinkage``) — where a bare ``SwitchDR()`` uses SLOPE over its own grid.

    Parameters
    ----------
    lambda_ : None
        Always None: the threshold is chosen (a fixed one is ``SwitchDR(tau=…)``).
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)
    >>> SwitchDRTuning(tuning_method="mse").estimate(**log).chosen
    {'lambda_': inf}
    """

    lambda_: float | None = None
    name: ClassVar[str] = "SwitchDRTuning"
    example: ClassVar[str] = "SwitchDRTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    fixed_form: ClassVar[str] = "SwitchDR(tau={})"

    def shrink(self, w: np.ndarray, lam: float) -> np.ndarray:
        """ŵ_λ(w) = w 1{w ≤ λ}."""
        return np.where(w <= lam, w, 0.0)


@dataclass(frozen=True, repr=False)
class DRos(DoublyRobust):
    """DR with optimistic shrinkage (Su, Dimakopoulou, Krishnamurthy & Dudík, ICML 2020), as obp's
    ``DoublyRobustWithShrinkage``.

        V̂ = (1/n) Σ_i [ ρ̂_π(x_i) + ŵ_i (r_i − ρ̂_{a_i}(x_i)) ],    ŵ_i = λ w_i / (w_i² + λ)

    the weight that minimises a sharp bound on the MSE for the shrinkage λ: λ = ∞ is DR, λ = 0 is DM.
    ``DRos()`` (λ = None, the default) chooses λ from :data:`CLIPPING_LAMBDAS` with obp's
    ``DoublyRobustWithShrinkageTuning`` rule (``"slope"`` by default; ``Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default None
        The shrinkage λ ≥ 0 (``inf``: DR), or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    See Also
    --------
    DoublyRobust, SubGaussianDR : DR, and its sub-Gaussian shrinkage.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(DRos(lambda_=10).estimate(**log).value, 4)
    0.7223
    >>> DRos().estimate(**log).chosen
    {'lambda_': 10.0}
    """

    lambda_: float | None = None
    name: ClassVar[str] = "DRos"
    descending: ClassVar[bool] = False
    plain_at_inf: ClassVar[bool] = False  # DRos(lambda_=inf) is DR's value as a plain mean
    example: ClassVar[str] = "DRos(lambda_=10) or DRos(lambdas=[10, 100, inf], tuning_method=mse)"

    def shrink(self, w: np.ndarray, lam: float) -> np.ndarray:
        """ŵ_λ(w) = λ w / (w² + λ) (Su et al. 2020, optimistic shrinkage; w at λ = ∞)."""
        if lam == math.inf:
            return w
        denominator = w ** 2 + lam
        out: np.ndarray = np.divide(lam * w, denominator, out=np.zeros_like(w), where=denominator != 0)
        return out
