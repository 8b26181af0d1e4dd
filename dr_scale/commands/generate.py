"""``dr-scale generate visits|bandit``: write a synthetic data set in parallel and print its calibration."""

from __future__ import annotations

import sys
import time

from dr_scale.commands.common import (
    POSITIVE_INT,
    SEED,
    add_compute_options,
    add_storage_option,
    storage_options,
)
from dr_scale.core.errors import UserError
from dr_scale.io.config import ClickRate, NonNegativeFinite, Share, UniformShare, option
from dr_scale.outofcore.compute import dask_session


def add_parser(sub) -> None:
    """Add ``dr-scale generate`` (``visits``, ``bandit``) and its options to the sub-command parsers ``sub``."""
    p = sub.add_parser("generate", help="generate a synthetic data set (visits: the paper's Sec. 5.2 shape; "
                                        "bandit: a logged bandit with known truth)",
                       description="Generate a synthetic data set as Parquet parts, one Dask task per part.")
    kinds = p.add_subparsers(dest="kind", required=True)
    v = kinds.add_parser("visits", help="users × sparse binary features with a visit count (paper, Sec. 5.2)",
                         description="Write row_id, features (list<int32>), visits (int32) as Parquet parts and "
                                     "print the calibration figures (true mean, mean propensity, naive sampled "
                                     "mean, ridge R²) under the paper's sampler.")
    v.add_argument("--rows", type=POSITIVE_INT, default=3_854_689,
                   help="number of users (default: the paper's 3854689)")
    v.add_argument("--features", type=POSITIVE_INT, default=5000, help="number of binary features (default 5000)")
    v.add_argument("--out", required=True, metavar="URL", help="output folder (any fsspec URL)")
    v.add_argument("--seed", type=SEED, default=0,
                   help="the feature profiles, the users and the logged view's draws (default 0)")
    v.add_argument("--rows-per-part", type=POSITIVE_INT, default=100_000, help="rows per Parquet part (default 100000)")
    v.add_argument("--no-calibration", action="store_true", help="skip the calibration figures")
    v.add_argument("--overwrite", action="store_true",
                   help="replace the output folder if it is not empty and dr-scale wrote it (docs/data-contract.md)")
    v.add_argument("--logged-view", metavar="URL",
                   help="also write the paper's sampler's logged view (row_id, features, action = sampled, "
                        "reward = action·visits, propensity) as a logged data set; evaluate it with "
                        "`dr-scale evaluate URL --policy constant:1`")
    add_compute_options(v)
    add_storage_option(v)
    v.set_defaults(func=run_visits)
    _add_bandit_parser(kinds)
    _add_slates_parser(kinds)


def _add_slates_parser(kinds) -> None:
    s = kinds.add_parser("slates", help="a slate (ranking) log with known truth (docs/generate-bandit.md, Slates)",
                         description="Write a slate log (one row per slot, with slot and impression) from a world of "
                                     "user types, a catalogue of items, position bias and a cascade interaction of "
                                     "strength γ, logged by a policy that draws each slot independently; print the "
                                     "true values of the logging and target policies, whose files it writes beside "
                                     "the parts (_policy_NAME.npz).")
    s.add_argument("--impressions", type=POSITIVE_INT, required=True, help="number of impressions")
    s.add_argument("--slots", type=POSITIVE_INT, default=3, help="slots K per impression (default 3)")
    s.add_argument("--items", type=POSITIVE_INT, default=100, help="items in the catalogue (default 100)")
    s.add_argument("--users", type=POSITIVE_INT, default=10, help="user types, the contexts (default 10)")
    s.add_argument("--interaction", type=option(Share, "number in [0, 1]"), default=0.5, metavar="GAMMA",
                   help="γ in [0, 1]: the chance that a click ends the browsing (0: additive slots; 1: the cascade "
                        "of no click after the first; default 0.5)")
    s.add_argument("--position-bias", type=option(NonNegativeFinite, "finite number ≥ 0"), default=1.0, metavar="ETA",
                   help="η ≥ 0: slot k is examined with probability (k + 1)^-η (default 1)")
    s.add_argument("--impressions-per-part", type=POSITIVE_INT, default=50_000,
                   help="impressions per Parquet part (default 50000; an impression's rows are in one part)")
    s.add_argument("--out", required=True, metavar="URL", help="output folder (any fsspec URL); must be new or empty")
    s.add_argument("--seed", type=SEED, default=0, help="the world and every draw (default 0)")
    s.add_argument("--overwrite", action="store_true",
                   help="replace the output folder if it is not empty and dr-scale wrote it (docs/data-contract.md)")
    add_storage_option(s)
    add_compute_options(s)
    s.set_defaults(func=run_slates)


def run_slates(args) -> int:
    """Run ``dr-scale generate slates``: a slate log with known truth; the exit status."""
    from dr_scale.synthetic.slates import SlateWorld, generate_slates

    world = SlateWorld(users=args.users, items=args.items, slots=args.slots, position_bias=args.position_bias,
                       interaction=args.interaction, seed=args.seed)
    start = time.perf_counter()
    opts = storage_options(args.storage_options)
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        manifest = generate_slates(args.out, world, impressions=args.impressions,
                                   impressions_per_part=args.impressions_per_part, overwrite=args.overwrite,
                                   storage_options=opts, client=client, progress=not args.no_progress)
    print(f"wrote {args.impressions:,} impressions × {args.slots} slots in {manifest['parts']} part(s) to {args.out} "
          f"in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    for name, truth in manifest["truth"].items():
        how = "exact" if truth["stderr"] == 0 else f"Monte Carlo, stderr {truth['stderr']:.6f}"
        print(f"true value, {name:<14} {truth['value']:.6f}   ({how}; policy file {args.out}/_policy_{name}.npz)")
    return 0


def _add_bandit_parser(kinds) -> None:
    b = kinds.add_parser("bandit", help="a logged contextual bandit with known E[r | x, a] (docs/generate-bandit.md)",
                         description="Write a logged data set in the core contract (row_id, features, action, "
                                     "reward, propensity) plus expected_reward (the true E[r | x, a] of every "
                                     "action), from a world with sparse contexts, a non-linear Bernoulli reward and "
                                     "a softmax logging policy; print its calibration (docs/generate-bandit.md).")
    b.add_argument("--rows", type=POSITIVE_INT, required=True, help="number of rows in all (split evenly over --days)")
    b.add_argument("--features", type=POSITIVE_INT, default=1 << 18, help="number of binary features d (default 2^18)")
    b.add_argument("--actions", type=POSITIVE_INT, default=10,
                   help="number of actions k (default 10; up to 500, or 10^6 with --action-features)")
    b.add_argument("--action-features", type=POSITIVE_INT, metavar="D_A",
                   help="a world of items with D_A features each in --embedding-categories categories, the "
                        "reward depending on the context and the item's category (docs/large-action-spaces.md): "
                        "writes the action catalogue (_actions.parquet), embedding_propensity, a top-K target "
                        "policy (_target_policy.npz, column target_topk) and its truth target_expected_reward")
    b.add_argument("--embedding-categories", type=POSITIVE_INT, metavar="L",
                   help="with --action-features: the number of item categories e(a) (default 20)")
    b.add_argument("--target-top-k", type=POSITIVE_INT, metavar="K",
                   help="with --action-features: the actions the target policy lists per row (default 10)")
    b.add_argument("--out", required=True, metavar="URL", help="output folder (any fsspec URL); must be new or empty")
    b.add_argument("--seed", type=SEED, default=0, help="the world and every draw (default 0)")
    b.add_argument("--days", type=POSITIVE_INT,
                   help="write date=YYYY-MM-DD/ partitions of consecutive rows, one per day "
                        "from 2026-11-01, all from the same world")
    b.add_argument("--rows-per-part", type=POSITIVE_INT, default=500_000, help="rows per Parquet part (default 500000)")
    b.add_argument("--overwrite", action="store_true",
                   help="replace the output folder if it is not empty and dr-scale wrote it (docs/data-contract.md)")
    b.add_argument("--hide-propensity", action="store_true",
                   help="write the log without its propensity column, as a log that never recorded it (the truth "
                        "stays known: the world is rebuilt from the manifest; docs/propensities.md)")
    b.add_argument("--uniform-share", type=option(UniformShare, "number in [0, 0.5]"), metavar="EPS",
                   help="the logging policy's uniform share ε in [0, 0.5]: μ = (1 − ε) softmax + ε / k "
                        "(default min(0.5, 0.001 k); 0 for a pure softmax of a linear score)")
    b.add_argument("--click-rate", type=option(ClickRate, "number in (0, 0.5]"), metavar="P",
                   help="rare 0/1 clicks: the action offsets centred at logit(P) − 1.9 instead of −1.5, so that the "
                        "mean reward is near P (printed; e.g. 0.005)")
    add_compute_options(b)
    add_storage_option(b)
    b.set_defaults(func=run_bandit)


def run_bandit(args) -> int:
    """Run ``dr-scale generate bandit``: a logged bandit with known truth written as Parquet parts; the exit
    status.
    """
    from dr_scale.synthetic.bandit import calibration_lines, generate_bandit

    opts = storage_options(args.storage_options)
    items_only = [flag for flag, dest in (("--embedding-categories", "embedding_categories"),
                                          ("--target-top-k", "target_top_k")) if getattr(args, dest) is not None]
    if items_only and args.action_features is None:
        raise UserError(f"{items_only[0]} sets the world of items of --action-features D_A; without it the world has "
                        "no items, and it would be silently ignored: give --action-features or drop it")
    flat_only = [flag for flag, given in (("--hide-propensity", args.hide_propensity),
                                          ("--uniform-share", args.uniform_share is not None)) if given]
    if flat_only and args.action_features is not None:
        raise UserError(f"{flat_only[0]} sets the logging of the world without items; the world of items of "
                        "--action-features logs by its own softmax over the items, and it would be silently ignored: "
                        "drop one of them")
    if args.action_features is not None:
        return _run_items(args, opts)
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        start = time.perf_counter()
        manifest = generate_bandit(args.out, rows=args.rows, features=args.features, actions=args.actions,
                                   seed=args.seed, days=args.days, rows_per_part=args.rows_per_part,
                                   overwrite=args.overwrite, storage_options=opts,
                                   client=client, progress=not args.no_progress,
                                   hide_propensity=args.hide_propensity, uniform_share=args.uniform_share,
                                   click_rate=args.click_rate)
    print(f"wrote {manifest['rows']:,} rows in {manifest['parts']} parts to {args.out} "
          f"in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    print("\n".join(calibration_lines(manifest["calibration"])))
    return 0


def _run_items(args, opts) -> int:
    from dr_scale.synthetic.item_world import generate_item_bandit, item_calibration_lines

    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        start = time.perf_counter()
        manifest = generate_item_bandit(args.out, rows=args.rows, features=args.features, actions=args.actions,
                                        action_features=args.action_features,
                                        embedding_categories=args.embedding_categories or 20,
                                        target_top_k=args.target_top_k or 10, seed=args.seed, days=args.days,
                                        rows_per_part=args.rows_per_part, overwrite=args.overwrite,
                                        storage_options=opts, client=client, progress=not args.no_progress)
    print(f"wrote {manifest['rows']:,} rows in {manifest['parts']} parts to {args.out} "
          f"in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    print("\n".join(item_calibration_lines(manifest["calibration"])))
    return 0


def run_visits(args) -> int:
    """Run ``dr-scale generate visits``: the paper's Sec. 5.2 visits data set written as Parquet parts; the exit
    status.
    """
    from dr_scale.io.cache import spill_root
    from dr_scale.outofcore.passes import spill_folder
    from dr_scale.synthetic.visits import generate_visits

    opts = storage_options(args.storage_options)
    if args.logged_view:  # checked and claimed before the work, replaced only if dr-scale wrote it
        from dr_scale.io.atomic import url_to_fs
        from dr_scale.io.outputs import prepare_output_folder

        prepare_output_folder(args.logged_view, *url_to_fs(args.logged_view, opts), overwrite=args.overwrite,
                              writer="dr_scale.experiments.visits.logged")
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        start = time.perf_counter()
        manifest = generate_visits(args.out, rows=args.rows, features=args.features, seed=args.seed,
                                   rows_per_part=args.rows_per_part, storage_options=opts, client=client,
                                   progress=not args.no_progress, overwrite=args.overwrite)
        print(f"wrote {manifest['rows']:,} rows in {manifest['parts']} parts to {args.out} "
              f"in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        if args.no_calibration and not args.logged_view:
            return 0
        with spill_folder("disk", client, disk=spill_root()) as spill:
            return _view_and_calibration(args, opts, client, spill)


def _view_and_calibration(args, opts, client, spill) -> int:
    """The logged view and the calibration figures, from the set's parts read once (spilled when local)."""
    from dr_scale.experiments.visits.experiment import Settings, fit_sampler, load_parts, run_experiment
    from dr_scale.experiments.visits.logged import write_logged_view
    from dr_scale.synthetic.visits import TARGETS

    progress = not args.no_progress
    parts = load_parts(args.out, opts or None, client=client, progress=progress, spill=spill)
    if args.logged_view:
        comp, m, mbar = fit_sampler(parts, progress=progress)
        n = write_logged_view(parts, args.logged_view, comp.vector, m, mbar, seed=args.seed,
                              storage_options=opts, progress=progress)
        _write_view_manifest(args.logged_view, opts, n, args.seed)
        print(f"wrote the logged view ({n:,} rows) to {args.logged_view}", file=sys.stderr)
    if args.no_calibration:
        return 0
    res = run_experiment(parts, Settings(fractions=(0.05,), repetitions=1, seed=args.seed), progress=progress)
    cal = res.calibration
    print(f"true mean visits      {cal['true_mean']:8.3f}   (paper {TARGETS['true_mean']})")
    print(f"visits sd             {cal['visits_sd']:8.3f}")
    print(f"mean propensity       {cal['mean_propensity']:8.3f}   (paper's draft: about 1/4)")
    print(f"naive sampled mean    {cal['naive_sampled_mean']:8.3f}   (paper's draft: about "
          f"{TARGETS['naive_sampled_mean']}); bias {100 * cal['naive_bias']:.1f}% (draft: 24%)")
    print(f"ridge R² on all rows  {res.r2[0]:8.3f}   (ρ̂ fitted on the sampled rows of a 5% subsample, "
          f"{int(res.sampled[0]):,} rows)")
    return 0


def _write_view_manifest(url: str, opts, rows: int, seed: int) -> None:
    """The logged view's ``_manifest.json``, written last: the view is complete."""
    import json

    from dr_scale.io.atomic import url_to_fs
    from dr_scale.io.outputs import publish_folder

    fs, root = url_to_fs(url, opts)
    publish_folder(fs, root, json.dumps({"generator": "dr_scale.experiments.visits.logged", "rows": rows,
                                         "seed": seed}))
