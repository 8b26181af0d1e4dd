"""Off-policy value estimators as mergeable statistics.

Notation (Dudík, Langford & Li 2011, Sec. 2): a logged row is (x_i, a_i, r_i, p̂_i)
with p̂_i the logging policy's (estimated) probability of a_i; π(a|x) is the target
policy (deterministic policies are one-hot); ρ̂_a(x) is the reward model. Every
estimator here is built from four per-row quantities:

    r_i,    w_i = π(a_i|x_i) / p̂_i,    ρ̂_π(x_i) = Σ_a π(a|x_i) ρ̂_a(x_i),    ρ̂_{a_i}(x_i).

Each estimator is a small frozen dataclass — its parameters are its fields, so its
``repr`` (and the report's cache fingerprint) carries them — with a per-row term
(``terms``) and a function of the terms' means (``value_of``). The state of a batch
of rows is a :class:`~dr_scale.ope.moments.Moments` of those terms, which merges with
``+``; the estimate, its standard error (the delta method, exact for the plain means)
and a normal or an empirical-likelihood interval (:mod:`dr_scale.ope.intervals`) come from
the merged state alone. The same classes serve numpy arrays (``estimate``), Parquet
partitions and Dask (``state`` + ``result``).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np
from scipy.special import ndtri, stdtrit  # normal and Student t quantiles (scipy.stats is slow to import)

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.ope import checks as check
from dr_scale.ope.intervals import CS_OPTIMAL_N, Summary, cs_rho, cs_threshold, el_interval, summary_of
from dr_scale.ope.moments import Moments

#: The thresholds (weights) among which SwitchDR's τ and ClippedDR's M are chosen when not given.
TUNING_GRID = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
TUNING_DELTA = 0.05  # the tuning's bias bound holds with probability 1 − δ (obp's default)
INTERVAL_METHODS = ("normal", "el")


@dataclass(frozen=True)
class RowInputs:
    """The four per-row quantities every estimator is built from."""

    reward: np.ndarray  # r_i
    weight: np.ndarray  # w_i = π(a_i|x_i) / p̂_i
    reward_hat_pi: np.ndarray | None = None  # ρ̂_π(x_i) = Σ_a π(a|x_i) ρ̂_a(x_i)
    reward_hat_logged: np.ndarray | None = None  # ρ̂_{a_i}(x_i)
    embedding_weight: np.ndarray | None = None  # w(x_i, e_i) = p_π(e_i|x_i) / p_π₀(e_i|x_i) (MIPS)

    @functools.cached_property
    def ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """(min, max) of (r, w), computed once for all estimators (the EL interval's bounds; ±∞ for no rows)."""
        if self.reward.size == 0:
            return np.full(2, np.inf), np.full(2, -np.inf)
        return (np.array([self.reward.min(), self.weight.min()]), np.array([self.reward.max(), self.weight.max()]))

    @classmethod
    def from_arrays(cls, reward, action, propensity, target_probs, reward_hat=None) -> RowInputs:
        """Build the per-row quantities from obp-style arrays, checked as obp checks them.

        ``target_probs`` and ``reward_hat`` have shape (n, k); ``action`` holds
        integers in [0, k). Bad input raises a ``ValueError`` naming the argument and
        an example index (:mod:`dr_scale.ope.checks`).
        """
        reward = check.vector("reward", reward, allow_empty=True)
        n = reward.shape[0]
        target_probs = check.probabilities("target_probs", target_probs, n)
        k = target_probs.shape[1]
        action = check.actions("action", action, n, k)
        propensity = check.propensities(propensity, n)
        logged = np.arange(n) * k + action  # flat positions of (i, a_i): ~2× faster to take than [i, a_i]
        weight = target_probs.take(logged) / propensity
        if reward_hat is None:
            return cls(reward, weight)
        reward_hat = check.matrix("reward_hat", reward_hat, target_probs.shape)
        return cls(
            reward,
            weight,
            reward_hat_pi=(target_probs * reward_hat) @ np.ones(k),  # BLAS row sums: ~3× faster than einsum
            reward_hat_logged=reward_hat.take(logged),
        )

    @classmethod
    def from_actions(cls, reward, action, propensity, target_action, reward_hat_target=None) -> RowInputs:
        """The per-row quantities for a deterministic π, from its actions π(x_i) — no (n, k) arrays.

        w_i = 1{a_i = π(x_i)} / p̂_i and ρ̂_π(x_i) = ρ̂_{π(x_i)}(x_i) (``reward_hat_target``).
        That array also serves as ρ̂_{a_i}(x_i): the two agree wherever w_i ≠ 0, and every
        estimator multiplies ρ̂_{a_i}(x_i) by w_i. Checked as :meth:`from_arrays`.
        """
        reward = check.vector("reward", reward, allow_empty=True)
        n = reward.shape[0]
        action = check.actions("action", action, n, None)
        target_action = check.actions("target_action", target_action, n, None)
        propensity = check.propensities(propensity, n)
        if reward_hat_target is not None:
            reward_hat_target = check.vector("reward_hat_target", reward_hat_target, n)
        weight = (action == target_action) / propensity
        return cls(reward, weight, reward_hat_target, reward_hat_target)

    @classmethod
    def from_sparse(cls, reward, action, propensity, target_actions, target_probs, reward_hat_listed=None) -> RowInputs:
        """The per-row quantities for a policy given as each row's listed actions — no (n, k) arrays.

        Row i's policy takes ``target_actions[i, j]`` with probability ``target_probs[i, j]`` (both (n, K),
        padded with probability 0): w_i = Σ_j π_ij 1{a_ij = a_i} / p̂_i and ρ̂_π(x_i) = Σ_j π_ij ρ̂_{a_ij}(x_i)
        from ``reward_hat_listed`` (n, K), ρ̂ at the listed actions. ρ̂_{a_i}(x_i) is taken from the listed
        slot of a_i (0 where a_i is not listed): every estimator multiplies it by w_i, which is then 0.
        O(n·K) whatever the number of actions.

        Examples
        --------
        >>> import numpy as np
        >>> rows = RowInputs.from_sparse(np.array([1.0, 0.0]), np.array([7, 3]), np.array([0.5, 0.25]),
        ...                              np.array([[7, 2], [9, 0]]), np.array([[0.5, 0.5], [1.0, 0.0]]),
        ...                              np.array([[0.8, 0.2], [0.4, 0.1]]))
        >>> rows.weight.tolist(), rows.reward_hat_pi.tolist(), rows.reward_hat_logged.tolist()
        ([1.0, 0.0], [0.5, 0.4], [0.8, 0.0])
        """
        reward = check.vector("reward", reward, allow_empty=True)
        n = reward.shape[0]
        action = check.actions("action", action, n, None)
        propensity = check.propensities(propensity, n)
        target_probs = np.asarray(target_probs, dtype=np.float64).reshape(n, -1)
        target_actions = np.asarray(target_actions).reshape(n, -1)
        logged = (target_actions == action[:, None]) & (target_probs > 0)
        weight = (target_probs * logged).sum(axis=1) / propensity
        if reward_hat_listed is None:
            return cls(reward, weight)
        reward_hat_listed = check.matrix("reward_hat_listed", reward_hat_listed, target_probs.shape)
        return cls(reward, weight, (target_probs * reward_hat_listed).sum(axis=1),
                   (reward_hat_listed * logged).sum(axis=1))

    def marginalized(self) -> RowInputs:
        """These rows with the marginal weights w(x_i, e_i) in place of w_i (what MIPS and SNMIPS see)."""
        if self.embedding_weight is None:
            raise ValueError("MIPS needs the marginal weights p_π(e|x) / p_π₀(e|x): the action catalogue's "
                             "embedding and the logging policy's embedding propensity")
        return RowInputs(self.reward, self.embedding_weight, embedding_weight=self.embedding_weight)


@dataclass(frozen=True)
class Estimate:
    """An estimate of a policy's value with its standard error, and its intervals.

    ``value`` is V̂ = g(t̄), a function of the means of the estimator's per-row terms, and ``stderr``
    the delta method's √(∇gᵀ Σ̂ ∇g / n) (:class:`Estimator`). :meth:`ci` gives a (1 − α) interval at one
    sample size — Wald's, or the empirical-likelihood one (Karampatziakis, Mineiro & Ramdas 2020) —
    and :meth:`cs` a confidence sequence valid at every sample size at once (Waudby-Smith et al. 2021).

    Parameters
    ----------
    value : float
        The estimate V̂ (NaN when undefined, e.g. SNIPS when π never takes a logged action).
    stderr : float
        Its standard error.
    n : int
        The rows it rests on.
    summary : Summary or None
        What the empirical-likelihood interval needs (:class:`~dr_scale.ope.intervals.Summary`);
        None for a difference of two values.
    chosen : dict
        The parameters a tuned estimator chose (e.g. SwitchDR's τ), by name.

    See Also
    --------
    Estimator.estimate : Makes one from a log's arrays.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = DoublyRobust().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4), est.n
    (0.7881, 0.043, 2000)
    >>> [round(float(x), 4) for x in est.ci(0.05)]  # value ± 1.96 stderr
    [0.7039, 0.8724]
    >>> [round(x, 4) for x in est.ci(0.05, method="el")]  # reaches toward weights not seen yet
    [0.5233, 0.8835]
    >>> [round(x, 4) for x in est.cs(0.05, method="normal")]  # valid on every day of a growing log
    [0.6435, 0.9327]
    """

    value: float
    stderr: float
    n: int
    summary: Summary | None = field(default=None, compare=False, repr=False)
    chosen: dict = field(default_factory=dict, compare=False)

    def ci(self, alpha: float = 0.05, method: str = "normal") -> tuple[float, float]:
        """A (1 − α) confidence interval.

        ``"normal"``: value ± z_{1−α/2} · stderr (Wald). ``"el"``: the empirical-likelihood
        interval of :func:`dr_scale.ope.intervals.el_interval`, which widens toward values a
        heavy-tailed weight distribution has not shown yet. It is Karampatziakis, Mineiro & Ramdas
        (2020)'s construction with the Euclidean (Cressie–Read λ = −2) divergence: the values v with

            min_Q {T(Q) : E_Q[w] = 1, E_Q[y] = v} − T_min ≤ F⁻¹_{1,n}(1 − α),

        Q over the n rows (weight w, per-row term y) plus one unobserved row of weight 0 or of the
        largest weight seen; T is quadratic in v, so each end is a closed form from the moments in
        ``summary``. The level is raised, if needed, to reach the estimate, so the interval contains it.

        Parameters
        ----------
        alpha : float
            The level α, in (0, 1).
        method : str
            ``"normal"`` or ``"el"``.

        Returns
        -------
        tuple of float
            (low, high); NaNs for an ``"el"`` interval from fewer than 2 rows.

        Raises
        ------
        ValueError
            ``"el"`` for an estimate without a ``summary`` (a difference of two values).

        Examples
        --------
        >>> [round(float(x), 4) for x in Estimate(0.5, 0.1, 100).ci(0.05)]
        [0.304, 0.696]
        """
        alpha = _checked("Alpha", "alpha", alpha)
        if method == "normal":
            z = ndtri(1 - alpha / 2)
            return (self.value - z * self.stderr, self.value + z * self.stderr)
        if method != "el":
            raise ValueError(f"interval method must be one of {', '.join(INTERVAL_METHODS)}, got {method!r}")
        if self.summary is None:
            raise ValueError("this estimate has no empirical-likelihood interval")
        if self.n < 2:
            return (float("nan"), float("nan"))
        return el_interval(self.summary, alpha)

    def cs(self, alpha: float = 0.05, rho: float | None = None, method: str = "el") -> tuple[float, float]:
        """A (1 − α) asymptotic confidence sequence: valid at every sample size at once.

        Computed on a growing log after every day, the sequence contains the value on *all*
        days with probability ≈ 1 − α, where a fixed-time interval checked daily misses on
        some day far more often. Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2021),
        Theorem 2.2: the normal interval's z² becomes, at sample size n,

            c_n² = 2 (n ρ² + 1) / (n ρ²) · log(√(n ρ² + 1) / α)

        (:func:`dr_scale.ope.intervals.cs_threshold`). ``"normal"``: value ± c_n · stderr, their
        sequence itself. ``"el"`` (default): the empirical-likelihood interval of :meth:`ci` with
        its threshold δ replaced by c_n² — the same boundary, plus the EL's unobserved row, which
        keeps it valid in heavy-tailed weight worlds where the normal one is not (a day's estimate
        that has not seen the largest weights yet; docs/estimators.md, "Confidence sequences").
        A difference (no EL summary) gets the normal one. ``rho`` > 0 sets the sample size where
        the sequence is tightest: the default :func:`~dr_scale.ope.intervals.cs_rho` tunes it
        for n = 10,000 rows (``CS_OPTIMAL_N``); it must not be chosen from the data monitored.

        Parameters
        ----------
        alpha : float
            The level α, in (0, 1): the chance that the sequence misses the value on any day.
        rho : float or None
            ρ > 0, the sample size where the sequence is tightest; None: tuned for n = 10,000.
        method : str
            ``"el"`` or ``"normal"``.

        Returns
        -------
        tuple of float
            (low, high); NaNs from fewer than 2 rows or an undefined standard error.

        Examples
        --------
        >>> from dr_scale.synthetic.finite_world import BanditWorld
        >>> log = BanditWorld.make(epsilon=0.3).sample(2000, seed=1)
        >>> est = DoublyRobust().estimate(**log)
        >>> lo, hi = est.cs(0.05, method="normal")
        >>> bool(lo < est.ci(0.05)[0] < est.value < est.ci(0.05)[1] < hi)
        True
        >>> lo, hi = est.cs(0.05)
        >>> bool(lo < est.ci(0.05, "el")[0] < est.value < est.ci(0.05, "el")[1] < hi)
        True
        """
        alpha = _checked("Alpha", "alpha", alpha)
        rho = cs_rho(alpha, CS_OPTIMAL_N) if rho is None else _checked("PositiveFinite", "rho", rho)
        if method not in INTERVAL_METHODS:
            raise ValueError(f"interval method must be one of {', '.join(INTERVAL_METHODS)}, got {method!r}")
        if self.n < 2 or not np.isfinite(self.stderr):
            return (float("nan"), float("nan"))
        c2 = cs_threshold(self.n, alpha, rho)
        if method == "el" and self.summary is not None:
            return tuple(map(float, el_interval(self.summary, alpha, c2)))
        half = math.sqrt(c2) * float(self.stderr)
        return (float(self.value - half), float(self.value + half))


@dataclass(frozen=True)
class Estimator:
    """Base class of the estimators: a per-row term, a function of its means, and the delta method.

    An estimator is V̂ = g(t̄), a function g (``value_of``) of the means t̄ = (1/n) Σ_i t(row_i)
    of its per-row terms (``terms``), with the delta method's standard error

        SE(V̂) = √( ∇g(t̄)ᵀ Σ̂ ∇g(t̄) / n ),    Σ̂ the terms' sample covariance,

    exact for the plain means (DM, IPS, DR). Subclasses define ``name``, ``needs_model``,
    ``terms(rows) -> list[array]`` and, for ratio estimators, ``value_of(means)`` and
    ``gradient(means)``; ``el_map`` maps the terms to (y, w) for the empirical-likelihood
    interval (one row: a plain mean), and ``model_term`` is the index of the term ρ̂_π, if any.
    The base class takes no parameters and has no terms of its own: use a subclass.

    Two ways in: :meth:`estimate` from numpy arrays in obp's layout, or ``state`` on
    batches of rows, merged with ``+``, then ``result`` (Parquet partitions, Dask).

    See Also
    --------
    DirectMethod, IPS, DoublyRobust, SNIPS, SNDR, SwitchDR, ClippedDR : The estimators.
    make_estimators : Estimators by name.
    dr_scale.ope.moments.Moments : The mergeable state.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> estimator = DoublyRobust()
    >>> isinstance(estimator, Estimator), estimator.name, estimator.needs_model
    (True, 'DR', True)

    The state of two halves of the rows, merged, gives the estimate of the whole:

    >>> halves = [{key: array[s] for key, array in log.items()} for s in (slice(0, 1000), slice(1000, None))]
    >>> states = [estimator.state(RowInputs.from_arrays(**half)) for half in halves]
    >>> merged = estimator.result(states[0] + states[1])
    >>> round(merged.value, 4) == round(estimator.estimate(**log).value, 4), merged.n
    (True, 2000)
    """

    name: ClassVar[str] = "estimator"
    needs_model: ClassVar[bool] = True
    needs_embedding: ClassVar[bool] = False  # the marginalized estimators: w(x, e) from the action catalogue
    el_map: ClassVar[tuple] = ((1.0,),)
    model_term: ClassVar[int | None] = None

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        raise NotImplementedError

    def value_of(self, means: np.ndarray) -> float:
        return float(means[0])

    def gradient(self, means: np.ndarray) -> np.ndarray:
        return np.eye(1, means.size)[0]

    def linearize(self, state: Moments) -> tuple[float, np.ndarray, dict]:
        """(value, gradient of the value in the means, chosen parameters) at a state."""
        return self.value_of(state.mean), self.gradient(state.mean), {}

    def el_ranges(self, state: Moments) -> tuple:
        """The largest weight W seen, and the ranges of y at an unobserved row of weight 0, of y at
        one of weight W, and of the value (that of r).

        The unobserved row's reward r_f is anywhere in [min r, max r]; its model prediction is
        the mean one, c̄ = mean ρ̂_π (0 without a model), so y_f = c̄ + w_f (r_f − c̄)
        (IPS: y_f = w_f r_f).
        """
        r_lo, r_hi, top = state.low[0], state.high[0], state.high[1]
        c = 0.0 if self.model_term is None else float(state.mean[self.model_term])
        return top, (c, c), (c + top * (r_lo - c), c + top * (r_hi - c)), (r_lo, r_hi)

    # -- statistics ---------------------------------------------------------
    def state(self, rows: RowInputs) -> Moments:
        """The mergeable state of a batch of rows: the moments of the estimator's per-row terms.

        Parameters
        ----------
        rows : RowInputs
            The batch's per-row quantities (:meth:`RowInputs.from_arrays`, :meth:`RowInputs.from_actions`).

        Returns
        -------
        dr_scale.ope.moments.Moments
            The state; states of disjoint batches merge with ``+``.
        """
        if self.needs_model and rows.reward_hat_pi is None:
            raise ValueError(f"{self.name} needs a reward model ρ̂ (reward_hat); none was given")
        return Moments.of(*self.terms(rows), ranges=rows.ranges)

    def result(self, state: Moments) -> Estimate:
        """Estimate, delta-method standard error, n and the EL summary from a (merged) state.

        Parameters
        ----------
        state : dr_scale.ope.moments.Moments
            A state from :meth:`state`, or the sum of several.

        Returns
        -------
        Estimate
            The estimate; NaN value and standard error for a state of no rows.
        """
        if state.n == 0:
            return Estimate(float("nan"), float("nan"), 0)
        value, grad, chosen = self.linearize(state)
        variance = float(grad @ state.covariance() @ grad) / state.n
        return Estimate(value, float(np.sqrt(max(variance, 0.0))), state.n, self.summary(state, grad, value),
                        chosen)

    def summary(self, state: Moments, grad: np.ndarray, value: float | None = None) -> Summary:
        """The (y, w) moments and ranges of :mod:`dr_scale.ope.intervals` from a state; ``value`` the estimate."""
        a = np.asarray(self.el_map, dtype=np.float64) if len(self.el_map[0]) == state.m else grad[None, :]
        return summary_of(state.n, a @ state.mean, a @ state.comoment @ a.T / state.n,
                          *self.el_ranges(state), weighted=a.shape[0] == 2, estimate=value)

    # -- numpy API ----------------------------------------------------------
    def estimate(self, *, reward, action, propensity, target_probs, reward_hat=None) -> Estimate:
        """Estimate the target policy's value from arrays (obp's argument layout).

        Parameters
        ----------
        reward : array_like of float, shape (n,)
            The logged rewards r_i; at least one row.
        action : array_like of int, shape (n,)
            The logged actions a_i, in [0, k).
        propensity : array_like of float, shape (n,)
            p̂_i, the logging policy's probability of a_i, in (0, 1].
        target_probs : array_like of float, shape (n, k)
            π(a|x_i), rows summing to 1 (one-hot rows for a deterministic π).
        reward_hat : array_like of float, shape (n, k), optional
            ρ̂_a(x_i); required by the estimators that use a reward model (``needs_model``).

        Returns
        -------
        Estimate
            The value, its standard error, n, and the interval's summary.

        Examples
        --------
        >>> est = IPS().estimate(reward=[1.0, 0.0, 1.0], action=[0, 1, 1], propensity=[0.5, 0.5, 0.25],
        ...                      target_probs=[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
        >>> round(est.value, 4), est.n  # (1/3)(1/0.5 + 0 + 0.5/0.25)
        (1.3333, 3)
        """
        check.vector("reward", reward)  # at least one row
        rows = RowInputs.from_arrays(reward, action, propensity, target_probs, reward_hat)
        return self.result(self.state(rows))

    def estimate_policy_value(self, **arrays) -> float:
        """The point estimate alone, as obp's estimators return it."""
        return self.estimate(**arrays).value


#: Candidate λ of a tuned clipping / shrinkage estimator (``IPSTuning``, ``DRTuning``, ``DRos``) when none are given.
#: obp 0.5.7's ``…Tuning`` classes have no default (``lambdas`` is required); this is the list obp's own examples
#: and benchmarks tune over (``lambdas=[10, 50, 100, 500, 1000, 5000, 10000, np.inf]``).
CLIPPING_LAMBDAS = (10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10000.0, math.inf)
#: Candidate λ of a tuned sub-Gaussian estimator when none are given: obp's estimator tests'
#: ``[0.005, 0.01, 0.05, 0.1, 0.5]`` with λ = 0 (no shrinkage: IPS, DR), as ∞ is in :data:`CLIPPING_LAMBDAS`.
SUBGAUSSIAN_LAMBDAS = (0.0, 0.005, 0.01, 0.05, 0.1, 0.5)
TUNING_METHODS = ("slope", "mse")
OBP_TUNING_DELTA = 0.1  # obp's BaseOffPolicyEstimatorTuning.delta
SLOPE_C = math.sqrt(6) - 1  # SLOPE++'s constant (Tucker & Lee 2021), as obp


def _spec_list(text) -> list:
    """``"[10, 50, inf]"`` / ``"(10.0, 50.0)"`` / a sequence → a list of its items (strings stripped)."""
    if isinstance(text, str):
        inner = text.strip()
        if inner[:1] in "[(" and inner[-1:] in "])":
            inner = inner[1:-1]
        return [item.strip() for item in inner.split(",") if item.strip()]
    if isinstance(text, (int, float)):
        return [text]
    return list(text)


def _spec_bool(name: str, value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ParameterError(f"`{name}` should be true or false (got {value!r})")


def _spec_value(value):
    """A value as :meth:`_Shrinkage.__repr__` writes it: floats as ``repr``, tuples as lists, strings bare."""
    if isinstance(value, tuple):
        return "[" + ", ".join(map(_spec_value, value)) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def with_ties(state: Moments, source: list[int]) -> Moments:
    """``state`` with the mean and co-moments of quantity j copied from quantity ``source[j]`` (terms equal on
    every row, whose statistics a matrix product may round differently): exact ties survive any merge."""
    if state.n == 0 or all(s == j for j, s in enumerate(source)):
        return state
    mean, comoment = state.mean.copy(), state.comoment.copy()
    for j, s in enumerate(source):
        if s != j:
            mean[j] = mean[s]
            comoment[j, :] = comoment[s, :]
            comoment[:, j] = comoment[:, s]
    return Moments(state.n, mean, comoment, state.low, state.high)


#: Where an estimator's docstring lists the parameters of a tuned λ (``_Shrinkage.__init_subclass__`` writes them).
TUNING_PARAMETERS = "    (the parameters of a tuned λ)\n"
_TUNING_PARAMETERS_DOC = """\
    lambdas : sequence of float or None, default None
        The candidates of a λ chosen from the data (None: :data:`{lambdas}`), in any order.
    tuning_method : {{"slope", "mse"}}, default "slope"
        How a λ is chosen: SLOPE, or the estimated MSE (``_Shrinkage``), as obp's ``…Tuning`` classes.
    use_bias_upper_bound : bool, default True
        With ``"mse"``: add Bernstein's high-probability bound to the estimated bias, as obp does.
    delta : float, default 0.1
        The confidence δ of SLOPE's intervals and of the bias bound (obp's default).
"""


@dataclass(frozen=True, repr=False)
class _Shrinkage(Estimator):
    """IPS or DR with the importance weight w replaced by a modified weight ŵ_λ(w); λ fixed or chosen from the data.

        IPS family:  V̂_λ = (1/n) Σ_i ŵ_λ(w_i) r_i
        DR family:   V̂_λ = (1/n) Σ_i [ ρ̂_π(x_i) + ŵ_λ(w_i) (r_i − ρ̂_{a_i}(x_i)) ]

    ``shrink`` is ŵ_λ: clipping min(w, λ) (obp's ``InverseProbabilityWeighting(lambda_)``,
    ``DoublyRobust(lambda_)``), optimistic shrinkage λw / (w² + λ) (``DRos``), the sub-Gaussian
    power mean w / (1 − λ + λw) (``SubGaussianIPS``, ``SubGaussianDR``). A fixed λ is a plain mean
    of one per-row term (standard error s / √n; the empirical-likelihood interval of a plain mean).

    ``lambda_=None`` chooses λ among ``lambdas`` as obp 0.5.7's ``…Tuning`` classes do, in the same
    pass: the state holds the moments of every candidate's term t_j, of the unmodified term u (ŵ = w)
    and of w, and at the end (n rows, Var the 1/n variance, as ``np.var``)

    - ``tuning_method="mse"`` (Su, Dimakopoulou, Krishnamurthy & Dudík 2020, Sec. 5): the λ_j
      minimising Var(t_j)/n + B_j², B_j = |mean(u − t_j)| (= |mean((w − ŵ_j)(r − ρ̂_a))|), plus,
      with ``use_bias_upper_bound``, Bernstein's √(2 mean(w²) log(2/δ)/n) + 2 max(w) log(2/δ)/(3n);
      the first minimum in obp's order of the candidates;
    - ``tuning_method="slope"`` (SLOPE, Su, Srinath & Krishnamurthy 2020, in obp's SLOPE++ form of
      Tucker & Lee 2021): with c_j = √(Var(t_j)/(n − 1)) t_{n−1}(1 − δ), the candidates in decreasing
      c_j are accepted while |V̂_i − V̂_j| ≤ c_j + (√6 − 1) c_i for every accepted i; the last
      accepted one is chosen.

    obp sorts the candidates (decreasing for clipping, increasing for shrinkage and sub-Gaussian), and
    ties go to the first in that order, as here. The estimate and its standard error are those of the
    chosen λ (the choice itself is not accounted for); ``Estimate.chosen`` is ``{"lambda_": λ}``.
    A row of weight 0 has ŵ = 0 where obp's formula is 0/0 (DRos at λ = 0, sub-Gaussian at λ = 1).
    """

    lambda_: float | None = None
    lambdas: tuple | None = None  # the candidates of a tuned λ (None: the class's ``default_lambdas``)
    tuning_method: str = "slope"
    use_bias_upper_bound: bool = True
    delta: float = OBP_TUNING_DELTA

    lambda_rule: ClassVar[str] = "NonNegativeOrInf"
    default_lambdas: ClassVar[tuple] = CLIPPING_LAMBDAS
    descending: ClassVar[bool] = False  # obp's order of the candidates
    example: ClassVar[str] = ""
    #: At λ = ∞ the estimator itself (IPS, DR), whose state holds its empirical-likelihood terms (``el_map``);
    #: otherwise (and for the other weights ŵ_λ) a plain mean of one term.
    plain_at_inf: ClassVar[bool] = False
    #: A ``…Tuning`` class always chooses λ: the spec of a fixed one, for its error (``"IPS(lambda_={})"``).
    fixed_form: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        """Write the tuning parameters into the subclass's numpydoc Parameters where its docstring says
        :data:`TUNING_PARAMETERS` (one text for every estimator that tunes λ)."""
        super().__init_subclass__(**kwargs)
        if cls.__doc__ and TUNING_PARAMETERS in cls.__doc__:
            lambdas = "SUBGAUSSIAN_LAMBDAS" if cls.default_lambdas is SUBGAUSSIAN_LAMBDAS else "CLIPPING_LAMBDAS"
            cls.__doc__ = cls.__doc__.replace(TUNING_PARAMETERS, _TUNING_PARAMETERS_DOC.format(lambdas=lambdas))

    def __post_init__(self):
        tuning = {f.name: getattr(self, f.name) for f in fields(self) if f.name in _TUNING_FIELDS}
        if self.fixed_form and self.lambda_ is not None:
            raise ParameterError(f"{self.name} chooses `lambda_`; for a fixed one write "
                                 f"{self.fixed_form.format(self.lambda_)}")
        if self.lambda_ is not None:
            # IPS(), DR() (float ∞ where the rule allows it): no pydantic import
            if not (self.lambda_ == math.inf and isinstance(self.lambda_, float)
                    and self.lambda_rule == "NonNegativeOrInf"):
                object.__setattr__(self, "lambda_", _checked(self.lambda_rule, "lambda_", self.lambda_))
            given = [name for name, value in tuning.items() if value != _TUNING_DEFAULTS[name]]
            if given:
                raise ParameterError(f"{', '.join(f'`{g}`' for g in given)} tunes `lambda_`: leave `lambda_` out "
                                     "(or None) to choose it from the data, or give a fixed `lambda_` alone")
        if self.lambdas is not None:
            items = _spec_list(self.lambdas)
            if not items:
                raise ParameterError("`lambdas` should hold at least one candidate λ")
            values = sorted({_checked(self.lambda_rule, "lambdas", v) for v in items}, reverse=self.descending)
            object.__setattr__(self, "lambdas", tuple(values))
        method = str(self.tuning_method).strip().strip("'\"")
        if method not in TUNING_METHODS:
            raise ParameterError(f"`tuning_method` should be {' or '.join(TUNING_METHODS)} "
                                 f"(got {self.tuning_method!r})")
        object.__setattr__(self, "tuning_method", method)
        object.__setattr__(self, "use_bias_upper_bound", _spec_bool("use_bias_upper_bound", self.use_bias_upper_bound))
        if self.delta != OBP_TUNING_DELTA or not isinstance(self.delta, float):
            object.__setattr__(self, "delta", _checked("Alpha", "delta", self.delta))

    def _args(self) -> str:
        return ", ".join(f"{f.name}={_spec_value(getattr(self, f.name))}" for f in fields(self)
                         if getattr(self, f.name) != f.default)

    def __repr__(self):
        """The class name and the parameters that differ from their defaults."""
        return f"{type(self).__name__}({self._args()})"

    @property
    def label(self) -> str:
        """The spec of this estimator, which :func:`parse_estimator` reads back: ``DR(lambda_=50.0)``."""
        args = self._args()
        return f"{self.name}({args})" if args else self.name

    @property
    def candidates(self) -> tuple[float, ...]:
        """The candidate λ in obp's order (decreasing for clipping, increasing otherwise)."""
        if self.lambdas is not None:
            return self.lambdas
        return tuple(sorted(self.default_lambdas, reverse=self.descending))

    def shrink(self, w: np.ndarray, lam: float) -> np.ndarray:
        """ŵ_λ(w)."""
        raise NotImplementedError

    def term(self, rows: RowInputs, w_hat: np.ndarray) -> np.ndarray:
        """The per-row term with the weights ``w_hat``: ŵ r, or ρ̂_π + ŵ (r − ρ̂_a) with a model."""
        if not self.needs_model:
            return w_hat * rows.reward
        return rows.reward_hat_pi + w_hat * (rows.reward - rows.reward_hat_logged)

    def terms(self, rows):
        if self.lambda_ == math.inf and self.plain_at_inf:
            return [self.term(rows, rows.weight), rows.weight, *([rows.reward_hat_pi] if self.needs_model else [])]
        if self.lambda_ is not None:
            return [self.term(rows, self.shrink(rows.weight, self.lambda_))]
        return [*(self.term(rows, self.shrink(rows.weight, lam)) for lam in self.candidates),
                self.term(rows, rows.weight), rows.weight]

    def state(self, rows: RowInputs) -> Moments:
        """A tuned λ's state: the moments of (t_1, …, t_G, u, w); a candidate equal to u or to the previous one
        on every row of the batch gets their statistics bit for bit, so that ties stay exact ties (as obp's)."""
        if self.lambda_ is not None:
            return super().state(rows)
        if self.needs_model and rows.reward_hat_pi is None:
            raise ValueError(f"{self.name} needs a reward model ρ̂ (reward_hat); none was given")
        z = self.terms(rows)
        return with_ties(Moments.of(*z, ranges=rows.ranges), self.tie_sources(z))

    def tie_sources(self, z: list[np.ndarray]) -> list[int]:
        """For each term of a tuned λ's state, the first term equal to it on every row (u first, then the
        previous candidate): the terms whose statistics :func:`with_ties` makes equal bit for bit."""
        size = len(z) - 2
        source = list(range(len(z)))
        for j in range(size if self.lambda_ is None else 0):
            if np.array_equal(z[j], z[size]):
                source[j] = size
            elif j and np.array_equal(z[j], z[j - 1]):
                source[j] = source[j - 1]
        return source

    def choose(self, state: Moments) -> int:
        """The index of the chosen candidate in :attr:`candidates`, by ``tuning_method`` (obp's rules; class doc)."""
        size, n = len(self.candidates), state.n
        mean = state.mean[:size]
        var = np.diag(state.comoment)[:size] / n  # np.var: the 1/n variance
        if n < 2:
            return 0
        if self.tuning_method == "mse":
            bias = np.abs(state.mean[size] - mean)
            if self.use_bias_upper_bound:
                log_term = math.log(2 / self.delta)
                mean_w2 = state.comoment[size + 1, size + 1] / n + state.mean[size + 1] ** 2
                bias = bias + math.sqrt(2 * mean_w2 * log_term / n) + 2 * float(state.high[1]) * log_term / (3 * n)
            return int(np.argmin(var / n + bias ** 2))  # the first minimum, as obp's min over its dict
        cnf = mean - (mean - np.sqrt(var / (n - 1)) * stdtrit(n - 1, 1.0 - self.delta))  # obp's mean − lower bound
        order = np.argsort(cnf)[::-1]
        kept = [order[0]]
        for i in order[1:]:
            if not np.all(np.abs(mean[kept] - mean[i]) <= cnf[i] + SLOPE_C * cnf[kept]):
                return int(kept[-1])
            kept.append(i)
        return int(order[-1])

    def linearize(self, state):
        if self.lambda_ is not None:
            return super().linearize(state)
        best = self.choose(state)
        return float(state.mean[best]), np.eye(state.m)[best], {"lambda_": self.candidates[best]}

    def el_ranges(self, state):
        """IPS's and DR's at λ = ∞; otherwise the interval is a plain mean's, which uses the rewards' range alone."""
        if self.lambda_ is not None and len(self.el_map[0]) == state.m:
            return super().el_ranges(state)
        return state.high[1], (0.0, 0.0), (0.0, 0.0), (state.low[0], state.high[0])

    def summary(self, state, grad, value=None):
        """A tuned λ's: the empirical-likelihood summary of a plain mean of the chosen term (``grad`` picks it)."""
        if self.lambda_ is not None:
            return super().summary(state, grad, value)
        var = float(grad @ state.comoment @ grad) / state.n
        return summary_of(state.n, np.array([grad @ state.mean]), np.array([[var]]), *self.el_ranges(state),
                          weighted=False, estimate=value)


_TUNING_FIELDS = ("lambdas", "tuning_method", "use_bias_upper_bound", "delta")
_TUNING_DEFAULTS = {"lambdas": None, "tuning_method": "slope", "use_bias_upper_bound": True,
                    "delta": OBP_TUNING_DELTA}


@dataclass(frozen=True)
class DirectMethod(Estimator):
    """Direct method (Dudík, Langford & Li 2011, Sec. 2.1): the reward model's value of π.

        V̂_DM = (1/n) Σ_i Σ_a π(a|x_i) ρ̂_a(x_i)

    (the paper's V̂_DM = (1/|S|) Σ_x ρ̂_{π(x)}(x) for a deterministic π). Unbiased when ρ̂ is;
    the logged rewards are not used. Its empirical-likelihood interval is that of a plain mean.
    Takes no parameters.

    See Also
    --------
    IPS : The estimator without a reward model.
    DoublyRobust : The reward model corrected by the importance-weighted residuals.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = DirectMethod().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4), est.n
    (0.6578, 0.0026, 2000)
    """

    name: ClassVar[str] = "DM"

    def terms(self, rows):
        return [rows.reward_hat_pi]


@dataclass(frozen=True, repr=False)
class IPS(_Shrinkage):
    """Inverse propensity scoring (Dudík, Langford & Li 2011, Sec. 2.1), with obp's weight clipping λ.

        V̂_IPS = (1/n) Σ_i min(w_i, λ) r_i,    w_i = π(a_i|x_i) / p̂_i

    (the paper's r_a 1(π(x) = a) / p̂(a|x, h) for a deterministic π, at λ = ∞, the default). No reward
    model. At λ = ∞ the state holds the moments of (w r, w): the empirical-likelihood interval uses the
    constraint E[w] = 1 (:mod:`dr_scale.ope.intervals`). A finite λ clips the weights as obp 0.5.7's
    ``InverseProbabilityWeighting(lambda_)`` does (Strehl et al. 2010; Su et al. 2020): a plain mean.
    ``lambda_=None`` (or :class:`IPSTuning`) chooses λ from the data (``_Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default inf
        The clip λ ≥ 0 (``inf``: no clipping), or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    See Also
    --------
    SNIPS : The self-normalized form.
    DoublyRobust : IPS of the reward model's residuals, plus the direct method.
    SubGaussianIPS : The weights shrunk smoothly rather than clipped.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = IPS().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4)
    (0.7083, 0.1768)
    >>> [round(float(x), 4) for x in est.ci(0.05)]
    [0.3619, 1.0548]
    >>> [round(x, 4) for x in est.ci(0.05, method="el")]
    [0.5342, 0.9353]
    >>> IPS(lambda_=50)
    IPS(lambda_=50.0)
    >>> round(IPS(lambda_=50).estimate(**log).value, 4)
    0.5083
    """

    lambda_: float | None = math.inf
    name: ClassVar[str] = "IPS"
    needs_model: ClassVar[bool] = False
    el_map: ClassVar[tuple] = ((1.0, 0.0), (0.0, 1.0))
    descending: ClassVar[bool] = True
    example: ClassVar[str] = "IPS(lambda_=50) or IPSTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    plain_at_inf: ClassVar[bool] = True

    def shrink(self, w, lam):
        return np.minimum(w, lam)


@dataclass(frozen=True, repr=False)
class IPSTuning(IPS):
    """:class:`IPS` with its clip λ chosen from the data, as obp's ``InverseProbabilityWeightingTuning``.

    ``IPS(lambda_=None)`` under obp's name: the candidates ``lambdas`` (default :data:`CLIPPING_LAMBDAS`),
    ``tuning_method`` ``"slope"`` (default) or ``"mse"``, ``use_bias_upper_bound``, ``delta`` (0.1), as
    ``_Shrinkage`` describes.

    Parameters
    ----------
    lambda_ : None
        Always None: the clip is chosen (a fixed one is ``IPS(lambda_=…)``).
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)
    >>> IPSTuning().estimate(**log).chosen  # SLOPE
    {'lambda_': 10.0}
    >>> IPSTuning(tuning_method="mse").estimate(**log).chosen  # the bias bound keeps IPS itself
    {'lambda_': inf}
    """

    lambda_: float | None = None
    name: ClassVar[str] = "IPSTuning"
    example: ClassVar[str] = "IPSTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    fixed_form: ClassVar[str] = "IPS(lambda_={})"


@dataclass(frozen=True)
class SNIPS(Estimator):
    """Self-normalized IPS, with the delta method's standard error on the ratio of means.

        V̂_SNIPS = Σ_i w_i r_i / Σ_i w_i,    w_i = π(a_i|x_i) / p̂_i

    (Swaminathan & Joachims 2015; not in Dudík, Langford & Li 2011). Under the empirical-likelihood
    constraint E_Q[w] = 1 the ratio is E_Q[w r], so its EL interval is IPS's. Takes no parameters
    (obp's ``SelfNormalizedInverseProbabilityWeighting`` accepts a ``lambda_`` and ignores it).

    See Also
    --------
    IPS : The unnormalized mean.
    SNDR : The self-normalized doubly robust estimator.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = SNIPS().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4)
    (0.8479, 0.0333)
    >>> est.ci(0.05, method="el") == IPS().estimate(**log).ci(0.05, method="el")
    True
    """

    name: ClassVar[str] = "SNIPS"
    needs_model: ClassVar[bool] = False
    el_map: ClassVar[tuple] = ((1.0, 0.0), (0.0, 1.0))

    def terms(self, rows):
        return [rows.weight * rows.reward, rows.weight]

    def value_of(self, means):
        return float(means[0] / means[1]) if means[1] != 0 else float("nan")

    def gradient(self, means):
        if means[1] == 0:  # no row with weight: the ratio, and its gradient, are undefined
            return np.full(2, np.nan)
        return np.array([1.0 / means[1], -means[0] / means[1] ** 2])


@dataclass(frozen=True, repr=False)
class DoublyRobust(_Shrinkage):
    """Doubly robust estimator (Dudík, Langford & Li 2011, Sec. 2.2, eq. 1, for stochastic π).

        V̂_DR = (1/n) Σ_i [ ρ̂_π(x_i) + w_i (r_i − ρ̂_{a_i}(x_i)) ],
        ρ̂_π(x) = Σ_a π(a|x) ρ̂_a(x),    w_i = π(a_i|x_i) / p̂_i

    For a deterministic π this is eq. 1, (1/|S|) Σ [ (r_a − ρ̂_a(x)) 1(π(x) = a) / p̂(a|x, h) + ρ̂_{π(x)}(x) ]:
    its bias is |E_x[Δ δ]|, the product of ρ̂'s and p̂'s errors, so it is unbiased when either is exact
    (Theorem 1). The state holds the moments of (the bracket, w, ρ̂_π); the empirical-likelihood
    interval treats the bracket as IPS treats w r (docs/estimators.md).

    A finite ``lambda_`` clips the weights, min(w_i, λ), as obp 0.5.7's ``DoublyRobust(lambda_)``
    (DR with pessimistic shrinkage, Su et al. 2020; the same estimator as ``ClippedDR(max_weight=λ)``):
    a plain mean. ``lambda_=None`` (or :class:`DRTuning`) chooses λ from the data (``_Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default inf
        The clip λ ≥ 0 (``inf``: DR), or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    See Also
    --------
    DirectMethod, IPS : The two estimators DR combines.
    SNDR, SwitchDR, ClippedDR, DRos, SubGaussianDR : Variants that trade bias for variance.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = DoublyRobust().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4)
    (0.7881, 0.043)
    >>> [round(x, 4) for x in est.ci(0.05, method="el")]
    [0.5233, 0.8835]
    """

    lambda_: float | None = math.inf
    name: ClassVar[str] = "DR"
    el_map: ClassVar[tuple] = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
    model_term: ClassVar[int | None] = 2
    descending: ClassVar[bool] = True
    example: ClassVar[str] = "DR(lambda_=50) or DRTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    plain_at_inf: ClassVar[bool] = True

    def shrink(self, w, lam):
        return np.minimum(w, lam)


@dataclass(frozen=True, repr=False)
class DRTuning(DoublyRobust):
    """:class:`DoublyRobust` with its clip λ chosen from the data, as obp's ``DoublyRobustTuning``.

    ``DR(lambda_=None)`` under obp's name (candidates default :data:`CLIPPING_LAMBDAS`; ``_Shrinkage``).

    Parameters
    ----------
    lambda_ : None
        Always None: the clip is chosen (a fixed one is ``DR(lambda_=…)``).
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)
    >>> DRTuning(lambdas=[5, 20, float("inf")], tuning_method="mse")
    DRTuning(lambdas=[inf, 20.0, 5.0], tuning_method=mse)
    """

    lambda_: float | None = None
    name: ClassVar[str] = "DRTuning"
    example: ClassVar[str] = "DRTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    fixed_form: ClassVar[str] = "DR(lambda_={})"


@dataclass(frozen=True)
class SNDR(Estimator):
    """Self-normalized DR, with the delta method's standard error on the three means.

        V̂_SNDR = (1/n) Σ_i ρ̂_π(x_i) + Σ_i w_i (r_i − ρ̂_{a_i}(x_i)) / Σ_i w_i

    DR (Dudík, Langford & Li 2011, eq. 1) with the correction's weights normalized to sum to 1, as
    obp's ``SelfNormalizedDoublyRobust``. Its empirical-likelihood interval is DR's (under E_Q[w] = 1
    the two agree). Takes no parameters (obp's ``SelfNormalizedDoublyRobust`` accepts a ``lambda_`` and
    ignores it).

    See Also
    --------
    DoublyRobust : The unnormalized form.
    SNIPS : The self-normalized estimator without a reward model.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(SNDR().estimate(**log).value, 4)
    0.8138
    """

    name: ClassVar[str] = "SNDR"
    el_map: ClassVar[tuple] = ((1.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    model_term: ClassVar[int | None] = 0

    def terms(self, rows):
        return [rows.reward_hat_pi, rows.weight * (rows.reward - rows.reward_hat_logged), rows.weight]

    def value_of(self, means):
        return float(means[0] + means[1] / means[2]) if means[2] != 0 else float("nan")

    def gradient(self, means):
        if means[2] == 0:  # no row with weight: the ratio, and its gradient, are undefined
            return np.full(3, np.nan)
        return np.array([1.0, 1.0 / means[2], -means[1] / means[2] ** 2])


@dataclass(frozen=True)
class _Thresholded(Estimator):
    """DR with a threshold on the weights: fixed, or chosen from :data:`TUNING_GRID` by estimated MSE.

    With the threshold not given, the state holds the terms at every grid value and
    DR's (one pass, mergeable); at the end the threshold minimising

        MSE(t) = (|D_t| + z_{1−δ/2} SE(D_t))² + SE(V̂_t)²,    D_t = V̂_t − V̂_DR,  δ = 0.05,

    is chosen: obp's MSE-based tuning with its high-confidence bound on the bias (DR
    the unbiased reference), here with the normal bound of the paired difference D_t,
    whose standard error the joint state gives. DR itself (t = ∞) has D = 0, so a
    threshold is chosen only where its variance saving outweighs the bias it may add.
    The standard error is that of the chosen V̂_t, not accounting for the choice.
    """

    parameter: ClassVar[str] = ""
    clips: ClassVar[bool] = False  # a row above the threshold t keeps t (r − ρ̂_a) (clipping) or nothing (switch)

    def corrected(self, rows: RowInputs, threshold: float) -> np.ndarray:
        raise NotImplementedError

    @property
    def thresholds(self) -> tuple[float, ...]:
        value = getattr(self, self.parameter)
        return (value,) if value is not None else (*TUNING_GRID, float("inf"))

    def terms(self, rows):
        return [rows.reward_hat_pi + self.corrected(rows, t) for t in self.thresholds]

    def state(self, rows: RowInputs) -> Moments:
        """With the threshold tuned, the state of the grid's terms from sums per weight bin (no (G, n) stack)."""
        if getattr(self, self.parameter) is not None:
            return super().state(rows)
        if rows.reward_hat_pi is None:
            raise ValueError(f"{self.name} needs a reward model ρ̂ (reward_hat); none was given")
        grid = np.array(self.thresholds)
        return grid_moments(rows, grid, grid if self.clips else np.zeros(grid.size))

    def linearize(self, state):
        if getattr(self, self.parameter) is not None:
            return super().linearize(state)
        cov = state.covariance() / state.n  # covariance of the means
        dr = state.m - 1
        bias = state.mean - state.mean[dr]
        bias_se = np.sqrt(np.maximum(np.diag(cov) + cov[dr, dr] - 2 * cov[:, dr], 0.0))
        mse = (np.abs(bias) + ndtri(1 - TUNING_DELTA / 2) * bias_se) ** 2 + np.diag(cov)
        best = state.m - 1 - int(np.argmin(mse[::-1]))  # ties: the largest threshold (∞: DR itself)
        return float(state.mean[best]), np.eye(state.m)[best], {self.parameter: self.thresholds[best]}


def grid_moments(rows: RowInputs, grid: np.ndarray, above: np.ndarray) -> Moments:
    """:class:`Moments` of t_j = ρ̂_π + a_j, j over the increasing thresholds ``grid`` (last ∞), in O(n + G²).

    With d = r − ρ̂_a, a row whose weight w lies in bin b (the first threshold ≥ w) has
    a_j = w d for b ≤ j and a_j = above_j · d for b > j (``above`` = grid: clipping at
    the threshold; 0: switching the correction off). So every Σ a_j, Σ c a_j and Σ a_j a_k
    (c = ρ̂_π − its mean) is a cumulative sum over the bins of seven per-bin sums:

        Σ a_j a_k (j ≤ k) = Σ_{b≤j} (wd)² + above_j Σ_{j<b≤k} w d² + above_j above_k Σ_{b>k} d².

    Equal to ``Moments.of`` of the G terms up to rounding; G = 11 terms cost ~7 bin
    sums instead of an (11, n) stack and product.
    """
    c, w = rows.reward_hat_pi, rows.weight
    n, size = c.size, grid.size
    if n == 0:
        return Moments.empty(size, 2)
    c_mean = c.mean()
    cc = c - c_mean
    sum_cc, sum_c = float(cc @ cc), float(cc.sum())
    positive = np.flatnonzero(w > 0)  # a row of weight 0 has a_j = 0 for every j (bin 0 is above no threshold)
    if positive.size < n:
        cc, w = cc[positive], w[positive]
        d = rows.reward[positive] - rows.reward_hat_logged[positive]
    else:
        d = rows.reward - rows.reward_hat_logged
    wd = w * d
    bins = np.searchsorted(grid, w, side="left")

    def per_bin(x):
        return np.bincount(bins, weights=x, minlength=size)

    def scaled(factor, x):  # factor · x with ∞ · 0 = 0 (nothing lies above the last threshold, ∞)
        return np.where(x == 0, 0.0, factor * np.where(x == 0, 1.0, x))

    head = {k: np.cumsum(per_bin(x)) for k, x in
            (("wd", wd), ("d", d), ("wd2", wd * wd), ("wdd", wd * d), ("dd", d * d), ("cwd", cc * wd), ("cd", cc * d))}
    tail = {k: head[k][-1] - head[k] for k in ("d", "dd", "cd")}  # Σ over the bins above j
    sum_a = head["wd"] + scaled(above, tail["d"])
    sum_ca = head["cwd"] + scaled(above, tail["cd"])
    lo, hi = np.minimum.outer(np.arange(size), np.arange(size)), np.maximum.outer(np.arange(size), np.arange(size))
    sum_aa = (head["wd2"][lo] + scaled(above[lo], head["wdd"][hi] - head["wdd"][lo])
              + scaled(above[lo] * above[hi], tail["dd"][hi]))
    mean_a = sum_a / n
    comoment = (sum_cc + sum_ca[:, None] + sum_ca[None, :] - sum_c * (mean_a[:, None] + mean_a[None, :])
                + sum_aa - n * np.outer(mean_a, mean_a))
    return Moments(n, c_mean + mean_a, comoment, *rows.ranges)


@dataclass(frozen=True)
class SwitchDR(_Thresholded):
    """Switch-DR (Wang, Agarwal & Dudík 2017), in obp's form for logged propensities.

        V̂ = (1/n) Σ_i [ ρ̂_π(x_i) + w_i 1{w_i ≤ τ} (r_i − ρ̂_{a_i}(x_i)) ]

    The correction is switched off for rows whose weight exceeds τ: τ = ∞ is DR, τ = 0
    is DM. ``tau=None`` (the default) chooses τ from :data:`TUNING_GRID` ∪ {∞} by
    estimated MSE (see ``_Thresholded``); ``Estimate.chosen`` says which.

    Parameters
    ----------
    tau : float or None, default None
        The switching threshold τ ≥ 0 (``inf`` allowed: DR), or None to tune it.

    See Also
    --------
    ClippedDR : The weights clipped at a threshold rather than the correction switched off.
    DoublyRobust : τ = ∞.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(SwitchDR(tau=20).estimate(**log).value, 4)
    0.729
    >>> SwitchDR().estimate(**log).chosen
    {'tau': inf}
    """

    tau: float | None = None
    name: ClassVar[str] = "SwitchDR"
    parameter: ClassVar[str] = "tau"

    def __post_init__(self):
        if self.tau is not None:
            object.__setattr__(self, "tau", _checked("NonNegativeOrInf", "tau", self.tau))

    def corrected(self, rows, threshold):
        return np.where(rows.weight <= threshold, rows.weight * (rows.reward - rows.reward_hat_logged), 0.0)


@dataclass(frozen=True)
class ClippedDR(_Thresholded):
    """DR (Dudík, Langford & Li 2011, eq. 1) with importance weights clipped at M.

        V̂ = (1/n) Σ_i [ ρ̂_π(x_i) + min(w_i, M) (r_i − ρ̂_{a_i}(x_i)) ]

    M = ∞ is DR. ``max_weight=None`` (the default) chooses M from :data:`TUNING_GRID` ∪ {∞}
    by estimated MSE; ``Estimate.chosen`` says which.

    Parameters
    ----------
    max_weight : float or None, default None
        The clip M > 0 (``inf`` allowed: DR), or None to tune it.

    See Also
    --------
    SwitchDR : The correction switched off above a threshold rather than the weights clipped.
    DoublyRobust : M = ∞.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> ClippedDR(max_weight=5)
    ClippedDR(max_weight=5.0)
    >>> round(ClippedDR(max_weight=5).estimate(**log).value, 4)
    0.7302
    """

    max_weight: float | None = None
    name: ClassVar[str] = "ClippedDR"
    parameter: ClassVar[str] = "max_weight"
    clips: ClassVar[bool] = True

    def __post_init__(self):
        if self.max_weight is not None:
            object.__setattr__(self, "max_weight", _checked("PositiveOrInf", "max_weight", self.max_weight))

    def corrected(self, rows, threshold):
        return np.minimum(rows.weight, threshold) * (rows.reward - rows.reward_hat_logged)


@dataclass(frozen=True, repr=False)
class SwitchDRTuning(DoublyRobust):
    """Switch-DR with its threshold λ chosen as obp's ``SwitchDoublyRobustTuning`` chooses it.

        V̂_λ = (1/n) Σ_i [ ρ̂_π(x_i) + 1{w_i ≤ λ} w_i (r_i − ρ̂_{a_i}(x_i)) ]

    (:class:`SwitchDR` at τ = λ, Wang, Agarwal & Dudík 2017), λ chosen among ``lambdas`` by obp's
    ``"slope"`` or ``"mse"`` rule (``_Shrinkage``) — where a bare ``SwitchDR()`` uses dr-scale's own
    rule (the paired difference's normal bound on the bias).

    Parameters
    ----------
    lambda_ : None
        Always None: the threshold is chosen (a fixed one is ``SwitchDR(tau=…)``).
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)
    >>> SwitchDRTuning(tuning_method="mse").estimate(**log).chosen
    {'lambda_': inf}
    """

    lambda_: float | None = None
    name: ClassVar[str] = "SwitchDRTuning"
    example: ClassVar[str] = "SwitchDRTuning(lambdas=[10, 100, inf], tuning_method=mse)"
    fixed_form: ClassVar[str] = "SwitchDR(tau={})"

    def shrink(self, w, lam):
        return np.where(w <= lam, w, 0.0)


@dataclass(frozen=True, repr=False)
class DRos(DoublyRobust):
    """DR with optimistic shrinkage (Su, Dimakopoulou, Krishnamurthy & Dudík, ICML 2020), as obp's
    ``DoublyRobustWithShrinkage``.

        V̂ = (1/n) Σ_i [ ρ̂_π(x_i) + ŵ_i (r_i − ρ̂_{a_i}(x_i)) ],    ŵ_i = λ w_i / (w_i² + λ)

    the weight that minimises a sharp bound on the MSE for the shrinkage λ: λ = ∞ is DR, λ = 0 is DM.
    ``DRos()`` (λ = None, the default) chooses λ from :data:`CLIPPING_LAMBDAS` with obp's
    ``DoublyRobustWithShrinkageTuning`` rule (``"slope"`` by default; ``_Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default None
        The shrinkage λ ≥ 0 (``inf``: DR), or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    See Also
    --------
    DoublyRobust, SubGaussianDR : DR, and its sub-Gaussian shrinkage.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(DRos(lambda_=10).estimate(**log).value, 4)
    0.7223
    >>> DRos().estimate(**log).chosen
    {'lambda_': 10.0}
    """

    lambda_: float | None = None
    name: ClassVar[str] = "DRos"
    descending: ClassVar[bool] = False
    plain_at_inf: ClassVar[bool] = False  # DRos(lambda_=inf) is DR's value as a plain mean
    example: ClassVar[str] = "DRos(lambda_=10) or DRos(lambdas=[10, 100, inf], tuning_method=mse)"

    def shrink(self, w, lam):
        if lam == math.inf:
            return w
        denominator = w ** 2 + lam
        return np.divide(lam * w, denominator, out=np.zeros_like(w), where=denominator != 0)


class _SubGaussian:
    """The sub-Gaussian weight of :class:`SubGaussianIPS` and :class:`SubGaussianDR` (Metelli, Russo & Restelli
    2021): ŵ_λ(w) = w / (1 − λ + λ w), λ in [0, 1] (0 where the denominator is 0), its candidates
    :data:`SUBGAUSSIAN_LAMBDAS` in increasing order, always a plain mean (λ = 0 is IPS's or DR's value)."""

    lambda_rule: ClassVar[str] = "Share"
    default_lambdas: ClassVar[tuple] = SUBGAUSSIAN_LAMBDAS
    descending: ClassVar[bool] = False
    plain_at_inf: ClassVar[bool] = False

    def shrink(self, w, lam):
        denominator = 1 - lam + lam * w
        return np.divide(w, denominator, out=np.zeros_like(w), where=denominator != 0)


@dataclass(frozen=True, repr=False)
class SubGaussianIPS(_SubGaussian, IPS):
    """Sub-Gaussian IPS (Metelli, Russo & Restelli, NeurIPS 2021), as obp's
    ``SubGaussianInverseProbabilityWeighting``.

        V̂ = (1/n) Σ_i ŵ_i r_i,    ŵ_i = w_i / (1 − λ + λ w_i),    λ ∈ [0, 1]

    the power-mean correction of the weights, which makes the estimator's tail sub-Gaussian: λ = 0
    is IPS, λ = 1 weighs every row with w > 0 by 1. ``SubGaussianIPS()`` (λ = None, the default)
    chooses λ from :data:`SUBGAUSSIAN_LAMBDAS` with obp's ``SubGaussianInverseProbabilityWeightingTuning``
    rule (``_Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default None
        λ in [0, 1], or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(SubGaussianIPS(lambda_=0.1).estimate(**log).value, 4)
    0.4672
    """

    lambda_: float | None = None
    name: ClassVar[str] = "SubGaussianIPS"
    example: ClassVar[str] = ("SubGaussianIPS(lambda_=0.1) or SubGaussianIPS(lambdas=[0, 0.01, 0.1], "
                                "tuning_method=mse)")


@dataclass(frozen=True, repr=False)
class SubGaussianDR(_SubGaussian, DoublyRobust):
    """Sub-Gaussian DR (Metelli, Russo & Restelli, NeurIPS 2021), as obp's ``SubGaussianDoublyRobust``.

        V̂ = (1/n) Σ_i [ ρ̂_π(x_i) + ŵ_i (r_i − ρ̂_{a_i}(x_i)) ],    ŵ_i = w_i / (1 − λ + λ w_i),    λ ∈ [0, 1]

    λ = 0 is DR. ``SubGaussianDR()`` (λ = None, the default) chooses λ from :data:`SUBGAUSSIAN_LAMBDAS`
    with obp's ``SubGaussianDoublyRobustTuning`` rule (``_Shrinkage``).

    Parameters
    ----------
    lambda_ : float or None, default None
        λ in [0, 1], or None to choose it among ``lambdas``.
    (the parameters of a tuned λ)

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> round(SubGaussianDR(lambda_=0.1).estimate(**log).value, 4)
    0.7312
    """

    lambda_: float | None = None
    name: ClassVar[str] = "SubGaussianDR"
    example: ClassVar[str] = "SubGaussianDR(lambda_=0.1) or SubGaussianDR(lambdas=[0, 0.01, 0.1], tuning_method=mse)"


@dataclass(frozen=True)
class OnPolicy(Estimator):
    """The logging policy's value from its own rewards, on-policy: (1/n) Σ_i r_i.

    The baseline ``logging`` of a paired comparison.
    """

    name: ClassVar[str] = "logging"
    needs_model: ClassVar[bool] = False

    def terms(self, rows):
        return [rows.reward]


@dataclass(frozen=True)
class Difference:
    """V̂(A) − V̂(B) from paired per-row terms of two policies on the same rows.

    The state is one :class:`~dr_scale.ope.moments.Moments` of A's terms and B's stacked,
    so the standard error uses their covariance (delta method with the gradient
    (∇g_A, −∇g_B)), which two separate intervals cannot. ``baseline`` is the same
    estimator for policy B, or :class:`OnPolicy` for the logging policy.

    Examples
    --------
    >>> import numpy as np
    >>> rows = RowInputs.from_actions(np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 1, 1, 0]),
    ...                               np.array([0.5, 0.5, 0.8, 0.4]), np.array([0, 0, 1, 1]))
    >>> diff = Difference(IPS(), OnPolicy())
    >>> est = diff.result(diff.state(rows, rows))
    >>> round(est.value, 4)  # IPS 0.8125 − mean reward 0.75
    0.0625
    """

    estimator: Estimator
    baseline: Estimator

    def state(self, rows: RowInputs, baseline_rows: RowInputs) -> Moments:
        a, b = self.estimator.terms(rows), self.baseline.terms(baseline_rows)
        state = Moments.of(*a, *b, ranges=rows.ranges)
        if not isinstance(self.estimator, _Shrinkage):
            return state
        tied_b = self.baseline.tie_sources(b) if isinstance(self.baseline, _Shrinkage) else range(len(b))
        return with_ties(state, [*self.estimator.tie_sources(a), *(len(a) + s for s in tied_b)])

    def result(self, state: Moments) -> Estimate:
        """The difference, its paired standard error, and the EL summary of the linearised paired terms.

        The empirical-likelihood interval of a difference is that of a plain mean (Owen 2001): of
        the per-row terms ψ_i = D̂ + (∇g_A, −∇g_B)·(z_i − z̄), whose mean is D̂ and whose variance is
        the delta method's, so it is D̂ ± √(δ S_ψψ / n) with δ = F⁻¹_{1,n}(1 − α), cut to the
        range of a difference of two values in the rewards' range, [min r − max r, max r − min r].
        """
        if state.n == 0:
            return Estimate(float("nan"), float("nan"), 0)
        m_a = state.m - (1 if isinstance(self.baseline, OnPolicy) else state.m // 2)
        v_a, g_a, chosen = self.estimator.linearize(state.take(np.arange(m_a)))
        v_b, g_b, _ = self.baseline.linearize(state.take(np.arange(m_a, state.m)))
        grad = np.concatenate([g_a, -g_b])
        variance = float(grad @ state.covariance() @ grad) / state.n
        value = v_a - v_b
        spread = float(state.high[0] - state.low[0]) if state.low.size else float("inf")
        summary = summary_of(state.n, np.array([value]), np.array([[float(grad @ state.comoment @ grad) / state.n]]),
                             0.0, (0.0, 0.0), (0.0, 0.0), (-spread, spread), weighted=False, estimate=value)
        return Estimate(value, float(np.sqrt(max(variance, 0.0))), state.n, summary, chosen)


# -- marginalized estimators over action embeddings (Saito & Joachims 2022) ---------------------------
def marginal_weights(action, action_embed, pi_b, target_probs) -> np.ndarray:
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
    return (target_probs * same).sum(axis=1) / (pi_b * same).sum(axis=1)


def sparse_marginal_weights(logged_embedding, embedding_propensity, target_actions, target_probs,
                            embedding) -> np.ndarray:
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
    return (np.asarray(target_probs) * same).sum(axis=1) / embedding_propensity


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
    needs_model: ClassVar[bool] = False
    needs_embedding: ClassVar[bool] = True
    el_map: ClassVar[tuple] = ((1.0, 0.0), (0.0, 1.0))  # IPS's: the EL interval's constraint E[w] = 1

    def terms(self, rows):
        rows = rows.marginalized()
        return [rows.weight * rows.reward, rows.weight]

    def state(self, rows: RowInputs) -> Moments:
        return super().state(rows.marginalized())  # the interval's weight range: the marginal weights'

    def estimate(self, *, reward, action, target_probs, action_embed, pi_b, propensity=None, reward_hat=None
                 ) -> Estimate:
        """Estimate from obp's dense arrays: ``pi_b`` and ``target_probs`` (n, k), ``action_embed`` (k,) e(a).

        ``propensity`` and ``reward_hat`` are accepted (and unused), so a log's arrays pass as they are.
        """
        check.vector("reward", reward)
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

    value_of = SNIPS.value_of
    gradient = SNIPS.gradient


ESTIMATORS = {cls.name: cls for cls in (DirectMethod, IPS, DoublyRobust, SNIPS, SNDR, SwitchDR, ClippedDR, DRos,
                                        SubGaussianIPS, SubGaussianDR, IPSTuning, DRTuning, SwitchDRTuning,
                                        MIPS, SNMIPS)}
#: The estimators a command runs when none are named (with a reward model; IPS and SNIPS without one).
STANDARD_ESTIMATORS = ("DM", "IPS", "DR", "SNIPS", "SNDR", "SwitchDR", "ClippedDR")
_SPEC = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*$")
_LIST_COMMA = re.compile(r",\s*(?![^()]*\))")  # a comma outside parentheses
_ARG_COMMA = re.compile(r",(?![^\[\]()]*[\])])")  # a comma outside brackets: lambdas=[10, 100], delta=0.1


def parse_estimator_list(text: str, where: str = "estimators") -> list[str]:
    """Estimator specs from a comma-separated string (``"DR,IPS,ClippedDR(max_weight=50)"``)."""
    specs = [spec.strip() for spec in _LIST_COMMA.split(str(text))]
    if not all(specs):
        raise UserError(f"{where} {text!r}: an empty name; give comma-separated names from {', '.join(ESTIMATORS)}")
    return specs


def _checked(rule: str, name: str, value):
    """``value`` of the parameter ``name`` checked by the shared rule ``rule`` of :mod:`dr_scale.io.config`
    (as ``--clip``, ``--tau`` and a policies file's keys are); pydantic is imported on first use only."""
    from dr_scale.io import config

    return config.check(getattr(config, rule), name, value)


def _forms(cls) -> str:
    """How to write an estimator of class ``cls``: its bare name and an example with parameters."""
    example = getattr(cls, "example", "") or {"ClippedDR": "ClippedDR(max_weight=50)",
                                              "SwitchDR": "SwitchDR(tau=20)"}.get(cls.name, "")
    if not example:
        return cls.name
    return f"{cls.name}, {example}" if " or " in example else f"{cls.name} or {example}"


def parse_estimator(spec) -> tuple[str, Estimator]:
    """An estimator from ``"DR"``, ``"ClippedDR(max_weight=50)"`` or a table ``{"name": …, "max_weight": 50}``.

    Returns (label, estimator): the label is the name, with the parameters when given (``repr``, which
    parses back). A list parameter is written in brackets (``DRos(lambdas=[10, 100, inf])``). A bad spec
    raises a ``UserError`` naming the spec and the forms its estimator accepts.

    >>> parse_estimator("ClippedDR(max_weight=50)")
    ('ClippedDR(max_weight=50.0)', ClippedDR(max_weight=50.0))
    >>> parse_estimator({"name": "SwitchDR", "tau": 20})[1]
    SwitchDR(tau=20.0)
    >>> parse_estimator("DRos(lambdas=[100, 10], tuning_method=mse)")[0]
    'DRos(lambdas=[10.0, 100.0], tuning_method=mse)'
    """
    if isinstance(spec, dict):
        params = {k: v for k, v in spec.items() if k != "name"}
        name = spec.get("name")
        spec = f"{name}({', '.join(f'{k}={v}' for k, v in params.items())})" if params else name  # for messages
    else:
        match = _SPEC.match(str(spec))
        if not match:
            raise UserError(f"cannot read estimator {spec!r}; write e.g. DR or ClippedDR(max_weight=50)")
        name, args = match.group(1), (match.group(2) or "").strip()
        params = {}
        for arg in filter(None, (a.strip() for a in _ARG_COMMA.split(args))):
            key, eq, value = arg.partition("=")
            if not eq:
                raise UserError(f"estimator {spec!r}: write parameters as name=value"
                                + (f", e.g. {ESTIMATORS[name].example}" if getattr(ESTIMATORS.get(name), "example",
                                                                                   "") else ""))
            params[key.strip()] = value.strip().strip("'\"")
    if name not in ESTIMATORS:
        raise UserError(f"unknown estimator {name!r}" + (f" in {spec!r}" if spec != name else "")
                        + f"; choose from {', '.join(ESTIMATORS)}")
    cls = ESTIMATORS[name]
    allowed = [f.name for f in fields(cls)]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise UserError(f"estimator {spec!r}: {name} has no parameter {', '.join(unknown)}"
                        + (f"; it takes {', '.join(allowed)}: write e.g. {_forms(cls)}" if allowed
                           else "; it takes none"))
    try:
        estimator = cls(**{k: None if str(v).lower() == "none" else v for k, v in params.items()})
    except UserError as exc:
        raise UserError(f"estimator {spec!r}: {exc}; write e.g. {_forms(cls)}") from None
    return (getattr(estimator, "label", None) or repr(estimator) if params else name), estimator


def make_estimators(specs, *, clip: float | None = None, tau: float | None = None) -> dict[str, Estimator]:
    """Estimators by spec (:func:`parse_estimator`), keyed by label; ``clip`` / ``tau`` set the bare names'.

    A spec is a name from ``DM``, ``IPS``, ``DR``, ``SNIPS``, ``SNDR``, ``SwitchDR``, ``ClippedDR``,
    ``DRos``, ``SubGaussianIPS``, ``SubGaussianDR``, ``IPSTuning``, ``DRTuning``, ``SwitchDRTuning``, optionally
    with parameters
    (``"ClippedDR(max_weight=50)"``, ``"DRos(lambda_=10)"``, ``"IPS(lambda_=50)"``), or a table
    (``{"name": "SwitchDR", "tau": 20}``). A spec with parameters is labelled with them. ``DRos``,
    ``SubGaussianIPS``, ``SubGaussianDR``, ``IPSTuning``, ``DRTuning`` and ``SwitchDRTuning`` without
    ``lambda_`` choose it from the data as obp's ``…Tuning`` classes do.

    Parameters
    ----------
    specs : list or tuple of str or dict
        The estimators' specs, each label at most once.
    clip : float or None, default None
        The clip M of a bare ``ClippedDR`` (None: tuned).
    tau : float or None, default None
        The threshold τ of a bare ``SwitchDR`` (None: tuned).

    Returns
    -------
    dict of str to Estimator
        The estimators, keyed by label, in the order of ``specs``.

    Raises
    ------
    UserError
        An unknown name or parameter, a label given twice, or ``specs`` not a list.

    See Also
    --------
    Estimator : What each value is.
    dr_scale.Evaluation : Takes the same specs.

    Examples
    --------
    >>> make_estimators(["DR", "IPS", "ClippedDR(max_weight=50)"])
    {'DR': DoublyRobust(), 'IPS': IPS(), 'ClippedDR(max_weight=50.0)': ClippedDR(max_weight=50.0)}
    >>> make_estimators(["SwitchDR", {"name": "SwitchDR", "tau": 5}], tau=20)
    {'SwitchDR': SwitchDR(tau=20.0), 'SwitchDR(tau=5.0)': SwitchDR(tau=5.0)}
    """
    if not isinstance(specs, (list, tuple)):
        raise UserError(f"estimators {specs!r}: give a list of names, e.g. [\"DR\", \"IPS\"]")
    out = {}
    for spec in specs:
        label, estimator = parse_estimator(spec)
        if label in out:
            raise UserError(f"estimator {label!r} is named twice")
        if label == "ClippedDR" and clip is not None:
            estimator = ClippedDR(max_weight=clip)
        elif label == "SwitchDR" and tau is not None:
            estimator = SwitchDR(tau=tau)
        out[label] = estimator
    return out
