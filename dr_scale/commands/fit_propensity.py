"""``dr-scale fit-propensity LOGS --out PROPENSITY.npz``: the logging policy π̂₀(a | x) estimated from a log,
cross-fitted (:mod:`dr_scale.propensity`); and the options by which ``evaluate``, ``learn`` and ``report`` use
estimated propensities (``--estimate-propensity``, ``--propensity-model``, ``--propensity-floor``)."""

from __future__ import annotations

from dr_scale.core.errors import UserError
from dr_scale.io.config import PropensityFloor, option
from dr_scale.propensity.diagnostics import DEFAULT_PROPENSITY_FLOOR

#: The cross-fitting folds of an estimated logging policy when ``--folds`` is not given: the propensity of
#: each row must come from a fold model that did not see it (docs/propensities.md, the variance).
DEFAULT_PROPENSITY_FOLDS = 5


def add_parser(sub) -> None:
    """Add ``dr-scale fit-propensity`` and its options to the sub-command parsers ``sub``."""
    from dr_scale.commands.fit import add_fit_arguments

    p = sub.add_parser("fit-propensity", help="estimate the logging policy π₀(a|x) of a log (multinomial logistic, "
                                              "cross-fitted)",
                       description="Fit the multinomial logistic model π̂₀(a|x) = softmax_a(b_a + x·w_a) with an L2 "
                                   "penalty on the log's logged actions, out of core, with K fold models for "
                                   "cross-fitting (row i's propensity comes from the fold model that did not see "
                                   "it). Writes a PropensityModel .npz that evaluate, learn and report read with "
                                   "--propensity-model (docs/propensities.md).")
    add_fit_arguments(p, "PROPENSITY.npz", run, propensity=True)


def add_propensity_options(p) -> None:
    """--estimate-propensity, --propensity-model FILE, --propensity-floor P (evaluate, learn, report)."""
    group = p.add_argument_group("estimated propensities (docs/propensities.md)")
    group.add_argument("--estimate-propensity", action="store_true",
                       help="estimate the logging policy on LOGS first (as dr-scale fit-propensity, cross-fitted "
                            f"with --folds K, default {DEFAULT_PROPENSITY_FOLDS}) and weight each row by the "
                            "estimated propensity of the fold model that did not see it; needed for a log without "
                            "a propensity column, and used instead of the logged one where there is")
    group.add_argument("--propensity-model", metavar="FILE",
                       help="an estimated logging policy (.npz from dr-scale fit-propensity on this log) whose "
                            "cross-fitted propensities replace the logged ones")
    group.add_argument("--propensity-floor", type=option(PropensityFloor, "number in (0, 1)"),
                       default=None, metavar="P",
                       help="floor of estimated propensities p̂ = max(π̂₀(a|x), P): a weight is at most 1/P; the "
                            f"rows floored are reported (default {DEFAULT_PROPENSITY_FLOOR:g}; only with estimated "
                            "propensities)")


def check_propensity_options(args, model_elsewhere: bool = False) -> None:
    """The propensity options agree: not both a file and a fit, and ``--propensity-floor`` only with estimated
    propensities (a file, a fit, or — ``model_elsewhere`` — the report's policies file's ``propensity_model``);
    then its default is set."""
    estimated = getattr(args, "estimate_propensity", False) or getattr(args, "propensity_model", None)
    if getattr(args, "estimate_propensity", False) and getattr(args, "propensity_model", None):
        raise UserError("give --propensity-model FILE or --estimate-propensity, not both")
    if getattr(args, "propensity_floor", None) is not None and not (estimated or model_elsewhere):
        raise UserError("--propensity-floor floors estimated propensities; the log's own propensities are used here "
                        "as they are: give --estimate-propensity or --propensity-model FILE, or drop it")
    if hasattr(args, "propensity_floor") and args.propensity_floor is None:
        args.propensity_floor = DEFAULT_PROPENSITY_FLOOR


def check_not_reward_model(args) -> None:
    """``--model`` chooses a reward model: refused where the options fit only the propensity model (fit-propensity,
    report, evaluate --estimate-propensity without --fit-reward-model), which is multinomial logistic."""
    if getattr(args, "model", None) is not None and not getattr(args, "fit_reward_model", False):
        raise UserError(f"--model {args.model} chooses the reward model; the model fitted here is the propensity "
                        "model π̂₀(a|x), multinomial logistic whatever --model says: drop it")


def propensity_settings(args):
    """The :class:`~dr_scale.reward.fitting.FitSettings` of ``--estimate-propensity``: the fitting options, with
    K = --folds or :data:`DEFAULT_PROPENSITY_FOLDS` folds."""
    from dr_scale.commands.fit import fit_settings

    if getattr(args, "folds", None) == 1:
        raise UserError("--folds 1 fits no fold models, but estimated propensities are cross-fitted: give "
                             f"--folds K ≥ 2 (default {DEFAULT_PROPENSITY_FOLDS})")
    return fit_settings(args, DEFAULT_PROPENSITY_FOLDS)


def fit_propensity_from_args(args, logs: str, client, opts: dict, settings=None):
    """The propensity model the options describe, fitted on ``logs``; warnings as one ``warning:`` line each."""
    from dr_scale.commands.fit import fitted
    from dr_scale.propensity.fitting import fit_propensity_model

    return fitted(fit_propensity_model, args, logs, client, opts, settings or propensity_settings(args))


def load_propensity_model(path: str, opts: dict | None):
    """The propensity model of ``--propensity-model FILE``."""
    from dr_scale.propensity.model import PropensityModel

    return PropensityModel.load(path, opts or None)


def propensity_source_line(model_source: str, logs, has_logged: bool) -> str:
    """Which propensities the estimates use, in words."""
    where = (f"the cross-fitted propensity model {model_source}" if model_source
             else "the propensity model fitted on this log (cross-fitted)")
    if has_logged:
        return (f"propensities: estimated, from {where}; the log's own propensity column is not used (it is compared "
                "with the estimates below)")
    return f"propensities: estimated, from {where} (the log has no propensity column)"


def summary_lines(model) -> list[str]:
    """What the fitted model is: k, d, folds, λ."""
    k = getattr(model, "n_actions", None)
    d = getattr(model, "n_features", None)
    folds = getattr(model, "folds", None)
    if folds is None:
        fold_intercept = getattr(model, "fold_intercept", None)
        folds = 0 if fold_intercept is None else len(fold_intercept)
    meta = getattr(model, "metadata", None) or {}
    lam = meta.get("lam", getattr(model, "lam", None))
    line = f"propensity model: multinomial logistic over k = {k} actions, d = {d} features, {folds} fold models"
    if lam is not None:
        line += f", λ = {lam:g}" if isinstance(lam, (int, float)) else f", λ = {lam}"
    return [line]


def run(args) -> int:
    """Run ``dr-scale fit-propensity``: the propensity model π̂₀ fitted on the log and written; the exit status."""
    from dr_scale.commands.fit import fit_and_write, log_and_output

    check_not_reward_model(args)
    opts, logs = log_and_output(args)
    return fit_and_write(args, logs, opts, propensity_settings(args), fit_propensity_from_args,
                         lambda model: "\n".join(summary_lines(model)))
