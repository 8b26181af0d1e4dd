"""A fitted reward model's figures as ``fit`` and ``evaluate --fit-reward-model`` print them: the model and why
(:func:`model_line`), λ, rows, passes and per action its rows, intercept, ‖w‖ and the out-of-fold figure of the λ
search (:func:`summary`), from the metadata record of the cross-fitting driver (:mod:`dr_scale.crossfit.engine`).
"""

from __future__ import annotations

import numpy as np

from dr_scale.core.numbers import number
from dr_scale.outofcore import glm
from dr_scale.reward.calibration import calibration_lines
from dr_scale.reward.models import LinearRewardModel


def model_line(model: LinearRewardModel) -> str | None:
    """The reward model fitted and why: ``model: logistic (every reward is 0 or 1)`` (None for a model that does
    not record it)."""
    m = model.metadata
    if "model" not in m:
        return None
    why = m.get("model_chosen_by")
    return f"model: {m['model']}" + ("" if why is None else f" ({'--model' if why == 'model' else why})")


def summary(model: LinearRewardModel) -> str:
    """A fitted model's figures as text: the model, λ, rows, and per action its rows, intercept, ‖w‖ and the
    out-of-fold figure of the λ search (R² for ridge, log loss for logistic); then its calibration
    (:func:`calibration_summary`)."""
    m = model.metadata
    first = model_line(model)
    text = _logistic_summary(model) if m.get("model") == "logistic" else _ridge_summary(model)
    text = "\n".join([text, *calibration_summary(model)])
    return f"{first}\n{text}" if first else text


def calibration_summary(model: LinearRewardModel) -> list[str]:
    """The logistic model's prior (:func:`~dr_scale.reward.fitting.rate_prior`) and the calibration on the rows it
    was fitted on (:func:`~dr_scale.reward.calibration.calibration_lines`), as lines (none where not recorded)."""
    m = model.metadata
    lines = []
    prior = m.get("prior")
    if prior is not None:
        shrunk, k = len(prior["shrunk_actions"]), m["n_actions"]
        exact = f"prior: {k - shrunk} of {k} actions (≥ {prior['exact_events']} rewarded and unrewarded rows) " \
                "calibrated exactly"
        lines.append(f"{exact}; {shrunk} shrunk toward the pooled rate p̄ = {prior['centre']:.6g} by m = "
                     f"{prior['rows']:.4g} prior rows (Beta(m p̄, m(1 − p̄)), empirical Bayes)" if shrunk
                     else f"{exact}; none shrunk")
    if "calibration" in m:
        lines += calibration_lines(m["calibration"])
    return lines


def _logistic_summary(model: LinearRewardModel) -> str:
    m = model.metadata
    search = m.get("lambda_search")
    lines = [_fit_line(m, f"{m['passes']} L-BFGS passes"),
             f"{'action':>6} {'rows':>12} {'mean ρ̂ at x=0':>14} {'‖w‖':>10}"
             + (f" {'sample log loss':>16}" if search else "")]
    for a in range(model.n_actions):
        line = (f"{a:>6} {m['rows_per_action'][a]:>12,} {float(glm.expit(model.intercept[a])):>14.6g} "
                f"{np.linalg.norm(model.coef[:, a]):>10.4g}")
        if search:
            rows = search["sample_rows_per_action"][a]
            loss = search["out_of_fold_log_loss"][search["chosen"]][a]
            line += f" {number(loss / rows if rows else None, 4):>16}"
        lines.append(line)
    if search:
        lines.append(_search_line(search, "out-of-fold log loss", "out_of_fold_log_loss"))
    return "\n".join(lines)


def _ridge_summary(model: LinearRewardModel) -> str:
    m = model.metadata
    search = m.get("lambda_search")
    lines = [_fit_line(m, f"{m['passes']} CG passes"),
             f"{'action':>6} {'rows':>12} {'intercept':>12} {'‖w‖':>10}"
             + (f" {'sample R²':>12} {'sample MSE':>12}" if search else "")]
    for a in range(model.n_actions):
        line = (f"{a:>6} {m['rows_per_action'][a]:>12,} {model.intercept[a]:>12.6g} "
                f"{np.linalg.norm(model.coef[:, a]):>10.4g}")
        if search:
            rows = search["sample_rows_per_action"][a]
            r2, sse = search["out_of_fold_r2"][search["chosen"]][a], search["out_of_fold_sse"][search["chosen"]][a]
            line += f" {number(r2, 4):>12} {number(sse / rows if rows else None, 4):>12}"
        lines.append(line)
    if search:
        lines.append(_search_line(search, "out-of-fold squared error", "out_of_fold_sse"))
    return "\n".join(lines)


def _fit_line(m: dict, passes: str) -> str:
    """The first line of a fit's summary, from its metadata ``m``: λ, rows, d, k, folds, ``passes``, fingerprint."""
    search = m.get("lambda_search")
    return (f"λ = {m['lam']:g}{' (auto)' if search else ''}, {m['rows']:,} rows, {m['n_features']} features, "
            f"{m['n_actions']} actions, "
            + (f"cross-fitted over {m['folds']} folds" if m['folds'] else "in-sample reward model (no folds)")
            + f", {passes}"
            + (f" (+ {search['passes']} on the λ sample)" if search else "") + f", fingerprint {m.get('fingerprint')}")


def _search_line(search: dict, loss: str, key: str) -> str:
    """The last line of a fit's summary after a λ search: the total out-of-fold ``loss`` (``search[key]``) per λ."""
    return f"{loss} on {search['sample_rows']:,} sampled rows per λ: " + ", ".join(
        f"{g:g}: {'not fitted' if row is None else f'{sum(row):.6g}'}" for g, row in zip(search["grid"], search[key]))

