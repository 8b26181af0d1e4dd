"""Evaluation over logs: numpy = Parquet = Dask = Dask DataFrame, for any partitioning."""

import json
import sys

import dask.dataframe as dd
import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from conftest import ALL_ESTIMATORS, evaluation

from dr_scale.cli import main
from dr_scale.core import keyed_random
from dr_scale.logs.contract import LogDataError
from dr_scale.logs.reading import read_log
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.ope.estimators import make_estimators
from dr_scale.ope.evaluation import Evaluation, evaluate_dataframe, evaluate_log, evaluate_partitions
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import N_ACTIONS, N_FEATURES, candidate_policy, example_paths, simulate


def assert_same(a, b, rel=1e-12):
    assert a.estimates.keys() == b.estimates.keys()
    for name in a.estimates:
        ea, eb = a.estimates[name], b.estimates[name]
        assert ea.n == eb.n
        assert ea.value == pytest.approx(eb.value, rel=rel, abs=1e-15), name
        assert ea.stderr == pytest.approx(eb.stderr, rel=rel, abs=1e-15), name
    assert a.weights.ess == pytest.approx(b.weights.ess, rel=rel)


def numpy_result(table, model):
    """The numpy path: the estimators' own ``estimate`` on whole arrays."""
    (part,) = read_log_from_table(table)
    k = N_ACTIONS
    probs = np.eye(k)[table.column("target_action").to_numpy()]
    arrays = dict(reward=part.reward, action=part.action, propensity=part.propensity,
                  target_probs=probs, reward_hat=model.predict(part.X))
    return {name: est.estimate(**arrays) for name, est in make_estimators(ALL_ESTIMATORS, clip=10.0, tau=5.0).items()}


def read_log_from_table(table):
    from dr_scale.logs.reading import partition_from_table

    return [partition_from_table(table, "<memory>", N_FEATURES, N_ACTIONS)]


@pytest.mark.slow
def test_partition_invariance_and_paths_agree(tmp_path, example):
    table, model, _ = example
    results = {}
    for n_parts in (1, 7, 64):
        url = str(tmp_path / f"log{n_parts}")
        write_log(table, url, n_parts=n_parts, n_features=N_FEATURES, n_actions=N_ACTIONS)
        results[n_parts] = evaluate_log(url, evaluation(model))
    assert_same(results[1], results[7])
    assert_same(results[1], results[64])

    # numpy path
    for name, est in numpy_result(table, model).items():
        assert est.value == pytest.approx(results[1].estimates[name].value, rel=1e-12)
        assert est.stderr == pytest.approx(results[1].estimates[name].stderr, rel=1e-12)

    # in-memory partitions and a Dask DataFrame
    parts = read_log(str(tmp_path / "log7"), extra_columns=("target_action",))
    assert_same(results[7], evaluate_partitions(parts, evaluation(model)))
    ddf = dd.read_parquet(str(tmp_path / "log7"))
    assert ddf.npartitions > 1
    assert_same(results[7], evaluate_dataframe(ddf, evaluation(model)))


def test_runs_of_parts_per_task_give_the_same_bits_as_a_task_per_part(tmp_path, example, monkeypatch):
    """A log of many parts is read 8 consecutive parts per task (parts_bag): the merges of the tree's first level,
    in the same order, so every figure has the same bits as with a task per part — here on 19 parts (3 tasks of
    8, 8 and 3 parts; a root over those three) and 64 (8 tasks; the root over their merges)."""
    import dr_scale.outofcore.mergeable as mergeable
    from dr_scale.ope.evaluation import log_states

    table, model, _ = example
    for n_parts in (19, 64):
        url = str(tmp_path / f"log{n_parts}")
        write_log(table, url, n_parts=n_parts, n_features=N_FEATURES, n_actions=N_ACTIONS)
        per_part = evaluate_log(url, evaluation(model))
        with monkeypatch.context() as m:
            m.setattr(mergeable, "GROUP_FROM", 2)
            states = log_states(url, evaluation(model))
            assert states.npartitions == -(-n_parts // 8) and states.count().compute() == n_parts
            per_run = evaluate_log(url, evaluation(model))
        assert per_run.to_dict() == per_part.to_dict()


def test_dr_recovers_the_true_value_within_its_interval(example):
    table, model, truth = example
    result = evaluate_partitions(read_log_from_table(table), evaluation(model))
    for name in ("IPS", "DR", "SNIPS", "SNDR"):
        est = result.estimates[name]
        assert abs(est.value - truth) < 4 * est.stderr, name
    assert result.estimates["DR"].stderr < result.estimates["IPS"].stderr


@pytest.mark.slow
def test_policy_kinds_agree(tmp_path):
    """constant:A, column:NAME, probs:NAME and callable:module:function give the same IPS value."""
    row_id, X, _, logging = simulate(3000, seed=3)
    action = keyed_random.categorical(logging, row_id, 3, "policy-kinds")
    target = candidate_policy(X)
    table = pa.table({
        "row_id": row_id, "features": csr_to_features(X), "action": action, "reward": np.cos(row_id),
        "propensity": logging[np.arange(3000), action], "target_action": target,
        "target_probs": pa.array(list(np.eye(N_ACTIONS)[target]), pa.list_(pa.float64())),
        "always_two": np.full(3000, 2),
    })
    url = str(tmp_path / "log")
    write_log(table, url, n_parts=3, n_features=N_FEATURES, n_actions=N_ACTIONS)

    def ips(policy):
        return evaluate_log(url, Evaluation(policy, ["IPS"])).estimates["IPS"]

    assert ips("column:target_action") == ips("probs:target_probs")
    assert ips("column:target_action") == ips("callable:dr_scale.synthetic.example:candidate_policy")
    assert ips("constant:2") == ips("column:always_two")

    # With a reward model: the deterministic policies' path (ρ̂ at π's actions only) and the
    # probabilities' path (ρ̂ for the actions π takes, zeros for the others) agree on every
    # estimator, and with a model that can only predict all k columns at once.
    rng = np.random.default_rng(8)
    model = LinearRewardModel(rng.normal(size=(N_FEATURES, N_ACTIONS)), rng.normal(size=N_ACTIONS))

    class AllColumns:  # a reward model without the ``actions`` argument
        def predict(self, X):
            return model.predict(X)

    def every(policy, rho=model):
        estimators = make_estimators(ALL_ESTIMATORS, clip=10.0, tau=5.0)
        return evaluate_log(url, Evaluation(policy, estimators, reward_model=rho))

    assert_same(every("column:target_action"), every("probs:target_probs"))
    assert_same(every("column:target_action"), every("callable:dr_scale.synthetic.example:candidate_policy"))
    assert_same(every("constant:2"), every("column:always_two"))
    assert_same(every("constant:2"), every("column:always_two", AllColumns()))
    assert_same(every("probs:target_probs"), every("probs:target_probs", AllColumns()))
    assert every("constant:2").estimates["DR"].value != pytest.approx(every("constant:1").estimates["DR"].value)
    with pytest.raises(LogDataError, match="column 'nope': missing column"):
        ips("column:nope")
    with pytest.raises(ValueError, match="bad policy"):
        ips("sometimes")


def test_linear_model_predicts_chosen_actions():
    """predict(X, actions) is the dense x·w_a + b_a for those columns, for few (one product each) and many."""
    rng = np.random.default_rng(2)
    X = sp.random(40, 30, density=0.2, format="csr", random_state=3)
    for k, actions in ((3, [2]), (3, [0, 2]), (6, [0, 1, 3, 5]), (6, None)):
        model = LinearRewardModel(rng.normal(size=(30, k)), rng.normal(size=k))
        dense = X.toarray() @ model.coef + model.intercept
        expected = dense if actions is None else dense[:, actions]
        got = model.predict(X) if actions is None else model.predict(X, actions=np.array(actions))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_weight_histogram_counts_as_a_search_of_the_edges():
    """Zero weights go to bin 0 unsearched; every other weight to the last edge ≤ w, edges themselves included."""
    from dr_scale.ope.diagnostics import WEIGHT_EDGES, WeightStats

    edges = WEIGHT_EDGES[1:]
    weight = np.concatenate([np.zeros(50), edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf),
                             [1e-9, 1e7, 1e30], np.random.default_rng(0).lognormal(0, 3, 1000)])
    bins = np.clip(np.searchsorted(WEIGHT_EDGES, weight, side="right") - 1, 0, WEIGHT_EDGES.size - 1)
    hist = WeightStats.of(weight, np.ones_like(weight), np.zeros_like(weight)).histogram
    np.testing.assert_array_equal(hist, np.bincount(bins, minlength=WEIGHT_EDGES.size))
    assert hist[0] == np.count_nonzero(weight < 1e-3) and hist[-1] == np.count_nonzero(weight >= 1e6)


def test_dm_without_reward_model_is_an_error():
    with pytest.raises(ValueError, match="need.*reward model"):
        Evaluation("constant:0", ["DR"])


def test_reward_model_file_round_trip(tmp_path):
    model = LinearRewardModel(np.arange(12.0).reshape(4, 3), np.array([0.5, -1.0, 2.0]))
    model.save(str(tmp_path / "m.npz"))
    loaded = LinearRewardModel.load(str(tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.coef, model.coef)
    np.testing.assert_array_equal(loaded.intercept, model.intercept)


def test_evaluate_command_on_the_bundled_example(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert main(["evaluate", "--json", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    for name in ALL_ESTIMATORS:
        assert name in printed
    data = json.loads(out.read_text())
    assert set(data["estimates"]) == set(ALL_ESTIMATORS)
    assert data["estimates"]["DR"]["n"] == 14000
    logs, model_path = example_paths()
    model = LinearRewardModel.load(model_path)
    expected = evaluate_log(logs, Evaluation("column:target_action", ALL_ESTIMATORS, model))
    assert data["estimates"]["DR"]["value"] == expected.estimates["DR"].value
    assert data["diagnostics"]["ess"] == pytest.approx(expected.weights.ess)


def test_evaluate_command_reports_bad_data(tmp_path, capsys):
    row_id, X, _, logging = simulate(100, seed=1)
    table = pa.table({"row_id": row_id, "features": csr_to_features(X), "action": np.zeros(100, np.int32),
                      "reward": np.ones(100), "propensity": np.where(row_id == 42, 0.0, 0.5)})
    import pyarrow.parquet as pq

    pq.write_table(table, tmp_path / "bad.parquet")
    assert main(["evaluate", str(tmp_path / "bad.parquet"), "--policy", "constant:0", "--no-progress",
                 "--json", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert "bad.parquet: column 'propensity': propensity outside (0, 1] (e.g. row_id=42)" in err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.slow
def test_command_line_entry_point_runs(tmp_path):
    import subprocess

    done = subprocess.run([sys.executable, "-m", "dr_scale.cli", "evaluate", "--estimators", "IPS,DR",
                           "--no-progress"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "DR" in done.stdout and "IPS" in done.stdout
