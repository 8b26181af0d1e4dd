"""A linear or logistic reward model's predictions at each row's own actions (``predict_pairs``) are its
``predict`` columns at those actions, bit for bit: the same products summed along each row in X's order."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError
from dr_scale.reward.models import LinearRewardModel, LogisticRewardModel, pairs_by_columns, predict_pairs


def _rows(rng, n=3000, d=200):
    X = sp.random(n, d, density=0.06, random_state=int(rng.integers(1 << 30)), format="csr")
    X.data = rng.standard_normal(X.nnz)
    X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=X.shape)
    keep = np.ones(X.nnz, bool)
    keep[X.indptr[5]:X.indptr[6]] = False  # row 5 has no feature
    return sp.csr_matrix((X.data[keep], X.indices[keep], np.concatenate([[0], np.cumsum(keep)])[X.indptr]),
                         shape=X.shape)


@pytest.mark.parametrize("cls", [LinearRewardModel, LogisticRewardModel])
@pytest.mark.parametrize("folds", [0, 3])
@pytest.mark.parametrize("width", [1, 4])
def test_pairs_are_the_columns_at_each_rows_actions_bit_for_bit(cls, folds, width):
    rng = np.random.default_rng(folds * 10 + width)
    X = _rows(rng)
    n, d, k = X.shape[0], X.shape[1], 12
    extra = {"fold_coef": rng.standard_normal((folds, d, k)), "fold_intercept": rng.standard_normal((folds, k))} \
        if folds else {}
    model = cls(rng.standard_normal((d, k)), rng.standard_normal(k), **extra)
    actions = rng.integers(0, k, (n, width))
    for row_id in (None, np.arange(n) * 7 + 3):
        pairs = predict_pairs(model, X, actions, row_id)
        columns = model.predict(X, row_id=row_id)
        assert np.array_equal(pairs, np.take_along_axis(columns, actions, axis=1))
        assert np.array_equal(pairs, pairs_by_columns(model, X, actions, row_id))
    assert np.array_equal(model.predict_pairs(X.toarray(), actions), pairs_by_columns(model, X.toarray(), actions))


def test_pairs_of_a_model_sized_by_use_read_the_rows_at_its_features():
    rng = np.random.default_rng(4)
    X = _rows(rng)
    n, m, k, d = X.shape[0], X.shape[1], 5, 1 << 24
    ids = np.sort(rng.choice(d, m, replace=False))
    hashed = sp.csr_matrix((X.data, ids[X.indices], X.indptr), shape=(n, d))
    model = LinearRewardModel(rng.standard_normal((m, k)), rng.standard_normal(k), features=ids, dimension=d,
                              fold_coef=rng.standard_normal((2, m, k)), fold_intercept=rng.standard_normal((2, k)))
    actions = rng.integers(0, k, (n, 2))
    assert np.array_equal(model.predict_pairs(hashed, actions, row_id=np.arange(n)),
                          pairs_by_columns(model, hashed, actions, np.arange(n)))


def test_pairs_need_one_row_of_actions_per_row():
    model = LinearRewardModel(np.ones((3, 2)), np.zeros(2))
    X = sp.csr_matrix(np.eye(3))
    with pytest.raises(ParameterError, match=r"actions must be \(n, K\)"):
        model.predict_pairs(X, np.array([0, 1, 0]))
    for features in (X, X.toarray()):  # sparse or dense rows: the same message
        with pytest.raises(ParameterError, match="2 row"):
            model.predict_pairs(features, np.array([[0], [1]]))
    with pytest.raises(ParameterError, match=r"in \[0, 2\)"):
        model.predict_pairs(X, np.array([[0], [1], [2]]))
