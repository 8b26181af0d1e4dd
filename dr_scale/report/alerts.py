"""Support and drift alerts: per policy and day, the weights' diagnostics against thresholds and their own history.

Per candidate policy and day of a date-partitioned window (and over the whole window), from the
day's merged :class:`~dr_scale.ope.evaluation.PolicyState` — so a daily report computes them from its
cached per-partition states:

* ``ess_ratio`` — ESS / n, the share of its rows the weighted sample is worth (Kish);
* ``top_share`` — the share of the value Σ w|r| carried by the top 1% of the positive weights
  (:meth:`~dr_scale.ope.diagnostics.WeightStats.top_share`);
* ``pareto_k`` — the Pareto k̂ of the weights' tail, the PSIS diagnostic
  (:func:`~dr_scale.ope.diagnostics.pareto_k`; Vehtari et al. 2024: k̂ > 0.7, unreliable estimates);
* ``mean_weight`` and ``mean_weight_z`` — Σ w / n and its distance from 1 in standard errors,
  z = (w̄ − 1) / (s_w / √n). With the logged propensities right, E_μ[w] = Σ_a π(a|x) over the actions the
  logging policy μ takes, which is 1 exactly where μ covers π's actions; a logging policy that stops
  taking an action π takes pulls w̄ below 1 by π's mass there (Dudík, Langford & Li 2011, Sec. 3: DR is
  unbiased only where p > 0 wherever π > 0);
* ``unlogged_share`` — the share of π's probability mass on actions that day's log never took.

The **history** of a day is the merge of the states of up to ``history_days`` days before it (at least
``min_history_days``); ``change`` is the day's metric minus the history's. Alerts:

* ``support`` (a level crossed): |z| of the mean weight above ``max_weight_mean_z``, π's mass on unlogged
  actions above ``max_unlogged_share``, k̂ above ``max_pareto_k``, the top 1% carrying more than
  ``max_top_share`` of the value;
* ``drift`` (a change against the day's own history): ESS / n below (1 − ``max_ess_ratio_drop``) × the
  history's, the top-1% share up by more than ``max_top_share_rise``, k̂ up by more than
  ``max_pareto_k_rise`` to above :data:`HEAVY_TAIL_K` (below it the tail has finite variance: a rise of a
  negative k̂ is no drift toward a heavy tail);
* ``verdict`` (over the window): an estimator's value is "no reliable estimate" — its weights fail a threshold
  of :meth:`~dr_scale.ope.diagnostics.WeightStats.unreliable` (rewarded matched rows, ESS, Pareto k̂;
  docs/estimators.md): one alert per threshold failed, naming the estimators.

The thresholds are the ``[alerts]`` table of the policies file (:class:`AlertSettings`, defaults below);
``fail_on = ["support"]`` (and/or ``"drift"``, ``"verdict"``) makes ``dr-scale report`` exit with status 4 after
writing a report that carries such an alert.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, cast

from pydantic import Field, model_validator

from dr_scale.io.config import Finite, Model, PositiveFinite, PositiveInt, Share
from dr_scale.ope.diagnostics import NO_RELIABLE_ESTIMATE, WeightStats
from dr_scale.outofcore.mergeable import merge_all

KINDS = ("support", "drift", "verdict")
AlertKind = Literal["support", "drift", "verdict"]
#: k̂ at or below this: the weights' distribution has a finite variance (Vehtari et al. 2024, Sec. 3); a drift
#: alert on k̂ needs the day's k̂ above it.
HEAVY_TAIL_K = 0.5
#: The metrics of a day, in the report's order.
METRICS = ("ess_ratio", "top_share", "pareto_k", "mean_weight", "mean_weight_z", "unlogged_share")
#: The metrics whose change against the history is reported.
CHANGED = ("ess_ratio", "top_share", "pareto_k", "mean_weight")


class AlertSettings(Model):
    """The ``[alerts]`` table of a policies file: the thresholds of the support and drift alerts."""

    max_weight_mean_z: PositiveFinite = 5.0
    max_unlogged_share: Share = 0.0
    max_pareto_k: Finite = 0.7
    max_top_share: Share = 0.5
    max_ess_ratio_drop: Share = 0.7
    max_top_share_rise: Share = 0.3
    max_pareto_k_rise: PositiveFinite = 0.5
    history_days: PositiveInt = 14
    min_history_days: PositiveInt = 3

    @model_validator(mode="after")
    def _history_fits(self) -> AlertSettings:
        if self.min_history_days > self.history_days:
            raise ValueError(f"min_history_days = {self.min_history_days} is above history_days = "
                             f"{self.history_days}: a history never reaches it and drift alerts could never fire")
        return self


FailOn = Annotated[list[AlertKind], Field(max_length=len(KINDS))]


def support_metrics(weights: WeightStats, coverage=None) -> dict:
    """The metrics of one state (module docstring); NaN where undefined (no rows, no reward, a short tail).

    Examples
    --------
    >>> import numpy as np
    >>> from dr_scale.ope.diagnostics import WeightStats
    >>> w = np.r_[np.full(500, 2.0), np.zeros(500)]  # π takes the logged action (p = 1/2) half the time
    >>> m = support_metrics(WeightStats.of(w, np.full(1000, 0.5), np.ones(1000)))
    >>> m["ess_ratio"], m["mean_weight"], m["mean_weight_z"]
    (0.5, 1.0, 0.0)
    """
    n = weights.n
    mean = weights.sum_w / n if n else math.nan
    var = (weights.sum_w2 / n - mean * mean) * n / (n - 1) if n > 1 else math.nan
    se = math.sqrt(max(var, 0.0) / n) if n > 1 else math.nan
    if se > 0:
        z = (mean - 1.0) / se
    elif n > 1:  # every weight equal: exactly 1 (z = 0) or not (the log no longer supports π: infinitely far)
        z = 0.0 if mean == 1.0 else math.copysign(math.inf, mean - 1.0)
    else:
        z = math.nan
    return {"ess_ratio": weights.ess_ratio, "top_share": weights.top_share(), "pareto_k": weights.pareto_k,
            "mean_weight": mean, "mean_weight_z": z,
            "unlogged_share": coverage.unlogged_share if coverage is not None else math.nan}


def _crossed(value: float, threshold: float, above: bool = True) -> bool:
    return math.isfinite(value) and (value > threshold if above else value < threshold)


def level_alerts(m: dict, s: AlertSettings, estimated: bool = False) -> list[dict]:
    """The ``support`` alerts of one day's (or the window's) metrics ``m``. ``estimated``: the weights divide by
    estimated propensities p̂, whose error lifts w̄ above 1 (E[1/p̂] > 1/p, Jensen) with no logged propensity to
    blame — the mean weight is then tested below 1 only (π's mass on actions the log no longer takes)."""
    out = []
    z = m["mean_weight_z"]
    if not math.isnan(z) and abs(z) > s.max_weight_mean_z and not (estimated and z > 0):
        side = "below" if z < 0 else "above"
        why = ("the log no longer takes actions the policy takes" if z < 0
               else "the logged propensities are too small for the actions logged")
        out.append(_alert("support", "mean_weight_z", z, s.max_weight_mean_z,
                          f"mean weight Σw/n = {m['mean_weight']:.3g}, {abs(z):.3g} standard errors {side} 1 "
                          f"(limit {s.max_weight_mean_z:g}): {why}"))
    if _crossed(m["unlogged_share"], s.max_unlogged_share):
        out.append(_alert("support", "unlogged_share", m["unlogged_share"], s.max_unlogged_share,
                          f"{m['unlogged_share']:.1%} of the policy's probability mass is on actions the log did not "
                          f"take (limit {s.max_unlogged_share:.1%})"))
    if _crossed(m["pareto_k"], s.max_pareto_k):
        out.append(_alert("support", "pareto_k", m["pareto_k"], s.max_pareto_k,
                          f"Pareto k̂ of the weights' tail {m['pareto_k']:.2f} > {s.max_pareto_k:g}: IPS-type estimates "
                          "are unreliable"))
    if _crossed(m["top_share"], s.max_top_share):
        out.append(_alert("support", "top_share", m["top_share"], s.max_top_share,
                          f"the top 1% of the positive weights carry {m['top_share']:.1%} of the value (limit "
                          f"{s.max_top_share:.0%})"))
    return out


def drift_alerts(m: dict, h: dict, s: AlertSettings) -> list[dict]:
    """The ``drift`` alerts of a day's metrics ``m`` against its history's ``h``."""
    out = []
    if math.isfinite(m["ess_ratio"]) and h["ess_ratio"] > 0 and m["ess_ratio"] < (1 - s.max_ess_ratio_drop) * h[
            "ess_ratio"]:
        out.append(_alert("drift", "ess_ratio", m["ess_ratio"], (1 - s.max_ess_ratio_drop) * h["ess_ratio"],
                          f"ESS/n {m['ess_ratio']:.3g}, down {1 - m['ess_ratio'] / h['ess_ratio']:.0%} from "
                          f"{h['ess_ratio']:.3g} in its history (limit {s.max_ess_ratio_drop:.0%})"))
    if _crossed(m["top_share"] - h["top_share"], s.max_top_share_rise):
        out.append(_alert("drift", "top_share", m["top_share"], h["top_share"] + s.max_top_share_rise,
                          f"the top 1% of the positive weights carry {m['top_share']:.1%} of the value, up from "
                          f"{h['top_share']:.1%} in its history (limit +{s.max_top_share_rise:.0%})"))
    if _crossed(m["pareto_k"], HEAVY_TAIL_K) and _crossed(m["pareto_k"] - h["pareto_k"], s.max_pareto_k_rise):
        out.append(_alert("drift", "pareto_k", m["pareto_k"], h["pareto_k"] + s.max_pareto_k_rise,
                          f"Pareto k̂ {m['pareto_k']:.2f}, up from {h['pareto_k']:.2f} in its history (limit "
                          f"+{s.max_pareto_k_rise:g})"))
    return out


def verdict_alerts(result) -> list[dict]:
    """The ``verdict`` alerts of a policy's :class:`~dr_scale.ope.evaluation.EvaluationResult` over the window: per
    threshold its weights fail (:meth:`~dr_scale.ope.diagnostics.WeightStats.failed_thresholds`), one alert naming
    the estimators that are then "no reliable estimate" (MIPS's marginal weights apart from w)."""
    groups: dict[int, list[str]] = {}
    for name in result.estimates:
        if result.verdict_of(name) == NO_RELIABLE_ESTIMATE:
            groups.setdefault(id(result.weights_of(name)), []).append(name)
    out = []
    for names in groups.values():
        weights = result.weights_of(names[0])
        failed = zip(weights.failed_thresholds(result.min_support), weights.unreliable(result.min_support),
                     strict=True)
        out += [_alert("verdict", metric, value, threshold, f"no reliable estimate by {', '.join(names)}: {why}")
                for (metric, value, threshold), why in failed]
    return out


def _alert(kind: str, metric: str, value: float, threshold: float, message: str) -> dict:
    return {"kind": kind, "metric": metric, "value": value, "threshold": threshold, "message": message}


def support_by_day(by_day: dict, settings: AlertSettings, estimated: bool = False) -> list[dict]:
    """Per day (``by_day``: date → PolicyState, in date order): its metrics, its history's, the change, the alerts.

    The history of day i is the merge of days max(0, i − history_days) … i − 1 (a merge of their cached
    states), used once it has at least ``min_history_days`` days.
    """
    days = list(by_day)
    out = []
    for i, day in enumerate(days):
        state = by_day[day]
        m = support_metrics(state.weights, state.coverage)
        before = days[max(0, i - settings.history_days):i]
        entry = {"date": day, **m, "history_days": len(before), "history": None, "change": None}
        alerts = level_alerts(m, settings, estimated)
        if len(before) >= settings.min_history_days:
            h = support_metrics(cast(WeightStats, merge_all(by_day[d].weights for d in before)))
            entry["history"] = {k: h[k] for k in CHANGED}
            entry["change"] = {k: m[k] - h[k] for k in CHANGED}
            alerts += drift_alerts(m, h, settings)
        entry["alerts"] = alerts
        out.append(entry)
    return out


def window_support(total, settings: AlertSettings, estimated: bool = False) -> dict:
    """The window's metrics and its ``support`` alerts (no history: the window is the whole log read)."""
    m = support_metrics(total.weights, total.coverage)
    return {**m, "alerts": level_alerts(m, settings, estimated)}
