"""Logs without propensities and evaluation with an estimated logging policy (the plumbing, with the generator's
true logging policy standing in for a fitted model): the contract, the floor, the diagnostics in the same pass,
the refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import cli, error_line

import dr_scale
from dr_scale.core.errors import ParameterError, UserError
from dr_scale.ope.evaluation import Comparison, Evaluation, evaluate_log
from dr_scale.synthetic.bandit import WorldSettings, generate_bandit, make_world

D, K, SEED = 120, 4, 3


class TruePropensity:
    """The generated world's logging policy μ(a | x) as a propensity model (what a perfect fit would give)."""

    def __init__(self, n_features=D, n_actions=K, uniform_share=0.0, metadata=None):
        self.world = make_world(SEED, n_features, n_actions, WorldSettings(min_propensity=uniform_share / n_actions))
        self.n_features, self.n_actions, self.metadata = n_features, n_actions, metadata or {}

    def predict_proba(self, X, actions=None, row_id=None):
        return self.world.scores(X)[1]


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hidden")
    shown, hidden = str(root / "shown"), str(root / "hidden")
    for url, hide in ((shown, False), (hidden, True)):
        generate_bandit(url, rows=6000, features=D, actions=K, seed=SEED, rows_per_part=2000, uniform_share=0.0,
                        hide_propensity=hide)
    return shown, hidden


def test_hidden_log_has_no_propensity_column_and_the_same_rows(logs):
    shown, hidden = logs
    a, b = dr_scale.read_log(shown), dr_scale.read_log(hidden)
    assert all(p.has_propensity for p in a) and not any(p.has_propensity for p in b)
    assert "propensity" not in pq.read_schema(sorted(Path(hidden).glob("*.parquet"))[0]).names
    assert np.isnan(b[0].propensity).all()
    np.testing.assert_array_equal(a[0].action, b[0].action)
    manifest = dr_scale.synthetic.bandit.read_manifest(hidden)
    assert manifest["hide_propensity"] and manifest["settings"]["min_propensity"] == 0
    # the truth stays known: the world rebuilt from the manifest gives the logged propensities
    np.testing.assert_allclose(TruePropensity().predict_proba(a[0].X)[np.arange(len(a[0])), a[0].action],
                               a[0].propensity, rtol=1e-12)


def test_the_true_model_gives_the_logged_propensities_estimates(logs):
    shown, hidden = logs
    names = ["IPS", "SNIPS"]
    logged = evaluate_log(shown, Evaluation("uniform", names))
    for url in logs:
        result = evaluate_log(url, Evaluation("uniform", names, propensity_model=TruePropensity(),
                                              propensity_floor=1e-12))
        for name in names:
            assert result.estimates[name].value == pytest.approx(logged.estimates[name].value, rel=1e-12)
            assert result.estimates[name].stderr == pytest.approx(logged.estimates[name].stderr, rel=1e-10)
        assert result.propensity.floored == 0 and result.propensity.n == 6000
    both = evaluate_log(shown, Evaluation("uniform", names, propensity_model=TruePropensity(), propensity_floor=1e-12))
    comparison = both.propensity.logged_comparison()
    assert comparison["correlation"] == pytest.approx(1.0, abs=1e-12)
    assert comparison["ratio_quantiles"]["0.01"] == pytest.approx(1.0, rel=0.003)
    assert comparison["ratio_quantiles"]["0.99"] == pytest.approx(1.0, rel=0.003)
    assert "propensity_diagnostics" in both.to_dict()


def test_floor_is_applied_and_counted(logs):
    shown, _ = logs
    floor = 0.05
    result = evaluate_log(shown, Evaluation("constant:0", ["IPS"], propensity_model=TruePropensity(),
                                            propensity_floor=floor))
    parts = dr_scale.read_log(shown)
    p = np.concatenate([q.propensity for q in parts])
    r = np.concatenate([q.reward for q in parts])
    a = np.concatenate([q.action for q in parts])
    assert result.propensity.floored == int((p < floor).sum()) > 0
    assert result.estimates["IPS"].value == pytest.approx(np.mean((a == 0) * r / np.maximum(p, floor)), rel=1e-12)
    assert result.weights.max_w <= 1 / floor
    assert "floored" in result.propensity.lines()[0]


def test_comparison_equals_separate_evaluations(logs):
    _, hidden = logs
    model = TruePropensity()
    specs = ["uniform", "constant:1"]
    together = evaluate_log(hidden, Comparison({s: Evaluation(s, ["IPS"], propensity_model=model) for s in specs}))
    for s in specs:
        alone = evaluate_log(hidden, Evaluation(s, ["IPS"], propensity_model=model))
        assert together.results[s].estimates["IPS"].value == pytest.approx(alone.estimates["IPS"].value, rel=1e-12)
        assert together.results[s].propensity == alone.propensity


@pytest.mark.slow
def test_a_log_without_propensities_needs_a_model_except_for_dm(logs, tmp_path, capsys):
    _, hidden = logs
    with pytest.raises(dr_scale.LogDataError, match="missing column: the log records no logging probabilities.*"
                                                    "--estimate-propensity.*--propensity-model"):
        evaluate_log(hidden, Evaluation("uniform", ["IPS"]))
    code, _, err = cli(capsys, "evaluate", hidden, "--policy", "uniform", "--no-progress")
    line = error_line(err)
    assert code == 2 and hidden in line and "--estimate-propensity" in line and "--propensity-model" in line
    model = tmp_path / "m.npz"
    assert cli(capsys, "fit", hidden, "--out", model, "--no-progress")[0] == 0
    code, out, _ = cli(capsys, "evaluate", hidden, "--policy", "uniform", "--reward-model", model, "--estimators",
                       "DM", "--no-progress")
    assert code == 0 and "DM" in out and "propensities: none in the log" in out
    # the same in memory, from raw columns with a spec that names no propensity
    df = pd.DataFrame({"item": ["a", "b", "a", "b"], "click": [1, 0, 0, 1], "color": ["r", "g", "r", "b"]})
    log = dr_scale.from_pandas(df, {"action": "item", "reward": "click", "features": {"categorical": ["color"]},
                                    "hash_bits": 6})
    assert not log.has_propensity and "propensity" not in log.table.column_names
    with pytest.raises(dr_scale.LogDataError, match="<DataFrame>: column 'propensity': missing column"):
        dr_scale.evaluate_partitions([log], Evaluation("uniform", ["IPS"], n_actions=2))


def test_a_propensity_model_of_another_log_is_refused(logs, capsys):
    shown, _ = logs
    with pytest.raises(UserError, match="propensity model has k = 5 actions, but the log's metadata"):
        evaluate_log(shown, Evaluation("uniform", ["IPS"], propensity_model=TruePropensity(n_actions=5)))
    with pytest.raises(UserError, match="propensity model has d = 200 features, but the log's metadata"):
        evaluate_log(shown, Evaluation("uniform", ["IPS"], propensity_model=TruePropensity(n_features=200)))
    with pytest.raises(UserError, match="fitted for k = 5 actions, but k = 4"):
        Evaluation("uniform", ["IPS"], n_actions=4, propensity_model=TruePropensity(n_actions=5))

    class FoldModel(TruePropensity):  # cross-fitted on another log: its fingerprint differs
        folds = 5
        fold_intercept = np.zeros((5, K))

    other = FoldModel(metadata={"fingerprint": "6000:0000000000000000"})
    with pytest.raises(UserError, match="cross-fitted on another log"):
        evaluate_log(shown, Evaluation("uniform", ["IPS"], propensity_model=other))
    result = evaluate_log(shown, Evaluation("uniform", ["IPS"], propensity_model=other, allow_other_log=True))
    assert result.propensity.n == 6000


def test_bad_propensity_options(capsys):
    with pytest.raises(ParameterError, match="propensity_floor"):
        Evaluation("uniform", ["IPS"], propensity_model=TruePropensity(), propensity_floor=0)
    with pytest.raises(ParameterError, match="propensity_model"):
        Evaluation("uniform", ["IPS"], propensity_model="model.npz")
    code, _, err = cli(capsys, "evaluate", "--propensity-model", "x.npz", "--estimate-propensity", "--no-progress")
    assert code == 2 and "not both" in error_line(err)
    code, _, err = cli(capsys, "evaluate", "--propensity-floor", "0", "--no-progress")
    assert code == 2 and "--propensity-floor" in err
    code, _, err = cli(capsys, "generate", "bandit", "--rows", "10", "--out", "x", "--uniform-share", "0.7")
    assert code == 2 and "--uniform-share" in err


@pytest.mark.slow
def test_learn_with_the_true_model_equals_learn_with_the_logged_propensities(logs, capsys):
    from dr_scale.learning.learn import LearnSettings, learn_policy

    shown, hidden = logs
    settings = LearnSettings(method="ips", lam=10.0)
    logged = learn_policy(shown, settings)
    estimated = learn_policy(hidden, settings, propensity_model=TruePropensity(), propensity_floor=1e-12)
    np.testing.assert_allclose(estimated.coef, logged.coef, rtol=1e-9, atol=1e-12)
    assert estimated.metadata["propensities"] == "estimated"
    with pytest.raises(dr_scale.LogDataError, match=f"{hidden}: column 'propensity': missing column.*IPS imputation"):
        learn_policy(hidden, settings)
    code, _, err = cli(capsys, "learn", hidden, "--out", Path(hidden).parent / "p.npz", "--no-progress")
    assert code == 2 and "--estimate-propensity" in error_line(err)


@pytest.fixture(scope="module")
def fitted(logs, tmp_path_factory):
    """``dr-scale fit-propensity`` on the hidden log: the model file."""
    _, hidden = logs
    out = tmp_path_factory.mktemp("fitted") / "pi0.npz"
    from dr_scale.cli import main

    assert main(["fit-propensity", hidden, "--out", str(out), "--folds", "5", "--lam", "10", "--no-progress"]) == 0
    return out


@pytest.mark.slow  # fits the model
def test_evaluate_estimate_propensity_equals_the_fitted_model_file(logs, fitted, tmp_path, capsys):
    shown, hidden = logs
    code, by_file, _ = cli(capsys, "evaluate", hidden, "--policy", "uniform", "--propensity-model", fitted,
                           "--estimators", "IPS,SNIPS", "--no-progress")
    assert code == 0 and "(the log has no propensity column)" in by_file and "estimated propensities:" in by_file
    out = tmp_path / "r.json"
    code, fitted_here, _ = cli(capsys, "evaluate", hidden, "--policy", "uniform", "--estimate-propensity", "--folds",
                               "5", "--lam", "10", "--estimators", "IPS,SNIPS", "--json", out, "--no-progress")
    assert code == 0
    table = [line for line in by_file.splitlines() if line.startswith(("IPS", "SNIPS"))]
    assert table == [line for line in fitted_here.splitlines() if line.startswith(("IPS", "SNIPS"))]
    import json

    document = json.loads(out.read_text())
    assert document["propensity_diagnostics"]["floored_rows"] == 0
    assert (tmp_path / document["propensities"]["reliability_plot"]).exists()
    # the model file on the log with its propensities: the same rows, so the fingerprint holds; said which is used
    code, stdout, _ = cli(capsys, "evaluate", shown, "--policy", "uniform", "--propensity-model", fitted,
                          "--estimators", "IPS", "--no-progress")
    assert code == 0 and "the log's own propensity column is not used" in stdout and "correlation" in stdout


@pytest.mark.slow  # fits the model
def test_a_propensity_file_for_another_action_set_is_one_line(fitted, tmp_path, capsys):
    other = str(tmp_path / "other")
    generate_bandit(other, rows=500, features=D, actions=K + 1, seed=SEED, hide_propensity=True)
    code, _, err = cli(capsys, "evaluate", other, "--policy", "uniform", "--propensity-model", fitted,
                       "--estimators", "IPS", "--no-progress")
    line = error_line(err)
    assert code == 2 and f"has k = {K} actions, but the log's metadata" in line and str(fitted) in line


@pytest.mark.slow  # fits the model
def test_report_with_a_propensity_model_has_its_diagnostics(logs, fitted, tmp_path, capsys):
    _, hidden = logs
    policies = tmp_path / "policies.toml"
    policies.write_text('estimators = ["IPS"]\n[[policy]]\nname = "uniform"\nspec = "uniform"\n')
    code, _, err = cli(capsys, "report", "--logs", hidden, "--policies", policies, "--out", tmp_path / "none",
                       "--no-progress")
    assert code == 2 and "--estimate-propensity" in error_line(err)
    policies.write_text(f'propensity_model = "{fitted}"\n' + policies.read_text())
    code, _, err = cli(capsys, "report", "--logs", hidden, "--policies", policies, "--out", tmp_path / "rep",
                       "--no-progress")
    assert code == 0, err
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "Estimated propensities" in html and "reliability of the estimated propensities" in html
    import json

    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert report["policies"][0]["propensity"]["rows"] == 6000


def test_import_without_a_propensity_column_says_so(tmp_path):
    import json

    from dr_scale.logs.importing import import_log

    raw = tmp_path / "raw.csv"
    raw.write_text("item,click,color\na,1,red\nb,0,blue\na,0,red\n")
    summary = import_log(str(raw), {"action": "item", "reward": "click", "features": {"categorical": ["color"]},
                                    "hash_bits": 6}, str(tmp_path / "logs"))
    assert summary.propensity is None and summary.to_dict()["propensity"] is None
    assert "propensity: none" in summary.text()
    saved = json.loads((tmp_path / "logs" / "_dr_scale_spec.json").read_text())
    assert saved["columns"]["propensity"] is None
    (part,) = dr_scale.read_log(str(tmp_path / "logs"))
    assert not part.has_propensity and part.action.tolist() == [0, 1, 0]


def test_from_dask_without_a_propensity_column():
    import dask.dataframe as dd

    df = pd.DataFrame({"item": ["b", "a", "b", "a"], "click": [1, 0, 1, 1], "color": ["r", "b", "r", "r"]})
    log = dr_scale.from_dask(dd.from_pandas(df, npartitions=2),
                             {"action": "item", "reward": "click", "features": {"categorical": ["color"]}})
    assert "propensity" not in log.columns
    with pytest.raises(dr_scale.LogDataError, match="column 'propensity': missing column"):
        dr_scale.evaluate_dataframe(log, Evaluation("uniform", ["IPS"], n_actions=2))
