"""Every representation of π(· | x) answers the operations the estimators use as its dense matrix does."""

import numpy as np
import pytest

from dr_scale.policies import ArrayValues, ChosenActions, DenseProbs, SparseProbs, UniformMixture

N, K = 400, 7


def representations() -> dict:
    rng = np.random.default_rng(0)
    chosen = ChosenActions(rng.integers(0, K, N), K)
    listed = SparseProbs(np.argsort(rng.random((N, K)), axis=1)[:, :3], rng.dirichlet(np.ones(3), N), K)
    return {
        "dense": DenseProbs(rng.dirichlet(np.ones(K), N)),
        "chosen": chosen,
        "listed": listed,
        "uniform": UniformMixture(N, K, 1.0),
        "explored chosen": chosen.explored(0.3),
        "explored listed": listed.explored(0.2),
        "explored mixture": listed.explored(0.2).explored(0.5),
    }


@pytest.mark.parametrize("name", list(representations()))
def test_each_operation_equals_the_dense_formula(name):
    target = representations()[name]
    dense = target.dense()
    rng = np.random.default_rng(1)
    action = rng.integers(0, K, N)
    values = rng.standard_normal((N, K))
    embedding = rng.integers(0, 3, K)
    assert dense.shape == (N, K) and np.allclose(dense.sum(axis=1), 1.0)
    np.testing.assert_allclose(target.at(action), dense[np.arange(N), action], rtol=1e-12)
    np.testing.assert_allclose(target.value(ArrayValues(values)), (dense * values).sum(axis=1), rtol=1e-12)
    value, logged = target.value_and_logged(action, ArrayValues(values))
    np.testing.assert_allclose(value, (dense * values).sum(axis=1), rtol=1e-12)
    taken = dense[np.arange(N), action] > 0  # ρ̂_{a_i}(x_i) is exact wherever π(a_i|x_i) > 0
    np.testing.assert_allclose(logged[taken], values[np.arange(N), action][taken], rtol=1e-12)
    np.testing.assert_allclose(target.mass(), dense.sum(axis=0), rtol=1e-12)
    category = embedding[action]
    np.testing.assert_allclose(target.category_probability(embedding, category),
                               (dense * (embedding[None, :] == category[:, None])).sum(axis=1), rtol=1e-12)


@pytest.mark.parametrize("name", list(representations()))
def test_keyed_draws_take_only_actions_pi_takes(name):
    target = representations()[name]
    row_id = np.arange(N)
    drawn = target.draw(row_id, 3, "test")
    assert drawn.dtype == np.int64 and np.array_equal(drawn, target.draw(row_id, 3, "test"))
    assert (target.dense()[row_id, drawn] > 0).all()


def test_keyed_draws_follow_pi_whatever_the_batch():
    one = np.array([[0.1, 0.0, 0.6, 0.3, 0.0, 0.0, 0.0]])
    kinds = (lambda n: DenseProbs(np.repeat(one, n, axis=0)),
             lambda n: SparseProbs(np.tile([[2, 3, 0]], (n, 1)), np.tile([[0.6, 0.3, 0.1]], (n, 1)), K),
             lambda n: ChosenActions(np.full(n, 2), K).explored(0.35))
    for make in kinds:
        target = make(20000)
        drawn = target.draw(np.arange(20000), 5, "f")
        np.testing.assert_allclose(np.bincount(drawn, minlength=K) / 20000, target.dense()[0], atol=0.015)
        assert np.array_equal(drawn[5000:], make(15000).draw(np.arange(5000, 20000), 5, "f"))  # keyed by row id
