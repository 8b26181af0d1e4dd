"""Per-action ridge reward models (dr_scale.reward.fitting, ``dr-scale fit``).

Checked against dense solves of the normal equations (numpy/scipy), for binary and
valued features; cross-fitting's rule (a row is never predicted by a model that saw
it); 1 vs many parts and spilled vs in-memory parts; λ = auto against out-of-fold errors
on the keyed sample computed directly; an action never logged; local vs a LocalCluster and a command-line
cluster; bad input through the command line.
"""

from __future__ import annotations

import json
import posixpath
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.linalg
import scipy.sparse as sp

from dr_scale.cli import main
from dr_scale.core import keyed_random
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.reward.fitting import SAMPLE_PURPOSE, FitSettings, UnloggedActionWarning, fit_reward_model
from dr_scale.reward.models import LinearRewardModel, fold_of

N, D, K = 3000, 40, 4


def make_log(n=N, d=D, k=K, valued=False, seed=0, unlogged=()):
    """A small log: sparse x (skewed popularity), a reward not linear in x, non-uniform logging."""
    rng = np.random.default_rng(seed)
    popularity = np.linspace(0.25, 0.02, d)
    X = sp.csr_matrix((rng.random((n, d)) < popularity).astype(np.float64))
    if valued:
        X.data = rng.gamma(2.0, 0.7, X.nnz).astype(np.float32).astype(np.float64)
    beta = rng.normal(size=(d, k))
    score = np.asarray(X @ beta)
    logits = 0.8 * score
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs[:, list(unlogged)] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    row_id = rng.permutation(10 * n)[:n].astype(np.int64)
    action = keyed_random.categorical(probs, row_id, seed, "test-action")
    reward = np.tanh(score[np.arange(n), action]) + 0.3 * rng.normal(size=n)
    columns = {"row_id": row_id, "features": csr_to_features(X)}
    if valued:
        columns["values"] = pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)),
                                                     pa.array(X.data.astype(np.float32)))
    columns.update(action=action.astype(np.int32), reward=reward, propensity=probs[np.arange(n), action])
    return pa.table(columns), X, action, reward, row_id


def dense_ridge(X, y, lam):
    """[b, w] of min Σ (y − b − x·w)² + λ‖w‖² from the dense normal equations (intercept unpenalised)."""
    A = np.column_stack([np.ones(X.shape[0]), X])
    G = A.T @ A + lam * np.diag(np.r_[0.0, np.ones(X.shape[1])])
    return scipy.linalg.solve(G, A.T @ y, assume_a="pos")


def assert_model_is(coef, intercept, X, y, lam):
    expected = dense_ridge(X.toarray() if sp.issparse(X) else X, y, lam)
    got = np.r_[intercept, coef]
    assert np.abs(got - expected).max() <= 1e-8 * max(1.0, np.abs(expected).max())


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fit")
    out = {}
    for valued in (False, True):
        table, X, action, reward, row_id = make_log(valued=valued)
        for parts in (1, 6):
            url = str(root / f"{'valued' if valued else 'binary'}-{parts}")
            write_log(table, url, n_parts=parts, n_features=D, n_actions=K)
            out[valued, parts] = url
        out[valued] = (X, action, reward, row_id)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("valued", [False, True])
def test_each_actions_model_is_the_dense_ridge_solution(logs, valued):
    X, action, reward, _ = logs[valued]
    model = fit_reward_model(logs[valued, 6], FitSettings(lam=2.5, rtol=1e-10))
    assert model.coef.shape == (D, K) and model.intercept.shape == (K,)
    for a in range(K):
        assert_model_is(model.coef[:, a], model.intercept[a], X[action == a], reward[action == a], 2.5)
    m = model.metadata
    assert m["lam"] == 2.5 and m["rows_per_action"] == np.bincount(action, minlength=K).tolist()
    assert m["folds"] == 0 and m["rows"] == N and m["n_features"] == D


@pytest.mark.slow
@pytest.mark.parametrize("valued", [False, True])
def test_one_and_many_parts_and_spilled_or_in_memory_parts_agree(logs, valued):
    one = fit_reward_model(logs[valued, 1], FitSettings(lam=2.5, folds=3, rtol=1e-10))
    many = fit_reward_model(logs[valued, 6], FitSettings(lam=2.5, folds=3, rtol=1e-10))
    in_memory = fit_reward_model(logs[valued, 6], FitSettings(lam=2.5, folds=3, spill="memory", rtol=1e-10))
    for name in ("coef", "intercept", "fold_coef", "fold_intercept"):
        np.testing.assert_allclose(getattr(many, name), getattr(one, name), rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(getattr(in_memory, name), getattr(many, name))
    assert one.metadata["fingerprint"] == many.metadata["fingerprint"]


@pytest.mark.slow
def test_fold_models_are_fitted_on_the_other_folds_and_predict_only_their_own(logs, tmp_path):
    X, action, reward, row_id = logs[False]
    model = fit_reward_model(logs[False, 1], FitSettings(lam=1.5, folds=4, seed=3, rtol=1e-10))
    fold = fold_of(row_id, 4, 3)
    assert set(np.unique(fold)) == {0, 1, 2, 3}
    for j in range(4):
        for a in range(K):
            rows = (fold != j) & (action == a)
            assert_model_is(model.fold_coef[j][:, a], model.fold_intercept[j][a], X[rows], reward[rows], 1.5)
    # each row is predicted by its own fold's model (which never saw it); without ids, by the full model
    predicted = model.predict(X, row_id=row_id)
    for j in range(4):
        rows = fold == j
        np.testing.assert_allclose(predicted[rows], X[rows] @ model.fold_coef[j] + model.fold_intercept[j], rtol=1e-12)
    np.testing.assert_allclose(model.predict(X), X @ model.coef + model.intercept, rtol=1e-12)
    np.testing.assert_array_equal(model.predict(X, actions=np.array([2]), row_id=row_id), predicted[:, [2]])
    # the rule itself: changing the rewards of fold 0's rows changes no prediction of a fold-0 row
    table = pq.read_table(logs[False, 1])
    changed = np.where(fold == 0, reward + 100.0, reward)
    url = str(tmp_path / "changed")
    write_log(table.set_column(table.column_names.index("reward"), "reward", pa.array(changed)), url,
              n_features=D, n_actions=K)
    refit = fit_reward_model(url, FitSettings(lam=1.5, folds=4, seed=3, rtol=1e-10))
    again = refit.predict(X, row_id=row_id)
    np.testing.assert_array_equal(again[fold == 0], predicted[fold == 0])
    assert np.abs(again[fold != 0] - predicted[fold != 0]).max() > 1.0  # the others did see the change
    # the file keeps it all
    model.save(str(tmp_path / "m.npz"))
    loaded = LinearRewardModel.load(str(tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.predict(X, row_id=row_id), predicted)
    assert loaded.folds == 4 and loaded.fold_seed == 3 and loaded.metadata == model.metadata


@pytest.mark.slow
@pytest.mark.parametrize("folds", [3, None])
def test_lambda_auto_picks_the_smallest_out_of_fold_error_on_the_keyed_sample(logs, folds):
    X, action, reward, row_id = logs[False]
    grid = (0.1, 3.0, 300.0)
    model = fit_reward_model(logs[False, 6], FitSettings(folds=folds, lam_grid=grid, search_rows=N // 2, rtol=1e-10))
    sample = keyed_random.uniform(row_id, 0, SAMPLE_PURPOSE) < 0.5
    search_folds = folds or 5  # SEARCH_FOLDS without folds
    fold = fold_of(row_id, search_folds, 0)
    errors = []
    for lam in grid:
        sse = np.zeros(K)
        for j in range(search_folds):
            for a in range(K):
                train, test = sample & (fold != j) & (action == a), sample & (fold == j) & (action == a)
                c = dense_ridge(X[train].toarray(), reward[train], lam)
                sse[a] += np.sum((reward[test] - c[0] - X[test] @ c[1:]) ** 2)
        errors.append(sse)
    search = model.metadata["lambda_search"]
    assert search["sample_rows"] == sample.sum() and search["grid"] == list(grid)
    # scanned from the largest λ down, stopping at the first error above the smallest so far
    scanned = []
    for i in (2, 1, 0):
        scanned.append(i)
        if errors[i].sum() > min(errors[j].sum() for j in scanned):
            break
    for i in range(3):
        if i in scanned:
            np.testing.assert_allclose(search["out_of_fold_sse"][i], errors[i], rtol=1e-8)
        else:
            assert search["out_of_fold_sse"][i] is None
    assert model.metadata["lam"] == grid[min(scanned, key=lambda i: errors[i].sum())]
    for a in range(K):  # and then fitted on all rows with the chosen λ
        assert_model_is(model.coef[:, a], model.intercept[a], X[action == a], reward[action == a],
                        model.metadata["lam"])


@pytest.mark.slow
def test_the_full_data_model_is_the_same_fit_with_or_without_folds(logs):
    plain = fit_reward_model(logs[True, 6], FitSettings(lam=2.5, rtol=1e-12))
    crossed = fit_reward_model(logs[True, 6], FitSettings(lam=2.5, folds=4, rtol=1e-12))
    np.testing.assert_allclose(crossed.coef, plain.coef, atol=1e-9)
    np.testing.assert_allclose(crossed.intercept, plain.intercept, atol=1e-9)


@pytest.mark.slow
def test_d_and_k_come_from_the_data_when_the_metadata_lacks_them(logs, tmp_path):
    table, X, action, reward, _ = make_log(valued=True)
    url = str(tmp_path / "bare")
    write_log(table, url, n_parts=3)
    bare = fit_reward_model(url, FitSettings(lam=2.5, folds=3, rtol=1e-10))
    known = fit_reward_model(logs[True, 6], FitSettings(lam=2.5, folds=3, rtol=1e-10))
    last = int(X.indices.max()) + 1
    assert bare.metadata["n_features"] == last and bare.metadata["n_actions"] == K
    np.testing.assert_allclose(bare.fold_coef, known.fold_coef[:, :last], rtol=1e-9, atol=1e-12)
    assert bare.metadata["fingerprint"] == known.metadata["fingerprint"]


def test_settings_are_checked_at_construction_naming_the_parameter():
    for kwargs, message in [({"lam": 0}, "lam must be a positive number"),
                            ({"lam": "best"}, "lam must be a positive number or 'auto'"),
                            ({"folds": 1}, "folds should be greater than or equal to 2"),
                            ({"rtol": float("nan")}, "rtol must be in"),
                            ({"max_iter": 0}, "max_iter should be greater than or equal to 1"),
                            ({"lam_grid": ()}, "lam_grid must be a non-empty sequence")]:
        with pytest.raises(ValueError, match=message):
            FitSettings(**kwargs)


def test_an_action_never_logged_warns_and_falls_back_to_the_pooled_mean(tmp_path):
    table, X, action, reward, _ = make_log(unlogged=(2,))
    url = str(tmp_path / "log")
    write_log(table, url, n_parts=3, n_features=D, n_actions=K)
    with pytest.warns(UnloggedActionWarning, match="action.s. 2 never logged"):
        model = fit_reward_model(url, FitSettings(lam=1.0, rtol=1e-10))
    assert model.intercept[2] == pytest.approx(reward.mean(), rel=1e-12) and not model.coef[:, 2].any()
    assert model.metadata["unlogged_actions"] == [2]


@pytest.mark.slow
def test_the_command_writes_the_model_and_evaluate_uses_it(logs, tmp_path, capsys):
    out = str(tmp_path / "model.npz")
    assert main(["fit", logs[True, 6], "--out", out, "--lam", "2.5", "--folds", "3", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "λ = 2.5" in printed and "3 folds" in printed
    model = LinearRewardModel.load(out)
    direct = fit_reward_model(logs[True, 6], FitSettings(lam=2.5, folds=3))
    np.testing.assert_array_equal(model.fold_coef, direct.fold_coef)
    assert model.metadata == direct.metadata
    assert main(["evaluate", logs[True, 6], "--policy", "constant:1", "--reward-model", out, "--no-progress"]) == 0
    assert "DR" in capsys.readouterr().out


def test_bad_options_are_errors_and_nothing_is_written(logs, tmp_path, capsys):
    out = tmp_path / "model.npz"
    assert main(["fit", logs[False, 1], "--out", str(out), "--lam", "0"]) == 2
    assert "λ must be a positive number or 'auto'" in capsys.readouterr().err
    assert main(["fit", logs[False, 1], "--out", str(out), "--folds", "0", "--no-progress"]) == 2
    assert "argument --folds: should be greater than or equal to 1" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("column, value, reason", [
    ("propensity", 0.0, "propensity outside (0, 1]"),
    ("reward", float("nan"), "NaN or infinite reward"),
    ("action", 7, "action out of range [0, 4)"),
])
def test_bad_data_is_an_error_naming_file_column_and_row_and_nothing_is_written(tmp_path, capsys, column, value,
                                                                                   reason):
    table, *_ = make_log(n=300)
    url = str(tmp_path / "log")
    write_log(table, url, n_parts=3, n_features=D, n_actions=K)
    bad = posixpath.join(url, "part-00001.parquet")
    part = pq.read_table(bad)
    values = part.column(column).to_pylist()
    values[5] = value
    pq.write_table(part.set_column(part.column_names.index(column), column,
                                   pa.array(values, part.schema.field(column).type)), bad)
    out = tmp_path / "model.npz"
    assert main(["fit", url, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    row = part.column("row_id")[5].as_py()
    assert err.count("\n") == 0 and bad in err and f"column '{column}'" in err and reason in err
    assert f"row_id={row}" in err
    assert not out.exists() and list(tmp_path.iterdir()) == [tmp_path / "log"]


@pytest.mark.slow
def test_identical_locally_on_a_local_cluster_and_on_a_command_line_cluster(logs, local_cluster, dask_cluster):
    from distributed import Client

    local = fit_reward_model(logs[True, 6], FitSettings(lam="auto", folds=3))
    with Client(local_cluster, set_as_default=False) as client:
        on_local_cluster = fit_reward_model(logs[True, 6], FitSettings(lam="auto", folds=3), client=client)
    with dask_cluster.client() as client:
        on_cluster = fit_reward_model(logs[True, 6], FitSettings(lam="auto", folds=3), client=client)
    for other in (on_local_cluster, on_cluster):
        for name in ("coef", "intercept", "fold_coef", "fold_intercept"):
            np.testing.assert_array_equal(getattr(other, name), getattr(local, name))
        assert other.metadata == local.metadata


def test_warnings_are_quiet_for_a_clean_log(logs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_reward_model(logs[False, 1], FitSettings(lam=1.0))


@pytest.mark.slow
def test_evaluate_fits_then_evaluates_with_the_cross_fitted_model(logs, tmp_path, capsys):
    from dr_scale.ope.estimators import DoublyRobust

    X, action, reward, row_id = logs[False]
    one_step, two_step, model = (str(tmp_path / n) for n in ("one.json", "two.json", "model.npz"))
    common = [logs[False, 6], "--policy", "constant:2", "--no-progress"]
    assert main(["evaluate", *common, "--fit-reward-model", "--folds", "3", "--lam", "2", "--json", one_step]) == 0
    assert main(["fit", logs[False, 6], "--out", model, "--folds", "3", "--lam", "2", "--no-progress"]) == 0
    assert main(["evaluate", *common, "--reward-model", model, "--json", two_step]) == 0
    first, second = (json.loads(open(f).read())["estimates"] for f in (one_step, two_step))
    assert first == second
    # DR with each row's ρ̂ from the fold model that did not see it
    table = pq.read_table(logs[False, 1])
    rho = LinearRewardModel.load(model).predict(X, row_id=row_id)
    target = np.zeros((N, K))
    target[:, 2] = 1.0
    direct = DoublyRobust().estimate(reward=reward, action=action, propensity=table.column("propensity").to_numpy(),
                                     target_probs=target, reward_hat=rho)
    assert first["DR"]["value"] == pytest.approx(direct.value, rel=1e-12)
    assert main(["evaluate", *common, "--fit-reward-model", "--reward-model", model]) == 2
    assert "not both" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["fit", "evaluate"])
def test_help_shows_the_fitting_options(command, capsys):
    assert main([command, "--help"]) == 0 and "--folds K" in capsys.readouterr().out


@pytest.mark.slow
def test_a_report_reads_a_cross_fitted_model_from_its_policies_file(logs, tmp_path):
    model = tmp_path / "models" / "rho.npz"
    assert main(["fit", logs[False, 6], "--out", str(model), "--folds", "3", "--no-progress"]) == 0
    policies = tmp_path / "policies.toml"
    policies.write_text('reward_model = "models/rho.npz"\nestimators = ["DR"]\n\n'
                        '[[policy]]\nname = "always-1"\nspec = "constant:1"\n')
    out, evaluated = tmp_path / "report", tmp_path / "evaluate.json"
    assert main(["report", "--logs", logs[False, 6], "--policies", str(policies), "--out", str(out),
                 "--no-progress"]) == 0
    assert main(["evaluate", logs[False, 6], "--policy", "constant:1", "--reward-model", str(model),
                 "--estimators", "DR", "--json", str(evaluated), "--no-progress"]) == 0
    (reported,) = json.loads((out / "report.json").read_text())["policies"]
    assert reported["estimates"]["DR"]["value"] == json.loads(evaluated.read_text())["estimates"]["DR"]["value"]


@pytest.mark.slow
def test_evaluate_fit_reward_model_is_identical_on_a_command_line_cluster(logs, dask_cluster, tmp_path):
    results = []
    for where in ([], ["--scheduler", dask_cluster.address]):
        out = str(tmp_path / f"{len(where)}.json")
        assert main(["evaluate", logs[True, 6], "--policy", "constant:3", "--fit-reward-model", "--folds", "5",
                     "--no-progress", "--json", out, *where]) == 0
        results.append(json.loads(open(out).read())["estimates"])
    assert results[0] == results[1]
