"""The report: ``report.json`` (versioned schema), ``report.md`` and a self-contained ``report.html``.

``report.json`` (``"schema": "dr-scale/report"``, ``"schema_version": 1``) holds, per
candidate policy, every estimator's value, standard error and interval (``"interval"``:
normal or el) over the window, its paired difference from the logging policy
(``difference``), the weight diagnostics (ESS, ESS/n, max and quantiles of the weights, share of
tiny propensities, the logging policy's on-policy value, the overlap verdict), the
weight histogram (counts over :data:`dr_scale.ope.diagnostics.WEIGHT_EDGES`) and the same
estimates per day; the comparisons (each candidate against the logging policy and
the best other candidate, by the primary estimator, paired); plus the window, every partition with its
rows and whether it was read or taken from the cache, and the bad or skipped partitions with their errors.
Every estimate carries ``cs``, its confidence sequence, ``insufficient_data`` and ``verdict`` ("reliable", "no
reliable estimate" where its weights fail a documented threshold, "model-based" for DM: docs/estimators.md;
a policy's ``verdict_note`` says why); each day also has
``running`` (the estimates on the log up to that day) and ``cs`` (their confidence sequences by
estimator), the numbers to read when the report is looked at every day, and ``support``: the weights'
support and drift metrics against the day's history and the alerts raised (:mod:`dr_scale.report.alerts`),
gathered per policy (``alerts``) and for the report (``alerts``, with ``alert_settings`` and ``fail_on``).
Non-finite numbers are written as ``null``.

Overlap is **poor** when ESS / n < ``min_ess_ratio`` (default 0.1): the weighted
sample is worth less than a tenth of its rows, so IPS-type estimates rest on few
rows and their normal intervals are not to be trusted.

Publishing is all-or-nothing for a reader who starts from ``report.json``, the commit
marker: everything is rendered in memory first, then written with
:func:`dr_scale.io.atomic.atomic_write_all` — every file to a temporary name, then renamed:
the plots under content-addressed names (``plots/<kind>-<sha>.png``, so an old
``report.md`` never points at a new plot), then ``report.md``, ``report.html`` and last
``report.json``, whose ``files`` map gives each file's sha256. A failure or Ctrl-C before
the renames leaves the previous report untouched and no temporary file; Ctrl-C during
the renames takes effect after the last one (the new report is complete). Only a kill
(SIGKILL, power loss) between two renames can leave a new ``report.md`` / ``report.html``
beside the previous ``report.json`` — whose ``files`` checksums then tell them apart — and
temporary files, which the next run removes.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import html
import math
import posixpath
import re
from typing import overload

from dr_scale.core.numbers import estimate, number, percent
from dr_scale.io import strict_json
from dr_scale.io.atomic import atomic_write_all, remove_temporaries, url_to_fs
from dr_scale.io.strict_json import finite
from dr_scale.ope.diagnostics import (
    DEFAULT_MAX_PARETO_K,
    DEFAULT_MIN_ESS,
    MODEL_BASED,
    NO_RELIABLE_ESTIMATE,
    WEIGHT_EDGES,
)
from dr_scale.ope.evaluation import LOGGING, estimate_dict
from dr_scale.ope.logged import logged_summary, summary_lines
from dr_scale.policies import LoggedPolicy
from dr_scale.report import plots
from dr_scale.report.alerts import AlertSettings, support_by_day, verdict_alerts, window_support

SCHEMA = "dr-scale/report"
SCHEMA_VERSION = 1


@overload
def redact(url: str) -> str:
    """A URL redacted is a str."""


@overload
def redact(url: None) -> None:
    """None stays None."""


def redact(url: str | None) -> str | None:
    """A URL without user:password@ or a ?query (which may hold a token)."""
    if url is None:
        return None
    return re.sub(r"(://)[^/@]*@", r"\1", url.split("?", 1)[0])


def policy_section(name, spec, evaluation, total, by_day, alpha, min_ess_ratio, interval="normal",
                   in_sample: str | None = None, alerts: AlertSettings | None = None,
                   primary: str | None = None) -> dict:
    """Estimates, diagnostics, warnings, V − V(logging), per-day estimates and support alerts of one policy.

    ``in_sample``: the days of the window the policy was learned on (its results are then labelled so);
    ``alerts``: the thresholds of the support and drift alerts (:mod:`dr_scale.report.alerts`); ``primary``:
    the report's primary estimator — when it is marginalized (MIPS, SNMIPS), the weight diagnostics, the
    support alerts and the policy's "insufficient data" flag are those of its own weights w(x, e)."""
    alerts = alerts or AlertSettings()
    full = evaluation.result(total)
    result = full.to_dict(alpha, interval)
    if primary in full.estimates:
        result["insufficient_data"] = full.insufficient_of(primary)
    seen, seen_by_day = total, by_day  # the states whose weights the diagnostics and support alerts read
    if primary is not None and primary in full.marginalized and total.marginal_weights is not None:
        seen, seen_by_day = total.marginal_view(), {d: s.marginal_view() for d, s in by_day.items()}
        result["diagnostics"] = {**seen.weights.summary(), **(seen.coverage.summary() if seen.coverage else {}),
                                 "weights_kind": "marginal"}  # MIPS's w(x, e) = p_π(e|x) / p_π₀(e|x)
    diag = result["diagnostics"]
    diag["ess_ratio"] = seen.weights.ess_ratio
    diag["overlap"] = "poor" if seen.weights.poor_overlap(min_ess_ratio) else "ok"
    coverage = total.coverage.warnings(total.weights.n_matched) if total.coverage is not None else []
    warnings = (seen.weights.warnings(min_ess_ratio, alerts.max_pareto_k) + coverage
                + [result[key] for key in ("support_note", "verdict_note") if key in result]
                + (total.propensity.warnings(bool(full.model_based)) if total.propensity is not None else []))
    if in_sample:
        warnings.insert(0, f"in-sample: this policy was learned on {in_sample} of the window; its estimates are "
                           "optimistic")
    days, running = [], None
    estimated = total.propensity is not None  # estimated propensities (:func:`~dr_scale.report.alerts.level_alerts`)
    support = support_by_day(seen_by_day, alerts, estimated)
    for (day, state), day_support in zip(by_day.items(), support, strict=True):  # in date order
        r = evaluation.result(state).to_dict(alpha, interval)
        running = state if running is None else running + state
        so_far_result = evaluation.result(running)  # its estimates only: no tail fit of the running weights
        so_far = {n: estimate_dict(e, alpha, interval, so_far_result.insufficient_of(n), so_far_result.verdict_of(n))
                  for n, e in so_far_result.estimates.items()}
        days.append({"date": day, "estimates": r["estimates"], "diagnostics": r["diagnostics"],
                     "running": so_far, "cs": {name: e["cs"] for name, e in so_far.items()},
                     "support": {k: v for k, v in day_support.items() if k != "date"}})
    window = window_support(seen, alerts, estimated)
    raised = ([{"date": None, **a} for a in verdict_alerts(full) + window["alerts"]]
              + [{"date": d["date"], **a} for d in support for a in d["alerts"]])
    warnings += [f"{a['kind']} alert{' on ' + a['date'] if a['date'] else ' over the window'}: {a['message']}"
                 for a in raised if not (a["date"] is None and (a["metric"] in ("unlogged_share", "pareto_k")
                                                                or a["kind"] == "verdict"))]  # said above
    return {"name": name, "spec": spec, "estimates": result["estimates"], "difference": result.get("difference", {}),
            "insufficient_data": result["insufficient_data"], "in_sample": bool(in_sample),
            "label": f"{name} (in-sample)" if in_sample else name, "diagnostics": diag, "warnings": warnings,
            "weight_histogram": seen.weights.histogram.tolist(), "by_day": days, "support": window,
            "alerts": raised, **{key: result[key] for key in ("verdict_note",) if key in result},
            **({"propensity": result["propensity_diagnostics"]} if "propensity_diagnostics" in result else {}),
            **({"logged": logged_summary(evaluation.policy, full.estimates, alpha)}
               if isinstance(evaluation.policy, LoggedPolicy) else {})}


def comparisons(states, evaluations: dict, pairs: dict, primary: str, alpha: float,
                interval: str = "normal") -> list[dict]:
    """Each candidate's V − V(logging) and V − V(best other candidate) by the primary estimator, paired; the best
    other candidate among those whose primary estimate is not "no reliable estimate"."""
    results = {n: evaluations[n].result(states.totals[n]) for n in evaluations if states.totals[n] is not None}
    value = {n: r.estimates[primary].value for n, r in results.items()}
    trusted = {n for n, r in results.items() if r.verdict_of(primary) != NO_RELIABLE_ESTIMATE}
    out = []
    for a in value:
        result = results[a]
        d = result.differences[primary]
        out.append({"policy": a, "baseline": LOGGING, "estimator": primary,
                    **estimate_dict(d, alpha, interval,
                                    result.insufficient_of(primary) or result.baseline_insufficient_of(primary),
                                    result.difference_verdict_of(primary))})
        others = [b for b in value if b != a and math.isfinite(value[b]) and b in trusted]
        if not others:
            continue
        b = max(others, key=lambda name: value[name])
        key, sign = (("pair", a, b), 1.0) if ("pair", a, b) in pairs else (("pair", b, a), -1.0)
        pair = pairs[key].result(states.totals[key])
        d = pair.differences[primary]
        shown = estimate_dict(d, alpha, interval, pair.insufficient_of(primary)
                              or pair.baseline_insufficient_of(primary), pair.difference_verdict_of(primary))
        for name in ("value", "raw_value"):  # V(a) − V(b) from the pair's difference, of either sign
            if name in shown:
                shown[name] = sign * shown[name]
        for name in ("ci", "cs", "raw_ci", "raw_cs"):
            if name in shown:
                shown[name] = sorted(sign * x for x in shown[name])
        out.append({"policy": a, "baseline": b, "estimator": primary, **shown})
    return out


def report_dict(states, evaluations: dict, policies_file, *, logs: str, window: dict, skip_bad: bool,
                generated_at: datetime.datetime | None = None, pairs: dict | None = None,
                in_sample: dict | None = None) -> dict:
    """The report as a JSON-able dict (schema in the module docstring)."""
    pf = policies_file
    failed = bool(states.bad) and (not skip_bad or not states.rows)  # skipping every partition is no report
    status = "failed" if failed else ("partial" if states.bad else "ok")
    computed = set(states.computed)
    partitions = [{"path": p.path, "date": p.day, "rows": states.rows.get(p.path),
                   "source": "bad" if p.path in states.bad else ("read" if p.path in computed else "cache")}
                  for p in states.parts]
    bad = [{"path": path, "error": error} for path, error in sorted(states.bad.items())]
    spec = {c.name: c.spec for c in pf.policies}
    primary = primary_estimator(pf.estimators)
    policies = [] if failed else [
        policy_section(name, spec[name], evaluations[name], states.totals[name], states.by_day[name], pf.alpha,
                       pf.min_ess_ratio, pf.interval, (in_sample or {}).get(name), pf.alerts, primary)
        for name in evaluations if states.totals[name] is not None
    ]
    compared = [] if failed else comparisons(states, evaluations, pairs or {}, primary, pf.alpha, pf.interval)
    for c in compared:
        c["in_sample_policies"] = [n for n in (c["policy"], c["baseline"]) if n in (in_sample or {})]
        c["in_sample"] = bool(c["in_sample_policies"])
    if status == "ok" and any(p["diagnostics"].get("unlogged_actions") or p["alerts"] for p in policies):
        status = "warning"  # a policy takes actions the log never took (its estimates rest on no logged data there),
        # or a support or drift alert was raised
    return finite({
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "generated_at": (generated_at or datetime.datetime.now(datetime.timezone.utc)).isoformat(timespec="seconds"),
        "status": status,
        "logs": redact(logs),
        "policies_file": redact(pf.source),
        "reward_model": redact(pf.reward_model),
        "reward_model_fit": model_fit(evaluations),
        "window": window,
        "alpha": pf.alpha,
        "interval": pf.interval,
        "min_ess_ratio": pf.min_ess_ratio,
        "min_support": pf.min_support,
        "estimators": pf.estimators,
        "primary_estimator": primary,
        "rows": sum(r for r in states.rows.values()),
        "partitions": partitions,
        "bad_partitions": bad if failed else [],
        "skipped_partitions": bad if not failed else [],
        "policies": policies,
        "comparisons": compared,
        "alert_settings": pf.alerts.model_dump(),
        "fail_on": list(pf.fail_on),
        "alerts": [{"policy": p["name"], **a} for p in policies for a in p["alerts"]],
    })


def model_fit(evaluations: dict) -> dict | None:
    """The reward model's fit as its file records it (the first evaluation's model; None without one): the model,
    rows, folds, λ and its calibration on the rows it was fitted on (:mod:`dr_scale.reward.calibration`)."""
    model = next((e.reward_model for e in evaluations.values() if e.reward_model is not None), None)
    meta = getattr(model, "metadata", None) or {}
    if model is None:
        return None
    return {"kind": type(model).__name__, "model": meta.get("model"), "rows": meta.get("rows"),
            "folds": meta.get("folds"), "lam": meta.get("lam"), "calibration": meta.get("calibration")}


def reward_model_blocks(report: dict, images: dict[str, str]) -> list[tuple]:
    """The reward model's fit and its calibration on its own rows (DM of the logging policy beside the rows' mean
    reward, the reliability by decile of ρ̂), when the report uses one."""
    fit = report.get("reward_model_fit")
    if not fit:
        return []
    folds = f"{fit['folds']} folds (cross-fitted)" if fit.get("folds") else "no folds (in sample)"
    rows = f"{fit['rows']:,} rows" if isinstance(fit.get("rows"), int) else "rows not recorded"
    lam = f", λ = {fit['lam']:g}" if isinstance(fit.get("lam"), (int, float)) else ""
    out: list[tuple] = [("h2", "Reward model"),
                        ("p", f"`{report['reward_model']}`: {fit['kind']}, fitted on {rows}, {folds}{lam}.")]
    cal = fit.get("calibration")
    if not cal:
        return out + [("p", "Its file records no calibration (a model fitted before dr-scale recorded one, or a "
                            "model from outside): refit it with `dr-scale fit` to see it here.")]
    level = f"{100 * (1 - cal['alpha']):g}%"
    out.append(("p", f"Calibration on the {cal['rows']:,} rows it was fitted on ({cal['predicted']}): DM of the "
                     f"logging policy {number(cal['dm'], 4)} [{number(cal['dm_interval'][0])}, "
                     f"{number(cal['dm_interval'][1])}] against the rows' own mean reward {number(cal['own_mean'], 4)} "
                     f"[{number(cal['own_interval'][0])}, {number(cal['own_interval'][1])}] ({level} intervals); "
                     f"expected calibration error {number(cal['ece'])}."))
    if not cal["agrees"]:
        out.append(("warn", f"DM of the logging policy lies outside the own mean's {level} interval: the reward model "
                            "is biased on its own rows, and DM (DR less) inherits it."))
    out += [("img", images["calibration"], "reward model calibration by decile of ρ̂"),
            ("table", ["decile of ρ̂", "rows", "mean ρ̂", "mean reward"],
             [[str(i + 1), f"{c:,}", number(p), number(r)] for i, (c, p, r) in enumerate(cal["deciles"])])]
    return out


def primary_estimator(names: list[str]) -> str:
    """The estimator whose interval the over-time plot shades: DR when present."""
    return next((n for n in ("DR", "SNDR", "SNIPS", "IPS") if n in names), names[0])


# -- documents -------------------------------------------------------------------
def _chosen(e: dict) -> str:
    """" (tau = 20)" for a tuned estimator's chosen threshold ("∞": DR), else nothing."""
    return "".join(f" ({k} = {'∞' if v == 'inf' else format(v, 'g')})" for k, v in e.get("chosen", {}).items())


def _marked(name: str, comparison: dict) -> str:
    """A policy's name in a comparison, "(in-sample)" after it if it was learned on the window."""
    return f"{name} (in-sample)" if name in comparison.get("in_sample_policies", ()) else name


def _support(e: dict) -> str:
    """The support column: "no reliable estimate" (its weights fail a threshold of the verdict, among them fewer
    than min_support rewarded matched rows: the warning above the table says which), "model-based" (DM: the
    weights do not apply), "insufficient data" (an estimate without a verdict resting on too few such rows), else
    "ok" — which needs a reliable verdict, so at least min_support rewarded matched rows."""
    if e.get("verdict") in (NO_RELIABLE_ESTIMATE, MODEL_BASED):
        return str(e["verdict"])
    return "insufficient data" if e.get("insufficient_data") else "ok"


def _estimate(e: dict, key: str = "ci", sign: bool = False) -> tuple[str, str, str]:
    """An estimate's value, standard error and interval (``ci``, or ``cs``: its confidence sequence) as text,
    rounded to the standard error's place (:func:`dr_scale.core.numbers.estimate`); the interval reads "no reliable
    estimate" where that is the verdict."""
    value, stderr, bounds = estimate(e["value"], e["stderr"], e[key], sign=sign)
    return value, stderr, NO_RELIABLE_ESTIMATE if e.get("verdict") == NO_RELIABLE_ESTIMATE else bounds


def _by_day_cells(day: dict, primary: str) -> list[str]:
    """A day's own estimate ± stderr, the running estimate, its confidence sequence, its fixed-time interval and
    the running estimate's support (no sequence or interval, "—", where that says "no reliable estimate")."""
    own, run = day["estimates"][primary], day["running"][primary]
    value, stderr, _ = _estimate(own)
    running, _, ci = _estimate(run)
    cs = _estimate(run, "cs")[2]
    if run.get("verdict") == NO_RELIABLE_ESTIMATE:
        cs = ci = "—"
    return [f"{value} ± {stderr}", running, cs, ci, _support(run)]


def _weight(q) -> str:
    """A weight quantile; the histogram's first bin reads "< 0.001" (in practice w = 0)."""
    return "< 0.001" if q is not None and q <= WEIGHT_EDGES[1] else number(q)


def blocks(report: dict, images: dict[str, str]) -> list[tuple]:
    """The document as blocks (kind, …) rendered by :func:`to_markdown` and :func:`to_html`."""
    level = f"{100 * (1 - report['alpha']):g}% CI ({report['interval']})"
    w = report["window"]
    out: list[tuple]
    span = f"{w['first']} … {w['last']}" if w.get("first") else "all partitions"
    out = [("h1", f"dr-scale report — {span}"),
           ("p", f"Status: **{report['status']}** · logs `{report['logs']}` · "
                 f"{len(report['partitions'])} partitions, "
                 f"{report['rows']} rows · generated {report['generated_at']} · schema {report['schema_version']}")]
    for key, title in (("bad_partitions", "Bad partitions (report not computed)"),
                       ("skipped_partitions", "Skipped partitions (--skip-bad-partitions)")):
        if report[key]:
            out.append(("h2", title))
            out.append(("table", ["partition", "error"], [[b["path"], b["error"]] for b in report[key]]))
    if not report["policies"]:
        return out
    out += [("h2", "Estimates"), ("img", images["estimates"], "estimates with intervals"),
            ("p", "Support: an estimate whose weights fail a threshold reads **no reliable estimate**, its interval "
                  f"not shown: fewer than {report.get('min_support', 10)} rewarded matched rows (w > 0, r ≠ 0), an "
                  f"effective sample size below {DEFAULT_MIN_ESS:g} or a Pareto k̂ of the weights above "
                  f"{DEFAULT_MAX_PARETO_K:g} (docs/estimators.md). DM is **model-based**: it rests on the reward "
                  "model alone, which no diagnostic of the weights checks.")]
    for p in report["policies"]:
        d = p["diagnostics"]
        out.append(("h3", f"{p.get('label', p['name'])} (`{p['spec']}`)"))
        for warning in p["warnings"]:
            out.append(("warn", warning))
        out.append(("table", ["estimator", "value", "std. error", level, "n", "support"],
                    [[k + _chosen(e), *_estimate(e), str(e["n"]), _support(e)] for k, e in p["estimates"].items()]))
        q = d["weight_quantiles"]
        out.append(("table", ["rows", "ESS", "ESS/n", "overlap", "max w", "w q50 / q90 / q99", "p̂ < 0.01",
                              "logging policy value"],
                    [[str(d["n"]), number(d["ess"]), number(d["ess_ratio"]), d["overlap"],
                      number(d["max_weight"]), " / ".join(_weight(q[k]) for k in ("0.5", "0.9", "0.99")),
                      percent(d["tiny_propensity_share"]), number(d["on_policy_value"])]]))
        if "logged" in p:  # the other log's check and on-policy value, beside the off-policy estimates
            out += [("p", line.strip()) for line in summary_lines(p["logged"])]
    out += reward_model_blocks(report, images)
    out += propensity_blocks(report, images)
    if report["comparisons"]:
        pct = f"{100 * (1 - report['alpha']):g}%"
        out += [("h2", "Comparisons"), ("img", images["comparisons"], "paired differences"),
                ("p", f"V(policy) − V(baseline) by {report['primary_estimator']}, from paired per-row terms on the "
                      f"same rows (their correlation counted), with a {report['interval']} {pct} interval; the "
                      "logging policy's value is its logged rewards' mean, and each candidate is also compared with "
                      "the best other candidate. A difference resting on fewer than "
                      f"{report.get('min_support', 10)} rows with the policy's action and a reward is marked "
                      "insufficient data: its interval supports no conclusion."),
                ("table", ["policy", "baseline", "V(policy) − V(baseline)", "std. error", level, "support"],
                 [[_marked(c["policy"], c), _marked(c["baseline"], c),
                   *_estimate(c, sign=True), _support(c)]
                  for c in report["comparisons"]])]
    if any(p["by_day"] for p in report["policies"]):
        primary = report["primary_estimator"]
        pct = f"{100 * (1 - report['alpha']):g}%"
        out += [("h2", "By day"), ("img", images["over_time"], "estimates by day"),
                ("p", f"Each day's own {primary} estimate, and the running estimate on the log so far with its {pct} "
                      f"confidence sequence ({report['interval']}) beside its fixed-time {pct} interval. Look at the "
                      "report every day? Read the confidence sequence: it holds on every day at once, where a "
                      "fixed-time interval checked daily excludes the truth on some day far more often than "
                      f"{100 * report['alpha']:g}% of the time."),
                ("p", "One table per policy: the day's own estimate ± its standard error, then the running "
                      "estimate on the log up to that day with its confidence sequence and its fixed-time interval, "
                      "and the logging policy's value that day.")]
        for p in report["policies"]:
            if p["by_day"]:
                out += [("h3", f"{p.get('label', p['name'])} by day ({primary})"),
                        ("table", ["date", "day ± std. error", "running", f"{pct} confidence sequence",
                                   f"{pct} fixed-time interval", "support", "logging policy"],
                         [[day["date"], *_by_day_cells(day, primary), number(day["diagnostics"]["on_policy_value"])]
                          for day in p["by_day"]])]
    out += support_blocks(report)
    out += [("h2", "Importance weights"), ("img", images["weights"], "importance-weight distribution"),
            ("p", f"Overlap is poor when ESS/n < {report['min_ess_ratio']:g} (ESS = (Σw)²/Σw², Kish). Weight "
                  "quantiles are upper edges of a log-spaced histogram (within ~6%); < 0.001 means in practice "
                  "w = 0 (rows whose logged action the policy never takes).")]
    return out


def support_blocks(report: dict) -> list[tuple]:
    """The "Support and drift" section: per policy and day, the weights' diagnostics and the alerts raised."""
    if not any(p["by_day"] for p in report["policies"]):
        return []
    s = report["alert_settings"]
    out: list[tuple] = [("h2", "Support and drift"),
           ("p", "Per day: ESS/n, the share of the value Σw|r| carried by the top 1% of the positive weights, "
                 f"the Pareto k̂ of the weights' tail (PSIS; above {s['max_pareto_k']:g} IPS-type estimates are "
                 "unreliable) and the mean weight Σw/n (1 where the log supports the policy; z: its distance "
                 "from 1 in standard errors), each with its change against the day's history (up to "
                 f"{s['history_days']} days before it, at least {s['min_history_days']}). Alerts: "
                 + (f"{', '.join(report['fail_on'])} alerts make the command exit with status 4."
                    if report["fail_on"] else "warnings only (set fail_on to exit with status 4)."))]
    for p in report["policies"]:
        rows = []
        for day in p["by_day"]:
            d, change = day["support"], day["support"]["change"] or {}

            def cell(metric, unit=1.0, suffix="", d=d, change=change):
                """The metric to 3 significant digits, its change rounded to the same place ("+0.000": none)."""
                value, delta = d[metric], change.get(metric)
                if value is None or not math.isfinite(value):
                    return number(None)
                text = number(unit * value) + suffix
                if delta is not None:
                    text += f" ({number(unit * delta, 3, sign=True, scale=unit * abs(value))}{suffix})"
                return text

            rows.append([day["date"], cell("ess_ratio"), cell("top_share", 100.0, "%"), cell("pareto_k"),
                         f"{cell('mean_weight')} z {number(d['mean_weight_z'], 2)}",
                         "; ".join(f"**{a['kind']}**: {a['metric']}" for a in d["alerts"]) or "—"])
        out += [("h3", f"{p.get('label', p['name'])}: support by day"),
                ("table", ["date", "ESS/n (change)", "top 1% share (change)", "Pareto k̂ (change)",
                           "mean weight (change)", "alerts"], rows)]
    return out


def propensity_blocks(report: dict, images: dict[str, str]) -> list[tuple]:
    """The estimated propensities' diagnostics (docs/propensities.md), when the report estimates them."""
    with_p = [p for p in report["policies"] if "propensity" in p]
    if not with_p:
        return []
    first = with_p[0]["propensity"]
    ll = first["log_loss"]
    out = [("h2", "Estimated propensities"),
           ("p", f"Every row's propensity is the estimated logging policy's (cross-fitted: the fold model that did "
                 f"not see the row), floored at {first['floor']:g}: {first['floored_rows']} of {first['rows']} rows "
                 f"floored. Calibration: expected calibration error {number(first['ece'])} (classwise), Brier score "
                 f"{number(first['brier'])}; log loss {number(ll['model'])} against {number(ll['uniform'])} for the "
                 f"uniform policy and {number(ll['marginal'])} for the actions' marginal frequencies."),
           ("table", ["policy", "target mass on actions with p̂ < floor", "support"],
            [[p.get("label", p["name"]), percent(p["propensity"]["support_share_below_floor"], 3),
              ("fails: compare with DM" if "DM" in p["estimates"] else "fails: fit a reward model and compare with DM")
              if p["propensity"]["support_fails"] else "ok"] for p in with_p])]
    comparison = first.get("logged_vs_estimated")
    if comparison:
        q = comparison["ratio_quantiles"]
        out.append(("p", f"Logged vs estimated propensities: correlation {number(comparison['correlation'])}; "
                         f"p̂/p quantiles 5% {number(q['0.05'])}, 50% {number(q['0.5'])}, 95% {number(q['0.95'])}."))
    if "reliability" in images:
        out.append(("img", images["reliability"], "reliability of the estimated propensities per action group"))
    return out


def to_markdown(doc: list[tuple]) -> str:
    """The document's blocks (:func:`blocks`) as Markdown."""
    lines = []
    for kind, *args in doc:
        if kind in ("h1", "h2", "h3"):
            lines += ["#" * int(kind[1]) + " " + args[0], ""]
        elif kind == "p":
            lines += [args[0], ""]
        elif kind == "warn":
            lines += [f"> **Warning:** {args[0]}", ""]
        elif kind == "img":
            lines += [f"![{args[1]}]({args[0]})", ""]
        elif kind == "table":
            head, rows = args
            lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows] + [""]
    return "\n".join(lines)


def _inline(text: str) -> str:
    text = html.escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


STYLE = ("body{font-family:system-ui,sans-serif;max-width:64rem;margin:2rem auto;padding:0 1rem;color:#222}"
         "table{border-collapse:collapse;margin:.5rem 0 1rem;display:block;overflow-x:auto;max-width:100%}"
         "td,th{border:1px solid #ccc;padding:.25rem .5rem;"
         "text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}td:not(:last-child){white-space:nowrap}"
         "img{max-width:100%}"
         ".warn{background:#fff3cd;border-left:4px solid #e0a800;padding:.4rem .8rem}")


def to_html(doc: list[tuple], pngs: dict[str, bytes]) -> str:
    """A self-contained page: the PNGs are embedded as data: URIs."""
    body = []
    for kind, *args in doc:
        if kind in ("h1", "h2", "h3"):
            body.append(f"<{kind}>{_inline(args[0])}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{_inline(args[0])}</p>")
        elif kind == "warn":
            body.append(f'<p class="warn"><strong>Warning:</strong> {_inline(args[0])}</p>')
        elif kind == "img":
            data = base64.b64encode(pngs[args[0]]).decode()
            body.append(f'<p><img alt="{html.escape(args[1])}" src="data:image/png;base64,{data}"></p>')
        elif kind == "table":
            head, rows = args
            body.append("<table><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in head) + "</tr>"
                        + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in rows)
                        + "</table>")
    title = html.escape(doc[0][1])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def render_plots(report: dict) -> dict[str, bytes]:
    """The plots by kind (none when the report has no estimates, no by-day plot without dates)."""
    if not report["policies"]:
        return {}
    level = f"{100 * (1 - report['alpha']):g}% CI ({report['interval']})"
    out = {"estimates": plots.estimates_plot(report["policies"], level)}
    if report["comparisons"]:
        out["comparisons"] = plots.comparisons_plot(report["comparisons"],
                                                    f"{100 * (1 - report['alpha']):g}% CI, {report['interval']}")
    if any(p["by_day"] for p in report["policies"]):  # date-partitioned logs only
        out["over_time"] = plots.over_time_plot(report["policies"], report["primary_estimator"], level)
    out["weights"] = plots.weights_plot(report["policies"])
    calibration = (report.get("reward_model_fit") or {}).get("calibration")
    if calibration:
        out["calibration"] = plots.calibration_plot(calibration)
    with_p = [p for p in report["policies"] if "propensity" in p]
    if with_p:
        from dr_scale.propensity.diagnostics import reliability_png

        out["reliability"] = reliability_png(with_p[0]["propensity"]["reliability"])
    return out


def render(report: dict) -> dict[str, bytes]:
    """All files of the report, relative to the output folder, in publishing order."""
    pngs = render_plots(report)
    names = {kind: f"plots/{kind}-{hashlib.sha256(data).hexdigest()[:12]}.png" for kind, data in pngs.items()}
    doc = blocks(report, names)
    files = {names[kind]: data for kind, data in pngs.items()}
    files["report.md"] = to_markdown(doc).encode()
    files["report.html"] = to_html(doc, {names[k]: v for k, v in pngs.items()}).encode()
    manifest = {**report, "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}}
    files["report.json"] = strict_json.dumps(manifest, indent=1).encode()
    return files


def write_report(out: str, report: dict, storage_options: dict | None = None) -> list[str]:
    """Render and publish the report under ``out``; remove plots no current file refers to."""
    files = render(report)
    fs, root = url_to_fs(out, storage_options)
    for folder in (root, posixpath.join(root, "plots")):
        remove_temporaries(fs, folder)  # a killed run's
    atomic_write_all(fs, {posixpath.join(root, name): data for name, data in files.items()})
    plot_dir = posixpath.join(root, "plots")
    keep = {posixpath.join(root, name) for name in files}
    fs.invalidate_cache()
    if fs.exists(plot_dir):
        for path in fs.ls(plot_dir, detail=False):
            if path.endswith(".png") and not posixpath.basename(path).startswith(".") and path.lstrip("/") not in {
                    k.lstrip("/") for k in keep}:
                fs.rm(path)
    return sorted(files)
