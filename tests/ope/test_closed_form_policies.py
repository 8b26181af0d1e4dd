"""The by-value policies — uniform, ε-greedy, top-K — in closed form: equal to their dense (n, k) probabilities for
every estimator, and at 10^5–10^6 actions without any (n, k) array."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from test_sparse_and_mips import ALL, small_log  # noqa: F401 — the fixture

from dr_scale.logs.catalogue import CATALOGUE_FILE, Catalogue
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log, write_parquet
from dr_scale.ope.estimators import MIPS, ReplayMethod, make_estimators
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.policies import DenseProbs, SparseProbs, UniformMixture, parse_policy
from dr_scale.reward.models import LinearRewardModel, mean_over_actions

K = 40


def _dense(spec: str, arrays: dict) -> np.ndarray:
    """The policy's (n, k) probabilities written out by hand."""
    n = arrays["action"].size
    uniform = np.full((n, K), 1.0 / K)
    if spec == "uniform":
        return uniform
    if spec == "topk:1,5,9":
        out = np.zeros((n, K))
        out[:, [1, 5, 9]] = 1 / 3
        return out
    eps, inner = {"epsilon-greedy:0.3:constant:2": (0.3, np.eye(K)[np.full(n, 2)]),
                  "epsilon-greedy:0.2:sparse:top": (0.2, arrays["dense"]),
                  "epsilon-greedy:0.1:uniform": (0.1, uniform),
                  "epsilon-greedy:0.25:topk:1,5,9": (0.25, _dense("topk:1,5,9", arrays))}[spec]
    return eps / K + (1 - eps) * inner


SPECS = ["uniform", "topk:1,5,9", "epsilon-greedy:0.3:constant:2", "epsilon-greedy:0.2:sparse:top",
         "epsilon-greedy:0.1:uniform", "epsilon-greedy:0.25:topk:1,5,9"]


@pytest.mark.parametrize("spec", SPECS)
def test_closed_form_equals_the_dense_probabilities(small_log, spec):  # noqa: F811 — the fixture
    folder, a, model = small_log
    estimators = make_estimators([*ALL, "RM", "MIPS", "SNMIPS"])
    result = evaluate_log(str(folder), Evaluation(spec, estimators, reward_model=model, baseline="logging"))
    dense = _dense(spec, a)
    propensity = a["pi_b"][np.arange(a["action"].size), a["action"]]
    arrays = dict(reward=a["reward"], action=a["action"], propensity=propensity, target_probs=dense,
                  reward_hat=model.predict(a["X"]))
    for name, estimator in estimators.items():
        if isinstance(estimator, MIPS):
            expected = estimator.estimate(reward=a["reward"], action=a["action"], target_probs=dense,
                                          action_embed=a["embedding"], pi_b=a["pi_b"])
        else:
            expected = estimator.estimate(**arrays)
        got = result.estimates[name]
        if np.isnan(expected.value):  # RM of a policy that never gives probability 1
            assert isinstance(estimator, ReplayMethod) and np.isnan(got.value)
            continue
        assert got.value == pytest.approx(expected.value, rel=1e-11, abs=1e-14), name
        assert got.stderr == pytest.approx(expected.stderr, rel=1e-8), name
        assert got.chosen == expected.chosen, name
    np.testing.assert_allclose(result.coverage.mass, dense.sum(axis=0), rtol=1e-12)


def test_distributions_are_closed_forms_and_dense_on_request(small_log):  # noqa: F811 — the fixture
    from dr_scale.logs.reading import read_log

    folder, a, _ = small_log
    part = read_log(str(folder), extra_columns=("target_probs", "top"))[0]
    assert isinstance(parse_policy("uniform").distribution(part, K), UniformMixture)
    assert isinstance(parse_policy("topk:1,5,9").distribution(part, K), SparseProbs)
    assert isinstance(parse_policy("epsilon-greedy:0.3:constant:2").distribution(part, K), UniformMixture)
    assert isinstance(parse_policy("epsilon-greedy:0.3:probs:target_probs").distribution(part, K), DenseProbs)
    for spec in SPECS[:3]:
        rows = a["action"].size
        dense = parse_policy(spec).distribution(part, K).dense()
        np.testing.assert_allclose(dense, _dense(spec, a)[part.row_id % rows])


def test_mean_over_actions_by_blocks_equals_the_full_prediction():
    rng = np.random.default_rng(0)
    X = sp.random(50, 7, density=0.4, format="csr", random_state=1)
    model = LinearRewardModel(coef=rng.normal(size=(7, 33)), intercept=rng.normal(size=33))
    full = model.predict(X).mean(axis=1)
    for cells in (1, 50, 51, 50 * 33, 10**6):
        np.testing.assert_allclose(mean_over_actions(model, X, 33, cells=cells), full, rtol=1e-12)


def _large_log(folder, n: int, k: int, seed: int = 0, L: int = 7):
    """n rows over k actions logged uniformly at random (p = 1/k), a reward by the action's category, a catalogue."""
    rng = np.random.default_rng(seed)
    action = rng.integers(0, k, n)
    embedding = np.arange(k) % L
    X = sp.random(n, 5, density=0.5, format="csr", random_state=seed)
    table = pa.table({"row_id": np.arange(n), "features": csr_to_features(X), "action": action,
                      "reward": rng.binomial(1, 0.2 + 0.1 * embedding[action]).astype(float),
                      "propensity": np.full(n, 1.0 / k), "embedding_propensity": np.full(n, 1.0 / L)})
    write_log(table, str(folder), n_parts=2, n_features=5, n_actions=k)
    write_parquet(Catalogue(sp.csr_matrix((k, 1)), embedding).table(), str(folder / CATALOGUE_FILE))
    return table


def test_uniform_at_a_million_actions_holds_no_n_by_k_array(tmp_path):
    """2,000 rows × 10^6 actions: a dense (n, k) float64 array would be 16 GB. The uniform policy's weight is
    (1/k) / (1/k) = 1 on every row, so IPS = SNIPS = the mean reward, and MIPS's is (|e_i|/k) / (1/L), |e| the
    number of actions in category e."""
    n, k = 2000, 10**6
    table = _large_log(tmp_path / "log", n, k)
    tracemalloc.start()
    result = evaluate_log(str(tmp_path / "log"), Evaluation("uniform", ["IPS", "SNIPS", "MIPS", "SNMIPS"]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 200e6, peak  # the catalogue's (k,) columns and O(n) rows; (n, k) would be 16 GB
    mean = np.mean(table.column("reward").to_numpy())
    assert result.estimates["IPS"].value == pytest.approx(mean, rel=1e-12)
    assert result.estimates["SNIPS"].value == pytest.approx(mean, rel=1e-12)
    embedding = np.arange(k) % 7
    w = np.bincount(embedding)[embedding[table.column("action").to_numpy()]] / k * 7
    r = table.column("reward").to_numpy()
    assert result.estimates["MIPS"].value == pytest.approx(np.mean(w * r), rel=1e-12)
    assert result.estimates["SNMIPS"].value == pytest.approx(np.sum(w * r) / np.sum(w), rel=1e-12)


@pytest.mark.slow
def test_uniform_with_a_reward_model_at_many_actions_predicts_by_blocks(tmp_path):
    """DM and DR of the uniform and an ε-greedy policy at k = 20,000 (a dense (n, k) array: 320 MB) with a
    per-action linear model: equal to the model's mean over actions, in far less memory."""
    n, k = 2000, 20_000
    table = _large_log(tmp_path / "log", n, k)
    rng = np.random.default_rng(1)
    model = LinearRewardModel(coef=rng.normal(0, 0.1, (5, k)), intercept=rng.uniform(0.2, 0.6, k))
    from dr_scale.logs.reading import read_log

    parts = read_log(str(tmp_path / "log"))
    X = sp.vstack([p.X for p in parts]).tocsr()
    expected_dm = np.mean(np.concatenate([mean_over_actions(model, p.X, k) for p in parts]))
    tracemalloc.start()
    result = evaluate_log(str(tmp_path / "log"), Evaluation("uniform", ["DM", "DR"], reward_model=model))
    greedy = evaluate_log(str(tmp_path / "log"), Evaluation("epsilon-greedy:0.5:constant:3", ["DM"],
                                                            reward_model=model))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 80e6, peak  # a quarter of the dense array; the blocks of predictions are 8 MB
    assert result.estimates["DM"].value == pytest.approx(expected_dm, rel=1e-10)
    assert greedy.estimates["DM"].value == pytest.approx(
        0.5 * expected_dm + 0.5 * np.mean(model.predict(X, actions=np.array([3]))[:, 0]), rel=1e-10)
    assert np.isfinite(result.estimates["DR"].stderr) and len(table) == n
