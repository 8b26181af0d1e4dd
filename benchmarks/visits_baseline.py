"""The visits pipeline against a straightforward in-memory baseline, on the same subsamples.

Baseline (what one would write first): load every part into one in-memory CSR matrix,
first principal component by scikit-learn's PCA (ARPACK, implicit centring), the
paper's propensities, then for each (fraction, repetition) a scikit-learn ``Ridge``
on the sampled rows of the subsample and the IPS / DR means in numpy. Both solve the
ridge problems by conjugate gradients to the same stopping rule, ‖r‖ ≤ rtol ‖rhs‖ on the
centred normal equations (``--rtol``, the job's default: scikit-learn's ``sparse_cg``
``tol`` is that rule), so neither side does more precise work than the other. The subsamples
and logging draws are the pipeline's keyed ones (dr_scale.experiments.visits.sampler), so both
compute the same estimates; the script runs both ``--rounds`` times, alternating, and
prints every timing, the ratio of the best times and the largest relative difference of
the 2 × F estimates.

    python benchmarks/visits_baseline.py                      # embedded 385,000-row set
    python benchmarks/visits_baseline.py --data /work/data/visits-paper --repetitions 10

Timings are wall-clock on whatever machine runs it (this project's was a shared
2-core machine); data generation is excluded from both.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp
from sklearn.decomposition import PCA
from sklearn.linear_model import Ridge

from dr_scale.experiments.visits.experiment import PAPER_FRACTIONS, Settings, load_parts, run_experiment
from dr_scale.experiments.visits.job import embedded_dataset
from dr_scale.experiments.visits.sampler import logging_actions, memberships, propensity
from dr_scale.logs.listing import list_parts
from dr_scale.logs.sparse import features_to_csr
from dr_scale.outofcore.lanczos import orient
from dr_scale.outofcore.passes import spill_folder


def baseline(url: str, s: Settings, n_features: int = 5000):
    """The F IPS and DR estimates, in memory; each ridge fit to scikit-learn's ``tol`` = the pipeline's rtol."""
    fs, paths = list_parts(url)
    tables = [pq.read_table(fs.open(p, "rb")) for p in paths]
    X = sp.vstack([features_to_csr(t.column("features"), n_features) for t in tables]).tocsr()
    v = np.concatenate([t.column("visits").to_numpy() for t in tables]).astype(float)
    row_id = np.concatenate([t.column("row_id").to_numpy() for t in tables])
    xbar = orient(PCA(n_components=1, svd_solver="arpack").fit(X).components_[0])
    t = X @ xbar
    p = propensity(t, t.min(), t.mean(), s.kernel)
    ips, dr = [], []
    for fi, f in enumerate(s.fractions):
        rows, reps = memberships(row_id, f, s.repetitions, s.seed, fi)
        a = logging_actions(p[rows], row_id[rows], reps, s.seed, fi)
        for r in range(s.repetitions):
            S, aS = rows[reps == r], a[reps == r]
            if S.size == 0:
                ips.append(np.nan), dr.append(np.nan)
                continue
            sampled = S[aS]
            if sampled.size:
                model = Ridge(alpha=s.lam, solver="sparse_cg", tol=s.rtol).fit(X[sampled], v[sampled])
                rho = model.predict(X[S])
            else:
                rho = np.zeros(S.size)
            w = aS / p[S]
            ips.append(np.mean(w * v[S]))
            dr.append(np.mean(rho + w * (v[S] - rho)))
    return np.array(ips), np.array(dr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="visits set URL (default: the embedded 385,000-row set, generated if needed)")
    ap.add_argument("--repetitions", type=int, default=100)
    ap.add_argument("--lam", type=float, default=Settings.model_fields["lam"].default)
    ap.add_argument("--rtol", type=float, default=Settings.model_fields["rtol"].default,
                    help="both sides' CG tolerance (default: the job's)")
    ap.add_argument("--rounds", type=int, default=3, help="pipeline-then-baseline rounds; the best of each is compared")
    ap.add_argument("--spill", default="disk", help="the pipeline's spill setting (as in pipelines/visits.toml)")
    args = ap.parse_args()
    url = args.data or embedded_dataset(385_000, 5000, 0)
    s = Settings(fractions=PAPER_FRACTIONS, repetitions=args.repetitions, lam=args.lam, rtol=args.rtol)
    times = {"pipeline": [], "baseline": []}
    for _ in range(args.rounds):  # alternating, so both see the same machine; best of the rounds compared
        start = time.perf_counter()
        with spill_folder(args.spill) as folder:
            res = run_experiment(load_parts(url, spill=folder), s)
        times["pipeline"].append(time.perf_counter() - start)
        start = time.perf_counter()
        ips, dr = baseline(url, s)
        times["baseline"].append(time.perf_counter() - start)
        print(f"round {len(times['pipeline'])}: pipeline {times['pipeline'][-1]:.1f} s (stages {res.timings}), "
              f"baseline {times['baseline'][-1]:.1f} s: {times['baseline'][-1] / times['pipeline'][-1]:.2f}x",
              flush=True)
    diff = max(np.nanmax(np.abs(res.ips - ips) / np.abs(ips)), np.nanmax(np.abs(res.dr - dr) / np.abs(dr)))
    pipeline, base = min(times["pipeline"]), min(times["baseline"])
    print(f"data {url}: {res.n_rows:,} rows, {len(s.fractions)} fractions × {s.repetitions} repetitions, "
          f"best of {args.rounds} rounds")
    print(f"pipeline (dr_scale.experiments.visits, threaded Dask, spill {args.spill}) {pipeline:8.1f} s")
    print(f"baseline (in memory, sklearn Ridge)        {base:8.1f} s")
    print(f"speed-up {base / pipeline:.2f}x; largest relative difference of the estimates {diff:.2e}")


if __name__ == "__main__":
    main()
