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
  (``tests/ope/test_estimators.py::normal_ci_coverage``, which the test runs on 400), with its binomial sd;
* cross-fitted DR against IPS, 1,000 logs of 5,000 rows (docs/generate-bandit.md § Cross-fitted DR against the
  truth; ``tests/reward/test_crossfit_coverage.py`` runs 300);
* DR with estimated propensities, 200 logs of 3,000 rows, and the estimated propensities' correlation with the
  true ones on 1M rows (docs/propensities.md § Intervals with estimated propensities;
  ``tests/propensity/test_estimated_coverage.py`` runs 12 logs and 100,000 rows);
* DR with the logistic against the ridge ρ̂ at a low click rate, 40 logs of 20,000 rows (docs/reward-models.md;
  ``tests/reward/test_low_ctr.py`` runs 6);
* MIPS against IPS on 10^4 items, 100 logs of 2,000 rows (docs/large-action-spaces.md;
  ``tests/synthetic/test_item_world.py`` runs 20);
* ``dr-scale evaluate`` on a multi-part log with a data error, 50 runs, every one exiting 2 (none hanging at exit;
  ``tests/commands/test_bad_input_cases.py`` runs 8).

``--quick`` runs every loop at a tenth of its size (a smoke run of this script). The vw-estimators column of the
interval table needs ``pip install vw-estimators==0.2.2`` (the benchmarks extra); without it the column is skipped.
CPU time at full size: about ten minutes on one core.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

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


def test_module(relative: str) -> ModuleType:
    """The test module at ``tests/<relative>``, imported with the repository and ``tests`` on the path."""
    sys.path[:0] = [str(HERE.parent), str(TESTS)]
    spec = importlib.util.spec_from_file_location(Path(relative).stem, TESTS / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def section(title: str) -> float:
    print(f"\n{title}", flush=True)
    return time.process_time()


def crossfit_coverage(reps: int) -> None:
    start = section(f"Cross-fitted DR and IPS, {reps} logs of 5,000 rows (tests/reward/test_crossfit_coverage.py):")
    covered, _ = test_module("reward/test_crossfit_coverage.py").coverage_and_errors(reps)
    sd = math.sqrt(0.95 * 0.05 / reps)
    print(f"DR covered {covered['DR']}/{reps}, binomial sd of the coverage {sd:.4f}; "
          f"CPU {time.process_time() - start:.1f} s", flush=True)


def estimated_propensities(reps: int, rows: int) -> None:
    start = section(f"DR with estimated propensities, {reps} logs of 3,000 rows "
                    "(tests/propensity/test_estimated_coverage.py):")
    module = test_module("propensity/test_estimated_coverage.py")
    reps_ = module.replicates(reps)
    for key in ("estimated", "true"):
        print(f"{key} propensities: covered {module.covered(reps_, key)}/{reps}, rmse {module.rmse(reps_, key):.5f}, "
              f"mean standard error {sum(e[key].stderr for e in reps_) / reps:.5f}")
    print(f"mean correlation of estimated and true propensities {sum(e['correlation'] for e in reps_) / reps:.3f}",
          flush=True)
    with tempfile.TemporaryDirectory() as folder:
        correlation = module.big_correlation(Path(folder), rows)
    print(f"correlation of estimated and true propensities at {rows:,} rows: {correlation:.4f}; "
          f"CPU {time.process_time() - start:.1f} s", flush=True)


def low_ctr(reps: int) -> None:
    start = section(f"DR with the logistic and the ridge reward model at a low click rate, {reps} logs of 20,000 rows "
                    "(tests/reward/test_low_ctr.py):")
    with tempfile.TemporaryDirectory() as folder:
        test_module("reward/test_low_ctr.py").compare(Path(folder), reps)
    print(f"CPU {time.process_time() - start:.1f} s", flush=True)


def mips_rmse(logs: int) -> None:
    start = section(f"MIPS and IPS on 10^4 items, {logs} logs of 2,000 rows (tests/synthetic/test_item_world.py):")
    rmse = test_module("synthetic/test_item_world.py").mips_and_ips_rmse(logs)
    print(f"rmse(MIPS) / rmse(IPS) = {rmse['MIPS'] / rmse['IPS']:.3f}; CPU {time.process_time() - start:.1f} s",
          flush=True)


def exits(runs: int) -> None:
    start = time.perf_counter()
    section(f"dr-scale evaluate on a multi-part log with a data error, {runs} runs "
            "(tests/commands/test_bad_input_cases.py):")
    with tempfile.TemporaryDirectory() as folder:
        codes = test_module("commands/test_bad_input_cases.py").exit_codes(Path(folder) / "logs", runs)
    print(f"exit codes {dict((c, codes.count(c)) for c in sorted(set(codes)))} (2 expected; -1 a hang, 134 an abort); "
          f"wall {time.perf_counter() - start:.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every loop at a tenth of its size")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    vw = importlib.util.find_spec("estimators") is not None
    run_script("interval_coverage.py", "--reps", str(1000 // scale), "--vw-reps", str(200 // scale if vw else 0))
    run_script("confidence_sequences.py", "--streams", str(1000 // scale))
    dr_normal_coverage(2000 // scale)
    crossfit_coverage(1000 // scale)
    estimated_propensities(200 // scale, 1_000_000 // scale)
    low_ctr(40 // scale)
    mips_rmse(100 // scale)
    exits(50 // scale)


if __name__ == "__main__":
    main()
