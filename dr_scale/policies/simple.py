"""Policies stated in the spec itself: constant, top-k, uniform, ε-greedy, and the logging policy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dr_scale.core.errors import UserError
from dr_scale.logs.contract import Partition
from dr_scale.logs.listing import SPEC_FILE
from dr_scale.policies.base import Policy
from dr_scale.policies.distributions import ActionDistribution, ChosenActions, SparseProbs, UniformMixture


def action_id(item: str, actions: list | None, spec: str) -> int:
    """The id of the action ``item`` names: ``#N`` is id N; on a log with a vocabulary ``actions``, the value
    whose text is ``item``; else ``item`` must be an id (digits)."""
    if item.startswith("#") and item[1:].isdigit():
        return int(item[1:])
    if actions is None:
        if item.isdigit():
            return int(item)
        raise UserError(f"policy {spec}: {item!r} names an action by value, but the log has no action vocabulary "
                        f"({SPEC_FILE} at its root); name it by id, #N")
    names = [str(a) for a in actions]
    if item in names:
        return names.index(item)
    shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
    raise UserError(f"policy {spec}: {item!r} is not one of the log's {len(names)} actions ({shown}); "
                    "name an action by its value, or by id as #N")


def check_ids(ids: tuple[int, ...], k: int, spec: str) -> np.ndarray:
    """The ids a policy names, each one of the log's k actions; else an error naming the policy and the id."""
    bad = [a for a in ids if not 0 <= a < k]
    if bad:
        raise UserError(f"policy {spec}: action #{bad[0]} is not one of the log's {k} actions (ids #0 … #{k - 1}); "
                        "name an action of the log")
    return np.array(ids, dtype=np.int64)


@dataclass
class ConstantPolicy(Policy):
    """The policy that always takes one action: π(a|x) = 1{a = action} (spec ``constant:A``).

    Named by value (``item``, spec ``constant:ITEM``), the id comes from the log's action vocabulary
    (:meth:`resolve`); ``constant:#N`` is always id N.

    The paper's visits experiment evaluates π ≡ 1 (Dudík, Langford & Li 2011, Sec. 5.2).

    Parameters
    ----------
    action : int or None
        The action A, in [0, k) for the log's k actions (checked on each partition).
    item : str or None
        The action as the spec names it (a value of the log's vocabulary, digits, or ``#N``), resolved
        to ``action`` when the log is read.

    See Also
    --------
    ActionColumnPolicy : A deterministic π whose action varies by row.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3),
    ...                  table=pa.table({"target_probs": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]}))
    >>> policy = ConstantPolicy(2)
    >>> policy.distribution(part, 3).actions.tolist(), str(policy)
    ([2, 2, 2], 'constant:2')
    >>> ConstantPolicy(1).distribution(part, 2).dense().tolist()
    [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]
    """

    action: int | None = None
    item: str | None = None  # the action as the spec names it (a value, digits, or #N)

    def __post_init__(self) -> None:
        if self.action is None and self.item is None:
            raise UserError("a constant policy needs an action")

    def resolve(self, actions: list | None) -> ConstantPolicy:
        """The policy with its action named by value resolved to its id in ``actions`` (the log's vocabulary)."""
        if self.item is None:
            return self
        return ConstantPolicy(action_id(self.item, actions, str(self)), self.item)

    def check_named_actions(self, k: int) -> None:
        """The action's id, where it is known, is one of the k actions (:func:`check_ids`)."""
        if self.action is not None:
            check_ids((self.action,), k, str(self))

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(a|x_i) = 1{a = the constant action}."""
        if self.action is None:
            assert self.item is not None  # a constant policy names its action by id or by value
            action_id(self.item, None, str(self))  # the error: no vocabulary to name it by
        assert self.action is not None  # resolved above, or the error was raised
        return ChosenActions(np.full(len(part), check_ids((self.action,), k, str(self))[0]), k)

    def __str__(self) -> str:
        if self.item is None or self.item == str(self.action):
            return f"constant:{self.action}"
        return f"constant:{self.item}" + ("" if self.action is None or self.item == f"#{self.action}"
                                          else f" (#{self.action})")


@dataclass
class TopKPolicy(Policy):
    """π(a|x) = 1/m for each of the m listed actions (spec ``topk:A,B,…``), 0 for the others.

    The actions are named as the spec names them: ids (digits, or ``#N``, always id N) or values of
    the log's action vocabulary, resolved to ids when the log is read (:meth:`resolve`). With one
    action it is :class:`ConstantPolicy`'s deterministic π.

    Parameters
    ----------
    items : tuple of str
        The m actions as the spec names them, each listed once.
    ids : tuple of int or None
        Their ids in [0, k); None until resolved (digits and ``#N`` resolve at once).

    See Also
    --------
    ConstantPolicy : One action on every row.
    UniformPolicy : All k actions.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3), table=pa.table({}))
    >>> policy = TopKPolicy(("0", "2"))
    >>> policy.ids, str(policy)
    ((0, 2), 'topk:0,2')
    >>> policy.distribution(part, 3).dense().tolist()
    [[0.5, 0.0, 0.5], [0.5, 0.0, 0.5], [0.5, 0.0, 0.5]]
    """

    items: tuple[str, ...]
    ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        self.items = tuple(self.items)
        if not self.items or any(not i for i in self.items):
            raise UserError(f"policy topk:{','.join(self.items)}: list the actions, topk:A,B,…")
        if len(set(self.items)) != len(self.items):
            raise UserError(f"policy topk:{','.join(self.items)}: an action is listed twice")
        if self.ids is None and all(i.isdigit() or (i[:1] == "#" and i[1:].isdigit()) for i in self.items):
            self.ids = tuple(action_id(i, None, str(self)) for i in self.items)  # ids until a vocabulary says otherwise

    def resolve(self, actions: list | None) -> TopKPolicy:
        """The policy with its listed values resolved to ids in ``actions`` (the log's vocabulary)."""
        if actions is None and self.ids is not None:
            return self
        ids = tuple(action_id(i, actions, str(self)) for i in self.items)
        if len(set(ids)) != len(ids):
            raise UserError(f"policy {self}: two of the listed names are the same action")
        return TopKPolicy(self.items, ids)

    def check_named_actions(self, k: int) -> None:
        """The listed ids, where they are known, are among the k actions (:func:`check_ids`)."""
        if self.ids is not None:
            check_ids(self.ids, k, str(self))

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(a|x_i) = 1/m for each of the m listed actions (one listed action: deterministic)."""
        if self.ids is None:
            self.resolve(None)  # the error: values without a vocabulary
        assert self.ids is not None
        ids = check_ids(self.ids, k, str(self))
        if len(self.ids) == 1:
            return ChosenActions(np.full(len(part), ids[0]), k)
        n, m = len(part), len(ids)
        return SparseProbs(np.broadcast_to(np.asarray(ids), (n, m)), np.full((n, m), 1.0 / m), k)  # O(n·m)

    def __str__(self) -> str:
        named = f"topk:{','.join(self.items)}"
        if self.ids is None or list(self.items) == [str(i) for i in self.ids]:
            return named
        return f"{named} ({','.join(f'#{i}' for i in self.ids)})"


@dataclass
class UniformPolicy(Policy):
    """The uniformly random policy: π(a|x) = 1/k for each of the log's k actions (spec ``uniform``).

    Its value is the mean over actions of E[r_a], the baseline a learned policy is compared with.
    Takes no parameters.

    See Also
    --------
    EpsilonGreedyPolicy : A policy mixed with this one.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3), table=pa.table({}))
    >>> policy = UniformPolicy()
    >>> policy.distribution(part, 4).dense().tolist()[0], str(policy)
    ([0.25, 0.25, 0.25, 0.25], 'uniform')
    """

    needs_k = True

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(a|x_i) = 1/k, in closed form (:class:`UniformMixture` with ε = 1)."""
        return UniformMixture(len(part), k, 1.0)  # in closed form: never an (n, k) array

    def __str__(self) -> str:
        return "uniform"


@dataclass(eq=False)
class EpsilonGreedyPolicy(Policy):
    """``policy`` π explored uniformly with probability ε: π_ε(a|x) = ε/k + (1 − ε) π(a|x).

    Spec ``epsilon-greedy:EPS:POLICY``. The inner π must have known probabilities for every action
    (not :class:`LoggingPolicy`).

    Parameters
    ----------
    epsilon : float
        The exploration probability ε, in [0, 1].
    policy : Policy
        The policy π that is followed with probability 1 − ε.

    See Also
    --------
    UniformPolicy : The policy mixed in (ε = 1).

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3), table=pa.table({}))
    >>> policy = EpsilonGreedyPolicy(0.3, ConstantPolicy(0))
    >>> policy.distribution(part, 3).dense()[0].round(4).tolist(), str(policy)
    ([0.8, 0.1, 0.1], 'epsilon-greedy:0.3:constant:0')
    """

    epsilon: float
    policy: Policy
    needs_k = True

    def __post_init__(self) -> None:
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float)) or not 0 <= self.epsilon <= 1:
            raise UserError(f"policy epsilon-greedy:{self.epsilon}:{self.policy}: ε must be a number in [0, 1]")
        if self.policy.on_policy:
            raise UserError("policy epsilon-greedy:EPS:logging: the logging policy's probabilities of the actions "
                            "not logged are unknown; mix a policy with known probabilities")
        self.columns = self.policy.columns
        self.needs_features = self.policy.needs_features
        self.n_actions = self.policy.n_actions

    def resolve(self, actions: list | None) -> EpsilonGreedyPolicy:
        """The policy with its inner policy resolved against ``actions``."""
        inner = self.policy.resolve(actions)
        return self if inner is self.policy else EpsilonGreedyPolicy(self.epsilon, inner)

    def check_named_actions(self, k: int) -> None:
        """The inner policy's named actions are among the k actions."""
        self.policy.check_named_actions(k)

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π_ε(a|x_i) = ε/k + (1 − ε) π(a|x_i) of the inner policy π."""
        return self.policy.distribution(part, k).explored(self.epsilon)  # closed form unless π is (n, k) already

    def __str__(self) -> str:
        return f"epsilon-greedy:{self.epsilon!r}:{self.policy}"


@dataclass
class LoggingPolicy(Policy):
    """π = π₀, the policy that logged the data: w_i = π₀(a_i|x_i) / p̂_i = 1 on every row.

    Only π₀'s probability of the logged action is in the log, so its rows are built from the
    logged actions (:meth:`dr_scale.ope.evaluation.Evaluation.rows`): ρ̂_π(x_i) = ρ̂_{a_i}(x_i),
    an unbiased one-sample estimate of Σ_a π₀(a|x_i) ρ̂_a(x_i). IPS = SNIPS = DR = (1/n) Σ_i r_i.
    Spec ``logging``; takes no parameters.

    See Also
    --------
    dr_scale.ope.evaluation.Evaluation : Evaluates it (the on-policy value of the log).

    Examples
    --------
    >>> from dr_scale import parse_policy
    >>> policy = parse_policy("logging")
    >>> policy, policy.on_policy
    (LoggingPolicy(), True)
    """

    on_policy = True

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """Never: the logging policy's probabilities of the actions not logged are not in the log (an error)."""
        raise UserError("policy logging: the logging policy's probabilities of the actions not logged are not in "
                        "the log; it can be evaluated (weights 1), not used where π(a|x) is needed for every a")

    def __str__(self) -> str:
        return "logging"
