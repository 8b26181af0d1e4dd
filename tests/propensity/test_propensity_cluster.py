"""Estimated propensities on the local scheduler and on a LocalCluster of worker processes: bit for bit the same.

``fit-propensity``, ``evaluate --estimate-propensity --folds 2`` and ``report --estimate-propensity`` on a generated
log whose propensity column is hidden (``generate bandit --hide-propensity``), run once with the default local
scheduler and once on the session's shared ``distributed.LocalCluster`` of two worker processes (``--scheduler``). Every
pass of the fitter and of the evaluation reduces per-file states in a fixed order, so where a task runs cannot change
a single float: the model's arrays, the estimates, intervals and diagnostics (JSON, whose floats round-trip exactly)
and the printed text must be equal, not merely close.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import cli

from dr_scale.synthetic.bandit import generate_bandit

pytestmark = pytest.mark.slow  # six runs, three of them on the shared LocalCluster



@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    """4,000 rows in 4 parts, 4 actions, 0/1 rewards, no propensity column."""
    url = str(tmp_path_factory.mktemp("hidden") / "logs")
    generate_bandit(url, rows=4000, features=120, actions=4, seed=3, rows_per_part=1000, uniform_share=0.0,
                    hide_propensity=True)
    return url


@pytest.mark.timeout(240)
def test_fit_propensity_identical_locally_and_on_a_localcluster(modes, hidden, tmp_path, capsys):
    runs = {}
    for mode, extra in modes.items():
        out = tmp_path / f"{mode}.npz"
        code, stdout, err = cli(capsys, "fit-propensity", hidden, "--out", out, "--folds", "2", "--lam", "10",
                                "--no-progress", *extra)
        assert code == 0, err
        runs[mode] = stdout, np.load(out, allow_pickle=False)
    (local_out, local), (cluster_out, cluster) = runs.values()
    assert local_out == cluster_out and "2 fold models" in local_out
    assert sorted(local.files) == sorted(cluster.files) and {"coef", "fold_coef"} <= set(local.files)
    for name in local.files:
        np.testing.assert_array_equal(cluster[name], local[name], err_msg=name)  # exact, not approximate


@pytest.mark.timeout(240)
def test_evaluate_estimate_propensity_identical_locally_and_on_a_localcluster(modes, hidden, tmp_path, capsys):
    documents, printed = {}, {}
    for mode, extra in modes.items():
        code, stdout, err = cli(capsys, "evaluate", hidden, "--policy", "uniform", "--estimate-propensity",
                                "--folds", "2", "--fit-reward-model", "--estimators", "DM,IPS,DR,SNIPS,SNDR",
                                "--json", tmp_path / f"{mode}.json", "--no-progress", *extra)
        assert code == 0, err
        documents[mode] = json.loads((tmp_path / f"{mode}.json").read_text())
        printed[mode] = stdout
    local, cluster = documents["local"], documents["cluster"]
    # the reliability plot is named after the JSON file; its bytes are the same
    plots = [tmp_path / d["propensities"].pop("reliability_plot") for d in (local, cluster)]
    assert plots[0] != plots[1] and plots[0].read_bytes() == plots[1].read_bytes()
    assert local["propensities"]["source"].startswith("estimated")
    diagnostics = local["propensity_diagnostics"]
    assert diagnostics["rows"] == 4000 and diagnostics["log_loss"]["model"] < diagnostics["log_loss"]["marginal"]
    assert set(local["estimates"]) == {"DM", "IPS", "DR", "SNIPS", "SNDR"}
    assert cluster == local  # estimates, intervals, diagnostics: every float equal
    assert printed["cluster"] == printed["local"]


@pytest.mark.timeout(240)
def test_report_estimate_propensity_identical_locally_and_on_a_localcluster(modes, tmp_path, capsys):
    """A daily share: the fitted model, every candidate's estimates and propensity diagnostics, the comparisons."""
    logs = str(tmp_path / "daily")
    generate_bandit(logs, rows=3000, features=120, actions=4, seed=3, days=3, uniform_share=0.0, hide_propensity=True)
    policies = tmp_path / "policies.toml"
    policies.write_text('estimators = ["IPS", "SNIPS"]\n[[policy]]\nname = "uniform"\nspec = "uniform"\n'
                        '[[policy]]\nname = "first"\nspec = "constant:0"\n')
    reports, models = {}, {}
    for mode, extra in modes.items():
        out = tmp_path / mode
        code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", out,
                           "--estimate-propensity", "--folds", "2", "--no-progress", *extra)
        assert code == 0, err
        reports[mode] = json.loads((out / "report.json").read_text())
        models[mode] = np.load(out / "propensity-model.npz", allow_pickle=False)
    local, cluster = reports["local"], reports["cluster"]
    assert local["status"] == "ok" and all(p["propensity"]["rows"] == 3000 for p in local["policies"])
    for name in models["local"].files:
        np.testing.assert_array_equal(models["cluster"][name], models["local"][name], err_msg=name)
    for key in ("policies", "comparisons", "alerts", "rows"):
        assert cluster[key] == local[key], key
