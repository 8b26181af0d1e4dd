"""``logged:OTHER_LOGS``: the policy that wrote another log as a target, on a hand-built pair of logs.

Log B (the other log; 2 slots, 3 actions):

    slot 0: actions 0, 0, 1, 2  propensities 0.5, 0.5, 0.25, 0.25  rewards 1, 0, 0, 1
    slot 1: actions 1, 1, 1, 2  propensities 0.6, 0.6, 0.6, 0.9    rewards 0, 1, 1, 1

π_B(· | slot 0) = (2, 1, 1)/4 = (0.5, 0.25, 0.25), π_B(· | slot 1) = (0, 3, 1)/4 = (0, 0.75, 0.25). The mean logged
propensities p̄ are (0.5, 0.25, 0.25) and (0, 0.6, 0.9): they sum to 1 and 1.5 per slot, and
mean |π̂ − p̄| = (3 · 0.15 + 0.65) / 8 = 0.1375. B's on-policy value is 5/8 = 0.625, 2/4 = 0.5 at slot 0 and 3/4 = 0.75
at slot 1.

Log A (the evaluated log), rows (slot, action, propensity, reward): (0, 0, 0.5, 1), (0, 1, 0.25, 0), (1, 1, 0.5, 1),
(1, 2, 0.5, 0), (0, 2, 0.25, 1). IPS weights π_B(a|slot)/p: 1, 1, 1.5, 0.5, 1, so IPS = (1 + 1.5 + 1)/5 = 0.7;
at slot 0 (1 + 0 + 1)/3 = 2/3, at slot 1 1.5/2 = 0.75; per impression 2/3 + 3/4 = 17/12; relative to B's
on-policy value (0.7 − 0.625)/0.625 = +12%, per slot (2/3 − 0.5)/0.5 = +33.3% and 0%.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dr_scale.cli import main
from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.policies import LoggedPolicy, parse_policy


def ranked_log(path, slot, action, propensity, reward) -> str:
    n = len(slot)
    table = pa.table({"row_id": pa.array(np.arange(n), pa.int64()),
                      "features": pa.array([[i % 2] for i in range(n)], pa.list_(pa.int32())),
                      "action": pa.array(action, pa.int32()), "reward": pa.array(reward, pa.float64()),
                      "propensity": pa.array(propensity, pa.float64()), "slot": pa.array(slot, pa.int32())})
    write_log(table, str(path), n_actions=3, n_features=2)
    return str(path)


@pytest.fixture
def pair(tmp_path):
    b = ranked_log(tmp_path / "b", [0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 2, 1, 1, 1, 2],
                   [0.5, 0.5, 0.25, 0.25, 0.6, 0.6, 0.6, 0.9], [1, 0, 0, 1, 0, 1, 1, 1])
    a = ranked_log(tmp_path / "a", [0, 0, 1, 1, 0], [0, 1, 1, 2, 2], [0.5, 0.25, 0.5, 0.5, 0.25], [1, 0, 1, 0, 1])
    return a, b


def test_frequencies_by_hand(pair):
    a, b = pair
    policy = parse_policy(f"logged:{b}:frequencies")
    assert isinstance(policy, LoggedPolicy) and str(policy) == f"logged:{b}:frequencies"
    assert policy.frequencies().tolist() == [[0.5, 0.25, 0.25], [0.0, 0.75, 0.25]]
    result = evaluate_log(a, Evaluation(policy, ["IPS"]), by_slot=True)
    assert result.pooled.estimates["IPS"].value == pytest.approx(0.7, abs=1e-15)
    assert result.slots[0].estimates["IPS"].value == pytest.approx(2 / 3, abs=1e-15)
    assert result.slots[1].estimates["IPS"].value == pytest.approx(0.75, abs=1e-15)
    assert result.impression["IPS"].value == pytest.approx(17 / 12, abs=1e-15)


def test_rule_picks_frequencies_for_a_fixed_logger_else_the_model(pair, tmp_path):
    _, b = pair
    assert parse_policy(f"logged:{b}").chosen == "frequencies"  # one propensity per (slot, action)
    moving = ranked_log(tmp_path / "moving", [0, 0, 1], [0, 0, 1], [0.5, 0.4, 0.5], [0, 1, 0])
    assert parse_policy(f"logged:{moving}").chosen == "model"


def test_evaluate_prints_the_check_and_the_on_policy_value(pair, tmp_path, capsys):
    a, b = pair
    out_json = tmp_path / "r.json"
    assert main(["evaluate", a, "--policy", f"logged:{b}:frequencies", "--estimators", "IPS", "--by", "slot",
                 "--json", str(out_json), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert (f"logged:{b}:frequencies: the policy that wrote that log, as its per-slot action frequencies over its "
            "8 rows (as given)") in out
    assert ("against its logged propensities: mean |π̂ − p̄| = 0.138; Σ_a p̄(a | slot) per slot = 1, 1.5 (not 1: "
            in out)
    assert "its on-policy value (mean reward): 0.62 ± 0.18" in out  # 0.625; s = √(15/56), se = s/√8 = 0.183
    assert "slot 0: 0.50 ± 0.29" in out and "slot 1: 0.75 ± 0.25" in out
    assert "off-policy − on-policy, relative: IPS +12.0%\n    slot 0: IPS +33.3%\n    slot 1: IPS +0.0%" in out
    logged = json.loads(out_json.read_text())["logged"][f"logged:{b}:frequencies"]
    assert logged["mean_abs_difference"] == pytest.approx(0.1375, abs=1e-15)
    assert logged["logged_propensity_sums"] == pytest.approx([1.0, 1.5], abs=1e-15)
    assert logged["on_policy"]["value"] == 0.625 and logged["on_policy"]["n"] == 8
    assert logged["on_policy_slots"]["1"]["value"] == 0.75
    assert logged["relative_difference"]["IPS"] == pytest.approx(0.12, abs=1e-14)
    assert logged["relative_difference_slots"]["0"]["IPS"] == pytest.approx(1 / 3, abs=1e-14)  # (2/3 − 1/2)/(1/2)


def test_bad_forms_and_logs(pair, capsys):
    a, b = pair
    assert main(["evaluate", a, "--policy", f"logged:{b}:sometimes", "--no-progress"]) == 2  # not a form: a path
    assert capsys.readouterr().err.strip().endswith(f"{b}:sometimes: no such file or folder")
    assert main(["evaluate", b, "--policy", f"logged:{a}:frequencies", "--estimators", "IPS", "--no-progress"]) == 0
    capsys.readouterr()
    plain = ranked_log(Path(a).parent / "plain", [0, 0], [0, 1], [0.5, 0.5], [1, 0])
    table = pq.read_table(Path(plain) / "part-00000.parquet").drop_columns(["slot"])
    pq.write_table(table, Path(plain) / "part-00000.parquet")
    assert main(["evaluate", plain, "--policy", f"logged:{b}:frequencies", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"column 'slot': missing; the policy logged:{b}:frequencies answers per slot" in err


@pytest.mark.slow
def test_model_form_for_a_logger_of_x(tmp_path):
    """A generated logger whose propensities depend on x: the rule fits the propensity model on its log, π̂(a|x);
    the estimate and the check are those of the model's probabilities, by hand."""
    from dr_scale.logs.reading import read_log
    from dr_scale.ope.logged import logged_summary
    from dr_scale.synthetic.bandit import generate_bandit

    b, a = str(tmp_path / "b"), str(tmp_path / "a")
    generate_bandit(b, rows=600, features=100, actions=3, seed=1)
    generate_bandit(a, rows=300, features=100, actions=3, seed=2)
    evaluation = Evaluation(f"logged:{b}", ["IPS"])
    policy = evaluation.policy
    assert isinstance(policy, LoggedPolicy) and policy.chosen == "model" and policy.model is not None
    result = evaluate_log(a, evaluation)
    rows = read_log(a, n_features=100)
    by_hand = np.concatenate([policy.model.predict_proba(p.X)[np.arange(len(p)), p.action] / p.propensity * p.reward
                              for p in rows]).mean()
    assert result.estimates["IPS"].value == pytest.approx(by_hand, rel=1e-12)
    logged = read_log(b, n_features=100)
    gap = np.concatenate([np.abs(policy.model.predict_proba(p.X)[np.arange(len(p)), p.action] - p.propensity)
                          for p in logged]).mean()
    summary = logged_summary(policy, result.estimates)
    assert summary["form"] == "model" and summary["mean_abs_difference"] == pytest.approx(gap, rel=1e-12)
    assert summary["on_policy"]["value"] == pytest.approx(np.concatenate([p.reward for p in logged]).mean(), rel=1e-12)
