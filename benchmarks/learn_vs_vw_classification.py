"""Benchmark: ``dr-scale learn --method dr`` against Vowpal Wabbit's ``--cb K --cb_type dr`` on the nine UCI sets.

    pip install ".[benchmarks]"
    python benchmarks/learn_vs_vw_classification.py [--datasets all] [--repetitions 5] [--data-dir DIR]

Each repetition of each set (the paper's Sec. 5.1 protocol): a keyed 70/30 split; the
features standardised with the training rows' means and standard deviations (both
learners get the same numbers); the training rows logged uniformly over the k classes
(p = 1/k, reward 1{a = label}, :func:`dr_scale.experiments.classification.bandit.to_bandit`). Then

* dr-scale: the training log written as Parquet, :func:`dr_scale.learn_policy` with
  its defaults (DR, ridge scores, λ auto; ρ̂ cross-fitted over 2 folds, λ auto);
* VW 9.11.9: the same rows in its text format (``a:cost:p | j:x_j …``, actions from 1,
  cost = −reward) through its own driver, ``--cb K --cb_type dr`` with its defaults
  (one pass), then ``-t`` predictions on the test rows.

Printed: each learner's test error (mean over repetitions and its standard error),
their difference, and whether dr-scale's error is ≤ VW's; the wall time of both.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from dr_scale import learn_policy
from dr_scale.experiments.classification.bandit import losses_from_labels, to_bandit
from dr_scale.experiments.classification.datasets import NAMES, load_dataset
from dr_scale.experiments.classification.protocol import dataset_key, split_rows
from dr_scale.learning.learn import LearnSettings
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log


def standardised(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    std[std == 0] = 1.0
    return (X_train - mean) / std, (X_test - mean) / std


def log_table(row_id, X, action, reward, propensity) -> pa.Table:
    """The logged-data contract with dense features as (indices, values) lists."""
    import scipy.sparse as sp

    S = sp.csr_matrix(X)
    values = pa.ListArray.from_arrays(pa.array(S.indptr.astype(np.int32)), pa.array(S.data.astype(np.float32)))
    return pa.table({"row_id": row_id, "features": csr_to_features(S), "values": values, "action": action,
                     "reward": reward, "propensity": propensity})


def vw_line(X_row: np.ndarray, label: str = "") -> str:
    """One VW example; features as float32, as the Parquet log stores them."""
    return f"{label} | " + " ".join(f"f{j}:{float(np.float32(v))!r}" for j, v in enumerate(X_row) if v != 0)


def run_vw(X_train, action, reward, propensity, X_test, k: int, folder: str, passes: int) -> np.ndarray:
    from vowpalwabbit import Workspace

    train, model = os.path.join(folder, "train.vw"), os.path.join(folder, "model.vw")
    with open(train, "w") as f:
        for x, a, r, p in zip(X_train, action, reward, propensity):
            f.write(vw_line(x, f"{a + 1}:{-float(r)!r}:{float(p)!r}") + "\n")
    extra = f" --passes {passes} -c -k --holdout_off" if passes > 1 else ""
    vw = Workspace(f"--cb {k} --cb_type dr -d {train} -f {model} --quiet{extra}")
    vw.run_parser()
    vw.finish()
    vw = Workspace(f"-i {model} -t --quiet")
    predictions = np.array([vw.predict(vw_line(x)) for x in X_test], dtype=np.int64) - 1
    vw.finish()
    return predictions


def one_repetition(name: str, rep: int, seed: int, data_dir: str | None, vw_passes: int, method: str) -> dict:
    data = load_dataset(name, data_dir)
    key, k = dataset_key(name), data.n_classes
    train, test = split_rows(len(data), 0.7, seed, key, rep)
    X_train, X_test = standardised(data.X[train], data.X[test])
    bandit = to_bandit(X_train, losses_from_labels(data.y[train], k), seed, key, rep, row_id=train)
    reward = 1.0 - bandit.loss
    with tempfile.TemporaryDirectory(prefix="learn-vs-vw-") as folder:
        log = os.path.join(folder, "log")
        write_log(log_table(train, X_train, bandit.action, reward, bandit.propensity), log, n_parts=2,
                  n_features=X_train.shape[1], n_actions=k)
        start, cpu = time.perf_counter(), time.process_time()
        policy = learn_policy(log, LearnSettings(method=method))
        ours_time, ours_cpu = time.perf_counter() - start, time.process_time() - cpu
        ours = np.mean(policy.predict(X_test.astype(np.float32).astype(np.float64)) != data.y[test])
        start, cpu = time.perf_counter(), time.process_time()
        predicted = run_vw(X_train, bandit.action, reward, bandit.propensity, X_test, k, folder, vw_passes)
        vw_time, vw_cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"ours": ours, "vw": float(np.mean(predicted != data.y[test])), "ours_time": ours_time,
            "vw_time": vw_time, "ours_cpu": ours_cpu, "vw_cpu": vw_cpu, "n": len(data), "k": k}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="all", help="comma-separated names, or all")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=os.environ.get("DR_SCALE_DATA"))
    parser.add_argument("--method", default="dr", choices=["dr", "ips", "dm"], help="dr-scale's imputation")
    parser.add_argument("--vw-passes", type=int, default=1, help="VW passes over the training rows (default 1)")
    args = parser.parse_args()
    names = list(NAMES) if args.datasets == "all" else args.datasets.split(",")
    print(f"{'data set':<11} {'n':>6} {'k':>3} {'dr-scale ' + args.method.upper():>16} {'VW cb dr':>16} "
          f"{'VW − ours':>10} "
          f"{'ours ≤ VW':>9} {'time ours / VW (s)':>19}")
    worse = []
    for name in names:
        records = [one_repetition(name, rep, args.seed, args.data_dir, args.vw_passes, args.method)
                   for rep in range(args.repetitions)]
        ours, vw = np.array([r["ours"] for r in records]), np.array([r["vw"] for r in records])
        se = np.sqrt(args.repetitions)

        def fmt(e, se=se):
            return f"{e.mean():.4f} ± {e.std(ddof=1) / se:.4f}" if len(e) > 1 else f"{e.mean():.4f}"

        ok = ours.mean() <= vw.mean()
        worse += [] if ok else [name]
        times = f"{sum(r['ours_time'] for r in records):.1f} / {sum(r['vw_time'] for r in records):.1f}"
        print(f"{name:<11} {records[0]['n']:>6} {records[0]['k']:>3} {fmt(ours):>16} {fmt(vw):>16} "
              f"{vw.mean() - ours.mean():>+10.4f} {'yes' if ok else 'NO':>9} {times:>19}", flush=True)
    print(f"test error of dr-scale's DR-learned policy ≤ VW's on {len(names) - len(worse)} of {len(names)} sets"
          + (f" (not on {', '.join(worse)})" if worse else ""))
    sys.exit(0)


if __name__ == "__main__":
    main()
