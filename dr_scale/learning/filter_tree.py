"""The Filter Tree reduction from cost-sensitive to binary classification (paper, Appendix B).

Beygelzimer, Langford & Ravikumar (2008), here on rewards r_a (losses l_a = −r_a). The k actions are
the leaves of a complete binary tree (heap layout: node u has children 2u and 2u+1; leaves K … K+k−1 with
K = 2^⌈log₂ k⌉; leaves past k are empty). Every internal node holds a binary
classifier that picks the left or the right subtree's winner. Training proceeds
bottom-up: at node u each example's two candidates are the winners ℓ(x), r(x) that the
already trained children pick for x, and the node learns

    y = 1{r_r(x) > r_ℓ(x)}   with importance weight   |r_ℓ(x) − r_r(x)|

(examples with equal rewards carry no information and are dropped). Prediction plays
the tournament with the trained nodes; walking root-to-leaf gives the same action.

The node classifier is scikit-learn's :class:`~sklearn.tree.DecisionTreeClassifier`,
standing in for the paper's Weka J48 (C4.5) trees; ``tree_params`` are its options.
X may be dense or scipy sparse (the trees take CSR).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils import check_array, check_random_state

from dr_scale.learning.base import PolicyLearnerMixin, check_rewards

DEFAULT_TREE_PARAMS = {"min_samples_leaf": 2, "ccp_alpha": 0.001}  # J48: >= 2 per leaf, pruned


class TournamentTree(PolicyLearnerMixin, BaseEstimator):
    """A single-elimination tournament over k actions with a decision tree at every match.

    Subclasses define ``_node_problem(left, right) -> (rows, go_right, weight)``: the
    weighted binary training set of a node whose candidates are ``left`` / ``right``.
    """

    def __init__(self, tree_params: dict | None = None, random_state=None):
        self.tree_params = tree_params
        self.random_state = random_state

    def _play(self, X: np.ndarray, node_problem=None) -> np.ndarray:
        """Winners of the tournament for every row of X; trains the nodes when ``node_problem`` is given."""
        n, k = X.shape[0], self.n_actions_
        K = self.n_leaves_
        winners: dict[int, np.ndarray | None] = {K + c: (np.full(n, c) if c < k else None) for c in range(K)}
        for node in range(K - 1, 0, -1):
            left, right = winners.pop(2 * node), winners.pop(2 * node + 1)
            if left is None or right is None:
                winners[node] = right if left is None else left
                continue
            if node_problem is not None:
                self.nodes_[node] = self._fit_node(X, *node_problem(left, right))
            winners[node] = np.where(self._go_right(self.nodes_[node], X), right, left)
        root = winners[1]
        assert root is not None  # action 0 is a leaf: the root has a winner
        return root

    def _fit_node(self, X, rows, go_right, weight):
        keep = weight > 0
        rows, go_right, weight = rows[keep], go_right[keep], weight[keep]
        if rows.size == 0:
            return False  # no example prefers either side: always the left
        if np.all(go_right == go_right[0]):
            return bool(go_right[0])
        params = {**DEFAULT_TREE_PARAMS, **(self.tree_params or {})}
        tree = DecisionTreeClassifier(random_state=self._rng.randint(2**31), **params)
        return tree.fit(X[rows], go_right, sample_weight=weight)

    @staticmethod
    def _go_right(classifier, X) -> np.ndarray:
        if isinstance(classifier, bool):
            return np.full(X.shape[0], classifier)
        return classifier.predict(X).astype(bool)

    def _start(self, n_actions: int) -> None:
        self.n_actions_ = int(n_actions)
        self.n_leaves_ = 1 << max(1, int(np.ceil(np.log2(max(n_actions, 2)))))
        self.nodes_: dict[int, object] = {}
        self._rng = check_random_state(self.random_state)

    def predict(self, X) -> np.ndarray:
        """The tournament's winning action for every row."""
        return self._play(check_array(X, accept_sparse="csr", dtype=np.float64))


class FilterTree(TournamentTree):
    """Filter Tree on full (or imputed) reward vectors: ``fit(X, rewards)`` with rewards (n, k)."""

    def fit(self, X, rewards):
        """Train the tournament's nodes bottom-up on X and every action's (imputed) rewards (n, k); returns the
        learner."""
        X = check_array(X, accept_sparse="csr", dtype=np.float64)
        rewards = check_rewards(rewards, X.shape[0])
        self._start(rewards.shape[1])
        rows = np.arange(X.shape[0])

        def node_problem(left, right):
            """A node's classification problem between the winners ``left`` and ``right``: every row, label r_right >
            r_left, importance |r_left − r_right|."""
            reward_left, reward_right = rewards[rows, left], rewards[rows, right]
            return rows, reward_right > reward_left, np.abs(reward_left - reward_right)

        self._play(X, node_problem)
        return self
