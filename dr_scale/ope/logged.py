"""The policy that wrote another log as a target (:class:`~dr_scale.policies.logged.LoggedPolicy`): its propensity
model fitted when the model form is chosen (:func:`fitted`), and what is printed beside its off-policy estimate
(:func:`logged_summary`): the check against its log's logged propensities and its on-policy value, per slot and
pooled, with the off-policy estimates' relative differences from it — "would B beat A", and how far off-policy
and on-policy agree.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dr_scale.core.numbers import estimate
from dr_scale.policies import Policy
from dr_scale.policies.logged import LoggedPolicy


def fitted(policy: Policy) -> Policy:
    """``policy``, with a :class:`LoggedPolicy` of the model form given its propensity model, fitted once on its
    log (:func:`~dr_scale.propensity.fitting.fit_propensity_model`, λ by the out-of-fold log loss; the full-data
    model predicts the evaluated rows, none of which it saw)."""
    if isinstance(policy, LoggedPolicy) and policy.chosen == "model" and policy.model is None:
        from dr_scale.propensity.fitting import fit_propensity_model

        policy.model = fit_propensity_model(policy.url)
    return policy


def logged_summary(policy: LoggedPolicy, estimates: dict[str, Any] | None = None,
                   alpha: float = 0.05) -> dict[str, Any]:
    """What is printed beside the estimate of ``policy`` (JSON-ready): its form and why, the check against the
    other log's logged propensities, its on-policy value (pooled and per slot), and each off-policy ``estimates``'
    (name → :class:`~dr_scale.ope.estimators.Estimate`) relative difference from the pooled on-policy value.

    The check: mean over the other log's rows of |π̂(a_i | slot_i) − p̄(slot_i, a_i)| with p̄ the mean logged
    propensity of the row's (slot, action) (frequencies form; :class:`~dr_scale.policies.logged.LoggedStats`), and
    per slot Σ_a p̄(slot, a), 1 when the logged propensities are a distribution over the actions at each slot.
    """
    stats = policy.stats
    out: dict[str, Any] = {"policy": str(policy), "form": policy.chosen, "rows": stats.rows,
                           "rule": "as given" if policy.form != "auto" else (
                               "its logged propensity of each (slot, action) is one number" if policy.chosen ==
                               "frequencies" else "its logged propensities of a (slot, action) differ")}
    seen = stats.count > 0
    if seen.any() and np.isfinite(stats.p_sum[seen]).all():
        p_bar = stats.mean_propensity()
        out["logged_propensity_sums"] = [float(x) for x in p_bar.sum(axis=1)]
        if policy.chosen == "frequencies":
            gap = np.abs(stats.frequencies() - p_bar)
            out["mean_abs_difference"] = float((stats.count * gap).sum() / stats.rows)
    mean, se, low, high = stats.pooled_value(alpha)
    out["on_policy"] = {"value": mean, "stderr": se, "ci": [low, high], "n": stats.rows}
    means, ses, lows, highs = stats.value(alpha)
    counts = stats.count.sum(axis=1)
    if len(means) > 1:
        out["on_policy_slots"] = {str(s): {"value": float(means[s]), "stderr": float(ses[s]),
                                           "ci": [float(lows[s]), float(highs[s])], "n": int(counts[s])}
                                  for s in range(len(means))}
    if estimates:
        out["relative_difference"] = {name: (e.value - mean) / mean if mean else float("nan")
                                      for name, e in estimates.items()}
    return out


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """:func:`logged_summary` in words, one fact a line."""
    what = ("its per-slot action frequencies" if summary["form"] == "frequencies"
            else "the propensity model fitted on it")
    lines = [f"{summary['policy']}: the policy that wrote that log, as {what} over its {summary['rows']:,} rows "
             f"({summary['rule']})"]
    if "logged_propensity_sums" in summary:
        sums = ", ".join(f"{x:.3g}" for x in summary["logged_propensity_sums"])
        off = any(abs(x - 1) > 1e-3 for x in summary["logged_propensity_sums"])
        check = (f"mean |π̂ − p̄| = {summary['mean_abs_difference']:.3g}; " if "mean_abs_difference" in summary
                 else "")
        lines.append(f"  against its logged propensities: {check}Σ_a p̄(a | slot) per slot = {sums}"
                     + (" (not 1: its logged propensities are not a distribution over the actions at a slot, "
                        "and cannot serve as π directly)" if off else ""))
    def value(v: dict[str, Any]) -> str:
        """An on-policy value with its error and interval, rounded to its error's second digit."""
        text, se, ci = estimate(v["value"], v["stderr"], tuple(v["ci"]))
        return f"{text} ± {se}, CI {ci}, n = {v['n']:,}"

    lines.append(f"  its on-policy value (mean reward): {value(summary['on_policy'])}")
    for s, v in summary.get("on_policy_slots", {}).items():
        lines.append(f"    slot {s}: {value(v)}")
    if summary.get("relative_difference"):
        diffs = ", ".join(f"{name} {d:+.1%}" for name, d in summary["relative_difference"].items())
        lines.append(f"  off-policy − on-policy, relative: {diffs}")
    return lines
