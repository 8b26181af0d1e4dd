"""The ridge reward model shared across actions (context × action-feature interactions and both main effects)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale.logs.contract import Partition
from dr_scale.reward.shared import SharedRidgeRewardModel, fit_shared_ridge


def _parts(seed, n=1200, d=6, k=50, da=3, pieces=4):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.5, format="csr", random_state=seed)
    F = rng.standard_normal((k, da))
    a = rng.integers(0, k, n)
    B = rng.standard_normal((d, da))
    r = 0.2 + X @ rng.standard_normal(d) + F[a] @ rng.standard_normal(da) + np.einsum(
        "nd,nd->n", np.asarray(X @ B), F[a]) + rng.normal(0, 0.3, n)
    bounds = np.linspace(0, n, pieces + 1).astype(int)
    parts = [Partition("<p>", np.arange(lo, hi), X[lo:hi], a[lo:hi], r[lo:hi], np.full(hi - lo, 1 / k), pa.table({}))
             for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    return parts, X, F, a, r


@pytest.mark.slow
def test_equals_sklearn_ridge_on_the_explicit_features():
    from sklearn.linear_model import Ridge

    parts, X, F, a, r = _parts(0)
    model = fit_shared_ridge(lambda: parts, F, X.shape[1], lam=3.0, tol=1e-12)
    Xd = X.toarray()
    phi = np.hstack([Xd, F[a], (Xd[:, :, None] * F[a][:, None, :]).reshape(len(r), -1)])
    ref = Ridge(alpha=3.0, fit_intercept=True, solver="cholesky", tol=1e-14).fit(phi, r)
    theta = np.concatenate([model.beta_x, model.beta_f, model.interaction.ravel()])
    assert np.allclose(theta, ref.coef_, rtol=1e-7, atol=1e-9)
    assert model.intercept == pytest.approx(ref.intercept_, rel=1e-7)
    assert np.allclose(model.predict(X)[np.arange(len(r)), a], ref.predict(phi), rtol=1e-7, atol=1e-9)


@pytest.mark.slow
def test_pairs_equal_the_columns_and_the_file_round_trips(tmp_path):
    parts, X, F, a, r = _parts(1)
    model = fit_shared_ridge(lambda: parts, F, X.shape[1], lam=1.0)
    actions = np.random.default_rng(2).integers(0, 50, (X.shape[0], 4))
    assert np.allclose(model.predict_pairs(X, actions), np.take_along_axis(model.predict(X), actions, axis=1))
    model.save(str(tmp_path / "m.npz"))
    again = SharedRidgeRewardModel.load(str(tmp_path / "m.npz"))
    assert np.array_equal(again.predict(X), model.predict(X)) and again.metadata["lam"] == 1.0


@pytest.mark.slow
def test_dr_on_the_item_world_with_the_shared_model(tmp_path):
    """On the item world (the reward depends on the item's category centroid, which its features carry), the
    shared model's held-out squared error beats the constant model's, and DR with it is near the truth."""
    from dr_scale import Evaluation, evaluate_partitions
    from dr_scale.logs.reading import partition_from_table
    from dr_scale.synthetic.item_world import generate_item_rows, make_item_world

    world = make_item_world(3, 100, 1000, 4, 10, 10)
    train = [partition_from_table(generate_item_rows(world, 3, i * 4000, 4000)[0], "<train>", 100, 1000)
             for i in range(2)]
    model = fit_shared_ridge(lambda: train, world.item_features, 100, lam=1000.0, tol=1e-6)
    table, _ = generate_item_rows(world, 3, 10_000, 4000)
    test = partition_from_table(table, "<test>", 100, 1000)
    held = model.predict_pairs(test.X, test.action[:, None])[:, 0]
    constant = np.concatenate([p.reward for p in train]).mean()
    assert np.mean((test.reward - held) ** 2) < np.mean((test.reward - constant) ** 2)
    evaluation = Evaluation("sparse:target_topk", ["DM", "DR", "MIPS"], reward_model=model, n_actions=1000,
                            catalogue=world.catalogue())
    result = evaluate_partitions([test], evaluation)
    truth = table.column("target_expected_reward").to_numpy().mean()
    dr = result.estimates["DR"]
    assert abs(dr.value - truth) < 4 * dr.stderr + 0.02
    # its greedy scorer (a policy over the items' features) is worth more than the logging policy, in truth
    from dr_scale.learning.scorer import greedy_scorer

    chosen = greedy_scorer(model).distribution(test, 1000).actions[:, 0]
    q = world.category_rewards(world.latent(test.X))
    greedy_value = q[np.arange(len(test)), world.embedding[chosen]].mean()
    logging_value = (world.category_logging(world.latent(test.X)) * q).sum(axis=1).mean()
    assert greedy_value > logging_value + 0.1, (greedy_value, logging_value)
