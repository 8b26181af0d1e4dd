"""The estimated logging policy π̂₀(a | x): a multinomial logistic (softmax) model, cross-fitted.

    π̂₀(a | x) = exp(x·coef[:, a] + intercept[a]) / Σ_b exp(x·coef[:, b] + intercept[b])

fitted by :func:`dr_scale.propensity.fitting.fit_propensity_model` (L2-regularised multinomial logistic
regression, :mod:`dr_scale.outofcore.glm`). A cross-fitted model also holds K fold models; given the rows'
ids, row i is predicted by fold model fold(row_id_i) (:func:`dr_scale.crossfit.parts.fold_of`, the same keyed
folds as the reward model ρ̂'s), which was fitted without row i — the estimated propensity of a row never
comes from a model that saw it (Chernozhukov et al. 2018, cross-fitting). Saved as a ``.npz`` of arrays
and JSON with ``kind = "propensity"``, never a pickle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.special import softmax

from dr_scale.crossfit.folded import FoldedLinearModel, _linear, register_kind

KIND = "propensity"


@register_kind
@dataclass
class PropensityModel(FoldedLinearModel):
    """The estimated logging policy π̂₀(a | x) = softmax_a(x·coef[:, a] + intercept[a]).

    The fields are those of :class:`~dr_scale.crossfit.folded.FoldedLinearModel`: a cross-fitted model also has
    ``fold_coef`` (K, d, k) and ``fold_intercept`` (K, k), the fold models, and ``fold_seed``, the key of
    :func:`~dr_scale.crossfit.parts.fold_of`; given the rows' ids, :meth:`predict_proba` predicts row i with
    fold model fold(row_id_i), which was fitted without it; without ids, with the full-data model.

    Parameters
    ----------
    (the parameters of FoldedLinearModel)

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

    KIND: ClassVar[str] = KIND
    WHAT: ClassVar[str] = "propensity model"

    def predict_proba(self, X: sp.csr_matrix | np.ndarray, actions: ArrayLike | None = None,
                      row_id: ArrayLike | None = None) -> np.ndarray:
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
        X, columns, row_id = self.checked_call(X, actions, row_id)
        cols = slice(None) if columns is None else columns
        return self.by_fold(X, row_id, self.n_actions if columns is None else len(columns),
                            lambda coef, intercept, rows: softmax(_linear(rows, coef, intercept), axis=1)[:, cols])
