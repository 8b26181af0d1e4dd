"""Flexible reward models streamed over a log's partitions with dask-ml's wrappers.

* :func:`incremental_reward_model` — for each action a, ``dask_ml.wrappers.Incremental``
  streams a scikit-learn regressor's ``partial_fit`` over the log's partitions: a Dask
  array whose chunks are the CSR rows of action a in each part, read by one task each
  (``epochs`` passes). Any regressor with ``partial_fit`` (``SGDRegressor``,
  ``PassiveAggressiveRegressor``, ``MLPRegressor`` …) gives a
  :class:`~dr_scale.reward.sklearn_models.SklearnRewardModel` that ``Evaluation`` uses like any other.
* :func:`predict_log` — ``dask_ml.wrappers.ParallelPostFit`` applies a fitted regressor
  to every partition's rows of an action: ρ̂_a as a Dask array, partition by partition.

Where the project's own solvers serve instead, and why. Ridge reward models
(``dr-scale fit``, :mod:`dr_scale.reward.fitting`) use the block CG of
:mod:`dr_scale.outofcore.ridge`: it solves the exact ridge objective (to a residual
tolerance), fits all k actions — and the K fold models — in each pass, and a pass runs
its partitions in parallel. ``Incremental`` is a chain of ``partial_fit`` calls, one
partition after another, one estimator (so one action) per chain: k sequential passes
per epoch, and a stochastic-gradient answer. dask-ml's own ``LinearRegression``, ``PCA``
and ``TruncatedSVD`` fail on Dask arrays of scipy.sparse chunks (docs/visits.md).
``Evaluation`` applies a model to each partition inside its own per-partition task, so it
needs no ``ParallelPostFit``.

dask-ml is an optional dependency: ``pip install "dr-scale[ml]"``.
"""

from __future__ import annotations

import warnings
from typing import Any

import dask
import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from dr_scale.logs.listing import list_parts, log_metadata
from dr_scale.logs.reading import read_partition
from dr_scale.outofcore.compute import compute
from dr_scale.reward.sklearn_models import SklearnRewardModel


def _action_rows(fs, path: str, n_features: int, action: int) -> tuple[sp.csr_matrix, np.ndarray]:
    part = read_partition(fs, path, n_features=n_features)
    rows = np.flatnonzero(part.action == action)
    assert part.X is not None  # read with its features
    return part.X[rows], part.reward[rows]


def _action_sums(fs, path: str, n_features: int, n_actions: int) -> np.ndarray:
    part = read_partition(fs, path, n_features=n_features, n_actions=n_actions, with_features=False)
    return np.vstack([np.bincount(part.action, minlength=n_actions),
                      np.bincount(part.action, weights=part.reward, minlength=n_actions)])


def action_arrays(fs, paths: list[str], n_features: int, action: int):
    """(X, y): Dask arrays over the parts' rows of ``action``, X's chunks scipy.sparse CSR (rows unknown: nan)."""
    import dask.array as da

    pieces = [dask.delayed(_action_rows, nout=2)(fs, p, n_features, action) for p in paths]
    X = da.concatenate([da.from_delayed(x, shape=(np.nan, n_features), dtype=np.float64,
                                        meta=sp.csr_matrix((0, n_features))) for x, _ in pieces])
    y = da.concatenate([da.from_delayed(r, shape=(np.nan,), dtype=np.float64) for _, r in pieces])
    return X, y


def incremental_reward_model(logs: str, estimator, *, epochs: int = 1, n_features: int | None = None,
                             n_actions: int | None = None, storage_options: dict | None = None,
                             client=None) -> SklearnRewardModel:
    """Per action a, ``Incremental(estimator)`` streamed over the parts holding rows of a (see the module docstring).

    An action never logged gets the pooled mean reward (and a warning), as ``dr-scale fit`` does.
    """
    from dask_ml.wrappers import Incremental

    from dr_scale.reward.fitting import UnloggedActionWarning

    fs, paths = list_parts(logs, storage_options)
    meta = log_metadata(fs, paths[0])
    d = int(n_features or meta["n_features"])
    k = int(n_actions or meta["n_actions"])
    sums = compute(*[dask.delayed(_action_sums)(fs, p, d, k) for p in paths], client=client)
    counts = np.array([s[0] for s in sums])  # (parts, k)
    total = np.sum(sums, axis=0)
    fallback = float(total[1].sum() / total[0].sum())
    estimators: list[Any] = []  # per action a fitted estimator, None where a is not logged
    for a in range(k):
        with_rows = [p for p, n in zip(paths, counts[:, a]) if n > 0]
        if not with_rows:
            warnings.warn(f"{logs}: action {a} never logged: ρ̂ for it is the pooled mean reward {fallback:.6g}",
                          UnloggedActionWarning, stacklevel=2)
            estimators.append(None)
            continue
        X, y = action_arrays(fs, with_rows, d, a)
        wrapped = Incremental(clone(estimator), shuffle_blocks=False)
        for _ in range(epochs):
            wrapped.partial_fit(X, y)
        estimators.append(wrapped.estimator_)
    return SklearnRewardModel(estimators, fallback)


def predict_log(model: SklearnRewardModel, logs: str, action: int, *, n_features: int | None = None,
                storage_options: dict | None = None):
    """ρ̂_action on every row of the log that logged ``action``, as a Dask array (``ParallelPostFit``)."""
    from dask_ml.wrappers import ParallelPostFit

    fs, paths = list_parts(logs, storage_options)
    d = int(n_features or log_metadata(fs, paths[0])["n_features"])
    X, _ = action_arrays(fs, paths, d, action)
    return ParallelPostFit(model.estimators[action]).predict(X)
