"""``dr-scale report`` on a real S3-compatible server (moto on 127.0.0.1) through s3fs.

A synthetic week of logs is written to a fresh bucket; the policies file, the reward
model, the report and the state cache all live in the bucket too. Credentials reach
the command through ``DR_SCALE_STORAGE_OPTIONS`` only and never appear in its output.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import s3fs
from s3_server import s3_bucket, s3_endpoint  # noqa: F401 - fixtures

from dr_scale.cli import main
from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.report.make import compute_report
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import write_example

SECRET = "s3cr3t-that-must-never-be-printed-7f3a"
POLICIES = """
reward_model = "../share/reward_model.npz"   # relative to this file, inside the bucket
[[policy]]
name = "candidate"
spec = "column:target_action"
[[policy]]
name = "always-1"
spec = "constant:1"
"""


@pytest.fixture
def s3_week(s3_bucket, monkeypatch):  # noqa: F811
    """(bucket URL, storage options, policies URL) with a synthetic week of logs in the bucket."""
    bucket, options = s3_bucket
    options = {**options, "secret": SECRET}
    write_example(f"{bucket}/share", seed=11, storage_options=options)
    fs = s3fs.S3FileSystem(**options)
    fs.pipe(f"{bucket}/config/policies.toml".removeprefix("s3://"), POLICIES.encode())
    monkeypatch.setenv("DR_SCALE_STORAGE_OPTIONS", json.dumps(options))
    return bucket, options, f"{bucket}/config/policies.toml"


def read_json(options, url):
    fs = s3fs.S3FileSystem(**options)
    fs.invalidate_cache()
    return json.loads(fs.cat(url.removeprefix("s3://")))


def run(bucket, policies, *extra):
    return main(["report", "--logs", f"{bucket}/share/logs", "--policies", policies, "--window", "7d",
                 "--out", f"{bucket}/reports/weekly", "--no-progress", *extra])


def test_weekly_report_in_the_bucket_then_a_daily_run(s3_week, capsys):
    bucket, options, policies = s3_week
    assert run(bucket, policies) == 0
    report = read_json(options, f"{bucket}/reports/weekly/report.json")
    assert report["status"] == "ok" and report["rows"] == 14000 and len(report["partitions"]) == 7
    model = LinearRewardModel.load(f"{bucket}/share/reward_model.npz", options)
    evaluation = Evaluation("column:target_action", ["DM", "IPS", "DR", "SNIPS", "SNDR"], reward_model=model)
    direct = evaluate_log(f"{bucket}/share/logs", evaluation, storage_options=options).to_dict()
    for name, e in direct["estimates"].items():
        assert report["policies"][0]["estimates"][name]["value"] == pytest.approx(e["value"], rel=1e-12)
    fs = s3fs.S3FileSystem(**options)
    names = {p.rsplit("/", 1)[-1] for p in fs.ls(f"{bucket}/reports/weekly".removeprefix("s3://"))}
    assert {"report.json", "report.md", "report.html", "plots", "state-cache"} <= names
    entries = fs.find(f"{bucket}/reports/weekly/state-cache".removeprefix("s3://"))
    assert len(entries) == 7 * 3  # a state per partition per policy, and for the pair of policies (comparisons)
    assert json.loads(fs.cat(entries[0]))["identity"]["checksum"].startswith("ETag=")

    # the next day: one partition rewritten (its ETag changes, so only it is read again), one deleted
    day = f"{bucket}/share/logs/date=2026-11-04/part-00000.parquet"
    with fs.open(day.removeprefix("s3://"), "rb") as f:
        table = pq.read_table(f)
    table = table.set_column(table.schema.get_field_index("reward"), "reward",
                             pa.array(1.0 - table.column("reward").to_numpy()))
    write_log(table, day, n_features=50, n_actions=3, storage_options=options)
    fs.rm(f"{bucket}/share/logs/date=2026-11-06".removeprefix("s3://"), recursive=True)
    assert run(bucket, policies) == 0
    daily = read_json(options, f"{bucket}/reports/weekly/report.json")
    assert [p["source"] for p in daily["partitions"]] == ["cache"] * 3 + ["read"] + ["cache"] * 2
    assert "2026-11-06" not in [d["date"] for d in daily["policies"][0]["by_day"]]
    # a full recomputation (no cache) gives exactly the same numbers
    full = compute_report(f"{bucket}/share/logs", policies, None, window="7d", storage_options=options)
    assert {p["source"] for p in full["partitions"]} == {"read"}
    assert json.loads(json.dumps(full["policies"])) == daily["policies"]

    # credentials never printed, never written
    out, err = capsys.readouterr()
    assert "6 partitions (1 read, 5 from cache)" in err
    assert SECRET not in out + err
    for name in ("report.json", "report.md", "report.html"):
        assert SECRET.encode() not in fs.cat(f"{bucket}/reports/weekly/{name}".removeprefix("s3://"))
