"""The estimated logging policy π̂₀(a | x): a multinomial logistic (softmax) model, cross-fitted.

    π̂₀(a | x) = exp(x·coef[:, a] + intercept[a]) / Σ_b exp(x·coef[:, b] + intercept[b])

fitted by :func:`dr_scale.propensity.fitting.fit_propensity_model` (L2-regularised multinomial logistic
regression, :mod:`dr_scale.outofcore.glm`). A cross-fitted model also holds K fold models; given the rows'
ids, row i is predicted by fold model fold(row_id_i) (:func:`dr_scale.logs.parts.fold_of`, the same keyed
folds as the reward model ρ̂'s), which was fitted without row i — the estimated propensity of a row never
comes from a model that saw it (Chernozhukov et al. 2018, cross-fitting). Saved as a ``.npz`` of arrays
and JSON with ``kind = "propensity"``, never a pickle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import softmax

from dr_scale.core.errors import ParameterError
from dr_scale.io.parameter_files import checked_linear
from dr_scale.logs.folded import (
    _linear,
    checked_actions,
    checked_row_id,
    load_model,
    predict_by_fold,
    save_model,
)
from dr_scale.logs.parts import fold_of

KIND = "propensity"


@dataclass
class PropensityModel:
    """The estimated logging policy π̂₀(a | x) = softmax_a(x·coef[:, a] + intercept[a]).

    The fields are those of :class:`~dr_scale.reward.models.LinearRewardModel`: a cross-fitted model also has
    ``fold_coef`` (K, d, k) and ``fold_intercept`` (K, k), the fold models, and ``fold_seed``, the key of
    :func:`~dr_scale.logs.parts.fold_of`; given the rows' ids, :meth:`predict_proba` predicts row i with
    fold model fold(row_id_i), which was fitted without it; without ids, with the full-data model.

    Parameters
    ----------
    coef : numpy.ndarray, shape (d, k)
        The full-data model's weights, finite.
    intercept : numpy.ndarray, shape (k,)
        The full-data model's intercepts, finite.
    fold_coef : numpy.ndarray, shape (K, d, k), optional
        The fold models' weights (cross-fitted models only).
    fold_intercept : numpy.ndarray, shape (K, k), optional
        The fold models' intercepts (with ``fold_coef``).
    fold_seed : int, default 0
        The key of the rows' folds.
    metadata : dict, optional
        What the fit recorded (λ, rows per action, folds, passes …; saved as JSON).

    See Also
    --------
    dr_scale.fit_propensity_model : Fits one from a log.

    Examples
    --------
    >>> import numpy as np
    >>> model = PropensityModel(coef=np.array([[1.0, 0.0], [0.0, 0.0]]), intercept=np.array([0.0, 0.0]))
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> model.predict_proba(X).round(3).tolist()
    [[0.5, 0.5], [0.731, 0.269]]
    >>> model.predict_proba(X, actions=np.array([1])).round(3).tolist()
    [[0.5], [0.269]]
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     model.save(os.path.join(folder, "propensity.npz"))
    ...     again = PropensityModel.load(os.path.join(folder, "propensity.npz"))
    >>> again.n_actions, again.n_features, again.folds
    (2, 2, 0)
    """

    coef: np.ndarray
    intercept: np.ndarray
    fold_coef: np.ndarray | None = None
    fold_intercept: np.ndarray | None = None
    fold_seed: int = 0
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        self.coef, self.intercept = checked_linear(self.coef, self.intercept, "PropensityModel")

    @property
    def n_actions(self) -> int:
        """k, the number of actions."""
        return self.coef.shape[1]

    @property
    def n_features(self) -> int:
        """d, the number of features."""
        return self.coef.shape[0]

    @property
    def folds(self) -> int:
        """K, the number of fold models (0: not cross-fitted)."""
        return 0 if self.fold_coef is None else self.fold_coef.shape[0]

    def predict_proba(self, X, actions=None, row_id=None) -> np.ndarray:
        """π̂₀(a | x_i): (n, k), or (n, len(actions)) for the given actions' columns only.

        With ``row_id`` and fold models, row i is predicted by fold model fold(row_id_i) (a model that did
        not see the row); otherwise by the full-data model. Each full row sums to 1.

        Parameters
        ----------
        X : scipy.sparse.csr_matrix or numpy.ndarray, shape (n, d)
            The rows' features.
        actions : numpy.ndarray of int, optional
            The columns wanted; None for all k.
        row_id : numpy.ndarray of int, optional
            The rows' ids (used by a cross-fitted model).

        Returns
        -------
        numpy.ndarray
            (n, k) probabilities, or (n, len(actions)).
        """
        actions = checked_actions(actions, self.n_actions)
        row_id = checked_row_id(row_id, X.shape[0])
        if X.shape[1] > self.n_features:
            raise ParameterError(f"`X` has {X.shape[1]} columns; the model has d = {self.n_features} features")
        cols = slice(None) if actions is None else actions

        def proba(coef, intercept, rows):
            return softmax(_linear(rows, coef, intercept), axis=1)[:, cols]

        if row_id is None or not self.folds:
            return proba(self.coef, self.intercept, X)
        return predict_by_fold(X, fold_of(np.asarray(row_id), self.folds, self.fold_seed),
                               self.n_actions if actions is None else len(actions),
                               lambda j, rows: proba(self.fold_coef[j], self.fold_intercept[j], rows))

    def parameters(self) -> tuple[np.ndarray, ...]:
        """The arrays that determine the predictions (for digests)."""
        if not self.folds:
            return self.coef, self.intercept
        return self.coef, self.intercept, self.fold_coef, self.fold_intercept, np.array([self.fold_seed])

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` atomically: ``coef``, ``intercept``, the fold models, ``metadata``, ``kind``.

        Parameters
        ----------
        url : str
            The file to write, any fsspec URL.
        storage_options : dict, optional
            fsspec's options for ``url``.
        """
        save_model(self, url, storage_options, KIND)

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> PropensityModel:
        """Read a model saved by :meth:`save`; anything else (a reward model's file too) is a
        ``ParameterFileError`` naming the file.

        Parameters
        ----------
        url : str
            The ``.npz`` file, any fsspec URL.
        storage_options : dict, optional
            fsspec's options for ``url``.

        Returns
        -------
        PropensityModel
            The model, with its fold models and metadata.
        """
        return load_model(cls, url, storage_options, f"propensity model {url}", KIND)
