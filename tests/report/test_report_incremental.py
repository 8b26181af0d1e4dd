"""Incremental report states equal a full recomputation exactly; the cache is verified, never trusted.

Real Parquet partitions in a local folder and in ``memory://``; the S3 case is in
test_report_s3.py.
"""

from __future__ import annotations

import datetime
import json
import uuid
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import Evaluation
from dr_scale.report.build import build_states, fill_dimensions
from dr_scale.report.make import evaluations_of
from dr_scale.report.partitions import list_partitions, parse_window, partition_date, select_window
from dr_scale.report.policies_file import load_policies
from dr_scale.report.state_cache import StateCache
from dr_scale.synthetic.example import example_paths

POLICIES = str(Path(__file__).parents[2] / "pipelines" / "report_policies.toml")
DAYS = [f"2026-11-0{i}" for i in range(1, 8)]


def copy_days(root: str, days=DAYS) -> None:
    """Copy the bundled example's partitions of ``days`` under ``root`` (any fsspec URL)."""
    logs, _ = example_paths()
    fs, path = fsspec.core.url_to_fs(root)
    for day in days:
        fs.makedirs(f"{path}/date={day}", exist_ok=True)
        fs.put(f"{logs}/date={day}/part-00000.parquet", f"{path}/date={day}/part-00000.parquet")


def build(logs: str, cache: str | None):
    fs, parts = list_partitions(logs)
    evaluations = evaluations_of(load_policies(POLICIES))
    return build_states(fs, parts, evaluations, StateCache(cache) if cache else None)


def merged(states) -> dict:
    """Totals and per-day states as plain dicts (floats compared exactly)."""
    return {"totals": {n: s.to_dict() for n, s in states.totals.items()},
            "by_day": {n: {d: s.to_dict() for d, s in days.items()} for n, days in states.by_day.items()}}


@pytest.fixture
def local_share(tmp_path):
    """(logs URL, cache URL) in a local folder."""
    return str(tmp_path / "logs"), str(tmp_path / "cache")


@pytest.fixture(params=["local", "memory"])
def share(request, local_share):
    """(logs URL, cache URL) in a local folder or in memory://."""
    if request.param == "local":
        yield local_share
        return
    root = f"memory://report-{uuid.uuid4().hex}"
    yield f"{root}/logs", f"{root}/cache"
    fsspec.filesystem("memory").rm(root.removeprefix("memory://"), recursive=True)


def rewrite_rewards(url: str) -> None:
    """Flip every reward of one partition (same rows, same size class), atomically."""
    fs, path = fsspec.core.url_to_fs(url)
    with fs.open(path, "rb") as f:
        table = pq.read_table(f)
    flipped = table.set_column(table.schema.get_field_index("reward"), "reward",
                               pa.array(1.0 - table.column("reward").to_numpy()))
    write_log(flipped, url, n_features=50, n_actions=3)


def test_daily_run_reads_only_the_new_day_and_equals_full(share):
    logs, cache = share
    copy_days(logs, DAYS[:6])
    first = build(logs, cache)
    assert len(first.computed) == 6 and not first.bad
    copy_days(logs, DAYS[6:])
    daily = build(logs, cache)
    assert [partition_date(p) for p in daily.computed] == [datetime.date(2026, 11, 7)]
    full = build(logs, None)
    assert len(full.computed) == 7
    assert merged(daily) == merged(full)
    assert sum(daily.rows.values()) == 7 * 2000
    again = build(logs, cache)
    assert again.computed == [] and merged(again) == merged(full)


def test_runs_of_partitions_per_task_give_the_same_states(local_share, monkeypatch):
    """A report of many partitions reads them 8 per task (parts_bag): the same per-partition states, merged on the
    client in the same order, written to the cache and read back; here on the 7 days with the threshold lowered
    (one task of 6 partitions, then one of the day left after a cached run)."""
    import dr_scale.outofcore.mergeable as mergeable
    import dr_scale.report.build as report_build

    tasks = []

    def counted(bag, **kwargs):
        """The report's compute, recording the tasks that read partitions."""
        tasks.append(bag.npartitions)
        return compute(bag, **kwargs)

    compute = report_build.compute
    monkeypatch.setattr(report_build, "compute", counted)
    logs, cache = local_share
    copy_days(logs, DAYS[:6])
    per_partition = build(logs, None)
    monkeypatch.setattr(mergeable, "GROUP_FROM", 2)
    grouped = build(logs, cache)
    assert tasks == [6, 1]  # a task per partition; then one for the run of six
    assert len(grouped.computed) == 6 and merged(grouped) == merged(per_partition)
    copy_days(logs, DAYS[6:])
    daily = build(logs, cache)
    assert [partition_date(p) for p in daily.computed] == [datetime.date(2026, 11, 7)]
    assert merged(daily) == merged(build(logs, None))


def test_changed_partition_is_recomputed(share):
    logs, cache = share
    copy_days(logs)
    before = build(logs, cache)
    rewrite_rewards(f"{logs}/date=2026-11-03/part-00000.parquet")
    after = build(logs, cache)
    assert [partition_date(p) for p in after.computed] == [datetime.date(2026, 11, 3)]
    assert set(after.cache_rejected.values()) == {"partition changed"}
    assert merged(after) == merged(build(logs, None))
    # the change shows: the on-policy value of that day becomes 1 − before
    day_before = before.by_day["candidate"]["2026-11-03"].weights.on_policy_value
    day_after = after.by_day["candidate"]["2026-11-03"].weights.on_policy_value
    assert day_after == pytest.approx(1 - day_before, abs=1e-12)


def test_deleted_partition_drops_out(local_share):
    logs, cache = local_share
    copy_days(logs)
    build(logs, cache)
    fs, path = fsspec.core.url_to_fs(logs)
    fs.rm(f"{path}/date=2026-11-02", recursive=True)
    after = build(logs, cache)
    assert after.computed == []
    assert "2026-11-02" not in after.by_day["candidate"]
    assert after.totals["candidate"].weights.n == 6 * 2000
    assert merged(after) == merged(build(logs, None))


@pytest.mark.parametrize("damage", ["truncate", "edit-number", "garbage"])
def test_damaged_cache_entry_is_recomputed_not_trusted(local_share, damage):
    logs, cache = local_share
    copy_days(logs)
    full = build(logs, cache)
    fs, root = fsspec.core.url_to_fs(cache)
    entry = sorted(fs.find(root))[0]
    raw = fs.cat(entry)
    if damage == "truncate":
        bad = raw[: len(raw) // 2]
    elif damage == "edit-number":  # still valid JSON, wrong content: only the checksum catches it
        data = json.loads(raw)
        data["state"]["weights"]["sum_reward"] += 1.0
        bad = json.dumps(data).encode()
    else:
        bad = b"\x00not json"
    fs.pipe(entry, bad)
    after = build(logs, cache)
    (recomputed,) = after.computed
    assert list(after.cache_rejected) == [recomputed]
    reason = after.cache_rejected[recomputed]
    assert reason == "checksum mismatch" if damage == "edit-number" else reason.startswith("unreadable")
    assert merged(after) == merged(full)
    assert build(logs, cache).computed == []  # the entry was rewritten and is trusted again


def test_other_policies_file_does_not_reuse_states(tmp_path):
    logs, cache = str(tmp_path / "logs"), str(tmp_path / "cache")
    copy_days(logs, DAYS[:2])
    build(logs, cache)
    other = tmp_path / "other.toml"
    other.write_text('estimators = ["IPS", "SNIPS"]\n[[policy]]\nname = "candidate"\nspec = "column:target_action"\n')
    fs, parts = list_partitions(logs)
    states = build_states(fs, parts, evaluations_of(load_policies(str(other))), StateCache(cache))
    assert len(states.computed) == 2  # new fingerprint: nothing reused
    assert set(states.totals["candidate"].estimators) == {"IPS", "SNIPS"}


def test_window_keeps_the_last_days(tmp_path):
    logs = str(tmp_path / "logs")
    copy_days(logs)
    _, parts = list_partitions(logs)
    chosen, span = select_window(parts, parse_window("3d"))
    assert [p.day for p in chosen] == ["2026-11-05", "2026-11-06", "2026-11-07"]
    assert span == {"days": 3, "first": "2026-11-05", "last": "2026-11-07"}
    chosen, _ = select_window(parts, parse_window("1w"), until=datetime.date(2026, 11, 4))
    assert [p.day for p in chosen] == DAYS[:4]
    assert select_window(parts, parse_window("all"))[0] == parts
    with pytest.raises(ValueError, match="^window '7 fortnights': use Nd"):
        parse_window("7 fortnights")
    with pytest.raises(FileNotFoundError, match="2026-12"):
        select_window(parts, 2, until=datetime.date(2026, 12, 31))


def test_logs_without_dates_have_no_days(tmp_path):
    logs, _ = example_paths()
    flat = tmp_path / "flat"
    flat.mkdir()
    for day in DAYS[:3]:
        (flat / f"part-{day}.parquet").write_bytes((Path(logs) / f"date={day}" / "part-00000.parquet").read_bytes())
    states = build(str(flat), None)
    assert states.by_day == {"candidate": {}, "always-0": {}, "always-2": {}}
    assert states.totals["candidate"].weights.n == 3 * 2000
    assert merged(states)["totals"] == merged(build(f"{logs}/date=2026-11-0[1-3]/*.parquet", None))["totals"]


def test_building_states_does_not_change_the_callers_evaluations():
    logs, _ = example_paths()
    fs, parts = list_partitions(logs)
    evaluations = {"target": Evaluation("column:target_action", ["IPS", "SNIPS"])}
    before = {"target": (None, None)}  # to be filled from the log's metadata
    assert {name: (e.n_actions, e.n_features) for name, e in evaluations.items()} == before
    filled = fill_dimensions(evaluations, fs, parts)
    assert {name: (e.n_actions, e.n_features) for name, e in evaluations.items()} == before
    assert all((e.n_actions, e.n_features) == (3, 50) for e in filled.values())
    build_states(fs, parts, evaluations, None)
    assert {name: (e.n_actions, e.n_features) for name, e in evaluations.items()} == before
