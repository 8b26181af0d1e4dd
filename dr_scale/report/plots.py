"""The report's plots as PNG bytes (matplotlib, Agg backend), drawn to be read by a person.

* :func:`estimates_plot` — each policy's value by every estimator with its confidence interval,
  one panel per policy on **its own scale** (small multiples), so a policy far from the others
  does not flatten them; the numbers beside each interval, and the logging policy's on-policy
  value as a line (or, when it is off the panel's scale, a note at the panel's edge). A value whose
  verdict is "no reliable estimate" (docs/estimators.md) is a grey cross without an interval, and says so
  (the axis label explains the marks once, the panels' titles stay short);
* :func:`over_time_plot` — each estimator's value per day, the primary estimator's interval as a
  band and its running estimate with its confidence sequence, one panel per policy, the legend
  above the panels;
* :func:`comparisons_plot` — paired differences V(policy) − V(baseline) with their intervals,
  against the line of no difference;
* :func:`weights_plot` — the distribution of the importance weights w = π(a|x)/p̂ from
  :class:`~dr_scale.ope.diagnostics.WeightStats`' log-spaced histogram, one panel per policy on
  log–log axes, the rows with w = 0 (the policy never takes the logged action), which a log axis
  cannot show, stated in the panel;
* :func:`calibration_plot` — the reward model's reliability on the rows it was fitted on: mean ρ̂ against mean
  reward per decile of ρ̂ (each point's area by its rows), the diagonal of perfect calibration, and DM of the
  logging policy beside the rows' own mean with their intervals.

Each ``*_plot`` has a ``*_figure`` twin returning the matplotlib figure, for tests to inspect
(the caller closes it). Numbers are written by :mod:`dr_scale.core.numbers`.
"""

from __future__ import annotations

import io
import math

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from dr_scale.core.numbers import estimate, number, percent  # noqa: E402
from dr_scale.ope.diagnostics import NO_RELIABLE_ESTIMATE, WEIGHT_EDGES  # noqa: E402

DPI = 100
WIDTH = 8.0  # inches: 800 px at DPI, the report page's width


def _png(fig) -> bytes:
    """The figure as PNG; a constrained layout already fits it (no second drawing for a tight box)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches=None if fig.get_layout_engine() else "tight",
                metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _num(x) -> float:
    return float("nan") if x is None else float(x)


def _limits(points, pad: float = 0.06) -> tuple[float, float] | None:
    """Axis limits holding every finite number in ``points``, with ``pad`` of their span on each side."""
    finite = [float(x) for x in points if x is not None and math.isfinite(x)]
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    span = hi - lo if hi > lo else max(abs(hi) * 0.1, 1e-3)
    return lo - pad * span, hi + pad * span


def _unreliable(e: dict) -> bool:
    """Whether an estimate's verdict is "no reliable estimate": no interval is drawn for it."""
    return e.get("verdict") == NO_RELIABLE_ESTIMATE


def _interval(ax, v: float, y: float, e: dict, **style) -> None:
    """The value at height ``y`` with its interval; a grey cross alone for a value with no reliable estimate."""
    if not math.isfinite(v):
        return
    if _unreliable(e):
        ax.plot(v, y, marker="x", ls="none", color="grey", **{k: w for k, w in style.items() if k == "label"})
        return
    lo, hi = map(_num, e["ci"])
    err = [[v - lo], [hi - v]] if math.isfinite(lo) and math.isfinite(hi) else None
    ax.errorbar(v, y, xerr=err, fmt="o", capsize=3, **style)


def _bounds_text(e: dict, sign: bool = False) -> str:
    """The value and interval written beside a row; "no reliable estimate" in place of the interval."""
    value, _, ci = estimate(e["value"], e["stderr"], e["ci"], sign=sign)
    return f"{value} {NO_RELIABLE_ESTIMATE if _unreliable(e) else ci}"


def _label(p: dict) -> str:
    return p.get("label", p["name"])


def _reference(ax, value: float, label: str, axis: str = "x") -> str | None:
    """The logging policy's value as a dashed line when inside the panel's limits; else a note at the panel's
    top right naming it and the side it is on, so the panel keeps its own scale. Returns the note, if any."""
    if not math.isfinite(value):
        return None
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    if lo <= value <= hi:
        (ax.axvline if axis == "x" else ax.axhline)(value, color="grey", ls="--", lw=1, label=label)
        return None
    arrow = ("→" if value > hi else "←") if axis == "x" else ("↑" if value > hi else "↓")
    note = f"{label} {number(value)}, off this scale {arrow}"
    ax.set_title(note, loc="right", fontsize="small", color="dimgrey")
    return note


# -- estimates -------------------------------------------------------------------------
def estimates_figure(policies: list[dict], level: str):
    """One panel per policy, each on its own x scale: a row per estimator, its value and interval, the value and
    interval written at the right (hollow marker: insufficient data), the logging policy's value for reference."""
    names = list(dict.fromkeys(est for p in policies for est in p["estimates"]))
    colors = dict(zip(names, plt.get_cmap("tab10").colors, strict=False))  # type: ignore[attr-defined]  # listed
    heights = [max(len(p["estimates"]), 1) * 0.3 + 0.55 for p in policies] or [1.0]
    fig, axes = plt.subplots(len(heights), 1, figsize=(WIDTH, sum(heights) + 0.7), squeeze=False, layout="constrained",
                             gridspec_kw={"height_ratios": heights})
    on_policy = _num(policies[0]["diagnostics"]["on_policy_value"]) if policies else float("nan")
    for ax, p in zip(axes[:, 0], policies, strict=False):
        rows = list(p["estimates"].items())
        ticks, right = [], []
        for i, (est, e) in enumerate(rows):
            hollow = bool(e.get("insufficient_data"))
            _interval(ax, _num(e["value"]), -i, e, color=colors[est], mfc="white" if hollow else None)
            ticks.append(-i)
            right.append(_bounds_text(e))
        limits = _limits([x for _, e in rows for x in (e["value"], *(() if _unreliable(e) else e["ci"]))])
        if limits:
            ax.set_xlim(*limits)
        ax.set_ylim(-len(rows) + 0.4, 0.6)
        ax.set_yticks(ticks, [est for est, _ in rows])
        side = ax.secondary_yaxis("right")
        side.set_yticks(ticks, right, fontsize="small")
        side.tick_params(length=0)
        _reference(ax, on_policy, "logging policy")
        ax.set_title(_label(p), loc="left", fontsize="medium")  # the right-hand title may note the logging policy
        ax.grid(axis="x", alpha=0.3)
    shown = [e for p in policies for e in p["estimates"].values()]
    marks = ((["hollow: insufficient data"] if any(e.get("insufficient_data") for e in shown) else [])
             + (["grey ×: no reliable estimate (no interval)"] if any(map(_unreliable, shown)) else []))
    if policies:
        axes[-1, 0].set_xlabel(f"estimated value, {level}; each panel on its own scale\n"
                               f"dashed: the logging policy's value, {number(on_policy)}"
                               + ("\n" + "; ".join(marks) if marks else ""))
    fig.suptitle("Estimated value of each candidate policy")
    return fig


def estimates_plot(policies: list[dict], level: str) -> bytes:
    """:func:`estimates_figure` as PNG bytes."""
    return _png(estimates_figure(policies, level))


# -- comparisons -----------------------------------------------------------------------
def comparisons_figure(comparisons: list[dict], level: str):
    """Horizontal intervals of V(policy) − V(baseline), one row per comparison, a line at 0, the numbers at the
    right."""
    fig, ax = plt.subplots(figsize=(WIDTH, 1.0 + 0.4 * len(comparisons)), layout="constrained")
    labelled, right = set(), []
    for y, c in enumerate(comparisons):
        v = _num(c["value"])
        kind = ("no reliable estimate" if _unreliable(c) else "against the logging policy" if c["baseline"] == "logging"
                else "against the best other candidate")
        hollow = bool(c.get("insufficient_data"))
        if math.isfinite(v):
            _interval(ax, v, -y, c, mfc="white" if hollow else None,
                      color="tab:grey" if c["baseline"] == "logging" else "tab:blue",
                      label=None if kind in labelled else kind)
            labelled.add(kind)
        right.append(_bounds_text(c, sign=True) + (" insufficient data" if hollow and not _unreliable(c) else ""))
    ax.axvline(0.0, color="black", lw=1)
    ax.margins(x=0.08)  # a cross at the extreme stays clear of the frame
    if labelled:
        fig.legend(loc="outside lower center", ncol=2, fontsize="small", frameon=False)

    def marked(name, c):
        """The policy's name, marked ``(in-sample)`` where the comparison says so."""
        return f"{name} (in-sample)" if name in c.get("in_sample_policies", ()) else name

    ticks = [-y for y in range(len(comparisons))]
    ax.set_yticks(ticks, [f"{marked(c['policy'], c)} − {marked(c['baseline'], c)}" for c in comparisons])
    side = ax.secondary_yaxis("right")
    side.set_yticks(ticks, right, fontsize="small")
    side.tick_params(length=0)
    ax.set_xlabel(f"V(policy) − V(baseline), {comparisons[0]['estimator']}, paired ({level})" if comparisons else "")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Each candidate against the logging policy and the best other candidate")
    return fig


def comparisons_plot(comparisons: list[dict], level: str) -> bytes:
    """:func:`comparisons_figure` as PNG bytes."""
    return _png(comparisons_figure(comparisons, level))


# -- by day ----------------------------------------------------------------------------
def over_time_figure(policies: list[dict], primary: str, level: str):
    """One panel per policy with days: every estimator per day, the primary one's interval shaded; the primary
    one's running estimate on the log so far with its confidence sequence (grey band) and fixed-time interval
    (dotted); the logging policy's value per day (a note when it is off the panel's scale). The legend sits below
    the panels and the layout is constrained, so no blank band separates the title from the first panel."""
    shown = [p for p in policies if p["by_day"]]
    fig, axes = plt.subplots(max(len(shown), 1), 1, figsize=(WIDTH, 2.3 * max(len(shown), 1) + 0.9), sharex=True,
                             squeeze=False, layout="constrained")
    for ax, p in zip(axes[:, 0], shown, strict=False):
        days = [d["date"] for d in p["by_day"]]
        x = np.arange(len(days))
        for est in p["estimates"]:
            values = [_num(d["estimates"][est]["value"]) for d in p["by_day"]]
            ax.plot(x, values, marker="o", ms=3, lw=1.5 if est == primary else 1, label=est)
            if est == primary:  # no band on a day whose estimate is no reliable one
                lo = [math.nan if _unreliable(d["estimates"][est]) else _num(d["estimates"][est]["ci"][0])
                      for d in p["by_day"]]
                hi = [math.nan if _unreliable(d["estimates"][est]) else _num(d["estimates"][est]["ci"][1])
                      for d in p["by_day"]]
                ax.fill_between(x, lo, hi, alpha=0.2, label=f"{est} {level}")
        if all("running" in d for d in p["by_day"]):  # the running estimate on the log so far, its sequence
            run = [d["running"][primary] for d in p["by_day"]]
            ax.plot(x, [_num(r["value"]) for r in run], color="black", lw=1.5, label=f"{primary} running")
            def end(r, key, j):
                """An end of the running estimate's interval or sequence; none while it is no reliable estimate."""
                return math.nan if _unreliable(r) else _num(r[key][j])

            ax.fill_between(x, [end(r, "cs", 0) for r in run], [end(r, "cs", 1) for r in run], color="black",
                            alpha=0.08, label="confidence sequence")
            ax.plot(x, [end(r, "ci", 0) for r in run], color="black", lw=0.8, ls=":", label="fixed-time interval")
            ax.plot(x, [end(r, "ci", 1) for r in run], color="black", lw=0.8, ls=":")
        on_policy = [_num(d["diagnostics"]["on_policy_value"]) for d in p["by_day"]]
        ax.set_xlim(-0.3, len(days) - 0.7)
        bottom, top = ax.get_ylim()
        if any(bottom <= v <= top for v in on_policy if math.isfinite(v)):
            ax.plot(x, on_policy, color="grey", ls="--", lw=1, label="logging policy", scaley=False)
        else:
            _reference(ax, float(np.nanmean(on_policy)) if any(map(math.isfinite, on_policy)) else math.nan,
                       "logging policy (mean)", axis="y")
            ax.plot([], [], color="grey", ls="--", lw=1, label="logging policy")
        alerted = [i for i, d in enumerate(p["by_day"]) if d.get("support", {}).get("alerts")]
        for j, i in enumerate(alerted):  # a day with a support or drift alert (dr_scale.report.alerts)
            ax.axvline(i, color="tab:red", lw=1, ls="-.", label=None if j else "support / drift alert")
        ax.set_title(_label(p), loc="left", fontsize="medium")
        ax.set_xticks(x, days, rotation=30, ha="right")
        ax.grid(alpha=0.3)
        ax.set_ylabel("value")
    if shown:
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=5, fontsize="small", frameon=False)
    fig.suptitle("Estimated value by day")
    return fig


def over_time_plot(policies: list[dict], primary: str, level: str) -> bytes:
    """:func:`over_time_figure` as PNG bytes."""
    return _png(over_time_figure(policies, primary, level))


# -- importance weights ----------------------------------------------------------------
def zero_weight_rows(p: dict) -> int:
    """Rows of policy section ``p`` with w = 0 (π never takes the logged action): n − matched rows; from the
    histogram's first bin (w < 0.001) when the diagnostics do not count matched rows."""
    d, hist = p["diagnostics"], p["weight_histogram"]
    n = int(sum(hist))
    return n - int(d["matched_rows"]) if d.get("matched_rows") is not None else int(hist[0])


def weights_figure(policies: list[dict]):
    """One panel per policy: the share of rows per log-spaced weight bin [10⁻³, 10⁶) on log–log axes, and in
    the panel the share of rows with w = 0, which a log axis cannot show (and any 0 < w < 10⁻³ or w ≥ 10⁶)."""
    shown = [p for p in policies if sum(p["weight_histogram"]) > 0]
    fig, axes = plt.subplots(max(len(shown), 1), 1, figsize=(WIDTH, 1.9 * max(len(shown), 1) + 0.7), sharex=True,
                             squeeze=False, layout="constrained")
    positive_bins: list[int] = []
    smallest = 1.0
    for ax, p in zip(axes[:, 0], shown, strict=False):
        hist = np.asarray(p["weight_histogram"], dtype=np.float64)
        n = hist.sum()
        share = hist[1:-1] / n
        if share.any():  # else every row has w = 0 (or w ≥ 10⁶): the text says so
            ax.stairs(share, WEIGHT_EDGES[1:], fill=True, alpha=0.35, color="tab:blue")
            ax.stairs(share, WEIGHT_EDGES[1:], color="tab:blue", lw=1)
            positive_bins.extend(np.flatnonzero(hist[1:-1]))
            smallest = min(smallest, share[share > 0].min())
        zero = zero_weight_rows(p)
        lines = [f"w = 0 (π never takes the logged action): {percent(zero / n)} of rows ({zero:,} of {int(n):,})"]
        tiny = int(hist[0]) - zero
        if tiny > 0:
            lines.append(f"0 < w < 0.001: {percent(tiny / n)} of rows")
        if hist[-1] > 0:
            lines.append(f"w ≥ 10⁶: {percent(hist[-1] / n)} of rows")
        d = p["diagnostics"]
        lines.append(f"max w {number(d.get('max_weight'))} · ESS/n {number(d.get('ess_ratio'))}")
        ax.text(0.99, 0.95, "\n".join(lines), transform=ax.transAxes, ha="right", va="top", fontsize="small",
                bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "lightgrey", "alpha": 0.9})
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: percent(y, 1)))
        ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())  # decades only: fewer ticks to lay out
        ax.set_title(_label(p), loc="left", fontsize="medium")
        ax.grid(alpha=0.3)
        ax.set_ylabel("share of rows (log)")
    for ax in axes[:, 0]:
        ax.set_xscale("log")
        ax.set_ylim(smallest / 10, 8.0)  # the rarest bin visible; head room above 100% for the text box
    if positive_bins:
        axes[0, 0].set_xlim(WEIGHT_EDGES[1 + min(positive_bins)] / 2, WEIGHT_EDGES[2 + max(positive_bins)] * 2)
    axes[-1, 0].set_xlabel("importance weight w = π(a|x) / p̂ (log scale)")
    fig.suptitle("Importance-weight distribution (rows with w > 0; the share with w = 0 in each panel)")
    return fig


def weights_plot(policies: list[dict]) -> bytes:
    """:func:`weights_figure` as PNG bytes."""
    return _png(weights_figure(policies))


def calibration_figure(calibration: dict):
    """The reward model's calibration record (:func:`dr_scale.reward.calibration.calibration_record`) drawn: mean
    reward against mean ρ̂ per decile of ρ̂, on the diagonal where ρ̂ is calibrated."""
    rows, mean_p, mean_r = (np.array(v, float) for v in zip(*calibration["deciles"]))
    fig, ax = plt.subplots(figsize=(WIDTH * 0.6, WIDTH * 0.5), layout="constrained")
    top = max(float(mean_p.max()), float(mean_r.max())) * 1.05 or 1.0
    ax.plot([0, top], [0, top], color="0.6", lw=1, label="calibrated (mean reward = mean ρ̂)")
    ax.scatter(mean_p, mean_r, s=20 + 200 * rows / rows.max(), color="C0", alpha=0.8, label="decile of ρ̂")
    (lo, hi), (dlo, dhi) = calibration["own_interval"], calibration["dm_interval"]
    dm, own = calibration["dm"], calibration["own_mean"]
    ax.errorbar([dm], [own], xerr=[[dm - dlo], [dhi - dm]], yerr=[[own - lo], [hi - own]], fmt="D", color="C3",
                label=f"all rows: DM of the logging policy {number(dm, 4)}, own mean {number(own, 4)}")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("mean ρ̂ (" + calibration["predicted"] + ")")
    ax.set_ylabel("mean logged reward")
    ax.set_title(f"Reward model calibration (ECE {number(calibration['ece'])})")
    ax.legend(loc="lower right", fontsize=8)  # the points lie along the diagonal: this corner is free
    return fig


def calibration_plot(calibration: dict) -> bytes:
    """:func:`calibration_figure` as PNG bytes."""
    return _png(calibration_figure(calibration))
