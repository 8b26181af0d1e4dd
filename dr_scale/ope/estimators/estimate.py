"""An estimate with its standard error and its intervals (:class:`Estimate`), and the parameter check the
estimators share (:func:`checked`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtri  # the normal quantile (scipy.stats is slow to import)

from dr_scale.core.errors import ParameterError
from dr_scale.ope.intervals import CS_OPTIMAL_N, Summary, cs_rho, cs_threshold, el_interval

#: The intervals :meth:`Estimate.ci` gives: Wald's, or the empirical-likelihood one.
INTERVAL_METHODS = ("normal", "el")


@dataclass(frozen=True)
class Estimate:
    """An estimate of a policy's value with its standard error, and its intervals.

    ``value`` is V̂ = g(t̄), a function of the means of the estimator's per-row terms, and ``stderr``
    the delta method's √(∇gᵀ Σ̂ ∇g / n) (:class:`Estimator`). :meth:`ci` gives a (1 − α) interval at one
    sample size — Wald's, or the empirical-likelihood one (Karampatziakis, Mineiro & Ramdas 2020) —
    and :meth:`cs` a confidence sequence valid at every sample size at once (Waudby-Smith et al. 2021).

    Parameters
    ----------
    value : float
        The estimate V̂ (NaN when undefined, e.g. SNIPS when π never takes a logged action).
    stderr : float
        Its standard error.
    n : int
        The rows it rests on.
    summary : Summary or None
        What the empirical-likelihood interval needs (:class:`~dr_scale.ope.intervals.Summary`);
        None for a difference of two values.
    chosen : dict
        The parameters a tuned estimator chose (e.g. SwitchDR's τ), by name.
    bounds : tuple of float or None
        The range the value lies in, [min r, max r] of the log's rewards ([min r − max r, max r − min r] for a
        difference); :meth:`projected` projects the value and the intervals into it. None: unbounded.
    model_stderr : float or None
        The reward model's standard error (the cross-fitting fold models' grouped jackknife,
        :func:`fold_jackknife`), added to ``stderr`` in quadrature by the intervals; None where it is not known.
    guarantee : bool
        Whether the interval has an asymptotic coverage guarantee (a central limit theorem under correct
        propensities: IPS, DR, SNIPS, SNDR …); False for the model-based and shrunk estimators (docs/estimators.md).
    model_based : bool
        Whether the value rests on the reward model alone (DM: :attr:`Estimator.model_based`).
    tuning : str or None
        Why a tuned estimator chose its parameter, in words.

    See Also
    --------
    Estimator.estimate : Makes one from a log's arrays.

    Examples
    --------
    >>> from dr_scale.ope.estimators import DoublyRobust
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = DoublyRobust().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4), est.n
    (0.7881, 0.043, 2000)
    >>> [round(float(x), 4) for x in est.ci(0.05)]  # value ± 1.96 stderr
    [0.7039, 0.8724]
    >>> [round(x, 4) for x in est.ci(0.05, method="el")]  # reaches toward weights not seen yet
    [0.5233, 0.8835]
    >>> [round(x, 4) for x in est.cs(0.05, method="normal")]  # valid on every day of a growing log
    [0.6435, 0.9327]
    """

    value: float
    stderr: float
    n: int
    summary: Summary | None = field(default=None, compare=False, repr=False)
    chosen: dict = field(default_factory=dict, compare=False)
    bounds: tuple[float, float] | None = field(default=None, compare=False, repr=False)
    model_stderr: float | None = field(default=None, compare=False, repr=False)
    guarantee: bool = field(default=True, compare=False, repr=False)
    model_based: bool = field(default=False, compare=False, repr=False)
    tuning: str | None = field(default=None, compare=False, repr=False)

    @property
    def total_stderr(self) -> float:
        """√(stderr² + model_stderr²): the rows' and the reward model's standard errors in quadrature."""
        if self.model_stderr is None:
            return self.stderr
        return math.sqrt(self.stderr ** 2 + self.model_stderr ** 2)

    def _widened(self, lo: float, hi: float, z2: float) -> tuple[float, float]:
        """(lo, hi) with each half-width h (from the value) widened to √(h² + z² model_stderr²)."""
        if not self.model_stderr:
            return lo, hi
        extra = z2 * self.model_stderr ** 2
        return (self.value - math.sqrt((self.value - lo) ** 2 + extra),
                self.value + math.sqrt((hi - self.value) ** 2 + extra))

    def projected(self, alpha: float = 0.05, method: str = "normal") -> Projected:
        """The value, the (1 − α) interval and confidence sequence projected into :attr:`bounds`.

        The projection onto [a, b] = ``bounds`` clips the value, min(max(V̂, a), b), and each end of an interval
        the same way, which intersects the interval with [a, b] (an interval wholly outside becomes the nearest
        end point). Every value of the policy lies in [a, b], so the projected interval covers it whenever the
        raw one does, and the projected point is never farther from it. The raw numbers are kept.

        Examples
        --------
        >>> e = Estimate(-0.026, 0.035, 1000, bounds=(0.0, 1.0))
        >>> shown = e.projected(0.05)
        >>> shown.value, [round(x, 3) for x in shown.ci], shown.moved
        (0.0, [0.0, 0.043], True)
        >>> [round(x, 3) for x in shown.raw_ci]
        [-0.095, 0.043]
        """
        lo, hi = self.ci(alpha, method)
        ci, cs = (float(lo), float(hi)), self.cs(alpha, method=method)
        if self.bounds is None:
            return Projected(self.value, ci, cs, self.value, ci, cs)
        a, b = self.bounds

        def clip(x: float) -> float:
            """x projected onto [a, b] (NaN stays NaN)."""
            return x if math.isnan(x) else min(max(float(x), a), b)

        return Projected(clip(self.value), (clip(ci[0]), clip(ci[1])), (clip(cs[0]), clip(cs[1])),
                         self.value, ci, cs)

    def ci(self, alpha: float = 0.05, method: str = "normal") -> tuple[float, float]:
        """A (1 − α) confidence interval.

        ``"normal"``: value ± z_{1−α/2} · stderr (Wald). ``"el"``: the empirical-likelihood
        interval of :func:`dr_scale.ope.intervals.el_interval`, which widens toward values a
        heavy-tailed weight distribution has not shown yet. It is Karampatziakis, Mineiro & Ramdas
        (2020)'s construction with the Euclidean (Cressie–Read λ = −2) divergence: the values v with

            min_Q {T(Q) : E_Q[w] = 1, E_Q[y] = v} − T_min ≤ F⁻¹_{1,n}(1 − α),

        Q over the n rows (weight w, per-row term y) plus one unobserved row of weight 0 or of the
        largest weight seen; T is quadratic in v, so each end is a closed form from the moments in
        ``summary``. The level is raised, if needed, to reach the estimate, so the interval contains it.

        Parameters
        ----------
        alpha : float
            The level α, in (0, 1).
        method : str
            ``"normal"`` or ``"el"``.

        Returns
        -------
        tuple of float
            (low, high); NaNs for an ``"el"`` interval from fewer than 2 rows.

        Raises
        ------
        ValueError
            ``"el"`` for an estimate without a ``summary`` (a difference of two values).

        Examples
        --------
        >>> [round(float(x), 4) for x in Estimate(0.5, 0.1, 100).ci(0.05)]
        [0.304, 0.696]
        """
        alpha = checked("Alpha", "alpha", alpha)
        if method == "normal":
            z = ndtri(1 - alpha / 2)
            return (self.value - z * self.total_stderr, self.value + z * self.total_stderr)
        if method != "el":
            raise ParameterError(f"interval `method` must be one of {', '.join(INTERVAL_METHODS)}, got {method!r}")
        if self.summary is None:
            raise ParameterError("`method` \"el\": this estimate has no empirical-likelihood interval")
        if self.n < 2:
            return (float("nan"), float("nan"))
        return self._widened(*el_interval(self.summary, alpha), float(ndtri(1 - alpha / 2)) ** 2)

    def cs(self, alpha: float = 0.05, rho: float | None = None, method: str = "el") -> tuple[float, float]:
        """A (1 − α) asymptotic confidence sequence: valid at every sample size at once.

        Computed on a growing log after every day, the sequence contains the value on *all*
        days with probability ≈ 1 − α, where a fixed-time interval checked daily misses on
        some day far more often. Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2021),
        Theorem 2.2: the normal interval's z² becomes, at sample size n,

            c_n² = 2 (n ρ² + 1) / (n ρ²) · log(√(n ρ² + 1) / α)

        (:func:`dr_scale.ope.intervals.cs_threshold`). ``"normal"``: value ± c_n · stderr, their
        sequence itself. ``"el"`` (default): the empirical-likelihood interval of :meth:`ci` with
        its threshold δ replaced by c_n² — the same boundary, plus the EL's unobserved row, which
        keeps it valid in heavy-tailed weight worlds where the normal one is not (a day's estimate
        that has not seen the largest weights yet; docs/estimators.md, "Confidence sequences").
        A difference (no EL summary) gets the normal one. ``rho`` > 0 sets the sample size where
        the sequence is tightest: the default :func:`~dr_scale.ope.intervals.cs_rho` tunes it
        for n = 10,000 rows (``CS_OPTIMAL_N``); it must not be chosen from the data monitored.

        Parameters
        ----------
        alpha : float
            The level α, in (0, 1): the chance that the sequence misses the value on any day.
        rho : float or None
            ρ > 0, the sample size where the sequence is tightest; None: tuned for n = 10,000.
        method : str
            ``"el"`` or ``"normal"``.

        Returns
        -------
        tuple of float
            (low, high); NaNs from fewer than 2 rows or an undefined standard error.

        Examples
        --------
        >>> from dr_scale.ope.estimators import DoublyRobust
        >>> from dr_scale.synthetic.finite_world import BanditWorld
        >>> log = BanditWorld.make(epsilon=0.3).sample(2000, seed=1)
        >>> est = DoublyRobust().estimate(**log)
        >>> lo, hi = est.cs(0.05, method="normal")
        >>> bool(lo < est.ci(0.05)[0] < est.value < est.ci(0.05)[1] < hi)
        True
        >>> lo, hi = est.cs(0.05)
        >>> bool(lo < est.ci(0.05, "el")[0] < est.value < est.ci(0.05, "el")[1] < hi)
        True
        """
        alpha = checked("Alpha", "alpha", alpha)
        rho = cs_rho(alpha, CS_OPTIMAL_N) if rho is None else checked("PositiveFinite", "rho", rho)
        if method not in INTERVAL_METHODS:
            raise ParameterError(f"interval `method` must be one of {', '.join(INTERVAL_METHODS)}, got {method!r}")
        if self.n < 2 or not np.isfinite(self.stderr):
            return (float("nan"), float("nan"))
        c2 = cs_threshold(self.n, alpha, rho)
        if method == "el" and self.summary is not None:
            lo, hi = self._widened(*el_interval(self.summary, alpha, c2), c2)
            return float(lo), float(hi)
        half = math.sqrt(c2) * float(self.total_stderr)
        return (float(self.value - half), float(self.value + half))


@dataclass(frozen=True)
class Projected:
    """An estimate as shown: the value and intervals projected into the rewards' range, and the raw ones
    (:meth:`Estimate.projected`)."""

    value: float
    ci: tuple[float, float]
    cs: tuple[float, float]
    raw_value: float
    raw_ci: tuple[float, float]
    raw_cs: tuple[float, float]

    @property
    def moved(self) -> bool:
        """Whether the projection changed the value or an interval's end (NaN compared as equal to NaN)."""
        return _changed((self.value, *self.ci, *self.cs), (self.raw_value, *self.raw_ci, *self.raw_cs))

    @property
    def ci_moved(self) -> bool:
        """Whether it changed the value or the confidence interval's ends (a table's columns; not the sequence)."""
        return _changed((self.value, *self.ci), (self.raw_value, *self.raw_ci))


def _changed(shown: tuple, raw: tuple) -> bool:
    """Whether any of ``shown`` differs from its ``raw`` (NaN equal to NaN)."""
    return any(not (x == y or (math.isnan(x) and math.isnan(y))) for x, y in zip(shown, raw, strict=True))


def fold_jackknife(values: np.ndarray) -> float:
    """The delete-a-group jackknife standard error of an estimate from its values under K fold models.

    Fold model j is fitted without the rows of fold j, so V̂_j, the estimate with every row predicted by model j,
    is the estimate with group j deleted from the model's fit; the grouped jackknife's variance (Efron & Stein
    1981; Shao & Tu 1995, Sec. 2.3) of the model's contribution is

        Var_J = (K − 1)/K · Σ_j (V̂_j − V̄)²,    V̄ = (1/K) Σ_j V̂_j.

    NaN for fewer than two finite values.

    >>> round(fold_jackknife(np.array([0.10, 0.12, 0.11])), 6)  # √(2/3 · 0.0002)
    0.011547
    """
    values = np.asarray(values, dtype=np.float64)
    k = values.size
    if k < 2 or not np.isfinite(values).all():
        return float("nan")
    return math.sqrt((k - 1) / k * float(np.sum((values - values.mean()) ** 2)))


def checked(rule: str, name: str, value: Any) -> Any:
    """``value`` of the parameter ``name`` checked by the shared rule ``rule`` of :mod:`dr_scale.io.config`
    (as ``--clip``, ``--tau`` and a policies file's keys are); pydantic is imported on first use only."""
    from dr_scale.io import config

    return config.check(getattr(config, rule), name, value)
