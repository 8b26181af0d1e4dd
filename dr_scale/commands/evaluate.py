"""``dr-scale evaluate LOGS``: estimate a target policy's value on a logged data set."""

from __future__ import annotations

import json
import re
import sys

from dr_scale.atomic import atomic_write, url_to_fs
from dr_scale.commands.common import add_compute_options, add_storage_option, storage_options
from dr_scale.compute import dask_session
from dr_scale.estimators import ESTIMATORS, INTERVAL_METHODS, make_estimators
from dr_scale.evaluation import LOGGING, Evaluation, evaluate_log
from dr_scale.reward_models import LinearRewardModel


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="estimate a target policy's value from logged data",
                       description="Estimate a target policy's value on a logged data set (Parquet file, "
                                   "folder or URL). With no LOGS, runs on the bundled example log.")
    p.add_argument("logs", nargs="?", help="Parquet file, folder, glob or fsspec URL (default: bundled example)")
    p.add_argument("--policy", default=None,
                   help="constant:A | column:NAME | probs:NAME | callable:module:function "
                        "(default: column:target_action)")
    p.add_argument("--reward-model", metavar="FILE", help="reward model ρ̂ (.npz of a LinearRewardModel)")
    p.add_argument("--baseline", metavar="B",
                   help="also estimate V(policy) − V(B) per estimator from paired per-row terms; B is a policy "
                        f"spec or '{LOGGING}' (the logged rewards' mean)")
    p.add_argument("--estimators", default=None,
                   help=f"comma-separated, from {','.join(ESTIMATORS)}, optionally with parameters, e.g. "
                        "ClippedDR(max_weight=50) (default: all that apply: IPS,SNIPS without a reward model, "
                        "all with one)")
    p.add_argument("--clip", type=float, default=None, metavar="M",
                   help="weight clip M for ClippedDR (default: chosen by estimated MSE)")
    p.add_argument("--tau", type=float, default=None, help="switch threshold τ for SwitchDR (default: chosen by "
                                                          "estimated MSE)")
    p.add_argument("--interval", choices=INTERVAL_METHODS, default="normal",
                   help="normal (Wald) or el (empirical likelihood, for heavy-tailed weights) intervals")
    p.add_argument("--n-actions", type=int, help="number of actions k (default: from the log's metadata)")
    p.add_argument("--alpha", type=float, default=0.05, help="1 − confidence level of the intervals")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON (any fsspec URL)")
    add_compute_options(p)
    add_storage_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    logs, model_path, policy = args.logs, args.reward_model, args.policy
    if logs is None:
        from dr_scale.example import example_paths  # imports scikit-learn: only when needed

        logs, example_model = example_paths()
        model_path = model_path or example_model
    opts = storage_options(args.storage_options)
    model = LinearRewardModel.load(model_path, opts) if model_path else None
    names = re.split(r",\s*(?![^()]*\))", args.estimators) if args.estimators else (
        list(ESTIMATORS) if model is not None else ["IPS", "SNIPS"])
    evaluation = Evaluation(policy or "column:target_action", make_estimators(names, clip=args.clip, tau=args.tau),
                            reward_model=model, n_actions=args.n_actions, baseline=args.baseline)
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        result = evaluate_log(logs, evaluation, client=client, storage_options=opts, progress=not args.no_progress)
    print(f"policy {result.policy} on {logs}")
    print(result.table(args.alpha, args.interval))
    if args.json:
        fs, path = url_to_fs(args.json, opts)
        atomic_write(fs, path, json.dumps({"logs": str(logs), **result.to_dict(args.alpha, args.interval)}, indent=2))
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
