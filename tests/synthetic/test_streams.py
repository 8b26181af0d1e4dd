"""The moment-level streams equal the states the estimators build from the rows themselves."""

import numpy as np
import pytest

from dr_scale.ope.estimators import IPS, SNDR, DoublyRobust, RowInputs
from dr_scale.synthetic.finite_world import BanditWorld
from dr_scale.synthetic.streams import Cells, running_states


def test_cells_have_the_worlds_probabilities_and_value():
    world = BanditWorld.make(epsilon=0.05)
    cells = Cells.of(world)
    assert cells.prob.sum() == pytest.approx(1.0, abs=1e-12)
    assert cells.prob @ (cells.rows.weight * cells.rows.reward) == pytest.approx(world.value, rel=1e-12)
    assert cells.prob @ cells.rows.weight == pytest.approx(1.0, rel=1e-12)  # E[w] = 1
    assert cells.prob @ cells.rows.reward == pytest.approx(world.logging_value, rel=1e-12)


@pytest.mark.parametrize("estimator", [IPS(), DoublyRobust(), SNDR()], ids=lambda e: e.name)
def test_running_states_equal_the_states_of_the_rows(estimator):
    world = BanditWorld.make(epsilon=0.1)
    cells = Cells.of(world)
    days = next(running_states(world, estimator, streams=1, days=3, rows_per_day=400, seed=5))
    counts = np.random.default_rng([5, 0]).multinomial(400, cells.prob / cells.prob.sum(), size=3).cumsum(axis=0)
    for state, count in zip(days, counts, strict=True):
        index = np.repeat(np.arange(count.size), count)
        rows = RowInputs(*(f[index] for f in (cells.rows.reward, cells.rows.weight, cells.rows.reward_hat_pi,
                                               cells.rows.reward_hat_logged)))
        expected = estimator.state(rows)
        assert state.n == expected.n
        np.testing.assert_allclose(state.mean, expected.mean, rtol=1e-12)
        np.testing.assert_allclose(state.comoment, expected.comoment, rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(state.low, expected.low)
        np.testing.assert_array_equal(state.high, expected.high)
        assert estimator.result(state).cs(0.05) == pytest.approx(estimator.result(expected).cs(0.05), rel=1e-9)
