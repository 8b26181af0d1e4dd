"""A linear reward model's ρ̂ at each row's own action (what DR and DM read for a deterministic policy), by the
model's ``predict_pairs`` against the columns of the rows' distinct actions (``pairs_by_columns``, the baseline),
measured in the same run on the same rows.

    PYTHONPATH=. python benchmarks/reward_pairs.py [--rows 250000] [--active 10] [--features 65536] [--actions 3,10,80]

One part of N rows with ACTIVE binary features each of d hashed ones (keyed, as ``generate bandit``'s), a model of
k actions (k = 3, 10, 80), with and without 5 fold models (each row by its own fold model, as cross-fitted DR
reads it); one action per row, drawn uniformly. Best of three wall times each; the two give the same bits (checked).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.reward.models import LinearRewardModel, pairs_by_columns


def best_ms(fn, *args, repeat: int = 3) -> float:
    """The least of ``repeat`` wall times of ``fn(*args)``, in milliseconds (the least disturbed by other work)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=250_000)
    parser.add_argument("--active", type=int, default=10)
    parser.add_argument("--features", type=int, default=1 << 16)
    parser.add_argument("--actions", default="3,10,80", help="the k to measure, comma-separated")
    args = parser.parse_args()
    n, d = args.rows, args.features
    row_id = np.arange(n)
    u = np.column_stack([keyed_random.uniform(row_id, 0, "bench-feature", j) for j in range(args.active)])
    indices = np.sort((u * d).astype(np.int32), axis=1).ravel()
    X = sp.csr_matrix((np.ones(indices.size), indices, np.arange(0, indices.size + 1, args.active)), shape=(n, d))
    print(f"{n:,} rows, {args.active} of d = {d:,} features each; ρ̂ at one action per row")
    print(f"{'k':>4} {'folds':>5} {'columns (baseline)':>19} {'predict_pairs':>14} {'ratio':>7}")
    for k in (int(a) for a in args.actions.split(",")):
        rng = np.random.default_rng(k)
        actions = rng.integers(0, k, (n, 1))
        for folds in (0, 5):
            extra = {"fold_coef": rng.normal(size=(folds, d, k)) / args.active,
                     "fold_intercept": np.zeros((folds, k))} if folds else {}
            model = LinearRewardModel(rng.normal(size=(d, k)) / args.active, np.zeros(k), **extra)
            ids = row_id if folds else None
            assert np.array_equal(model.predict_pairs(X, actions, ids), pairs_by_columns(model, X, actions, ids))
            base = best_ms(pairs_by_columns, model, X, actions, ids)
            mine = best_ms(model.predict_pairs, X, actions, ids)
            print(f"{k:>4} {folds:>5} {base:>16.1f} ms {mine:>11.1f} ms {mine / base:>6.2f}×")


if __name__ == "__main__":
    main()
