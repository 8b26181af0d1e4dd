"""``dr-scale learn LOGS --out POLICY.npz``: learn a linear policy from a logged data set."""

from __future__ import annotations

import sys

from dr_scale.commands.common import (
    add_compute_options,
    add_filter_options,
    add_storage_option,
    opened_log,
    record_log_filter,
    storage_options,
    warnings_as_lines,
)
from dr_scale.commands.fit import add_model_choice, parse_lambda
from dr_scale.core.errors import UserError
from dr_scale.crossfit.limits import check_fit_limits
from dr_scale.crossfit.settings import Stages
from dr_scale.io.cache import spill_root
from dr_scale.io.config import Folds, PositiveInt, option
from dr_scale.io.outputs import check_output_file, record_file
from dr_scale.learning.impute import METHODS
from dr_scale.learning.learn import LEARNERS, MAX_PASSES, LearnSettings, learn_policy
from dr_scale.outofcore.compute import dask_session
from dr_scale.outofcore.passes import spill_folder

#: Passes at most per solve of ``--learner scorer`` (its CG over all item pairs and its reward model's).
SCORER_PASSES = 500


def add_parser(sub) -> None:
    """Add ``dr-scale learn`` and its options to the sub-command parsers ``sub``."""
    p = sub.add_parser("learn", help="learn a linear policy from logged data (DR/IPS/DM-imputed rewards)",
                       description="Learn π(x) = argmax_a x·coef[:, a] + intercept[a] from a logged data set: "
                                   "impute every action's reward (DR, IPS or DM) and fit one score per action. "
                                   "The policy file works with evaluate/report as --policy linear:POLICY.npz.")
    p.add_argument("logs", help="Parquet file, folder, glob or fsspec URL of the log to learn from")
    p.add_argument("--out", required=True, metavar="POLICY.npz", help="where to write the policy (any fsspec URL)")
    p.add_argument("--method", choices=METHODS, default="dr", help="reward imputation (default: dr)")
    p.add_argument("--learner", choices=(*LEARNERS, "scorer"), default="ridge",
                   help="ridge: one ridge score per action (default); dlm: direct loss minimization; scorer: a "
                        "linear scorer over the items' features (the log's action catalogue), s(x, a) = x·B·f_a + "
                        "f_a·β_f fitted to every item's imputed reward, written for --policy scorer:POLICY.npz "
                        "(its ρ̂: --reward-model, a shared ridge model from fit --model shared-ridge, else a shared "
                        "ridge model fitted on LOGS, cross-fitted with --folds K)")
    p.add_argument("--lam", type=parse_lambda, default=None, metavar="λ|auto",
                   help="ridge penalty of the scores (default: 10 × mean active features × rows / 1000; "
                        "auto: chosen from 3 values on a validation fold, 3 solves' passes more)")
    p.add_argument("--folds", type=option(Folds, "integer ≥ 2"), metavar="K",
                   help="cross-fitting folds of the reward model fitted when no --reward-model is given, "
                        "2 ≤ K ≤ rows (default 2; --learner scorer: none)")
    p.add_argument("--reward-model", metavar="MODEL.npz", help="ρ̂ for DR/DM (default: fitted on LOGS, cross-fitted)")
    add_model_choice(p)
    p.add_argument("--n-features", type=option(PositiveInt, "positive integer"),
                   help="number of features d (default: from the log's metadata)")
    p.add_argument("--n-actions", type=option(PositiveInt, "positive integer"),
                   help="number of actions k (default: from the log's metadata)")
    p.add_argument("--max-iter", type=option(PositiveInt, "positive integer"), default=None,
                   help=f"passes at most per solve: CG iterations (ridge, scorer) or updates (dlm) (default "
                        f"{MAX_PASSES}; scorer {SCORER_PASSES})")
    p.add_argument("--allow-other-log", action="store_true",
                   help="use a cross-fitted --reward-model fitted on another log (refused by default: its fold "
                        "models may have seen rows the row ids name here)")
    p.add_argument("--allow-unlogged-actions", action="store_true",
                   help="let the policy choose actions the log never took (default: they are excluded, with a "
                        "warning saying on how many rows its scores would have chosen them)")
    p.add_argument("--spill", default="disk", metavar="memory|disk|FOLDER",
                   help="where a local run keeps the parts between passes (default: disk, under the cache folder)")
    from dr_scale.commands.fit_propensity import add_propensity_options

    add_propensity_options(p)
    add_filter_options(p)
    add_compute_options(p)
    add_storage_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Run ``dr-scale learn``: a linear policy learned from the log (:func:`~dr_scale.learning.learn.learn_policy`)
    and written; the exit status.
    """
    opts = storage_options(args.storage_options)
    logs = opened_log(args, args.logs, opts)
    check_output_file(args.out, [args.logs, args.reward_model, getattr(args, "propensity_model", None)], opts)
    from dr_scale.commands.fit_propensity import (
        check_propensity_options,
        fit_propensity_from_args,
        load_propensity_model,
        propensity_source_line,
    )

    check_propensity_options(args)
    if args.reward_model and args.folds is not None and not args.estimate_propensity:
        raise UserError("--folds sets the cross-fitting of the reward model learn fits; with --reward-model FILE "
                        "there is none to fit, and it would be silently ignored: drop one of them")
    if args.learner == "scorer":
        if args.estimate_propensity or getattr(args, "propensity_model", None):
            raise UserError("--learner scorer uses the log's propensity column; estimated propensities are not "
                            "available with it: drop --estimate-propensity / --propensity-model")
        return _run_scorer(args, logs, opts)
    if args.reward_model and args.model is not None:
        raise UserError("--model chooses the reward model learn fits; with --reward-model FILE there is none to fit, "
                        "and it would be silently ignored: drop one of them")
    settings = LearnSettings(method=args.method, learner=args.learner, lam=args.lam, model=args.model or "ridge",
                             **({} if args.folds is None else {"folds": args.folds}),
                             max_iter=args.max_iter or MAX_PASSES, n_features=args.n_features,
                             n_actions=args.n_actions, allow_unlogged_actions=args.allow_unlogged_actions)
    fits_model = settings.method != "ips" and not args.reward_model
    if fits_model:
        check_fit_limits(logs, folds=settings.folds, n_features=settings.n_features)
    propensity = load_propensity_model(args.propensity_model, opts) if args.propensity_model else None
    p_settings = None
    if args.estimate_propensity:
        from dr_scale.commands.fit_propensity import DEFAULT_PROPENSITY_FOLDS
        from dr_scale.crossfit.settings import FitSettings

        p_settings = FitSettings(folds=args.folds or DEFAULT_PROPENSITY_FOLDS, n_features=args.n_features,
                                 n_actions=args.n_actions)
        check_fit_limits(logs, folds=p_settings.folds, n_features=p_settings.n_features)
    stages = Stages(not args.no_progress)
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client, \
            spill_folder(args.spill, client, disk=spill_root()) as spill, warnings_as_lines(args.command):
        if p_settings is not None:
            propensity = fit_propensity_from_args(args, logs, client, opts, p_settings)
        policy = learn_policy(logs, settings, reward_model=args.reward_model, client=client,
                              storage_options=opts, spill=spill, progress=not args.no_progress, stages=stages,
                              allow_other_log=args.allow_other_log,
                              propensity_model=propensity, propensity_floor=args.propensity_floor)
    if propensity is not None:
        print(propensity_source_line(args.propensity_model, logs, logs.has_propensity))
    record_log_filter(policy, logs)  # the rows it was learned on
    from dr_scale.report.training import TRAINING, training_record  # what it was trained on: evaluate/report check it

    policy.metadata[TRAINING] = training_record(logs, opts, folds=settings.folds if fits_model else None)
    policy.save(args.out, opts)
    record_file(args.out, opts)
    meta = policy.metadata
    detail = f"λ = {meta['lam']:g}" if "lam" in meta else f"{meta.get('passes')} passes"
    print(f"learned a {meta['method'].upper()} {meta['learner']} policy on {meta['rows']} rows, "
          f"{meta['n_features']} features, {meta['n_actions']} actions ({detail})")
    if "reward_model" in meta:
        print(f"reward model ρ̂ fitted on the log: {meta['reward_model']} "
              f"({'--model' if args.model else 'the default for learning: the policy shrinks towards it'}), "
              f"λ = {meta['reward_model_lam']:g}")
    print("passes: " + "; ".join(f"{name}: {n} in {seconds:.1f} s" for name, n, seconds in stages.done))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _run_scorer(args, logs, opts) -> int:
    """``learn --learner scorer``: a linear scorer over the items' features (dr_scale.learning.scorer), on the pass
    engine: --local-workers / --scheduler / --spill as the per-action learners; --folds cross-fits the shared ρ̂ it
    fits."""
    from dr_scale.learning.scorer import learn_scorer_from_log
    from dr_scale.report.training import TRAINING, training_record

    if args.lam == "auto":
        raise UserError("--lam auto is not available with --learner scorer: give a number (default k · rows / 10)")
    if args.model is not None and args.model != "ridge":
        raise UserError("--learner scorer sums its reward model over all items through the catalogue's sums: it "
                        "fits a shared ridge ρ̂; drop --model logistic")
    stages = Stages(not args.no_progress)
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client, \
            warnings_as_lines(args.command), stages.stage("scorer", "read, ρ̂ and the scorer's CG") as passes:
        policy = learn_scorer_from_log(logs, method=args.method, reward_model=args.reward_model, lam=args.lam,
                                       max_iter=args.max_iter or SCORER_PASSES, n_features=args.n_features,
                                       storage_options=opts, client=client, folds=args.folds, spill=args.spill,
                                       progress=not args.no_progress, allow_other_log=args.allow_other_log)
        passes.append(policy.metadata["passes"])
    record_log_filter(policy, logs)
    policy.metadata[TRAINING] = training_record(logs, opts, folds=args.folds)
    policy.save(args.out, opts)
    record_file(args.out, opts)
    meta = policy.metadata
    print(f"learned a {meta['method'].upper()} item scorer on {meta['rows']} rows, {meta['n_features']} features, "
          f"{meta['n_actions']} items with {meta['action_features']} features (λ = {meta['lam']:g}, "
          f"{meta['passes']} passes{'' if meta['converged'] else ', not converged'})")
    if "reward_model" in meta:
        m = meta["reward_model"]
        print(f"reward model ρ̂: shared ridge, λ = {m.get('lam'):g}, "
              f"{meta['reward_model_folds'] or 'no'} fold models")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
