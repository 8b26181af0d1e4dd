"""Mergeable diagnostics of the importance weights w_i = π(a_i|x_i) / p̂_i.

* effective sample size  ESS = (Σ w)² / Σ w²  (Kish), the number of equally
  weighted rows the weighted sample is worth;
* the maximum weight, the share of rows with a tiny propensity, and approximate
  weight quantiles from a fixed log-spaced histogram (mergeable by adding counts);
* the logging policy's own on-policy value, the plain mean of r;
* the support of the value: the rows with a positive weight (π takes the logged action),
  those of them with a non-zero reward (``n_informative``: the clicks the value rests on)
  and the rows with a non-zero reward at all (the logging policy's own support);
* the weights' tail: the share of the value carried by the top 1% of the positive weights
  (:meth:`WeightStats.top_share`, from Σ w|r| per histogram bin) and the Pareto k̂ of the
  largest weights (:meth:`WeightStats.pareto_k`, from the :data:`TOP_M` largest weights, kept
  exactly: the merge of two states keeps the largest :data:`TOP_M` of both).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

#: Histogram edges for weights: 0, then log-spaced from 1e-3 to 1e6 (quantiles to ~5%).
WEIGHT_EDGES = np.concatenate([[0.0], np.logspace(-3, 6, 9 * 40 + 1)])
TINY_PROPENSITY = 0.01
#: Warn when more than this share of rows has a propensity below TINY_PROPENSITY.
TINY_SHARE_WARNING = 0.01
#: Overlap is "poor" when ESS / n is below this (the default of ``min_ess_ratio``).
DEFAULT_MIN_ESS_RATIO = 0.1
#: A policy's value rests on too few rows — "insufficient data", no significance claim — when fewer than
#: this many rows have a positive weight (π takes the logged action) and a non-zero reward (a click).
DEFAULT_MIN_SUPPORT = 10
#: The largest weights each state keeps for the Pareto k̂ of the tail (3√S ≤ TOP_M up to S = 17,777 positive
#: weights; beyond, the tail fit uses the TOP_M largest).
TOP_M = 400
#: The share of the positive weights whose share of the value :meth:`WeightStats.top_share` gives (the top 1%).
TOP_FRACTION = 0.01
#: Fewer tail weights than this give no Pareto k̂ (NaN).
MIN_TAIL = 10
#: The never-logged actions a summary or warning names (the count gives the rest): at 10^4 actions a policy may
#: list thousands.
UNLOGGED_EXAMPLES = 10
#: Above this Pareto k̂ IPS-type estimates are unreliable (Vehtari et al. 2024, Sec. 3.2): a warning, and a
#: "no reliable estimate" verdict (:meth:`WeightStats.unreliable`).
DEFAULT_MAX_PARETO_K = 0.7
#: Below this effective sample size the weighted sample is worth fewer equally weighted rows than the normal
#: approximation behind the intervals needs (the rule of thumb n ≥ 30): a "no reliable estimate" verdict.
DEFAULT_MIN_ESS = 30.0
#: The verdict of an estimate resting on the weights, of one resting on the reward model alone (DM), and of one
#: whose weights fail a threshold of :meth:`WeightStats.unreliable`.
RELIABLE, MODEL_BASED, NO_RELIABLE_ESTIMATE = "reliable", "model-based", "no reliable estimate"


def _weight_bins(positive: np.ndarray) -> np.ndarray:
    """The histogram bin of each positive weight: j with WEIGHT_EDGES[j] ≤ w < WEIGHT_EDGES[j + 1] (the last bin
    open). Zero weights — the rows where π does not take the logged action, most rows for a deterministic π —
    are counted in bin 0 without a search."""
    return np.minimum(np.searchsorted(WEIGHT_EDGES, positive, side="right") - 1, WEIGHT_EDGES.size - 1)


def _top(positive: np.ndarray, m: int = TOP_M) -> np.ndarray:
    """The ``m`` largest of the positive weights ``positive``, in decreasing order (all of them if fewer)."""
    if positive.size > m:
        positive = np.partition(positive, positive.size - m)[positive.size - m:]
    return np.sort(positive)[::-1].astype(np.float64)


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def pareto_k(top: np.ndarray, n_positive: int) -> float:
    """The Pareto k̂ of the weights' tail, the PSIS diagnostic (Vehtari, Simpson, Gelman, Yao & Gabry 2024,
    "Pareto smoothed importance sampling", JMLR 25(72), Sec. 3).

    Of S positive weights, the M = min(⌊S / 5⌋, ⌈3√S⌉) largest (at most :data:`TOP_M`) are taken as the
    tail; a generalized Pareto distribution with location 0 is fitted by maximum likelihood
    (``scipy.stats.genpareto.fit``) to their excesses over the (M+1)-th largest weight; k̂ is its shape. The
    weights' distribution has finite variance for k < 1/2, and importance-sampling estimates are
    unreliable for k̂ > 0.7 (their Sec. 3.2: the estimate's convergence rate becomes impractically slow
    in the sample sizes seen). Zero weights (π does not take the logged action) are a point mass at
    the bottom and do not enter the tail.

    Why scipy's fit rather than ArviZ's ``psislw``: ``psislw`` needs every weight of the sample, where a
    report merges per-partition states and keeps only the largest :data:`TOP_M` weights (a mergeable,
    exact top-M sample), and it would add ArviZ with xarray to the dependencies. ArviZ fits the same
    distribution by Zhang & Stephens' (2009) profile-likelihood estimate with a weak prior toward
    k = 0.5; on M ≥ 100 tail weights the two agree within k̂'s own standard error (≈ (1 + k)/√M).

    Parameters
    ----------
    top : numpy.ndarray
        The largest positive weights in decreasing order (at least M + 1 of them for a fit).
    n_positive : int
        S, the number of positive weights the sample was drawn from.

    Returns
    -------
    float
        k̂; NaN when the tail has fewer than :data:`MIN_TAIL` weights, or fewer distinct values than half
        of them (weights from a few propensities, e.g. ε-greedy logging over few contexts: a discrete,
        bounded tail, to which a continuous distribution's fit does not apply).

    Examples
    --------
    >>> import numpy as np
    >>> w = 1 / np.random.default_rng(0).uniform(size=5000)  # Pareto(1) weights: k = 1 (k̂'s s.e. ≈ 0.15 here)
    >>> round(pareto_k(np.sort(w)[::-1][:TOP_M], w.size), 1)
    1.1
    >>> pareto_k(np.r_[np.full(300, 20.0), np.full(100, 1.25)], 5000)  # two values: no fit
    nan
    >>> round(pareto_k(np.sort(np.random.default_rng(0).uniform(1, 2, 5000))[::-1][:TOP_M], 5000), 1)  # bounded: k = −1
    -1.1
    """
    from scipy import stats  # imported on first use: scipy.stats takes a while to import

    m = min(n_positive // 5, math.ceil(3 * math.sqrt(n_positive)), top.size - 1)
    if m < MIN_TAIL:
        return float("nan")
    if np.unique(top[:m + 1]).size < (m + 1) / 2:  # few distinct values: a discrete tail, no Pareto fit
        return float("nan")
    excess = top[:m] - top[m]
    with np.errstate(all="ignore"):
        shape, _, _ = stats.genpareto.fit(excess / excess.mean(), floc=0)
    return float(shape)


@dataclass(frozen=True)
class WeightStats:
    n: int
    sum_w: float
    sum_w2: float
    max_w: float
    n_tiny: int
    sum_reward: float
    histogram: np.ndarray
    n_matched: int = 0  # rows with w > 0
    n_informative: int = 0  # rows with w > 0 and r ≠ 0
    n_rewarded: int = 0  # rows with r ≠ 0
    value_histogram: np.ndarray | None = None  # Σ w|r| per histogram bin (None: not kept)
    top: np.ndarray | None = None  # the TOP_M largest positive weights, decreasing (None: not kept)

    @classmethod
    def empty(cls) -> WeightStats:
        """The state of no rows (the identity of ``+``)."""
        return cls(0, 0.0, 0.0, 0.0, 0, 0.0, np.zeros(WEIGHT_EDGES.size, dtype=np.int64), 0, 0, 0,
                   np.zeros(WEIGHT_EDGES.size), np.zeros(0))

    @classmethod
    def of(cls, weight: np.ndarray, propensity: np.ndarray, reward: np.ndarray) -> WeightStats:
        """The state of a batch: its weights w_i = π(a_i|x_i) / p̂_i, propensities p̂_i and rewards r_i, (n,) each."""
        if weight.size == 0:
            return cls.empty()
        matched = np.flatnonzero(weight > 0)  # the rows of a positive weight, searched and kept once
        positive, matched_reward = weight[matched], reward[matched]
        bins = _weight_bins(positive)
        histogram = np.bincount(bins, minlength=WEIGHT_EDGES.size).astype(np.int64)
        histogram[0] += weight.size - positive.size
        return cls(
            int(weight.size),
            float(weight.sum()),
            float(np.dot(weight, weight)),
            float(weight.max()),
            int((propensity < TINY_PROPENSITY).sum()),
            float(reward.sum()),
            histogram,
            int(positive.size),
            int(np.count_nonzero(matched_reward)),
            int(np.count_nonzero(reward)),
            np.bincount(bins, weights=positive * np.abs(matched_reward), minlength=WEIGHT_EDGES.size),
            _top(positive),
        )

    def __add__(self, other: WeightStats) -> WeightStats:
        return WeightStats(
            self.n + other.n,
            self.sum_w + other.sum_w,
            self.sum_w2 + other.sum_w2,
            max(self.max_w, other.max_w),
            self.n_tiny + other.n_tiny,
            self.sum_reward + other.sum_reward,
            self.histogram + other.histogram,
            self.n_matched + other.n_matched,
            self.n_informative + other.n_informative,
            self.n_rewarded + other.n_rewarded,
            (None if self.value_histogram is None or other.value_histogram is None
             else self.value_histogram + other.value_histogram),
            None if self.top is None or other.top is None else _top(np.concatenate([self.top, other.top])),
        )

    @property
    def ess(self) -> float:
        """Kish's effective sample size ESS = (Σ w)² / Σ w² (0 without a positive weight)."""
        return self.sum_w * (self.sum_w / self.sum_w2) if self.sum_w2 > 0 else 0.0  # no overflow of Σw squared

    @property
    def ess_ratio(self) -> float:
        """ESS / n: the share of its rows the weighted sample is worth."""
        return self.ess / self.n if self.n else float("nan")

    def poor_overlap(self, min_ess_ratio: float = DEFAULT_MIN_ESS_RATIO) -> bool:
        """Whether ESS / n is below ``min_ess_ratio`` (or undefined, with no rows)."""
        return not self.ess_ratio >= min_ess_ratio

    def warnings(self, min_ess_ratio: float = DEFAULT_MIN_ESS_RATIO,
                 max_pareto_k: float = DEFAULT_MAX_PARETO_K) -> list[str]:
        """Poor overlap (ESS / n below ``min_ess_ratio``), a heavy tail (Pareto k̂ above ``max_pareto_k``) and a
        large share of tiny propensities, in words."""
        out = []
        if self.poor_overlap(min_ess_ratio):
            out.append(f"poor overlap: ESS/n = {self.ess_ratio:.3g} < {min_ess_ratio:g} (ESS {self.ess:.1f} of "
                       f"{self.n} rows); IPS-type estimates and intervals are unreliable")
        if self.pareto_k > max_pareto_k:
            out.append(f"heavy-tailed weights: Pareto k̂ = {self.pareto_k:.2f} > {max_pareto_k:g} (PSIS diagnostic); "
                       "IPS-type estimates and their normal intervals are unreliable (try interval el, SNIPS or a "
                       "clipped estimator)")
        if self.n and self.tiny_share > TINY_SHARE_WARNING:
            out.append(f"{self.tiny_share:.2%} of rows have a propensity below {TINY_PROPENSITY:g}")
        return out

    def insufficient(self, min_support: int = DEFAULT_MIN_SUPPORT) -> bool:
        """Too few rows carry the value: fewer than ``min_support`` with w > 0 and a non-zero reward."""
        return self.n_informative < min_support

    def unreliable(self, min_support: int = DEFAULT_MIN_SUPPORT, min_ess: float = DEFAULT_MIN_ESS,
                   max_pareto_k: float = DEFAULT_MAX_PARETO_K) -> list[str]:
        """Why no estimate that rests on these weights (IPS, SNIPS, DR, SNDR, Switch, …) can be trusted, in
        words; empty when none applies. The verdict "no reliable estimate" (docs/estimators.md) holds when

        * fewer than ``min_support`` rows have w > 0 and a non-zero reward (the clicks the value rests on);
        * Kish's ESS = (Σ w)² / Σ w² is below ``min_ess`` (the intervals' normal approximation needs more);
        * the Pareto k̂ of the weights' tail is above ``max_pareto_k`` (Vehtari et al. 2024, Sec. 3.2: the
          importance-sampling estimate converges impractically slowly; NaN, no tail fit, is not a reason).

        Examples
        --------
        >>> import numpy as np
        >>> w = np.r_[np.full(100, 2.0), np.zeros(100)]
        >>> WeightStats.of(w, np.full(200, 0.5), np.r_[1.0, np.zeros(199)]).unreliable()
        ['1 rewarded matched row (w > 0, r ≠ 0) < 10']
        >>> WeightStats.of(w, np.full(200, 0.5), np.ones(200)).unreliable()
        []
        """
        words = {"rewarded_matched_rows": lambda v, t: f"{v:g} rewarded matched row{'' if v == 1 else 's'} (w > 0, "
                                                       f"r ≠ 0) < {t:g}",
                 "ess": lambda v, t: f"ESS {v:.3g} < {t:g}", "pareto_k": lambda v, t: f"Pareto k̂ {v:.2f} > {t:g}"}
        return [words[metric](value, threshold)
                for metric, value, threshold in self.failed_thresholds(min_support, min_ess, max_pareto_k)]

    def failed_thresholds(self, min_support: int = DEFAULT_MIN_SUPPORT, min_ess: float = DEFAULT_MIN_ESS,
                          max_pareto_k: float = DEFAULT_MAX_PARETO_K) -> list[tuple[str, float, float]]:
        """The thresholds of :meth:`unreliable` these weights fail, as (metric, value, threshold): the metrics
        ``rewarded_matched_rows`` (n_informative), ``ess`` and ``pareto_k``."""
        out: list[tuple[str, float, float]] = []
        if self.n_informative < min_support:
            out.append(("rewarded_matched_rows", float(self.n_informative), float(min_support)))
        if self.ess < min_ess:
            out.append(("ess", self.ess, min_ess))
        if self.pareto_k > max_pareto_k:
            out.append(("pareto_k", self.pareto_k, max_pareto_k))
        return out

    def top_share(self, fraction: float = TOP_FRACTION) -> float:
        """The share of the value Σ w|r| carried by the largest ``fraction`` (1%) of the positive weights.

        Of the positive weights — the rows where π takes the logged action, the only rows the value rests
        on — so that a deterministic policy's sparsity (w = 0 on most rows) is not read as concentration:
        against uniform logging over 80 actions its matched rows are 1.25% of the rows, all of one weight,
        and their top 1% carry about 1% of the value. Read from Σ w|r| per bin of the weight histogram:
        whole bins from the top down, and of the bin where the top ``fraction`` · n_matched rows end, the
        part in proportion to its rows (its weights lie within ~6% of each other). NaN without a positive
        Σ w|r| (no reward where π takes the logged action) or when the state keeps no value histogram.
        """
        if self.value_histogram is None or self.n_matched == 0:
            return float("nan")
        total = float(self.value_histogram.sum())
        if not total > 0:
            return float("nan")
        remaining, carried = fraction * self.n_matched, 0.0
        for j in np.flatnonzero(self.histogram)[::-1]:
            take = min(1.0, remaining / self.histogram[j])
            carried += take * self.value_histogram[j]
            remaining -= take * self.histogram[j]
            if remaining <= 0:
                break
        return min(1.0, carried / total)

    @functools.cached_property
    def pareto_k(self) -> float:
        """The Pareto k̂ of the positive weights' tail (:func:`pareto_k`; NaN when the state keeps no top sample)."""
        return float("nan") if self.top is None else pareto_k(self.top, self.n_matched)

    @property
    def tiny_share(self) -> float:
        """The share of rows with p̂_i < :data:`TINY_PROPENSITY` (NaN without rows)."""
        return self.n_tiny / self.n if self.n else float("nan")

    @property
    def on_policy_value(self) -> float:
        """(1/n) Σ r_i, the logging policy's value on these rows (NaN without rows)."""
        return self.sum_reward / self.n if self.n else float("nan")

    def quantile(self, q: float) -> float:
        """Upper histogram edge below which a share q of the weights lie (≤ max)."""
        if self.n == 0:
            return float("nan")
        idx = int(np.searchsorted(np.cumsum(self.histogram), q * self.n, side="left"))
        upper = WEIGHT_EDGES[idx + 1] if idx + 1 < WEIGHT_EDGES.size else np.inf
        return float(min(upper, self.max_w))

    def summary(self) -> dict:
        """The diagnostics as a JSON object: n, ESS, the largest weight and quantiles, the tiny-propensity
        share, Pareto k̂ and the matched rows.
        """
        return {
            "n": self.n,
            "ess": self.ess,
            "max_weight": self.max_w,
            "weight_quantiles": {str(q): self.quantile(q) for q in (0.5, 0.9, 0.99)},
            "tiny_propensity_share": self.tiny_share,
            "on_policy_value": self.on_policy_value,
            "matched_rows": self.n_matched,
            "matched_rows_with_reward": self.n_informative,
            "top_share": _finite_or_none(self.top_share()),  # None: not computable (see the methods)
            "pareto_k": _finite_or_none(self.pareto_k),
        }

    def to_dict(self) -> dict:
        """The state as a JSON-ready dict (the value histogram and top weights where kept)."""
        d = {k: getattr(self, k) for k in ("n", "sum_w", "sum_w2", "max_w", "n_tiny", "sum_reward", "n_matched",
                                           "n_informative", "n_rewarded")}
        d["histogram"] = self.histogram.tolist()
        if self.value_histogram is not None and self.top is not None:
            d["value_histogram"] = self.value_histogram.tolist()
            d["top"] = self.top.tolist()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> WeightStats:
        """The state of ``d`` (``from_dict(s.to_dict())`` equals ``s``)."""
        kept = "value_histogram" in d and "top" in d
        return cls(int(d["n"]), float(d["sum_w"]), float(d["sum_w2"]), float(d["max_w"]), int(d["n_tiny"]),
                   float(d["sum_reward"]), np.asarray(d["histogram"], dtype=np.int64), int(d["n_matched"]),
                   int(d["n_informative"]), int(d["n_rewarded"]),
                   np.asarray(d["value_histogram"], dtype=np.float64) if kept else None,
                   np.asarray(d["top"], dtype=np.float64) if kept else None)


@dataclass(frozen=True)
class Coverage:
    """What the log says about the policy's actions, mergeable with ``+``.

    ``logged[a]``: rows that logged action a; ``mass[a]`` = Σ_i π(a|x_i), the policy's probability
    mass on a. The share of π's mass on actions the log never took, Σ_{a: logged[a] = 0} mass[a] / n,
    is what no estimator learns from the log: IPS counts it as zero reward, DM and DR take the reward
    model's extrapolation there (Dudík, Langford & Li 2011, Sec. 3: DR is unbiased only where p̂ > 0
    wherever π > 0). The rows whose logged action π takes (w > 0) are :attr:`WeightStats.n_matched`.

    Parameters
    ----------
    logged : numpy.ndarray
        (k,) rows per logged action.
    mass : numpy.ndarray
        (k,) Σ_i π(a|x_i) per action a.

    Examples
    --------
    >>> import numpy as np
    >>> c = Coverage.of(np.array([0, 0, 1]), np.array([1.5, 0.0, 1.5]))  # π = (½, 0, ½) on 3 rows
    >>> c.unlogged_actions, c.unlogged_share
    ([2], 0.5)
    """

    logged: np.ndarray
    mass: np.ndarray

    @classmethod
    def of(cls, action: np.ndarray, mass: np.ndarray) -> Coverage:
        """From the logged actions and π's (k,) mass Σ_i π(a|x_i) on the same rows
        (:meth:`~dr_scale.policies.distributions.ActionDistribution.mass`)."""
        return cls(np.bincount(action, minlength=mass.size).astype(np.int64), mass)

    def __add__(self, other: Coverage) -> Coverage:
        k = max(self.logged.size, other.logged.size)

        def pad(x):
            """``x`` padded with zeros to k entries."""
            return np.pad(x, (0, k - x.size))

        return Coverage(pad(self.logged) + pad(other.logged), pad(self.mass) + pad(other.mass))

    @property
    def _unlogged(self) -> np.ndarray:
        return np.flatnonzero((self.logged == 0) & (self.mass > 0))

    @property
    def unlogged_actions(self) -> list[int]:
        """The actions the policy puts mass on that the log never took."""
        return [int(a) for a in self._unlogged]

    @property
    def unlogged_count(self) -> int:
        """How many actions the policy puts mass on that the log never took."""
        return int(self._unlogged.size)

    @property
    def unlogged_share(self) -> float:
        """The share of π's probability mass on actions the log never took (0 … 1)."""
        total = float(self.mass.sum())
        return float(self.mass[self._unlogged].sum()) / total if total > 0 else 0.0

    def warnings(self, matched: int) -> list[str]:
        """Mass on never-logged actions, and ``matched`` = 0 rows with w > 0 while π has mass, in words."""
        out = []
        count = self.unlogged_count
        if count:
            listed = ", ".join(map(str, self.unlogged_actions[:UNLOGGED_EXAMPLES]))
            if count > UNLOGGED_EXAMPLES:
                listed = f"{count} actions, e.g. {listed} …"
            out.append(f"the policy puts {self.unlogged_share:.1%} of its probability mass on actions the log never "
                       f"took ({listed}): the log says nothing about their rewards — IPS counts them as 0, DM and DR "
                       "rest on the reward model's extrapolation there")
        if self.mass.sum() > 0 and matched == 0:
            out.append("no row's logged action has positive probability under the policy (0 matched rows): "
                       "IPS and SNIPS rest on no data, DR on the reward model alone")
        return out

    def summary(self) -> dict:
        """The share of π's mass on never-logged actions, their count and the first :data:`UNLOGGED_EXAMPLES`."""
        return {"unlogged_action_share": self.unlogged_share, "unlogged_action_count": self.unlogged_count,
                "unlogged_actions": self.unlogged_actions[:UNLOGGED_EXAMPLES]}

    def to_dict(self) -> dict:
        """The state as a JSON-ready dict."""
        return {"logged": self.logged.tolist(), "mass": self.mass.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> Coverage:
        """The state of ``d`` (``from_dict(s.to_dict())`` equals ``s``)."""
        return cls(np.asarray(d["logged"], dtype=np.int64), np.asarray(d["mass"], dtype=np.float64))
