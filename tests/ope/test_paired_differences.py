"""Paired differences V(A) − V(B): coverage, the Evaluation and command-line paths, the report's comparisons."""

import json

import numpy as np
import pytest

from dr_scale.cli import main
from dr_scale.ope.estimators import IPS, SNIPS, Difference, DoublyRobust, OnPolicy, RowInputs
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import example_paths
from dr_scale.synthetic.finite_world import BanditWorld

LOGS, MODEL = example_paths()


def test_difference_is_the_difference_of_values_with_a_paired_stderr():
    world = BanditWorld.make(0.3)
    log = world.sample(3000, seed=3)
    best = RowInputs.from_arrays(**log)
    flipped = RowInputs.from_arrays(**{**log, "target_probs": log["target_probs"][:, ::-1]})
    for est in (IPS(), SNIPS(), DoublyRobust()):
        diff = Difference(est, est)
        d = diff.result(diff.state(best, flipped))
        a, b = est.result(est.state(best)), est.result(est.state(flipped))
        assert d.value == pytest.approx(a.value - b.value, rel=1e-12)
        assert d.stderr != pytest.approx(np.hypot(a.stderr, b.stderr), rel=1e-3)
    vs_logging = Difference(DoublyRobust(), OnPolicy())
    d = vs_logging.result(vs_logging.state(best, best))
    assert d.value == pytest.approx(DoublyRobust().estimate(**log).value - log["reward"].mean(), rel=1e-12)


@pytest.mark.slow
def test_paired_interval_covers_the_true_difference():
    """1000 logs, two deterministic policies (best, runner-up) and the logging one: 95% ± 2% (2.9 MC SEs)."""
    world = BanditWorld.make(0.3)
    second = BanditWorld.make(0.3, target="second")
    truth_ab = world.value - second.value
    truth_logging = world.value - world.logging_value
    estimators = {"IPS": IPS(), "SNIPS": SNIPS(), "DR": DoublyRobust()}
    covered = {k: 0 for k in (*estimators, "DR − logging")}
    paired, unpaired = 0.0, 0.0
    reps = 1000
    for rep in range(reps):
        log = world.sample(2000, seed=5000 + rep)
        rows_a = RowInputs.from_arrays(**log)
        rows_b = RowInputs.from_arrays(**{**log, "target_probs": second.target[world.contexts(2000, 5000 + rep)]})
        for name, est in estimators.items():
            diff = Difference(est, est)
            d = diff.result(diff.state(rows_a, rows_b))
            lo, hi = d.ci(0.05)
            covered[name] += lo <= truth_ab <= hi
        diff = Difference(DoublyRobust(), OnPolicy())
        d = diff.result(diff.state(rows_a, rows_a))
        lo, hi = d.ci(0.05)
        covered["DR − logging"] += lo <= truth_logging <= hi
        paired += d.stderr
        unpaired += np.hypot(DoublyRobust().result(DoublyRobust().state(rows_a)).stderr,
                             log["reward"].std(ddof=1) / np.sqrt(2000))
    for name, count in covered.items():
        assert abs(count / reps - 0.95) <= 0.02, (name, count / reps)
    # Against the logging policy both values rest on the same rewards: pairing counts their positive correlation.
    assert paired < 0.9 * unpaired


def test_evaluation_baseline_matches_the_array_api(tmp_path):
    model = LinearRewardModel.load(MODEL)
    evaluation = Evaluation("column:target_action", ["IPS", "DR", "SNDR"], reward_model=model, baseline="constant:1")
    result = evaluate_log(LOGS, evaluation)
    a = evaluate_log(LOGS, Evaluation("column:target_action", ["IPS", "DR", "SNDR"], reward_model=model))
    b = evaluate_log(LOGS, Evaluation("constant:1", ["IPS", "DR", "SNDR"], reward_model=model))
    for name in ("IPS", "DR", "SNDR"):
        d = result.differences[name]
        assert d.value == pytest.approx(a.estimates[name].value - b.estimates[name].value, rel=1e-9)
        assert d.stderr < np.hypot(a.estimates[name].stderr, b.estimates[name].stderr) * 1.5
    out = result.to_dict()
    assert out["baseline"] == "constant:1" and set(out["difference"]) == {"interval", "IPS", "DR", "SNDR"}


def test_evaluate_command_baseline_logging_and_el(tmp_path, capsys):
    path = tmp_path / "out.json"
    assert main(["evaluate", "--baseline", "logging", "--interval", "el", "--no-progress", "--json", str(path),
                 "--estimators", "IPS,DR,ClippedDR(max_weight=5),SwitchDR"]) == 0
    shown = capsys.readouterr().out
    assert "95% CI (el)" in shown and "− logging (paired" in shown and "ClippedDR(max_weight=5.0)" in shown
    data = json.loads(path.read_text())
    assert data["interval"] == "el" and data["baseline"] == "logging"
    assert set(data["difference"]) == {"interval", "IPS", "DR", "ClippedDR(max_weight=5.0)", "SwitchDR"}
    assert set(data["estimates"]["SwitchDR"]["chosen"]) == {"tau"}
    rewards_mean = data["diagnostics"]["on_policy_value"]
    ips = data["estimates"]["IPS"]["value"]
    assert data["difference"]["IPS"]["value"] == pytest.approx(ips - rewards_mean, rel=1e-9)
    el = data["estimates"]["DR"]["ci"]
    assert el != pytest.approx([data["estimates"]["DR"]["value"] - 1.96 * data["estimates"]["DR"]["stderr"],
                                data["estimates"]["DR"]["value"] + 1.96 * data["estimates"]["DR"]["stderr"]])


def test_evaluate_flags_a_difference_resting_on_no_clicks(tmp_path, capsys):
    """A constant policy matching 21 rows of 2,000, none clicked: values and paired differences (EL intervals
    too) are printed with "insufficient data", and every interval holds its estimate."""
    import pyarrow.parquet as pq

    table = pq.read_table(LOGS)
    action, reward = table["action"].to_numpy(), table["reward"].to_numpy()
    matched = np.flatnonzero((action == 2) & (reward == 0))[:21]
    others = np.flatnonzero(action != 2)[:1979]
    log = tmp_path / "log.parquet"
    pq.write_table(table.take(np.sort(np.concatenate([matched, others]))), log)
    path = tmp_path / "out.json"
    assert main(["evaluate", str(log), "--policy", "constant:2", "--baseline", "logging", "--interval", "el",
                 "--reward-model", str(MODEL), "--estimators", "IPS,SNIPS,DR,SNDR", "--no-progress",
                 "--json", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "insufficient data: constant:2: 0 rows where it takes the logged action and the reward is non-zero " \
           "(21 where it takes the logged action)" in shown
    data = json.loads(path.read_text())
    assert data["insufficient_data"] and data["difference"]["interval"] == "el"
    for section in ("estimates", "difference"):
        for name, e in data[section].items():
            if name == "interval":
                continue
            assert e["insufficient_data"], (section, name)
            if e["value"] is not None:
                assert e["ci"][0] <= e["value"] <= e["ci"][1], (section, name, e)


def test_evaluate_prints_no_estimate_outside_its_interval_when_the_model_predicts_below_zero(tmp_path, capsys):
    """A reward model predicting negative click rates (as a ridge fit can): DM and DR fall below the rewards'
    range [0, 1]; their EL intervals, once cut to that range, excluded them — now each holds its value. The values
    and intervals shown are projected into [0, 1]; the raw ones, kept in the JSON, hold each other too."""
    base = LinearRewardModel.load(MODEL)
    model = tmp_path / "negative.npz"
    LinearRewardModel(base.coef, base.intercept - 0.7).save(str(model))
    path = tmp_path / "out.json"
    assert main(["evaluate", "--reward-model", str(model), "--policy", "constant:2", "--baseline", "logging",
                 "--interval", "el", "--no-progress", "--json", str(path)]) == 0
    capsys.readouterr()
    data = json.loads(path.read_text())
    assert data["estimates"]["DM"]["raw_value"] < 0 == data["estimates"]["DM"]["value"]
    for section in ("estimates", "difference"):
        for name, e in data[section].items():
            if name != "interval":
                assert e["ci"][0] <= e["value"] <= e["ci"][1] and e["cs"][0] <= e["value"] <= e["cs"][1], (name, e)
                raw, ci, cs = e.get("raw_value", e["value"]), e.get("raw_ci", e["ci"]), e.get("raw_cs", e["cs"])
                assert ci[0] <= raw <= ci[1] and cs[0] <= raw <= cs[1], (name, e)
