"""``dr-scale report`` end to end: the bundled example, the files, crashes while writing, bad partitions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dr_scale.cli import main
from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.report import render
from dr_scale.report.build import build_states
from dr_scale.report.make import evaluations_of, make_report
from dr_scale.report.partitions import list_partitions
from dr_scale.report.policies_file import load_policies
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import example_paths

ROOT = Path(__file__).parents[2]
POLICIES = str(ROOT / "pipelines" / "report_policies.toml")
LOGS, MODEL = example_paths()
REPORT_FILES = ("report.json", "report.md", "report.html")


def report_args(logs, out, *extra):
    return ["report", "--logs", str(logs), "--policies", POLICIES, "--out", str(out), "--no-progress", *extra]


@pytest.fixture(scope="module")
def example_report(tmp_path_factory):
    """The bundled example's weekly report, written once by the command line."""
    out = tmp_path_factory.mktemp("example-report")
    assert main(report_args(LOGS, out, "--window", "7d")) == 0
    return out, json.loads((out / "report.json").read_text())


@pytest.mark.slow
def test_example_report_matches_dr_scale_evaluate(example_report):
    out, report = example_report
    assert report["schema"] == "dr-scale/report" and report["schema_version"] == 1
    assert report["status"] == "ok" and report["window"] == {"days": 7, "first": "2026-11-01", "last": "2026-11-07"}
    assert [p["name"] for p in report["policies"]] == ["candidate", "always-0", "always-2"]
    assert report["rows"] == 14000 and {p["source"] for p in report["partitions"]} == {"read"}
    candidate = report["policies"][0]
    direct = evaluate_log(LOGS, Evaluation("column:target_action", ["DM", "IPS", "DR", "SNIPS", "SNDR"],
                                           reward_model=LinearRewardModel.load(MODEL))).to_dict()
    for name, e in direct["estimates"].items():  # the tree reduction merges in another order: 1e-12
        got = candidate["estimates"][name]
        assert got["n"] == e["n"] == 14000
        np.testing.assert_allclose([got["value"], got["stderr"], *got["ci"]], [e["value"], e["stderr"], *e["ci"]],
                                   rtol=1e-12)
    assert candidate["diagnostics"]["ess"] == pytest.approx(direct["diagnostics"]["ess"], rel=1e-12)
    assert [d["date"] for d in candidate["by_day"]] == [f"2026-11-0{i}" for i in range(1, 8)]
    assert sum(d["estimates"]["DR"]["n"] for d in candidate["by_day"]) == 14000
    # poor overlap is flagged where ESS/n < 0.1, and only there
    verdicts = {p["name"]: (p["diagnostics"]["overlap"], p["diagnostics"]["ess_ratio"] < 0.1)
                for p in report["policies"]}
    assert all((v == "poor") == low for v, low in verdicts.values()) and verdicts["always-2"][0] == "poor"
    assert any("poor overlap" in w for w in report["policies"][2]["warnings"])


def test_example_report_files(example_report):
    out, report = example_report
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and 'src="plots/' not in html  # self-contained
    md = (out / "report.md").read_text()
    pngs = sorted(p.name for p in (out / "plots").iterdir())
    assert len(pngs) == 4 and all(f"(plots/{name})" in md for name in pngs)
    assert all((out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in pngs)
    assert "always-2" in md and "poor overlap" in md and "2026-11-07" in md
    import hashlib

    for name, digest in report["files"].items():  # the manifest describes the files beside it
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest


@pytest.mark.slow
def test_report_job_writes_to_memory():
    """``dr-scale run pipelines/report.toml`` with the output in memory://."""
    out = f"memory://report-{uuid.uuid4().hex}"
    assert main(["run", str(ROOT / "pipelines" / "report.toml"), "--no-progress", "--set", f"logs={LOGS}",
                 "--set", f"policies={POLICIES}", "--set", f"out={out}", "--set", "window=2d"]) == 0
    fs = fsspec.filesystem("memory")
    report = json.loads(fs.cat(f"{out.removeprefix('memory://')}/report.json"))
    assert report["status"] == "ok" and report["window"] == {"days": 2, "first": "2026-11-06", "last": "2026-11-07"}
    assert fs.exists(f"{out.removeprefix('memory://')}/report.html")
    fs.rm(out.removeprefix("memory://"), recursive=True)


# -- crashes while writing -------------------------------------------------------------
@pytest.fixture(scope="module")
def old_report_dir(tmp_path_factory):
    """A complete earlier report (3 days), written once; each test works on a copy."""
    out = tmp_path_factory.mktemp("old-report") / "out"
    make_report(LOGS, POLICIES, str(out), window="3d")
    return out


@pytest.fixture
def old_report(old_report_dir, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(old_report_dir, out)
    return out, snapshot(out)


def snapshot(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in REPORT_FILES}


def assert_old_report_intact(out: Path, before: dict[str, bytes]) -> None:
    assert snapshot(out) == before
    json.loads(before["report.json"])  # and it is complete
    md = before["report.md"].decode()
    for png in (out / "plots").glob("*.png"):
        assert png.read_bytes()[:4] == b"\x89PNG"
    for ref in [line.split("](")[1].rstrip(")") for line in md.splitlines() if line.startswith("![")]:
        assert (out / ref).exists()  # the old markdown still finds its plots


@pytest.mark.slow
def test_crash_while_rendering_leaves_the_old_report(old_report, monkeypatch):
    out, before = old_report

    def boom(*args, **kwargs):
        raise RuntimeError("injected crash in the renderer")

    monkeypatch.setattr(render.plots, "weights_plot", boom)
    with pytest.raises(RuntimeError, match="injected"):
        make_report(LOGS, POLICIES, str(out), window="7d")
    assert_old_report_intact(out, before)
    assert not [p for p in out.rglob(".*tmp-*")]


@pytest.mark.slow
def test_crash_half_way_through_writing_files_leaves_the_old_report(old_report, monkeypatch):
    out, before = old_report
    import fsspec.implementations.local as local

    real_open, opened = local.LocalFileSystem._open, []

    def failing_open(self, path, mode="rb", **kwargs):
        f = real_open(self, path, mode, **kwargs)
        if "w" in mode and "tmp-" in path and "state-cache" not in path:
            opened.append(path)
            if len(opened) == 5:  # the 5th staged file (report.html): half written, then the disk fails
                real_write = f.write
                f.write = lambda data: (real_write(data[: len(data) // 2]), (_ for _ in ()).throw(OSError("disk full")))
        return f

    monkeypatch.setattr(local.LocalFileSystem, "_open", failing_open)
    with pytest.raises(OSError, match="disk full"):
        make_report(LOGS, POLICIES, str(out), window="7d")
    assert len(opened) == 5
    assert_old_report_intact(out, before)
    assert not [p for p in out.rglob(".report*")]  # temporaries removed


KILL_DURING_WRITE = """
import os, sys
import fsspec.implementations.local as local
real_open, n = local.LocalFileSystem._open, [0]
def open_then_die(self, path, mode="rb", **kw):
    f = real_open(self, path, mode, **kw)
    if "w" in mode and "tmp-" in path and "state-cache" not in path:
        n[0] += 1
        if n[0] == 4:
            f.write(b"half a file")
            f.flush()
            os._exit(137)  # like kill -9: no cleanup at all
    return f
local.LocalFileSystem._open = open_then_die
import argparse
from dr_scale.commands import report  # the command itself, without importing every other sub-command
parser = argparse.ArgumentParser()
report.add_parser(parser.add_subparsers())
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""


@pytest.mark.slow
def test_killed_mid_write_leaves_the_old_report(old_report):
    out, before = old_report
    proc = subprocess.run([sys.executable, "-c", KILL_DURING_WRITE, *report_args(LOGS, out, "--window", "7d")],
                          capture_output=True, timeout=120)
    assert proc.returncode == 137
    assert_old_report_intact(out, before)
    report, status = make_report(LOGS, POLICIES, str(out), window="7d")  # the next run recovers
    assert status == 0 and json.loads((out / "report.json").read_text())["window"]["days"] == 7


# -- bad partitions --------------------------------------------------------------------
@pytest.fixture
def share_with_bad_partitions(tmp_path):
    """The example week with a bad propensity on 11-03 and a drifted schema (reward as text) on 11-05."""
    logs = tmp_path / "logs"
    for day in range(1, 8):
        table = pq.read_table(f"{LOGS}/date=2026-11-0{day}/part-00000.parquet")
        dest = str(logs / f"date=2026-11-0{day}" / "part-00000.parquet")
        if day == 3:
            p = table.column("propensity").to_numpy().copy()
            p[10] = 0.0
            table = table.set_column(table.schema.get_field_index("propensity"), "propensity", pa.array(p))
            write_bad(table, dest)
        elif day == 5:
            table = table.set_column(table.schema.get_field_index("reward"), "reward",
                                     pa.array(table.column("reward").to_numpy().astype(str)))
            write_bad(table, dest)
        else:
            write_log(table, dest, n_features=50, n_actions=3)
    return logs


def write_bad(table: pa.Table, dest: str) -> None:
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, dest)  # bypasses write_log's validation, as a faulty producer would


def test_bad_partitions_fail_the_command_by_name(share_with_bad_partitions, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(report_args(share_with_bad_partitions, out)) == 3
    err = capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "failed" and report["policies"] == []
    bad = {b["path"].split("/")[-2]: b["error"] for b in report["bad_partitions"]}
    assert set(bad) == {"date=2026-11-03", "date=2026-11-05"}
    assert "'propensity'" in bad["date=2026-11-03"] and "outside (0, 1]" in bad["date=2026-11-03"]
    assert "'reward'" in bad["date=2026-11-05"] and "wrong type" in bad["date=2026-11-05"]
    for b in report["bad_partitions"]:
        assert b["path"] in err
    assert "7 partitions (5 read, 0 from cache, 2 bad), status failed" in err
    md = (out / "report.md").read_text()
    assert "Bad partitions" in md and "date=2026-11-03" in md and "date=2026-11-05" in md


@pytest.mark.slow
def test_skip_bad_partitions_reports_over_the_rest(share_with_bad_partitions, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(report_args(share_with_bad_partitions, out, "--skip-bad-partitions")) == 0
    err = capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "partial" and report["bad_partitions"] == []
    skipped = [b["path"] for b in report["skipped_partitions"]]
    assert [s.split("/")[-2] for s in skipped] == ["date=2026-11-03", "date=2026-11-05"]
    assert all(f"skipped: {s}" in err for s in skipped)
    # the estimates are exactly those of a share without the bad partitions
    good = tmp_path / "good"
    for day in (1, 2, 4, 6, 7):
        src = share_with_bad_partitions / f"date=2026-11-0{day}"
        (good / src.name).mkdir(parents=True)
        (good / src.name / "part-00000.parquet").write_bytes((src / "part-00000.parquet").read_bytes())
    evaluations = evaluations_of(load_policies(POLICIES))
    clean = build_states(*list_partitions(str(good)), evaluations, None)
    for p in report["policies"]:
        expected = evaluations[p["name"]].result(clean.totals[p["name"]]).to_dict()
        assert p["estimates"] == json.loads(json.dumps(expected["estimates"]))
    assert report["rows"] == 5 * 2000


def test_schema_drift_in_metadata_is_a_bad_partition(tmp_path):
    logs = tmp_path / "logs"
    for day in (1, 2):
        table = pq.read_table(f"{LOGS}/date=2026-11-0{day}/part-00000.parquet")
        write_log(table, str(logs / f"date=2026-11-0{day}"), n_features=50, n_actions=3 if day == 1 else 4)
    report, status = make_report(str(logs), POLICIES, str(tmp_path / "out"))
    assert status == 3
    (bad,) = report["bad_partitions"]
    assert "date=2026-11-02" in bad["path"] and "n_actions=4" in bad["error"]


# -- the policies file -----------------------------------------------------------------
def test_yaml_policies_file_equals_toml(tmp_path):
    import yaml

    from dr_scale.io.tomlcompat import tomllib

    data = tomllib.loads(Path(POLICIES).read_text())
    data["reward_model"] = MODEL
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    pf = load_policies(str(tmp_path / "p.yaml"))
    toml = load_policies(POLICIES)
    assert pf.policies == toml.policies and pf.estimators == toml.estimators
    assert Path(toml.reward_model).resolve() == Path(MODEL).resolve()  # relative to the policies file


@pytest.mark.slow
def test_the_report_shows_the_reward_models_calibration(tmp_path, example_report):
    """With a model fitted by ``dr-scale fit``, the report carries its fit and its calibration on its own rows (the
    record in the model's file: DM of the logging policy, the own mean, the deciles) as text, table and plot; the
    bundled example's model, which records none, says so."""
    from dr_scale.reward.files import load_reward_model

    model = tmp_path / "rm.npz"
    assert main(["fit", LOGS, "--folds", "2", "--out", str(model), "--no-progress"]) == 0
    policies = tmp_path / "p.toml"
    policies.write_text(Path(POLICIES).read_text().replace(
        next(line for line in Path(POLICIES).read_text().splitlines() if line.startswith("reward_model")),
        f'reward_model = "{model}"'))
    out = tmp_path / "out"
    assert main(["report", "--logs", LOGS, "--policies", str(policies), "--out", str(out), "--no-progress",
                 "--window", "7d"]) == 0
    report = json.loads((out / "report.json").read_text())
    record = load_reward_model(str(model)).metadata["calibration"]
    assert report["reward_model_fit"]["calibration"] == record and report["reward_model_fit"]["folds"] == 2
    md = (out / "report.md").read_text()
    section = md[md.index("## Reward model"):md.index("## Comparisons")]
    assert f"Calibration on the {record['rows']:,} rows it was fitted on (out of fold)" in section
    assert "![reward model calibration by decile of ρ̂](plots/calibration-" in section
    assert section.count("\n| ") == 1 + len(record["deciles"])  # the header and a row a decile
    bundled = (example_report[0] / "report.md").read_text()
    assert "Its file records no calibration" in bundled


@pytest.mark.parametrize("text, message", [
    ('[[policy]]\nname = "x"\n', "policy.#1.spec: missing"),
    ('[[policy]]\nspec = "nonsense"\n', "bad policy"),
    ('estimators = ["DR"]\n[[policy]]\nspec = "constant:0"\n', "needs a reward model"),
    ('estimators = ["XX"]\n[[policy]]\nspec = "constant:0"\n', "unknown estimator"),
    ('colour = 1\n[[policy]]\nspec = "constant:0"\n', "unknown key"),
    ('[[policy]]\nspec = "constant:0"\n[[policy]]\nspec = "constant:0"\n', "two policies"),
])
def test_bad_policies_file_is_a_clear_error(tmp_path, capsys, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    assert main(["report", "--logs", LOGS, "--policies", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err
    assert not (tmp_path / "o").exists()


def test_every_day_has_the_running_estimate_and_its_confidence_sequence(example_report):
    """report.json: per day, the estimates on the log so far (``running``), each with ``cs`` ⊇ its ``ci``; the
    last day's running estimate is the window's; the page shows the sequence beside the fixed-time interval."""
    out, report = example_report
    for p in report["policies"]:
        seen = 0
        for day in p["by_day"]:
            seen += day["estimates"]["DR"]["n"]
            for name, run in day["running"].items():
                assert run["n"] == seen
                assert day["cs"][name] == run["cs"]
                lo, hi = run["cs"]
                assert lo <= run["ci"][0] <= run["value"] <= run["ci"][1] <= hi, (p["name"], day["date"], name)
        for name, e in p["estimates"].items():
            np.testing.assert_allclose(p["by_day"][-1]["running"][name]["cs"], e["cs"], rtol=1e-9)
            assert e["insufficient_data"] is False
    assert "confidence sequence" in (out / "report.md").read_text()
