"""A policy over the items' features learned by the direct method: the greedy policy of a shared reward model."""

from __future__ import annotations

from dr_scale.policies.target import ItemScorerPolicy
from dr_scale.reward.shared import SharedRidgeRewardModel


def greedy_scorer(model: SharedRidgeRewardModel, top_k: int = 1, temperature: float = 1.0) -> ItemScorerPolicy:
    """The policy that takes the top K actions by a shared model's ρ̂(x, a) (K = 1: π(x) = argmax_a ρ̂(x, a)).

    ρ̂(x, a) − b − x·β_x = x·B·f_a + f_a·β_f is an :class:`~dr_scale.policies.target.ItemScorerPolicy`'s
    score with coef = B and bias_a = f_a·β_f (:mod:`dr_scale.reward.shared`): the direct method's greedy
    policy, a linear scorer over the items' features; saved, ``scorer:POLICY.npz`` reads it.

    Parameters
    ----------
    model : SharedRidgeRewardModel
        ρ̂.
    top_k : int, default 1
        K.
    temperature : float, default 1.0
        The softmax temperature over the top K (no effect at K = 1).

    Returns
    -------
    ItemScorerPolicy

    Examples
    --------
    >>> import numpy as np
    >>> F = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> model = SharedRidgeRewardModel(0.5, np.zeros(2), np.array([0.0, -2.0]), np.eye(2), F)
    >>> X = np.array([[1.0, 0.0], [0.0, 3.0]])
    >>> greedy_scorer(model).scores(X).argmax(axis=1).tolist(), model.predict(X).argmax(axis=1).tolist()
    ([0, 1], [0, 1])
    """
    return ItemScorerPolicy(model.interaction, model.item_features, model.item_features @ model.beta_f, top_k,
                            temperature, source="<greedy scorer of a shared ridge model>")
