"""Diagnostics of an estimated logging policy π̂₀(a | x), as one mergeable state per partition.

Computed in the same pass as the estimates (:meth:`dr_scale.ope.evaluation.Evaluation.state`), from the
estimated probabilities P̂ (n, k) of a partition's rows (each row's from the fold model that did not see
it), the logged actions a_i, the target policy's probabilities π(a | x_i) and, where the log has them, the
logged propensities p_i:

* **floor**: p̂_i = max(π̂₀(a_i | x_i), floor); the rows floored are counted;
* **calibration** (one-vs-rest per action, Kull et al. 2019, "Beyond temperature scaling", classwise ECE):
  the pairs (π̂₀(a | x_i), 1{a_i = a}) binned by π̂₀ into :data:`CALIBRATION_EDGES` per action;
  ECE = (1/k) Σ_a Σ_b (n_ab / n) |ȳ_ab − p̄_ab|, and the reliability curve of a group of actions is
  (p̄_b, ȳ_b) over its pairs. Brier score (Brier 1950, multiclass): (1/n) Σ_i Σ_a (π̂₀(a | x_i) − 1{a_i = a})²;
* **log loss** −(1/n) Σ_i log π̂₀(a_i | x_i) beside two baselines that use no context: the uniform policy
  (log k) and the marginal action frequencies −Σ_a f_a log f_a (f_a = n_a / n, in-sample);
* **logged vs estimated** where the log has both: Pearson's correlation of p_i and p̂_i and quantiles of
  the ratio p̂_i / p_i (a fixed log-spaced histogram, mergeable by adding counts, to ±0.25 %);
* **support**: the share of the target policy's probability mass on actions whose estimated
  propensity is below the floor, (1/n) Σ_i Σ_a π(a | x_i) 1{π̂₀(a | x_i) < floor}: there IPS and DR
  rest on the floor's weight, not on the data.

Every field is a sum, a count or a histogram: :class:`PropensityState` merges with ``+`` (associative,
exact for the counts) and round-trips through ``to_dict``/``from_dict`` (the contract of
:mod:`dr_scale.outofcore.mergeable`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: The default propensity floor of estimated propensities: p̂_i = max(π̂₀(a_i | x_i), floor), a weight at most
#: 1 / floor = 1000. Logged propensities are never floored (they are the logger's own).
DEFAULT_PROPENSITY_FLOOR = 1e-3
#: "Support fails" when more than this share of the target policy's mass is on actions whose estimated
#: propensity is below the floor.
SUPPORT_WARNING_SHARE = 0.01
#: Calibration bins of π̂₀: [0, 1e-4), then 20 log-spaced bins from 1e-4 to 1 (5 per decade).
CALIBRATION_EDGES = np.concatenate([[0.0], np.logspace(-4, 0, 21)])
#: Bins of log(p̂ / p): 0.005 wide on [−5, 5], plus one below and one above (ratio quantiles to ±0.25 %).
RATIO_EDGES = np.linspace(-5.0, 5.0, 2001)
#: The smallest probability a log loss takes (log 0 is −∞).
LOG_LOSS_EPS = 1e-15
#: A reliability bin is shown when the logged actions it expects, Σ π̂₀, are at least this many: the observed
#: frequency of a bin expecting fewer is mostly noise (a Poisson count of mean < 5).
MIN_EXPECTED = 5.0
#: At most this many action groups get a reliability curve (consecutive action ids).
MAX_GROUPS = 8


def _bins(p: np.ndarray) -> np.ndarray:
    """The calibration bin of each probability (the last bin closed at 1)."""
    return np.clip(np.searchsorted(CALIBRATION_EDGES, p, side="right") - 1, 0, CALIBRATION_EDGES.size - 2)


@dataclass(frozen=True)
class PropensityState:
    """The mergeable sums of the propensity diagnostics over some rows (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> P = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4]])
    >>> state = PropensityState.of(P, np.array([0, 1, 1]), floor=0.25)
    >>> merged = PropensityState.of(P[:1], np.array([0]), floor=0.25) + PropensityState.of(
    ...     P[1:], np.array([1, 1]), floor=0.25)
    >>> round(merged.summary()["brier"], 6) == round(state.summary()["brier"], 6)
    True
    >>> state.floored, round(state.summary()["log_loss"]["model"], 4)
    (0, 0.4987)
    """

    n: int
    floor: float
    floored: int  # rows with π̂₀(a_i | x_i) < floor
    log_loss_sum: float  # Σ −log π̂₀(a_i | x_i)
    brier_sum: float  # Σ_i Σ_a (π̂₀(a | x_i) − 1{a_i = a})²
    action_counts: np.ndarray  # (k,) rows per logged action
    bin_counts: np.ndarray  # (k, B) pairs per action and bin
    bin_p: np.ndarray  # (k, B) Σ π̂₀ per action and bin
    bin_y: np.ndarray  # (k, B) Σ 1{a_i = a} per action and bin
    support_mass: float  # Σ_i Σ_a π(a | x_i) 1{π̂₀(a | x_i) < floor}
    n_logged: int  # rows with a logged propensity
    logged_sums: np.ndarray  # (5,) Σ p, Σ p̂, Σ p², Σ p̂², Σ p p̂
    ratio_counts: np.ndarray  # (len(RATIO_EDGES) + 1,) histogram of log(p̂ / p)

    @classmethod
    def empty(cls, k: int, floor: float = DEFAULT_PROPENSITY_FLOOR) -> PropensityState:
        """The state of no rows over k actions (the identity of ``+``)."""
        B = CALIBRATION_EDGES.size - 1
        return cls(0, float(floor), 0, 0.0, 0.0, np.zeros(k, np.int64), np.zeros((k, B), np.int64),
                   np.zeros((k, B)), np.zeros((k, B)), 0.0, 0, np.zeros(5), np.zeros(RATIO_EDGES.size + 1, np.int64))

    @classmethod
    def of(cls, probs: np.ndarray, action: np.ndarray, *, floor: float = DEFAULT_PROPENSITY_FLOOR,
           target: np.ndarray | None = None, logged: np.ndarray | None = None) -> PropensityState:
        """The state of a batch: ``probs`` (n, k) the estimated π̂₀(· | x_i), ``action`` (n,) the logged actions,
        ``target`` the target policy's (n, k) probabilities or (n,) actions (None: no support figure),
        ``logged`` (n,) the logged propensities (None or NaN where the log has none)."""
        n, k = probs.shape
        rows = np.arange(n)
        p_logged = probs[rows, action]
        y = np.zeros((n, k))
        y[rows, action] = 1.0
        bins = _bins(probs)
        flat = (np.arange(k)[None, :] * (CALIBRATION_EDGES.size - 1) + bins).ravel()
        size = k * (CALIBRATION_EDGES.size - 1)
        counts = np.bincount(flat, minlength=size).reshape(k, -1)
        bin_p = np.bincount(flat, probs.ravel(), minlength=size).reshape(k, -1)
        bin_y = np.bincount(flat, y.ravel(), minlength=size).reshape(k, -1)
        low = probs < floor
        if target is None:
            support = 0.0
        elif target.ndim == 1:
            support = float(low[rows, target].sum())
        else:
            support = float((target * low).sum())
        if logged is None or not np.isfinite(logged).any():
            n_logged, sums, ratio_counts = 0, np.zeros(5), np.zeros(RATIO_EDGES.size + 1, np.int64)
        else:
            both = np.isfinite(logged)
            p, q = logged[both], p_logged[both]
            sums = np.array([p.sum(), q.sum(), p @ p, q @ q, p @ q])
            ratio = np.searchsorted(RATIO_EDGES, np.log(np.maximum(q, LOG_LOSS_EPS) / p), side="right")
            n_logged = int(both.sum())
            ratio_counts = np.bincount(ratio, minlength=RATIO_EDGES.size + 1).astype(np.int64)
        return cls(int(n), float(floor), int((p_logged < floor).sum()),
                   float(-np.log(np.maximum(p_logged, LOG_LOSS_EPS)).sum()), float(((probs - y) ** 2).sum()),
                   np.bincount(action, minlength=k).astype(np.int64), counts.astype(np.int64), bin_p, bin_y,
                   support, n_logged, sums, ratio_counts)

    def __add__(self, other: PropensityState) -> PropensityState:
        k = max(self.action_counts.size, other.action_counts.size)

        def pad(x):
            """``x`` padded with zero rows to k actions."""
            return x if x.shape[0] == k else np.concatenate([x, np.zeros((k - x.shape[0],) + x.shape[1:], x.dtype)])

        return PropensityState(self.n + other.n, self.floor, self.floored + other.floored,
                               self.log_loss_sum + other.log_loss_sum, self.brier_sum + other.brier_sum,
                               pad(self.action_counts) + pad(other.action_counts),
                               pad(self.bin_counts) + pad(other.bin_counts), pad(self.bin_p) + pad(other.bin_p),
                               pad(self.bin_y) + pad(other.bin_y), self.support_mass + other.support_mass,
                               self.n_logged + other.n_logged, self.logged_sums + other.logged_sums,
                               self.ratio_counts + other.ratio_counts)

    # -- figures -------------------------------------------------------------------------
    @property
    def k(self) -> int:
        """k, the actions counted."""
        return int(self.action_counts.size)

    def ece(self) -> float:
        """Classwise expected calibration error (1/k) Σ_a Σ_b (n_ab / n) |ȳ_ab − p̄_ab|."""
        if self.n == 0:
            return math.nan
        return float(np.abs(self.bin_y - self.bin_p).sum() / (self.n * self.k))

    def support_share(self) -> float:
        """The share of the target's mass on actions whose estimated propensity is below the floor."""
        return self.support_mass / self.n if self.n else math.nan

    def support_fails(self, share: float = SUPPORT_WARNING_SHARE) -> bool:
        """Whether more than ``share`` of π's mass falls where π̂₀ < floor (:meth:`support_share`)."""
        return self.n > 0 and self.support_share() > share

    def log_losses(self) -> dict:
        """The model's log loss, the uniform policy's (log k) and the marginal frequencies' (−Σ f log f)."""
        f = self.action_counts[self.action_counts > 0] / max(self.n, 1)
        return {"model": self.log_loss_sum / self.n if self.n else math.nan, "uniform": math.log(self.k),
                "marginal": float(-(f * np.log(f)).sum())}

    def logged_comparison(self) -> dict | None:
        """Correlation of logged and estimated propensities and quantiles of p̂ / p (None without logged ones)."""
        if self.n_logged < 2:
            return None
        m = self.n_logged
        sp_, sq, spp, sqq, spq = self.logged_sums
        cov = spq / m - sp_ / m * sq / m
        var_p, var_q = spp / m - (sp_ / m) ** 2, sqq / m - (sq / m) ** 2
        constant = var_p <= 1e-12 * (sp_ / m) ** 2 or var_q <= 1e-12 * (sq / m) ** 2  # rounding, not spread
        corr = math.nan if constant else float(cov / math.sqrt(var_p * var_q))
        return {"rows": m, "correlation": corr,
                "ratio_quantiles": {str(q): self.ratio_quantile(q) for q in (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)}}

    def ratio_quantile(self, q: float) -> float:
        """The q-quantile of p̂ / p from the histogram (a bin's mid-point; the edge bins' inner edges)."""
        cum = np.cumsum(self.ratio_counts)
        j = int(np.searchsorted(cum, q * cum[-1], side="left"))
        if j == 0:
            return float(math.exp(RATIO_EDGES[0]))
        if j >= RATIO_EDGES.size:
            return float(math.exp(RATIO_EDGES[-1]))
        return float(math.exp((RATIO_EDGES[j - 1] + RATIO_EDGES[j]) / 2))

    def groups(self, max_groups: int = MAX_GROUPS) -> list[tuple[int, int]]:
        """Consecutive action ranges [first, last] of at most ``max_groups`` groups."""
        bounds = np.linspace(0, self.k, min(self.k, max_groups) + 1).astype(int)
        return [(int(bounds[g]), int(bounds[g + 1]) - 1) for g in range(bounds.size - 1)]

    def reliability(self, max_groups: int = MAX_GROUPS) -> list[dict]:
        """Per action group: the bins expecting at least MIN_EXPECTED logged actions: their mean estimated propensity,
        observed frequency and pair count."""
        out = []
        for first, last in self.groups(max_groups):
            c = self.bin_counts[first:last + 1].sum(axis=0)
            keep = self.bin_p[first:last + 1].sum(axis=0) >= MIN_EXPECTED
            out.append({"actions": [first, last], "count": c[keep].tolist(),
                        "predicted": (self.bin_p[first:last + 1].sum(axis=0)[keep] / c[keep]).tolist(),
                        "observed": (self.bin_y[first:last + 1].sum(axis=0)[keep] / c[keep]).tolist()})
        return out

    def summary(self) -> dict:
        """Every figure, JSON-ready."""
        out = {"rows": self.n, "floor": self.floor, "floored_rows": self.floored,
               "ece": self.ece(), "brier": self.brier_sum / self.n if self.n else math.nan,
               "log_loss": self.log_losses(), "support_share_below_floor": self.support_share(),
               "support_fails": self.support_fails(), "reliability": self.reliability()}
        comparison = self.logged_comparison()
        if comparison is not None:
            out["logged_vs_estimated"] = comparison
        return out

    def lines(self) -> list[str]:
        """The figures as the lines the commands print."""
        s, ll = self.summary(), self.log_losses()
        lines = [f"estimated propensities: {s['floored_rows']:,} of {self.n:,} rows floored at {self.floor:g}",
                 f"  calibration: ECE {s['ece']:.4g}, Brier {s['brier']:.4g}",
                 f"  log loss {ll['model']:.4f} (uniform {ll['uniform']:.4f}, marginal frequencies "
                 f"{ll['marginal']:.4f})",
                 f"  support: {100 * s['support_share_below_floor']:.3g}% of the target's mass on actions with "
                 f"p̂ < {self.floor:g}"]
        comparison = s.get("logged_vs_estimated")
        if comparison is not None:
            q = comparison["ratio_quantiles"]
            corr = comparison["correlation"]
            corr = f"{corr:.4f}" if math.isfinite(corr) else "— (the logged propensities are constant)"
            lines.append(f"  logged vs estimated: correlation {corr}, p̂/p quantiles "
                         f"5% {q['0.05']:.3f}, 50% {q['0.5']:.3f}, 95% {q['0.95']:.3f}")
        return lines

    def warnings(self, with_dm: bool = True) -> list[str]:
        """Support failure and a model no better than the context-free baselines, in words; ``with_dm``: DM is
        among the estimates (else the advice is to fit a reward model for it, not to compare with it)."""
        out = []
        if self.support_fails():
            advice = ("compare with DM" if with_dm
                      else "fit a reward model (--fit-reward-model) and compare with DM, which reads no propensity")
            out.append(f"support fails: {100 * self.support_share():.3g}% of the target policy's probability mass "
                       f"is on actions whose estimated propensity is below the floor {self.floor:g}; there IPS and "
                       f"DR rest on the floor's weight, not on the data: {advice}")
        ll = self.log_losses()
        if self.n and ll["model"] >= min(ll["uniform"], ll["marginal"]):
            out.append(f"the propensity model's log loss {ll['model']:.4f} is no better than a context-free "
                       f"baseline's (uniform {ll['uniform']:.4f}, marginal frequencies {ll['marginal']:.4f}): the "
                       "features do not predict the logged action — the logging policy did not depend on them "
                       "(then p̂ is near the action frequencies, rightly), or the model is another log's")
        return out

    def to_dict(self) -> dict:
        """The state as a JSON-ready dict."""
        return {"n": self.n, "floor": self.floor, "floored": self.floored, "log_loss_sum": self.log_loss_sum,
                "brier_sum": self.brier_sum, "action_counts": self.action_counts.tolist(),
                "bin_counts": self.bin_counts.tolist(), "bin_p": self.bin_p.tolist(), "bin_y": self.bin_y.tolist(),
                "support_mass": self.support_mass, "n_logged": self.n_logged,
                "logged_sums": self.logged_sums.tolist(), "ratio_counts": self.ratio_counts.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> PropensityState:
        """The state of ``d`` (``from_dict(s.to_dict())`` equals ``s``)."""
        B = CALIBRATION_EDGES.size - 1
        k = len(d["action_counts"])
        return cls(int(d["n"]), float(d["floor"]), int(d["floored"]), float(d["log_loss_sum"]),
                   float(d["brier_sum"]), np.asarray(d["action_counts"], np.int64),
                   np.asarray(d["bin_counts"], np.int64).reshape(k, B), np.asarray(d["bin_p"], float).reshape(k, B),
                   np.asarray(d["bin_y"], float).reshape(k, B), float(d["support_mass"]), int(d["n_logged"]),
                   np.asarray(d["logged_sums"], float), np.asarray(d["ratio_counts"], np.int64))

    def __eq__(self, other) -> bool:
        if not isinstance(other, PropensityState):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    # unhashable (Python's data model); typeshed types object.__hash__ as a method only, not the None it may be
    __hash__ = None  # type: ignore[assignment]


def reliability_figure(state, title: str = "reliability of the estimated propensities"):
    """A matplotlib figure: one panel per action group, mean estimated π̂₀ against the observed frequency of the
    action in each calibration bin (log axes), the diagonal for reference. ``state``: a :class:`PropensityState`
    or its ``reliability()`` curves (as a report's JSON keeps them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = state.reliability() if isinstance(state, PropensityState) else list(state)
    cols = min(4, len(curves))
    rows = -(-len(curves) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    lo = 1e-4
    for ax, curve in zip(axes.ravel(), curves):
        first, last = curve["actions"]
        pred, obs = np.asarray(curve["predicted"]), np.asarray(curve["observed"])
        ax.plot([lo, 1], [lo, 1], color="0.7", lw=1)
        ax.plot(np.maximum(pred, lo), np.maximum(obs, lo), "o-", ms=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, 1)
        ax.set_ylim(lo, 1)
        ax.set_title(f"action {first}" if first == last else f"actions {first}–{last}", fontsize=9)
        ax.set_xlabel("estimated π̂₀(a|x)", fontsize=8)
        ax.set_ylabel("observed frequency", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(curves):]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def reliability_png(state) -> bytes:
    """The reliability figure (:func:`reliability_figure`) as PNG bytes."""
    import io

    import matplotlib.pyplot as plt

    fig = reliability_figure(state)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def save_reliability_png(state, fs, path: str) -> str:
    """The reliability figure as a PNG at ``path`` (written atomically)."""
    from dr_scale.io.atomic import atomic_open

    data = reliability_png(state)
    with atomic_open(fs, path, "wb") as f:
        f.write(data)
    return path


__all__ = ["DEFAULT_PROPENSITY_FLOOR", "PropensityState", "SUPPORT_WARNING_SHARE", "reliability_figure",
           "reliability_png", "save_reliability_png"]
