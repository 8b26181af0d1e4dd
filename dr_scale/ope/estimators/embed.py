"""Marginalized estimators over action embeddings (Saito & Joachims, ICML 2022): MIPS, SNMIPS and their
marginal weights, as obp's ``estimators_embed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from dr_scale.core.errors import ParameterError
from dr_scale.ope import checks as check
from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.estimate import Estimate
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.estimators.ips import SNIPS
from dr_scale.ope.moments import Moments


def marginal_weights(action: ArrayLike, action_embed: ArrayLike, pi_b: ArrayLike, target_probs: ArrayLike
                     ) -> np.ndarray:
    """w(x_i, e_i) = p_π(e_i|x_i) / p_π₀(e_i|x_i) from dense arrays, for a deterministic categorical embedding.

    p_π(e|x) = Σ_a π(a|x) 1{e(a) = e} (Saito & Joachims 2022, eq. 3, with p(e|x, a) one-hot), e_i = e(a_i).

    Parameters
    ----------
    action : array_like of int, shape (n,)
        The logged actions a_i.
    action_embed : array_like of int, shape (k,)
        e(a) per action, in [0, L).
    pi_b : array_like of float, shape (n, k)
        The logging policy π₀(a|x_i).
    target_probs : array_like of float, shape (n, k)
        The target policy π(a|x_i).

    Returns
    -------
    numpy.ndarray
        (n,) weights.

    Examples
    --------
    >>> import numpy as np
    >>> marginal_weights([0, 2], [0, 0, 1], np.full((2, 3), 1 / 3), [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]).tolist()
    [1.5, 0.0]
    """
    pi_b = np.asarray(pi_b, dtype=np.float64)
    n, k = pi_b.shape
    target_probs = check.probabilities("target_probs", target_probs, n)
    action = check.actions("action", action, n, k)
    embed = check.actions("action_embed", action_embed, k, None)
    same = embed[None, :] == embed[action][:, None]  # (n, k): 1{e(a) = e_i}
    out: np.ndarray = (target_probs * same).sum(axis=1) / (pi_b * same).sum(axis=1)
    return out


def sparse_marginal_weights(logged_embedding: ArrayLike, embedding_propensity: ArrayLike, target_actions: ArrayLike,
                            target_probs: ArrayLike, embedding: ArrayLike) -> np.ndarray:
    """w(x_i, e_i) = p_π(e_i|x_i) / p_π₀(e_i|x_i) for a policy given by its listed actions, in O(n·K).

    p_π(e_i|x_i) = Σ_j π_ij 1{e(a_ij) = e_i} over row i's listed actions a_ij (:class:`RowInputs.from_sparse`'s
    layout); p_π₀(e_i|x_i) is ``embedding_propensity``, the logging policy's probability of the logged
    action's category (as the propensity is of the logged action).

    Examples
    --------
    >>> import numpy as np
    >>> sparse_marginal_weights(np.array([0, 1]), np.array([0.5, 0.25]), np.array([[1, 0], [2, 0]]),
    ...                         np.array([[0.5, 0.5], [1.0, 0.0]]), np.array([0, 0, 1])).tolist()
    [2.0, 4.0]
    """
    logged_embedding = np.asarray(logged_embedding)
    embedding_propensity = check.propensities(embedding_propensity, logged_embedding.shape[0])
    listed = np.asarray(embedding)[np.asarray(target_actions)]
    same = (listed == logged_embedding[:, None]) & (np.asarray(target_probs) > 0)
    out: np.ndarray = (np.asarray(target_probs) * same).sum(axis=1) / embedding_propensity
    return out


@dataclass(frozen=True)
class MIPS(Estimator):
    """Marginalized IPS (Saito & Joachims, ICML 2022), with a deterministic categorical action embedding e(a).

        V̂_MIPS = (1/n) Σ_i w(x_i, e_i) r_i,    w(x, e) = p_π(e|x) / p_π₀(e|x),    p_π(e|x) = Σ_a π(a|x) p(e|x, a)

    with p(e|x, a) = 1{e = e(a)} (the catalogue's embedding) and e_i = e(a_i). Unbiased when the reward
    depends on the action only through its embedding (no direct effect) and p_π₀(e|x) > 0 wherever
    p_π(e|x) > 0; its weights are bounded by L categories' worth of mass rather than k actions', so its
    variance does not grow with the number of actions. obp's ``MarginalizedInverseProbabilityWeighting``
    with the true p(e|a) (``p_e_a``). The state holds the moments of (w r, w), as IPS's. Takes no parameters.

    See Also
    --------
    SNMIPS : The self-normalized form.
    IPS : The same with the action's own weight π(a_i|x_i) / p̂_i.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> n, k = 1000, 6
    >>> pi_b = rng.dirichlet(np.ones(k), n)
    >>> action = np.array([rng.choice(k, p=p) for p in pi_b])
    >>> log = dict(reward=rng.binomial(1, 0.3, n).astype(float), action=action, pi_b=pi_b,
    ...            target_probs=np.tile(np.eye(k)[0], (n, 1)), action_embed=np.array([0, 0, 1, 1, 2, 2]))
    >>> est = MIPS().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4)
    (0.3366, 0.0366)
    """

    name: ClassVar[str] = "MIPS"
    clt: ClassVar[bool] = True
    needs_model: ClassVar[bool] = False
    needs_embedding: ClassVar[bool] = True
    el_map: ClassVar[tuple] = ((1.0, 0.0), (0.0, 1.0))  # IPS's: the EL interval's constraint E[w] = 1

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """(w(x_i, e_i) r_i, w(x_i, e_i)) with the marginal weights w(x, e) = p_π(e|x) / p_π₀(e|x)
        (Saito & Joachims 2022, eq. 3): V̂_MIPS = (1/n) Σ w(x_i, e_i) r_i.
        """
        rows = rows.marginalized()
        return [rows.weight * rows.reward, rows.weight]

    def state(self, rows: RowInputs) -> Moments:
        """The moments of :meth:`terms` over the rows with the marginal weights in place of w."""
        return super().state(rows.marginalized())  # the interval's weight range: the marginal weights'

    def estimate(self, *, reward: ArrayLike, action: ArrayLike, target_probs: ArrayLike,
                 action_embed: ArrayLike | None = None, pi_b: ArrayLike | None = None,
                 propensity: ArrayLike | None = None, reward_hat: ArrayLike | None = None) -> Estimate:
        """Estimate from obp's dense arrays: ``pi_b`` and ``target_probs`` (n, k), ``action_embed`` (k,) e(a).

        ``propensity`` and ``reward_hat`` are accepted (and unused), so a log's arrays pass as they are.
        """
        check.vector("reward", reward)
        if action_embed is None or pi_b is None:
            raise ParameterError(f"{self.name} needs `action_embed`, e(a) per action, and `pi_b`, π₀(a|x_i)")
        w = marginal_weights(action, action_embed, pi_b, target_probs)
        return self.result(self.state(RowInputs(check.vector("reward", reward, w.shape[0]), w * 0.0, None, None, w)))


@dataclass(frozen=True)
class SNMIPS(MIPS):
    """Self-normalized MIPS (Saito & Joachims 2022; obp's ``SelfNormalizedMarginalizedInverseProbabilityWeighting``).

        V̂_SNMIPS = Σ_i w(x_i, e_i) r_i / Σ_i w(x_i, e_i)

    with MIPS's marginal weights, and the delta method's standard error on the ratio of means (as SNIPS).
    Takes no parameters.

    See Also
    --------
    MIPS : The unnormalized mean.
    SNIPS : The same ratio with the actions' own weights.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> n, k = 1000, 6
    >>> pi_b = rng.dirichlet(np.ones(k), n)
    >>> action = np.array([rng.choice(k, p=p) for p in pi_b])
    >>> log = dict(reward=rng.binomial(1, 0.3, n).astype(float), action=action, pi_b=pi_b,
    ...            target_probs=np.tile(np.eye(k)[0], (n, 1)), action_embed=np.array([0, 0, 1, 1, 2, 2]))
    >>> est = SNMIPS().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4)
    (0.3271, 0.0307)
    """

    name: ClassVar[str] = "SNMIPS"
    clt: ClassVar[bool] = True

    value_of = SNIPS.value_of
    gradient = SNIPS.gradient
