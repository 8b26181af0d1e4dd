"""Confidence sequences against daily fixed-time intervals on growing logs.

    python benchmarks/confidence_sequences.py [--streams 1000] [--days 60] [--rows-per-day 2000]

For a moderate (ε = 0.3, max weight 17) and a heavy-tailed (ε = 0.02, max weight 250) finite
world (``dr_scale.synthetic.finite_world``), ``--streams`` streams of ``--days`` days, one estimate
per day on the log so far (simulated from per-day moments, ``dr_scale.synthetic.streams``, the
seed of ``tests/ope/test_confidence_sequences.py``, which checks the first 100 streams). Per estimator: the share of
streams whose interval excludes the truth on *any* day — the confidence sequence (``Estimate.cs``,
EL and normal) and the fixed-time 95% intervals (normal and EL) — and the mean width at the last
day of the EL sequence over the normal and over the EL fixed-time interval.
"""

from __future__ import annotations

import argparse

import numpy as np

from dr_scale.ope.estimators import IPS, SNDR, SNIPS, DoublyRobust
from dr_scale.synthetic.finite_world import BanditWorld
from dr_scale.synthetic.streams import running_states

KINDS = ("cs el", "cs normal", "ci normal", "ci el")


def intervals(e) -> dict:
    return {"cs el": e.cs(0.05), "cs normal": e.cs(0.05, method="normal"), "ci normal": e.ci(0.05),
            "ci el": e.ci(0.05, "el")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--rows-per-day", type=int, default=2000)
    args = parser.parse_args()
    print("| world | estimator | CS (el): streams missed on any day | CS (normal) | daily 95% normal interval "
          "| daily 95% EL interval | day-60 width CS (el) / normal interval | / EL interval |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label, epsilon in (("moderate: ε = 0.3", 0.3), ("heavy: ε = 0.02", 0.02)):
        world = BanditWorld.make(epsilon)
        for estimator in (IPS(), SNIPS(), DoublyRobust(), SNDR()):
            missed = dict.fromkeys(KINDS, 0)
            to_normal, to_el = [], []
            for days in running_states(world, estimator, streams=args.streams, days=args.days,
                                       rows_per_day=args.rows_per_day, seed=26):
                any_miss = dict.fromkeys(KINDS, False)
                for state in days:
                    last = intervals(estimator.result(state))
                    for kind, (lo, hi) in last.items():
                        any_miss[kind] |= not lo <= world.value <= hi
                for kind in KINDS:
                    missed[kind] += any_miss[kind]
                width = {kind: hi - lo for kind, (lo, hi) in last.items()}
                to_normal.append(width["cs el"] / width["ci normal"])
                to_el.append(width["cs el"] / width["ci el"])
            share = {kind: missed[kind] / args.streams for kind in KINDS}
            print(f"| {label} | {estimator.name} | {share['cs el']:.3f} | {share['cs normal']:.3f} | "
                  f"{share['ci normal']:.3f} | {share['ci el']:.3f} | {np.mean(to_normal):.2f} | "
                  f"{np.mean(to_el):.2f} |", flush=True)


if __name__ == "__main__":
    main()
