"""π(· | x_i) for a batch of rows, in the representations the policies give it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def one_hot(actions: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((actions.shape[0], k))
    out.reshape(-1)[np.arange(actions.shape[0]) * k + actions] = 1.0  # one scatter at flat positions, not out[i, a]
    return out


@dataclass(frozen=True, eq=False)
class SparseProbs:
    """π(·|x_i) as each row's listed actions and their probabilities: never an (n, k) matrix.

    Row i may take ``actions[i, j]`` with probability ``probs[i, j]``; every other action has
    probability 0. Rows with fewer than K listed actions are padded with probability 0. Memory
    O(n·K) whatever the number of actions k.

    Parameters
    ----------
    actions : numpy.ndarray of int, shape (n, K)
        The listed actions, each at most once per row among its slots of positive probability.
    probs : numpy.ndarray of float, shape (n, K)
        Their probabilities, each row summing to 1.

    Examples
    --------
    >>> import numpy as np
    >>> target = SparseProbs(np.array([[2, 0], [1, 0]]), np.array([[0.75, 0.25], [1.0, 0.0]]))
    >>> target.at(np.array([0, 2])).tolist()  # π(a_i|x_i) of the actions 0 and 2
    [0.25, 0.0]
    >>> target.dense(3).tolist()
    [[0.25, 0.0, 0.75], [0.0, 1.0, 0.0]]
    """

    actions: np.ndarray
    probs: np.ndarray

    def __len__(self) -> int:
        return self.actions.shape[0]

    def at(self, action: np.ndarray) -> np.ndarray:
        """π(a_i|x_i) of one action per row, (n,)."""
        return (self.probs * (self.actions == np.asarray(action)[:, None])).sum(axis=1)

    def dense(self, k: int) -> np.ndarray:
        """The (n, k) matrix (for small k only: tests, obp's layout)."""
        out = np.zeros((len(self), k))
        np.add.at(out, (np.repeat(np.arange(len(self)), self.actions.shape[1]), self.actions.ravel()),
                  self.probs.ravel())
        return out

    def mass(self, k: int) -> np.ndarray:
        """Σ_i π(a|x_i) per action a, (k,)."""
        return np.bincount(self.actions.ravel(), weights=self.probs.ravel(), minlength=k)[:k]


@dataclass(frozen=True, eq=False)
class UniformMixture:
    """π(a|x_i) = ε/k + (1 − ε) π'(a|x_i) in closed form: the uniform policy (ε = 1) or π' explored uniformly.

    What an estimator needs of π — π(a_i|x_i) at the logged action (:meth:`at`), each action's mass
    Σ_i π(a|x_i) (:meth:`mass`), each category's probability p_π(e|x_i) (:meth:`category_probability`) and,
    with the reward model, Σ_a π(a|x) ρ̂_a(x) = ε · mean_a ρ̂_a(x) + (1 − ε) Σ_a π'(a|x) ρ̂_a(x) — is O(n)
    (plus π''s own O(n·K)), never an (n, k) array: at k = 10^4 the dense matrix of 10,000 rows is 800 MB.

    Parameters
    ----------
    n : int
        The rows.
    k : int
        The actions.
    epsilon : float
        The uniform share ε ∈ [0, 1].
    inner : numpy.ndarray or SparseProbs or UniformMixture or None
        π''s decisions: (n,) actions or listed actions; None when ε = 1.

    Examples
    --------
    >>> import numpy as np
    >>> uniform = UniformMixture(2, 4, 1.0)
    >>> uniform.at(np.array([0, 3])).tolist(), uniform.mass(4).tolist()
    ([0.25, 0.25], [0.5, 0.5, 0.5, 0.5])
    >>> greedy = UniformMixture(2, 4, 0.2, np.array([1, 1]))  # 0.2/4 + 0.8 on action 1
    >>> greedy.at(np.array([1, 2])).round(4).tolist(), greedy.dense(4)[0].round(4).tolist()
    ([0.85, 0.05], [0.05, 0.85, 0.05, 0.05])
    """

    n: int
    k: int
    epsilon: float
    inner: object = None

    def __len__(self) -> int:
        return self.n

    def _inner(self, of_actions, of_sparse) -> np.ndarray | float:
        if self.inner is None:
            return 0.0
        if isinstance(self.inner, (SparseProbs, UniformMixture)):
            return of_sparse(self.inner)
        return of_actions(np.asarray(self.inner))

    def at(self, action: np.ndarray) -> np.ndarray:
        """π(a_i|x_i) of one action per row, (n,)."""
        action = np.asarray(action)
        inner = self._inner(lambda t: (t == action).astype(np.float64), lambda t: t.at(action))
        return np.full(action.shape, self.epsilon / self.k) + (1 - self.epsilon) * inner

    def mass(self, k: int) -> np.ndarray:
        """Σ_i π(a|x_i) per action a, (k,)."""
        inner = self._inner(lambda t: np.bincount(t, minlength=k)[:k].astype(np.float64), lambda t: t.mass(k))
        return np.full(k, self.epsilon * self.n / self.k) + (1 - self.epsilon) * inner

    def category_probability(self, embedding: np.ndarray, category: np.ndarray) -> np.ndarray:
        """p_π(e_i|x_i) = Σ_a π(a|x_i) 1{e(a) = e_i} for the (n,) categories ``category``, e(a) = ``embedding``[a]."""
        sizes = np.bincount(embedding[:self.k])

        def of_sparse(t):
            if isinstance(t, UniformMixture):
                return t.category_probability(embedding, category)
            same = (embedding[t.actions] == category[:, None]) & (t.probs > 0)
            return (t.probs * same).sum(axis=1)

        inner = self._inner(lambda t: (embedding[t] == category).astype(np.float64), of_sparse)
        return self.epsilon * sizes[category] / self.k + (1 - self.epsilon) * inner

    def dense(self, k: int) -> np.ndarray:
        """The (n, k) matrix (for small k only: tests, obp's layout)."""
        if self.inner is None:
            inner = np.zeros((self.n, k))
        elif isinstance(self.inner, (SparseProbs, UniformMixture)):
            inner = self.inner.dense(k)
        else:
            inner = one_hot(np.asarray(self.inner), k)
        return self.epsilon / self.k + (1 - self.epsilon) * inner
