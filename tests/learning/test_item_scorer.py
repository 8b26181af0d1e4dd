"""A linear scorer over the items' features learned on DR-imputed rewards (learn --learner scorer)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale import Evaluation, evaluate_log
from dr_scale.learning.scorer import _all_pairs_gram, learn_item_scorer
from dr_scale.logs.contract import Partition
from dr_scale.logs.reading import read_log
from dr_scale.policies import ItemScorerPolicy
from dr_scale.synthetic.item_world import generate_item_bandit, make_item_world
from tests.conftest import cli, error_line

SIZES = dict(features=200, actions=1000, action_features=4, embedding_categories=10)
SEED = 5


@pytest.fixture(scope="module")
def item_log(tmp_path_factory):
    folder = tmp_path_factory.mktemp("items") / "log"
    manifest = generate_item_bandit(str(folder), rows=4000, rows_per_part=2000, seed=SEED, **SIZES)
    return folder, manifest


def true_value(policy, folder) -> float:
    """(1/n) Σ_i q(x_i, π(x_i)) on the log's contexts, q the world's expected reward (known: the world is made)."""
    world = make_item_world(SEED, 200, 1000, 4, 10)
    values = []
    for part in read_log(str(folder)):
        q = world.category_rewards(world.latent(part.X))
        chosen = policy.distribution(part, 1000)
        values.append((chosen.probs * np.take_along_axis(q, world.embedding[chosen.actions], axis=1)).sum(axis=1))
    return float(np.concatenate(values).mean())


def test_the_all_pairs_gram_equals_the_explicit_sum():
    rng = np.random.default_rng(1)
    d, k, da = 3, 5, 2
    X = sp.csr_matrix(rng.integers(0, 2, (7, d)).astype(float))
    F = rng.standard_normal((k, da))
    v = rng.standard_normal(1 + d + da + d * da)
    x = X.toarray()
    phi = np.array([np.concatenate([[1.0], x[i], F[a], np.outer(x[i], F[a]).ravel()])
                    for i in range(7) for a in range(k)])
    expected = phi.T @ (phi @ v)
    assert np.allclose(_all_pairs_gram(X, v, d, k, F.sum(axis=0), F.T @ F), expected, rtol=1e-12, atol=1e-12)


def test_dm_imputation_without_penalty_is_the_reward_model():
    # with Γ = ρ̂ on every pair and λ → 0, the least-squares fit over all pairs is ρ̂'s own θ
    rng = np.random.default_rng(2)
    X = sp.csr_matrix(rng.integers(0, 2, (300, 3)).astype(float))
    F = rng.standard_normal((20, 2))
    a = rng.integers(0, 20, 300)
    r = rng.standard_normal(300)
    part = Partition("<p>", np.arange(300), X, a, r, np.full(300, 0.05), pa.table({}))
    from dr_scale.reward.shared import fit_shared_ridge

    model = fit_shared_ridge(lambda: [part], F, 3, lam=1.0)
    policy = learn_item_scorer(lambda: [part], F, 3, method="dm", reward_model=model, lam=1e-9, tol=1e-12)
    assert np.allclose(policy.coef, model.interaction, atol=1e-6)
    assert np.allclose(policy.item_bias, F @ model.beta_f, atol=1e-6)


@pytest.mark.slow
def test_learned_scorer_beats_the_logging_policy(item_log, tmp_path, capsys):
    folder, manifest = item_log
    out = tmp_path / "scorer.npz"
    code, stdout, _ = cli(capsys, "learn", folder, "--learner", "scorer", "--out", out, "--no-progress")
    assert code == 0 and "learned a DR item scorer on 4000 rows" in stdout
    policy = ItemScorerPolicy.load(str(out))
    assert policy.top_k == 1 and policy.metadata["training"]["logs"] and policy.metadata["converged"]
    logging_value = manifest["calibration"]["logging_value"]
    learned = true_value(policy, folder)
    # exact expected rewards on the same contexts: no sampling noise in either value
    assert learned > logging_value + 0.1, (learned, logging_value)
    # the file is a policy evaluate reads (scorer:POLICY.npz), with MIPS over the catalogue
    result = evaluate_log(str(folder), Evaluation(f"scorer:{out}", ["MIPS"]))
    assert np.isfinite(result.estimates["MIPS"].value)


@pytest.mark.slow
def test_ips_and_dm_scorers_also_beat_logging(item_log):
    folder, manifest = item_log
    from dr_scale.learning.scorer import learn_scorer_from_log

    for method in ("ips", "dm"):
        policy = learn_scorer_from_log(str(folder), method=method)
        assert true_value(policy, folder) > manifest["calibration"]["logging_value"] + 0.1, method


def test_learn_scorer_refuses_a_log_without_catalogue(tmp_path, capsys):
    from dr_scale.synthetic.bandit import generate_bandit

    generate_bandit(str(tmp_path / "log"), rows=200, features=100, actions=3)
    code, _, err = cli(capsys, "learn", tmp_path / "log", "--learner", "scorer", "--out", tmp_path / "p.npz",
                       "--no-progress")
    assert code == 2 and "no action catalogue" in error_line(err)
    assert not (tmp_path / "p.npz").exists()
    code, _, err = cli(capsys, "learn", tmp_path / "log", "--learner", "scorer", "--model", "logistic", "--out",
                       tmp_path / "p.npz", "--no-progress")
    assert code == 2 and "--model logistic" in error_line(err)


def test_scorer_metadata_round_trips(tmp_path):
    policy = ItemScorerPolicy(np.eye(2), np.eye(2), metadata={"method": "dr", "lam": 2.0})
    policy.save(str(tmp_path / "p.npz"))
    again = ItemScorerPolicy.load(str(tmp_path / "p.npz"))
    assert again.metadata == {"method": "dr", "lam": 2.0} and json.dumps(again.metadata)


@pytest.mark.parametrize("change, message", [
    (lambda a: a.update(features=a["features"][::-1].copy()), "'features' must be increasing ids in [0, n_features"),
    (lambda a: a.pop("n_features"), "'features' and 'n_features' go together"),
    (lambda a: a.update(n_features=np.array("x")), "'n_features' must be one integer"),
    (lambda a: a.update(n_features=np.array(2)), "'features' must be increasing ids in [0, n_features = 2)"),
    (lambda a: a.update(features=a["features"][:1]), "'features' must be 2 integer ids (one per row of 'coef')"),
])
def test_a_scorer_file_sized_by_use_with_bad_ids_is_refused_naming_it(tmp_path, change, message):
    coef = np.zeros((6, 2))
    coef[[1, 4]] = [[1.0, 2.0], [3.0, 4.0]]
    ItemScorerPolicy(coef, np.eye(2)).save(str(tmp_path / "p.npz"))
    arrays = dict(np.load(tmp_path / "p.npz"))
    assert arrays["features"].tolist() == [1, 4] and int(arrays["n_features"]) == 6  # the non-zero rows only
    change(arrays)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(Exception) as info:
        ItemScorerPolicy.load(str(tmp_path / "bad.npz"))
    assert message in str(info.value) and "bad.npz" in str(info.value)
