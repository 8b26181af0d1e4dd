"""Slate (ranking) policies: the probabilities of logged slates that the slate estimators need, computed per impression
without an (impressions, slots, items) array.

A slate policy scores a catalogue of items per context. Its scores are a table with one row per context
(``scores[c]``: the items' scores for context c; shape (contexts, items), or (contexts, K, items) per slot for
:class:`FactoredSlatePolicy`), and ``context[i]`` says which row impression i uses (a log of per-impression scores
passes ``context = arange(n)`` for a chunk of impressions). For the logged slates s_i = (a_i0, …, a_i,K−1),
:meth:`SlatePolicy.probabilities` gives (:class:`SlateProbabilities`)

    slate     π(s_i | x_i),
    prefix    π(a_i0, …, a_ik | x_i)     for each k  (the cascade's prefixes),
    marginal  π(a_ik at slot k | x_i)    for each k  (None where it has no closed form),

O(n·K) per impression batch once the table's per-row normalisers are known (O(contexts·items)).
"""

from __future__ import annotations

import abc
import functools
import io
from dataclasses import dataclass

import numpy as np

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.io.parameter_files import read_npz_file


@dataclass(frozen=True)
class SlateProbabilities:
    """A policy's probabilities of logged slates: ``slate`` (n,), ``prefix`` (n, K), ``marginal`` (n, K) or None."""

    slate: np.ndarray
    prefix: np.ndarray
    marginal: np.ndarray | None

    @classmethod
    def factored(cls, marginal: np.ndarray) -> SlateProbabilities:
        """The probabilities of a policy that draws each slot independently, from its per-slot probabilities
        (n, K): prefix = their running product, slate = their product (a slate log's ``propensity`` column read
        as a factored logging policy's)."""
        prefix = np.cumprod(marginal, axis=1)
        return cls(prefix[:, -1], prefix, marginal)


def _checked(slates: np.ndarray, context: np.ndarray | None, rows: int, items: int) -> tuple[np.ndarray, np.ndarray]:
    """(slates as int64 (n, K), context as int64 (n,)), checked against the table's rows and items."""
    slates = np.asarray(slates, dtype=np.int64)
    if slates.ndim != 2:
        raise ParameterError(f"`slates` must be (impressions, slots), got shape {slates.shape}")
    context = np.arange(slates.shape[0]) if context is None else np.asarray(context, dtype=np.int64).reshape(-1)
    if context.shape[0] != slates.shape[0]:
        raise ParameterError(f"`context` has {context.shape[0]} impressions, `slates` {slates.shape[0]}")
    if slates.size and (slates.min() < 0 or slates.max() >= items):
        raise ParameterError(f"`slates` holds an item outside [0, {items})")
    if context.size and (context.min() < 0 or context.max() >= rows):
        raise ParameterError(f"`context` holds a row outside the scores' [0, {rows})")
    return slates, context


def _repeated(slates: np.ndarray) -> np.ndarray:
    """(n, K) bool: the item at slot k already appears at a slot above it."""
    out = np.zeros(slates.shape, dtype=bool)
    for k in range(1, slates.shape[1]):
        out[:, k] = (slates[:, :k] == slates[:, k:k + 1]).any(axis=1)
    return out


class SlatePolicy(abc.ABC):
    """A policy over slates of K items from a catalogue, scored per context (see the module's docstring)."""

    scores: np.ndarray
    slots: int

    @abc.abstractmethod
    def probabilities(self, slates: np.ndarray, context: np.ndarray | None = None) -> SlateProbabilities:
        """π's probabilities of the slates ``slates`` (n, K) in contexts ``context`` (n,)."""

    @abc.abstractmethod
    def sample(self, context: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Slates drawn from π in contexts ``context`` (n,): (n, K) items."""


@dataclass(frozen=True)
class TopKSlatePolicy(SlatePolicy):
    """The deterministic slate of the K highest scores in decreasing order (ties: the lower item).

        π(s | x) = 1{s = top_K(x)},  prefix 1{a_0:k = top_K(x)_0:k},  marginal 1{a_k = top_K(x)_k}

    Examples
    --------
    >>> policy = TopKSlatePolicy(np.array([[0.1, 0.9, 0.5]]), slots=2)
    >>> p = policy.probabilities(np.array([[1, 2], [1, 0]]), np.array([0, 0]))
    >>> p.slate.tolist(), p.prefix.tolist(), p.marginal.tolist()
    ([1.0, 0.0], [[1.0, 1.0], [1.0, 0.0]], [[1.0, 1.0], [1.0, 0.0]])
    """

    scores: np.ndarray  # (contexts, items)
    slots: int

    @property
    def top(self) -> np.ndarray:
        """(contexts, K): each context's slate."""
        order = np.lexsort((np.broadcast_to(np.arange(self.scores.shape[1]), self.scores.shape), -self.scores))
        return order[:, :self.slots]

    def probabilities(self, slates: np.ndarray, context: np.ndarray | None = None) -> SlateProbabilities:
        """The indicators of the logged slate, its prefixes and slots being π's."""
        slates, context = _checked(slates, context, *self.scores.shape)
        match = (slates == self.top[context]).astype(np.float64)
        prefix = np.cumprod(match, axis=1)
        return SlateProbabilities(prefix[:, -1], prefix, match)

    def sample(self, context: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The top-K slates (no randomness)."""
        out: np.ndarray = self.top[np.asarray(context)]
        return out


@dataclass(frozen=True)
class PlackettLuceSlatePolicy(SlatePolicy):
    """Plackett–Luce sampling of the softmax of the scores at temperature T: items drawn without replacement,
    slot by slot (Kiyohara et al. 2022's ranking policies).

        π(a_k | x, a_0:k−1) = e_{a_k} / (Σ_b e_b − Σ_{j<k} e_{a_j}),    e_a = exp(s(x, a) / T)

    prefix = the product of these up to k, slate = up to K − 1; a slate that repeats an item has probability 0.
    Its per-slot marginals have no closed form (a sum over all prefixes): ``marginal`` is None, so the estimators
    that need them (independent IPS, the pseudoinverse) refuse this policy.

    Examples
    --------
    >>> policy = PlackettLuceSlatePolicy(np.log(np.array([[1.0, 2.0, 1.0]])), slots=2)
    >>> p = policy.probabilities(np.array([[1, 0], [0, 0]]), np.array([0, 0]))
    >>> [round(x, 4) for x in p.slate.tolist()], p.marginal is None  # 2/4 · 1/2, and a repeat
    ([0.25, 0.0], True)
    """

    scores: np.ndarray  # (contexts, items)
    slots: int
    temperature: float = 1.0

    def _exp(self) -> tuple[np.ndarray, np.ndarray]:
        """(e / max e per row, Σ_b e_b / max e) per context: exp of the scores shifted for stability."""
        shifted = self.scores / self.temperature
        e = np.exp(shifted - shifted.max(axis=1, keepdims=True))
        return e, e.sum(axis=1)

    def probabilities(self, slates: np.ndarray, context: np.ndarray | None = None) -> SlateProbabilities:
        """The slot-by-slot conditional probabilities, multiplied along the slate."""
        slates, context = _checked(slates, context, *self.scores.shape)
        e, total = self._exp()
        chosen = e[context[:, None], slates]
        before = np.cumsum(chosen, axis=1) - chosen
        conditional = np.where(_repeated(slates), 0.0, chosen / np.maximum(total[context, None] - before, 1e-300))
        prefix = np.cumprod(conditional, axis=1)
        return SlateProbabilities(prefix[:, -1], prefix, None)

    def sample(self, context: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Slates slot by slot: an item from softmax(s/T), drawn again while it repeats an item above it (rejection:
        exactly the Plackett–Luce conditional). O(n·K·log items) for a mass not concentrated on fewer than K items."""
        context = np.asarray(context, dtype=np.int64)
        e, _ = self._exp()
        cdf = np.cumsum(e, axis=1)
        out = np.empty((context.size, self.slots), dtype=np.int64)
        for k in range(self.slots):
            todo = np.arange(context.size)
            while todo.size:
                u = rng.random(todo.size) * cdf[context[todo], -1]
                for c in np.unique(context[todo]):
                    rows = context[todo] == c
                    out[todo[rows], k] = np.searchsorted(cdf[c], u[rows], side="right")
                out[todo, k] = np.minimum(out[todo, k], e.shape[1] - 1)
                todo = todo[(out[todo, :k] == out[todo, k:k + 1]).any(axis=1)]
        return out


@dataclass(frozen=True)
class FactoredSlatePolicy(SlatePolicy):
    """Each slot drawn independently from its own softmax: π(s | x) = Π_k π_k(a_k | x), π_k = softmax(s_k(x, ·)/T).

    Items may repeat across slots (the Cartesian product of slots, the setting of the pseudoinverse estimator,
    Swaminathan et al. 2017, Example 4). Marginals are the per-slot probabilities, prefixes their running
    products. ``scores`` is (contexts, K, items), or (contexts, items) for the same scores at every slot.

    Examples
    --------
    >>> policy = FactoredSlatePolicy(np.log(np.array([[1.0, 3.0]])), slots=2)
    >>> p = policy.probabilities(np.array([[1, 1]]), np.array([0]))
    >>> p.marginal.round(12).tolist(), p.slate.round(12).tolist()
    ([[0.75, 0.75]], [0.5625])
    """

    scores: np.ndarray  # (contexts, K, items) or (contexts, items)
    slots: int
    temperature: float = 1.0

    @functools.cached_property
    def log_table(self) -> np.ndarray:
        """log π_k(a | c), (contexts, K, items), computed once."""
        scores = self.scores if self.scores.ndim == 3 else np.repeat(self.scores[:, None, :], self.slots, axis=1)
        shifted = scores / self.temperature
        top = shifted.max(axis=2, keepdims=True)
        out: np.ndarray = shifted - top - np.log(np.exp(shifted - top).sum(axis=2, keepdims=True))
        return out

    @functools.cached_property
    def table(self) -> np.ndarray:
        """π_k(a | c), (contexts, K, items), computed once."""
        out: np.ndarray = np.exp(self.log_table)
        return out

    def probabilities(self, slates: np.ndarray, context: np.ndarray | None = None) -> SlateProbabilities:
        """Per-slot marginals π_k(a_k | x) and their running products."""
        slates, context = _checked(slates, context, self.scores.shape[0], self.scores.shape[-1])
        log = self.log_table
        return SlateProbabilities.factored(np.exp(log[context[:, None], np.arange(self.slots)[None, :], slates]))

    def sample(self, context: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each slot by inverse-CDF sampling of its table row."""
        cdf = np.cumsum(self.table, axis=2)
        context = np.asarray(context)
        u = rng.random((context.size, self.slots))
        out = np.empty((context.size, self.slots), dtype=np.int64)
        for k in range(self.slots):
            rows = cdf[context, k]
            out[:, k] = np.minimum((rows < u[:, k:k + 1]).sum(axis=1), self.scores.shape[-1] - 1)
        return out


#: The slate policies a policy file may hold, by its ``kind``.
SLATE_POLICY_KINDS: dict[str, type[SlatePolicy]] = {
    "top-k": TopKSlatePolicy, "plackett-luce": PlackettLuceSlatePolicy, "factored": FactoredSlatePolicy}


def save_slate_policy(policy: SlatePolicy, url: str, storage_options: dict | None = None) -> None:
    """Write ``policy`` as a ``.npz`` file (kind, scores, slots, temperature), atomically, at any fsspec URL."""
    kind = next(name for name, cls in SLATE_POLICY_KINDS.items() if isinstance(policy, cls))
    buffer = io.BytesIO()
    np.savez(buffer, kind=np.array(kind), scores=policy.scores, slots=np.array(policy.slots),
             temperature=np.array(getattr(policy, "temperature", 1.0)))
    fs, path = url_to_fs(url, storage_options)
    atomic_write(fs, path, buffer.getvalue())


def load_slate_policy(url: str, storage_options: dict | None = None) -> SlatePolicy:
    """The slate policy of a file written by :func:`save_slate_policy`; a ``UserError`` naming the file otherwise.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "pl.npz")
    >>> save_slate_policy(PlackettLuceSlatePolicy(np.zeros((2, 4)), slots=3, temperature=0.5), path)
    >>> policy = load_slate_policy(path)
    >>> type(policy).__name__, policy.slots, policy.temperature, policy.scores.shape
    ('PlackettLuceSlatePolicy', 3, 0.5, (2, 4))
    """
    data = read_npz_file(url, storage_options, f"{url}: not a slate policy file")
    try:
        kind, scores, slots = str(data["kind"]), np.asarray(data["scores"], np.float64), int(data["slots"])
        temperature = float(data["temperature"])
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{url}: not a slate policy file ({exc}); write one with "
                        "dr_scale.policies.slates.save_slate_policy") from None
    if kind not in SLATE_POLICY_KINDS:
        raise UserError(f"{url}: unknown slate policy kind {kind!r}; one of {', '.join(SLATE_POLICY_KINDS)}")
    if kind == "top-k":
        return TopKSlatePolicy(scores, slots)
    return SLATE_POLICY_KINDS[kind](scores, slots, temperature)  # type: ignore[call-arg]
