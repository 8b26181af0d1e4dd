"""Balanced IPW's weights from the cross-fitted classifier of logged against π-drawn pairs (dr_scale.ope.balancing).

On a world whose contexts are one of C categories (one-hot features, so the per-action logistic model can represent
log π(a|x)/π₀(a|x) exactly) with known π₀, π and E[r|x, a]: the fitted odds track the true weights, BIPW with them is
unbiased within the spread of its estimates over seeded logs, the fit is the same for any partitioning, and a log's
evaluation with the model equals the arrays'.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale.crossfit.engine import fit_log
from dr_scale.crossfit.settings import FitSettings
from dr_scale.logs.contract import Partition
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.ope.balancing import BalancingObjective, fit_balancing_model, fit_balancing_model_on_log
from dr_scale.ope.estimators import BalancedIPW
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.policies import ProbsColumnPolicy

C, K = 6, 3
_W = np.random.default_rng(99)
PI0 = _W.dirichlet(np.full(K, 2.0), C)  # the logging policy per context category
PI = _W.dirichlet(np.full(K, 1.0), C)  # the target policy
MU = _W.uniform(0.1, 0.9, (C, K))  # E[r | x, a]
TRUTH = float((PI * MU).sum(axis=1).mean())  # categories equally likely


def _log(seed: int, n: int, first: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    c = rng.integers(0, C, n)
    a = (rng.random(n)[:, None] >= np.cumsum(PI0[c], axis=1)).sum(axis=1).clip(max=K - 1)
    return dict(row_id=np.arange(first, first + n), X=sp.csr_matrix((np.ones(n), (np.arange(n), c)), shape=(n, C)),
                action=a, reward=(rng.random(n) < MU[c, a]).astype(float), propensity=PI0[c, a], target=PI[c])


def _parts(log: dict, n_parts: int) -> list[Partition]:
    cuts = np.linspace(0, log["action"].size, n_parts + 1).astype(int)
    return [Partition("<memory>", row_id=log["row_id"][a:b], X=log["X"][a:b], action=log["action"][a:b],
                      reward=log["reward"][a:b], propensity=log["propensity"][a:b],
                      table=pa.table({"target_probs": pa.array(list(log["target"][a:b]))}))
            for a, b in zip(cuts, cuts[1:], strict=False)]


POLICY = ProbsColumnPolicy("target_probs")


def _weights(log, n_parts=2, **settings):
    model = fit_balancing_model(_parts(log, n_parts), POLICY, K, C, lam=1e-3, **settings)
    assert model.converged
    return model, model.weights(log["X"], log["action"], log["row_id"])


@pytest.mark.slow  # 20,000 rows
def test_fitted_odds_track_the_true_weights():
    log = _log(1, 20000)
    _, w = _weights(log)
    true = log["target"][np.arange(20000), log["action"]] / log["propensity"]
    assert np.mean(np.abs(w / true - 1)) < 0.1  # a few hundred pairs per (fold, category, action) cell
    assert abs(np.mean(w) - 1) < 0.05


@pytest.mark.slow  # two fits
def test_the_fit_does_not_depend_on_the_partitioning():
    log = _log(2, 6000)
    _, one = _weights(log, n_parts=1)
    _, five = _weights(log, n_parts=5)
    np.testing.assert_allclose(five, one, rtol=1e-6)


@pytest.mark.slow  # 24 fits
def test_bipw_with_fitted_weights_is_unbiased_within_its_spread():
    """Over R seeded logs, |mean V̂ − V| ≤ 3 sd(V̂)/√R + the self-normalised ratio's O(1/n) bias bound (2 sd²,
    from its second-order expansion) — and the mean standard error is within 30% of the spread."""
    reps, n = 24, 4000
    values, errors = np.empty(reps), np.empty(reps)
    for i in range(reps):
        log = _log(100 + i, n, first=i * n)
        _, w = _weights(log)
        e = BalancedIPW().estimate(reward=log["reward"], action=log["action"], target_probs=log["target"],
                                   estimated_importance_weights=w)
        values[i], errors[i] = e.value, e.stderr
    sd = values.std(ddof=1)
    assert abs(values.mean() - TRUTH) <= 3 * sd / math.sqrt(reps) + 2 * sd ** 2, (values.mean(), TRUTH, sd)
    assert 0.7 < errors.mean() / sd < 1.3, (errors.mean(), sd)


@pytest.mark.slow
def test_a_log_evaluated_with_the_model_equals_the_arrays(tmp_path):
    log = _log(3, 4000)
    table = pa.table({"row_id": log["row_id"], "features": csr_to_features(log["X"]), "action": log["action"],
                      "reward": log["reward"], "propensity": log["propensity"],
                      "target_probs": pa.array(list(log["target"]))})
    write_log(table, str(tmp_path / "log"), n_parts=3, n_features=C, n_actions=K)
    model = fit_balancing_model_on_log(str(tmp_path / "log"), "probs:target_probs", lam=1e-3)
    in_memory, w = _weights(log, n_parts=3)
    np.testing.assert_allclose(model.weights(log["X"], log["action"], log["row_id"]), w, rtol=1e-6)
    result = evaluate_log(str(tmp_path / "log"), Evaluation("probs:target_probs", ["BIPW", "RM", "IPS"],
                                                            balancing_model=model))
    expected = BalancedIPW().estimate(reward=log["reward"], action=log["action"], target_probs=log["target"],
                                      estimated_importance_weights=model.weights(log["X"], log["action"],
                                                                                 log["row_id"]))
    assert result.estimates["BIPW"].value == pytest.approx(expected.value, rel=1e-12)
    assert result.estimates["BIPW"].stderr == pytest.approx(expected.stderr, rel=1e-9)
    assert abs(result.estimates["BIPW"].value - TRUTH) <= 4 * result.estimates["BIPW"].stderr


@pytest.mark.slow
def test_fitted_on_a_log_the_model_holds_only_the_features_the_rows_have(tmp_path):
    """The C categories' one-hot features spread over d = 4096 ids: the model fitted on the log holds C rows of
    coef with their ids, and its weights equal those of the dense fit on the same pairs (the caller's parts, all d
    features) to the solves' tolerance (rtol 1e-8 on the gradient of a λ-strongly convex loss), and those of
    fit_log over all d features, whose L-BFGS steps are the same, to 1e-10."""
    d, ids = 4096, np.array([3, 100, 777, 2048, 3000, 4095])
    log = _log(5, 3000)
    X = sp.csr_matrix((log["X"].data, ids[log["X"].indices], log["X"].indptr), shape=(3000, d))
    log = {**log, "X": X}
    table = pa.table({"row_id": log["row_id"], "features": csr_to_features(X), "action": log["action"],
                      "reward": log["reward"], "propensity": log["propensity"],
                      "target_probs": pa.array(list(log["target"]))})
    write_log(table, str(tmp_path / "log"), n_parts=2, n_features=d, n_actions=K)
    sized = fit_balancing_model_on_log(str(tmp_path / "log"), "probs:target_probs", lam=1.0, rtol=1e-8,
                                       max_iter=1000)
    assert sized.coef.shape == (2, C, K) and sized.dimension == d
    np.testing.assert_array_equal(sized.features, ids)
    dense = fit_balancing_model(_parts(log, 2), POLICY, K, d, lam=1.0, rtol=1e-8, max_iter=1000)
    assert dense.features is None and dense.coef.shape == (2, d, K)
    np.testing.assert_allclose(sized.weights(X, log["action"], log["row_id"]),
                               dense.weights(X, log["action"], log["row_id"]), rtol=1e-7)
    # the same driver over all d features takes the same L-BFGS steps (the unused features' coefficients stay 0)
    settings = FitSettings(lam=1.0, folds=2, seed=0, rtol=1e-8, max_iter=1000)
    same = fit_log(str(tmp_path / "log"), settings, DenseBalancing(policy=POLICY), n_actions=K)
    assert same.features is None and same.coef.shape == (2, d, K)
    np.testing.assert_allclose(sized.weights(X, log["action"], log["row_id"]),
                               same.weights(X, log["action"], log["row_id"]), rtol=1e-10)


@dataclasses.dataclass
class DenseBalancing(BalancingObjective):
    """The same classifiers fitted by fit_log over all d features (the dense layout)."""

    sized_by_use = False


@pytest.mark.slow
def test_evaluate_fits_the_weights_of_one_policy(capsys, tmp_path):
    from conftest import cli, error_line

    log = _log(4, 3000)
    table = pa.table({"row_id": log["row_id"], "features": csr_to_features(log["X"]), "action": log["action"],
                      "reward": log["reward"], "target_probs": pa.array(list(log["target"]))})  # no propensities
    write_log(table, str(tmp_path / "log"), n_parts=2, n_features=C, n_actions=K)
    code, printed, err = cli(capsys, "evaluate", tmp_path / "log", "--policy", "probs:target_probs", "--estimators",
                             "BIPW,BIPW(lambda_=5)", "--fit-balancing-weights", "--no-progress")
    assert code == 0, err
    assert "BIPW's weights: a classifier fitted on" in printed
    model = fit_balancing_model_on_log(str(tmp_path / "log"), "probs:target_probs")
    value = BalancedIPW().estimate(reward=log["reward"], action=log["action"], target_probs=log["target"],
                                   estimated_importance_weights=model.weights(log["X"], log["action"], log["row_id"]))
    assert f"BIPW {value.value:.4g}"[:9] in " ".join(printed.split())
    code, _, err = cli(capsys, "evaluate", tmp_path / "log", "--policy", "probs:target_probs", "--policy", "uniform",
                       "--estimators", "BIPW", "--fit-balancing-weights", "--no-progress")
    assert code == 2 and "give one --policy" in error_line(err)


@pytest.mark.timeout(240)
def test_fitted_weights_identical_locally_and_on_a_localcluster(capsys, tmp_path, modes):
    """Every L-BFGS pass sums the parts' terms in the parts' order: the fit, hence BIPW, is float for float the same
    on the local scheduler and on two worker processes."""
    import json

    from conftest import cli

    log = _log(5, 3000)
    table = pa.table({"row_id": log["row_id"], "features": csr_to_features(log["X"]), "action": log["action"],
                      "reward": log["reward"], "propensity": log["propensity"],
                      "target_probs": pa.array(list(log["target"]))})
    write_log(table, str(tmp_path / "log"), n_parts=3, n_features=C, n_actions=K)
    documents = {}
    for mode, extra in modes.items():
        code, _, err = cli(capsys, "evaluate", tmp_path / "log", "--policy", "probs:target_probs", "--estimators",
                           "BIPW,SNIPS", "--fit-balancing-weights", "--json", tmp_path / f"{mode}.json",
                           "--no-progress", *extra)
        assert code == 0, err
        documents[mode] = json.loads((tmp_path / f"{mode}.json").read_text())
    assert documents["cluster"]["estimates"] == documents["local"]["estimates"]
