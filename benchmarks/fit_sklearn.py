"""``dr-scale fit`` against what a user would write, measured side by side in one run.

The baseline reads the whole log into one CSR matrix (dr_scale.logs.reading.read_log, the
project's own fast reader) and fits scikit-learn's ``Ridge(alpha=λ,
solver="sparse_cg", tol=rtol)`` on each action's rows. ``fit_reward_model`` solves the
same objective, min Σ_{i: a_i=a} (r_i − b_a − x_i·w_a)² + λ‖w_a‖² with b_a unpenalised,
to the same stopping rule (‖residual‖ ≤ rtol·‖rhs‖ of the centred normal equations):
out of core, all actions in each pass, parts spilled to local files between passes.

Each side runs in its own process, so its peak RSS (``ru_maxrss``) and CPU time are its
own. Also measured: the time of one solver pass (one Gram product of every action over
the persisted parts, grouped by action) against a bare read pass (every part read and validated
into CSR, nothing else), both on the local threaded scheduler.

    python benchmarks/fit_sklearn.py --logs URL [--lam 1] [--rtol 1e-10]

Prints wall and CPU times and their ratios, peak RSS of both, the largest coefficient
difference, and pass / read. Results are in docs/reward-models.md with the command that
produced them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


def _clock():
    return time.perf_counter(), time.process_time()


def _since(start) -> dict:
    wall, cpu = _clock()
    return {"wall": wall - start[0], "cpu": cpu - start[1]}


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def side_sklearn(args) -> dict:
    import scipy.sparse as sp
    from sklearn.linear_model import Ridge

    from dr_scale.logs.listing import list_parts, log_metadata
    from dr_scale.logs.reading import read_log

    start = _clock()
    fs, paths = list_parts(args.logs)
    parts = read_log(args.logs, n_features=log_metadata(fs, paths[0])["n_features"])
    X = sp.vstack([p.X for p in parts], format="csr")
    action = np.concatenate([p.action for p in parts])
    reward = np.concatenate([p.reward for p in parts])
    del parts
    read = _since(start)
    k = int(action.max()) + 1
    coef, intercept = np.zeros((X.shape[1], k)), np.zeros(k)
    for a in range(k):
        rows = action == a
        if rows.any():
            fitted = Ridge(alpha=args.lam, solver="sparse_cg", tol=args.rtol, max_iter=None).fit(X[rows], reward[rows])
            coef[:, a], intercept[a] = fitted.coef_, fitted.intercept_
    total = _since(start)
    np.savez(args.result, coef=coef, intercept=intercept)
    return {"read": read, "total": total, "peak_rss_mib": _peak_rss_mib()}


def side_fit(args) -> dict:
    from dr_scale.reward.fitting import FitSettings, fit_reward_model

    start = _clock()
    model = fit_reward_model(args.logs, FitSettings(lam=args.lam, rtol=args.rtol))
    total = _since(start)
    np.savez(args.result, coef=model.coef, intercept=model.intercept)
    return {"total": total, "peak_rss_mib": _peak_rss_mib(), "cg_passes": model.metadata["passes"]}


def side_passes(args) -> dict:
    """A bare read pass, then the parts grouped by action as fit builds them and timed solver passes."""
    import dask

    from dr_scale.io.cache import spill_root
    from dr_scale.logs.listing import list_parts, log_metadata
    from dr_scale.logs.reading import read_partition
    from dr_scale.outofcore.compute import compute
    from dr_scale.outofcore.passes import PartSet, spill_folder
    from dr_scale.reward.fitting import Fits, add_fit_gram, read_grouped_part

    fs, paths = list_parts(args.logs)
    meta = log_metadata(fs, paths[0])
    d, k = meta["n_features"], meta["n_actions"]

    def read_rows(path):
        return read_partition(fs, path, n_features=d, n_actions=k).X.nnz

    reads = []
    for _ in range(args.repeat):
        start = _clock()
        compute(*[dask.delayed(read_rows)(p) for p in paths])
        reads.append(_since(start))
    with spill_folder("disk", None, disk=spill_root()) as folder:
        parts = PartSet.build(read_grouped_part, [(fs, p, d, k, None, 0) for p in paths], spill=folder)
        fits = Fits(0, k, full=True)
        P = np.random.default_rng(0).normal(size=(k, d))
        passes = []
        for _ in range(args.repeat):
            start = _clock()
            parts.accumulate(add_fit_gram, P, fits, np.ones(k, bool))
            passes.append(_since(start))
    return {"read_pass": _median(reads), "solver_pass": _median(passes)}


def _median(runs: list[dict]) -> dict:
    return {key: float(np.median([r[key] for r in runs])) for key in runs[0]}


SIDES = {"sklearn": side_sklearn, "fit": side_fit, "passes": side_passes}


def run_side(name: str, args, result: str) -> dict:
    command = [sys.executable, __file__, "--side", name, "--logs", args.logs, "--lam", str(args.lam),
               "--rtol", str(args.rtol), "--repeat", str(args.repeat), "--result", result]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"the {name} measurement failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", required=True, help="a logged data set (e.g. from dr-scale generate bandit)")
    parser.add_argument("--lam", type=float, default=1.0)
    parser.add_argument("--rtol", type=float, default=1e-10, help="the stopping rule of both sides")
    parser.add_argument("--repeat", type=int, default=3, help="read and solver passes timed (median)")
    parser.add_argument("--sides", default="fit,sklearn,passes",
                        help="which measurements to run (comma-separated; default all three)")
    parser.add_argument("--side", choices=sorted(SIDES), help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(SIDES[args.side](args)))
        return
    sides = args.sides.split(",")
    print(f"logs {args.logs}, λ = {args.lam:g}, rtol = {args.rtol:g} (machine shared: see CPU-time ratios)")
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: os.path.join(tmp, f"{name}.npz") for name in SIDES}
        got = {name: run_side(name, args, files[name]) for name in sides}
        print(f"{'':24} {'wall s':>9} {'CPU s':>9} {'peak RSS MiB':>13}")
        for name, label in (("fit", "dr-scale fit"), ("sklearn", "read + sklearn Ridge")):
            if name in got:
                g = got[name]
                extra = f"{g['cg_passes']} CG passes" if name == "fit" else f"read {g['read']['wall']:.2f} s"
                print(f"{label:24} {g['total']['wall']:>9.2f} {g['total']['cpu']:>9.2f} {g['peak_rss_mib']:>13.0f}"
                      f"   ({extra})")
        if {"fit", "sklearn"} <= set(got):
            fit, sk = got["fit"]["total"], got["sklearn"]["total"]
            print(f"speed-up: {sk['wall'] / fit['wall']:.2f}× wall, {sk['cpu'] / fit['cpu']:.2f}× CPU")
            with np.load(files["fit"]) as a, np.load(files["sklearn"]) as b:
                diff = max(np.abs(a["coef"] - b["coef"]).max(), np.abs(a["intercept"] - b["intercept"]).max())
                scale = max(np.abs(b["coef"]).max(), np.abs(b["intercept"]).max())
            print(f"largest coefficient difference: {diff:.3g} (largest coefficient {scale:.3g})")
    if "passes" in got:
        rp, sp_ = got["passes"]["read_pass"], got["passes"]["solver_pass"]
        print(f"solver pass {sp_['wall']:.3f} s wall / {sp_['cpu']:.3f} s CPU; bare read pass {rp['wall']:.3f} s wall"
              f" / {rp['cpu']:.3f} s CPU: pass / read = {sp_['wall'] / rp['wall']:.2f} wall, "
              f"{sp_['cpu'] / rp['cpu']:.2f} CPU")


if __name__ == "__main__":
    main()
