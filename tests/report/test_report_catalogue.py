"""A report over a log with an action catalogue: MIPS as the primary estimator, its own weights' support, the
catalogue in the state cache's key, the coverage of 10^3 actions summarised."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from dr_scale.logs.catalogue import CATALOGUE_FILE, read_catalogue
from dr_scale.logs.writing import write_parquet
from dr_scale.ope.diagnostics import UNLOGGED_EXAMPLES
from dr_scale.report.make import make_report
from dr_scale.report.policies_file import parse_policies
from dr_scale.synthetic.item_world import generate_item_bandit

SIZES = dict(features=200, actions=1000, action_features=4, embedding_categories=10)


@pytest.fixture(scope="module")
def item_log(tmp_path_factory):
    folder = tmp_path_factory.mktemp("items") / "log"
    generate_item_bandit(str(folder), rows=2000, rows_per_part=1000, seed=3, **SIZES)
    return folder


def policies(estimators, min_support=10):
    return parse_policies({"estimators": estimators, "min_support": min_support,
                           "policy": [{"name": "target", "spec": "sparse:target_topk"},
                                      {"name": "uniform", "spec": "uniform"}]}, "<test>")


def support(folder) -> dict[str, tuple[int, int]]:
    """Counted by hand, per kind of weight: (rows with a positive weight, those of them with a click) — for IPS
    the rows whose logged item the target lists, for MIPS those whose logged item's category it lists."""
    embedding = read_catalogue(str(folder)).embedding
    table = pq.read_table(str(folder), columns=["action", "reward", "target_topk"])
    listed = table.column("target_topk").to_pylist()
    action, click = table.column("action").to_numpy(), table.column("reward").to_numpy() != 0
    item = np.array([any(p["action"] == a and p["prob"] > 0 for p in row) for row, a in zip(listed, action)])
    category = np.array([any(embedding[p["action"]] == embedding[a] and p["prob"] > 0 for p in row)
                         for row, a in zip(listed, action)])
    return {"IPS": (int(item.sum()), int((item & click).sum())),
            "MIPS": (int(category.sum()), int((category & click).sum()))}


@pytest.mark.slow
def test_mips_primary_report_counts_its_own_weights_and_compares(item_log, tmp_path):
    report, status = make_report(str(item_log), policies(["MIPS", "SNMIPS"]), str(tmp_path / "out"))
    assert status in (0, 4) and report["primary_estimator"] == "MIPS"
    target = next(p for p in report["policies"] if p["name"] == "target")
    matched, informative = support(item_log)["MIPS"]
    assert target["diagnostics"]["weights_kind"] == "marginal"
    assert target["diagnostics"]["matched_rows"] == matched
    assert target["diagnostics"]["matched_rows_with_reward"] == informative
    assert informative >= 10 and not target["insufficient_data"]  # IPS's support is a few rows, MIPS's hundreds
    assert not target["estimates"]["MIPS"]["insufficient_data"]
    # the pairwise comparison (built with the catalogue) exists and is V(target) − V(uniform) by MIPS
    pair = next(c for c in report["comparisons"] if c["policy"] == "target" and c["baseline"] == "uniform")
    values = {p["name"]: p["estimates"]["MIPS"]["value"] for p in report["policies"]}
    assert pair["value"] == pytest.approx(values["target"] - values["uniform"], rel=1e-9, abs=1e-12)


@pytest.mark.slow
def test_ips_flags_stay_those_of_the_logged_item(item_log, tmp_path):
    counts = support(item_log)
    (_, ips), (_, mips) = counts["IPS"], counts["MIPS"]
    assert ips + 1 < mips
    report, _ = make_report(str(item_log), policies(["IPS", "MIPS"], min_support=ips + 1), str(tmp_path / "out"))
    target = next(p for p in report["policies"] if p["name"] == "target")
    assert report["primary_estimator"] == "IPS" and "weights_kind" not in target["diagnostics"]
    assert target["diagnostics"]["matched_rows_with_reward"] == ips
    assert target["diagnostics"]["marginal"]["matched_rows_with_reward"] == mips
    assert target["insufficient_data"]  # the primary, IPS, rests on too few clicks; MIPS does not
    assert target["estimates"]["IPS"]["insufficient_data"] and not target["estimates"]["MIPS"]["insufficient_data"]


@pytest.mark.slow
def test_an_edited_catalogue_is_recomputed(item_log, tmp_path):
    folder = tmp_path / "log"
    folder.mkdir()
    for f in item_log.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    pf, cache = policies(["MIPS"]), str(tmp_path / "cache")
    first, _ = make_report(str(folder), pf, str(tmp_path / "a"), cache=cache)
    again, _ = make_report(str(folder), pf, str(tmp_path / "b"), cache=cache)
    assert {p["source"] for p in again["partitions"]} == {"cache"}
    catalogue = read_catalogue(str(folder))
    merged = np.where(catalogue.embedding == 1, 0, catalogue.embedding)  # categories 0 and 1 made one
    edited = type(catalogue)(catalogue.features, merged)
    write_parquet(edited.table(), str(folder / CATALOGUE_FILE))
    third, _ = make_report(str(folder), pf, str(tmp_path / "c"), cache=cache)
    assert {p["source"] for p in third["partitions"]} == {"read"}
    value = {r["policies"][0]["estimates"]["MIPS"]["value"] for r in (first, again)}
    assert len(value) == 1 and third["policies"][0]["estimates"]["MIPS"]["value"] not in value


@pytest.mark.slow
def test_coverage_of_many_actions_is_a_count_and_examples(item_log, tmp_path):
    report, _ = make_report(str(item_log), policies(["MIPS"]), str(tmp_path / "out"))
    target = next(p for p in report["policies"] if p["name"] == "target")
    d = target["diagnostics"]
    table = pq.read_table(str(item_log), columns=["action", "target_topk"])
    listed = {p["action"] for row in table.column("target_topk").to_pylist() for p in row if p["prob"] > 0}
    never = sorted(listed - set(table.column("action").to_numpy().tolist()))
    assert d["unlogged_action_count"] == len(never) > UNLOGGED_EXAMPLES
    assert d["unlogged_actions"] == never[:UNLOGGED_EXAMPLES]
    warning = next(w for w in target["warnings"] if "never took" in w)
    assert f"{len(never)} actions, e.g." in warning and len(warning) < 600
