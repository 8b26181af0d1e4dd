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


def el_interval(s: Summary, alpha: float = 0.05) -> tuple[float, float]:
    """The (1 − α) Euclidean-likelihood interval (module docstring), clipped to ``value_range``.

    Each end is the farthest v* ∓ √((δ − T_f + T_min) S_yy·w / m) over the two unobserved
    rows (weight 0 and ``max_weight``, y at that end of its range) whose T_f ≤ T_min + δ,
    T_min the smaller T_f of the two.
    """
    delta = threshold(alpha, s.n)
    lo_v, hi_v = s.value_range
    if not s.weighted:  # a plain mean: T(v) = n (ȳ − v)² / S_yy
        half = math.sqrt(delta * max(s.var_y, 0.0) / s.n)
        return max(lo_v, s.mean_y - half), min(hi_v, s.mean_y + half)
    fakes = [[with_row(s, 0.0, s.zero_range[side]), with_row(s, s.max_weight, s.top_range[side])] for side in (0, 1)]
    t_min = min(t for t, _, _ in fakes[0])  # T_f does not depend on y_f
    bounds = []
    for side, sign in ((0, -1), (1, 1)):
        ends = [v + sign * math.sqrt((delta + t_min - t) * scale)
                for t, v, scale in fakes[side] if t <= t_min + delta and math.isfinite(v)]
        end = (max(ends) if sign > 0 else min(ends)) if ends else (hi_v if sign > 0 else lo_v)
        bounds.append(min(hi_v, max(lo_v, end)))
    return bounds[0], bounds[1]


def summary_of(n: int, mean: np.ndarray, cov: np.ndarray, max_weight: float, zero_range, top_range, value_range,
               weighted: bool = True) -> Summary:
    """A :class:`Summary` from the mean and biased covariance of (y, w) (or of y alone)."""
    floats = (lambda pair: tuple(map(float, pair)))
    if not weighted:
        return Summary(n, float(mean[0]), 1.0, float(cov[0, 0]), 0.0, 0.0, 1.0, (0.0, 0.0), (0.0, 0.0),
                       floats(value_range), weighted=False)
    return Summary(n, float(mean[0]), float(mean[1]), float(cov[0, 0]), float(cov[0, 1]), float(cov[1, 1]),
                   float(max_weight), floats(zero_range), floats(top_range), floats(value_range))
