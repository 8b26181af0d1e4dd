"""The full-data IPS / DR pass against a bare read pass, side by side (issue 3's ≤ 1.3× target).

Both passes read every part of a visits set from Parquet into CSR through the same Dask
graph shape (one task per part, threaded scheduler); the second also computes, per
part, the propensities p_i (projection on a given x̄), the keyed logging draws a_i, a
given ridge model's predictions ρ̂(x_i) and the IPS / DR sums. Each pass runs
``--rounds`` times after one warm-up round (page cache warm); the medians are compared.

    python benchmarks/visits_pass.py --data /work/data/visits-paper
"""

from __future__ import annotations

import argparse
import statistics
import time

import dask
import numpy as np

from dr_scale.compute import compute
from dr_scale.visits.data import read_visits_part, visits_parts
from dr_scale.visits.job import embedded_dataset
from dr_scale.visits.logged import full_data_sums
from dr_scale.visits.passes import tree_sum
from dr_scale.visits.sampler import propensity


def bare(fs, path, d):
    return np.array([len(read_visits_part(fs, path, d))])


def estimates(fs, path, d, xbar, m, mbar, coef, intercept):
    return full_data_sums(read_visits_part(fs, path, d), xbar, m, mbar, coef, intercept)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="visits set URL (default: the embedded 385,000-row set)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    url = args.data or embedded_dataset(385_000, 5000, 0)
    fs, paths, d = visits_parts(url)
    rng = np.random.default_rng(0)
    xbar = rng.normal(size=d)
    xbar /= np.linalg.norm(xbar)
    coef, intercept, m, mbar = rng.normal(0, 0.5, d), 20.0, -1.0, 0.5
    propensity(np.zeros(1), m, mbar)  # import and warm up outside the timings
    times = {"bare read": [], "read + IPS/DR": []}
    for r in range(args.rounds + 1):  # round 0 warms the page cache and is not counted
        for name, graph in (("bare read", [dask.delayed(bare)(fs, p, d) for p in paths]),
                            ("read + IPS/DR", [dask.delayed(estimates)(fs, p, d, xbar, m, mbar, coef, intercept)
                                               for p in paths])):
            start = time.perf_counter()
            (total,) = compute(tree_sum(graph))
            if r:
                times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"data {url}: {int(total[0]):,} rows in {len(paths)} parts, {args.rounds} rounds (medians)")
    for k, v in med.items():
        print(f"{k:>14}: {v:6.2f} s   (all: {', '.join(f'{t:.2f}' for t in times[k])})")
    print(f"ratio {med['read + IPS/DR'] / med['bare read']:.2f} (target ≤ 1.3)")


if __name__ == "__main__":
    main()
