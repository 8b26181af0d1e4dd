"""``dr-scale evaluate LOGS``: estimate a target policy's value on a logged data set."""

from __future__ import annotations

import sys

from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.commands.common import add_compute_options, add_storage_option, check_fit_limits, storage_options
from dr_scale.commands.fit import add_model_options, fit_from_args, model_options_given
from dr_scale.outofcore.compute import dask_session
from dr_scale.io.config import Alpha, NonNegativeOrInf, PositiveInt, PositiveOrInf, Share, option
from dr_scale.ope.diagnostics import DEFAULT_MIN_ESS_RATIO
from dr_scale.core.errors import UserError, check_output_file
from dr_scale.ope.estimators import ESTIMATORS, INTERVAL_METHODS, make_estimators, parse_estimator_list
from dr_scale.ope.evaluation import LOGGING, Evaluation, evaluate_log
from dr_scale.reward.models import LinearRewardModel
from dr_scale.io.strict_json import dumps


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="estimate a target policy's value from logged data",
                       description="Estimate a target policy's value on a logged data set (Parquet file, "
                                   "folder or URL). With no LOGS, runs on the bundled example log.")
    p.add_argument("logs", nargs="?", help="Parquet file, folder, glob or fsspec URL (default: bundled example)")
    p.add_argument("--policy", default=None,
                   help="constant:A | column:NAME | probs:NAME | callable:module:function "
                        "(default: column:target_action)")
    p.add_argument("--reward-model", metavar="FILE",
                   help="reward model ρ̂ (.npz of a LinearRewardModel, e.g. from dr-scale fit; a cross-fitted file "
                        "predicts each row with the fold model that did not see it)")
    p.add_argument("--fit-reward-model", action="store_true",
                   help="fit per-action ridge models on LOGS first (as dr-scale fit; with --folds K cross-fitted), "
                        "then evaluate with them")
    p.add_argument("--baseline", metavar="B",
                   help="also estimate V(policy) − V(B) per estimator from paired per-row terms; B is a policy "
                        f"spec or '{LOGGING}' (the logged rewards' mean)")
    p.add_argument("--estimators", default=None,
                   help=f"comma-separated, from {','.join(ESTIMATORS)}, optionally with parameters, e.g. "
                        "ClippedDR(max_weight=50) (default: all that apply: IPS,SNIPS without a reward model, "
                        "all with one)")
    p.add_argument("--clip", type=option(PositiveOrInf, "positive number"), default=None, metavar="M",
                   help="weight clip M > 0 for ClippedDR (default: chosen by estimated MSE)")
    p.add_argument("--tau", type=option(NonNegativeOrInf, "non-negative number"), default=None,
                   help="switch threshold τ ≥ 0 for SwitchDR (default: chosen by estimated MSE)")
    p.add_argument("--interval", choices=INTERVAL_METHODS, default="normal",
                   help="normal (Wald) or el (empirical likelihood, for heavy-tailed weights) intervals "
                        "(default normal)")
    p.add_argument("--n-actions", type=option(PositiveInt, "positive integer"),
                   help="number of actions k (default: from the reward model, else the log's metadata)")
    p.add_argument("--alpha", type=option(Alpha, "number in (0, 1)"), default=0.05,
                   help="1 − confidence level of the intervals, in (0, 1) (default 0.05)")
    p.add_argument("--min-ess-ratio", type=option(Share, "number in [0, 1]"), default=DEFAULT_MIN_ESS_RATIO,
                   help=f"warn of poor overlap when ESS / n is below this (default {DEFAULT_MIN_ESS_RATIO})")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON (any fsspec URL)")
    p.add_argument("--allow-other-log", action="store_true",
                   help="use a cross-fitted --reward-model on a log other than the one it was fitted on (its "
                        "fingerprint differs; cross-fitting is then lost)")
    add_model_options(p)
    add_compute_options(p)
    add_storage_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    logs, model_path, policy = args.logs, args.reward_model, args.policy
    if args.fit_reward_model and model_path:
        raise UserError("give --reward-model FILE or --fit-reward-model, not both")
    if not args.fit_reward_model and model_options_given(args):
        raise UserError(f"{', '.join(model_options_given(args))} fit(s) a reward model: give it with "
                        "--fit-reward-model (a --reward-model FILE is already fitted, and would silently ignore it)")
    if logs is None:
        from dr_scale.synthetic.example import example_paths  # imports scikit-learn: only when needed

        logs, example_model = example_paths()
        model_path = model_path or (None if args.fit_reward_model else example_model)
    opts = storage_options(args.storage_options)
    if args.json:
        json_fs, json_path = url_to_fs(args.json, opts)
        check_output_file(args.json, json_fs, json_path)  # before the work, not after it
    model = LinearRewardModel.load(model_path, opts) if model_path else None
    names = parse_estimator_list(args.estimators, "--estimators") if args.estimators else (
        list(ESTIMATORS) if model is not None or args.fit_reward_model else ["IPS", "SNIPS"])

    def evaluation_with(reward_model):
        return Evaluation(policy or "column:target_action", make_estimators(names, clip=args.clip, tau=args.tau),
                          reward_model=reward_model, n_actions=args.n_actions, n_features=args.n_features,
                          model_source=model_path, baseline=args.baseline,
                          k_source="--n-actions" if args.n_actions is not None else None,
                          allow_other_log=args.allow_other_log)

    evaluation = None if args.fit_reward_model else evaluation_with(model)  # options checked before the work
    if args.fit_reward_model:
        check_fit_limits(logs, opts, folds=args.folds, n_features=args.n_features, n_actions=args.n_actions)
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        if args.fit_reward_model:
            model = fit_from_args(args, logs, client, opts)
            evaluation = evaluation_with(model)
        result = evaluate_log(logs, evaluation, client=client, storage_options=opts, progress=not args.no_progress)
    if args.fit_reward_model:
        from dr_scale.reward.fitting import summary

        print(f"reward model fitted on {logs}: {summary(model).splitlines()[0]}")
    print(f"policy {result.policy} on {logs}")
    print(result.table(args.alpha, args.interval))
    for warning in result.warnings(args.min_ess_ratio):
        print(f"dr-scale evaluate: warning: {warning}", file=sys.stderr)
    if args.json:
        document = {"logs": str(logs), **result.to_dict(args.alpha, args.interval),
                    "warnings": result.warnings(args.min_ess_ratio)}
        atomic_write(json_fs, json_path, dumps(document, indent=2))
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
