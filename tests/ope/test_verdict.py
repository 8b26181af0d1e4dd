"""The verdict: a policy whose value rests on one click is "no reliable estimate" by every estimator that reads the
weights, DM is "model-based", the support is not "ok", and every table and JSON says so — for one policy and for
several compared in one pass."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from dr_scale.ope.diagnostics import DEFAULT_MIN_ESS, WeightStats
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.report.render import _estimate, _support
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import example_paths

LOGS, MODEL = example_paths()
ESTIMATORS = ["DM", "IPS", "DR", "SNIPS"]


@pytest.fixture(scope="module")
def one_click(tmp_path_factory):
    """The example's rows with one click where the logged action is 2, 40 unclicked rows there, 1,959 others:
    ``constant:2`` rests on 1 rewarded matched row."""
    table = pq.read_table(LOGS)
    action, reward = table["action"].to_numpy(), table["reward"].to_numpy()
    keep = np.concatenate([np.flatnonzero((action == 2) & (reward != 0))[:1],
                           np.flatnonzero((action == 2) & (reward == 0))[:40], np.flatnonzero(action != 2)[:1959]])
    path = tmp_path_factory.mktemp("one-click") / "log.parquet"
    pq.write_table(table.take(np.sort(keep)), path)
    return str(path)


def evaluation(spec):
    return Evaluation(spec, ESTIMATORS, reward_model=LinearRewardModel.load(MODEL))


def test_one_rewarded_matched_row_is_no_reliable_estimate(one_click):
    result = evaluate_log(one_click, evaluation("constant:2"))
    assert result.weights.n_informative == 1
    doc = result.to_dict()
    verdicts = {name: e["verdict"] for name, e in doc["estimates"].items()}
    assert verdicts == {"DM": "model-based", "IPS": "no reliable estimate", "DR": "no reliable estimate",
                        "SNIPS": "no reliable estimate"}
    assert "1 rewarded matched row (w > 0, r ≠ 0) < 10" in doc["verdict_note"]
    table = result.table()
    rows = {line.split()[0]: line for line in table.splitlines()[2:6]}
    for name in ("IPS", "DR", "SNIPS"):  # no interval printed, [0, 0] or otherwise
        assert "no reliable estimate" in rows[name] and "[" not in rows[name], rows[name]
    assert "model-based" in rows["DM"] and "[" in rows["DM"]
    assert "no reliable estimate by IPS, DR, SNIPS" in table and "DM is model-based" in table
    # the report's support column: never "ok" on one click
    for name, e in doc["estimates"].items():
        assert _support(e) == e["verdict"] != "ok", name
        assert (_estimate(e)[2] == "no reliable estimate") == (name != "DM")


def test_a_well_supported_policy_is_reliable(one_click):
    result = evaluate_log(one_click, evaluation("uniform"))
    assert result.weights.n_informative >= 10 and result.weights.ess >= DEFAULT_MIN_ESS
    doc = result.to_dict()
    assert {e["verdict"] for n, e in doc["estimates"].items() if n != "DM"} == {"reliable"}
    assert "verdict_note" not in doc and "no reliable estimate" not in result.table()
    marked = [line.split()[0] for line in result.table().splitlines() if "model-based" in line]
    assert marked == ["DM"]  # the one estimate resting on the reward model alone
    assert {_support(e) for n, e in doc["estimates"].items() if n != "DM"} == {"ok"}


def test_several_policies_keep_the_flags_in_the_table(one_click):
    result = evaluate_log(one_click, {"always-2": evaluation("constant:2"), "uniform": evaluation("uniform")})
    table = result.table()
    lines = [line for line in table.splitlines() if line.startswith("always-2 ")]
    assert len(lines) == len(ESTIMATORS)
    assert all("insufficient data" in line for line in lines)  # as the JSON's flag
    assert all(result.to_dict()["policies"]["always-2"]["estimates"][n]["insufficient_data"] for n in ESTIMATORS)
    assert sum("no reliable estimate" in line for line in lines) == 3
    # the differences of uniform from always-2 rest on always-2's one click too
    differences = [line for line in table.split("difference:")[1].splitlines() if line.startswith("uniform ")]
    assert len(differences) == len(ESTIMATORS) and all("insufficient data" in line for line in differences)
    assert "uniform: no reliable difference from constant:2 by IPS, DR, SNIPS" in table
    assert json.dumps(result.to_dict())  # JSON-ready


def test_each_threshold_alone_fails_the_verdict():
    n = 1000
    p = np.full(n, 0.5)
    clicks = np.ones(n)
    assert WeightStats.of(np.full(n, 2.0), p, clicks).unreliable() == []
    few = np.zeros(n)
    few[:20] = 2.0  # ESS 20 < 30, 20 rewarded matched rows
    assert [m for m, _, _ in WeightStats.of(few, p, clicks).failed_thresholds()] == ["ess"]
    size = 5000
    heavy = 1 / np.random.default_rng(0).uniform(size=size) ** 0.8  # a Pareto tail, k = 0.8: k̂ 0.88, ESS 134
    heavy_stats = WeightStats.of(heavy, np.full(size, 0.5), np.ones(size))
    assert [m for m, _, _ in heavy_stats.failed_thresholds()] == ["pareto_k"]
    assert [m for m, _, _ in WeightStats.of(np.full(n, 2.0), p, np.r_[np.ones(9), np.zeros(n - 9)])
            .failed_thresholds()] == ["rewarded_matched_rows"]
