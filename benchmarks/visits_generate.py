"""The visits generator's per-part work against a plain numpy version of the same draws.

The baseline draws exactly the same rows from the same streams in the plainest numpy:
features by ``searchsorted`` on each group's CDF, the distinct features of each row by
``np.unique``, X·ω by a scipy CSR product. The library (:func:`dr_scale.synthetic.visits.
generate_part`) uses a guide table for the feature draws, a sort and a comparison of
neighbours for the distinct features, and ``bincount`` for X·ω. Both build the same
Arrow table (checked), in one thread, alternating for ``--rounds`` rounds; it prints the
best time of each side per part, and the ratio of their CPU times.

    python benchmarks/visits_generate.py [--parts 3] [--rows-per-part 100000] [--rounds 3]

The whole paper-size set (39 parts, written as zstd Parquet by one Dask task per part):
``dr-scale generate visits --out DIR --no-calibration`` prints its wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import with_log_metadata
from dr_scale.synthetic.visits import DEFAULT_FEATURES, GlobalModel, generate_part, global_model


def plain_part(seed: int, part: int, first_row: int, n_rows: int, gm: GlobalModel) -> pa.Table:
    """The same rows as ``generate_part``, in plain numpy and scipy."""
    m = gm.model
    rng = np.random.default_rng((seed, 1, part))
    d = gm.cdf.shape[1]
    shares = np.array([grp.share for grp in m.groups])
    group = rng.choice(len(m.groups), size=n_rows, p=shares / shares.sum())
    breadth = m.breadth * rng.lognormal(-0.5 * m.breadth_sigma ** 2, m.breadth_sigma, n_rows)
    draws = np.minimum(1 + rng.poisson(breadth), m.max_draws)
    row = np.repeat(np.arange(n_rows, dtype=np.int64), draws)
    u = rng.random(row.shape[0])
    feature = np.empty(row.shape[0], dtype=np.int64)
    for k in range(len(m.groups)):
        sel = group[row] == k
        feature[sel] = np.minimum(np.searchsorted(gm.cdf[k], u[sel], side="right"), d - 1)
    rows, cols = np.divmod(np.unique(row * d + feature), d)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    X = sp.csr_matrix((np.ones(cols.shape[0]), cols.astype(np.int32), indptr), shape=(n_rows, d))
    log_mu = (m.alpha + np.array([grp.visits for grp in m.groups])[group] + X @ gm.omega
              + rng.normal(0.0, m.noise_sd, n_rows))
    table = pa.table({"row_id": pa.array(np.arange(first_row, first_row + n_rows, dtype=np.int64)),
                      "features": csr_to_features(X),
                      "visits": pa.array(rng.poisson(np.exp(log_mu)).astype(np.int32))})
    return with_log_metadata(table, d, None)


def timed(make, parts, rows, gm):
    wall, cpu = time.perf_counter(), time.process_time()
    tables = [make(0, j, j * rows, rows, gm) for j in range(parts)]
    return time.perf_counter() - wall, time.process_time() - cpu, tables


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=3)
    ap.add_argument("--rows-per-part", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    gm = global_model(0, DEFAULT_FEATURES)
    best = {"library": (np.inf, np.inf), "plain numpy": (np.inf, np.inf)}
    for r in range(args.rounds):
        (lw, lc, ours), (pw, pc, plain) = (timed(f, args.parts, args.rows_per_part, gm)
                                           for f in (generate_part, plain_part))
        assert all(a.equals(b) for a, b in zip(ours, plain)), "the two sides drew different rows"
        best = {"library": min(best["library"], (lw, lc)), "plain numpy": min(best["plain numpy"], (pw, pc))}
        print(f"round {r + 1}: library {lw / args.parts:.3f} s per part, plain numpy {pw / args.parts:.3f} s "
              f"({pw / lw:.1f}×; CPU {pc / lc:.1f}×)")
    (lw, lc), (pw, pc) = best["library"], best["plain numpy"]
    print(f"best of {args.rounds}: {lw / args.parts:.3f} against {pw / args.parts:.3f} s per "
          f"{args.rows_per_part:,}-row part: {pw / lw:.1f}× (CPU time {pc / lc:.1f}×); identical tables")


if __name__ == "__main__":
    main()
