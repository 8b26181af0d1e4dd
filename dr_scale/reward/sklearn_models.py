"""Flexible reward models on in-memory arrays: any scikit-learn regressor per action, cross-fitted.

:class:`SklearnRewardModel` fits one clone of a scikit-learn regressor (e.g.
``HistGradientBoostingRegressor``) per action a on the rows that logged a, so
ρ̂_a(x) = f_a(x). An action never logged gets the pooled mean reward (with an
:class:`~dr_scale.reward.fitting.UnloggedActionWarning`), as the ridge models do.

:func:`cross_fit` makes K such models, model j fitted on the rows whose fold is not j,
row i's fold being ⌊K·u(row_id_i)⌋ (:func:`dr_scale.reward.models.fold_of`, the same
keyed rule as ``dr-scale fit --folds K``), and a full-data model for rows without ids.
Its ``predict(X, actions, row_id)`` predicts each row with the model that did not see
it, so an :class:`~dr_scale.ope.evaluation.Evaluation` (which passes row ids) computes
cross-fitted DR.

For logs that do not fit in memory, :mod:`dr_scale.reward.fitting` fits per-action ridge out of
core, and :mod:`dr_scale.reward.daskml_models` streams any ``partial_fit`` regressor over a
log's partitions.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from dr_scale.crossfit.folded import checked_actions, checked_row_id, predict_by_fold
from dr_scale.crossfit.parts import fold_of
from dr_scale.reward.models import checked_training_arrays


def _rows(X, dense: bool):
    return X.toarray() if dense and hasattr(X, "toarray") else X


def _columns(actions, k: int) -> np.ndarray:
    return np.arange(k) if actions is None else np.asarray(actions)


@dataclass
class SklearnRewardModel:
    """ρ̂_a(x) = ``estimators[a].predict(x)``; an action without rows predicts ``fallback`` (the pooled mean).

    ``dense``: give the regressors dense rows (``HistGradientBoostingRegressor`` and other
    tree ensembles reject scipy.sparse input; partitions of a log come as CSR).
    """

    estimators: list
    fallback: float
    dense: bool = False

    @property
    def n_actions(self) -> int:
        """k, the per-action estimators."""
        return len(self.estimators)

    @classmethod
    def fit(cls, estimator, X, action: np.ndarray, reward: np.ndarray, n_actions: int | None = None,
            source: str = "the rows", dense: bool = False) -> SklearnRewardModel:
        """One clone of ``estimator`` fitted per action on that action's rows of (X, reward)."""
        from dr_scale.reward.fitting import UnloggedActionWarning

        action, reward, k = checked_training_arrays(X, action, reward, n_actions)
        X = _rows(X, dense)
        fallback = float(reward.mean()) if reward.size else 0.0
        estimators, unlogged = [], []
        for a in range(k):
            rows = np.flatnonzero(action == a)
            estimators.append(clone(estimator).fit(X[rows], reward[rows]) if rows.size else None)
            if not rows.size:
                unlogged.append(a)
        if unlogged:
            warnings.warn(f"{source}: action(s) {', '.join(map(str, unlogged))} never logged: ρ̂ for them is the "
                          f"pooled mean reward {fallback:.6g}", UnloggedActionWarning, stacklevel=2)
        return cls(estimators, fallback, dense)

    def predict(self, X, actions=None) -> np.ndarray:
        """ρ̂ for the rows of X: (n, k), or (n, len(actions))."""
        cols = _columns(checked_actions(actions, self.n_actions), self.n_actions)
        out = np.full((X.shape[0], cols.size), self.fallback)
        X = _rows(X, self.dense)
        if X.shape[0]:
            for j, a in enumerate(cols):
                if self.estimators[a] is not None:
                    out[:, j] = self.estimators[a].predict(X)
        return out


@dataclass
class CrossFittedRewardModel:
    """K fold models (model j fitted without fold j) and a full-data model; see :func:`cross_fit`."""

    fold_models: list
    full: SklearnRewardModel
    seed: int = 0

    @property
    def n_actions(self) -> int:
        """k, the full-data model's actions."""
        return self.full.n_actions

    @property
    def folds(self) -> int:
        """K, the fold models."""
        return len(self.fold_models)

    def predict(self, X, actions=None, row_id=None) -> np.ndarray:
        """Row i by fold model fold(row_id_i), which did not see it; without ids, by the full-data model."""
        row_id = checked_row_id(row_id, X.shape[0])
        if row_id is None:
            return self.full.predict(X, actions=actions)
        width = _columns(actions, self.n_actions).size
        return predict_by_fold(X, fold_of(np.asarray(row_id), self.folds, self.seed), width,
                               lambda j, rows: self.fold_models[j].predict(rows, actions=actions))


def cross_fit(estimator, X, action: np.ndarray, reward: np.ndarray, row_id: np.ndarray, *, folds: int = 5,
              seed: int = 0, n_actions: int | None = None, dense: bool = False) -> CrossFittedRewardModel:
    """Cross-fitted per-action models of ``estimator`` on in-memory arrays (see the module docstring);
    ``dense`` as in :class:`SklearnRewardModel`."""
    from dr_scale.io.config import Folds, check

    check(Folds, "folds", folds)
    action, reward, k = checked_training_arrays(X, action, reward, n_actions)
    fold = fold_of(checked_row_id(row_id, X.shape[0]), folds, seed)
    models = []
    for j in range(folds):
        rows = np.flatnonzero(fold != j)
        models.append(SklearnRewardModel.fit(estimator, X[rows], action[rows], np.asarray(reward)[rows], k,
                                             source=f"the rows outside fold {j}", dense=dense))
    return CrossFittedRewardModel(models, SklearnRewardModel.fit(estimator, X, action, reward, k, dense=dense), seed)
