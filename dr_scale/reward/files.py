"""Reward model files of every kind, loaded by one function: :func:`load_reward_model` reads a ``.npz`` once and
makes the class registered for its ``kind`` (:data:`dr_scale.crossfit.folded.MODEL_FILES`): ``linear``
(:class:`~dr_scale.reward.models.LinearRewardModel`), ``logistic``
(:class:`~dr_scale.reward.models.LogisticRewardModel`) and ``shared``
(:class:`~dr_scale.reward.shared.SharedRidgeRewardModel`, or its logistic form by the file's ``link``).
"""

from __future__ import annotations

from dr_scale.crossfit.folded import load_model_file
from dr_scale.reward.models import LinearRewardModel, LogisticRewardModel
from dr_scale.reward.shared import KIND as SHARED
from dr_scale.reward.shared import SharedRidgeRewardModel

#: The kinds of reward model files.
REWARD_KINDS = (LinearRewardModel.KIND, LogisticRewardModel.KIND, SHARED)


def load_reward_model(url: str, storage_options: dict | None = None) -> LinearRewardModel | SharedRidgeRewardModel:
    """The reward model in the ``.npz`` at ``url`` (any fsspec URL), whatever its kind (module docstring); a
    file of another kind (a propensity model) or no model file is a ``ParameterFileError`` naming it.

    Parameters
    ----------
    url : str
        The ``.npz`` file.
    storage_options : dict or None
        fsspec's options for ``url``.

    Returns
    -------
    LinearRewardModel, LogisticRewardModel, SharedRidgeRewardModel or SharedLogisticRewardModel

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from dr_scale.reward.shared import SharedRidgeRewardModel
    >>> shared = SharedRidgeRewardModel(0.5, np.zeros(2), np.zeros(1), np.zeros((2, 1)), np.ones((3, 1)))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     shared.save(os.path.join(folder, "rho.npz"))
    ...     LinearRewardModel(np.ones((2, 3)), np.zeros(3)).save(os.path.join(folder, "linear.npz"))
    ...     kinds = [type(load_reward_model(os.path.join(folder, f))).__name__ for f in ("rho.npz", "linear.npz")]
    >>> kinds
    ['SharedRidgeRewardModel', 'LinearRewardModel']
    """
    model: LinearRewardModel | SharedRidgeRewardModel = load_model_file(url, storage_options, LinearRewardModel.WHAT,
                                                                         REWARD_KINDS)
    return model
