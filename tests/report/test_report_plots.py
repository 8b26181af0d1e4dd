"""The report's plots and tables as a person reads them, checked through matplotlib's objects and the page.

On the bundled example's weekly report (and a copy with one policy moved far from the others): the weight
histogram is on log axes and states the share of rows with w = 0 in each panel; each policy's estimates panel has
its own scale, holding every interval of that policy and no more than a margin around them; the by-day figure has
one non-empty panel per policy and no blank band under its title; the tables write numbers to significant digits.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from dr_scale.core.numbers import estimate, percent
from dr_scale.report import plots
from dr_scale.report.make import compute_report
from dr_scale.report.render import blocks, render_plots, to_markdown
from dr_scale.synthetic.example import example_paths

POLICIES = str(Path(__file__).parents[2] / "pipelines" / "report_policies.toml")
LOGS, _ = example_paths()


@pytest.fixture(scope="module")
def report():
    """The example's weekly report as its JSON holds it (computed, nothing rendered)."""
    return json.loads(json.dumps(compute_report(LOGS, POLICIES, None, window="7d")))


@pytest.fixture
def figure():
    """Closes the figures a test made."""
    made = []
    yield lambda fig: made.append(fig) or fig
    for fig in made:
        plt.close(fig)


def with_outlier(report: dict, shift: float = 10.0) -> list[dict]:
    """The report's policies plus a copy of the first moved by ``shift`` — a policy far from all the others."""
    policies = copy.deepcopy(report["policies"])
    far = copy.deepcopy(policies[0])
    far["name"] = far["label"] = "far"
    for e in far["estimates"].values():
        e["value"] += shift
        e["ci"] = [x + shift for x in e["ci"]]
    return policies + [far]


@pytest.mark.slow
def test_weight_histogram_is_log_log_and_states_the_zero_mass(report, figure):
    fig = figure(plots.weights_figure(report["policies"]))
    axes = fig.axes
    assert len(axes) == len(report["policies"])
    for ax, p in zip(axes, report["policies"], strict=True):
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        n, matched = p["diagnostics"]["n"], p["diagnostics"]["matched_rows"]
        assert 0 < n - matched < n  # the example's policies are deterministic: some rows have w = 0, some not
        text = " ".join(t.get_text() for t in ax.texts)
        assert f"w = 0 (π never takes the logged action): {percent((n - matched) / n)} of rows" in text
        assert f"({n - matched:,} of {n:,})" in text
        assert ax.get_title(loc="left") == p["label"]
        lo, hi = ax.get_ylim()
        assert lo > 0 and hi >= 1  # every positive share is on the log axis, up to all rows


def test_a_policy_that_never_takes_a_logged_action_gets_a_panel_that_says_so(report, figure, recwarn):
    policies = copy.deepcopy(report["policies"][:2])
    n = sum(policies[1]["weight_histogram"])
    policies[1]["weight_histogram"] = [n] + [0] * (len(policies[1]["weight_histogram"]) - 1)
    policies[1]["diagnostics"]["matched_rows"] = 0
    fig = figure(plots.weights_figure(policies))
    assert len(fig.axes) == 2 and not [w for w in recwarn if "log-scaled" in str(w.message)]
    assert f"100% of rows ({n:,} of {n:,})" in " ".join(t.get_text() for t in fig.axes[1].texts)


def test_each_policy_has_its_own_scale_so_an_outlier_flattens_nothing(report, figure):
    policies = with_outlier(report)
    fig = figure(plots.estimates_figure(policies, "95% CI (normal)"))
    panels = [ax for ax in fig.axes if ax.get_title(loc="left")]  # not the right-hand number axes
    assert len(panels) == len(policies)
    for ax, p in zip(panels, policies, strict=True):
        assert ax.get_title(loc="left").startswith(p["label"])
        lo, hi = ax.get_xlim()
        points = [x for e in p["estimates"].values() for x in (e["value"], *e["ci"])]
        assert lo <= min(points) and max(points) <= hi, p["name"]
        assert hi - lo <= 1.25 * (max(points) - min(points)), p["name"]  # its own range, not the outlier's
    # the logging policy's value (≈ 0.37) is a line where it falls inside a panel, a note where it does not
    far = panels[-1]
    assert "logging policy" in far.get_title(loc="right") and "off this scale ←" in far.get_title(loc="right")


def test_the_estimates_panels_write_each_value_and_interval_to_its_standard_errors_place(report, figure):
    p = report["policies"][0]
    fig = figure(plots.estimates_figure([p], "95% CI (normal)"))
    labels = [t.get_text() for ax in fig.axes for side in ax.child_axes for t in side.get_yticklabels()]
    for e in p["estimates"].values():
        value, _, ci = estimate(e["value"], e["stderr"], e["ci"])
        assert f"{value} {ci}" in labels


def test_by_day_panels_are_one_per_policy_none_empty_and_no_blank_band_under_the_title(report, figure):
    fig = figure(plots.over_time_figure(report["policies"], report["primary_estimator"], "95% CI (normal)"))
    axes = fig.axes
    assert len(axes) == len(report["policies"])
    days = len(report["policies"][0]["by_day"])
    for ax in axes:
        data = [line.get_ydata() for line in ax.lines if len(line.get_xdata())]
        assert data and all(len(y) == days and np.isfinite(np.asarray(y, dtype=float)).any() for y in data)
        lo, hi = ax.get_ylim()
        assert any(lo <= v <= hi for y in data for v in np.asarray(y, dtype=float) if math.isfinite(v))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    top = max(axes, key=lambda a: a.get_position().y1).get_tightbbox(renderer)
    gap = fig.get_suptitle() and fig._suptitle.get_window_extent(renderer).y0 - top.y1
    assert 0 <= gap < 25  # pixels at 100 dpi: the title sits on the first panel (it was 70 px)


@pytest.mark.slow
def test_the_plots_render_with_an_outlier(report):
    pngs = render_plots({**report, "policies": with_outlier(report)})
    assert sorted(pngs) == ["comparisons", "estimates", "over_time", "weights"]
    assert all(data[:8] == b"\x89PNG\r\n\x1a\n" for data in pngs.values())


def test_the_tables_write_numbers_to_significant_digits(report):
    md = to_markdown(blocks(report, {kind: f"plots/{kind}.png" for kind in ("estimates", "comparisons", "over_time",
                                                                            "weights")}))
    cells = [c.strip() for line in md.splitlines() if line.startswith("|") for c in line.strip("|").split("|")]
    digits = [len(m.group(1).lstrip("0.").replace(".", "")) for c in cells
              for m in re.finditer(r"(?<![\w-])[-+]?(\d+\.\d+)(?![\w-])", c)]
    assert digits and max(digits) <= 5  # the example's estimates, to their standard errors' place (was 6: 0.352237)
    for p in report["policies"]:  # the by-day section: a table per policy
        assert f"### {p['label']} by day ({report['primary_estimator']})" in md
