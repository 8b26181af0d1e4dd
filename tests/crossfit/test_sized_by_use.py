"""Models sized by use (dr_scale.crossfit.engine.fit_log with ``sized_by_use``, dr_scale.crossfit.folded): the
coefficients of the features the training rows have only, predictions and estimates equal to the dense fit's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.crossfit.engine import fit_log
from dr_scale.crossfit.folded import used_columns
from dr_scale.logs.reading import read_log
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import Evaluation, evaluate_partitions
from dr_scale.propensity.fitting import PropensityObjective
from dr_scale.propensity.model import PropensityModel
from dr_scale.reward.files import load_reward_model
from dr_scale.reward.fitting import FitSettings, RewardModels

D, K, N = 4096, 3, 600  # ids drawn from a 4096-wide hashed space: ~300 of them in use


@dataclasses.dataclass
class DenseRewardModels(RewardModels):
    """The same reward models fitted over all d features (the dense layout)."""

    sized_by_use = False


@dataclasses.dataclass
class DensePropensity(PropensityObjective):
    """The same logging-policy model fitted over all d features."""

    sized_by_use = False


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    rng = np.random.default_rng(36)
    used = np.sort(rng.choice(D, 300, replace=False))
    X = sp.csr_matrix((rng.random((N, used.size)) < 0.03).astype(np.float64))
    X = sp.csr_matrix((X.data, used[X.indices], X.indptr), shape=(N, D))
    score = np.asarray(X @ rng.normal(size=(D, K)))
    probs = np.exp(score - score.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    row_id = np.arange(N, dtype=np.int64)
    action = keyed_random.categorical(probs, row_id, 1, "test-action")
    reward = (rng.random(N) < 1 / (1 + np.exp(-score[np.arange(N), action]))).astype(np.float64)
    table = pa.table({"row_id": row_id, "features": csr_to_features(X), "action": action.astype(np.int32),
                      "reward": reward, "propensity": probs[np.arange(N), action]})
    url = str(tmp_path_factory.mktemp("sized") / "log")
    write_log(table, url, n_parts=2, n_features=D, n_actions=K)
    return url, X, row_id


@pytest.mark.slow
@pytest.mark.parametrize("model", ["ridge", "logistic"])
def test_reward_model_sized_by_use_predicts_and_estimates_as_the_dense_one(log, tmp_path, model):
    url, X, row_id = log
    settings = FitSettings(folds=3, model=model)
    sparse = fit_log(url, settings, RewardModels(url))
    dense = fit_log(url, settings, DenseRewardModels(url))
    used = np.unique(X.indices)
    assert dense.features is None and dense.coef.shape == (D, K)
    np.testing.assert_array_equal(sparse.features, used)
    assert sparse.coef.shape == (used.size, K) and sparse.fold_coef.shape == (3, used.size, K)
    assert sparse.n_features == D and sparse.metadata["used_features"] == used.size
    for rid in (None, row_id):
        np.testing.assert_allclose(sparse.predict(X, row_id=rid), dense.predict(X, row_id=rid), rtol=0, atol=1e-12)
    sparse.save(str(tmp_path / "sparse.npz"))
    dense.save(str(tmp_path / "dense.npz"))
    again, converted = load_reward_model(str(tmp_path / "sparse.npz")), load_reward_model(str(tmp_path / "dense.npz"))
    np.testing.assert_array_equal(again.predict(X, row_id=row_id), sparse.predict(X, row_id=row_id))
    assert converted.features is not None and converted.coef.shape[0] <= used.size  # a dense file, converted
    np.testing.assert_array_equal(converted.predict(X, row_id=row_id), dense.predict(X, row_id=row_id))
    estimates = [evaluate_partitions(read_log(url), Evaluation("uniform", ["DM", "DR", "SNDR"], reward_model=m))
                 for m in (again, dense)]
    for name in ("DM", "DR", "SNDR"):
        assert estimates[0].estimates[name].value == pytest.approx(estimates[1].estimates[name].value,
                                                                   abs=1e-12, rel=0)


@pytest.mark.slow
def test_propensity_model_sized_by_use_predicts_as_the_dense_one(log):
    url, X, row_id = log
    settings = FitSettings(folds=2)
    sparse, dense = fit_log(url, settings, PropensityObjective()), fit_log(url, settings, DensePropensity())
    assert isinstance(sparse, PropensityModel) and sparse.coef.shape[0] == np.unique(X.indices).size
    np.testing.assert_allclose(sparse.predict_proba(X, row_id=row_id), dense.predict_proba(X, row_id=row_id),
                               rtol=0, atol=1e-12)


def test_ids_outside_the_index_contribute_nothing_and_rows_keep_their_places():
    X = sp.csr_matrix(np.array([[0.0, 5.0, 0.0, 7.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 2.0, 3.0]]))
    mapped = used_columns(X, np.array([0, 3]))
    np.testing.assert_array_equal(mapped.toarray(), [[0.0, 7.0], [0.0, 0.0], [1.0, 3.0]])
    coef = np.array([[1.0, 2.0, 3.0, 4.0]]).T
    np.testing.assert_array_equal(mapped @ coef[[0, 3]], X @ np.array([[1.0], [0.0], [0.0], [4.0]]))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dr", "ips"])
def test_a_policy_learned_on_the_used_features_equals_the_dense_one(log, monkeypatch, tmp_path, method):
    """``learn`` fits ρ̂ and the policy over the ~300 features the rows have, then spreads coef back to d: the
    same coef as the fit over all 4096 (the renumbering replaced by the identity) to 1e-10, zero rows for the
    features no row has, and a file of the used rows only."""
    import dr_scale.learning.learn as learn
    from dr_scale.learning.learn import LearnSettings, learn_policy
    from dr_scale.policies import LinearPolicy

    url, X, _ = log
    settings = LearnSettings(method=method, folds=2, lam=100.0)
    sized = learn_policy(url, settings)
    monkeypatch.setattr(learn, "used_features", lambda parts, d: (parts, np.arange(d)))
    dense = learn_policy(url, settings)
    np.testing.assert_allclose(sized.coef, dense.coef, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(sized.intercept, dense.intercept, rtol=1e-10, atol=1e-10)
    unused = np.setdiff1d(np.arange(D), np.unique(X.indices))
    assert sized.coef.shape == (D, K) and not sized.coef[unused].any() and sized.metadata["used_features"] < D
    sized.save(str(tmp_path / "p.npz"))
    with np.load(tmp_path / "p.npz") as z:
        assert z["coef"].shape[0] <= np.unique(X.indices).size
    np.testing.assert_array_equal(LinearPolicy.load(str(tmp_path / "p.npz")).coef, sized.coef)


@pytest.mark.slow
def test_a_part_is_mapped_once_for_the_model_and_its_fold_models_in_each_thread(log, monkeypatch):
    """The fold models are made once and share their model's mapping of a part's X to the used features: one
    ``used_columns`` per part and thread, whichever fold model or action predicts; a pickled copy (what a worker
    receives) carries neither and predicts the same."""
    import pickle
    import threading

    import dr_scale.crossfit.folded as folded

    url, X, row_id = log
    model = fit_log(url, FitSettings(folds=3), RewardModels())
    calls = []
    monkeypatch.setattr(folded, "used_columns", lambda *a: calls.append(1) or used_columns(*a))
    assert model.fold_model(1) is model.fold_model(1)
    expected = [model.fold_model(j).predict(X) for j in range(3)]
    model.predict(X, row_id=row_id)
    assert len(calls) == 1
    other = threading.Thread(target=model.fold_model(2).predict, args=(X[:10],))
    other.start()
    other.join()
    model.fold_model(0).predict(X)  # this thread's mapping survives another thread's part
    assert len(calls) == 2
    copy = pickle.loads(pickle.dumps(model))
    assert not copy._fold_models and not hasattr(copy._mapped, "last")
    for j in range(3):
        np.testing.assert_array_equal(copy.fold_model(j).predict(X), expected[j])
