"""report.html in a real headless Chromium (through its DevTools protocol, tests/report/chromium_page.py): every
image loads and the console has no error; the checker itself catches a broken image and a console error."""

from __future__ import annotations

import json

import pytest
from chromium_page import check_page, chromium

from dr_scale.report.make import make_report
from dr_scale.synthetic.example import example_paths

pytestmark = [pytest.mark.slow,  # a browser start and a report: seconds
              pytest.mark.skipif(chromium() is None, reason="no chromium on the PATH (CI installs it: .ci/run)")]


def test_the_checker_sees_a_broken_image_and_a_console_error(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><img alt="missing" src="missing.png">'
                    '<img alt="dot" src="data:image/gif;base64,R0lGODlhAQABAAAAACwAAAAAAQABAAA=">'
                    '<script>console.error("boom")</script></body></html>')
    seen = check_page(page.as_uri())
    assert {i["alt"]: i["width"] for i in seen.images} == {"missing": 0, "dot": 1}
    assert any("boom" in e for e in seen.errors) and any("missing.png" in e for e in seen.errors), seen.errors


def test_the_report_opens_in_chromium_with_every_image_and_no_console_error(tmp_path):
    logs, model = example_paths()
    policies = tmp_path / "policies.toml"
    policies.write_text(f'reward_model = "{model}"\nestimators = ["DM", "IPS", "DR", "SNIPS", "SNDR"]\n'
                        '[[policy]]\nname = "candidate"\nspec = "column:target_action"\n'
                        '[[policy]]\nname = "always-2"\nspec = "constant:2"\n')
    report, status = make_report(logs, str(policies), str(tmp_path / "report"), window="3d")
    assert status == 0 and report["policies"]
    html = tmp_path / "report" / "report.html"
    seen = check_page(html.as_uri())
    plots = json.loads((tmp_path / "report" / "report.json").read_text())["files"]
    assert len(seen.images) == sum(name.startswith("plots/") for name in plots) >= 4
    assert all(i["complete"] and i["width"] > 0 for i in seen.images), seen.images
    assert seen.errors == []
