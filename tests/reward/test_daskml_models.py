"""dask-ml's wrappers over a log's partitions (dr_scale.reward.daskml_models)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from sklearn.linear_model import SGDRegressor
from test_fitting import D, K, make_log

from dr_scale.logs.writing import write_log
from dr_scale.reward.daskml_models import incremental_reward_model, predict_log


@pytest.fixture(scope="module")
def linear_log(tmp_path_factory):
    """A log whose reward is linear in x per action (β_a known), in 5 parts."""
    table, X, action, _, _ = make_log(seed=8)
    beta = np.random.default_rng(9).normal(size=(D, K))
    reward = np.asarray(X @ beta)[np.arange(X.shape[0]), action] + 0.05 * np.random.default_rng(10).normal(
        size=X.shape[0])
    url = str(tmp_path_factory.mktemp("daskml") / "log")
    write_log(table.set_column(table.column_names.index("reward"), "reward", pa.array(reward)), url, n_parts=5,
              n_features=D, n_actions=K)
    return url, X, action, beta


@pytest.mark.slow
def test_incremental_streams_partial_fit_per_action_and_recovers_a_linear_model(linear_log):
    url, X, action, beta = linear_log
    sgd = SGDRegressor(alpha=1e-6, learning_rate="constant", eta0=0.02, random_state=0)
    model = incremental_reward_model(url, sgd, epochs=5)
    for a in range(K):
        assert np.corrcoef(model.estimators[a].coef_, beta[:, a])[0, 1] > 0.99
    # ParallelPostFit applies the fitted model partition by partition: the same as one in-memory predict
    for a in (0, K - 1):
        np.testing.assert_allclose(predict_log(model, url, a).compute(), model.predict(X[action == a])[:, a],
                                   rtol=1e-12)
