"""Support and drift alerts: a logging policy that stops taking an action is caught on the day it stops (or the
next), never on streams without the change; thresholds in the policies file; exit status 4 with ``fail_on``;
the same report on a Dask LocalCluster."""

from __future__ import annotations

import datetime
import json

import numpy as np
import pyarrow as pa
import pytest
from conftest import cli, error_line

from dr_scale.ope.diagnostics import Coverage, WeightStats
from dr_scale.ope.evaluation import PolicyState
from dr_scale.outofcore.mergeable import merge_all
from dr_scale.report.alerts import AlertSettings, drift_alerts, support_by_day, support_metrics
from dr_scale.report.policies_file import parse_policies
from dr_scale.synthetic.finite_world import BanditWorld
from dr_scale.synthetic.streams import daily_logs

WORLD = BanditWorld.make(epsilon=0.3)  # 5 actions; the target policy takes action 0 in 16% of the contexts
STOP_ACTION, STOP_DAY, DAYS, ROWS = 0, 20, 40, 2000
START = datetime.date(2026, 1, 1)


def day_states(seed: int, stop: bool, days: int = DAYS) -> dict[str, PolicyState]:
    """A stream's per-day states of the target policy, as a report's build merges them from its partitions
    (:meth:`~dr_scale.ope.evaluation.Evaluation.state_of_rows`: the weights' and the coverage's states)."""
    out = {}
    stream = daily_logs(WORLD, days=days, rows_per_day=ROWS, seed=seed, stop_action=STOP_ACTION if stop else None,
                        stop_day=STOP_DAY if stop else None)
    for d, day in enumerate(stream):
        weight = (day["action"] == day["target_action"]) / day["propensity"]
        out[str(START + datetime.timedelta(days=d))] = PolicyState(
            {}, WeightStats.of(weight, day["propensity"], day["reward"]),
            coverage=Coverage.of(day["action"], np.bincount(day["target_action"], minlength=WORLD.rho.shape[1])
                                 .astype(np.float64)))
    return out


def first_alert_day(states: dict, kind: str | None = None) -> int | None:
    """The day number (1, 2, …) of the first alert (of ``kind``), or None."""
    support = support_by_day(states, AlertSettings())
    return next((i + 1 for i, d in enumerate(support) if any(kind in (None, a["kind"]) for a in d["alerts"])), None)


@pytest.mark.slow
def test_support_alert_on_the_day_the_logging_policy_stops_taking_an_action():
    first = [first_alert_day(day_states(seed, stop=True)) for seed in range(20)]
    assert all(day in (STOP_DAY, STOP_DAY + 1) for day in first), first
    support = support_by_day(day_states(0, stop=True), AlertSettings())
    raised = {a["metric"] for a in support[STOP_DAY - 1]["alerts"] + support[STOP_DAY]["alerts"]}
    assert {a["kind"] for d in support[STOP_DAY - 1:STOP_DAY + 1] for a in d["alerts"]} == {"support"}
    assert "unlogged_share" in raised
    # the mean weight falls by π's mass on the action (16%): E[w] from 1 to 0.84, within 4 standard errors
    after = merge_all([s.weights for s in list(day_states(0, stop=True).values())[STOP_DAY - 1:]])
    mean, z = support_metrics(after)["mean_weight"], support_metrics(after)["mean_weight_z"]
    se = (mean - 1) / z
    assert abs(mean - (1 - WORLD.target[:, STOP_ACTION].mean())) < 4 * se


@pytest.mark.slow
def test_no_alert_on_100_streams_without_the_change():
    alarms = [seed for seed in range(100) if first_alert_day(day_states(1000 + seed, stop=False)) is not None]
    assert alarms == []


def test_no_alert_on_streams_without_the_change_fast():
    assert [first_alert_day(day_states(2000 + seed, stop=False, days=25)) for seed in range(5)] == [None] * 5


def test_history_and_change_are_those_of_the_merged_earlier_days():
    states = day_states(3, stop=False, days=8)
    settings = AlertSettings(history_days=4, min_history_days=2)
    support = support_by_day(states, settings)
    days = list(states)
    assert [d["history_days"] for d in support] == [0, 1, 2, 3, 4, 4, 4, 4]
    assert support[0]["history"] is None and support[1]["change"] is None
    merged = states[days[3]].weights + states[days[4]].weights + states[days[5]].weights + states[days[6]].weights
    assert support[7]["history"]["ess_ratio"] == merged.ess_ratio
    assert support[7]["change"]["ess_ratio"] == support[7]["ess_ratio"] - merged.ess_ratio


def test_drift_alert_when_ess_ratio_collapses():
    states = day_states(4, stop=False, days=6)
    last = list(states)[-1]
    w = states[last].weights
    heavy = np.r_[np.full(w.n - 1, 0.5), 1000.0]  # one weight carries the day: ESS/n ≈ 1/n
    states[last] = PolicyState({}, WeightStats.of(heavy, np.full(w.n, 0.5), np.ones(w.n)),
                               coverage=states[last].coverage)
    alerts = support_by_day(states, AlertSettings())[-1]["alerts"]
    assert {(a["kind"], a["metric"]) for a in alerts} >= {("drift", "ess_ratio"), ("support", "top_share")}


# -- the policies file ---------------------------------------------------------------------------------------
POLICY = {"policy": [{"name": "p", "spec": "uniform"}]}


def test_thresholds_and_fail_on_in_the_policies_file():
    pf = parse_policies({**POLICY, "fail_on": ["support"], "alerts": {"max_pareto_k": 0.5, "history_days": 7}},
                        "f.toml")
    assert pf.fail_on == ["support"] and pf.alerts.max_pareto_k == 0.5 and pf.alerts.history_days == 7
    assert pf.alerts.max_weight_mean_z == AlertSettings().max_weight_mean_z == 5.0
    assert parse_policies(POLICY, "f.toml").fail_on == []


@pytest.mark.parametrize("data, message", [
    ({"fail_on": ["suport"]}, "fail_on.#1"),
    ({"fail_on": "support"}, "fail_on"),
    ({"alerts": {"max_top_share": 1.5}}, "alerts.max_top_share"),
    ({"alerts": {"history_days": 0}}, "alerts.history_days"),
    ({"alerts": {"max_k": 0.7}}, "alerts.max_k"),
])
def test_bad_thresholds_are_named(data, message):
    from dr_scale.io.config import ConfigError

    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        parse_policies({**POLICY, **data}, "f.toml")


# -- through the command --------------------------------------------------------------------------------------
def write_stream(root, seed: int, days: int, stop: bool) -> str:
    """A stream's days as a date-partitioned log (the context as the one active feature; π in ``target_action``)."""
    from dr_scale.logs.writing import write_log

    logs = str(root / "logs")
    stream = daily_logs(WORLD, days=days, rows_per_day=ROWS, seed=seed, stop_action=STOP_ACTION if stop else None,
                        stop_day=STOP_DAY if stop else None)
    tables = []
    for d, day in enumerate(stream):
        tables.append(pa.table({
            "row_id": np.arange(d * ROWS, (d + 1) * ROWS, dtype=np.int64),
            "features": pa.array([[int(x)] for x in day["context"]], type=pa.list_(pa.int32())),
            "action": day["action"].astype(np.int32), "reward": day["reward"], "propensity": day["propensity"],
            "target_action": day["target_action"].astype(np.int32),
            "date": np.full(ROWS, str(START + datetime.timedelta(days=d)))}))
    write_log(pa.concat_tables(tables), logs, partition_by="date", n_features=WORLD.rho.shape[0],
              n_actions=WORLD.rho.shape[1])
    return logs


@pytest.fixture(scope="module")
def stopped_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("stopped")
    logs = write_stream(root, seed=0, days=STOP_DAY + 2, stop=True)
    policies = root / "policies.toml"
    policies.write_text('estimators = ["IPS", "SNIPS"]\n[[policy]]\nname = "target"\nspec = "column:target_action"\n')
    return root, logs, policies


@pytest.mark.slow  # four reports, ~4 s of CPU
def test_report_exits_4_with_fail_on_after_writing_the_report(stopped_log, capsys):
    root, logs, policies = stopped_log
    out = root / "report"
    code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", out, "--no-progress",
                       "--fail-on", "support")
    assert code == 4
    report = json.loads((out / "report.json").read_text())
    assert report["fail_on"] == ["support"] and report["status"] == "warning"
    dates = sorted({a["date"] for a in report["alerts"] if a["date"]})
    assert dates and dates[0] in (str(START + datetime.timedelta(days=STOP_DAY - 1 + i)) for i in (0, 1))
    (policy,) = report["policies"]
    day = policy["by_day"][STOP_DAY - 1]
    assert {a["metric"] for a in day["support"]["alerts"]} >= {"unlogged_share"}
    assert any(w.startswith(f"support alert on {dates[0]}") for w in policy["warnings"])
    assert f"warning: support alert, target on {dates[0]}" in err
    assert "exit status 4: support alerts raised (fail_on)" in err
    for name in ("report.md", "report.html"):
        text = (out / name).read_text()
        assert "Support and drift" in text and f"support alert on {dates[0]}" in text
    # warnings only without fail_on; the policies file's fail_on does the same as the option
    code, _, _ = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", root / "plain", "--no-progress")
    assert code == 0 and json.loads((root / "plain" / "report.json").read_text())["alerts"]
    failing = root / "failing.toml"
    failing.write_text('fail_on = ["support"]\n' + policies.read_text())
    code, _, _ = cli(capsys, "report", "--logs", logs, "--policies", failing, "--out", root / "f", "--no-progress")
    assert code == 4
    code, _, _ = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", root / "d", "--no-progress",
                     "--fail-on", "drift")
    assert code == 0  # support alerts only


@pytest.mark.slow
def test_report_without_alerts_exits_0_with_fail_on(tmp_path, capsys):
    logs = write_stream(tmp_path, seed=7, days=6, stop=False)
    policies = tmp_path / "policies.toml"
    policies.write_text('fail_on = ["support", "drift"]\nestimators = ["IPS"]\n'
                        '[[policy]]\nname = "target"\nspec = "column:target_action"\n')
    code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path / "r",
                       "--no-progress")
    assert code == 0, err
    assert json.loads((tmp_path / "r" / "report.json").read_text())["alerts"] == []


def test_bad_fail_on_option(stopped_log, capsys, tmp_path):
    _, logs, policies = stopped_log
    code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path, "--fail-on", "x")
    assert code == 2 and "--fail-on" in error_line(err)


def test_alerts_equal_on_a_local_cluster(stopped_log, capsys, local_cluster):
    root, logs, policies = stopped_log
    reports = {}
    for where, extra in (("threads", []), ("cluster", ["--scheduler", local_cluster.scheduler_address])):
        out = root / f"on-{where}"
        code, _, _ = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", out, "--no-progress",
                         "--fail-on", "support", *extra)
        assert code == 4
        reports[where] = json.loads((out / "report.json").read_text())
    a, b = reports["threads"], reports["cluster"]
    assert a["alerts"] and a["alerts"] == b["alerts"]
    assert [p["by_day"] for p in a["policies"]] == [p["by_day"] for p in b["policies"]]
    assert [p["support"] for p in a["policies"]] == [p["support"] for p in b["policies"]]


@pytest.mark.slow
def test_report_job_fail_on(stopped_log):
    from dr_scale.report.make import run_job

    root, logs, policies = stopped_log
    job = {"job": "report", "logs": logs, "policies": str(policies), "out": str(root / "job")}
    assert run_job({**job, "fail_on": ["support"]}) == 4
    assert run_job({**job, "out": str(root / "job-plain")}) == 0


# -- Pareto k̂ drift and the verdict ---------------------------------------------------------------------------
def metrics(pareto_k: float) -> dict:
    return {"ess_ratio": 0.5, "top_share": 0.1, "pareto_k": pareto_k, "mean_weight": 1.0}


@pytest.mark.parametrize("before, after", [(-1.12, -0.47), (-0.5, 0.45), (-0.1, 0.5)])
def test_a_rise_of_k_that_stays_light_tailed_is_no_drift(before, after):
    """k̂ ≤ 0.5: the weights' variance is finite; a rise there (the issue's "k̂ −0.47, up from −1.12") is no alert."""
    assert after - before > AlertSettings().max_pareto_k_rise
    assert drift_alerts(metrics(after), metrics(before), AlertSettings()) == []


def test_a_rise_of_k_into_the_heavy_tail_is_drift():
    (alert,) = drift_alerts(metrics(0.9), metrics(0.3), AlertSettings())
    assert alert["kind"] == "drift" and alert["metric"] == "pareto_k"
    assert drift_alerts(metrics(0.9), metrics(0.5), AlertSettings()) == []  # a rise of 0.4 < 0.5


@pytest.fixture(scope="module")
def one_click_log(tmp_path_factory):
    """The example's rows where a constant policy (action 2) matches 41 rows and 1 click."""
    import pyarrow.parquet as pq

    from dr_scale.synthetic.example import example_paths

    logs, model = example_paths()
    table = pq.read_table(logs)
    action, reward = table["action"].to_numpy(), table["reward"].to_numpy()
    keep = np.concatenate([np.flatnonzero((action == 2) & (reward != 0))[:1],
                           np.flatnonzero((action == 2) & (reward == 0))[:40], np.flatnonzero(action != 2)[:1959]])
    root = tmp_path_factory.mktemp("one-click")
    (root / "logs").mkdir()
    pq.write_table(table.take(np.sort(keep)), root / "logs" / "part-0.parquet")
    policies = root / "policies.toml"
    policies.write_text(f'reward_model = "{model}"\nestimators = ["DM", "IPS", "DR"]\n'
                        '[[policy]]\nname = "always-2"\nspec = "constant:2"\n')
    return root, policies


@pytest.mark.slow
def test_fail_on_verdict_exits_4_when_an_estimate_is_no_reliable_one(one_click_log, capsys):
    root, policies = one_click_log
    code, _, err = cli(capsys, "report", "--logs", root / "logs", "--policies", policies, "--out", root / "r",
                       "--no-progress", "--fail-on", "verdict")
    assert code == 4, err
    assert "exit status 4: verdict alerts raised (fail_on)" in err
    report = json.loads((root / "r" / "report.json").read_text())
    verdicts = [a for a in report["alerts"] if a["kind"] == "verdict"]
    assert {a["metric"] for a in verdicts} == {"rewarded_matched_rows", "ess"}
    assert all(a["message"].startswith("no reliable estimate by IPS, DR: ") for a in verdicts)
    (policy,) = report["policies"]
    assert {n: e["verdict"] for n, e in policy["estimates"].items()} == {
        "DM": "model-based", "IPS": "no reliable estimate", "DR": "no reliable estimate"}
    assert policy["verdict_note"].startswith("no reliable estimate by IPS, DR: 1 rewarded matched row")
    html = (root / "r" / "report.html").read_text()
    assert "<td>no reliable estimate</td>" in html and "[0, 0]" not in html
