"""The Offset Tree (Beygelzimer & Langford 2009): policy learning from bandit data directly.

Same tournament as the Filter Tree (:class:`~.filter_tree.TournamentTree`), but each
node learns only from the logged examples (x, a, r_a, p) whose logged action is one of
its two candidates ℓ(x), r(x). With rewards in [0, 1] and the offset 1/2, an example
whose action a earned much (r_a > 1/2) votes for a's side, otherwise for the other
side, with importance weight

    |r_a − 1/2| / p(a | x),

which makes each node's binary problem an unbiased (offset) estimate of the regret
of picking the wrong side (the offset cancels the bias of observing only one side at
a time).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_array

from dr_scale.core.errors import ParameterError
from dr_scale.learning.filter_tree import TournamentTree


class OffsetTree(TournamentTree):
    """``fit(X, action, reward, propensity)`` on logged bandit data; rewards in [0, 1]."""

    def __init__(self, n_actions: int | None = None, tree_params: dict | None = None, random_state=None):
        super().__init__(tree_params=tree_params, random_state=random_state)
        self.n_actions = n_actions

    def fit(self, X, action, reward, propensity):
        """Train the tree on the logged rows (x_i, a_i, r_i ∈ [0, 1], p_i); returns the learner."""
        X = check_array(X, accept_sparse="csr", dtype=np.float64)
        action = np.asarray(action, dtype=np.int64)
        reward = np.asarray(reward, dtype=np.float64)
        propensity = np.asarray(propensity, dtype=np.float64)
        if not np.all((reward >= 0) & (reward <= 1)):
            raise ParameterError("the Offset Tree needs `reward` in [0, 1] (rescale them first)")
        if not np.all((propensity > 0) & (propensity <= 1)):
            raise ParameterError("`propensity` must lie in (0, 1]")
        self._start(self.n_actions if self.n_actions is not None else int(action.max()) + 1)

        def node_problem(left, right):
            """A node's problem from the rows that logged ``left`` or ``right``: label — the logged side if r > ½,
            else the other; importance |r − ½| / p (Beygelzimer & Langford's offset ½)."""
            is_left, is_right = action == left, action == right
            rows = np.flatnonzero(is_left | is_right)
            good = reward[rows] > 0.5
            go_right = np.where(is_right[rows], good, ~good)
            return rows, go_right, np.abs(reward[rows] - 0.5) / propensity[rows]

        self._play(X, node_problem)
        return self
