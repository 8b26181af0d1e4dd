"""Sparse target policies (listed actions with probabilities) and the marginalized estimators MIPS / SNMIPS."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale.logs.catalogue import CATALOGUE_FILE, Catalogue
from dr_scale.logs.contract import LogDataError
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log, write_parquet
from dr_scale.ope.estimators import IPS, MIPS, SNIPS, SNMIPS, RowInputs, make_estimators, marginal_weights
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.policies import ItemScorerPolicy, SparseProbs, parse_policy, top_k_softmax
from dr_scale.policies.columns import sparse_target_column
from dr_scale.reward.models import LinearRewardModel, predict_pairs

ALL = ["DM", "IPS", "DR", "SNIPS", "SNDR", "SwitchDR", "ClippedDR", "SwitchDR(tau=5)", "ClippedDR(max_weight=5)"]


def _world(seed, n=3000, k=40, d=12, top=5, L=6):
    """A small log with a stochastic top-`top` target policy, both dense and sparse, and a categorical embedding."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, format="csr", random_state=seed, data_rvs=lambda m: np.ones(m))
    pi_b = rng.dirichlet(np.full(k, 0.7), n) * 0.9 + 0.1 / k
    action = (pi_b.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    reward = rng.binomial(1, 0.2 + 0.6 * (action % 3 == 0)).astype(float)
    scores = rng.standard_normal((n, k))
    actions, probs = top_k_softmax(scores, top, 0.7)
    embedding = rng.integers(0, L, k)
    dense = SparseProbs(actions, probs, k).dense()
    same = embedding[None, :] == embedding[action][:, None]
    table = pa.table({"row_id": np.arange(n), "features": csr_to_features(X), "action": action.astype(np.int32),
                      "reward": reward, "propensity": pi_b[np.arange(n), action],
                      "target_probs": pa.array(list(dense)), "top": sparse_target_column(actions, probs),
                      "embedding_propensity": (pi_b * same).sum(axis=1)})
    model = LinearRewardModel(coef=rng.normal(0, 0.1, (d, k)), intercept=rng.uniform(0.2, 0.6, k))
    return table, dict(pi_b=pi_b, action=action, reward=reward, dense=dense, embedding=embedding, X=X,
                       actions=actions, probs=probs), model


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    table, arrays, model = _world(3)
    folder = tmp_path_factory.mktemp("sparse") / "log"
    write_log(table, str(folder), n_parts=7, n_features=12, n_actions=40)
    write_parquet(Catalogue(sp.csr_matrix(np.eye(40)), arrays["embedding"]).table(), str(folder / CATALOGUE_FILE))
    return folder, arrays, model


def test_sparse_column_equals_dense_probs_for_every_estimator(small_log):
    folder, _, model = small_log
    sparse = evaluate_log(str(folder), Evaluation("sparse:top", ALL, reward_model=model, baseline="uniform"))
    dense = evaluate_log(str(folder), Evaluation("probs:target_probs", ALL, reward_model=model, baseline="uniform"))
    for name in sparse.estimates:
        assert sparse.estimates[name].value == pytest.approx(dense.estimates[name].value, rel=1e-12, abs=1e-14)
        assert sparse.estimates[name].stderr == pytest.approx(dense.estimates[name].stderr, rel=1e-9)
        assert sparse.differences[name].value == pytest.approx(dense.differences[name].value, rel=1e-12, abs=1e-14)
    assert np.allclose(sparse.coverage.mass, dense.coverage.mass)


def test_predict_pairs_chunks_equal_the_columns():
    rng = np.random.default_rng(0)
    model = LinearRewardModel(coef=rng.standard_normal((5, 300)), intercept=rng.standard_normal(300))
    X = rng.standard_normal((700, 5))
    actions = rng.integers(0, 300, (700, 4))
    full = model.predict(X)
    assert np.allclose(predict_pairs(model, X, actions, chunk=64), np.take_along_axis(full, actions, axis=1))


def test_from_sparse_equals_from_arrays():
    _, a, _ = _world(5, n=500)
    hat = np.random.default_rng(1).random(a["dense"].shape)
    rows = RowInputs.from_sparse(a["reward"], a["action"], a["pi_b"][np.arange(500), a["action"]],
                                 a["actions"], a["probs"], np.take_along_axis(hat, a["actions"], axis=1))
    ref = RowInputs.from_arrays(a["reward"], a["action"], a["pi_b"][np.arange(500), a["action"]], a["dense"], hat)
    for field in ("weight", "reward_hat_pi"):
        assert np.allclose(getattr(rows, field), getattr(ref, field), rtol=1e-13, atol=0)
    matched = rows.weight > 0
    assert np.allclose(rows.reward_hat_logged[matched], ref.reward_hat_logged[matched])


def test_scorer_policy_is_chunk_invariant_and_the_top_k_softmax():
    rng = np.random.default_rng(2)
    X = sp.random(300, 8, density=0.4, format="csr", random_state=1)
    F = rng.standard_normal((500, 3))
    policy = ItemScorerPolicy(rng.standard_normal((8, 3)), F, rng.standard_normal(500), top_k=7, temperature=0.5)
    from dr_scale.logs.contract import Partition

    part = Partition("<t>", np.arange(300), X, np.zeros(300, int), np.zeros(300), np.full(300, 0.5), pa.table({}))
    target = policy.distribution(part, 500)
    chunked = ItemScorerPolicy(policy.coef, F, policy.item_bias, top_k=7, temperature=0.5, chunk=13)
    small = chunked.distribution(part, 500)
    # the same top K; the scores' last bits may differ, as BLAS may take another kernel for a 13-row product
    # (numpy 1.26's OpenBLAS does)
    assert np.array_equal(target.actions, small.actions)
    np.testing.assert_allclose(small.probs, target.probs, rtol=1e-12)
    scores = np.asarray(X @ policy.coef) @ F.T + policy.item_bias
    order = np.argsort(-scores, axis=1, kind="stable")[:, :7]
    assert np.array_equal(target.actions, order)
    top = np.take_along_axis(scores, order, axis=1) / 0.5
    expected = np.exp(top - top.max(axis=1, keepdims=True))
    assert np.allclose(target.probs, expected / expected.sum(axis=1, keepdims=True), rtol=1e-12)


def test_scorer_policy_file_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    policy = ItemScorerPolicy(rng.standard_normal((4, 2)), rng.standard_normal((9, 2)), top_k=3, temperature=2.0)
    policy.save(str(tmp_path / "p.npz"))
    again = parse_policy(f"scorer:{tmp_path / 'p.npz'}")
    assert again.digest == policy.digest and again.n_actions == 9 and again.top_k == 3


def test_bad_sparse_lists_name_the_row(tmp_path):
    table, _, _ = _world(4, n=50)
    lists = table.column("top").to_pylist()
    lists[17] = [{"action": 1, "prob": 0.5}, {"action": 1, "prob": 0.5}]
    bad = table.set_column(table.column_names.index("top"), "top",
                           pa.array(lists, type=table.schema.field("top").type))
    write_log(bad, str(tmp_path / "log"), n_actions=40)
    with pytest.raises(LogDataError, match="listed twice.*row_id=17|row_id=17.*listed twice"):
        evaluate_log(str(tmp_path / "log"), Evaluation("sparse:top", ["IPS"]))


# -- MIPS ------------------------------------------------------------------------------------------
def test_mips_through_the_log_equals_the_dense_arrays(small_log):
    folder, a, _ = small_log
    result = evaluate_log(str(folder), Evaluation("sparse:top", ["IPS", "MIPS", "SNMIPS"]))
    for est in (MIPS(), SNMIPS()):
        ref = est.estimate(reward=a["reward"], action=a["action"], target_probs=a["dense"],
                           action_embed=a["embedding"], pi_b=a["pi_b"])
        got = result.estimates[est.name]
        assert got.value == pytest.approx(ref.value, rel=1e-12)
        assert got.stderr == pytest.approx(ref.stderr, rel=1e-9)
        assert got.ci(0.05, "el") == pytest.approx(ref.ci(0.05, "el"), rel=1e-9)
    dense = evaluate_log(str(folder), Evaluation("probs:target_probs", ["MIPS"]))
    assert dense.estimates["MIPS"].value == pytest.approx(result.estimates["MIPS"].value, rel=1e-12)


def test_mips_is_partition_invariant(small_log, tmp_path):
    folder, _, _ = small_log
    table, arrays, _ = _world(3)
    one = tmp_path / "one"
    write_log(table, str(one), n_parts=1, n_features=12, n_actions=40)
    write_parquet(Catalogue(sp.csr_matrix(np.eye(40)), arrays["embedding"]).table(), str(one / CATALOGUE_FILE))
    a = evaluate_log(str(folder), Evaluation("sparse:top", ["MIPS", "SNMIPS"]))
    b = evaluate_log(str(one), Evaluation("sparse:top", ["MIPS", "SNMIPS"]))
    for name in a.estimates:
        assert a.estimates[name].value == pytest.approx(b.estimates[name].value, rel=1e-12)


def test_mips_without_a_catalogue_says_so(tmp_path):
    table, _, _ = _world(6, n=100)
    write_log(table, str(tmp_path / "log"), n_actions=40)
    with pytest.raises(Exception, match="catalogue"):
        evaluate_log(str(tmp_path / "log"), Evaluation("sparse:top", ["MIPS"]))


def test_mips_with_one_category_per_action_is_ips():
    _, a, _ = _world(7, n=800)
    k = a["pi_b"].shape[1]
    log = dict(reward=a["reward"], action=a["action"], target_probs=a["dense"], pi_b=a["pi_b"])
    p = a["pi_b"][np.arange(800), a["action"]]
    assert MIPS().estimate(**log, action_embed=np.arange(k)).value == pytest.approx(
        IPS().estimate(reward=a["reward"], action=a["action"], propensity=p, target_probs=a["dense"]).value, rel=1e-12)
    assert SNMIPS().estimate(**log, action_embed=np.arange(k)).value == pytest.approx(
        SNIPS().estimate(reward=a["reward"], action=a["action"], propensity=p, target_probs=a["dense"]).value,
        rel=1e-12)
    assert list(make_estimators(["MIPS", "SNMIPS"])) == ["MIPS", "SNMIPS"]


def test_marginal_weights_by_hand():
    w = marginal_weights([1], [0, 0, 1], [[0.2, 0.3, 0.5]], [[0.0, 1.0, 0.0]])
    assert w.tolist() == [pytest.approx(1.0 / 0.5)]


def _obp_embed():
    import importlib.util
    import sys
    from pathlib import Path

    if importlib.util.find_spec("obp") is None:
        pytest.skip("Open Bandit Pipeline is not installed (pip install --no-deps --ignore-requires-python obp==0.5.7)")
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        import obp_equality  # noqa: F401 - installs the stand-in torch, as the benchmark does
    finally:
        sys.path.pop(0)
    from obp.ope import estimators_embed

    return estimators_embed


@pytest.mark.parametrize("config", range(50))
def test_mips_equals_obp(config):
    ob = _obp_embed()
    rng = np.random.default_rng(1000 + config)
    n, k, L = int(rng.integers(20, 400)), int(rng.integers(2, 30)), int(rng.integers(1, 8))
    pi_b = rng.dirichlet(np.full(k, rng.uniform(0.3, 3)), n) * 0.95 + 0.05 / k
    action = (pi_b.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    action = np.minimum(action, k - 1)
    reward = rng.normal(rng.uniform(-1, 1), 1, n) if config % 2 else rng.binomial(1, 0.4, n).astype(float)
    target = rng.dirichlet(np.full(k, rng.uniform(0.1, 2)), n)
    embed = rng.integers(0, L, k)
    p_e_a = np.zeros((k, L, 1))
    p_e_a[np.arange(k), embed, 0] = 1.0
    theirs = dict(reward=reward, action=action, action_embed=embed[action][:, None], pi_b=pi_b[:, :, None],
                  action_dist=target[:, :, None], position=np.zeros(n, int), p_e_a=p_e_a)
    ours = dict(reward=reward, action=action, action_embed=embed, pi_b=pi_b, target_probs=target)
    for theirs_cls, mine in ((ob.MarginalizedInverseProbabilityWeighting, MIPS()),
                             (ob.SelfNormalizedMarginalizedInverseProbabilityWeighting, SNMIPS())):
        expected = theirs_cls(n_actions=k).estimate_policy_value(**theirs)
        assert abs(mine.estimate(**ours).value - expected) <= 1e-12 * max(1.0, abs(expected))
