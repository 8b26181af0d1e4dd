"""Through ``dr_scale.cli.main``: --days / --split on every command that reads a log, the new policy specs,
several --policy in one evaluate run."""

import json
from pathlib import Path

import numpy as np
import pytest

from dr_scale.cli import main
from dr_scale.logs.filters import LogFilter, in_test
from dr_scale.logs.reading import read_log
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.policies import LinearPolicy
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import example_paths

LOGS, MODEL = example_paths()
POLICIES = str(Path(__file__).parents[2] / "pipelines" / "report_policies.toml")
ALL_IDS = np.concatenate([p.row_id for p in read_log(LOGS, with_features=False)])


def run_json(tmp_path, capsys, *argv) -> tuple[dict, str]:
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}.json"
    assert main([*argv, "--json", str(out), "--no-progress"]) == 0, capsys.readouterr().err
    return json.loads(out.read_text()), capsys.readouterr().out


def close(a: dict, b: dict):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose([a[name]["value"], a[name]["stderr"], *a[name]["ci"]],
                                   [b[name]["value"], b[name]["stderr"], *b[name]["ci"]], rtol=1e-12, atol=1e-15)


@pytest.mark.slow
def test_several_policies_in_one_run_equal_separate_runs(tmp_path, capsys):
    specs = ["column:target_action", "uniform", "epsilon-greedy:0.1:constant:0", "logging"]
    words = [w for s in specs for w in ("--policy", s)]
    together, printed = run_json(tmp_path, capsys, "evaluate", LOGS, *words, "--fit-reward-model",
                                 "--lam", "2", "--folds", "2")
    assert printed.count("reward model fitted on") == 1
    # after the fit's line and its calibration lines (prior, calibration, indented figures)
    first = next(line for line in printed.splitlines()
                 if not line.startswith(("reward model fitted on", "prior:", "calibration on", "  ")))
    assert first.startswith("4 policies on")
    assert together["baseline"] == specs[0] and list(together["policies"]) == specs
    for spec in specs:
        extra = [] if spec == specs[0] else ["--baseline", specs[0]]
        alone, _ = run_json(tmp_path, capsys, "evaluate", LOGS, "--policy", spec, *extra, "--fit-reward-model",
                            "--lam", "2", "--folds", "2")
        got = together["policies"][spec]
        close(got["estimates"], alone["estimates"])
        assert ("difference" in got) == ("difference" in alone)
        if "difference" in alone:
            close({k: v for k, v in got["difference"].items() if k != "interval"},
                  {k: v for k, v in alone["difference"].items() if k != "interval"})
        assert got["warnings"] == alone["warnings"]


def test_baseline_outside_the_policies_joins_the_table(tmp_path, capsys):
    doc, printed = run_json(tmp_path, capsys, "evaluate", "--policy", "constant:0", "--policy", "constant:1",
                            "--baseline", "uniform")
    assert list(doc["policies"]) == ["constant:0", "constant:1", "uniform"] and doc["baseline"] == "uniform"
    assert "difference: each policy A − uniform (paired, on the same rows)" in printed
    assert "difference" in doc["policies"]["constant:0"] and "difference" not in doc["policies"]["uniform"]


def test_one_policy_keeps_its_output(tmp_path, capsys):
    doc, printed = run_json(tmp_path, capsys, "evaluate", "--policy", "uniform")
    assert set(doc) == {"logs", "policy", "interval", "estimates", "diagnostics", "warnings", "in_sample",
                        "min_support", "insufficient_data"}
    assert printed.startswith("policy uniform on ")


def test_evaluate_days_and_split(tmp_path, capsys):
    doc, printed = run_json(tmp_path, capsys, "evaluate", LOGS, "--days", "2026-11-02:2026-11-03", "--split",
                            "test", "--test-fraction", "0.3")
    f = LogFilter(days="2026-11-02:2026-11-03", split="test", test_fraction=0.3)
    assert doc["filter"] == f.to_dict()
    assert f"({f})" in printed.splitlines()[0]
    expected = evaluate_log(LOGS, Evaluation("column:target_action"), log_filter=f)
    assert doc["estimates"]["IPS"]["value"] == pytest.approx(expected.estimates["IPS"].value, rel=1e-12)
    ids = np.concatenate([p.row_id for p in read_log(LOGS + "/date=2026-11-0[23]", with_features=False)])
    assert doc["estimates"]["IPS"]["n"] == int(in_test(ids, 0.3).sum())


@pytest.mark.slow
def test_fit_and_learn_on_the_train_rows(tmp_path, capsys):
    assert main(["fit", LOGS, "--out", str(tmp_path / "m.npz"), "--split", "train", "--no-progress"]) == 0
    model = LinearRewardModel.load(str(tmp_path / "m.npz"))
    assert model.metadata["rows"] == int((~in_test(ALL_IDS, 0.2)).sum())
    assert model.metadata["log_filter"]["split"] == "train"
    assert main(["learn", LOGS, "--out", str(tmp_path / "p.npz"), "--split", "train", "--days", ":2026-11-05",
                 "--no-progress"]) == 0
    policy = LinearPolicy.load(str(tmp_path / "p.npz"))
    early = np.concatenate([p.row_id for p in read_log(LOGS + "/date=2026-11-0[1-5]", with_features=False)])
    assert policy.metadata["rows"] == int((~in_test(early, 0.2)).sum())
    assert policy.metadata["log_filter"] == {**LogFilter(days=":2026-11-05", split="train").to_dict()}
    capsys.readouterr()


@pytest.mark.slow
def test_report_on_the_test_rows_does_not_reuse_other_rows_states(tmp_path, capsys):
    out = tmp_path / "report"
    base = ["report", "--logs", LOGS, "--policies", POLICIES, "--out", str(out), "--no-progress",
            "--days", "2026-11-03"]
    assert main([*base, "--split", "test"]) == 0
    test_rows = json.loads((out / "report.json").read_text())["rows"]
    assert main(base) == 0  # the same partition, every row: its cached test-row state is not used
    assert json.loads((out / "report.json").read_text())["rows"] == 2000
    assert test_rows == int(in_test(read_log(LOGS + "/date=2026-11-03", with_features=False)[0].row_id, 0.2).sum())
    capsys.readouterr()


@pytest.mark.parametrize("argv, words", [
    (["evaluate", "--days", "2026-13-01"], "--days '2026-13-01': '2026-13-01' is not a day YYYY-MM-DD"),
    (["evaluate", "--days", "2027-01-01:"], "--days 2027-01-01: matches no partition of "),
    (["evaluate", "--split", "test", "--test-fraction", "1"], "argument --test-fraction: should be less than 1"),
    (["fit", LOGS, "--out", "m.npz", "--test-fraction", "0.3"],
     "--test-fraction and --split-seed choose the rows of a --split"),
    (["learn", LOGS, "--out", "p.npz", "--days", "2026-11-05:2026-11-01"], "the first day is after the last"),
    (["evaluate", "--policy", "uniform", "--policy", "uniform"], "--policy uniform is given twice"),
    (["evaluate", "--policy", "constant:news"], "names an action by value, but the log has no action vocabulary"),
    (["evaluate", "--policy", "epsilon-greedy:2:uniform"], "ε must be a number in [0, 1]"),
])
def test_bad_filters_and_specs_are_one_line(tmp_path, capsys, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.slow
def test_the_report_job_takes_the_filter_keys(capsys):
    job = str(Path(__file__).parents[2] / "pipelines" / "report.toml")
    argv = ["run", job, "--no-progress", "--set", f"logs={LOGS}", "--set", f"policies={POLICIES}",
            "--set", "window=all"]
    assert main([*argv, "--set", "out=memory://job-split/r", "--set", "split=test", "--set", "days=2026-11-03"]) == 0
    import fsspec

    with fsspec.open("memory://job-split/r/report.json") as f:
        rows = json.load(f)["rows"]
    assert rows == int(in_test(read_log(LOGS + "/date=2026-11-03", with_features=False)[0].row_id, 0.2).sum())
    assert main([*argv, "--set", "out=memory://job-split/bad", "--set", "split=half"]) == 2
    assert "split: should be 'train' or 'test'" in capsys.readouterr().err


def test_split_on_a_log_without_row_ids_is_one_line(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"features": pa.array([[0], [1]], pa.list_(pa.int32())), "action": [0, 1],
                      "reward": [1.0, 0.0], "propensity": [0.5, 0.5]})
    pq.write_table(table, tmp_path / "no_ids.parquet")
    assert main(["evaluate", str(tmp_path / "no_ids.parquet"), "--policy", "uniform", "--n-actions", "2",
                 "--split", "test", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no_ids.parquet: column 'row_id': missing column: the test split is keyed by each row's row_id" in err


@pytest.mark.slow
def test_report_policies_by_value_on_a_log_with_a_vocabulary(tmp_path, capsys):
    import shutil

    shutil.copytree(LOGS, tmp_path / "logs")
    vocabulary = {"action": {"values": ["news", "sports", "weather"]}}
    (tmp_path / "logs" / "_dr_scale_spec.json").write_text(json.dumps(vocabulary))
    policies = tmp_path / "policies.toml"
    policies.write_text('estimators = ["IPS", "SNIPS"]\n'
                        '[[policy]]\nname = "sports"\nspec = "constant:sports"\n'
                        '[[policy]]\nname = "shortlist"\nspec = "topk:news,weather"\n'
                        '[[policy]]\nname = "explore"\nspec = "epsilon-greedy:0.2:constant:weather"\n')
    assert main(["report", "--logs", str(tmp_path / "logs"), "--policies", str(policies), "--out",
                 str(tmp_path / "out"), "--no-progress", "--days", ":2026-11-02"]) == 0
    report = {p["name"]: p for p in json.loads((tmp_path / "out" / "report.json").read_text())["policies"]}
    f = LogFilter(days=":2026-11-02")
    for name, spec in (("sports", "constant:#1"), ("shortlist", "topk:#0,#2"),
                       ("explore", "epsilon-greedy:0.2:constant:2")):
        direct = evaluate_log(LOGS, Evaluation(spec), log_filter=f).estimates["IPS"]
        assert report[name]["estimates"]["IPS"]["value"] == pytest.approx(direct.value, rel=1e-12)
        assert report[name]["estimates"]["IPS"]["n"] == 4000
    capsys.readouterr()


def test_a_policy_file_is_read_once_per_run_with_the_storage_options(tmp_path, capsys, monkeypatch):
    """--policy and --baseline files are read once for the whole evaluate (the training-overlap check and the
    evaluation share the parsed policy), with --storage-options."""
    rng = np.random.default_rng(0)
    path = tmp_path / "policy.npz"
    LinearPolicy(rng.standard_normal((50, 3)), rng.standard_normal(3)).save(str(path))
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"auto_mkdir": True}))
    reads = []
    load = LinearPolicy.load.__func__

    def counted(cls, url, storage_options=None):
        reads.append((url, storage_options))
        return load(cls, url, storage_options)

    monkeypatch.setattr(LinearPolicy, "load", classmethod(counted))
    run_json(tmp_path, capsys, "evaluate", LOGS, "--policy", f"linear:{path}", "--baseline", f"softmax:{path}:0.5",
             "--storage-options", str(options))
    assert reads == [(str(path), {"auto_mkdir": True})] * 2  # the policy's file, the baseline's
