"""The CG tolerance of ``dr-scale fit`` sized to the statistical error: held-out error against rtol.

On a log, with λ as the default rule chooses it (out-of-fold error on the keyed sample), the K·k fold
models of :mod:`dr_scale.reward.fitting` are solved at each tolerance of ``--rtols`` and scored by their
out-of-fold squared error over ALL rows, Σ_i (r_i − ρ̂^{(f_i)}_{a_i}(x_i))² — every row predicted by a model
that did not see it: a held-out error. The tightest tolerance stands for the exact solve; each row prints
its CG passes, seconds and the error's relative difference from the exact one's; the last line the
exact error's own relative standard error, sd(e_i²) / (mean(e_i²) √n), the scale below which a difference
in held-out error is not measurable on this log.

    python benchmarks/fit_tolerance.py --logs /work/data/bandit1m --folds 5 [--lam auto] \\
        [--rtols 1e-1,3e-2,1e-2,3e-3,1e-3,1e-4,1e-6,1e-10]

The parts are read once and kept in memory (local threaded scheduler). Results are in
docs/reward-models.md with the command that produced them.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", required=True)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--lam", default="auto")
    ap.add_argument("--rtols", default="1e-1,3e-2,1e-2,3e-3,1e-3,1e-4,1e-6,1e-10")
    args = ap.parse_args()

    from dr_scale.logs.listing import list_parts, log_metadata
    from dr_scale.outofcore.passes import PartSet
    from dr_scale.reward.fitting import (
        Fits,
        FitSettings,
        block_sums,
        fit_on_parts,
        out_of_fold_errors,
        read_grouped_part,
        solve,
    )

    fs, paths = list_parts(args.logs)
    meta = log_metadata(fs, paths[0])
    d, k = int(meta["n_features"]), int(meta["n_actions"])
    parts = PartSet.build(read_grouped_part, [(fs, p, d, k, args.folds, 0) for p in paths])
    n = float(parts.sum(_rows)[0])
    lam = args.lam
    if lam == "auto":
        start = time.perf_counter()
        model = fit_on_parts(parts, n, d, k, FitSettings(folds=args.folds))
        search = model.metadata["lambda_search"]
        lam = model.metadata["lam"]
        print(f"λ = {lam:g} by the default rule ({search['passes']} passes on {search['sample_rows']:,} sampled rows; "
              f"the whole fit {time.perf_counter() - start:.1f} s)")
    lam = float(lam)
    fits = Fits(args.folds, k, full=False)
    stats = fits.stats(block_sums(parts, d))
    rows = []
    for rtol in [float(v) for v in args.rtols.split(",")]:
        start = time.perf_counter()
        fit, intercept = solve(parts, stats, lam, fits, rtol=rtol, max_iter=2000)
        seconds = time.perf_counter() - start
        sse = float(parts.sum(out_of_fold_errors, fit.coef, intercept, args.folds)[0].sum())
        rows.append((rtol, fit.iterations, seconds, sse))
    moments = parts.sum(_squared_error_moments, fit.coef, intercept, args.folds)
    mean, second = moments[0] / n, moments[1] / n
    exact = rows[-1][3]
    print(f"{'rtol':>8} {'CG passes':>10} {'seconds':>8} {'out-of-fold SSE':>16} {'vs exact':>9}   (n = {n:,.0f}, "
          f"λ = {lam:g}, {args.folds} folds)")
    for rtol, passes, seconds, sse in rows:
        print(f"{rtol:>8g} {passes:>10} {seconds:>8.1f} {sse:>16.6f} {100 * (sse / exact - 1):>+8.3f}%")
    relative_se = np.sqrt(second - mean ** 2) / mean / np.sqrt(n)
    print(f"relative standard error of the exact out-of-fold SSE: {100 * relative_se:.3f}%")


def _squared_error_moments(part, coef, intercept, folds):
    """(Σ e_i², Σ e_i⁴) of the part's out-of-fold residuals e_i = r_i − ρ̂^{(f_i)}_{a_i}(x_i)."""
    k = coef.shape[0] // folds
    total = np.zeros(2)
    for b in range(folds * k):
        e = part.reward[part.start[b]:part.start[b + 1]] - part.block(b, coef.shape[1]) @ coef[b] - intercept[b]
        total += [np.sum(e ** 2), np.sum(e ** 4)]
    return total


def _rows(part):
    return np.array([float(len(part))])


if __name__ == "__main__":
    main()
