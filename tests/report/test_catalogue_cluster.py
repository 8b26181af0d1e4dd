"""A log with an action catalogue — MIPS and SNMIPS, sparse, scorer and uniform policies — evaluated and reported on
the local scheduler and on a LocalCluster of worker processes: bit for bit the same.

``evaluate`` and ``report`` run once with the default local scheduler and once on the session's shared
LocalCluster of two worker processes (``--scheduler``; each worker reads the catalogue itself). Every state is
reduced per file in a fixed order, so where a task runs cannot change a float: the JSON documents (whose floats
round-trip exactly) and the printed text must be equal, not merely close.
"""

from __future__ import annotations

import json

import pytest
from conftest import cli

from dr_scale.synthetic.item_world import generate_item_bandit

pytestmark = pytest.mark.slow  # four runs, two of them on the shared LocalCluster

ESTIMATORS = "IPS,SNIPS,MIPS,SNMIPS,RM"


@pytest.fixture(scope="module")
def item_log(tmp_path_factory):
    """3,000 rows over 2,000 items in 10 categories, in 3 parts (and 3 days for the report)."""
    folder = tmp_path_factory.mktemp("items") / "log"
    generate_item_bandit(str(folder), rows=3000, rows_per_part=1000, seed=5, features=100, actions=2000,
                         action_features=4, embedding_categories=10, days=3)
    return folder


@pytest.mark.timeout(300)
@pytest.mark.parametrize("policy", ["sparse:target_topk", "scorer:{log}/_target_policy.npz", "uniform"])
def test_evaluate_with_a_catalogue_identical_locally_and_on_a_localcluster(modes, item_log, tmp_path, capsys,
                                                                           policy):
    documents, printed = {}, {}
    for mode, extra in modes.items():
        out = tmp_path / f"{mode}.json"
        code, stdout, err = cli(capsys, "evaluate", item_log, "--policy", policy.format(log=item_log),
                                "--estimators", ESTIMATORS, "--baseline", "logging", "--interval", "el",
                                "--json", out, "--no-progress", *extra)
        assert code == 0, err
        documents[mode] = json.loads(out.read_text())
        printed[mode] = stdout
    local, cluster = documents["local"], documents["cluster"]
    assert set(local["estimates"]) == set(ESTIMATORS.split(","))
    assert local["estimates"]["MIPS"]["n"] == 3000
    assert cluster == local  # estimates, intervals, the marginal weights' diagnostics: every float equal
    assert printed["cluster"] == printed["local"]


@pytest.mark.timeout(300)
def test_report_with_a_catalogue_identical_locally_and_on_a_localcluster(modes, item_log, tmp_path, capsys):
    policies = tmp_path / "policies.toml"
    policies.write_text('estimators = ["MIPS", "SNMIPS", "RM"]\n'
                        '[[policy]]\nname = "target"\nspec = "sparse:target_topk"\n'
                        '[[policy]]\nname = "uniform"\nspec = "uniform"\n')
    reports = {}
    for mode, extra in modes.items():
        out = tmp_path / mode
        code, _, err = cli(capsys, "report", "--logs", item_log, "--policies", policies, "--out", out,
                           "--no-progress", *extra)
        assert code in (0, 4), err
        reports[mode] = json.loads((out / "report.json").read_text())
    local, cluster = reports["local"], reports["cluster"]
    assert local["primary_estimator"] == "MIPS"
    assert {p["name"] for p in local["policies"]} == {"target", "uniform"}
    for key in ("policies", "comparisons", "alerts", "rows"):
        assert cluster[key] == local[key], key
