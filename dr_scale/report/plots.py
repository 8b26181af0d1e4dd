"""The report's plots as PNG bytes (matplotlib, Agg backend).

* :func:`estimates_plot` — each policy's value by every estimator with its confidence
  interval, and the logging policy's on-policy value for reference;
* :func:`over_time_plot` — each estimator's value per day (the states of a day's
  partitions merged), with the primary estimator's interval as a band;
* :func:`comparisons_plot` — paired differences V(policy) − V(baseline) with their
  intervals, against the line of no difference;
* :func:`weights_plot` — the distribution of the importance weights w = π(a|x)/p̂
  from :class:`~dr_scale.ope.diagnostics.WeightStats`' log-spaced histogram.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from dr_scale.ope.diagnostics import WEIGHT_EDGES  # noqa: E402

DPI = 100


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _num(x) -> float:
    return float("nan") if x is None else float(x)


def estimates_plot(policies: list[dict], level: str) -> bytes:
    """Horizontal intervals, one row per (policy, estimator), grouped by policy."""
    rows = [(p.get("label", p["name"]), est, e) for p in policies for est, e in p["estimates"].items()]
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * len(rows) + 0.3 * len(policies)))
    colors = dict(zip(dict.fromkeys(r[1] for r in rows), plt.get_cmap("tab10").colors, strict=False))
    y, ticks, labels = 0.0, [], []
    for p in policies:
        for est, e in p["estimates"].items():
            lo, hi = map(_num, e["ci"])
            v = _num(e["value"])
            ax.errorbar(v, y, xerr=[[v - lo], [hi - v]], fmt="o", color=colors[est], capsize=3)
            ticks.append(y)
            labels.append(f"{p.get('label', p['name'])} · {est}")
            y -= 1
        y -= 0.6
    on_policy = _num(policies[0]["diagnostics"]["on_policy_value"]) if policies else float("nan")
    ax.axvline(on_policy, color="grey", ls="--", lw=1, label=f"logging policy (on-policy) {on_policy:.4g}")
    ax.set_yticks(ticks, labels)
    ax.set_xlabel(f"estimated value ({level})")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    ax.set_title("Estimated value of each candidate policy")
    return _png(fig)


def comparisons_plot(comparisons: list[dict], level: str) -> bytes:
    """Horizontal intervals of V(policy) − V(baseline), one row per comparison, a line at 0."""
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.4 * len(comparisons)))
    labelled = set()
    for y, c in enumerate(comparisons):
        lo, hi = map(_num, c["ci"])
        v = _num(c["value"])
        kind = "against the logging policy" if c["baseline"] == "logging" else "against the best other candidate"
        ax.errorbar(v, -y, xerr=[[v - lo], [hi - v]], fmt="o", capsize=3,
                    color="tab:grey" if c["baseline"] == "logging" else "tab:blue",
                    label=None if kind in labelled else kind)
        labelled.add(kind)
    ax.axvline(0.0, color="black", lw=1)
    ax.legend(loc="best", fontsize="small")
    def marked(name, c):
        return f"{name} (in-sample)" if name in c.get("in_sample_policies", ()) else name

    names = [f"{marked(c['policy'], c)} − {marked(c['baseline'], c)}" for c in comparisons]
    ax.set_yticks([-y for y in range(len(comparisons))], names)
    ax.set_xlabel(f"V(policy) − V(baseline), {comparisons[0]['estimator']}, paired ({level})")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Each candidate against the logging policy and the best other candidate")
    return _png(fig)


def over_time_plot(policies: list[dict], primary: str, level: str) -> bytes:
    """One panel per policy: every estimator per day, the primary one's interval shaded; the primary one's running
    estimate on the log so far with its confidence sequence (grey band) and fixed-time interval (dotted)."""
    fig, axes = plt.subplots(len(policies), 1, figsize=(8, 2.6 * len(policies) + 0.4), sharex=True, squeeze=False)
    for ax, p in zip(axes[:, 0], policies, strict=True):
        days = [d["date"] for d in p["by_day"]]
        x = np.arange(len(days))
        for est in p["estimates"]:
            values = [_num(d["estimates"][est]["value"]) for d in p["by_day"]]
            ax.plot(x, values, marker="o", ms=3, lw=1.5 if est == primary else 1, label=est)
            if est == primary:
                lo = [_num(d["estimates"][est]["ci"][0]) for d in p["by_day"]]
                hi = [_num(d["estimates"][est]["ci"][1]) for d in p["by_day"]]
                ax.fill_between(x, lo, hi, alpha=0.2, label=f"{est} {level}")
        if all("running" in d for d in p["by_day"]):  # the running estimate on the log so far, its sequence
            run = [d["running"][primary] for d in p["by_day"]]
            ax.plot(x, [_num(r["value"]) for r in run], color="black", lw=1.5, label=f"{primary} running")
            ax.fill_between(x, [_num(r["cs"][0]) for r in run], [_num(r["cs"][1]) for r in run], color="black",
                            alpha=0.08, label="confidence sequence")
            ax.plot(x, [_num(r["ci"][0]) for r in run], color="black", lw=0.8, ls=":", label="fixed-time interval")
            ax.plot(x, [_num(r["ci"][1]) for r in run], color="black", lw=0.8, ls=":")
        on_policy = [_num(d["diagnostics"]["on_policy_value"]) for d in p["by_day"]]
        ax.plot(x, on_policy, color="grey", ls="--", lw=1, label="logging policy")
        alerted = [i for i, d in enumerate(p["by_day"]) if d.get("support", {}).get("alerts")]
        for j, i in enumerate(alerted):  # a day with a support or drift alert (dr_scale.report.alerts)
            ax.axvline(i, color="tab:red", lw=1, ls="-.", label=None if j else "support / drift alert")
        ax.set_title(p.get("label", p["name"]), fontsize="medium")
        ax.set_xticks(x, days, rotation=30, ha="right")
        ax.grid(alpha=0.3)
        ax.set_ylabel("value")
    axes[0, 0].legend(fontsize="x-small", ncol=4, loc="best")
    fig.suptitle("Estimated value by day")
    return _png(fig)


def weights_plot(policies: list[dict]) -> bytes:
    """Share of rows per log-spaced weight bin [10⁻³, 10⁶) for each policy.

    Bin 0 of the histogram, w < 10⁻³ (in practice w = 0: rows whose logged action the
    target policy never takes), is reported in the legend instead of on the log axis.
    """
    fig, ax = plt.subplots(figsize=(8, 3.6))
    shown = []
    for p in policies:
        hist = np.asarray(p["weight_histogram"], dtype=np.float64)
        n = hist.sum()
        if n == 0:
            continue
        ax.stairs(hist[1:-1] / n, WEIGHT_EDGES[1:],
                  label=f"{p.get('label', p['name'])} (w < 0.001: {hist[0] / n:.0%}, "
                        f"max {_num(p['diagnostics']['max_weight']):.3g})")
        shown.extend(np.flatnonzero(hist[1:-1]))
    ax.set_xscale("log")
    if shown:
        ax.set_xlim(WEIGHT_EDGES[1 + min(shown)] / 2, WEIGHT_EDGES[2 + max(shown)] * 2)
    ax.set_xlabel("importance weight w = π(a|x) / p̂")
    ax.set_ylabel("share of rows")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title("Importance-weight distribution")
    return _png(fig)
