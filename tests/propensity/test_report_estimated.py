"""``dr-scale report`` on a daily log share without propensities: refused without a propensity model, written with
``--estimate-propensity`` (its diagnostics in report.json and the HTML, the paired comparisons weighted by the same
estimated propensities), and the state cache as it is keyed (by the propensity model's parameters)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import cli, error_line

from dr_scale.synthetic.bandit import generate_bandit

DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]
ROWS_PER_DAY = 1000


@pytest.fixture(scope="module")
def share(tmp_path_factory):
    """Three days of a generated world (0/1 rewards, 4 actions), propensity column hidden; a reward model fitted on
    it; a policies file with two candidates (so the report also has their paired comparison)."""
    root = tmp_path_factory.mktemp("daily")
    logs = root / "logs"
    generate_bandit(str(logs), rows=ROWS_PER_DAY * len(DAYS), features=120, actions=4, seed=3, days=len(DAYS),
                    uniform_share=0.0, hide_propensity=True)
    assert sorted(p.name for p in logs.glob("date=*")) == [f"date={d}" for d in DAYS]
    from dr_scale.cli import main

    assert main(["fit", str(logs), "--out", str(root / "rho.npz"), "--lam", "10", "--no-progress"]) == 0
    policies = root / "policies.toml"
    policies.write_text(f'reward_model = "{root / "rho.npz"}"\nestimators = ["DR", "IPS", "SNIPS"]\n'
                        '[[policy]]\nname = "uniform"\nspec = "uniform"\n'
                        '[[policy]]\nname = "first"\nspec = "constant:0"\n')
    return root, logs, policies


@pytest.mark.slow
def test_a_share_without_propensities_and_no_model_is_one_line(share, tmp_path, capsys):
    _, logs, policies = share
    code, out, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path / "r",
                         "--no-progress")
    line = error_line(err)
    assert code == 2 and out == ""
    assert f"{logs}: column 'propensity': missing column" in line and "--estimate-propensity" in line
    assert "bad partition" not in err  # refused before any partition is read
    assert not (tmp_path / "r").exists()  # nothing written


def report_run(capsys, logs, policies, out, *extra) -> tuple[dict, str]:
    code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", out, "--no-progress", *extra)
    assert code == 0, err
    return json.loads((Path(out) / "report.json").read_text()), err


def cache_line(err: str) -> str:
    (line,) = [x for x in err.splitlines() if "from cache)" in x]
    return line


@pytest.mark.slow  # fits the propensity model, reports twice
def test_report_estimate_propensity_writes_the_diagnostics(share, tmp_path, capsys):
    _, logs, policies = share
    out = tmp_path / "rep"
    report, err = report_run(capsys, logs, policies, out, "--estimate-propensity", "--folds", "2")
    assert f"model written to {out / 'propensity-model.npz'}" in err and (out / "propensity-model.npz").exists()
    assert report["status"] == "ok" and report["bad_partitions"] == []
    assert [p["name"] for p in report["policies"]] == ["uniform", "first"]
    for p in report["policies"]:
        d = p["propensity"]
        assert d["rows"] == ROWS_PER_DAY * len(DAYS) and d["floor"] == 0.001
        assert 0 <= d["ece"] < 0.1 and d["log_loss"]["model"] < d["log_loss"]["marginal"] < d["log_loss"]["uniform"]
        assert len(d["reliability"]) == 4  # one group per action
        assert set(p["estimates"]) == {"DR", "IPS", "SNIPS"}
    html = (out / "report.html").read_text()
    assert "Estimated propensities" in html and "reliability of the estimated propensities" in html
    assert any(name.startswith("plots/reliability-") for name in report["files"])
    # The paired comparison is weighted by the same estimated propensities: DR is linear in the rows, so
    # V̂(uniform) − V̂(first) paired equals the difference of the two estimates.
    (pair,) = [c for c in report["comparisons"] if c["baseline"] == "first"]
    values = {p["name"]: p["estimates"]["DR"]["value"] for p in report["policies"]}
    assert pair["value"] == pytest.approx(values["uniform"] - values["first"], rel=1e-9, abs=1e-12)
    # The model file it wrote, given back with --propensity-model: the same report figures.
    again, _ = report_run(capsys, logs, policies, tmp_path / "by-file", "--propensity-model",
                          out / "propensity-model.npz")
    assert [p["estimates"] for p in again["policies"]] == [p["estimates"] for p in report["policies"]]
    assert [p["propensity"] for p in again["policies"]] == [p["propensity"] for p in report["policies"]]


@pytest.mark.slow  # fits the propensity model three times
def test_the_state_cache_is_keyed_by_the_propensity_model(share, tmp_path, capsys):
    """A refit on a share that grew is another model: every partition is recomputed. On the same partitions the
    fit is the same model (deterministic), and a fixed ``--propensity-model`` file reads only the new day."""
    root, full, policies = share
    logs = tmp_path / "logs"
    for day in DAYS[:2]:
        shutil.copytree(full / f"date={day}", logs / f"date={day}")
    fixed = tmp_path / "pi0.npz"
    code, _, err = cli(capsys, "fit-propensity", logs, "--out", fixed, "--folds", "2", "--no-progress")
    assert code == 0, err
    runs = {"refit": ["--estimate-propensity", "--folds", "2"], "fixed": ["--propensity-model", fixed]}
    for name, extra in runs.items():
        _, err = report_run(capsys, logs, policies, tmp_path / name, *extra)
        assert "(2 read, 0 from cache)" in cache_line(err)
        _, err = report_run(capsys, logs, policies, tmp_path / name, *extra)
        assert "(0 read, 2 from cache)" in cache_line(err)  # the same partitions: the same model, all cached
    shutil.copytree(full / f"date={DAYS[2]}", logs / f"date={DAYS[2]}")
    _, err = report_run(capsys, logs, policies, tmp_path / "refit", *runs["refit"])
    assert "(3 read, 0 from cache)" in cache_line(err)
    _, err = report_run(capsys, logs, policies, tmp_path / "fixed", *runs["fixed"])
    assert "(1 read, 2 from cache)" in cache_line(err)
