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
from dr_scale.ope.estimators.shrinkage import (
    OBP_TUNING_DELTA,
    grid_moments,
    honest_variances,
    kish_ess,
    raised_note,
    slope,
    slope_widths,
    tuning_reason,
)
from dr_scale.ope.moments import Moments

#: The thresholds (weights) among which SwitchDR's τ and ClippedDR's M are chosen when not given.
TUNING_GRID = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


@dataclass(frozen=True, repr=False)
class IPSTuning(IPS):
    """:class:`IPS` with its clip λ chosen from the data by obp's ``InverseProbabilityWeightingTuning`` rules.

    ``IPS(lambda_=None)`` under obp's name: the candidates ``lambdas`` (default :data:`CLIPPING_LAMBDAS`),
    ``tuning_method`` ``"slope"`` (default) or ``"mse"``, over honest variances (``variance="sample"``:
    obp's choice exactly), ``use_bias_upper_bound``, ``delta`` (0.1), as ``Shrinkage`` describes.

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
    """:class:`DoublyRobust` with its clip λ chosen from the data by obp's ``DoublyRobustTuning`` rules (over
    honest variances unless ``variance="sample"``).

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
    """DR with a threshold on the weights: fixed, or chosen from :data:`TUNING_GRID` ∪ {∞} by SLOPE over honest
    variances.

    With the threshold not given, the state holds, for every grid value t_j, the moments of
    the term t_j = ρ̂_π + ŵ_j (r − ρ̂_a) and of the modified weight ŵ_j, and those of the
    squared residual e = (r − ρ̂_a)² over all rows (one pass, mergeable: :func:`grid_moments`).
    At the end the threshold is chosen by SLOPE (Su, Srinath & Krishnamurthy 2020, in obp's
    SLOPE++ form, :func:`~dr_scale.ope.estimators.shrinkage.slope`): in decreasing interval
    width — DR (t = ∞) first, the least biased and, where the weights are heavy, the widest —
    each threshold is accepted while its interval (Student t, δ = 0.1, as obp) meets those of
    all the wider ones; the last accepted is chosen.

    The variance of each candidate is estimated honestly (:func:`honest_variances`): the
    sample variance of t_j, raised toward mean(ŵ_j²) · mean(e) — the variance the correction
    would have if the weighted rows' residuals spread as the log's do — as far as a prior
    worth :data:`PRIOR_ROWS` rows against the weighted rows' ESS. Where a few rows carry the
    weights and show no reward (a rare-click log, a policy the logger seldom follows), their
    sample variance is near 0 and DR's interval would be as narrow as DM's; the floor keeps
    it as wide as those few rows warrant, so SLOPE prefers a finite threshold. Where the
    weighted rows are many, the raise is negligible or nil and the choice is obp's SLOPE.
    (The ``…Tuning`` classes, ``DRos`` and the sub-Gaussian ones choose their λ over the same
    honest variances, ``Shrinkage``.)
    The standard error is that of the chosen V̂_t, not accounting for the choice.
    """

    parameter: ClassVar[str] = ""
    #: ``"clip"``: a row above the threshold t keeps the weight t; ``"switch"``: 0 (as ``Shrinkage.threshold``)
    threshold: ClassVar[str] = "switch"

    @abstractmethod
    def modified(self, weight: np.ndarray, threshold: float) -> np.ndarray:
        """ŵ, each row's weight at the threshold t: w where w ≤ t, and above it t (clipping) or 0 (switching)."""

    def corrected(self, rows: RowInputs, threshold: float) -> np.ndarray:
        """The correction added to ρ̂_π(x_i) on each row at the threshold t: ŵ_i (r_i − ρ̂_{a_i}(x_i))."""
        out: np.ndarray = self.modified(rows.weight, threshold) * (rows.reward - rows.reward_hat_logged)
        return out

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
        """ρ̂_π(x_i) + the corrected term at each threshold (:meth:`corrected`); with the threshold tuned, then the
        modified weights ŵ at each threshold and the squared residual (r_i − ρ̂_{a_i}(x_i))² (the honest
        variances' statistics, :func:`grid_moments`)."""
        terms = [rows.reward_hat_pi + self.corrected(rows, t) for t in self.thresholds]
        if getattr(self, self.parameter) is not None:
            return terms
        return [*terms, *(self.modified(rows.weight, t) for t in self.thresholds),
                (rows.reward - rows.reward_hat_logged) ** 2]

    def state(self, rows: RowInputs) -> Moments:
        """With the threshold tuned, the state of :meth:`terms` from sums per weight bin (no (2G + 1, n) stack)."""
        if getattr(self, self.parameter) is not None:
            return super().state(rows)
        if rows.reward_hat_pi is None:
            raise ParameterError(f"{self.name} needs a reward model ρ̂ (`reward_hat`); none was given")
        grid = np.array(self.thresholds)
        return grid_moments(rows, grid, self.threshold == "clip")

    def choose(self, state: Moments) -> int:
        """The index of the chosen threshold: SLOPE over the thresholds' means and their honest 1/n variances
        (:func:`honest_variances`), δ = 0.1, the thresholds in obp's order (decreasing, so that ties go as obp's
        ``…Tuning(tuning_method="slope")``)."""
        size = len(self.thresholds)
        if state.n < 2:
            return size - 1
        widths = slope_widths(honest_variances(state, size), state.n, OBP_TUNING_DELTA)
        return size - 1 - slope(state.mean[:size][::-1], widths[::-1])

    def tuning(self, state: Moments) -> str | None:
        """With the threshold chosen: which and why (:func:`~dr_scale.ope.estimators.shrinkage.tuning_reason`),
        with the ESS of the chosen modified weights."""
        if getattr(self, self.parameter) is not None or state.n < 2:
            return None
        size, best = len(self.thresholds), self.choose(state)
        ess = float(kish_ess(state.n, state.mean[size + best], state.comoment[size + best, size + best]))
        reason = tuning_reason("slope", self.parameter, self.thresholds, best, ess, "of its modified weights")
        return reason + raised_note(state, self.parameter, self.thresholds, "(r − ρ̂)")

    def linearize(self, state: Moments) -> tuple[float, np.ndarray, dict]:
        """At a given threshold, the base's; tuned, the mean at the SLOPE threshold (:meth:`choose`), its unit
        gradient and the chosen threshold."""
        if getattr(self, self.parameter) is not None:
            return super().linearize(state)
        best = self.choose(state)
        return float(state.mean[best]), np.eye(state.m)[best], {self.parameter: self.thresholds[best]}


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

    def modified(self, weight: np.ndarray, threshold: float) -> np.ndarray:
        """w_i 1{w_i ≤ τ}: the correction switched off above the threshold τ."""
        out: np.ndarray = np.where(weight <= threshold, weight, 0.0)
        return out


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
    threshold: ClassVar[str] = "clip"

    def __post_init__(self) -> None:
        if self.max_weight is not None:
            object.__setattr__(self, "max_weight", checked("PositiveOrInf", "max_weight", self.max_weight))

    def modified(self, weight: np.ndarray, threshold: float) -> np.ndarray:
        """min(w_i, M): the weight clipped at M."""
        out: np.ndarray = np.minimum(weight, threshold)
        return out


@dataclass(frozen=True, repr=False)
class SwitchDRTuning(DoublyRobust):
    """Switch-DR with its threshold λ chosen as obp's ``SwitchDoublyRobustTuning`` chooses it.

        V̂_λ = (1/n) Σ_i [ ρ̂_π(x_i) + 1{w_i ≤ λ} w_i (r_i − ρ̂_{a_i}(x_i)) ]

    (:class:`SwitchDR` at τ = λ, Wang, Agarwal & Dudík 2017), λ chosen among ``lambdas`` by obp's
    ``"slope"`` or ``"mse"`` rule over honest variances (``Shrinkage``) — where a bare ``SwitchDR()`` uses
    SLOPE over its own grid.

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
    threshold: ClassVar[str] = "switch"

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
    ``DoublyRobustWithShrinkageTuning`` rule (``"slope"`` by default, over honest variances; ``Shrinkage``).

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
    threshold: ClassVar[str] = ""  # a smooth weight
    example: ClassVar[str] = "DRos(lambda_=10) or DRos(lambdas=[10, 100, inf], tuning_method=mse)"

    def shrink(self, w: np.ndarray, lam: float) -> np.ndarray:
        """ŵ_λ(w) = λ w / (w² + λ) (Su et al. 2020, optimistic shrinkage; w at λ = ∞)."""
        if lam == math.inf:
            return w
        denominator = w ** 2 + lam
        out: np.ndarray = np.divide(lam * w, denominator, out=np.zeros_like(w), where=denominator != 0)
        return out
