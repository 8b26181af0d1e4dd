"""Benchmark: DLM's 20 restarts as one stacked matrix problem vs 20 separate fits.

    python benchmarks/classification_dlm.py [DATASET] [--data-dir DIR]

Both variants run the same number of batched towards-better iterations (fixed, no
early stop) on the training half of DATASET (default optdigits); the ratio is
separate/stacked wall time, measured in the same run. On a shared machine, repeat.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dr_scale.experiments.classification.bandit import losses_from_labels
from dr_scale.experiments.classification.datasets import load_dataset
from dr_scale.learning.dlm import DirectLossMinimization


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="optdigits")
    parser.add_argument("--data-dir")
    parser.add_argument("--restarts", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    data = load_dataset(args.dataset, args.data_dir)
    half = np.arange(len(data)) % 2 == 0
    X, R = data.X[half], -losses_from_labels(data.y[half], data.n_classes)
    fixed = {"max_iter": args.iterations, "n_iter_no_change": args.iterations + 1, "tol": 0.0}

    start = time.perf_counter()
    DirectLossMinimization(n_restarts=args.restarts, random_state=0, **fixed).fit(X, R)
    stacked = time.perf_counter() - start

    start = time.perf_counter()
    for r in range(args.restarts):
        DirectLossMinimization(n_restarts=1, random_state=r, **fixed).fit(X, R)
    separate = time.perf_counter() - start

    print(f"{args.dataset}: n={X.shape[0]} d={X.shape[1]} k={data.n_classes}, {args.restarts} restarts x "
          f"{args.iterations} iterations")
    print(f"stacked restarts: {stacked:.2f} s   separate fits: {separate:.2f} s   ratio: {separate / stacked:.2f}x")


if __name__ == "__main__":
    main()
