"""IPS and DR with a modified weight ŵ_λ(w), λ fixed or chosen from the data by obp's ``…Tuning`` rules
(SLOPE, estimated MSE) over honest variances: the base of the clipping, optimistic-shrinkage and sub-Gaussian
estimators, and the rules every tuned estimator chooses by.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np
from scipy.special import stdtrit  # the Student t quantile (scipy.stats is slow to import)

from dr_scale.core.errors import ParameterError
from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.estimate import checked
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.intervals import Range, Summary, summary_of
from dr_scale.ope.moments import Moments

#: Candidate λ of a tuned clipping / shrinkage estimator (``IPSTuning``, ``DRTuning``, ``DRos``) when none are given.
#: obp 0.5.7's ``…Tuning`` classes have no default (``lambdas`` is required); this is the list obp's own examples
#: and benchmarks tune over (``lambdas=[10, 50, 100, 500, 1000, 5000, 10000, np.inf]``).
CLIPPING_LAMBDAS = (10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10000.0, math.inf)
#: Candidate λ of a tuned sub-Gaussian estimator when none are given: obp's estimator tests'
#: ``[0.005, 0.01, 0.05, 0.1, 0.5]`` with λ = 0 (no shrinkage: IPS, DR), as ∞ is in :data:`CLIPPING_LAMBDAS`.
SUBGAUSSIAN_LAMBDAS = (0.0, 0.005, 0.01, 0.05, 0.1, 0.5)
TUNING_METHODS = ("slope", "mse")
#: How a tuned estimator estimates each candidate's variance: honestly (:func:`honest_variances`) or as the sample
#: variance of its terms (obp's).
VARIANCES = ("honest", "sample")
#: κ, the weighted rows a candidate's pooled variance floor counts as (:func:`honest_variances`): as many as the
#: rewarded matched rows below which an estimate has no reliable support (``ope.diagnostics``).
PRIOR_ROWS = 10
OBP_TUNING_DELTA = 0.1  # obp's BaseOffPolicyEstimatorTuning.delta
SLOPE_C = math.sqrt(6) - 1  # SLOPE++'s constant (Tucker & Lee 2021), as obp


def slope_widths(var: np.ndarray, n: int, delta: float) -> np.ndarray:
    """SLOPE's half-widths c_j = mean − (mean − √(Var_j/(n − 1)) t_{n−1}(1 − δ)), obp 0.5.7's Student-t lower bound
    (``estimate_student_t_lower_bound``) subtracted from the mean as obp does; ``var`` the 1/n variances."""
    width: np.ndarray = np.sqrt(var / (n - 1)) * stdtrit(n - 1, 1.0 - delta)
    return width


def slope(mean: np.ndarray, width: np.ndarray) -> int:
    """SLOPE's choice (Su, Srinath & Krishnamurthy 2020, in obp's SLOPE++ form of Tucker & Lee 2021): the index of
    the candidate chosen among estimates ``mean`` with interval half-widths ``width``.

    The candidates in decreasing width (the least biased first) are accepted while the next one, i, satisfies
    |V̂_i − V̂_j| ≤ c_i + (√6 − 1) c_j for every accepted j; the last accepted one is chosen (Lepski's rule: the
    narrowest interval consistent with all the wider ones). Order and ties as obp's ``np.argsort(cnf)[::-1]``.

    >>> slope(np.array([0.5, 0.25, 0.12]), np.array([0.4, 0.01, 0.05]))  # 0.25 is outside 0.12's interval
    2
    """
    order = np.argsort(width)[::-1]
    kept = [order[0]]
    for i in order[1:]:
        if not np.all(np.abs(mean[kept] - mean[i]) <= width[i] + SLOPE_C * width[kept]):
            return int(kept[-1])
        kept.append(i)
    return int(order[-1])


def tuning_reason(method: str, parameter: str, candidates: tuple[float, ...], best: int,
                  ess: float | None = None, ess_of: str = "") -> str:
    """Why ``candidates[best]`` was chosen by ``method``, in words (the table's footnote, the JSON's ``tuning``), with
    an ESS (Kish's, of the weights ``ess_of`` names) where given."""
    value = f"{candidates[best]:g}".replace("inf", "∞")
    if method == "slope":
        why = (f"the narrowest of {len(candidates)} candidates whose interval meets those of all wider (less "
               "biased) ones")
    else:
        why = "the smallest estimated MSE (variance + squared bias bound)"
    reason = f"{parameter} = {value} by {method.upper()}: {why}"
    if ess is None:
        return reason
    return f"{reason}; ESS {f'{ess:,.0f}' if ess >= 100 else f'{ess:.3g}'}{' ' + ess_of if ess_of else ''}"


def kish_ess(n: int, mean_w: float | np.ndarray, comoment_ww: float | np.ndarray) -> np.ndarray:
    """Kish's effective sample size (Σ w)² / Σ w² from n, the weights' mean and their co-moment — elementwise for
    arrays of them (several weights' at once); 0 where Σ w² is 0."""
    mean_w, comoment_ww = np.asarray(mean_w, dtype=np.float64), np.asarray(comoment_ww, dtype=np.float64)
    second = comoment_ww + n * mean_w ** 2
    out: np.ndarray = np.divide(n * n * mean_w ** 2, second, out=np.zeros_like(second), where=second > 0)
    return out


def honest_variances(state: Moments, size: int) -> np.ndarray:
    """Each of the ``size`` candidates' 1/n variance of its term t_j = [ρ̂_π +] ŵ_j u, estimated honestly from a
    tuned state that holds t_1 … t_G, then ŵ_1 … ŵ_G, then u² (u = r − ρ̂_a for DR, r for IPS):

        V_j = S_j + κ / (ESS_j + κ) · max(0, F_j − S_j),    F_j = mean(ŵ_j²) · mean(u²),

    S_j the sample variance of t_j, ESS_j = n mean(ŵ_j)² / mean(ŵ_j²) (Kish's) and κ = :data:`PRIOR_ROWS`.
    F_j is the variance of the weighted part ŵ_j u if its rows' u spread as all the log's rows' do,
    independently of the weights: the spread a handful of heavily weighted rows with no reward among them
    cannot show. S_j is raised toward it as far as a prior worth κ weighted rows against the ESS_j the
    weighted rows have: fully where they are a few, negligibly where they are many; never lowered.
    """
    n, diagonal = state.n, np.diag(state.comoment)
    variance = diagonal[:size] / n
    mean_w = state.mean[size:2 * size]
    ess = kish_ess(n, mean_w, diagonal[size:2 * size])
    floor = (diagonal[size:2 * size] / n + mean_w ** 2) * state.mean[2 * size]  # mean(ŵ_j²) · mean(u²)
    out: np.ndarray = variance + PRIOR_ROWS / (ess + PRIOR_ROWS) * np.maximum(floor - variance, 0.0)
    return out


def raised_note(state: Moments, parameter: str, candidates: tuple[float, ...], factor: str) -> str:
    """The words a tuning reason adds where :func:`honest_variances` raised a candidate's variance by more than
    half (``factor`` names u: ``"(r − ρ̂)"`` or ``"r"``); empty where it raised none."""
    size = len(candidates)
    raised = honest_variances(state, size) > 1.5 * np.diag(state.comoment)[:size] / state.n
    if not raised.any():
        return ""
    which = ", ".join(f"{t:g}".replace("inf", "∞") for t, f in zip(candidates, raised, strict=True) if f)
    return (f"; variance raised toward mean(ŵ²)·mean({factor}²) for {parameter} = {which} "
            "(their weighted rows too few to show its spread)")


def _spec_list(text: str | float | Iterable[object]) -> list[object]:
    """``"[10, 50, inf]"`` / ``"(10.0, 50.0)"`` / a sequence → a list of its items (strings stripped)."""
    if isinstance(text, str):
        inner = text.strip()
        if inner[:1] in "[(" and inner[-1:] in "])":
            inner = inner[1:-1]
        return [item.strip() for item in inner.split(",") if item.strip()]
    if isinstance(text, (int, float)):
        return [text]
    return list(text)


def _spec_bool(name: str, value: object) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ParameterError(f"`{name}` should be true or false (got {value!r})")


def _spec_value(value: object) -> str:
    """A value as :meth:`Shrinkage.__repr__` writes it: floats as ``repr``, tuples as lists, strings bare."""
    if isinstance(value, tuple):
        return "[" + ", ".join(map(_spec_value, value)) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def grid_moments(rows: RowInputs, grid: np.ndarray, clip: bool, model: bool = True) -> Moments:
    """:class:`Moments` of the G terms t_j = ρ̂_π + a_j(d), the G modified weights ŵ_j = a_j(1) and e = d², over
    the increasing thresholds ``grid`` (last ∞), d = r − ρ̂_a: in O(n + G²), without a (2G + 1, n) stack. With
    ``model=False`` (the IPS family) t_j = a_j(r) and e = r²: d = r, no ρ̂_π.

    A row whose weight w lies in bin b (the first threshold ≥ w) has a_j(u) = w u for b ≤ j
    and a_j(u) = above_j · u for b > j (``clip``: above_j = the threshold, clipping; else 0,
    switching the correction off); u = d gives the corrections, u = 1 the weights. So every
    Σ a_j(u), Σ c a_j(u), Σ e a_j(u) (c = ρ̂_π, e centred) and, for j ≤ k and u, u' ∈ {d, 1},

        Σ a_j(u) a_k(u') = Σ_{b≤j} w² u u' + above_j Σ_{j<b≤k} w u u' + above_j above_k Σ_{b>k} u u'

    is a cumulative sum over the bins of per-bin sums (:func:`_bin_sums`, computed once per batch of rows and
    grid: switching and clipping over one grid share them). Equal to ``Moments.of`` of the 2G + 1 terms up to
    rounding; a candidate equal to another on every row gets its statistics bit for bit.
    """
    n, size = rows.reward.size, grid.size
    if n == 0:
        return Moments.empty(2 * size + 1, 2)
    b = rows.shared(("grid sums", tuple(grid.tolist()), model), lambda: _bin_sums(rows, grid, model))
    above = grid if clip else np.zeros(size)
    offset = np.repeat([1.0 if model else 0.0, 0.0], size)  # the terms holding ρ̂_π: the G t_j (DR family)

    def scaled(factor: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``factor`` · ``x`` with ∞ · 0 = 0 (nothing lies above the last threshold, ∞)."""
        return np.where(x == 0, 0.0, factor * np.where(x == 0, 1.0, x))

    def sums(below: np.ndarray, total: np.ndarray) -> np.ndarray:
        """Σ a_j(u) for each threshold j from the cumulative sums of w u and of u, (size,)."""
        out: np.ndarray = below + scaled(above, total[-1] - total)
        return out

    lo, hi = np.minimum.outer(np.arange(size), np.arange(size)), np.maximum.outer(np.arange(size), np.arange(size))
    with np.errstate(invalid="ignore"):  # 0 · ∞ (clipping at 0, k = ∞) only where nothing lies above k
        above_both = above[lo] * above[hi]

    def block(head: np.ndarray, mid: np.ndarray, tail: np.ndarray) -> np.ndarray:
        """Σ a_j(u) a_k(u') for every j, k from the cumulative sums of w² u u', w u u' and u u', (size, size)."""
        out: np.ndarray = (head[lo] + scaled(above[lo], mid[hi] - mid[lo])
                           + scaled(above_both, tail[-1] - tail[hi]))
        return out

    sum_a = np.concatenate([sums(b["wd"], b["d"]), sums(b["w"], b["1"])])
    sum_ca = np.zeros(2 * size)  # Σ (c − c̄) a: none without a model
    if model:
        sum_ca = np.concatenate([sums(b["c wd"], b["c d"]), sums(b["c w"], b["c"])])
    sum_ea = np.concatenate([sums(b["e wd"], b["e d"]), sums(b["e w"], b["e"])])
    cross = block(b["wd w"], b["wd"], b["d"])  # Σ a_j(d) a_k(1)
    products = np.block([[block(b["wd wd"], b["wd d"], b["d d"]), cross],
                         [cross.T, block(b["w w"], b["w"], b["1"])]])
    # Σ X X' of the shifted terms X = offset · (c − c̄) + a (then X_e = e − ē), and their means
    t = b["totals"]
    second = np.empty((2 * size + 1, 2 * size + 1))
    second[:-1, :-1] = (np.outer(offset, offset) * t["cc"] + offset[:, None] * sum_ca[None, :]
                        + sum_ca[:, None] * offset[None, :] + products)
    second[-1, :-1] = second[:-1, -1] = offset * t["ce"] + sum_ea
    second[-1, -1] = t["ee"]
    shifted = np.concatenate([offset * t["c"] + sum_a, [t["e"]]]) / n
    comoment = second - n * np.outer(shifted, shifted)
    mean = np.concatenate([offset * t["c mean"] + sum_a / n, [t["e mean"] + t["e"] / n]])
    return Moments(n, mean, comoment, *rows.ranges)


def _bin_sums(rows: RowInputs, grid: np.ndarray, model: bool) -> dict[str, Any]:
    """What :func:`grid_moments` reads of a batch of rows, whatever the threshold's kind: the cumulative sums over
    the weight bins of ``grid`` (bin b ≤ j, for each j) of w d, d, w, 1, their products with c = ρ̂_π − c̄ (with a
    ``model``) and with e = d² − ē, and of w d w, (w d)², w d d, d², w²; under ``"totals"`` the sums over all rows
    of c, c², e, c e and e² (centred) and the means c̄, ē."""
    n, size = rows.reward.size, grid.size
    w = rows.weight
    if model:
        c, logged = rows.reward_hat_pi, rows.reward_hat_logged
        if c is None or logged is None:
            raise ParameterError("`rows` need a reward model ρ̂ (`reward_hat`); none was given")
        d = rows.reward - logged
        c_mean = c.mean()
        cc = c - c_mean
    else:
        d, c_mean, cc = rows.reward, 0.0, np.zeros(0)
    e = d * d
    total_e = float(e.sum())
    e_mean = total_e / n
    # the sums over all rows of the centred e = d² − ē, from e itself (one n-row array fewer)
    sum_c = float(cc.sum())
    totals = {"c": sum_c, "cc": float(cc @ cc), "e": total_e - n * e_mean, "c mean": c_mean, "e mean": e_mean,
              "ce": (float(e @ cc) if model else 0.0) - e_mean * sum_c,
              "ee": float(e @ e) - 2 * e_mean * total_e + n * e_mean ** 2}
    positive = np.flatnonzero(w > 0)  # a row of weight 0 has a_j(u) = 0 for every j (bin 0 is above no threshold)
    if positive.size < n:
        w, d = w[positive], d[positive]
        cc = cc[positive] if model else cc
    ee = d * d - e_mean
    bins = np.searchsorted(grid, w, side="left")

    def cumulative(x: np.ndarray | None) -> np.ndarray:
        """Σ of ``x`` (None: 1) over the bins ≤ j, for each j, (size,)."""
        return np.cumsum(np.bincount(bins, weights=x, minlength=size))

    wd = w * d
    out: dict[str, Any] = {"wd": cumulative(wd), "d": cumulative(d), "w": cumulative(w), "1": cumulative(None),
                           "e wd": cumulative(ee * wd), "e d": cumulative(ee * d), "e w": cumulative(ee * w),
                           "e": cumulative(ee), "wd w": cumulative(wd * w), "wd wd": cumulative(wd * wd),
                           "wd d": cumulative(wd * d), "d d": cumulative(d * d), "w w": cumulative(w * w),
                           "totals": totals}
    if model:
        out.update({"c wd": cumulative(cc * wd), "c d": cumulative(cc * d), "c w": cumulative(cc * w),
                    "c": cumulative(cc)})
    return out


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


#: Where an estimator's docstring lists the parameters of a tuned λ (``Shrinkage.__init_subclass__`` writes them).
TUNING_PARAMETERS = "    (the parameters of a tuned λ)\n"
_TUNING_PARAMETERS_DOC = """\
    lambdas : sequence of float or None, default None
        The candidates of a λ chosen from the data (None: :data:`{lambdas}`), in any order.
    tuning_method : {{"slope", "mse"}}, default "slope"
        How a λ is chosen: SLOPE, or the estimated MSE (``Shrinkage``), as obp's ``…Tuning`` classes.
    variance : {{"honest", "sample"}}, default "honest"
        Each candidate's variance in that rule: the sample variance raised where few rows carry the weights
        (``honest_variances``), or the sample variance alone (obp's rule exactly).
    use_bias_upper_bound : bool, default True
        With ``"mse"``: add Bernstein's high-probability bound to the estimated bias, as obp does.
    delta : float, default 0.1
        The confidence δ of SLOPE's intervals and of the bias bound (obp's default).
"""


@dataclass(frozen=True, repr=False)
class Shrinkage(Estimator):
    """IPS or DR with the importance weight w replaced by a modified weight ŵ_λ(w); λ fixed or chosen from the data.

        IPS family:  V̂_λ = (1/n) Σ_i ŵ_λ(w_i) r_i
        DR family:   V̂_λ = (1/n) Σ_i [ ρ̂_π(x_i) + ŵ_λ(w_i) (r_i − ρ̂_{a_i}(x_i)) ]

    ``shrink`` is ŵ_λ: clipping min(w, λ) (obp's ``InverseProbabilityWeighting(lambda_)``,
    ``DoublyRobust(lambda_)``), optimistic shrinkage λw / (w² + λ) (``DRos``), the sub-Gaussian
    power mean w / (1 − λ + λw) (``SubGaussianIPS``, ``SubGaussianDR``). A fixed λ is a plain mean
    of one per-row term (standard error s / √n; the empirical-likelihood interval of a plain mean).

    ``lambda_=None`` chooses λ among ``lambdas`` by obp 0.5.7's ``…Tuning`` rules, in the same pass:
    the state holds the moments of every candidate's term t_j and modified weight ŵ_j, of u² (u =
    r − ρ̂_a for DR, r for IPS), of the unmodified term (ŵ = w) and of w, and at the end (n rows,
    Var_j the 1/n variance of t_j: honest, :func:`honest_variances`, or with ``variance="sample"``
    the sample one, ``np.var``, as obp)

    - ``tuning_method="mse"`` (Su, Dimakopoulou, Krishnamurthy & Dudík 2020, Sec. 5): the λ_j
      minimising Var_j/n + B_j², B_j = |mean of the unmodified term − mean(t_j)| (= |mean((w − ŵ_j) u)|),
      plus, with ``use_bias_upper_bound``, Bernstein's √(2 mean(w²) log(2/δ)/n) + 2 max(w) log(2/δ)/(3n);
      the first minimum in obp's order of the candidates;
    - ``tuning_method="slope"`` (SLOPE, Su, Srinath & Krishnamurthy 2020, in obp's SLOPE++ form of
      Tucker & Lee 2021): with c_j = √(Var_j/(n − 1)) t_{n−1}(1 − δ), the candidates in decreasing
      c_j are accepted while |V̂_i − V̂_j| ≤ c_j + (√6 − 1) c_i for every accepted i; the last
      accepted one is chosen.

    The honest variance matters where a few rows carry the weights: with no reward among them their
    sample variance is near 0, and both rules keep λ = ∞ (IPS, DR) at an ESS of a few rows; raised
    toward the spread those rows would show, it makes them prefer a λ that shrinks the heavy weights.
    Where the weighted rows are many the two variances agree and the choice is obp's.

    obp sorts the candidates (decreasing for clipping, increasing for shrinkage and sub-Gaussian), and
    ties go to the first in that order, as here. The estimate and its standard error are those of the
    chosen λ (the choice itself is not accounted for); ``Estimate.chosen`` is ``{"lambda_": λ}``.
    A row of weight 0 has ŵ = 0 where obp's formula is 0/0 (DRos at λ = 0, sub-Gaussian at λ = 1).
    """

    lambda_: float | None = None
    lambdas: tuple | None = None  # the candidates of a tuned λ (None: the class's ``default_lambdas``)
    tuning_method: str = "slope"
    variance: str = "honest"
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
    #: ``"clip"`` (ŵ_λ = min(w, λ)) or ``"switch"`` (w 1{w ≤ λ}): a threshold on w, whose tuned state is built from
    #: per-bin sums (:func:`grid_moments`); empty for the smooth weights, whose state stacks their terms.
    threshold: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Write the tuning parameters into the subclass's numpydoc Parameters where its docstring says
        :data:`TUNING_PARAMETERS` (one text for every estimator that tunes λ)."""
        super().__init_subclass__(**kwargs)
        if cls.__doc__ and TUNING_PARAMETERS in cls.__doc__:
            lambdas = "SUBGAUSSIAN_LAMBDAS" if cls.default_lambdas is SUBGAUSSIAN_LAMBDAS else "CLIPPING_LAMBDAS"
            cls.__doc__ = cls.__doc__.replace(TUNING_PARAMETERS, _TUNING_PARAMETERS_DOC.format(lambdas=lambdas))

    def __post_init__(self) -> None:
        tuning = {f.name: getattr(self, f.name) for f in fields(self) if f.name in _TUNING_FIELDS}
        if self.fixed_form and self.lambda_ is not None:
            raise ParameterError(f"{self.name} chooses `lambda_`; for a fixed one write "
                                 f"{self.fixed_form.format(self.lambda_)}")
        if self.lambda_ is not None:
            # IPS(), DR() (float ∞ where the rule allows it): no pydantic import
            if not (self.lambda_ == math.inf and isinstance(self.lambda_, float)
                    and self.lambda_rule == "NonNegativeOrInf"):
                object.__setattr__(self, "lambda_", checked(self.lambda_rule, "lambda_", self.lambda_))
            given = [name for name, value in tuning.items() if value != _TUNING_DEFAULTS[name]]
            if given:
                raise ParameterError(f"{', '.join(f'`{g}`' for g in given)} tunes `lambda_`: leave `lambda_` out "
                                     "(or None) to choose it from the data, or give a fixed `lambda_` alone")
        if self.lambdas is not None:
            items = _spec_list(self.lambdas)
            if not items:
                raise ParameterError("`lambdas` should hold at least one candidate λ")
            values = sorted({checked(self.lambda_rule, "lambdas", v) for v in items}, reverse=self.descending)
            object.__setattr__(self, "lambdas", tuple(values))
        method = str(self.tuning_method).strip().strip("'\"")
        if method not in TUNING_METHODS:
            raise ParameterError(f"`tuning_method` should be {' or '.join(TUNING_METHODS)} "
                                 f"(got {self.tuning_method!r})")
        object.__setattr__(self, "tuning_method", method)
        variance = str(self.variance).strip().strip("'\"")
        if variance not in VARIANCES:
            raise ParameterError(f"`variance` should be {' or '.join(VARIANCES)} (got {self.variance!r})")
        object.__setattr__(self, "variance", variance)
        object.__setattr__(self, "use_bias_upper_bound", _spec_bool("use_bias_upper_bound", self.use_bias_upper_bound))
        if self.delta != OBP_TUNING_DELTA or not isinstance(self.delta, float):
            object.__setattr__(self, "delta", checked("Alpha", "delta", self.delta))

    def _args(self) -> str:
        return ", ".join(f"{f.name}={_spec_value(getattr(self, f.name))}" for f in fields(self)
                         if getattr(self, f.name) != f.default)

    def __repr__(self) -> str:
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

    @abstractmethod
    def shrink(self, w: np.ndarray, lam: float) -> np.ndarray:
        """ŵ_λ(w), the modified weights at λ."""

    def term(self, rows: RowInputs, w_hat: np.ndarray) -> np.ndarray:
        """The per-row term with the weights ``w_hat``: ŵ r, or ρ̂_π + ŵ (r − ρ̂_a) with a model."""
        if not self.needs_model:
            out: np.ndarray = w_hat * rows.reward
            return out
        out = rows.reward_hat_pi + w_hat * (rows.reward - rows.reward_hat_logged)
        return out

    def shared_terms(self) -> tuple[str, ...]:
        """At λ = ∞ of a plain estimator (IPS, DR), its terms' names in
        :data:`~dr_scale.ope.estimators.base.SHARED_TERMS`: (w r, w) or (ρ̂_π + w d, w, ρ̂_π); else ()."""
        if not (self.lambda_ == math.inf and self.plain_at_inf):
            return ()
        return ("ρ̂_π + w d", "w", "ρ̂_π") if self.needs_model else ("w r", "w")

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """The per-row terms: at a fixed λ, the term with ŵ_λ(w); at λ = ∞ (plain), (w r, w[, ρ̂_π]); with λ
        tuned, one term per candidate λ, their modified weights, u² (u = r − ρ̂_a or r), then the untouched
        term and w.
        """
        if self.lambda_ == math.inf and self.plain_at_inf:
            if not self.needs_model:
                return [self.term(rows, rows.weight), rows.weight]
            if rows.reward_hat_pi is None:
                raise ParameterError(f"{self.name} needs a reward model ρ̂ (`reward_hat`); none was given")
            return [self.term(rows, rows.weight), rows.weight, rows.reward_hat_pi]
        if self.lambda_ is not None:
            return [self.term(rows, self.shrink(rows.weight, self.lambda_))]
        shrunk = [self.shrink(rows.weight, lam) for lam in self.candidates]
        u = rows.reward - rows.reward_hat_logged if self.needs_model else rows.reward
        return [*(self.term(rows, w_hat) for w_hat in shrunk), *shrunk, u * u, self.term(rows, rows.weight),
                rows.weight]

    def state(self, rows: RowInputs) -> Moments:
        """A tuned λ's state: the moments of :meth:`terms`; a candidate's term (or modified weight) equal to the
        unmodified one or to the previous candidate's on every row of the batch gets its statistics bit for bit,
        so that ties stay exact ties (as obp's)."""
        if self.lambda_ is not None:
            return super().state(rows)
        if self.needs_model and rows.reward_hat_pi is None:
            raise ParameterError(f"{self.name} needs a reward model ρ̂ (`reward_hat`); none was given")
        if self.threshold:
            grid = np.array(sorted({*self.candidates, math.inf}))
            size, where = grid.size, np.searchsorted(grid, self.candidates)
            state = grid_moments(rows, grid, self.threshold == "clip", self.needs_model)
            # t_j and ŵ_j of the candidates, u², then t and ŵ at ∞: the unmodified term and w
            return state.take([*where, *(size + where), 2 * size, size - 1, 2 * size - 1])
        z = self.terms(rows)
        return with_ties(Moments.of(*z, ranges=rows.ranges), self.tie_sources(z))

    def tie_sources(self, z: list[np.ndarray]) -> list[int]:
        """For each quantity of a tuned λ's state, the first one equal to it on every row: for a candidate's term
        the unmodified term, then the previous candidate's; for its modified weight w, then the previous one's —
        the quantities whose statistics :func:`with_ties` makes equal bit for bit."""
        source = list(range(len(z)))
        if self.lambda_ is not None:
            return source
        size = len(self.candidates)
        for first, unmodified in ((0, 2 * size + 1), (size, 2 * size + 2)):
            for j in range(first, first + size):
                if np.array_equal(z[j], z[unmodified]):
                    source[j] = unmodified
                elif j > first and np.array_equal(z[j], z[j - 1]):
                    source[j] = source[j - 1]
        return source

    def choose(self, state: Moments) -> int:
        """The index of the chosen candidate in :attr:`candidates`, by ``tuning_method`` (obp's rules; class doc)."""
        size, n = len(self.candidates), state.n
        if n < 2:
            return 0
        mean = state.mean[:size]
        # the 1/n variances: honest, or np.var's
        var = honest_variances(state, size) if self.variance == "honest" else np.diag(state.comoment)[:size] / n
        if self.tuning_method == "mse":
            bias = np.abs(state.mean[2 * size + 1] - mean)
            if self.use_bias_upper_bound:
                log_term = math.log(2 / self.delta)
                mean_w2 = state.comoment[2 * size + 2, 2 * size + 2] / n + state.mean[2 * size + 2] ** 2
                bias = bias + math.sqrt(2 * mean_w2 * log_term / n) + 2 * float(state.high[1]) * log_term / (3 * n)
            return int(np.argmin(var / n + bias ** 2))  # the first minimum, as obp's min over its dict
        return slope(mean, slope_widths(var, n, self.delta))

    @property
    def guarantee(self) -> bool:
        """IPS and DR themselves (λ = ∞) have the central limit theorem's guarantee; a clipped, shrunk or tuned
        weight adds a bias no interval accounts for."""
        return self.clt and self.lambda_ == math.inf

    def tuning(self, state: Moments) -> str | None:
        """With λ tuned: which λ and why (:func:`tuning_reason`), with the ESS of the weights w and, with honest
        variances, the candidates whose variance they raised (:func:`raised_note`)."""
        if self.lambda_ is not None or state.n < 2:
            return None
        weights = 2 * len(self.candidates) + 2  # the index of w in the state
        reason = tuning_reason(self.tuning_method, "λ", self.candidates, self.choose(state),
                               float(kish_ess(state.n, state.mean[weights], state.comoment[weights, weights])))
        if self.variance == "sample":
            return reason
        return reason + raised_note(state, "λ", self.candidates, "(r − ρ̂)" if self.needs_model else "r")

    def linearize(self, state: Moments) -> tuple[float, np.ndarray, dict]:
        """At a fixed λ, the base's; with λ tuned, the mean of the chosen candidate's term (:meth:`choose`), its
        unit gradient and ``{"lambda_": λ}``.
        """
        if self.lambda_ is not None:
            return super().linearize(state)
        best = self.choose(state)
        return float(state.mean[best]), np.eye(state.m)[best], {"lambda_": self.candidates[best]}

    def el_ranges(self, state: Moments) -> tuple[float, Range, Range, Range]:
        """IPS's and DR's at λ = ∞; otherwise the interval is a plain mean's, which uses the rewards' range alone."""
        if self.lambda_ is not None and len(self.el_map[0]) == state.m:
            return super().el_ranges(state)
        return state.high[1], (0.0, 0.0), (0.0, 0.0), (state.low[0], state.high[0])

    def summary(self, state: Moments, grad: np.ndarray, value: float | None = None) -> Summary:
        """A tuned λ's: the empirical-likelihood summary of a plain mean of the chosen term (``grad`` picks it)."""
        if self.lambda_ is not None:
            return super().summary(state, grad, value)
        var = float(grad @ state.comoment @ grad) / state.n
        return summary_of(state.n, np.array([grad @ state.mean]), np.array([[var]]), *self.el_ranges(state),
                          weighted=False, estimate=value)


_TUNING_FIELDS = ("lambdas", "tuning_method", "variance", "use_bias_upper_bound", "delta")
_TUNING_DEFAULTS = {"lambdas": None, "tuning_method": "slope", "variance": "honest", "use_bias_upper_bound": True,
                    "delta": OBP_TUNING_DELTA}
