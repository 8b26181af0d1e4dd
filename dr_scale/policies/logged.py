"""The policy that wrote another log, as a target policy (spec ``logged:OTHER_LOGS[:frequencies|:model]``).

"We ran A and, for a while, B: would B have beaten A?" — B is the policy that wrote another log, and its
value on A's contexts is estimated from A's log with π = B's policy, estimated from B's log out of core:

* **frequencies** (a context-free logger): π(a | slot) = c(slot, a) / c(slot), the share of B's rows at that
  slot that showed action a (without a ``slot`` column, over all rows: π(a) = c(a) / n);
* **model** (a logger that reads x): π(a | x) = π̂_B(a | x), the multinomial logistic propensity model fitted
  on B's log (:func:`dr_scale.propensity.fitting.fit_propensity_model`, fitted by
  :func:`dr_scale.ope.logged.fitted`); the slot enters through x where the import hashes the position as a
  feature (``categorical = ["position"]``, as the Open Bandit Dataset spec does), so π̂(a | x, slot).

The rule (``logged:PATH`` without a form): **frequencies when B's logged propensity of each (slot, action) is
one number** (its largest and smallest differ by at most :data:`CONSTANT_TOLERANCE`, relative) — a fixed,
context-free logger such as a uniform random one, whose π the frequencies estimate without bias; **otherwise the
model** — a logger whose probabilities move, with the context or over time (the log alone cannot tell the two
apart). A logger known to be context-free whose probabilities moved over time (Bernoulli Thompson sampling
updated in batches) is ``logged:PATH:frequencies``: its time-average, which its on-policy value averages over too.

One pass over B's log (reading action, slot, reward and propensity only) gives the frequencies and what is
printed beside the estimate (:class:`LoggedStats`): B's on-policy value — its mean reward, per slot and pooled,
with a normal interval — and the check against B's logged propensities, mean_i |π̂(a_i|slot_i) − p̄(slot_i, a_i)|
(p̄ the mean logged propensity of the row's (slot, action)) and, per slot, Σ_a p̄(slot, a), which is 1 when the
logged propensities are a distribution over the actions at that slot (in the Open Bandit Dataset's BTS logs
they are not: 3.74, 2.31 and 1.98 in the "all" campaign).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtri

from dr_scale.core.errors import UserError
from dr_scale.logs.contract import Partition
from dr_scale.logs.opened import open_log
from dr_scale.logs.reading import read_partition
from dr_scale.outofcore.compute import compute
from dr_scale.outofcore.mergeable import parts_bag, tree_reduce
from dr_scale.policies.base import Policy, PolicyMismatch
from dr_scale.policies.distributions import ActionDistribution, DenseProbs

#: The largest relative spread max/min − 1 of a (slot, action)'s logged propensities for which the rule calls the
#: logger fixed and context-free (its π is then the frequencies).
CONSTANT_TOLERANCE = 1e-6
#: The forms of ``logged:PATH:FORM``.
FORMS = ("frequencies", "model")


def _padded(a: np.ndarray, shape: tuple[int, ...], fill: float) -> np.ndarray:
    """``a`` in the top-left corner of an array of ``shape`` filled with ``fill``."""
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


@dataclass(frozen=True)
class LoggedStats:
    """One pass over a log by slot and action (mergeable with ``+``): what :class:`LoggedPolicy` needs of it.

    ``count[s, a]`` rows of slot s with action a, ``p_sum``, ``p_min``, ``p_max`` of their logged propensities
    (NaN without a propensity column), and per slot ``reward_sum``, ``reward_squares`` Σ r_i and Σ r_i².
    A log without a ``slot`` column is one slot.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> part = Partition("<p>", np.arange(4), None, np.array([0, 1, 1, 1]), np.array([1.0, 0.0, 1.0, 1.0]),
    ...                  np.full(4, 0.5), pa.table({"propensity": [0.5] * 4, "slot": pa.array([0, 0, 1, 1])}))
    >>> stats = LoggedStats.of(part, 2)
    >>> stats.count.tolist(), stats.frequencies().tolist(), stats.value()[0].tolist()
    ([[1, 1], [0, 2]], [[0.5, 0.5], [0.0, 1.0]], [0.5, 1.0])
    """

    count: np.ndarray
    p_sum: np.ndarray
    p_min: np.ndarray
    p_max: np.ndarray
    reward_sum: np.ndarray
    reward_squares: np.ndarray

    @classmethod
    def of(cls, part: Partition, k: int) -> LoggedStats:
        """The statistics of one partition's rows, over k actions."""
        slot = part.slot if part.slot is not None else np.zeros(len(part), np.int64)
        n_slots = int(slot.max()) + 1 if slot.size else 1
        cell = slot * k + part.action
        size = n_slots * k
        count = np.bincount(cell, minlength=size).reshape(n_slots, k)
        p = part.propensity
        p_sum = np.bincount(cell, weights=p, minlength=size).reshape(n_slots, k)
        p_min = np.full(size, np.inf)
        np.minimum.at(p_min, cell, p)
        p_max = np.full(size, -np.inf)
        np.maximum.at(p_max, cell, p)
        return cls(count, p_sum, p_min.reshape(n_slots, k), p_max.reshape(n_slots, k),
                   np.bincount(slot, weights=part.reward, minlength=n_slots),
                   np.bincount(slot, weights=part.reward ** 2, minlength=n_slots))

    def __add__(self, other: LoggedStats) -> LoggedStats:
        """Both states' rows: sums added, minima and maxima taken (the slots and actions of the larger)."""
        shape = (max(self.count.shape[0], other.count.shape[0]), max(self.count.shape[1], other.count.shape[1]))

        def both(name: str, fill: float) -> tuple[np.ndarray, np.ndarray]:
            """The field ``name`` of both states, padded to the larger shape with ``fill``."""
            mine, theirs = getattr(self, name), getattr(other, name)
            size = shape if mine.ndim == 2 else shape[:1]
            return _padded(mine, size, fill), _padded(theirs, size, fill)

        return LoggedStats(np.add(*both("count", 0)), np.add(*both("p_sum", 0.0)), np.fmin(*both("p_min", np.inf)),
                           np.fmax(*both("p_max", -np.inf)), np.add(*both("reward_sum", 0.0)),
                           np.add(*both("reward_squares", 0.0)))

    @property
    def rows(self) -> int:
        """The log's rows."""
        return int(self.count.sum())

    def frequencies(self) -> np.ndarray:
        """π(a | slot) = count[slot, a] / Σ_b count[slot, b], (slots, k); a slot without rows is all 0."""
        per_slot = self.count.sum(axis=1, keepdims=True)
        out: np.ndarray = self.count / np.maximum(per_slot, 1)
        return out

    @property
    def constant_propensities(self) -> bool:
        """Whether every (slot, action) seen has one logged propensity (within :data:`CONSTANT_TOLERANCE`): the
        rule's "fixed, context-free logger"; False without logged propensities."""
        seen = self.count > 0
        if not seen.any() or not np.isfinite(self.p_sum[seen]).all():
            return False
        return bool((self.p_max[seen] <= self.p_min[seen] * (1 + CONSTANT_TOLERANCE)).all())

    def mean_propensity(self) -> np.ndarray:
        """p̄(slot, a), the mean logged propensity of each (slot, action) (0 where never logged), (slots, k)."""
        out: np.ndarray = np.where(self.count > 0, self.p_sum / np.maximum(self.count, 1), 0.0)
        return out

    def value(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The on-policy value per slot: (mean reward, its standard error √(s²/n), lower, upper (1 − α) normal
        bounds), each (slots,)."""
        n = self.count.sum(axis=1).astype(float)
        mean = self.reward_sum / np.maximum(n, 1)
        var = np.maximum(self.reward_squares / np.maximum(n, 1) - mean ** 2, 0.0) * n / np.maximum(n - 1, 1)
        se = np.sqrt(var / np.maximum(n, 1))
        z = float(ndtri(1 - alpha / 2))
        return mean, se, mean - z * se, mean + z * se

    def pooled_value(self, alpha: float = 0.05) -> tuple[float, float, float, float]:
        """The on-policy value over all rows: (mean reward, standard error, lower, upper)."""
        n = self.rows
        mean = float(self.reward_sum.sum()) / n
        var = max(float(self.reward_squares.sum()) / n - mean ** 2, 0.0) * n / max(n - 1, 1)
        se = float(np.sqrt(var / n))
        z = float(ndtri(1 - alpha / 2))
        return mean, se, mean - z * se, mean + z * se


def logged_stats(url: str, storage_options: dict | None = None) -> tuple[LoggedStats, list | None]:
    """One pass over the log at ``url`` (action, slot, reward and propensity read, one task per part): its
    :class:`LoggedStats` and its action vocabulary (None without one)."""
    logs = open_log(url, storage_options)
    fs, parts = logs.listing()
    vocabulary = logs.vocabulary
    k = logs.dimensions()[1]
    if k is None and logs.footprint.max_action is not None:
        k = logs.footprint.max_action + 1
    if k is None:
        raise UserError(f"policy logged:{url}: the log's number of actions is not in its metadata or vocabulary")

    def stats_of(path: Any) -> LoggedStats:
        """One part's statistics."""
        return LoggedStats.of(read_partition(fs, path, with_features=False), int(k))

    (stats,) = compute(tree_reduce(parts_bag(parts).map(stats_of)))
    return stats, vocabulary


@dataclass
class LoggedPolicy(Policy):
    """The policy that wrote the log at ``url``, as a target policy (module docstring; spec ``logged:URL[:FORM]``).

    Parameters
    ----------
    url : str
        The other log.
    form : str
        ``"frequencies"``, ``"model"`` or ``"auto"`` (the module's rule).
    stats : LoggedStats
        The other log's pass (:func:`logged_stats`).
    vocabulary : list or None
        The other log's action values (its ids' order), for evaluating on a log that names them otherwise.
    model : object or None
        With the model form, π̂_B: a propensity model with ``predict_proba(X)`` fitted on the other log
        (:func:`dr_scale.ope.logged.fitted` fits it).
    mapping : numpy.ndarray or None
        The evaluated log's id of each of the other log's actions (set by :meth:`resolve`; None: the same ids).
    model_gap : float or None
        With the model form, mean_i |π̂_B(a_i | x_i) − p_i| over the other log's rows (set with ``model``).

    Examples
    --------
    A uniform logger over 2 actions at 2 slots wrote the other log (propensity 0.5 everywhere): the rule picks
    its frequencies, and the evaluated rows get π(· | their slot).

    >>> import numpy as np, pyarrow as pa
    >>> other = Partition("<B>", np.arange(4), None, np.array([0, 1, 1, 1]), np.array([1.0, 0.0, 1.0, 1.0]),
    ...                   np.full(4, 0.5), pa.table({"propensity": [0.5] * 4, "slot": pa.array([0, 0, 1, 1])}))
    >>> policy = LoggedPolicy("<B>", "auto", LoggedStats.of(other, 2))
    >>> policy.chosen
    'frequencies'
    >>> rows = Partition("<A>", np.arange(2), None, np.array([1, 1]), np.zeros(2), np.full(2, 0.5),
    ...                  pa.table({"slot": pa.array([1, 0])}))
    >>> policy.distribution(rows, 2).dense().tolist()
    [[0.0, 1.0], [0.5, 0.5]]
    """

    url: str
    form: str
    stats: LoggedStats = field(repr=False)
    vocabulary: list | None = field(default=None, repr=False)
    model: Any = field(default=None, repr=False)
    mapping: np.ndarray | None = field(default=None, repr=False)  # the other log's ids → the evaluated log's
    #: With the model form: mean_i |π̂_B(a_i | x_i) − p_i| over the other log's rows (set by ope.logged.fitted).
    model_gap: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.form not in ("auto", *FORMS):
            raise UserError(f"policy logged:{self.url}:{self.form}: the form is frequencies or model")

    @classmethod
    def load(cls, url: str, form: str = "auto", storage_options: dict | None = None) -> LoggedPolicy:
        """The policy that wrote ``url``, by one pass over it (:func:`logged_stats`)."""
        stats, vocabulary = logged_stats(url, storage_options)
        return cls(url, form, stats, vocabulary)

    @property
    def chosen(self) -> str:
        """The form used: the one given, or by the rule (module docstring)."""
        if self.form != "auto":
            return self.form
        return "frequencies" if self.stats.constant_propensities else "model"

    @property
    def needs_features(self) -> bool:  # type: ignore[override]
        """The model form reads x."""
        return self.chosen == "model"

    @property
    def n_actions(self) -> int | None:  # type: ignore[override]
        """k: the other log's number of actions."""
        return int(self.stats.count.shape[1])

    def resolve(self, actions: list | None) -> LoggedPolicy:
        """The policy over the evaluated log's action ids: with both logs' vocabularies, the other log's action
        values mapped to the evaluated log's ids (a value the evaluated log lacks is an error naming it)."""
        if actions is None or self.vocabulary is None or list(actions) == list(self.vocabulary):
            return self
        index = {str(v): i for i, v in enumerate(actions)}
        missing = [v for v in self.vocabulary if str(v) not in index]
        if missing or len(actions) != len(self.vocabulary):
            raise UserError(f"policy {self}: its actions are not the evaluated log's "
                            f"(e.g. {missing[0] if missing else 'the counts'}: {len(self.vocabulary)} against "
                            f"{len(actions)} actions); import both logs with the same action column values")
        mapping = np.array([index[str(v)] for v in self.vocabulary])
        return LoggedPolicy(self.url, self.form, self.stats, self.vocabulary, self.model, mapping, self.model_gap)

    def frequencies(self) -> np.ndarray:
        """π(a | slot) over the evaluated log's action ids, (slots, k)."""
        table = self.stats.frequencies()
        if self.mapping is None:
            return table
        out = np.zeros_like(table)
        out[:, self.mapping] = table
        return out

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(· | x_i, slot_i) on the partition's rows: the row's slot's frequencies, or π̂_B(· | x_i)."""
        if k != self.n_actions:
            raise PolicyMismatch(part.source, "action", f"the policy {self} is over "
                                 f"{self.n_actions} actions, the log has k = {k}")
        if self.chosen == "model":
            if self.model is None:
                raise UserError(f"policy {self}: the model form needs the propensity model fitted on "
                                "that log (dr_scale.ope.logged.fitted(policy), done by Evaluation)")
            probs = self.model.predict_proba(part.X)
            if self.mapping is not None:
                probs = probs[:, np.argsort(self.mapping)]
            return DenseProbs(probs)
        table = self.frequencies()
        if part.slot is None:
            if table.shape[0] > 1:
                raise UserError(f"{part.source}: column 'slot': missing; the policy {self} answers per "
                                "slot (its log has one), so the evaluated log needs a slot column too")
            return DenseProbs(np.broadcast_to(table[0], (len(part), k)))
        slot = part.slot
        if slot.size and slot.max() >= table.shape[0]:
            raise PolicyMismatch(part.source, "slot", f"slot {int(slot.max())} is not one of the "
                                 f"{table.shape[0]} slots of {self}")
        return DenseProbs(table[slot])

    def __str__(self) -> str:
        return f"logged:{self.url}" + ("" if self.form == "auto" else f":{self.form}")
