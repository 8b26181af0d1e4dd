"""The item world (many actions with features and categories): its log, catalogue, target policy and truth."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from dr_scale import Evaluation, evaluate_log
from dr_scale.logs.catalogue import read_catalogue
from dr_scale.logs.reading import read_log
from dr_scale.synthetic.item_world import generate_item_bandit, make_item_world
from tests.conftest import cli, error_line

SIZES = dict(features=500, actions=2000, action_features=4, embedding_categories=10)


@pytest.fixture(scope="module")
def world_log(tmp_path_factory):
    folder = tmp_path_factory.mktemp("items") / "log"
    manifest = generate_item_bandit(str(folder), rows=3000, rows_per_part=1000, seed=4, **SIZES)
    return folder, manifest


def test_cli_writes_the_catalogue_target_and_truth(tmp_path, capsys):
    out = tmp_path / "log"
    code, stdout, _ = cli(capsys, "generate", "bandit", "--rows", 1500, "--features", 500, "--actions", 2000,
                          "--action-features", 4, "--embedding-categories", 10, "--out", out, "--no-progress")
    assert code == 0 and "true value, target" in stdout
    catalogue = read_catalogue(str(out))
    assert catalogue.n_actions == 2000 and catalogue.n_categories == 10 and catalogue.features.shape[1] == 4
    assert np.bincount(catalogue.embedding).min() == 200  # balanced categories
    manifest = json.loads((out / "_manifest.json").read_text())
    table = pq.read_table(out / "part-00000.parquet")
    assert {"embedding_propensity", "target_topk", "target_expected_reward"} <= set(table.column_names)
    truth = table.column("target_expected_reward").to_numpy()
    assert truth.mean() == pytest.approx(manifest["calibration"]["target_value"], rel=1e-12)


def test_cli_refuses_more_categories_than_actions(tmp_path, capsys):
    code, _, err = cli(capsys, "generate", "bandit", "--rows", 10, "--features", 500, "--actions", 5,
                       "--action-features", 2, "--embedding-categories", 10, "--out", tmp_path / "x", "--no-progress")
    assert code == 2 and "--embedding-categories must be at most --actions (5)" in error_line(err)


def test_the_log_does_not_depend_on_the_part_size(world_log, tmp_path):
    folder, _ = world_log
    generate_item_bandit(str(tmp_path / "one"), rows=3000, rows_per_part=3000, seed=4, **SIZES)
    a = pq.read_table(str(folder)).sort_by("row_id")
    b = pq.read_table(str(tmp_path / "one")).sort_by("row_id")
    assert a.equals(b)


def test_propensities_are_the_category_times_the_item_within_it(world_log):
    folder, _ = world_log
    world = make_item_world(4, 500, 2000, 4, 10)
    table = pq.read_table(str(folder))
    action = table.column("action").to_numpy()
    ratio = table.column("propensity").to_numpy() / table.column("embedding_propensity").to_numpy()
    assert np.allclose(ratio, world.within[action], rtol=1e-12)
    # the sampled items follow ν(a|e): the logged share of each category's most popular item
    top = np.array([np.flatnonzero(world.embedding == e)[np.argmax(world.within[world.embedding == e])]
                    for e in range(10)])
    hits = np.isin(action, top).sum()
    expected = world.within[top[world.embedding[action]]].sum()  # Σ_i ν(top of e_i | e_i), e_i the logged category
    assert abs(hits - expected) < 4 * np.sqrt(expected)


def test_scorer_file_and_target_column_agree(world_log):
    folder, _ = world_log
    by_column = evaluate_log(str(folder), Evaluation("sparse:target_topk", ["IPS", "MIPS", "SNMIPS"]))
    by_file = evaluate_log(str(folder), Evaluation(f"scorer:{folder}/_target_policy.npz", ["IPS", "MIPS", "SNMIPS"]))
    for name in by_column.estimates:
        assert by_column.estimates[name].value == pytest.approx(by_file.estimates[name].value, rel=1e-12)


def test_evaluate_command_with_mips(world_log, capsys):
    folder, _ = world_log
    code, out, _ = cli(capsys, "evaluate", folder, "--policy", "sparse:target_topk", "--estimators",
                       "IPS,MIPS,SNMIPS", "--no-progress")
    assert code == 0 and "MIPS" in out and "SNMIPS" in out


def _estimates(seed, rows, names, **sizes):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        generate_item_bandit(folder, rows=rows, rows_per_part=rows, seed=seed, **sizes)
        truth = float(np.mean(np.concatenate([p.table.column("target_expected_reward").to_numpy()
                                              for p in read_log(folder, extra_columns=("target_expected_reward",))])))
        result = evaluate_log(folder, Evaluation("sparse:target_topk", names))
    return truth, {n: e.value for n, e in result.estimates.items()}


@pytest.mark.slow
def test_mips_is_unbiased_when_the_reward_depends_on_the_category_only():
    """30 logs: MIPS's mean error is within 4 standard errors of 0 (no direct effect: unbiased)."""
    errors = []
    for seed in range(30):
        truth, values = _estimates(seed, 1500, ["MIPS"], features=300, actions=400, action_features=3,
                                   embedding_categories=8)
        errors.append(values["MIPS"] - truth)
    errors = np.array(errors)
    assert abs(errors.mean()) < 4 * errors.std(ddof=1) / np.sqrt(errors.size)


#: Logs of 2,000 rows of the test (``python benchmarks/statistical_checks.py`` runs 100, the figures of
#: docs/large-action-spaces.md).
MIPS_LOGS = 20


def mips_and_ips_rmse(logs: int = MIPS_LOGS) -> dict:
    """rmse of IPS, SNIPS, MIPS and SNMIPS over ``logs`` logs of 2,000 rows (disjoint row ranges) of one world of
    10^4 items in 20 categories, each log's error measured against the mean of its rows' truth."""
    from dr_scale import evaluate_partitions
    from dr_scale.logs.reading import partition_from_table
    from dr_scale.synthetic.item_world import generate_item_rows

    world = make_item_world(11, 1000, 10_000, 8, 20, 10)
    evaluation = Evaluation("sparse:target_topk", ["IPS", "SNIPS", "MIPS", "SNMIPS"], n_actions=10_000,
                            catalogue=world.catalogue())
    errors = {name: [] for name in evaluation.estimators}
    for r in range(logs):
        table, _ = generate_item_rows(world, 11, r * 2000, 2000)
        part = partition_from_table(table, f"<log {r}>", 1000, 10_000, True)
        truth = table.column("target_expected_reward").to_numpy().mean()
        result = evaluate_partitions([part], evaluation)
        for name, e in result.estimates.items():
            errors[name].append(e.value - truth)
    rmse = {name: float(np.sqrt(np.nanmean(np.square(v)))) for name, v in errors.items()}
    print(f"rmse over {logs} logs of 2,000 rows:", rmse)
    return rmse


@pytest.mark.slow
def test_mips_rmse_is_at_most_half_of_ips_on_10000_actions():
    """rmse(MIPS) ≤ 0.5 × rmse(IPS) over MIPS_LOGS logs. The ratio is 0.047 over 100 logs; over 20 the mean
    squared errors' sampling spread (relative sd √((κ − 1)/20) for the squared errors' kurtosis κ, a few tenths
    here) moves it by a factor well under the tenfold margin, while a MIPS that ignores its categories is IPS
    (ratio 1)."""
    rmse = mips_and_ips_rmse()
    assert rmse["MIPS"] <= 0.5 * rmse["IPS"], rmse


@pytest.mark.slow
def test_report_with_mips_equals_evaluate(world_log, tmp_path, capsys):
    folder, _ = world_log
    policies = tmp_path / "policies.toml"
    policies.write_text(f'estimators = ["IPS", "MIPS", "SNMIPS"]\n\n[[policy]]\nname = "top10"\n'
                        f'spec = "sparse:target_topk"\n\n[[policy]]\nname = "scorer"\n'
                        f'spec = "scorer:{folder}/_target_policy.npz"\n')
    code, _, err = cli(capsys, "report", "--logs", folder, "--policies", policies, "--out", tmp_path / "report",
                       "--no-progress")
    assert code == 0, err
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    direct = evaluate_log(str(folder), Evaluation("sparse:target_topk", ["MIPS"])).estimates["MIPS"].value
    text = json.dumps(report)
    assert f"{direct:.10f}"[:10] in text or repr(direct) in text


def test_identical_on_threads_and_on_a_local_cluster(world_log, tmp_path, capsys, local_cluster):
    """Generating the item world and evaluating MIPS on the shared LocalCluster (``--scheduler``): the same log and
    the same estimates as on threads."""
    on_cluster = ["--scheduler", local_cluster.scheduler_address]
    folder, _ = world_log
    code, _, err = cli(capsys, "generate", "bandit", "--rows", 3000, "--rows-per-part", 1500, "--seed", 4,
                       "--features", 500, "--actions", 2000, "--action-features", 4, "--embedding-categories", 10,
                       "--out", tmp_path / "cluster", *on_cluster, "--no-progress")
    assert code == 0, err
    cluster = pq.read_table(str(tmp_path / "cluster")).sort_by("row_id")
    assert pq.read_table(str(folder)).sort_by("row_id").equals(cluster)
    outputs = []
    for extra in ([], on_cluster):
        code, out, err = cli(capsys, "evaluate", folder, "--policy", "sparse:target_topk", "--estimators",
                             "IPS,MIPS,SNMIPS", "--json", tmp_path / f"out{len(extra)}.json", "--no-progress", *extra)
        assert code == 0, err
        outputs.append(json.loads((tmp_path / f"out{len(extra)}.json").read_text())["estimates"])
    for name in outputs[0]:
        assert outputs[0][name]["value"] == pytest.approx(outputs[1][name]["value"], rel=1e-12)
