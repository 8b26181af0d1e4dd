"""Target policies π(a|x): what the estimators evaluate.

A policy gives its decisions on a :class:`~dr_scale.logs.contract.Partition` (``decisions``):
the (n,) actions of a deterministic policy, or the (n, k) action probabilities of a
stochastic one; ``probs`` gives the (n, k) matrix either way (one-hot rows for a
deterministic policy). The kinds:

* ``constant:A`` — always action A (the paper's visits experiment uses π ≡ 1); on a log with
  an action vocabulary (:func:`dr_scale.logs.contract.action_vocabulary`) A is the action's own
  value (``constant:item_42``), and ``constant:#N`` is the action with id N on any log;
* ``topk:A,B,…`` — uniform over the listed actions (values or ``#N`` ids, as ``constant``):
  π(a|x) = 1/m for each of the m listed actions;
* ``uniform`` — π(a|x) = 1/k over the log's k actions;
* ``epsilon-greedy:EPS:POLICY`` — π_ε(a|x) = ε/k + (1 − ε) π(a|x), for any other spec POLICY
  and ε ∈ [0, 1];
* ``logging`` — the logging policy itself, π = π₀: every row's weight π₀(a_i|x_i)/p̂_i is 1 and
  ρ̂_π(x_i) is ρ̂_{a_i}(x_i), the model at the logged action (π₀'s other probabilities are not
  in the log), so IPS, SNIPS and DR all give the mean logged reward;
* ``column:NAME`` — the target action stored per row in an integer column;
* ``probs:NAME`` — the target probabilities stored per row in a list<float> column;
* ``callable:module:function`` — ``function(X, row_id)`` with X the partition's CSR
  features, returning (n,) actions or (n, k) probabilities;
* ``linear:POLICY.npz`` — a learned linear policy π(x) = argmax_a x·coef[:, a] + intercept[a]
  (ties to the lowest action), from the ``.npz`` file ``dr-scale learn`` writes (keys
  ``coef`` (d, k), ``intercept`` (k,) and ``metadata``, a JSON string);
* ``softmax:POLICY.npz:T`` — the same scores as a stochastic policy with temperature
  T > 0: π(a|x) = exp(s_a(x)/T) / Σ_b exp(s_b(x)/T);
* ``sparse:NAME`` — per row, the actions the policy may take and their probabilities, stored in a
  list<struct<action, prob>> column (:class:`SparsePolicy`);
* ``scorer:POLICY.npz`` — a scorer over the actions' features, s(x, a) = x·coef·f_a + bias_a, that
  takes the top K actions with softmax probabilities (:class:`ItemScorerPolicy`).

The last two give their decisions as :class:`SparseProbs` — each row's listed actions and their
probabilities, (n, K) arrays — never an (n, k) matrix, so a log with 10^4–10^6 actions is evaluated
in memory O(n·K); every estimator works on them (:meth:`dr_scale.ope.estimators.RowInputs.from_sparse`).

The file of a linear or softmax policy may be any fsspec URL (credentials from the
environment); it is read when the spec is parsed, so a missing or malformed file is
an error before any log is read.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.io.parameter_files import ParameterFileError, checked_linear, read_linear_file, write_npz
from dr_scale.logs.contract import (
    SPEC_FILE,
    LogDataError,
    Partition,
    check_distributions,
    check_target_actions,
    first_list_length,
    sparse_target_lists,
    target_actions,
    target_probabilities,
)


def parameters_digest(*arrays: np.ndarray) -> str:
    """sha256 of arrays' shapes and float64 bytes: what a fitted model or policy computes with."""
    h = hashlib.sha256()
    for array in arrays:
        a = np.ascontiguousarray(array, dtype=np.float64)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def one_hot(actions: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((actions.shape[0], k))
    out.reshape(-1)[np.arange(actions.shape[0]) * k + actions] = 1.0  # one scatter at flat positions, not out[i, a]
    return out


class PolicyMismatch(LogDataError):
    """The policy does not fit the log (its k actions or d features are not the log's): the policy's
    error, not the partition's — a report names the policy, not every partition."""


class Policy:
    """Base class of the target policies π(a|x) the estimators evaluate.

    A subclass defines :meth:`decisions`; :meth:`probs` is π(a|x_i) as an (n, k) matrix either way.
    ``columns`` are extra log columns the policy reads, ``needs_features`` whether it reads the
    features X, ``n_actions`` k where the policy itself knows it (else None). The base class takes
    no parameters.

    See Also
    --------
    ConstantPolicy, ActionColumnPolicy, ProbsColumnPolicy, CallablePolicy, LinearPolicy, SoftmaxPolicy :
        The six kinds.
    parse_policy : A policy from its command-line spelling.

    Examples
    --------
    A policy that picks the last action on every row:

    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3),
    ...                  table=pa.table({"target_probs": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]}))
    >>> class Last(Policy):
    ...     def decisions(self, part, k):
    ...         return np.full(len(part), k - 1)
    >>> Last().probs(part, 3).tolist()
    [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    """

    columns: tuple[str, ...] = ()
    needs_features = False
    n_actions: int | None = None  # known from the policy itself, where it is
    needs_k = False  # its probabilities depend on the number of actions k, which must then be known
    on_policy = False  # the logging policy: weights 1 (see LoggingPolicy)

    def resolve(self, actions: list | None) -> Policy:
        """This policy with actions named by value turned into ids, for a log whose action values are
        ``actions`` (id order; None: the log has no vocabulary)."""
        return self

    def decisions(self, part: Partition, k: int) -> np.ndarray:
        """π's decisions on the partition's rows: (n,) actions if π is deterministic, else (n, k) probabilities.

        Parameters
        ----------
        part : Partition
            The logged rows.
        k : int
            The number of actions.

        Returns
        -------
        numpy.ndarray
            (n,) int actions in [0, k), or (n, k) float probabilities with rows summing to 1.
        """
        raise NotImplementedError

    def probs(self, part: Partition, k: int) -> np.ndarray:
        """π(a|x_i) as an (n, k) matrix (one-hot rows for a deterministic π).

        Parameters
        ----------
        part : Partition
            The logged rows.
        k : int
            The number of actions.

        Returns
        -------
        numpy.ndarray
            (n, k) float probabilities.
        """
        target = self.decisions(part, k)
        if isinstance(target, SparseProbs):
            return target.dense(k)
        return one_hot(target, k) if target.ndim == 1 else target

    def _check_actions(self, actions: np.ndarray, k: int, part: Partition, column: str) -> np.ndarray:
        return check_target_actions(actions, k, part.source, column, part.row_id)


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
    >>> policy.decisions(part, 3).tolist(), str(policy)
    ([2, 2, 2], 'constant:2')
    >>> ConstantPolicy(1).probs(part, 2).tolist()
    [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]
    """

    action: int | None = None
    item: str | None = None  # the action as the spec names it (a value, digits, or #N)

    def __post_init__(self):
        if self.action is None and self.item is None:
            raise UserError("a constant policy needs an action")

    def resolve(self, actions):
        if self.item is None:
            return self
        return ConstantPolicy(action_id(self.item, actions, str(self)), self.item)

    def decisions(self, part, k):
        if self.action is None:
            action_id(self.item, None, str(self))  # the error: no vocabulary to name it by
        return self._check_actions(np.full(len(part), self.action), k, part, "<constant policy>")

    def __str__(self):
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
    >>> policy.probs(part, 3).tolist()
    [[0.5, 0.0, 0.5], [0.5, 0.0, 0.5], [0.5, 0.0, 0.5]]
    """

    items: tuple[str, ...]
    ids: tuple[int, ...] | None = None

    def __post_init__(self):
        self.items = tuple(self.items)
        if not self.items or any(not i for i in self.items):
            raise UserError(f"policy topk:{','.join(self.items)}: list the actions, topk:A,B,…")
        if len(set(self.items)) != len(self.items):
            raise UserError(f"policy topk:{','.join(self.items)}: an action is listed twice")
        if self.ids is None and all(i.isdigit() or (i[:1] == "#" and i[1:].isdigit()) for i in self.items):
            self.ids = tuple(action_id(i, None, str(self)) for i in self.items)  # ids until a vocabulary says otherwise

    def resolve(self, actions):
        if actions is None and self.ids is not None:
            return self
        ids = tuple(action_id(i, actions, str(self)) for i in self.items)
        if len(set(ids)) != len(ids):
            raise UserError(f"policy {self}: two of the listed names are the same action")
        return TopKPolicy(self.items, ids)

    def decisions(self, part, k):
        if self.ids is None:
            self.resolve(None)  # the error: values without a vocabulary
        ids = self._check_actions(np.array(self.ids), k, part, f"<{self}>") if len(part) else np.array(self.ids)
        if len(self.ids) == 1:
            return np.full(len(part), ids[0])
        probs = np.zeros((len(part), k))
        probs[:, ids] = 1.0 / len(ids)
        return probs

    def __str__(self):
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
    >>> policy.probs(part, 4).tolist()[0], str(policy)
    ([0.25, 0.25, 0.25, 0.25], 'uniform')
    """

    needs_k = True

    def decisions(self, part, k):
        return np.full((len(part), k), 1.0 / k)

    def __str__(self):
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
    >>> policy.probs(part, 3)[0].round(4).tolist(), str(policy)
    ([0.8, 0.1, 0.1], 'epsilon-greedy:0.3:constant:0')
    """

    epsilon: float
    policy: Policy
    needs_k = True

    def __post_init__(self):
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float)) or not 0 <= self.epsilon <= 1:
            raise UserError(f"policy epsilon-greedy:{self.epsilon}:{self.policy}: ε must be a number in [0, 1]")
        if self.policy.on_policy:
            raise UserError("policy epsilon-greedy:EPS:logging: the logging policy's probabilities of the actions "
                            "not logged are unknown; mix a policy with known probabilities")
        self.columns = self.policy.columns
        self.needs_features = self.policy.needs_features
        self.n_actions = self.policy.n_actions

    def resolve(self, actions):
        inner = self.policy.resolve(actions)
        return self if inner is self.policy else EpsilonGreedyPolicy(self.epsilon, inner)

    def decisions(self, part, k):
        probs = self.policy.probs(part, k) * (1 - self.epsilon)
        probs += self.epsilon / k
        return probs

    def __str__(self):
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

    def decisions(self, part, k):
        raise UserError("policy logging: the logging policy's probabilities of the actions not logged are not in "
                        "the log; it can be evaluated (weights 1), not used where π(a|x) is needed for every a")

    def __str__(self):
        return "logging"


@dataclass
class ActionColumnPolicy(Policy):
    """A deterministic π stored in the log: π(a|x_i) = 1{a = target_i}, target_i from an integer column.

    Spec ``column:NAME``. Each target_i must be in [0, k); a null or out-of-range value is a
    :class:`LogDataError` naming the file, column and row.

    Parameters
    ----------
    column : str, default "target_action"
        The integer column holding π(x_i).

    See Also
    --------
    ProbsColumnPolicy : A stochastic π stored in the log.

    Examples
    --------
    >>> from dr_scale import read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()  # the bundled example: 3 actions, a candidate policy in ``target_action``
    >>> part = read_log(logs + "/date=2026-11-01", extra_columns=["target_action"])[0]
    >>> policy = ActionColumnPolicy()
    >>> policy.columns, str(policy)
    (('target_action',), 'column:target_action')
    >>> policy.decisions(part, 3)[:5].tolist()
    [0, 0, 0, 0, 0]
    """

    column: str = "target_action"

    def __post_init__(self):
        self.columns = (self.column,)

    def decisions(self, part, k):
        return target_actions(part, self.column, k)

    def __str__(self):
        return f"column:{self.column}"


@dataclass
class ProbsColumnPolicy(Policy):
    """A stochastic π stored in the log: π(·|x_i) read from a list<float> column of length k per row.

    Spec ``probs:NAME``. Each row's list must hold k probabilities summing to 1; anything else is a
    :class:`LogDataError` naming the file, column and row.

    Parameters
    ----------
    column : str, default "target_probs"
        The list<float> column holding π(·|x_i).

    See Also
    --------
    ActionColumnPolicy : A deterministic π stored in the log.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3),
    ...                  table=pa.table({"target_probs": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]}))
    >>> policy = ProbsColumnPolicy()
    >>> policy.decisions(part, 3).tolist()
    [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]
    >>> policy.first_length(part), str(policy)
    (3, 'probs:target_probs')
    """

    column: str = "target_probs"

    def __post_init__(self):
        self.columns = (self.column,)

    def first_length(self, part) -> int:
        """The length of the first row's list (k, when nothing else tells it)."""
        return first_list_length(part, self.column)

    def decisions(self, part, k):
        return target_probabilities(part, self.column, k)

    def __str__(self):
        return f"probs:{self.column}"


@dataclass
class CallablePolicy(Policy):
    """A policy computed by a function: ``function(X, row_id)`` returning (n,) actions or (n, k) probabilities.

    Spec ``callable:module:function``. X is the partition's (n, d) CSR features and ``row_id``
    its row ids; the module is imported when the policy is made, so a missing module or function
    is an error before any log is read. What the function returns is checked as a column's
    actions or probabilities are.

    Parameters
    ----------
    target : str
        ``"module:function"``, the module importable (installed or on ``PYTHONPATH``).

    See Also
    --------
    LinearPolicy : A learned policy from a file.

    Examples
    --------
    The bundled example's candidate policy, computed from the features, is the one stored in
    its ``target_action`` column:

    >>> from dr_scale import read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()  # the bundled example: 3 actions, a candidate policy in ``target_action``
    >>> part = read_log(logs + "/date=2026-11-01", extra_columns=["target_action"])[0]
    >>> policy = CallablePolicy("dr_scale.synthetic.example:candidate_policy")
    >>> bool((policy.decisions(part, 3) == ActionColumnPolicy().decisions(part, 3)).all())
    True
    """

    target: str
    needs_features = True

    def __post_init__(self):
        self.function()  # a missing module or function is an error now, not in the first task

    def function(self):
        module, _, name = self.target.partition(":")
        if not module or not name:
            raise UserError(f"policy callable:{self.target}: give callable:module:function")
        try:
            function = getattr(importlib.import_module(module), name)
        except ImportError as exc:
            raise UserError(f"policy callable:{self.target}: cannot import module {module!r} ({exc}); "
                            "is it installed or on PYTHONPATH?") from None
        except AttributeError:
            raise UserError(f"policy callable:{self.target}: module {module!r} has no {name!r}") from None
        except Exception as exc:  # noqa: BLE001 - the module's own import-time failure
            raise UserError(f"policy callable:{self.target}: importing {module!r} failed: "
                            f"{type(exc).__name__}: {exc}") from None
        if not callable(function):
            raise UserError(f"policy callable:{self.target}: {name!r} is not a function")
        return function

    def decisions(self, part, k):
        where = f"<callable:{self.target}>"
        try:
            out = np.asarray(self.function()(part.X, part.row_id))
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - user code: its failure is the user's to fix, named
            raise UserError(f"policy callable:{self.target} raised {type(exc).__name__}: {exc} "
                            f"(on {part.source})") from None
        if out.dtype.kind not in "biuf" or out.ndim not in (1, 2) or out.shape[0] != len(part):
            raise UserError(f"policy callable:{self.target} returned {out.dtype} of shape {out.shape} on "
                            f"{part.source}; expected ({len(part)},) actions or ({len(part)}, {k}) probabilities")
        if out.ndim == 1:
            if out.dtype.kind == "f" and not np.array_equal(out, np.floor(out)):
                raise UserError(f"policy callable:{self.target} returned non-integer actions on {part.source}")
            return self._check_actions(out.astype(np.int64), k, part, where)
        if out.shape != (len(part), k):
            raise UserError(f"policy callable:{self.target} returned shape {out.shape} on {part.source}, "
                            f"expected ({len(part)}, {k})")
        return check_distributions(out.astype(np.float64), part.source, where, part.row_id)

    def __str__(self):
        return f"callable:{self.target}"


@dataclass(eq=False)
class LinearPolicy(Policy):
    """A learned linear policy: π(x) = argmax_a s_a(x),  s_a(x) = x·coef[:, a] + intercept[a].

    Ties go to the first (lowest) action; the ``excluded_actions`` (e.g. actions the log it was learned
    on never took: ``dr-scale learn`` excludes them unless ``--allow-unlogged-actions``) are never
    chosen, the argmax running over the others. Spec ``linear:POLICY.npz``, the file ``dr-scale learn``
    writes (:meth:`save`, :meth:`load`). A log with fewer features than the policy reads the
    absent ones as 0; a feature index beyond the policy's, or a log with another number of
    actions, is a :class:`LogDataError`. ``str(policy)`` carries the parameters' sha256, so a
    re-learned file is another policy. Learned on a log with an action vocabulary (its metadata's
    ``"actions"``), it is reordered to another log's vocabulary by :meth:`resolve`.

    Parameters
    ----------
    coef : numpy.ndarray, shape (d, k)
        The weights, finite.
    intercept : numpy.ndarray, shape (k,)
        The per-action intercepts, finite.
    metadata : dict, optional
        What the learner recorded (saved as JSON).
    source : str, default "<in memory>"
        Where the parameters came from, for messages.
    excluded_actions : tuple of int, default ()
        Actions the policy never chooses (saved in the file as ``excluded_actions``); not all k.

    See Also
    --------
    SoftmaxPolicy : The same scores as a stochastic policy.
    dr_scale.learn_policy : Learns one from a log.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3),
    ...                  table=pa.table({"target_probs": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]}))
    >>> policy = LinearPolicy(coef=np.array([[1.0, 0.0, 0.5], [0.0, 2.0, 0.5]]), intercept=np.array([0.0, -0.5, 0.0]))
    >>> policy.scores(X).tolist()
    [[1.0, -0.5, 0.5], [0.0, 1.5, 0.5], [1.0, 1.5, 1.0]]
    >>> policy.decisions(part, 3).tolist()
    [0, 1, 1]
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     policy.save(os.path.join(folder, "policy.npz"))
    ...     again = LinearPolicy.load(os.path.join(folder, "policy.npz"))
    >>> again.digest == policy.digest
    True
    """

    coef: np.ndarray
    intercept: np.ndarray
    metadata: dict = field(default_factory=dict)
    source: str = "<in memory>"
    excluded_actions: tuple = ()
    needs_features = True

    def __post_init__(self):
        self.coef, self.intercept = checked_linear(self.coef, self.intercept, f"policy {self.source}")
        self.n_actions = self.coef.shape[1]
        excluded = np.asarray(self.excluded_actions).reshape(-1)
        if excluded.size and (excluded.dtype.kind not in "iu" or excluded.min() < 0
                              or excluded.max() >= self.n_actions or np.unique(excluded).size >= self.n_actions):
            raise ParameterFileError(f"policy {self.source}: 'excluded_actions' must be distinct actions in "
                                     f"[0, {self.n_actions}), not all of them; got {excluded.tolist()}")
        self.excluded_actions = tuple(sorted({int(a) for a in excluded}))
        self.digest = parameters_digest(self.coef, self.intercept,
                                        *([np.array(self.excluded_actions)] if self.excluded_actions else []))

    def choice_scores(self, X, source: str = "<X>", row_id=None) -> np.ndarray:
        """:meth:`scores` with the excluded actions' set to −∞: what the argmax (and a softmax) chooses among."""
        scores = self.scores(X, source, row_id)
        if self.excluded_actions:
            scores[:, list(self.excluded_actions)] = -np.inf
        return scores

    @property
    def n_features(self) -> int:
        return self.coef.shape[0]

    def scores(self, X, source: str = "<X>", row_id=None) -> np.ndarray:
        """s_a(x_i) = x_i·coef[:, a] + intercept[a], (n, k); X (n, d') with d' ≤ d (absent features are 0).

        Parameters
        ----------
        X : scipy.sparse.csr_matrix or numpy.ndarray, shape (n, d')
            The rows' features.
        source : str, default "<X>"
            Where X came from, for the message if it has a feature beyond the policy's d.
        row_id : numpy.ndarray of int, optional
            The rows' ids, for that message.

        Returns
        -------
        numpy.ndarray
            (n, k) float scores.
        """
        d = self.n_features
        if X.shape[1] > d:
            X = sp.csr_matrix(X)
            bad = np.flatnonzero(X.indices >= d)
            if bad.size:
                row = int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
                raise PolicyMismatch(source, "features",
                                     f"feature index beyond the policy's {d} features ({self.source})",
                                     int(row_id[row]) if row_id is not None else row)
            X = X[:, :d]
        coef = self.coef if X.shape[1] == d else self.coef[:X.shape[1]]
        with np.errstate(over="ignore", invalid="ignore"):
            scores = np.asarray(X @ coef) + self.intercept
        if not np.isfinite(scores).all():  # coefficients near 1e308: no argmax or softmax means anything
            row = int(np.flatnonzero(~np.isfinite(scores).all(axis=1))[0])
            raise UserError(f"policy {self.source}: its scores x·coef + intercept overflow float64 on {source} "
                            f"(e.g. row_id={int(row_id[row]) if row_id is not None else row}); the coefficients are "
                            f"too large (max |coef| = {np.abs(self.coef).max():.3g}): rescale them")
        return scores

    def resolve(self, actions: list | None) -> LinearPolicy:
        """This policy on a log whose action values are ``actions`` (id order): learned on a log with a vocabulary
        (its metadata's ``"actions"``, which ``dr-scale learn`` records), its columns are reordered so that each
        action id names the same action value here; values it was not learned on, or that this log lacks, are an
        error naming both. Without a vocabulary on either side the ids are taken as they are."""
        own = self.metadata.get("actions")
        if actions is None or not isinstance(own, list):
            return self
        own, here = [str(a) for a in own], [str(a) for a in actions]
        if own == here:
            return self
        missing, extra = [a for a in own if a not in here], [a for a in here if a not in own]
        if missing or extra or len(own) != len(here):
            def listed(values):
                return ", ".join(map(repr, values[:5])) + (" …" if len(values) > 5 else "")

            raise UserError(f"policy {self.source} was learned on a log with other actions: "
                            + "; ".join(filter(None, [f"this log has no {listed(missing)}" if missing else "",
                                                      f"the policy has no {listed(extra)}" if extra else ""]))
                            + "; learn it on a log with this log's actions")
        order = [own.index(a) for a in here]  # the policy's column of the value this log numbers i
        return LinearPolicy(self.coef[:, order], self.intercept[order], {**self.metadata, "actions": here},
                            self.source, tuple(here.index(own[a]) for a in self.excluded_actions))

    def predict(self, X) -> np.ndarray:
        """The actions argmax_a s_a(x_i), (n,); ties to the lowest action (numpy's argmax).

        Parameters
        ----------
        X : scipy.sparse.csr_matrix or numpy.ndarray, shape (n, d')
            The rows' features, d' ≤ d.

        Returns
        -------
        numpy.ndarray
            (n,) int actions.
        """
        return np.argmax(self.choice_scores(X), axis=1)

    def decisions(self, part, k):
        self._check_k(k, part)
        return np.argmax(self.choice_scores(part.X, part.source, part.row_id), axis=1)

    def _check_k(self, k: int, part) -> None:
        if k != self.n_actions:
            raise PolicyMismatch(part.source, "action", f"the log has {k} actions, the policy {self.source} has "
                               f"{self.n_actions}")

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` (coef, intercept, metadata as JSON) atomically.

        Parameters
        ----------
        url : str
            The file to write, any fsspec URL.
        storage_options : dict, optional
            fsspec's options for ``url`` (credentials otherwise from the environment).
        """
        excluded = {"excluded_actions": np.array(self.excluded_actions, dtype=np.int64)} if self.excluded_actions \
            else {}
        write_npz(url, storage_options, coef=self.coef, intercept=self.intercept,
                  metadata=np.array(json.dumps(self.metadata)), **excluded)

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> LinearPolicy:
        """Read a policy saved by :meth:`save`; anything else is a ``ParameterFileError`` naming the file.

        Parameters
        ----------
        url : str
            The ``.npz`` file, any fsspec URL.
        storage_options : dict, optional
            fsspec's options for ``url``.

        Returns
        -------
        LinearPolicy
            The policy, ``source`` its URL.
        """
        arrays = read_linear_file(url, storage_options, f"policy {url}")
        try:
            meta = json.loads(str(arrays["metadata"])) if "metadata" in arrays else {}
        except ValueError as exc:
            raise ParameterFileError(f"policy {url}: unreadable metadata ({exc})") from None
        return cls(arrays["coef"], arrays["intercept"], meta, url, tuple(arrays.get("excluded_actions", ())))

    def __str__(self):
        """The spec and the parameters' digest: a re-learned file is another policy (report caches key on this)."""
        return f"linear:{self.source} (sha256 {self.digest[:12]})"


@dataclass(eq=False)
class SoftmaxPolicy(Policy):
    """A stochastic policy from a linear policy's scores: π(a|x) = exp(s_a(x)/T) / Σ_b exp(s_b(x)/T).

    Spec ``softmax:POLICY.npz:T``. As T → 0 it approaches the linear policy's argmax; as T → ∞
    the uniform policy.

    Parameters
    ----------
    linear : LinearPolicy
        The policy whose scores s_a(x) = x·coef[:, a] + intercept[a] are used.
    temperature : float
        T > 0, finite.

    See Also
    --------
    LinearPolicy : The deterministic policy of the same scores.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3),
    ...                  table=pa.table({"target_probs": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]}))
    >>> linear = LinearPolicy(coef=np.array([[1.0, 0.0, 0.5], [0.0, 2.0, 0.5]]), intercept=np.array([0.0, -0.5, 0.0]))
    >>> probs = SoftmaxPolicy(linear, temperature=0.5).decisions(part, 3)
    >>> probs.round(3).tolist()
    [[0.705, 0.035, 0.259], [0.042, 0.844, 0.114], [0.212, 0.576, 0.212]]
    >>> probs.argmax(axis=1).tolist() == linear.decisions(part, 3).tolist()
    True
    """

    linear: LinearPolicy
    temperature: float
    needs_features = True

    def __post_init__(self):
        if not isinstance(self.linear, LinearPolicy):
            raise ParameterError(f"`linear` must be a LinearPolicy (e.g. LinearPolicy.load(path)), got "
                                 f"{type(self.linear).__name__} {self.linear!r:.60}")
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise UserError(f"policy softmax:{self.linear.source}:{self.temperature}: the temperature T must be a "
                            f"positive finite number, got {self.temperature}")
        self.n_actions = self.linear.n_actions

    def resolve(self, actions: list | None) -> SoftmaxPolicy:
        """The same temperature over the linear policy's columns for this log's actions
        (:meth:`LinearPolicy.resolve`)."""
        linear = self.linear.resolve(actions)
        return self if linear is self.linear else SoftmaxPolicy(linear, self.temperature)

    def decisions(self, part, k):
        """Scores shifted by their row maximum before dividing by T: the logits are ≤ 0 and the largest is 0, so
        no temperature, however small, overflows (a tiny T gives the argmax, ties shared)."""
        self.linear._check_k(k, part)
        scores = self.linear.choice_scores(part.X, part.source, part.row_id)  # an excluded action: probability 0
        with np.errstate(over="ignore", under="ignore"):
            logits = (scores - scores.max(axis=1, keepdims=True)) / self.temperature
            probs = np.exp(logits)
        return probs / probs.sum(axis=1, keepdims=True)

    def __str__(self):
        return f"softmax:{self.linear.source}:{self.temperature!r} (sha256 {self.linear.digest[:12]})"


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


@dataclass(eq=False)
class SparsePolicy(Policy):
    """A policy stored per row as the actions it may take with their probabilities: spec ``sparse:NAME``.

    The column NAME is a list<struct<action: int, prob: float>> (:func:`dr_scale.logs.contract.sparse_target_lists`):
    row i's pairs (a, π(a|x_i)), the probabilities summing to 1, every action not listed at probability 0.
    Its decisions are :class:`SparseProbs` — O(n·K) for lists of at most K actions, whatever k.

    Parameters
    ----------
    column : str
        The column.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> lists = pa.array([[{"action": 7, "prob": 0.5}, {"action": 2, "prob": 0.5}], [{"action": 9, "prob": 1.0}]])
    >>> part = Partition("<example>", row_id=np.arange(2), X=sp.csr_matrix((2, 1)), action=np.array([7, 3]),
    ...                  reward=np.array([1.0, 0.0]), propensity=np.full(2, 0.01), table=pa.table({"top": lists}))
    >>> target = SparsePolicy("top").decisions(part, 10)
    >>> target.actions.tolist(), target.probs.tolist()
    ([[7, 2], [9, 0]], [[0.5, 0.5], [1.0, 0.0]])
    """

    column: str = "target_topk"

    def __post_init__(self):
        self.columns = (self.column,)

    def decisions(self, part, k):
        return SparseProbs(*sparse_target_lists(part, self.column, k))

    def __str__(self):
        return f"sparse:{self.column}"


def top_k_softmax(scores: np.ndarray, top_k: int, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """The K highest scores of each row (ties: the lower action) and their softmax at temperature T, (n, K) each,
    in decreasing score order."""
    n, k = scores.shape
    top_k = min(top_k, k)
    if top_k < k:
        part = np.argpartition(scores, k - top_k, axis=1)[:, k - top_k:]
    else:
        part = np.broadcast_to(np.arange(k), (n, k))
    chosen = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -chosen), axis=1) if n else np.zeros((0, top_k), dtype=np.int64)
    actions = np.take_along_axis(part, order, axis=1).astype(np.int64)
    chosen = np.take_along_axis(chosen, order, axis=1)
    with np.errstate(over="ignore", under="ignore"):
        probs = np.exp((chosen - chosen[:, :1]) / temperature)
    probs /= probs.sum(axis=1, keepdims=True)
    return actions, probs


@dataclass(eq=False)
class ItemScorerPolicy(Policy):
    """A policy that scores the actions by their features and takes the top K: spec ``scorer:POLICY.npz``.

        s(x, a) = x·coef·f_a + bias_a,    π(a|x) = exp(s(x, a)/T) / Σ_{b ∈ top_K(x)} exp(s(x, b)/T)  for a ∈ top_K(x)

    (0 for the other actions), with f_a the action's features (row a of ``item_features``), top_K(x) the K
    highest scores (ties to the lower action) and T > 0 the temperature; K = 1 is the deterministic
    argmax_a s(x, a). The decisions are :class:`SparseProbs`: scores are computed ``chunk`` rows at a time,
    so memory is O(chunk·k + n·K), never (n, k).

    Parameters
    ----------
    coef : numpy.ndarray, shape (d, D_A)
        The bilinear weights between the context's d features and the action's D_A features.
    item_features : numpy.ndarray, shape (k, D_A)
        f_a per action.
    item_bias : numpy.ndarray, shape (k,), optional
        bias_a (default 0).
    top_k : int, default 10
        K.
    temperature : float, default 1.0
        T > 0.
    source : str, default "<in memory>"
        Where the parameters came from, for messages.
    chunk : int, default 1024
        Rows scored at a time (memory O(chunk·k)).
    metadata : dict, optional
        How it was made (a learned scorer's method, λ and training record), saved with it as JSON.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0]]))  # 2 rows, d = 2
    >>> part = Partition("<example>", row_id=np.arange(2), X=X, action=np.array([0, 1]),
    ...                  reward=np.array([1.0, 0.0]), propensity=np.full(2, 0.25), table=pa.table({}))
    >>> policy = ItemScorerPolicy(coef=np.eye(2), item_features=np.array([[1.0, 0], [0, 1], [2, 0], [0.5, 0.5]]),
    ...                           top_k=2, temperature=1.0)
    >>> target = policy.decisions(part, 4)
    >>> target.actions.tolist(), target.probs.round(3).tolist()
    ([[2, 0], [1, 3]], [[0.731, 0.269], [0.622, 0.378]])
    """

    coef: np.ndarray
    item_features: np.ndarray
    item_bias: np.ndarray | None = None
    top_k: int = 10
    temperature: float = 1.0
    source: str = "<in memory>"
    chunk: int = 1024
    metadata: dict = field(default_factory=dict)
    needs_features = True

    def __post_init__(self):
        self.coef = np.asarray(self.coef, dtype=np.float64)
        self.item_features = np.asarray(self.item_features, dtype=np.float64)
        if self.coef.ndim != 2 or self.item_features.ndim != 2 or self.coef.shape[1] != self.item_features.shape[1]:
            raise UserError(f"policy {self.source}: coef must be (d, D_A) and item_features (k, D_A), got "
                            f"{self.coef.shape} and {self.item_features.shape}")
        k = self.item_features.shape[0]
        self.item_bias = np.zeros(k) if self.item_bias is None else np.asarray(self.item_bias, dtype=np.float64)
        if self.item_bias.shape != (k,):
            raise UserError(f"policy {self.source}: item_bias must have one value per action ({k})")
        if not all(np.isfinite(a).all() for a in (self.coef, self.item_features, self.item_bias)):
            raise UserError(f"policy {self.source}: its parameters must be finite")
        if isinstance(self.top_k, bool) or int(self.top_k) != self.top_k or not 1 <= self.top_k:
            raise UserError(f"policy {self.source}: top_k must be a positive integer, got {self.top_k}")
        self.top_k = int(self.top_k)
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise UserError(f"policy {self.source}: the temperature must be a positive finite number, "
                            f"got {self.temperature}")
        self.n_actions = k
        self.digest = parameters_digest(self.coef, self.item_features, self.item_bias,
                                        np.array([self.top_k, self.temperature]))

    def scores(self, X) -> np.ndarray:
        """s(x_i, a) for every action, (n, k): for a few rows at a time."""
        d = self.coef.shape[0]
        X = sp.csr_matrix(X)
        if X.shape[1] > d:
            X = X[:, :d]
        coef = self.coef if X.shape[1] == d else self.coef[:X.shape[1]]
        return np.asarray(X @ coef) @ self.item_features.T + self.item_bias

    def decisions(self, part, k):
        if k != self.n_actions:
            raise PolicyMismatch(part.source, "action", f"the log has {k} actions, the policy {self.source} has "
                                                        f"{self.n_actions}")
        n, width = len(part), min(self.top_k, k)
        actions, probs = np.zeros((n, width), dtype=np.int64), np.zeros((n, width))
        for lo in range(0, n, self.chunk):
            hi = min(n, lo + self.chunk)
            actions[lo:hi], probs[lo:hi] = top_k_softmax(self.scores(part.X[lo:hi]), width, self.temperature)
        return SparseProbs(actions, probs)

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` (coef, item_features, item_bias, top_k, temperature, metadata as JSON) atomically."""
        buf = io.BytesIO()
        np.savez(buf, coef=self.coef, item_features=self.item_features, item_bias=self.item_bias,
                 top_k=np.array(self.top_k), temperature=np.array(self.temperature),
                 metadata=np.array(json.dumps(self.metadata)))
        fs, path = url_to_fs(url, storage_options)
        atomic_write(fs, path, buf.getvalue())

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> ItemScorerPolicy:
        """Read a policy saved by :meth:`save`; anything else is a ``ParameterFileError`` naming the file."""
        fs, path = url_to_fs(url, storage_options)
        try:
            with fs.open(path, "rb") as f:
                arrays = dict(np.load(io.BytesIO(f.read()), allow_pickle=False))
        except FileNotFoundError:
            raise ParameterFileError(f"policy {url}: no such file") from None
        except Exception as exc:  # noqa: BLE001 - not an .npz: named
            raise ParameterFileError(f"policy {url}: not a scorer policy .npz ({exc})") from None
        missing = [key for key in ("coef", "item_features", "top_k", "temperature") if key not in arrays]
        if missing:
            raise ParameterFileError(f"policy {url}: no {', '.join(missing)} in the file (a scorer policy has coef, "
                                     "item_features, item_bias, top_k, temperature)")
        try:
            meta = json.loads(str(arrays["metadata"])) if "metadata" in arrays else {}
        except ValueError as exc:
            raise ParameterFileError(f"policy {url}: unreadable metadata ({exc})") from None
        return cls(arrays["coef"], arrays["item_features"], arrays.get("item_bias"), int(arrays["top_k"]),
                   float(arrays["temperature"]), url, metadata=meta)

    def __str__(self):
        return f"scorer:{self.source} (sha256 {self.digest[:12]})"


def parse_policy(spec: str | Policy) -> Policy:
    """A policy from its command-line spelling (see the module docstring).

    Parameters
    ----------
    spec : str or Policy
        The spelling (a Policy is returned as it is).

    Returns
    -------
    Policy

    Examples
    --------
    >>> parse_policy("epsilon-greedy:0.1:constant:2")
    EpsilonGreedyPolicy(epsilon=0.1, policy=ConstantPolicy(action=2, item='2'))
    >>> str(parse_policy("topk:news,sports").resolve(["news", "sports", "weather"]))
    'topk:news,sports (#0,#1)'
    >>> parse_policy("uniform"), parse_policy("logging")
    (UniformPolicy(), LoggingPolicy())
    """
    if isinstance(spec, Policy):
        return spec
    if not isinstance(spec, str):
        raise UserError(f"bad policy {spec!r}: give a string such as column:target_action")
    kind, _, arg = spec.partition(":")
    if spec in ("uniform", "logging"):
        return UniformPolicy() if spec == "uniform" else LoggingPolicy()
    if kind == "constant" and arg.isdigit():
        return ConstantPolicy(int(arg), arg)
    if kind == "constant" and arg[:1] == "#" and arg[1:].isdigit():
        return ConstantPolicy(int(arg[1:]), arg)
    if kind == "constant" and arg and not arg.startswith("-"):
        return ConstantPolicy(None, arg)
    if kind == "topk" and arg:
        return TopKPolicy(tuple(arg.split(",")))
    if kind == "epsilon-greedy" and ":" in arg:
        epsilon, _, inner = arg.partition(":")
        try:
            epsilon = float(epsilon)
        except ValueError:
            raise UserError(f"bad policy {spec!r}: ε of epsilon-greedy:EPS:POLICY must be a number in [0, 1]") from None
        return EpsilonGreedyPolicy(epsilon, parse_policy(inner))
    if kind == "column":
        return ActionColumnPolicy(arg or "target_action")
    if kind == "probs":
        return ProbsColumnPolicy(arg or "target_probs")
    if kind == "sparse":
        return SparsePolicy(arg or "target_topk")
    if kind == "scorer" and arg:
        return ItemScorerPolicy.load(arg)
    if kind == "callable" and arg:
        return CallablePolicy(arg)
    if kind == "linear" and arg:
        return LinearPolicy.load(arg)
    if kind == "softmax" and ":" in arg:
        path, _, temperature = arg.rpartition(":")
        try:
            temperature = float(temperature)
        except ValueError:
            raise UserError(f"bad policy {spec!r}: the temperature T of softmax:POLICY.npz:T must be a number"
                            ) from None
        return SoftmaxPolicy(LinearPolicy.load(path), temperature)
    raise UserError(
        f"bad policy {spec!r}: use constant:A (an action's id, its value, or #ID), topk:A,B,…, uniform, "
        "epsilon-greedy:EPS:POLICY, logging, column:NAME, probs:NAME, callable:module:function, "
        "linear:POLICY.npz, softmax:POLICY.npz:T, sparse:NAME or scorer:POLICY.npz"
    )
