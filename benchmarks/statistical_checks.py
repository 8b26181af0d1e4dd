"""The statistical checks at benchmark size, in one command: the Monte-Carlo loops the tests run small.

    python benchmarks/statistical_checks.py [--quick]

The test suite checks each interval's coverage on a few hundred fixed-seed logs, with a tolerance of a few
binomial standard deviations √(c(1 − c)/R) (enough to reject a broken interval); this command runs the same
loops at the sizes whose figures docs/benchmarks.md and docs/estimators.md give, and prints them:

* the normal and empirical-likelihood intervals over 15 finite worlds, 1,000 logs each
  (``benchmarks/interval_coverage.py --reps 1000 --vw-reps 200``; docs/benchmarks.md § Interval coverage;
  ``tests/ope/test_intervals.py`` checks two of the worlds on the first 300 logs);
* confidence sequences against daily intervals, 1,000 streams of 60 days
  (``benchmarks/confidence_sequences.py``; docs/estimators.md § Confidence sequences;
  ``tests/ope/test_confidence_sequences.py`` checks the first 100 streams);
* the DR normal interval on the bias theorem's finite world, 2,000 logs of 300 rows
  (``tests/ope/test_estimators.py::normal_ci_coverage``, which the test runs on 400), with its binomial sd.

``--quick`` runs every loop at a tenth of its size (a smoke run of this script). The vw-estimators column of the
interval table needs ``pip install vw-estimators==0.2.2`` (the benchmarks extra); without it the column is skipped.
CPU time at full size: a few minutes on one core (`--quick`: 11 s).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
TESTS = HERE.parent / "tests"


def run_script(name: str, *args: str) -> None:
    print(f"\n$ python benchmarks/{name} {' '.join(args)}", flush=True)
    subprocess.run([sys.executable, str(HERE / name), *args], check=True)


def dr_normal_coverage(reps: int) -> None:
    sys.path[:0] = [str(TESTS), str(TESTS / "ope")]
    from test_estimators import normal_ci_coverage

    start = time.process_time()
    share = normal_ci_coverage(reps)
    sd = math.sqrt(0.95 * 0.05 / reps)
    print(f"\nDR normal 95% interval, finite world of tests/ope/test_estimators.py, {reps} logs of 300 rows: "
          f"coverage {share:.4f} (binomial sd {sd:.4f}; {(share - 0.95) / sd:+.1f} sd from 0.95); "
          f"CPU {time.process_time() - start:.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every loop at a tenth of its size")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    vw = importlib.util.find_spec("estimators") is not None
    run_script("interval_coverage.py", "--reps", str(1000 // scale), "--vw-reps", str(200 // scale if vw else 0))
    run_script("confidence_sequences.py", "--streams", str(1000 // scale))
    dr_normal_coverage(2000 // scale)


if __name__ == "__main__":
    main()
