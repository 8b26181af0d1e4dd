"""The estimated logging policy (dr_scale.propensity): the multinomial logistic fit out of core.

Checked against scikit-learn's ``LogisticRegression(C=1/λ)`` on the same rows, to a tolerance derived
from the solver's stopping rule (‖x̂ − x*‖ ≤ ‖∇L(x̂)‖ / μ for a μ-strongly convex L); the fold models
against fits on the other folds' rows; 1 vs many parts, spilled vs in memory; a log without a propensity
column; λ = auto by the out-of-fold log loss; save/load and a file of another kind; local vs a LocalCluster.
"""

from __future__ import annotations

import glob

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from scipy.special import softmax

from dr_scale.core import keyed_random
from dr_scale.crossfit.parts import fold_of
from dr_scale.crossfit.settings import FitSettings
from dr_scale.io.parameter_files import ParameterFileError
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.propensity.fitting import fit_propensity_model
from dr_scale.propensity.model import PropensityModel
from dr_scale.reward.models import LinearRewardModel

N, D, K = 3000, 20, 3


def make_log(n=N, d=D, k=K, seed=0):
    """Sparse x, actions logged by a softmax of a linear score (the model's own form)."""
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix((rng.random((n, d)) < np.linspace(0.3, 0.05, d)).astype(np.float64))
    probs = softmax(np.asarray(X @ rng.normal(size=(d, k))) + rng.normal(size=k), axis=1)
    row_id = rng.permutation(10 * n)[:n].astype(np.int64)
    action = keyed_random.categorical(probs, row_id, seed, "test-action")
    reward = (rng.random(n) < 0.3).astype(np.float64)
    table = pa.table({"row_id": row_id, "features": csr_to_features(X), "action": action.astype(np.int32),
                      "reward": reward, "propensity": probs[np.arange(n), action]})
    return table, X, action, row_id


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("propensity")
    table, X, action, row_id = make_log()
    out = {"data": (X, action, row_id)}
    for parts in (1, 5):
        out[parts] = str(root / f"log-{parts}")
        write_log(table, out[parts], n_parts=parts, n_features=D, n_actions=K)
    out["hidden"] = str(root / "hidden")
    write_log(table, out["hidden"], n_parts=2, n_features=D, n_actions=K)
    for path in glob.glob(out["hidden"] + "/*.parquet"):  # the same log without its propensity column
        pq.write_table(pq.read_table(path).drop(["propensity"]), path)
    return out


def objective_gradient(X, a, W, b, lam, last):
    """∇ of Σ_i −log softmax(x_i W + b)_{a_i} + (λ/2)‖W‖² over (W, b without b[last]), and its Hessian's least
    eigenvalue there (dense; small d, k)."""
    n, d = X.shape
    k = b.size
    Xd = X.toarray()
    P = softmax(Xd @ W + b, axis=1)
    G = P.copy()
    G[np.arange(n), a] -= 1
    grad = np.r_[(Xd.T @ G + lam * W).ravel(), np.delete(G.sum(axis=0), last)]
    A = np.column_stack([Xd, np.ones(n)])  # (W row-major then b) ⊗ structure: H = Σ_i (diag p − ppᵀ) ⊗ ã ãᵀ
    S = np.einsum("ia,ab->iab", P, np.eye(k)) - np.einsum("ia,ib->iab", P, P)
    H = np.einsum("ij,il,iab->jalb", A, A, S).reshape((d + 1) * k, (d + 1) * k)
    H[np.arange(d * k), np.arange(d * k)] += lam
    keep = np.delete(np.arange((d + 1) * k), d * k + last)
    return grad, np.linalg.eigvalsh(H[np.ix_(keep, keep)])[0]


def assert_is_sklearn_solution(W, b, X, a, lam):
    """(W, b) within the stopping rule's distance of scikit-learn's solution on the same rows."""
    from sklearn.linear_model import LogisticRegression

    sk = LogisticRegression(C=1.0 / lam, tol=1e-12, max_iter=100_000).fit(X, a)
    W_sk, b_sk = sk.coef_.T, sk.intercept_
    last = b.size - 1
    b_sk = b_sk - b_sk[last] + b[last]  # softmax's redundant direction: the same logits up to a constant
    g_hat, mu = objective_gradient(X, a, W, b, lam, last)
    g_sk, _ = objective_gradient(X, a, W_sk, b_sk, lam, last)
    bound = 2 * (np.linalg.norm(g_hat) + np.linalg.norm(g_sk)) / mu  # 2: the curvature along the segment
    distance = np.linalg.norm(np.r_[(W - W_sk).ravel(), b - b_sk])
    assert distance <= bound, (distance, bound)
    return distance, bound


@pytest.mark.slow
def test_the_full_data_model_is_sklearns_multinomial_logistic_regression(logs):
    X, action, _ = logs["data"]
    model = fit_propensity_model(logs[5], FitSettings(lam=3.0, rtol=1e-7))
    assert model.coef.shape == (D, K) and model.folds == 0
    distance, bound = assert_is_sklearn_solution(model.coef, model.intercept, X, action, 3.0)
    assert bound < 1e-3  # the tolerance is tight, not vacuous
    m = model.metadata
    assert m["lam"] == 3.0 and m["rows_per_action"] == np.bincount(action, minlength=K).tolist()
    assert m["passes"] >= 2 and m["rows"] == N


@pytest.mark.slow
def test_a_pass_over_a_part_in_row_chunks_is_the_same_fit(logs, monkeypatch):
    """A pass covers a part's rows CHUNK_ROWS at a time (bounded temporaries): chunks that split the actions'
    blocks still give scikit-learn's solution, and the same model as one chunk per block up to the sums' order."""
    import dr_scale.crossfit.parts as parts

    X, action, _ = logs["data"]
    whole = fit_propensity_model(logs[1], FitSettings(lam=3.0, rtol=1e-7))
    monkeypatch.setattr(parts, "CHUNK_ROWS", 97)
    chunked = fit_propensity_model(logs[1], FitSettings(lam=3.0, rtol=1e-7))
    assert_is_sklearn_solution(chunked.coef, chunked.intercept, X, action, 3.0)
    np.testing.assert_allclose(chunked.predict_proba(X), whole.predict_proba(X), atol=1e-6)


@pytest.mark.slow
def test_fold_models_are_fitted_on_the_other_folds_and_predict_only_their_own(logs):
    X, action, row_id = logs["data"]
    model = fit_propensity_model(logs[1], FitSettings(lam=2.0, folds=3, seed=4, rtol=1e-7))
    fold = fold_of(row_id, 3, 4)
    for j in range(3):
        assert_is_sklearn_solution(model.fold_coef[j], model.fold_intercept[j], X[fold != j], action[fold != j], 2.0)
    p = model.predict_proba(X, row_id=row_id)
    for j in range(3):
        rows = fold == j
        expected = softmax(np.asarray(X[rows] @ model.fold_coef[j]) + model.fold_intercept[j], axis=1)
        np.testing.assert_array_equal(p[rows], expected)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(model.predict_proba(X, actions=np.array([2, 0]), row_id=row_id), p[:, [2, 0]])


@pytest.mark.slow  # four fits of the propensity model, ~5 s of CPU
def test_one_and_many_parts_spilled_or_in_memory_and_without_propensities_agree(logs):
    settings = FitSettings(lam=2.0, folds=2, rtol=1e-7)
    one = fit_propensity_model(logs[1], settings)
    many = fit_propensity_model(logs[5], settings)
    in_memory = fit_propensity_model(logs[5], FitSettings(lam=2.0, folds=2, rtol=1e-7, spill="memory"))
    hidden = fit_propensity_model(logs["hidden"], settings)
    X, *_ = logs["data"]
    for other in (one, hidden):  # other partitionings: the sums' order differs, the optimum does not
        np.testing.assert_allclose(other.predict_proba(X), many.predict_proba(X), atol=1e-5)
    for name in ("coef", "intercept", "fold_coef", "fold_intercept"):
        np.testing.assert_array_equal(getattr(in_memory, name), getattr(many, name))
    assert one.metadata["fingerprint"] == many.metadata["fingerprint"]


@pytest.mark.slow
def test_lambda_auto_picks_the_smallest_out_of_fold_log_loss(logs):
    model = fit_propensity_model(logs[5], FitSettings(folds=3, lam_grid=(0.1, 1.0, 10.0, 100.0)))
    search = model.metadata["lambda_search"]
    losses = [v for v in search["mean_log_loss"] if v is not None]
    assert search["sample_rows"] == N and len(losses) >= 2
    assert model.metadata["lam"] == search["grid"][search["chosen"]]
    assert search["mean_log_loss"][search["chosen"]] == min(losses)
    # the chosen λ's loss is below the uniform policy's log k and the marginal frequencies' entropy
    _, action, _ = logs["data"]
    share = np.bincount(action) / N
    assert min(losses) < -(share * np.log(share)).sum() < np.log(K)


def test_save_load_round_trip_and_files_of_another_kind_are_refused(logs, tmp_path):
    model = fit_propensity_model(logs[5], FitSettings(lam=2.0, folds=2))
    path = str(tmp_path / "p.npz")
    model.save(path)
    again = PropensityModel.load(path)
    for name in ("coef", "intercept", "fold_coef", "fold_intercept"):
        np.testing.assert_array_equal(getattr(again, name), getattr(model, name))
    assert again.metadata == model.metadata and again.fold_seed == model.fold_seed
    with pytest.raises(ParameterFileError, match="holds a propensity model .*, not a linear"):
        LinearRewardModel.load(path)
    LinearRewardModel(model.coef, model.intercept).save(str(tmp_path / "r.npz"))
    with pytest.raises(ParameterFileError, match="holds a linear .ridge. reward model, not a propensity model"):
        PropensityModel.load(str(tmp_path / "r.npz"))


@pytest.mark.slow
def test_an_action_never_logged_gets_its_smoothed_share(tmp_path):
    table, X, action, row_id = make_log(k=3)
    keep = np.asarray(action) != 1
    table = table.filter(pa.array(keep))
    write_log(table, str(tmp_path / "log"), n_features=D, n_actions=K)
    model = fit_propensity_model(str(tmp_path / "log"), FitSettings(lam=2.0, rtol=1e-7))
    p = model.predict_proba(X[keep])
    assert model.metadata["unlogged_actions"] == [1]
    assert np.all(model.coef[:, 1] == 0)
    assert np.all((p[:, 1] > 0) & (p[:, 1] < 2.0 / keep.sum()))


@pytest.mark.slow
def test_identical_locally_and_on_a_local_cluster(logs, local_cluster):
    from distributed import Client

    settings = FitSettings(lam="auto", folds=3, lam_grid=(1.0, 10.0))
    local = fit_propensity_model(logs[5], settings)
    with Client(local_cluster, set_as_default=False) as client:
        remote = fit_propensity_model(logs[5], settings, client=client)
    for name in ("coef", "intercept", "fold_coef", "fold_intercept"):
        np.testing.assert_array_equal(getattr(remote, name), getattr(local, name))
    assert remote.metadata == local.metadata
