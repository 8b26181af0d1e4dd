"""CPU time of each estimator's per-partition state, beside forming the rows, on one 250,000-row batch.

    OPENBLAS_NUM_THREADS=1 python benchmarks/estimator_states.py

A deterministic policy over 3 actions with uniform logging (the shape of
``benchmarks/evaluate_throughput.py``'s parts), rewards and model predictions uniform on
[0, 1]. It prints the CPU time (``time.process_time``, best of 5 × 10 runs) of
``RowInputs.from_actions`` (which checks its arrays) as the baseline and of every
estimator's ``state``, each also as a ratio to the baseline: the seven of ``evaluate``'s default
set, then the opt-in ones whose λ is tuned (obp's ``…Tuning`` rules). Run it on two checkouts
(``PYTHONPATH=…``) to compare code versions; the machine may be shared, hence CPU time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dr_scale.ope.estimators import (
    IPS,
    SNDR,
    SNIPS,
    ClippedDR,
    DirectMethod,
    DoublyRobust,
    DRos,
    DRTuning,
    IPSTuning,
    RowInputs,
    SubGaussianDR,
    SwitchDR,
    SwitchDRTuning,
)


def cpu_ms(fn, repeat: int = 5, number: int = 10) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - start) / number)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=250_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n, k = args.rows, 3
    arrays = (rng.random(n), rng.integers(0, k, n), np.full(n, 1 / k), rng.integers(0, k, n), rng.random(n))
    base = cpu_ms(lambda: RowInputs.from_actions(*arrays))
    print(f"{'RowInputs.from_actions (baseline)':<36} {base:7.2f} ms CPU")
    rows = RowInputs.from_actions(*arrays)
    total = 0.0
    for est in (DirectMethod(), IPS(), SNIPS(), DoublyRobust(), SNDR(), SwitchDR(), ClippedDR()):
        ms = cpu_ms(lambda est=est: est.state(rows))
        total += ms
        print(f"{repr(est) + '.state':<36} {ms:7.2f} ms CPU  {ms / base:5.2f}× baseline")
    print(f"{'all seven states':<36} {total:7.2f} ms CPU  {total / base:5.2f}× baseline")
    for est in (IPSTuning(), DRTuning(), SwitchDRTuning(), DRos(), SubGaussianDR()):
        ms = cpu_ms(lambda est=est: est.state(rows))
        print(f"{repr(est) + '.state':<36} {ms:7.2f} ms CPU  {ms / base:5.2f}× baseline")


if __name__ == "__main__":
    main()
