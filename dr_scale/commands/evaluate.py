"""``dr-scale evaluate LOGS``: estimate a target policy's value on a logged data set."""

from __future__ import annotations

import sys

from dr_scale.commands.common import (
    add_compute_options,
    add_filter_options,
    add_storage_option,
    check_named_actions,
    opened_log,
    storage_options,
)
from dr_scale.commands.fit import (
    DEFAULT_REWARD_FOLDS,
    add_model_options,
    default_folds,
    fit_from_args,
    fit_settings,
    model_options_given,
)
from dr_scale.commands.fit_propensity import (
    add_propensity_options,
    check_not_reward_model,
    check_propensity_options,
    fit_propensity_from_args,
    load_propensity_model,
    propensity_settings,
    propensity_source_line,
)
from dr_scale.core.errors import UserError
from dr_scale.crossfit.limits import check_fit_limits
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.io.config import Alpha, NonNegativeInt, NonNegativeOrInf, PositiveInt, PositiveOrInf, Share, option
from dr_scale.io.outputs import check_output_file, record_file
from dr_scale.io.strict_json import dumps
from dr_scale.ope.diagnostics import DEFAULT_MIN_ESS_RATIO, DEFAULT_MIN_SUPPORT
from dr_scale.ope.estimators import (
    ESTIMATORS,
    INTERVAL_METHODS,
    SLATE_ESTIMATORS,
    STANDARD_ESTIMATORS,
    make_estimators,
    parse_estimator_list,
)
from dr_scale.ope.evaluation import LOGGING, Comparison, ComparisonResult, Evaluation, evaluate_log
from dr_scale.ope.evaluation.slots import SlotResult
from dr_scale.ope.logged import logged_summary, summary_lines
from dr_scale.outofcore.compute import dask_session
from dr_scale.policies import LoggedPolicy, parse_policy
from dr_scale.reward.files import load_reward_model

#: The policy evaluated without --policy: the one the log's rows name in their target_action column.
DEFAULT_POLICY = "column:target_action"


def add_parser(sub) -> None:
    """Add ``dr-scale evaluate`` and its options to the sub-command parsers ``sub``."""
    p = sub.add_parser("evaluate", help="estimate a target policy's value from logged data",
                       description="Estimate a target policy's value on a logged data set (Parquet file, "
                                   "folder or URL). With no LOGS, runs on the bundled example log.")
    p.add_argument("logs", nargs="?", help="Parquet file, folder, glob or fsspec URL (default: bundled example)")
    p.add_argument("--policy", action="append", default=None,
                   help="constant:A | topk:A,B,… | uniform | epsilon-greedy:EPS:POLICY | logging | column:NAME | "
                        "probs:NAME | callable:module:function | linear:POLICY.npz | softmax:POLICY.npz:T "
                        f"(default: {DEFAULT_POLICY}); repeat it to compare several policies in one pass, "
                        "each against the first (or --baseline)")
    p.add_argument("--reward-model", metavar="FILE",
                   help="reward model ρ̂ (.npz of a LinearRewardModel, e.g. from dr-scale fit; a cross-fitted file "
                        "predicts each row with the fold model that did not see it)")
    p.add_argument("--fit-reward-model", action="store_true",
                   help="fit the per-action reward models on LOGS first (as dr-scale fit), cross-fitted over "
                        f"--folds K (default {DEFAULT_REWARD_FOLDS}, fewer on a log of under "
                        f"{10 * DEFAULT_REWARD_FOLDS} rows; --folds 1: in sample), then evaluate with "
                        "them; prints the model's calibration")
    p.add_argument("--fit-balancing-weights", action="store_true",
                   help="fit BIPW's importance weights on LOGS first: a per-action logistic classifier of the logged "
                        "(x, a) against (x, a') with a' drawn from the policy, cross-fitted over 2 keyed folds, "
                        "λ = 1 (instead of the column importance_weight; one --policy)")
    p.add_argument("--baseline", metavar="B",
                   help="also estimate V(policy) − V(B) per estimator from paired per-row terms; B is a policy "
                        f"spec or '{LOGGING}' (the logged rewards' mean); with several --policy, each is compared "
                        "with B (default: the first)")
    p.add_argument("--estimators", default=None,
                   help=f"comma-separated, from {','.join(ESTIMATORS)} (or the slate estimators "
                        f"{','.join(SLATE_ESTIMATORS)} with --policy slate:FILE.npz), optionally with parameters, e.g. "
                        "ClippedDR(max_weight=50), DRos(lambda_=10), IPS(lambda_=50) (default: IPS,SNIPS without a "
                        f"reward model, {','.join(STANDARD_ESTIMATORS)} with one)")
    p.add_argument("--clip", type=option(PositiveOrInf, "positive number"), default=None, metavar="M",
                   help="weight clip M > 0 for ClippedDR (default: chosen by estimated MSE)")
    p.add_argument("--tau", type=option(NonNegativeOrInf, "non-negative number"), default=None,
                   help="switch threshold τ ≥ 0 for SwitchDR (default: chosen by estimated MSE)")
    p.add_argument("--interval", choices=INTERVAL_METHODS, default="normal",
                   help="normal (Wald) or el (empirical likelihood, for heavy-tailed weights) intervals, for the "
                        "values and the differences (default normal)")
    p.add_argument("--n-actions", type=option(PositiveInt, "positive integer"),
                   help="number of actions k (default: from the reward model, else the log's metadata)")
    p.add_argument("--alpha", type=option(Alpha, "number in (0, 1)"), default=0.05,
                   help="1 − confidence level of the intervals, in (0, 1) (default 0.05)")
    p.add_argument("--min-ess-ratio", type=option(Share, "number in [0, 1]"), default=DEFAULT_MIN_ESS_RATIO,
                   help=f"warn of poor overlap when ESS / n is below this (default {DEFAULT_MIN_ESS_RATIO})")
    p.add_argument("--min-support", type=option(NonNegativeInt, "non-negative integer"), default=DEFAULT_MIN_SUPPORT,
                   metavar="K",
                   help="mark values and differences 'insufficient data' when fewer than K rows have the policy's "
                        f"action and a non-zero reward (default {DEFAULT_MIN_SUPPORT})")
    p.add_argument("--allow-training-overlap", action="store_true",
                   help="evaluate a learned policy even on partitions it was trained on (its policy file records "
                        "them); its results are then labelled in-sample")
    p.add_argument("--by", choices=["slot"], default=None,
                   help="slot: on a ranking's log (a slot column), also estimate per slot and per impression, in the "
                        "same pass (one --policy)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON (any fsspec URL)")
    p.add_argument("--allow-other-log", action="store_true",
                   help="use a cross-fitted --reward-model on a log other than the one it was fitted on (its "
                        "fingerprint differs; cross-fitting is then lost)")
    add_filter_options(p)
    add_model_options(p)
    add_propensity_options(p)
    add_compute_options(p)
    add_storage_option(p)
    p.set_defaults(func=run)


def check_default_policy_column(logs) -> None:
    """Without --policy, the default policy's column must be in the log: else a ``UserError`` that says the policy
    was not named, rather than a missing column the user never mentioned."""
    from dr_scale.logs.listing import contract_columns

    column = DEFAULT_POLICY.split(":", 1)[1]
    names = contract_columns(logs.footer(0)) if logs.paths else None
    if names is not None and column not in names:  # (a file off the contract: the reader's own error, later)
        raise UserError(f"no --policy given: the default, {DEFAULT_POLICY}, reads the log's {column!r} column, which "
                        f"{logs.paths[0]} lacks; name the policy to evaluate (--policy uniform, --policy constant:A, "
                        "--policy linear:POLICY.npz …; see dr-scale evaluate --help)")


def run(args) -> int:
    """Run ``dr-scale evaluate``: the policies' estimates on the log (and the reward or propensity model it fits);
    the exit status.
    """
    logs, model_path = args.logs, args.reward_model
    policies = args.policy or [DEFAULT_POLICY]
    if len(set(policies)) != len(policies):
        raise UserError(f"--policy {next(p for i, p in enumerate(policies) if p in policies[:i])} is given twice")
    if args.fit_reward_model and model_path:
        raise UserError("give --reward-model FILE or --fit-reward-model, not both")
    check_propensity_options(args)
    check_not_reward_model(args)
    if not args.fit_reward_model and not args.estimate_propensity and model_options_given(args):
        raise UserError(f"{', '.join(model_options_given(args))} fit(s) a reward model or a propensity model: give "
                        "it with --fit-reward-model or --estimate-propensity (a --reward-model FILE is already fitted, "
                        "and would silently ignore it)")
    if logs is None:
        from dr_scale.synthetic.example import example_paths  # imports scikit-learn: only when needed

        logs, example_model = example_paths()
        model_path = model_path or (None if args.fit_reward_model else example_model)
    opts = storage_options(args.storage_options)
    logs = opened_log(args, logs, opts)
    if not args.policy:
        check_default_policy_column(logs)
    if args.estimators and any(spec.split("(")[0].strip() in SLATE_ESTIMATORS
                               for spec in parse_estimator_list(args.estimators, "--estimators")):
        return run_slates(args, logs, opts)
    if args.json:
        json_fs, json_path = url_to_fs(args.json, opts)
        inputs = [str(logs), model_path, args.propensity_model,
                  *(spec.split(":")[1] for spec in [*policies, args.baseline or ""]
                    if spec.startswith(("linear:", "softmax:", "scorer:")))]
        check_output_file(args.json, inputs, opts)  # before the work, not after it
    model = load_reward_model(model_path, opts) if model_path else None
    propensity = load_propensity_model(args.propensity_model, opts) if args.propensity_model else None
    baseline = [args.baseline] if args.baseline not in (None, LOGGING) else []
    parsed = {spec: parse_policy(spec, opts) for spec in dict.fromkeys([*policies, *baseline])}  # each file read once
    estimated = args.estimate_propensity or propensity is not None
    names = parse_estimator_list(args.estimators, "--estimators") if args.estimators else (
        list(STANDARD_ESTIMATORS) if model is not None or args.fit_reward_model else ["IPS", "SNIPS"])
    if estimated and (model is not None or args.fit_reward_model) and "DM" not in names:
        names.append("DM")  # beside IPS/DR: it needs no propensity, where the estimated ones lack support
    estimators = make_estimators(names, clip=args.clip, tau=args.tau)  # a misspelt name refused before any fit
    check_named_actions(parsed.values(), logs, args.n_actions)

    def evaluation_with(reward_model, propensity_model, spec, baseline):
        """The :class:`~dr_scale.ope.evaluation.Evaluation` of policy ``spec`` with these models, against
        ``baseline``."""
        return Evaluation(parsed[spec], estimators,
                          reward_model=reward_model, n_actions=args.n_actions, n_features=args.n_features,
                          model_source=model_path, baseline=parsed.get(baseline, baseline),
                          min_support=args.min_support,
                          k_source="--n-actions" if args.n_actions is not None else None,
                          allow_other_log=args.allow_other_log, propensity_model=propensity_model,
                          propensity_floor=args.propensity_floor, propensity_source=args.propensity_model)

    def comparison_with(reward_model, propensity_model=propensity):
        """One evaluation, or with several --policy a Comparison of them against the first or --baseline."""
        if len(policies) == 1:
            return evaluation_with(reward_model, propensity_model, policies[0], args.baseline)
        specs = policies + ([args.baseline] if args.baseline not in (None, LOGGING, *policies) else [])
        return Comparison({spec: evaluation_with(reward_model, propensity_model, spec, None) for spec in specs},
                          baseline=args.baseline)

    evaluation = None if args.fit_reward_model or args.estimate_propensity else comparison_with(model)
    settings = fit_settings(args, default_folds(logs, args, DEFAULT_REWARD_FOLDS)) if args.fit_reward_model else None
    if settings is not None:
        check_fit_limits(logs, folds=settings.folds, n_features=settings.n_features)
    p_settings = propensity_settings(args) if args.estimate_propensity else None
    if p_settings is not None:
        check_fit_limits(logs, folds=p_settings.folds, n_features=p_settings.n_features)
    in_sample = {}
    for spec in policies:
        in_sample.update(training_overlap_of(logs, spec, parsed, args))
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        if args.fit_reward_model:
            model = fit_from_args(args, logs, client, opts, settings)
        if args.estimate_propensity:
            propensity = fit_propensity_from_args(args, logs, client, opts, p_settings)
        if evaluation is None:
            evaluation = comparison_with(model, propensity)
        if args.fit_balancing_weights:
            from dataclasses import replace

            from dr_scale.ope.balancing import fit_balancing_model_on_log

            if not isinstance(evaluation, Evaluation):
                raise UserError("--fit-balancing-weights fits the weights of one policy: give one --policy")
            balancing = fit_balancing_model_on_log(logs, evaluation.policy, client=client)
            evaluation = replace(evaluation, balancing_model=balancing)
        if args.by == "slot" and not isinstance(evaluation, Evaluation):
            raise UserError("--by slot estimates one policy per slot: give one --policy")
        outcome = evaluate_log(logs, evaluation, client=client, progress=not args.no_progress,
                               by_slot=args.by == "slot")
    log_filter = logs.log_filter
    where = f"{logs}" + (f" ({log_filter})" if log_filter else "")
    if args.fit_reward_model:
        from dr_scale.reward.models import LinearRewardModel
        from dr_scale.reward.summary import calibration_summary, summary

        assert isinstance(model, LinearRewardModel)  # --fit-reward-model fits a ridge or logistic model
        lines = summary(model).splitlines()
        print(f"reward model fitted on {where}: {'; '.join(lines[:2] if lines[0].startswith('model:') else lines[:1])}")
        print("\n".join(calibration_summary(model)))
    if estimated:
        print(propensity_source_line(args.propensity_model, logs, logs.has_propensity))
    elif not logs.has_propensity:
        print("propensities: none in the log; DM reads none (the ESS and max weight columns are those of p = 1 and "
              "say nothing)")
    slotted = outcome if isinstance(outcome, SlotResult) else None
    result = slotted.pooled if slotted is not None else outcome
    assert not isinstance(result, SlotResult)  # the pooled result of a per-slot evaluation is a policy's result
    results = result.results if isinstance(result, ComparisonResult) else {None: result}
    if args.fit_balancing_weights:
        print(f"BIPW's weights: a classifier fitted on {where} (2 folds, {balancing.passes} passes"
              f"{'' if balancing.converged else ', not converged'})")
    if isinstance(result, ComparisonResult):
        print(f"{len(results)} policies on {where}, one pass over the log")
    else:
        print(f"policy {result.policy} on {where}")
    for learned, days in in_sample.items():
        print(f"IN-SAMPLE: {learned} was learned on {days} of this log; its estimates are optimistic")
    print((slotted or result).table(args.alpha, args.interval))
    logged = logged_summaries(evaluation, results, args.alpha, slotted)
    for facts in logged.values():
        print("\n".join(summary_lines(facts)))
    diagnostics = next((r.propensity for r in results.values() if r.propensity is not None), None)
    if diagnostics is not None:
        for name, r in results.items():
            if r.propensity is None:
                continue
            lines = r.propensity.lines()
            print("\n".join(lines if name is None or len(results) == 1 else [f"{name}: {lines[0]}", *lines[1:]]))
    warnings = {name: r.warnings(args.min_ess_ratio) for name, r in results.items()}
    if slotted is not None:
        warnings[None] = slotted.warnings(args.min_ess_ratio)
    for name, lines in warnings.items():
        for warning in lines:
            print(f"dr-scale evaluate: warning: {'' if name is None else f'{name}: '}{warning}", file=sys.stderr)
    if args.json:
        document = {"logs": str(logs), **({"filter": log_filter.to_dict()} if log_filter else {}),
                    **(slotted or result).to_dict(args.alpha, args.interval), "in_sample": in_sample}
        if logged:
            document["logged"] = logged
        if isinstance(result, ComparisonResult):
            for name, lines in warnings.items():
                document["policies"][name]["warnings"] = lines
        else:
            document["warnings"] = warnings[None]
        if diagnostics is not None:
            document["propensities"] = {"source": args.propensity_model or "estimated on this log (cross-fitted)",
                                        "floor": args.propensity_floor,
                                        "logged_column_used": False}
            from dr_scale.propensity.diagnostics import save_reliability_png

            png = json_path.rsplit(".", 1)[0] + "-reliability.png" if json_path.endswith(".json") \
                else json_path + "-reliability.png"
            document["propensities"]["reliability_plot"] = png.rsplit("/", 1)[-1]
            check_output_file(png, inputs, opts)
            save_reliability_png(diagnostics, json_fs, png)
            record_file(png, opts)
        atomic_write(json_fs, json_path, dumps(document, indent=2))
        record_file(args.json, opts)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def logged_summaries(evaluation: Evaluation | Comparison, results: dict, alpha: float,
                     slotted: SlotResult | None = None) -> dict[str, dict]:
    """Per evaluated ``logged:`` policy, by spec, what is printed beside its estimates
    (:func:`~dr_scale.ope.logged.logged_summary`; per slot too with ``slotted``, the per-slot result)."""
    evaluations = evaluation.evaluations if isinstance(evaluation, Comparison) else {None: evaluation}
    out = {}
    for name, e in evaluations.items():
        if isinstance(e.policy, LoggedPolicy) and name in results:
            slots = None if slotted is None else {s: r.estimates for s, r in slotted.slots.items()}
            out[str(e.policy)] = logged_summary(e.policy, results[name].estimates, alpha, slots)
    return out


def run_slates(args, logs, opts) -> int:
    """``dr-scale evaluate LOGS --policy slate:FILE.npz --estimators SlateIPS,…`` on a slate log
    (:mod:`dr_scale.ope.evaluation.slates`); the exit status."""
    from dr_scale.ope.evaluation.slates import evaluate_slate_log
    from dr_scale.policies.slates import load_slate_policy

    names = parse_estimator_list(args.estimators, "--estimators")
    other = [n for n in names if n not in SLATE_ESTIMATORS]
    if other:
        raise UserError(f"--estimators: {', '.join(other)} estimate(s) single decisions, not slates; give slate "
                        f"estimators only ({', '.join(SLATE_ESTIMATORS)}) or run them separately")
    if "SlateCascadeDR" in names:
        raise UserError("--estimators SlateCascadeDR needs a slate Q-model Q̂_k, which the command line does not fit; "
                        "use dr_scale.ope.estimators.SlateCascadeDR from Python (docs/rankings.md)")
    policies = args.policy or []
    if len(policies) != 1 or not policies[0].startswith("slate:"):
        raise UserError("slate estimators evaluate one slate policy: give --policy slate:FILE.npz (e.g. a "
                        "_policy_NAME.npz that `dr-scale generate slates` writes)")
    given = [flag for flag, on in (("--reward-model", args.reward_model), ("--fit-reward-model", args.fit_reward_model),
                                   ("--baseline", args.baseline), ("--estimate-propensity", args.estimate_propensity),
                                   ("--propensity-model", args.propensity_model)) if on]
    if given:
        raise UserError(f"{', '.join(given)} do(es) not apply to slate estimators; drop it")
    policy = load_slate_policy(policies[0].removeprefix("slate:"), opts)
    estimators = {name: SLATE_ESTIMATORS[name]() for name in dict.fromkeys(names)}
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        result = evaluate_slate_log(logs, policy, estimators, client=client, progress=not args.no_progress)
    print(f"slate policy {policies[0]} (K = {policy.slots}) on {logs}")
    print(result.table(args.alpha, args.interval))
    if args.json:
        json_fs, json_path = url_to_fs(args.json, opts)
        document = {"logs": str(logs), "policy": policies[0], "slots": policy.slots,
                    "estimates": {name: {"value": e.value, "stderr": e.stderr, "impressions": e.n,
                                         "ci": list(e.ci(args.alpha, args.interval))}
                                  for name, e in [*result.estimates.items(), ("logging", result.logging)]}}
        atomic_write(json_fs, json_path, dumps(document, indent=2))
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def training_overlap_of(logs, policy_spec: str, parsed: dict, args) -> dict[str, str]:
    """The policy and baseline files trained on partitions of ``logs`` (refused unless --allow-training-overlap);
    ``parsed`` the policies by spec."""
    from dr_scale.report.partitions import list_partitions
    from dr_scale.report.training import check_training_overlap, training_of

    specs = {f"{policy_spec} (--policy)": policy_spec}
    if args.baseline and args.baseline != LOGGING:
        specs[f"{args.baseline} (--baseline)"] = args.baseline
    policies = {name: parsed[spec] for name, spec in specs.items() if spec in parsed}
    if not any(training_of(p) for p in policies.values()):
        return {}
    fs, parts = list_partitions(logs)
    return check_training_overlap(policies, parts, allow=args.allow_training_overlap, read=logs.log_filter, fs=fs)
