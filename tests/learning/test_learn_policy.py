"""``dr-scale learn`` / ``learn_policy``: a known-best policy found, partitioning and cluster invariance, bad input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pytest
import scipy.sparse as sp

from dr_scale.cli import main
from dr_scale.core import keyed_random
from dr_scale.learning.learn import LAMBDA_FACTOR, LearnSettings, learn_policy
from dr_scale.learning.scores import AUTO_GRID
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.policies import LinearPolicy
from dr_scale.reward.fitting import UnloggedActionWarning

K, SEGMENTS, NOISE = 3, 6, 8  # actions; one-hot segment features; noise features (two active a row)
D = SEGMENTS + NOISE


def segments_world(n: int, seed: int = 0, first_row: int = 0):
    """Rows in one of six segments (one-hot), two of eight noise features active.

    E[r | x, a] = 0.8 if a = segment mod 3 else 0.2, Bernoulli rewards; the logger
    prefers action (segment + 1) mod 3 (p = 0.6, the others 0.2 each), so the best
    action is logged only a fifth of the time. The best policy is unambiguous.
    """
    row_id = np.arange(first_row, first_row + n, dtype=np.int64)
    segment = np.minimum((keyed_random.uniform(row_id, seed, "segment") * SEGMENTS).astype(np.int64), SEGMENTS - 1)
    noise = [np.minimum((keyed_random.uniform(row_id, seed, "noise", j) * NOISE).astype(np.int64), NOISE - 1)
             for j in range(2)]
    indices = np.sort(np.column_stack([segment, SEGMENTS + noise[0], SEGMENTS + noise[1]]), axis=1)
    X = sp.csr_matrix((np.ones(3 * n), indices.ravel(), np.arange(0, 3 * n + 1, 3)), shape=(n, D))
    X.sum_duplicates()
    best = segment % K
    expected = np.where(np.arange(K)[None, :] == best[:, None], 0.8, 0.2)
    logging = np.full((n, K), 0.2)
    logging[np.arange(n), (segment + 1) % K] = 0.6
    action = keyed_random.categorical(logging, row_id, seed, "action")
    reward = (keyed_random.uniform(row_id, seed, "reward") < expected[np.arange(n), action]).astype(np.float64)
    table = pa.table({"row_id": row_id, "features": csr_to_features(X), "action": action, "reward": reward,
                      "propensity": logging[np.arange(n), action]})
    return table, X, best


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("learn")
    table, X, best = segments_world(4000)
    write_log(table, str(folder / "one"), n_parts=1, n_features=D, n_actions=K)
    write_log(table, str(folder / "many"), n_parts=5, n_features=D, n_actions=K)
    return folder, X, best


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dr", "ips", "dm"])
def test_known_best_policy_is_found(world, method):
    folder, X, best = world
    policy = learn_policy(str(folder / "many"), LearnSettings(method=method, folds=2))
    np.testing.assert_array_equal(policy.predict(X), best)
    assert policy.coef.shape == (D, K) and policy.intercept.shape == (K,)
    assert policy.metadata["method"] == method and policy.metadata["rows"] == 4000
    # the default λ: LAMBDA_FACTOR × mean active features × n / 1000
    assert policy.metadata["lam"] == pytest.approx(LAMBDA_FACTOR * X.nnz / 1000)


@pytest.mark.slow
def test_lam_auto_picks_from_its_grid_by_the_validation_value(world):
    folder, X, best = world
    policy = learn_policy(str(folder / "many"), LearnSettings(method="dr", lam="auto", folds=2))
    search = policy.metadata["lam_search"]
    np.testing.assert_allclose(search["grid"], np.asarray(AUTO_GRID) * X.nnz / 1000)
    assert policy.metadata["lam"] == search["grid"][int(np.argmax(search["validation_values"]))]
    np.testing.assert_array_equal(policy.predict(X), best)


@pytest.mark.slow
def test_dlm_learner_finds_the_known_best_policy(world):
    folder, X, best = world
    # the ridge ρ̂, solved tighter than the default: DLM's argmax updates follow small errors of Γ (at rtol 1e-2, a
    # few of the 4000 rows get another action)
    policy = learn_policy(str(folder / "many"), LearnSettings(method="dr", learner="dlm", max_iter=40, rtol=1e-4,
                                                              model="ridge"))
    np.testing.assert_array_equal(policy.predict(X), best)


@pytest.mark.slow
def test_one_part_and_many_parts_agree(world):
    """Sums over 1 or 5 parts differ only in rounding: the coefficients agree to 1e-9, the decisions exactly (the
    ridge ρ̂, whose conjugate gradients at rtol 1e-10 are exact to that; tests/reward/test_logistic.py checks the
    logistic ρ̂'s)."""
    folder, X, best = world
    settings = LearnSettings(method="dr", lam=2.0, folds=2, rtol=1e-10, model="ridge")
    one = learn_policy(str(folder / "one"), settings)
    many = learn_policy(str(folder / "many"), settings)
    np.testing.assert_allclose(many.coef, one.coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(many.intercept, one.intercept, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(many.predict(X), one.predict(X))


@pytest.mark.slow
def test_learn_command_writes_a_policy_that_evaluate_reads(world, tmp_path, capsys):
    folder, X, best = world
    out = tmp_path / "policy.npz"
    assert main(["learn", str(folder / "many"), "--method", "dr", "--folds", "3", "--out", str(out),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "learned a DR ridge policy on 4000 rows, 14 features, 3 actions" in printed
    assert "passes: read: 2 in " in printed and "; ρ̂ λ: " in printed and "; policy: " in printed
    with np.load(out, allow_pickle=False) as z:
        assert sorted(z.files) == ["coef", "intercept", "metadata"]
    np.testing.assert_array_equal(LinearPolicy.load(str(out)).predict(X), best)
    result = evaluate_log(str(folder / "many"), Evaluation(f"linear:{out}", ["IPS", "SNIPS"]))
    assert result.estimates["SNIPS"].value == pytest.approx(0.8, abs=4 * result.estimates["SNIPS"].stderr)


@pytest.mark.parametrize("args, message", [
    (["--lam", "-1"], "λ must be a positive number or 'auto', got '-1'"),
    (["--lam", "big"], "λ must be a positive number or 'auto', got 'big'"),
    (["--folds", "1"], "argument --folds: should be greater than or equal to 2"),
    (["--reward-model", "/nonexistent/rho.npz"], "/nonexistent/rho.npz"),
    (["--n-actions", "4"], "the log's actions number 3 (its metadata) differs from the given 4"),
])
def test_bad_options_are_clear_errors(world, tmp_path, capsys, args, message):
    folder, X, best = world
    assert main(["learn", str(folder / "many"), "--out", str(tmp_path / "p.npz"), "--no-progress", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "p.npz").exists()
    assert main(["learn", str(folder / "many"), "--out", str(tmp_path / "p.npz"), "--method", "snips"]) == 2
    assert "invalid choice: 'snips'" in capsys.readouterr().err


def test_settings_are_checked_at_construction_naming_the_parameter():
    for kwargs, message in [({"method": "snips"}, "method must be one of dr, ips, dm"),
                            ({"learner": "tree"}, "learner must be one of ridge, dlm"),
                            ({"lam": -1.0}, "lam must be a positive number"),
                            ({"folds": 1}, "folds should be greater than or equal to 2"),
                            ({"max_iter": 0}, "max_iter should be greater than or equal to 1")]:
        with pytest.raises(ValueError, match=message):
            LearnSettings(**kwargs)


@pytest.mark.slow
def test_an_action_never_logged_warns_as_fit_does(tmp_path):
    table, X, best = segments_world(2000)
    kept = table.filter(pa.compute.not_equal(table.column("action"), 2))
    write_log(kept, str(tmp_path / "log"), n_parts=2, n_features=D, n_actions=K)
    with pytest.warns(UnloggedActionWarning, match="action.s. 2 never logged"):
        policy = learn_policy(str(tmp_path / "log"), LearnSettings(method="dm"))
    assert policy.metadata["reward_model_lam"] > 0


def test_bad_log_is_a_clear_error_naming_file_column_and_row(tmp_path, capsys):
    table, X, best = segments_world(300)
    propensity = table.column("propensity").to_numpy().copy()
    propensity[117] = 0.0
    bad = table.set_column(table.schema.get_field_index("propensity"), "propensity", pa.array(propensity))
    write_log(table.slice(0, 100), str(tmp_path / "log"), n_features=D, n_actions=K)
    import pyarrow.parquet as pq

    pq.write_table(bad.slice(100), str(tmp_path / "log" / "part-00001.parquet"))  # bypasses write_log's check
    status = main(["learn", str(tmp_path / "log"), "--method", "ips", "--out", str(tmp_path / "p.npz"),
                   "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "part-00001.parquet: column 'propensity': propensity outside (0, 1] (e.g. row_id=117)" in err
    assert not (tmp_path / "p.npz").exists()


@pytest.mark.slow
def test_local_and_cluster_are_identical(world, dask_cluster):
    folder, X, best = world
    local = learn_policy(str(folder / "many"), LearnSettings(method="dr", lam="auto", folds=2))
    with dask_cluster.client() as client:
        remote = learn_policy(str(folder / "many"), LearnSettings(method="dr", lam="auto", folds=2), client=client)
    np.testing.assert_array_equal(remote.coef, local.coef)
    np.testing.assert_array_equal(remote.intercept, local.intercept)
    assert remote.metadata == local.metadata
