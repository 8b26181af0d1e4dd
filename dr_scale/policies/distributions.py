"""π(· | x_i) of a batch of rows: the one type every policy answers with (:class:`ActionDistribution`).

A policy's :meth:`~dr_scale.policies.base.Policy.distribution` on a partition is an :class:`ActionDistribution`;
what the estimators, the balancing weights and the diagnostics need of π is one of its operations:

* π(a_i | x_i) at the logged actions (:meth:`~ActionDistribution.at`), whence the weight w_i = π(a_i|x_i) / p̂_i;
* Σ_a π(a|x_i) v(x_i, a) for values v given by blocks of actions (:meth:`~ActionDistribution.value`, with
  :class:`ActionValues`: a reward model's predictions ρ̂_a(x_i));
* the mass Σ_i π(a|x_i) per action (:meth:`~ActionDistribution.mass`), the probability p_π(e_i|x_i) of a
  category of actions (:meth:`~ActionDistribution.category_probability`), and draws a' ~ π(·|x_i) keyed by the
  rows' ids (:meth:`~ActionDistribution.draw`);
* the (n, k) matrix (:meth:`~ActionDistribution.dense`), only where a caller holds (n, k) arrays anyway.

Four representations implement it: :class:`DenseProbs` ((n, k) probabilities), :class:`ChosenActions` (a
deterministic π: one action per row), :class:`SparseProbs` (each row's listed actions, (n, K)) and
:class:`UniformMixture` (ε/k + (1 − ε) π' in closed form). Only the first holds an (n, k) array: a log with
10^4–10^6 actions is evaluated in memory O(n·K).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from dr_scale.core import keyed_random


class ActionValues(Protocol):
    """Values v(x_i, a) of a batch's rows for any action, given by blocks of actions (e.g. ρ̂_a(x_i)).

    ``k`` is the number of actions; :meth:`columns` gives v for a few actions on every row, :meth:`pairs` for each
    row's own listed actions, :meth:`mean` (1/k) Σ_a v(x_i, a) without an (n, k) array.
    """

    @property
    def k(self) -> int:
        """The number of actions."""

    def columns(self, actions: np.ndarray) -> np.ndarray:
        """v(x_i, a) for the (m,) ``actions``, (n, m)."""

    def pairs(self, actions: np.ndarray) -> np.ndarray:
        """v(x_i, a_ij) for each row's own (n, K) ``actions``, (n, K)."""

    def mean(self) -> np.ndarray:
        """(1/k) Σ_a v(x_i, a), (n,)."""


@dataclass(frozen=True, eq=False)
class ArrayValues:
    """:class:`ActionValues` from an (n, k) array of values (e.g. a generated log's E[r | x_i, a]).

    Examples
    --------
    >>> import numpy as np
    >>> values = ArrayValues(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    >>> values.columns(np.array([2])).tolist(), values.pairs(np.array([[0], [1]])).tolist(), values.mean().tolist()
    ([[3.0], [6.0]], [[1.0], [5.0]], [2.0, 5.0])
    """

    array: np.ndarray

    @property
    def k(self) -> int:
        """k, the array's columns."""
        return int(self.array.shape[1])

    def columns(self, actions: np.ndarray) -> np.ndarray:
        """v(x_i, a) = ``array``[i, a] for the (m,) ``actions``, (n, m)."""
        return self.array[:, actions]

    def pairs(self, actions: np.ndarray) -> np.ndarray:
        """v(x_i, a_ij) = ``array``[i, a_ij] for each row's own (n, K) ``actions``, (n, K)."""
        return np.take_along_axis(self.array, np.asarray(actions), axis=1)

    def mean(self) -> np.ndarray:
        """(1/k) Σ_a ``array``[i, a], (n,)."""
        out: np.ndarray = self.array.mean(axis=1)
        return out


class ActionDistribution(abc.ABC):
    """π(a | x_i) for each row i of a batch and each of its k actions (module docstring).

    Subclasses hold π in one representation and answer every operation without forming (n, k) arrays they do
    not already hold.

    Examples
    --------
    The same π — action 1 on row 0, (½, ½, 0) on row 1 — as listed actions and as a dense matrix:

    >>> import numpy as np
    >>> listed = SparseProbs(np.array([[1, 0], [0, 1]]), np.array([[1.0, 0.0], [0.5, 0.5]]), 3)
    >>> dense = DenseProbs(listed.dense())
    >>> values = ArrayValues(np.array([[1.0, 2.0, 3.0], [4.0, 6.0, 8.0]]))  # v(x_i, a)
    >>> [(d.at(np.array([1, 2])).tolist(), d.value(values).tolist(), d.mass().tolist()) for d in (listed, dense)]
    [([1.0, 0.0], [2.0, 5.0], [0.5, 1.5, 0.0]), ([1.0, 0.0], [2.0, 5.0], [0.5, 1.5, 0.0])]
    """

    k: int

    @abc.abstractmethod
    def __len__(self) -> int:
        """n, the rows."""

    @abc.abstractmethod
    def at(self, action: np.ndarray) -> np.ndarray:
        """π(a_i | x_i) of one action per row (the logged ones), (n,)."""

    @abc.abstractmethod
    def value(self, values: ActionValues) -> np.ndarray:
        """Σ_a π(a|x_i) v(x_i, a), (n,): ρ̂_π(x_i) for a reward model's predictions v = ρ̂."""

    def value_and_logged(self, action: np.ndarray, values: ActionValues) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`value`, v(x_i, a_i) at the logged actions ``action``): ρ̂_π(x_i) and ρ̂_{a_i}(x_i).

        The second is exact wherever π(a_i|x_i) > 0; a representation may give any finite number elsewhere
        (every estimator multiplies ρ̂_{a_i}(x_i) by w_i, which is then 0) and so reuse the values it has.
        """
        return self.value(values), values.pairs(np.asarray(action)[:, None])[:, 0]

    @abc.abstractmethod
    def mass(self) -> np.ndarray:
        """Σ_i π(a|x_i) per action a, (k,)."""

    @abc.abstractmethod
    def category_probability(self, embedding: np.ndarray, category: np.ndarray) -> np.ndarray:
        """p_π(e_i|x_i) = Σ_a π(a|x_i) 1{e(a) = e_i} for the (n,) categories ``category``, e(a) = ``embedding``[a]."""

    @abc.abstractmethod
    def draw(self, row_id: np.ndarray, seed: int, purpose: str) -> np.ndarray:
        """One action a'_i ~ π(·|x_i) per row, (n,) int64, keyed by (seed, purpose, row_id)
        (:mod:`dr_scale.core.keyed_random`): the same draw whatever the partitioning."""

    @abc.abstractmethod
    def dense(self) -> np.ndarray:
        """The (n, k) matrix (for callers that hold (n, k) arrays anyway: π̂₀'s probabilities, small tests)."""

    def explored(self, epsilon: float) -> ActionDistribution:
        """π_ε(a|x) = ε/k + (1 − ε) π(a|x), in closed form (:class:`UniformMixture`)."""
        return UniformMixture(len(self), self.k, epsilon, self)


@dataclass(frozen=True, eq=False)
class DenseProbs(ActionDistribution):
    """π(·|x_i) as the (n, k) matrix ``probs`` (rows summing to 1): the stochastic policies with k known and small.

    Examples
    --------
    >>> import numpy as np
    >>> target = DenseProbs(np.array([[0.25, 0.75], [1.0, 0.0]]))
    >>> target.at(np.array([1, 1])).tolist(), target.mass().tolist()
    ([0.75, 0.0], [1.25, 0.75])
    >>> target.value(ArrayValues(np.array([[4.0, 8.0], [1.0, 2.0]]))).tolist()
    [7.0, 1.0]
    """

    probs: np.ndarray
    k: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", self.probs.shape[1])  # k, the matrix's columns

    def __len__(self) -> int:
        return int(self.probs.shape[0])

    def _logged(self, action: np.ndarray) -> np.ndarray:
        """The flat positions of (i, a_i): ~2× faster to take than [i, a_i]."""
        out: np.ndarray = np.arange(len(self)) * self.k + np.asarray(action)
        return out

    def at(self, action: np.ndarray) -> np.ndarray:
        """π(a_i | x_i) = ``probs``[i, a_i], (n,)."""
        return self.probs.take(self._logged(action))

    def _where_taken(self, values: ActionValues) -> np.ndarray:
        """v (n, k) in the columns of the actions with some π(a|x_i) > 0, zeros in the others."""
        # column sums by one BLAS mat-vec, not a strided axis-0 ``any``
        taken = np.flatnonzero(np.ones(len(self)) @ self.probs > 0)
        out = np.zeros(self.probs.shape)
        out[:, taken] = values.columns(taken)
        return out

    def value(self, values: ActionValues) -> np.ndarray:
        """Σ_a π(a|x_i) v(x_i, a), (n,), reading v only in the columns of actions some row takes."""
        # BLAS row sums: ~3× faster than einsum
        out: np.ndarray = (self.probs * self._where_taken(values)) @ np.ones(self.k)
        return out

    def value_and_logged(self, action: np.ndarray, values: ActionValues) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`value`, v(x_i, a_i)), both from the columns of the actions some row takes (v is 0 in the
        others, where π(a_i|x_i) = 0).
        """
        taken = self._where_taken(values)
        return (self.probs * taken) @ np.ones(self.k), taken.take(self._logged(action))

    def mass(self) -> np.ndarray:
        """Σ_i π(a|x_i) per action a, (k,): the matrix's column sums."""
        return np.ones(len(self)) @ self.probs if len(self) else np.zeros(self.k)

    def category_probability(self, embedding: np.ndarray, category: np.ndarray) -> np.ndarray:
        """p_π(e_i|x_i) = Σ_a π(a|x_i) 1{e(a) = e_i}, (n,)."""
        out: np.ndarray = (self.probs * (embedding[None, :self.k] == np.asarray(category)[:, None])).sum(axis=1)
        return out

    def draw(self, row_id: np.ndarray, seed: int, purpose: str) -> np.ndarray:
        """a'_i ~ ``probs``[i] by the keyed categorical draw (:func:`~dr_scale.core.keyed_random.categorical`)."""
        return keyed_random.categorical(self.probs, row_id, seed, purpose)

    def dense(self) -> np.ndarray:
        """``probs`` itself."""
        return self.probs

    def explored(self, epsilon: float) -> ActionDistribution:
        """π_ε = ε/k + (1 − ε) π as a dense matrix again."""
        probs = self.probs * (1 - epsilon)
        probs += epsilon / self.k
        return DenseProbs(probs)


@dataclass(frozen=True, eq=False)
class ChosenActions(ActionDistribution):
    """A deterministic π: π(a|x_i) = 1{a = ``actions``[i]}, one action per row in [0, k).

    Examples
    --------
    >>> import numpy as np
    >>> target = ChosenActions(np.array([2, 0, 2]), 3)
    >>> target.at(np.array([2, 1, 2])).tolist(), target.mass().tolist(), target.dense()[1].tolist()
    ([1.0, 0.0, 1.0], [1.0, 0.0, 2.0], [1.0, 0.0, 0.0])
    >>> target.draw(np.arange(3), 0, "any").tolist()  # its own actions
    [2, 0, 2]
    """

    actions: np.ndarray
    k: int

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    def at(self, action: np.ndarray) -> np.ndarray:
        """π(a_i | x_i) = 1{a_i = π(x_i)}, (n,)."""
        out: np.ndarray = (np.asarray(action) == self.actions).astype(np.float64)
        return out

    def value(self, values: ActionValues) -> np.ndarray:
        """v(x_i, π(x_i)): for a constant π one column, whatever k; else at each row's own action (``pairs``)."""
        taken = np.flatnonzero(np.bincount(self.actions, minlength=self.k))  # O(n), not unique's sort
        if taken.size == 1:
            return values.columns(taken)[:, 0]
        out: np.ndarray = values.pairs(self.actions[:, None])[:, 0]
        return out

    def value_and_logged(self, action: np.ndarray, values: ActionValues) -> tuple[np.ndarray, np.ndarray]:
        """v(x_i, π(x_i)) serves as both: it is v(x_i, a_i) wherever π(a_i|x_i) = 1."""
        value = self.value(values)
        return value, value

    def mass(self) -> np.ndarray:
        """Σ_i 1{π(x_i) = a} per action a, (k,): how often π chooses each action."""
        return np.bincount(self.actions, minlength=self.k)[:self.k].astype(np.float64)

    def category_probability(self, embedding: np.ndarray, category: np.ndarray) -> np.ndarray:
        """p_π(e_i|x_i) = 1{e(π(x_i)) = e_i}, (n,)."""
        out: np.ndarray = (embedding[self.actions] == category).astype(np.float64)
        return out

    def draw(self, row_id: np.ndarray, seed: int, purpose: str) -> np.ndarray:
        """π's own actions (a deterministic π draws what it chooses)."""
        return self.actions.astype(np.int64)

    def dense(self) -> np.ndarray:
        """The (n, k) one-hot matrix of the chosen actions."""
        out = np.zeros((len(self), self.k))
        out.reshape(-1)[np.arange(len(self)) * self.k + self.actions] = 1.0  # one scatter at flat positions
        return out


@dataclass(frozen=True, eq=False)
class SparseProbs(ActionDistribution):
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
    k : int
        The number of actions.

    Examples
    --------
    >>> import numpy as np
    >>> target = SparseProbs(np.array([[2, 0], [1, 0]]), np.array([[0.75, 0.25], [1.0, 0.0]]), 3)
    >>> target.at(np.array([0, 2])).tolist()  # π(a_i|x_i) of the actions 0 and 2
    [0.25, 0.0]
    >>> target.dense().tolist()
    [[0.25, 0.0, 0.75], [0.0, 1.0, 0.0]]
    >>> target.value_and_logged(np.array([0, 2]), ArrayValues(np.array([[4.0, 0.0, 8.0], [0.0, 2.0, 1.0]])))
    (array([7., 2.]), array([4., 0.]))
    """

    actions: np.ndarray
    probs: np.ndarray
    k: int

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    def _logged(self, action: np.ndarray) -> np.ndarray:
        """(n, K): whether slot j of row i lists the logged action a_i with positive probability."""
        out: np.ndarray = (self.actions == np.asarray(action)[:, None]) & (self.probs > 0)
        return out

    def at(self, action: np.ndarray) -> np.ndarray:
        """π(a_i | x_i) = Σ_j p_ij 1{a_ij = a_i, p_ij > 0} over the row's listed actions, (n,)."""
        out: np.ndarray = (self.probs * self._logged(action)).sum(axis=1)
        return out

    def value(self, values: ActionValues) -> np.ndarray:
        """Σ_j p_ij v(x_i, a_ij), (n,): O(n·K), v read at the listed actions only."""
        out: np.ndarray = (self.probs * values.pairs(self.actions)).sum(axis=1)
        return out

    def value_and_logged(self, action: np.ndarray, values: ActionValues) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`value`, Σ_j v(x_i, a_ij) 1{a_ij = a_i, p_ij > 0}): v at the listed actions only, O(n·K); the
        second is v(x_i, a_i) wherever π(a_i|x_i) > 0 and 0 elsewhere.
        """
        listed = values.pairs(self.actions)  # v at the listed actions only, O(n·K)
        return (self.probs * listed).sum(axis=1), (listed * self._logged(action)).sum(axis=1)

    def mass(self) -> np.ndarray:
        """Σ_i Σ_j p_ij 1{a_ij = a} per action a, (k,)."""
        return np.bincount(self.actions.ravel(), weights=self.probs.ravel(), minlength=self.k)[:self.k]

    def category_probability(self, embedding: np.ndarray, category: np.ndarray) -> np.ndarray:
        """p_π(e_i|x_i) = Σ_j p_ij 1{e(a_ij) = e_i, p_ij > 0}, (n,)."""
        same = (embedding[self.actions] == np.asarray(category)[:, None]) & (self.probs > 0)
        out: np.ndarray = (self.probs * same).sum(axis=1)
        return out

    def draw(self, row_id: np.ndarray, seed: int, purpose: str) -> np.ndarray:
        """a'_i = a_ij with j ~ (p_i1, …, p_iK) by the keyed categorical draw."""
        slot = keyed_random.categorical(self.probs, row_id, seed, purpose)
        out: np.ndarray = self.actions[np.arange(len(self)), slot].astype(np.int64)
        return out

    def dense(self) -> np.ndarray:
        """The (n, k) matrix, the listed probabilities added at their actions."""
        out = np.zeros((len(self), self.k))
        np.add.at(out, (np.repeat(np.arange(len(self)), self.actions.shape[1]), self.actions.ravel()),
                  self.probs.ravel())
        return out


@dataclass(frozen=True, eq=False)
class UniformMixture(ActionDistribution):
    """π(a|x_i) = ε/k + (1 − ε) π'(a|x_i) in closed form: the uniform policy (ε = 1) or π' explored uniformly.

    Every operation is O(n) plus π''s own — π(a_i|x_i) = ε/k + (1 − ε) π'(a_i|x_i); Σ_a π(a|x) v(x, a) =
    ε · mean_a v(x, a) + (1 − ε) Σ_a π'(a|x) v(x, a), the mean by blocks of actions; the draw is uniform with
    probability ε, else π''s — never an (n, k) array: at k = 10^4 the dense matrix of 10,000 rows is 800 MB.

    Parameters
    ----------
    n : int
        The rows.
    k : int
        The actions.
    epsilon : float
        The uniform share ε ∈ [0, 1].
    inner : ActionDistribution or None
        π'; None when ε = 1.

    Examples
    --------
    >>> import numpy as np
    >>> uniform = UniformMixture(2, 4, 1.0)
    >>> uniform.at(np.array([0, 3])).tolist(), uniform.mass().tolist()
    ([0.25, 0.25], [0.5, 0.5, 0.5, 0.5])
    >>> greedy = ChosenActions(np.array([1, 1]), 4).explored(0.2)  # 0.2/4 + 0.8 on action 1
    >>> greedy.at(np.array([1, 2])).round(4).tolist(), greedy.dense()[0].round(4).tolist()
    ([0.85, 0.05], [0.05, 0.85, 0.05, 0.05])
    >>> a = uniform.draw(np.arange(20000), 0, "any")
    >>> bool(np.all(np.abs(np.bincount(a) / 20000 - 0.25) < 0.015))  # uniform over 4 actions
    True
    """

    n: int
    k: int
    epsilon: float
    inner: ActionDistribution | None = None

    def __len__(self) -> int:
        return self.n

    def _mixed(self, uniform: np.ndarray,
               of_inner: Callable[[ActionDistribution], np.ndarray]) -> np.ndarray:
        """ε · ``uniform`` + (1 − ε) · ``of_inner``(π') (0 without π')."""
        inner = 0.0 if self.inner is None else of_inner(self.inner)
        out: np.ndarray = uniform + (1 - self.epsilon) * inner
        return out

    def at(self, action: np.ndarray) -> np.ndarray:
        """π(a_i|x_i) = ε/k + (1 − ε) π'(a_i|x_i), (n,)."""
        action = np.asarray(action)
        return self._mixed(np.full(action.shape, self.epsilon / self.k), lambda t: t.at(action))

    def value(self, values: ActionValues) -> np.ndarray:
        """ε · (1/k) Σ_a v(x_i, a) + (1 − ε) Σ_a π'(a|x_i) v(x_i, a), (n,) (the mean by :meth:`ActionValues.mean`)."""
        mean = self.epsilon * values.mean()
        return mean if self.inner is None else mean + (1 - self.epsilon) * self.inner.value(values)

    def mass(self) -> np.ndarray:
        """ε n / k + (1 − ε) Σ_i π'(a|x_i) per action a, (k,)."""
        return self._mixed(np.full(self.k, self.epsilon * self.n / self.k), lambda t: t.mass())

    def category_probability(self, embedding: np.ndarray, category: np.ndarray) -> np.ndarray:
        """p_π(e_i|x_i) = ε |{a: e(a) = e_i}| / k + (1 − ε) p_π'(e_i|x_i), (n,)."""
        sizes = np.bincount(embedding[:self.k])
        return self._mixed(self.epsilon * sizes[category] / self.k,
                           lambda t: t.category_probability(embedding, category))

    def draw(self, row_id: np.ndarray, seed: int, purpose: str) -> np.ndarray:
        """Uniform with probability ε (the row's first keyed draw), else π''s draw under ``seed`` + 1."""
        v = keyed_random.uniform(row_id, seed, purpose, 1)
        uniform = np.minimum((v * self.k).astype(np.int64), self.k - 1)
        if self.inner is None:
            return uniform
        u = keyed_random.uniform(row_id, seed, purpose)
        return np.where(u < self.epsilon, uniform, self.inner.draw(row_id, seed + 1, purpose))

    def dense(self) -> np.ndarray:
        """The (n, k) matrix ε/k + (1 − ε) π' (for the callers that hold (n, k) arrays anyway)."""
        inner = np.zeros((self.n, self.k)) if self.inner is None else self.inner.dense()
        return self.epsilon / self.k + (1 - self.epsilon) * inner
