"""Throughput of ``evaluate`` on a large log, against a bare read pass measured in the same run.

    python benchmarks/evaluate_throughput.py --rows 10000000 --parts 40 --data /tmp/dr-scale-bench

Builds (once, cached under --data) a log of N rows with 10 active features of d = 1000,
3 actions and a linear reward model, then times with Dask's threaded scheduler:

* baseline  — read every part's columns and convert ``features`` to CSR (nothing else);
* IPS       — ``evaluate`` IPS + SNIPS for a constant policy (``features`` not read);
* all       — ``evaluate`` all seven estimators for a column policy with the reward model.

After one warm-up pass, each is timed three times and the best is kept. It prints rows/s,
the ratio of each to the baseline, and the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import dask.bag as db
import numpy as np
import pyarrow as pa

from dr_scale.core import keyed_random
from dr_scale.logs.listing import list_parts
from dr_scale.logs.reading import read_table
from dr_scale.logs.sparse import features_to_csr
from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.outofcore.compute import compute
from dr_scale.reward.models import LinearRewardModel

D, K, ACTIVE = 1000, 3, 10


def build(path: str, rows: int, parts: int) -> None:
    bounds = np.linspace(0, rows, parts + 1).astype(np.int64)
    for i in range(parts):
        row_id = np.arange(bounds[i], bounds[i + 1])
        n = row_id.size
        u = np.column_stack([keyed_random.uniform(row_id, 0, "bench-feature", j) for j in range(ACTIVE)])
        indices = np.sort((u * D).astype(np.int32), axis=1).ravel()
        features = pa.ListArray.from_arrays(pa.array(np.arange(0, n * ACTIVE + 1, ACTIVE, dtype=np.int32)),
                                            pa.array(indices))
        action = keyed_random.categorical(np.full((n, K), 1 / K), row_id, 0, "bench-action")
        table = pa.table({"row_id": row_id, "features": features, "action": action.astype(np.int32),
                          "reward": keyed_random.uniform(row_id, 0, "bench-reward"),
                          "propensity": np.full(n, 1 / K), "target_action": (row_id % K).astype(np.int32)})
        write_log(table, os.path.join(path, f"part-{i:05d}.parquet"), n_features=D, n_actions=K)


def bare_read(url: str, columns: tuple[str, ...] = ("row_id", "features", "action", "reward", "propensity",
                                                    "target_action"), d: int = D) -> int:
    """Read ``columns`` of every part and turn ``features`` into CSR over ``d`` features (Dask's threads); the
    entries read."""
    fs, paths = list_parts(url)

    def read(path):
        """One part's columns, its features as CSR."""
        table = read_table(fs, path, list(columns))
        return features_to_csr(table.column("features"), d).nnz

    (nnz,) = compute(db.from_sequence(paths, npartitions=len(paths)).map(read).sum())
    return nnz


def timed(label, fn, rows, baseline=None, repeat=3):
    """Best of ``repeat`` wall times (the machine may be shared; the minimum is the least disturbed)."""
    seconds = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        seconds = min(seconds, time.perf_counter() - start)
    ratio = f"{seconds / baseline:5.2f}× baseline" if baseline else "baseline"
    print(f"{label:<44} {seconds:8.2f} s {rows / seconds / 1e6:8.2f} M rows/s   {ratio}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--parts", type=int, default=40)
    parser.add_argument("--data", default="/tmp/dr-scale-bench")
    args = parser.parse_args()
    url = os.path.join(args.data, f"log-{args.rows}-{args.parts}")
    if not os.path.isdir(url):
        print(f"building {args.rows:,} rows in {args.parts} parts under {url} …")
        build(url, args.rows, args.parts)
    model = LinearRewardModel(np.random.default_rng(0).normal(size=(D, K)) / ACTIVE, np.zeros(K))
    ips = Evaluation("constant:1", ["IPS", "SNIPS"])
    every = Evaluation("column:target_action", ["DM", "IPS", "DR", "SNIPS", "SNDR", "SwitchDR", "ClippedDR"],
                       reward_model=model)
    bare_read(url)  # warm the page cache and the thread pool before any timing
    base = timed("bare read into CSR (baseline)", lambda: bare_read(url), args.rows)
    timed("evaluate IPS+SNIPS, constant policy", lambda: evaluate_log(url, ips), args.rows, base)
    timed("evaluate all 7 estimators + reward model", lambda: evaluate_log(url, every), args.rows, base)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak resident memory of this process: {peak:.2f} GiB")


if __name__ == "__main__":
    main()
