"""Estimated propensities on the local scheduler and on a LocalCluster of worker processes: bit for bit the same.

``fit-propensity`` and ``evaluate --estimate-propensity --folds 2`` on a generated log whose propensity column is
hidden (``generate bandit --hide-propensity``), run once with the default local scheduler and once with
``--local-workers 2`` (a real ``distributed.LocalCluster`` of two worker processes). Every pass of the fitter and of
the evaluation is a tree reduction in a fixed order over per-file states, so where a task runs cannot change a single
float: the model's arrays, the estimates, intervals and diagnostics (JSON, whose floats round-trip exactly) and the
printed text must be equal, not merely close.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import cli

from dr_scale.synthetic.bandit import generate_bandit

pytestmark = pytest.mark.slow  # four runs, two of them starting a LocalCluster: ~40 s on 2 cores

MODES = {"local": [], "cluster": ["--local-workers", "2"]}


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    """4,000 rows in 4 parts, 4 actions, 0/1 rewards, no propensity column."""
    url = str(tmp_path_factory.mktemp("hidden") / "logs")
    generate_bandit(url, rows=4000, features=120, actions=4, seed=3, rows_per_part=1000, uniform_share=0.0,
                    hide_propensity=True)
    return url


@pytest.mark.timeout(240)
def test_fit_propensity_identical_locally_and_on_a_localcluster(hidden, tmp_path, capsys):
    runs = {}
    for mode, extra in MODES.items():
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
def test_evaluate_estimate_propensity_identical_locally_and_on_a_localcluster(hidden, tmp_path, capsys):
    documents, printed = {}, {}
    for mode, extra in MODES.items():
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
