"""A reward model's calibration on the rows it was fitted on, printed with every fit (``fit``, ``evaluate
--fit-reward-model``): the direct method's value of the logging policy beside the log's own mean reward, both with
their intervals, and the reliability of the predictions by decile — one pass over the rows, mergeable.

Each logged row i is predicted by the model that did not see it where the model is cross-fitted (fold model f_i,
as DM and DR use it), else by the full-data model (in sample). Then

* **DM of the logging policy** is V̂_DM = (1/n) Σ_i ρ̂(x_i, a_i) (the logged action is the logging policy's draw),
  with the normal interval V̂_DM ± z_{1−α/2} s_ρ̂/√n (s_ρ̂ the predictions' standard deviation: the rows' noise, not
  the model's), beside the **own mean** r̄ = (1/n) Σ_i r_i ± z_{1−α/2} s_r/√n. They disagree when V̂_DM lies outside
  the own mean's interval: the model's predictions are biased on its own rows, and every DM and DR figure made with
  it inherits that bias (DR only through the correction's variance). A warning line says so.
* **Reliability by decile**: the rows ordered by their prediction, cut into ten groups of about n/10 rows; per group
  its rows, mean prediction and mean reward, and the expected calibration error
  ECE = Σ_g (n_g/n) |mean_g ρ̂ − mean_g r| (Naeini, Cooper & Hauskrecht 2015, AAAI: "Obtaining well calibrated
  probabilities using Bayesian binning"). The deciles are read off a histogram of the predictions on the scale
  asinh(ρ̂ / 10⁻⁴) (:data:`BINS` bins over ±:data:`SPAN`: 1% apart above 10⁻⁴, 10⁻⁶ below), so that one pass and
  a sum over the parts give them; a group's edges are bin edges, so its rows are n/10 up to one bin's rows (fewer
  groups where one prediction holds more than a tenth of the rows, e.g. a constant model).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from scipy.stats import norm

from dr_scale.crossfit.parts import GroupedPart

#: The histogram's bins over asinh(ρ̂ / SCALE) ∈ [−SPAN, SPAN] (predictions beyond go to the end bins).
BINS = 4000
SPAN = 20.0
SCALE = 1e-4
#: The groups of the reliability table.
GROUPS = 10


def calibration_terms(part: GroupedPart, coef: np.ndarray, intercept: np.ndarray, groups: int, n_actions: int,
                      logistic: bool, columns: np.ndarray | None = None) -> np.ndarray:
    """(5 + 3·BINS,): over the part's rows, n, Σ r, Σ r², Σ ρ̂, Σ ρ̂², then per histogram bin its rows, Σ ρ̂ and Σ r;
    block b = f·k + a predicted by fit b (coef (F, d), intercept (F,): the fold models first where ``groups`` > 1
    folds, else the k full-data models), through σ if ``logistic``; ``columns`` as
    :meth:`~dr_scale.crossfit.parts.GroupedPart.blocks`."""
    out = np.zeros(5 + 3 * BINS)
    d = coef.shape[1]
    for b in range(groups * n_actions):
        for lo, hi, X in part.chunks(b, b + 1, d, columns):
            z = X @ coef[b] + intercept[b]
            p = expit(z) if logistic else z
            r = part.reward[lo:hi]
            out[:5] += hi - lo, r.sum(), r @ r, p.sum(), p @ p
            where = np.clip(((np.arcsinh(p / SCALE) + SPAN) * (BINS / (2 * SPAN))).astype(np.int64), 0, BINS - 1)
            out[5:].reshape(3, BINS)[:] += [np.bincount(where, minlength=BINS), np.bincount(where, p, BINS),
                                            np.bincount(where, r, BINS)]
    return out


def calibration_record(total: np.ndarray, cross_fitted: bool, alpha: float = 0.05) -> dict:
    """The calibration of the summed :func:`calibration_terms` (module docstring) as the model's metadata records it:
    rows, own mean and DM of the logging policy with their 1 − α normal intervals, whether they agree, the
    reliability groups [rows, mean ρ̂, mean r] and the ECE; ``cross_fitted``: whether the rows were predicted out
    of fold."""
    n, sr, srr, sp, spp = total[:5]
    count, psum, rsum = total[5:].reshape(3, BINS)
    z = float(norm.ppf(1 - alpha / 2))
    half = [z * np.sqrt(max(s2 / n - (s / n) ** 2, 0.0) * n / max(n - 1, 1) / n) for s, s2 in ((sr, srr), (sp, spp))]
    own, dm = sr / n, sp / n
    before = np.cumsum(count) - count
    decile = np.minimum((GROUPS * before / n).astype(np.int64), GROUPS - 1)
    rows = np.bincount(decile, count, GROUPS)
    used = rows > 0
    mean_p = np.bincount(decile, psum, GROUPS)[used] / rows[used]
    mean_r = np.bincount(decile, rsum, GROUPS)[used] / rows[used]
    ece = float(np.sum(rows[used] / n * np.abs(mean_p - mean_r)))
    return {"predicted": "out of fold" if cross_fitted else "in sample", "rows": int(n), "alpha": alpha,
            "own_mean": float(own), "own_interval": [float(own - half[0]), float(own + half[0])],
            "dm": float(dm), "dm_interval": [float(dm - half[1]), float(dm + half[1])],
            "agrees": bool(abs(dm - own) <= half[0]), "ece": ece,
            "deciles": [[int(c), float(p), float(r)] for c, p, r in zip(rows[used], mean_p, mean_r)]}


def calibration_lines(record: dict) -> list[str]:
    """The calibration record as text: DM of the logging policy beside the own mean, a warning where they disagree,
    and the reliability table."""
    level = f"{100 * (1 - record['alpha']):g}%"
    predicted = ("cross-fitted: each row by the fold model that did not see it" if record["predicted"] == "out of fold"
                 else "in-sample reward model: each row by the model fitted on it")
    lo, hi = record["own_interval"]
    dlo, dhi = record["dm_interval"]
    lines = [f"calibration on the {record['rows']:,} logged rows ({predicted}):",
             f"  DM of the logging policy {record['dm']:.6g} [{dlo:.6g}, {dhi:.6g}]   own mean reward "
             f"{record['own_mean']:.6g} [{lo:.6g}, {hi:.6g}]   ({level} intervals; DM/own − 1 = "
             + (f"{record['dm'] / record['own_mean'] - 1:+.1%})" if record["own_mean"] else "n/a)")]
    if not record["agrees"]:
        lines.append(f"  warning: DM of the logging policy lies outside the own mean's {level} interval: the reward "
                     "model is biased on its own rows, and DM (DR less) inherits it")
    lines.append(f"  reliability by decile of ρ̂ (ECE {record['ece']:.3g}):  "
                 + "  ".join(f"{p:.4g}/{r:.4g}" for _, p, r in record["deciles"]) + "  (mean ρ̂ / mean reward)")
    return lines
