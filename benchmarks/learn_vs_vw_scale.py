"""Benchmark: ``dr-scale learn --method dr`` against one pass of Vowpal Wabbit ``--cb 10 --cb_type dr`` at scale.

    pip install ".[benchmarks]"
    dr-scale generate bandit --rows 11000000 --features 262144 --actions 10 --out /work/data/bandit-11M
    python benchmarks/learn_vs_vw_scale.py --log /work/data/bandit-11M --train-parts 20 --eval-parts 2

The generated log's parts are split: the first ``--train-parts`` train both learners, the
last ``--eval-parts`` (rows neither saw) give each learned policy's **true value**
V(π) = mean E[r | x, π(x)] from ``expected_reward``. Both learners run as separate
processes on the same rows, in the same run:

* dr-scale: ``dr-scale learn TRAIN --method dr --out POLICY.npz`` with its defaults
  (ρ̂ cross-fitted over 2 folds by the reward-model fitter's defaults, its λ by out-of-fold
  error on a sample; the policy's λ by the default rule, its CG solves to a relative residual
  of 1e-2), its stage line printed;
* VW 9.11.9: ``--cb K --cb_type dr -b B`` through its own text driver over a file in its
  text format (``a:cost:p | id id …``, actions from 1, cost = −reward; numeric feature
  names are their own hash, so -b 18 keeps the 2^18 ids apart), one pass; written before
  the timing starts (the conversion is not timed), read from the page cache.

Printed: wall time, CPU time (user + system of the process and its children) and peak
resident memory of each, their ratios, and the true values (with the logging policy's);
the load average (the larger of before and after the timed commands).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dr_scale.logs.listing import list_parts, log_metadata
from dr_scale.synthetic.truth import true_value


def linked(paths: list[str], folder: str) -> str:
    """A folder of symbolic links to ``paths`` (a log made of some of another log's parts)."""
    os.makedirs(folder)
    for i, path in enumerate(paths):
        os.symlink(path, os.path.join(folder, f"part-{i:05d}.parquet"))
    return folder


def vw_text(paths: list[str], out: str, labelled: bool) -> int:
    """Write the parts in VW's text format (Arrow string kernels, no per-row Python); return the rows."""
    rows = 0
    with open(out, "wb") as f:
        for path in paths:
            table = pq.read_table(path, columns=["features", "action", "reward", "propensity"])
            features = pc.binary_join(pc.cast(table.column("features"), pa.list_(pa.string())), " ")
            if labelled:
                label = pc.binary_join_element_wise(
                    pc.cast(pc.add(table.column("action"), 1), pa.string()),
                    pc.cast(pc.negate(table.column("reward")), pa.string()),
                    pc.cast(table.column("propensity"), pa.string()), ":")
            else:
                label = pa.array([""] * table.num_rows)
            lines = pc.binary_join_element_wise(label, features, " | ")
            f.write(("\n".join(lines.to_pylist()) + "\n").encode())
            rows += table.num_rows
    return rows


#: Runs the command given as its arguments and prints its children's CPU seconds and peak RSS (KiB): the
#: peak of ``RUSAGE_CHILDREN`` is the largest of all children ever waited for, so each command gets its own.
MEASURE = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
           "u = resource.getrusage(resource.RUSAGE_CHILDREN); print(u.ru_utime + u.ru_stime, u.ru_maxrss)")


def timed(command: list[str]) -> dict:
    """Run a command; its wall time, CPU time (user + system), peak resident memory and its own output."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", MEASURE, *command], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    *output, last = out.stdout.strip().splitlines()
    cpu, rss = last.split()
    return {"wall": wall, "cpu": float(cpu), "rss_gib": int(rss) / 2 ** 20, "output": output}


def vw_actions(model: str, eval_text: str, folder: str) -> np.ndarray:
    predictions = os.path.join(folder, "predictions.txt")
    subprocess.run([sys.executable, "-c", (
        "from vowpalwabbit import Workspace\n"
        f"w = Workspace('-i {model} -t -d {eval_text} -p {predictions} --quiet')\n"
        "w.run_parser(); w.finish()")], check=True)
    return np.loadtxt(predictions, dtype=np.int64, usecols=0, ndmin=1) - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", default="/work/data/bandit-11M")
    parser.add_argument("--train-parts", type=int, help="parts to train on (default: all but --eval-parts)")
    parser.add_argument("--eval-parts", type=int, default=2)
    parser.add_argument("--bits", type=int, default=18, help="VW's -b (default 18)")
    parser.add_argument("--work", default=None, help="folder for the VW files and the policy (default: temporary)")
    args = parser.parse_args()
    fs, paths = list_parts(args.log)
    k = log_metadata(fs, paths[0])["n_actions"]
    train = paths[:args.train_parts or len(paths) - args.eval_parts]
    evaluation = paths[-args.eval_parts:]
    with tempfile.TemporaryDirectory(prefix="learn-vs-vw-", dir=args.work) as work:
        train_log, eval_log = linked(train, f"{work}/train"), linked(evaluation, f"{work}/eval")
        train_text, eval_text, model = f"{work}/train.vw", f"{work}/eval.vw", f"{work}/model.vw"
        rows = vw_text(train, train_text, labelled=True)
        vw_text(evaluation, eval_text, labelled=False)
        subprocess.run(["cat", train_text], stdout=subprocess.DEVNULL, check=True)  # VW reads from the page cache
        policy = f"{work}/policy.npz"
        load = os.getloadavg()[0]
        ours = timed(["dr-scale", "learn", train_log, "--method", "dr", "--out", policy, "--no-progress"])
        vw = timed([sys.executable, "-c", (
            "from vowpalwabbit import Workspace\n"
            f"w = Workspace('--cb {k} --cb_type dr -b {args.bits} -d {train_text} -f {model} --quiet')\n"
            "w.run_parser(); w.finish()")])
        load = max(load, os.getloadavg()[0])
        ours["value"] = true_value(eval_log, f"linear:{policy}")
        logging = true_value(eval_log, "column:action")
        actions = vw_actions(model, eval_text, work)
        vw["value"] = _value_of_actions(evaluation, actions, k)
    print(f"{rows:,} training rows ({len(train)} parts), true values on {len(evaluation)} held-out parts; "
          f"load average {load:.1f} on {os.cpu_count()} cores (before / after the timed commands, the larger)")
    print("\n".join(f"  {line}" for line in ours["output"]))
    print(f"{'':<22} {'wall (s)':>9} {'CPU (s)':>9} {'peak RSS (GiB)':>15} {'true value':>11}")
    for name, r in (("dr-scale learn --dr", ours), ("VW --cb_type dr, 1 pass", vw)):
        print(f"{name:<22} {r['wall']:>9.1f} {r['cpu']:>9.1f} {r['rss_gib']:>15.2f} {r['value']:>11.4f}")
    print(f"logging policy true value {logging:.4f}")
    print(f"ratios dr-scale / VW: wall {ours['wall'] / vw['wall']:.2f}, CPU {ours['cpu'] / vw['cpu']:.2f}; "
          f"true value dr-scale − VW {ours['value'] - vw['value']:+.4f}")


def _value_of_actions(paths: list[str], actions: np.ndarray, k: int) -> float:
    """Mean E[r | x_i, a_i] for given actions over the parts' rows, in order."""
    total, start = 0.0, 0
    for path in paths:
        column = pq.read_table(path, columns=["expected_reward"]).column("expected_reward")
        expected = pc.list_flatten(column).to_numpy().reshape(-1, k)
        chosen = actions[start:start + expected.shape[0]]
        total += expected[np.arange(expected.shape[0]), chosen].sum()
        start += expected.shape[0]
    return total / start


if __name__ == "__main__":
    main()
