"""``dr-scale fit LOGS --out MODEL.npz``: per-action ridge reward models ρ̂, out of core
(:mod:`dr_scale.reward.fitting`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from dr_scale.commands.common import (
    POSITIVE_INT,
    SEED,
    add_compute_options,
    add_filter_options,
    add_storage_option,
    opened_log,
    record_log_filter,
    storage_options,
    warnings_as_lines,
)
from dr_scale.crossfit.limits import check_fit_limits
from dr_scale.io.config import PositiveInt, option, penalty, rule_option, tolerance
from dr_scale.io.outputs import check_output_file, record_file
from dr_scale.outofcore.compute import dask_session

if TYPE_CHECKING:
    from dr_scale.logs.opened import OpenedLog


def add_parser(sub) -> None:
    """Add ``dr-scale fit`` and its options to the sub-command parsers ``sub``."""
    p = sub.add_parser("fit", help="fit per-action reward models ρ̂ (ridge, or logistic for 0/1 rewards) on a "
                                   "logged data set",
                       description="For each action a, on the rows that logged a, ridge regression with an "
                                   "unpenalised intercept, min Σ_{i: a_i=a} (r_i − b_a − x_i·w_a)² + λ‖w_a‖² (one pass "
                                   "over the log per conjugate-gradient iteration), or — for 0/1 rewards, the default "
                                   "when every reward is 0 or 1 — logistic regression, min Σ_{i: a_i=a} "
                                   "[log(1 + e^z) − r z] + (λ/2)‖w_a‖², z = b_a + x_i·w_a (one pass per L-BFGS step), "
                                   "all actions and folds at once, out of core. Writes a LinearRewardModel or "
                                   "LogisticRewardModel .npz that evaluate and report read. With --model shared "
                                   "(a log with an action catalogue): one model for all actions over the context, "
                                   "the action's features and their interactions, ridge or logistic by the same "
                                   "rule, with the same options, engine and cluster.")
    add_fit_arguments(p, "MODEL.npz", run, shared=True)


def add_fit_arguments(p, out: str, run, shared: bool = False, propensity: bool = False) -> None:
    """The arguments of ``fit`` and ``fit-propensity`` (``propensity``: no ``--model`` in its help, which a
    propensity fit refuses): LOGS, ``--out`` (``out`` its metavar), the fitting options (:func:`add_model_options`),
    ``--n-actions``, the rows, compute and storage options; ``run`` runs it."""
    p.add_argument("logs", help="Parquet file, folder, glob or fsspec URL of the logged data")
    p.add_argument("--out", required=True, metavar=out, help="where to write the model (any fsspec URL)")
    add_model_options(p, shared=shared, propensity=propensity)
    p.add_argument("--n-actions", type=POSITIVE_INT,
                   help="number of actions k (default: the log's metadata, else the data)")
    add_filter_options(p)
    add_compute_options(p)
    add_storage_option(p)
    p.set_defaults(func=run)


def add_model_options(p, shared: bool = False, propensity: bool = False) -> None:
    """--lam, --folds, --seed, --rtol, --max-iter, --n-features, --model (shared with ``evaluate --fit-reward-model``;
    ``shared``: ``--model shared`` too, for ``fit``; ``propensity``: the options of ``fit-propensity``, ``--model``
    hidden)."""
    from dr_scale.crossfit.settings import LAMBDA_GRID as grid
    from dr_scale.crossfit.settings import MAX_ITER as max_iter
    from dr_scale.crossfit.settings import RTOL as rtol
    from dr_scale.crossfit.settings import SEARCH_FOLDS as search_folds
    from dr_scale.crossfit.settings import SEARCH_ROWS as search_rows

    p = p.add_argument_group("fitting the propensity model" if propensity else "fitting the reward model")
    p.add_argument("--lam", type=parse_lambda, metavar="λ|auto",
                   help=f"ridge penalty λ > 0, or 'auto' (default): chosen from {', '.join(f'{g:g}' for g in grid)} by "
                        f"the out-of-fold squared error of the fold models (--folds K, else {search_folds} folds) on a "
                        f"keyed sample of {search_rows:,} rows")
    p.add_argument("--folds", type=option(PositiveInt, "integer ≥ 1"), metavar="K",
                   help="also fit K fold models for cross-fitting, 2 ≤ K ≤ min(20, rows / 10): row i's fold is "
                        "⌊K·u(row_id)⌋, and fold model j, fitted on the other folds, predicts the rows of fold j; "
                        "1: none, the model in sample (default: fit none; evaluate --fit-reward-model "
                        f"{DEFAULT_REWARD_FOLDS})")
    p.add_argument("--seed", type=SEED,
                   help="key of the folds and the λ sample (default 0)")
    p.add_argument("--rtol", type=parse_rtol,
                   help=f"conjugate gradients stop at ‖residual‖ ≤ rtol·‖rhs‖ for every fit (default {rtol:g})")
    p.add_argument("--max-iter", type=POSITIVE_INT, metavar="PASSES",
                   help="the pass budget of each solve: it stops after this many passes over the log (one per CG or "
                        "L-BFGS step) if it has not reached --rtol by then, with a warning counting the fits that "
                        f"did not (default {max_iter})")
    p.add_argument("--n-features", type=POSITIVE_INT,
                   help="number of features d (default: the log's metadata, else the data)")
    add_model_choice(p, shared, hidden=propensity)


def add_model_choice(p, shared: bool = False, hidden: bool = False) -> None:
    """``--model ridge|logistic`` (fit, evaluate --fit-reward-model, learn); ``fit`` also takes ``shared``;
    ``hidden``: out of the help (fit-propensity refuses it with the reason)."""
    text = ("the reward model: per-action ridge regression, or per-action L2-regularised logistic "
            "regression (0/1 rewards: predictions in (0, 1))"
            + ("; shared: one model over the context, the action's features (the log's action "
               "catalogue) and their interactions, z = b + x·β_x + f_a·β_f + x·B·f_a, whatever the number "
               "of actions — ridge (ρ̂ = z) or logistic (ρ̂ = σ(z)) by the same rule as the per-action "
               "models, or shared-ridge / shared-logistic to choose; the same --lam, --folds, --seed, "
               "--rtol, --local-workers, --scheduler" if shared else "")
            + " (default: logistic when every reward is 0 or 1, ridge otherwise — for learn, ridge, the "
              "policy's shrinkage centre; the choice is printed)")
    p.add_argument("--model", choices=("ridge", "logistic") + (SHARED_MODELS if shared else ()),
                   help=argparse.SUPPRESS if hidden else text)


#: ``fit --model`` values of the model shared across actions, and the link each fixes (None: by the rewards).
SHARED_MODELS = ("shared", "shared-ridge", "shared-logistic")
SHARED_LINKS = {"shared": None, "shared-ridge": "ridge", "shared-logistic": "logistic"}


#: ``--lam``: λ by the one rule of every fitter (:func:`dr_scale.io.config.penalty`), or ``auto``.
parse_lambda = rule_option(penalty, "λ")
#: ``--rtol``: a relative tolerance by the one rule of every fitter (:func:`dr_scale.io.config.tolerance`).
parse_rtol = rule_option(tolerance, "rtol")


#: The fold models ``evaluate --fit-reward-model`` fits unless ``--folds`` says otherwise (``--folds 1``: none).
DEFAULT_REWARD_FOLDS = 5


def default_folds(logs, args, default: int) -> int:
    """K of a model fitted for an estimate: ``--folds`` if given, else ``default`` — or, on a log too small for it,
    the most its rows allow (rows / :data:`~dr_scale.crossfit.limits.MIN_FOLD_ROWS`, said on stderr), 1 (no fold
    models: in sample) below 2."""
    from dr_scale.crossfit.limits import MIN_FOLD_ROWS

    if getattr(args, "folds", None) is not None:
        return int(args.folds)
    rows = logs.footprint.rows
    allowed = rows // MIN_FOLD_ROWS
    if allowed >= default:
        return default
    folds = allowed if allowed >= 2 else 1
    print(f"dr-scale {args.command}: the log's {rows:,} rows allow "
          + (f"{folds} cross-fitting folds, not {default}" if folds > 1 else "no cross-fitting folds")
          + f" (at least {MIN_FOLD_ROWS} rows a fold)" + ("" if folds > 1 else ": the model is fitted in sample"),
          file=sys.stderr)
    return folds


def fit_settings(args, folds: int | None = None):
    """The :class:`dr_scale.reward.fitting.FitSettings` the options describe; ``folds``: the command's default K
    where ``--folds`` is not given (``--folds 1``: no fold models, the model in sample)."""
    from dr_scale.crossfit.settings import FitSettings

    given = {dest: getattr(args, dest) for _, dest in MODEL_OPTIONS if getattr(args, dest, None) is not None}
    given["folds"] = given.get("folds", folds)
    if given["folds"] == 1:
        given["folds"] = None
    return FitSettings(**given, n_features=args.n_features, n_actions=args.n_actions)


def fit_from_args(args, logs: str, client, opts: dict, settings=None):
    """The model the options describe; warnings (e.g. an action never logged) as one ``warning:`` line each."""
    from dr_scale.reward.fitting import fit_reward_model

    return fitted(fit_reward_model, args, logs, client, opts, settings or fit_settings(args))


def fitted(fit, args, logs: str, client, opts: dict, settings):
    """``fit(logs, settings, …)`` (:func:`~dr_scale.reward.fitting.fit_reward_model`,
    :func:`~dr_scale.propensity.fitting.fit_propensity_model`) on the options' client, storage and progress, its
    warnings as one ``warning:`` line each, and the rows it was fitted on recorded (:func:`record_log_filter`)."""
    with warnings_as_lines(args.command):
        model = fit(logs, settings, client=client, storage_options=opts or None, progress=not args.no_progress)
    record_log_filter(model, logs)
    return model


#: The fitting options and their ``args`` names. They default to None on the command line, so that
#: :func:`model_options_given` tells which were given; :func:`fit_settings` leaves the others to
#: :class:`~dr_scale.reward.fitting.FitSettings`' defaults.
MODEL_OPTIONS = (("--lam", "lam"), ("--folds", "folds"), ("--seed", "seed"), ("--rtol", "rtol"),
                 ("--max-iter", "max_iter"), ("--model", "model"))


def model_options_given(args) -> list[str]:
    """The fitting options (``--lam``, ``--folds``, ``--seed``, ``--rtol``, ``--max-iter``, ``--model``) given on the
    command line."""
    return [flag for flag, dest in MODEL_OPTIONS if getattr(args, dest, None) is not None]


def run(args) -> int:
    """Run ``dr-scale fit``: the reward model fitted on the log and written; the exit status."""
    from dr_scale.reward.summary import summary

    opts, logs = log_and_output(args)
    if args.model in SHARED_MODELS:
        return _run_shared(args, logs, opts)
    return fit_and_write(args, logs, opts, fit_settings(args), fit_from_args, summary)


def log_and_output(args) -> tuple[dict, OpenedLog]:
    """The storage options and the log (opened with the rows options' filter) of a command that writes ``--out``, whose
    file is checked before the work, not after it."""
    opts = storage_options(args.storage_options)
    logs = opened_log(args, args.logs, opts)
    check_output_file(args.out, [args.logs], opts)  # not an input, nor a file dr-scale did not write
    return opts, logs


def fit_and_write(args, logs, opts: dict, settings, fit_from_args, summary) -> int:
    """``fit`` and ``fit-propensity``: the fit's size checked (:func:`check_fit_limits`) before the work, the model
    fitted by ``fit_from_args(args, logs, client, opts, settings)`` in the options' Dask session, written to
    ``--out``, and ``summary(model)`` printed."""
    check_fit_limits(logs, folds=settings.folds, n_features=settings.n_features)
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        model = fit_from_args(args, logs, client, opts, settings)
    model.save(args.out, opts or None)
    record_file(args.out, opts)
    print(summary(model))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _run_shared(args, logs, opts) -> int:
    """``fit --model shared[-ridge|-logistic]``: the model shared across actions over the catalogue
    (:func:`dr_scale.reward.shared.fit_shared_model`), on the same engine, options and cluster as the per-action
    models."""
    from dataclasses import replace

    from dr_scale.reward.shared import fit_shared_model

    args_model, args.model = args.model, None
    settings = replace(fit_settings(args), model=SHARED_LINKS[args_model])  # checked before the work
    args.model = args_model
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        model = fitted(fit_shared_model, args, logs, client, opts, settings)
    model.save(args.out, opts or None)
    record_file(args.out, opts)
    print(shared_summary(model))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def shared_summary(model) -> str:
    """A shared model's figures: the model and why, λ (and its search), rows, the features (used) × the action
    features (present), parameters 1 + m + c + m·c, folds, passes."""
    from dr_scale.reward.summary import model_line

    m = model.metadata
    d, da = m["n_features"], m["action_features"]
    used, present = model.beta_x.size, model.beta_f.size
    search = m.get("lambda_search")
    lines = [model_line(model),
             f"λ = {m['lam']:g}{' (auto)' if search else ''}, {m['rows']:,} rows, {d} features ({used} in the rows) × "
             f"{da} action features ({present} non-zero in the catalogue): {1 + used + present + used * present:,} "
             f"parameters for {m['n_actions']} actions, {m.get('folds') or 'no'} "
             f"folds, {m['passes']} {'L-BFGS' if m.get('method') == 'L-BFGS' else 'CG'} passes"
             + (f" (+ {search['passes']} on the λ sample)" if search else "")
             + (f", fingerprint {m['fingerprint']}" if "fingerprint" in m else "")]
    if search:
        key = "out_of_fold_log_loss" if "out_of_fold_log_loss" in search else "out_of_fold_sse"
        lines.append(f"out-of-fold {'log loss' if key.endswith('log_loss') else 'squared error'} on "
                     f"{search['sample_rows']:,} sampled rows per λ: " + ", ".join(
                         f"{g:g}: {'not fitted' if row is None else f'{sum(row):.6g}'}"
                         for g, row in zip(search["grid"], search[key])))
    return "\n".join(line for line in lines if line)
