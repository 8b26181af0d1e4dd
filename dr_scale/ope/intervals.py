"""Empirical-likelihood intervals from second moments (Euclidean likelihood, Cressie–Read λ = −2).

Karampatziakis, Mineiro & Ramdas (*Empirical Likelihood for Contextual Bandits*, NeurIPS
2020) build an interval for a policy's value from the empirical likelihood of the
distribution Q of (w, y) — importance weight and per-row term — under the one
constraint every true distribution meets, E_Q[w] = 1. This module uses the member of
the Cressie–Read family whose dual is quadratic (the divergence T(Q) = Σ_j (m Q_j − 1)²
over m support points, the ``cressieread`` intervals of Vowpal Wabbit's
``vw-estimators``): then everything the interval needs is n, the means and the
covariance of (y, w) and the ranges of a few bounded quantities — a mergeable
:class:`~dr_scale.ope.moments.Moments` state. The derivation is in docs/estimators.md
§ "Empirical-likelihood intervals".

The interval is {v : min_Q {T(Q) : E_Q[w] = 1, E_Q[y] = v} − T_min ≤ F⁻¹_{1,n}(1 − α)}
over Q supported on the n rows plus one unobserved row (w_f, y_f), which lets the
interval reach values a heavy-tailed weight distribution has not shown yet (the
missing mass 1 − w̄): w_f = 0 with y_f in ``zero_range``, or w_f = W, the largest
weight seen, with y_f in ``top_range`` (vw-estimators puts this row at w → ∞ unless
told the true largest weight; W is the data's own estimate of it). For one such row,
with m = n + 1 points, means (w̄, ȳ) and biased covariance S of (w, y) over them, the
minimum is the quadratic

    T(v) = T_f + m (v − v*)² / S_yy·w,   T_f = m (1 − w̄)² / S_ww,
    v* = ȳ + (S_wy / S_ww)(1 − w̄),       S_yy·w = S_yy − S_wy² / S_ww,

so each end of the interval is a closed form (no solver): v* ∓ √((δ − T_f + T_min) S_yy·w / m).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import fdtri  # F quantile (scipy.stats is slow to import)


@dataclass(frozen=True)
class Summary:
    """What an empirical-likelihood interval needs: moments of (y, w) over n rows and ranges.

    ``cov`` entries are biased (1/n) covariances of (y, w); for an estimator without the
    weight constraint (a plain mean of y) ``weighted`` is False and only y's are used.
    ``zero_range`` bounds y at an unobserved row of weight 0, ``top_range`` at one of
    weight ``max_weight`` (the largest weight seen); ``value_range`` bounds the value.
    """

    n: int
    mean_y: float
    mean_w: float
    var_y: float
    cov_yw: float
    var_w: float
    max_weight: float
    zero_range: tuple[float, float]
    top_range: tuple[float, float]
    value_range: tuple[float, float]
    weighted: bool = True
    estimate: float = math.nan  # the estimator's own statistic v̂, which the interval contains


#: A closed range [lo, hi].
Range = tuple[float, float]


def _floats(pair: Sequence[float]) -> Range:
    lo, hi = pair
    return float(lo), float(hi)


def threshold(alpha: float, n: int) -> float:
    """δ = F⁻¹_{1,n}(1 − α): the χ²₁ quantile with a small-sample correction (as vw-estimators)."""
    return float(fdtri(1, n, 1 - alpha))


def with_row(s: Summary, w_f: float, y_f: float) -> tuple[float, float, float]:
    """(T_f, v*, S_yy·w / m) over the n rows and one unobserved row (w_f, y_f), m = n + 1."""
    n, m = s.n, s.n + 1
    e_w, e_y = w_f - s.mean_w, y_f - s.mean_y
    mean_w = s.mean_w + e_w / m
    mean_y = s.mean_y + e_y / m
    # Covariance of the mixture: (n/m) S_n + (n/m²) e eᵀ.
    s_ww = n / m * s.var_w + n / m**2 * e_w * e_w
    s_wy = n / m * s.cov_yw + n / m**2 * e_w * e_y
    s_yy = n / m * s.var_y + n / m**2 * e_y * e_y
    if not s_ww > 0:
        return math.inf, mean_y, 0.0
    return m * (1 - mean_w) ** 2 / s_ww, mean_y + s_wy / s_ww * (1 - mean_w), max(s_yy - s_wy**2 / s_ww, 0.0) / m


def el_interval(s: Summary, alpha: float = 0.05, delta: float | None = None) -> tuple[float, float]:
    """The (1 − α) Euclidean-likelihood interval of the module docstring, at a level that reaches the estimate.

    T(v) = min_c T_c(v) over four unobserved rows c — weight 0 or ``max_weight``, y at either
    end of its range — with T_c(v) = T_c + m (v − v*_c)² / S_yy·w,c; the EL interval is
    {v : T(v) ≤ L}, L = T_min + δ, T_min the smallest T_c: each end is the farthest
    v*_c ∓ √((L − T_c) S_yy·w,c / m) over the rows with T_c ≤ L. The estimator's own
    statistic v̂ (``s.estimate``: IPS's mean of w r, SNIPS's ratio, …) ignores the
    constraint E[w] = 1 and may lie outside that set; L is then T(v̂), the level set
    through v̂ — the same construction, never narrower. The interval is cut to
    ``value_range`` widened to hold v̂ (the value lies in the rewards' range; a statistic
    such as DR with a model that predicts outside it may not). So every interval contains
    its estimate (docs/estimators.md, "One interval per family"). ``delta`` replaces the threshold
    δ = F⁻¹_{1,n}(1 − α) (a confidence sequence's is :func:`cs_threshold`).
    """
    delta = threshold(alpha, s.n) if delta is None else delta
    # No estimate (an undefined ratio, a Summary built without one): the interval of the EL region alone.
    v_hat = s.estimate if math.isfinite(s.estimate) else (s.mean_y if not s.weighted else None)
    lo_v, hi_v = s.value_range
    if v_hat is not None:
        lo_v, hi_v = min(lo_v, v_hat), max(hi_v, v_hat)
    if not s.weighted:  # a plain mean: T(v) = n (ȳ − v)² / S_yy, smallest at ȳ = v̂
        assert v_hat is not None  # a plain mean's statistic is ȳ at least
        half = math.sqrt(delta * max(s.var_y, 0.0) / s.n)
        return max(lo_v, min(v_hat, s.mean_y - half)), min(hi_v, max(v_hat, s.mean_y + half))
    rows = [with_row(s, w_f, y_f) for w_f, ys in ((0.0, s.zero_range), (s.max_weight, s.top_range)) for y_f in ys]
    rows = [row for row in rows if math.isfinite(row[0]) and math.isfinite(row[1])]
    if not rows:
        return lo_v, hi_v
    level = min(t for t, _, _ in rows) + delta  # T_f does not depend on y_f
    if v_hat is not None:
        level = max(level, min(_divergence(row, v_hat) for row in rows))
    reach = [(v, math.sqrt((level - t) * scale)) for t, v, scale in rows if t <= level]
    low, high = min(v - half for v, half in reach), max(v + half for v, half in reach)
    if v_hat is not None:  # T(v̂) ≤ L puts v̂ in [low, high]; min / max only absorb the square roots' rounding
        low, high = min(v_hat, low), max(v_hat, high)
    return max(lo_v, low), min(hi_v, high)


def _divergence(row: tuple[float, float, float], v: float) -> float:
    """T_c(v) = T_c + (v − v*_c)² / (S_yy·w,c / m) for one unobserved row c = (T_c, v*_c, S_yy·w,c / m)."""
    t, v_star, scale = row
    if scale > 0:
        return t + (v - v_star) ** 2 / scale
    return t if v == v_star else math.inf


def summary_of(n: int, mean: np.ndarray, cov: np.ndarray, max_weight: float, zero_range: Sequence[float],
               top_range: Sequence[float], value_range: Sequence[float], weighted: bool = True,
               estimate: float | None = None) -> Summary:
    """A :class:`Summary` from the mean and biased covariance of (y, w) (or of y alone).

    ``estimate`` is the estimator's statistic (default ȳ, that of a plain mean).
    """
    estimate = float(mean[0]) if estimate is None else float(estimate)
    if not weighted:
        return Summary(n, float(mean[0]), 1.0, float(cov[0, 0]), 0.0, 0.0, 1.0, (0.0, 0.0), (0.0, 0.0),
                       _floats(value_range), weighted=False, estimate=estimate)
    return Summary(n, float(mean[0]), float(mean[1]), float(cov[0, 0]), float(cov[0, 1]), float(cov[1, 1]),
                   float(max_weight), _floats(zero_range), _floats(top_range), _floats(value_range), estimate=estimate)


# -- confidence sequences ------------------------------------------------------------------
#: The sample size at which a confidence sequence is tightest unless told otherwise (``rho`` is tuned for it).
CS_OPTIMAL_N = 10_000


def cs_rho(alpha: float, n_opt: float = CS_OPTIMAL_N) -> float:
    """ρ of the asymptotic confidence sequence that minimises its width at n = ``n_opt``.

    Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2021), *Time-uniform central limit theory
    and asymptotic confidence sequences*: the ρ minimising the width there (approximately),

        ρ = √((−2 log α + log(−2 log α + 1)) / n_opt).

    >>> round(cs_rho(0.05, 10_000), 5)
    0.02817
    """
    two_log = -2.0 * math.log(alpha)
    return math.sqrt((two_log + math.log(two_log + 1.0)) / n_opt)


def cs_threshold(n: int, alpha: float, rho: float) -> float:
    """The squared multiplier of the asymptotic confidence sequence at n: 2 (n ρ² + 1) / (n ρ²) · log(√(n ρ² + 1) / α).

    The sequence's half-width is √(this · σ̂² / n) (:func:`cs_half_width`), where a fixed-time
    interval's is √(z² σ̂² / n): this plays the role of z² — or of the EL threshold δ.
    """
    x = n * rho * rho
    return 2.0 * (x + 1.0) / x * math.log(math.sqrt(x + 1.0) / alpha)


def cs_half_width(n: int, sigma: float, alpha: float, rho: float) -> float:
    """Half-width of the two-sided (1 − α) asymptotic confidence sequence at sample size n.

    Waudby-Smith et al. (2021), Theorem 2.2 (the Gaussian-mixture boundary of Robbins): with σ̂
    the standard deviation of the per-row (linearised) terms,

        μ̂_n ± σ̂ √( 2 (n ρ² + 1) / (n² ρ²) · log( √(n ρ² + 1) / α ) )

    covers the value at every n at once with probability → 1 − α (time-uniform, so it stays
    valid when it is looked at after every day of a growing log and the look stops anywhere).

    >>> round(cs_half_width(10_000, 1.0, 0.05, cs_rho(0.05, 10_000)), 5)  # 1.55 × 1.96 / √n
    0.03035
    """
    x = n * rho * rho
    return sigma * math.sqrt(2.0 * (x + 1.0) / (n * n * rho * rho) * math.log(math.sqrt(x + 1.0) / alpha))
