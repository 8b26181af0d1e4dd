"""The slate estimators against the known truth of generated slate worlds, and `evaluate` on a large slate log.

    python benchmarks/slate_estimators.py [--logs 200] [--impressions 10000] [--scale 1000000] [--quick]

1. Statistics. For each world (K = 3 and 10 slots, 10^2 and 10^4 items; 10 user types, position bias η = 1, cascade
   interaction γ = 0.5; dr_scale.synthetic.slates) and two target policies (``factored``: each slot from
   softmax(ŝ), the logger's model at twice its inverse temperature; ``plackett-luce``: Plackett–Luce of softmax(ŝ)),
   ``--logs`` logs of ``--impressions`` impressions (disjoint keyed impression ranges): every slate estimator's
   bias and rmse against the exact truth, and the coverage of its 95% normal interval with its binomial standard
   error √(c(1 − c)/R). Cascade DR's Q̂_k(u) is the mean reward from slot k on per (user type, slot), fitted on a
   separate pilot log of the same size (item-independent, so E_π Q̂_k = Q̂_k). The estimators that need per-slot
   marginals (independent IPS, the pseudoinverse) are n/a for Plackett–Luce.
   The pseudoinverse is also compared with vw-estimators' on the first log (when installed).

2. Scale (``--scale N``, 0 to skip): ``dr-scale generate slates`` N impressions × 10 slots × 10^4 items, then
   ``dr-scale evaluate`` with SlateIPS,SlateRIPS against the single-decision ``evaluate --policy uniform
   --estimators IPS,SNIPS`` over the same rows (same process count, /usr/bin/time's wall and peak RSS).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

from dr_scale.ope.estimators.slate import SLATE_ESTIMATORS, SlateInputs
from dr_scale.policies.slates import SlateProbabilities
from dr_scale.synthetic.slates import SlateWorld

WORLDS = [(3, 100), (3, 10_000), (10, 100), (10, 10_000)]
TARGETS = ("factored", "plackett-luce")


def q_model(world: SlateWorld, impressions: int) -> np.ndarray:
    """Q̂_k(u): the mean reward from slot k on per (user type, slot), on a pilot log (impressions after the logs')."""
    draw = world.sample(10**9, impressions)
    to_go = np.cumsum(draw["clicks"][:, ::-1], axis=1)[:, ::-1]
    q = np.zeros((world.users, world.slots))
    for u in range(world.users):
        rows = draw["users"] == u
        q[u] = to_go[rows].mean(axis=0) if rows.any() else 0.0
    return q


def statistics(logs: int, impressions: int, slot_counts: list[int]) -> None:
    print(f"== {logs} logs of {impressions:,} impressions per world; cascade interaction γ = 0.5, position bias η = 1")
    print(f"{'K':>3} {'items':>6} {'target':<14} {'truth':>8} {'estimator':<15} {'bias':>9} {'rmse':>9} "
          f"{'mean se':>9} {'coverage':>9} {'± se':>6}")
    for slots, items in [w for w in WORLDS if w[0] in slot_counts]:
        world = SlateWorld(users=10, items=items, slots=slots, interaction=0.5, seed=1)
        q = q_model(world, impressions)
        policies = world.policies()
        truths = {name: world.truth(policies[name])[0] for name in TARGETS}
        for name in TARGETS:
            value, stderr = world.truth(policies[name])
            print(f"   truth of {name}, K = {slots}, {items} items: {value:.6f} "
                  + ("(exact)" if stderr == 0 else f"(Monte Carlo, stderr {stderr:.6f})"))
        values: dict = {(t, e): [] for t in TARGETS for e in SLATE_ESTIMATORS}
        stderrs: dict = {(t, e): [] for t in TARGETS for e in SLATE_ESTIMATORS}
        start = time.perf_counter()
        for r in range(logs):
            draw = world.sample(r * impressions, impressions)
            logging = SlateProbabilities.factored(draw["propensity"])
            q_rows = q[draw["users"]]
            for target in TARGETS:
                rows = SlateInputs.from_probabilities(
                    draw["clicks"], policies[target].probabilities(draw["slates"], draw["users"]), logging,
                    q_logged=q_rows, q_target=q_rows)
                for name, cls in SLATE_ESTIMATORS.items():
                    if rows.slot_weight is None and name in ("SlateIIPS", "SNSlateIIPS", "SlatePI"):
                        continue
                    est = cls().estimate(rows=rows)
                    values[target, name].append(est.value)
                    stderrs[target, name].append(est.stderr)
            if r == 0:
                vw_check(draw, policies["factored"], world)
        for target in TARGETS:
            for name in SLATE_ESTIMATORS:
                v, s = np.array(values[target, name]), np.array(stderrs[target, name])
                if not v.size:
                    print(f"{slots:>3} {items:>6} {target:<14} {truths[target]:>8.4f} {name:<15} "
                          f"{'n/a (no closed-form marginals)':>40}")
                    continue
                err = v - truths[target]
                covered = np.mean(np.abs(err) <= 1.959964 * s)
                print(f"{slots:>3} {items:>6} {target:<14} {truths[target]:>8.4f} {name:<15} {err.mean():>9.5f} "
                      f"{np.sqrt(np.mean(err ** 2)):>9.5f} {s.mean():>9.5f} {covered:>9.3f} "
                      f"{np.sqrt(covered * (1 - covered) / v.size):>6.3f}")
        print(f"   ({time.perf_counter() - start:.1f} s for K = {slots}, {items} items)", flush=True)


def vw_check(draw: dict, target, world: SlateWorld) -> None:
    """SlatePI on one log against vw-estimators' slates.pseudo_inverse (printed)."""
    try:
        from estimators.slates import pseudo_inverse
    except ImportError:
        print("   (vw-estimators not installed: pip install vw-estimators==0.2.2)")
        return
    p_pred = target.probabilities(draw["slates"], draw["users"]).marginal
    theirs = pseudo_inverse.Estimator()
    for p_log, r, p in zip(draw["propensity"], draw["clicks"].sum(axis=1), p_pred):
        theirs.add_example(p_log.tolist(), float(r), p.tolist())
    rows = SlateInputs.from_probabilities(draw["clicks"], target.probabilities(draw["slates"], draw["users"]),
                                          SlateProbabilities.factored(draw["propensity"]))
    ours = SLATE_ESTIMATORS["SlatePI"]().estimate(rows=rows).value
    print(f"   pseudoinverse, K = {world.slots}, {world.items} items: dr-scale {ours:.12f}  vw-estimators "
          f"{theirs.get():.12f}  |diff| {abs(ours - theirs.get()):.1e}")


def timed(argv: list[str]) -> tuple[float, float, str]:
    """(wall s, peak RSS GiB, stdout) of a dr-scale command under /usr/bin/time -v."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                       os.environ.get("PYTHONPATH", "")]))
    cmd = ["/usr/bin/time", "-v", sys.executable, "-c", "from dr_scale.cli import console; console()", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    assert wall is not None
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    assert rss is not None
    return seconds, int(rss.group(1)) / 2**20, done.stdout


def scale(impressions: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "slates")
        wall, rss, out = timed(["generate", "slates", "--impressions", str(impressions), "--slots", "10", "--items",
                                "10000", "--impressions-per-part", "50000", "--out", log])
        print(f"== scale: {impressions:,} impressions × 10 slots × 10^4 items ({impressions * 10:,} rows): "
              f"generated in {wall:.1f} s")
        print(out.rstrip())
        slate_wall, slate_rss, out = timed(["evaluate", log, "--policy", f"slate:{log}/_policy_factored.npz",
                                            "--estimators", "SlateIPS,SlateRIPS", "--no-progress"])
        print(out.rstrip())
        single_wall, single_rss, out = timed(["evaluate", log, "--policy", "uniform", "--estimators", "IPS,SNIPS",
                                              "--no-progress"])
        print(out.rstrip())
        print(f"slate evaluate (SlateIPS,SlateRIPS): wall {slate_wall:.1f} s, peak RSS {slate_rss:.2f} GiB")
        print(f"single-decision evaluate (IPS,SNIPS, --policy uniform) over the same rows: wall {single_wall:.1f} s, "
              f"peak RSS {single_rss:.2f} GiB")
        print(f"ratio slate / single-decision wall: {slate_wall / single_wall:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logs", type=int, default=200)
    parser.add_argument("--impressions", type=int, default=10_000)
    parser.add_argument("--scale", type=int, default=1_000_000, help="impressions of the scale run (0: skip)")
    parser.add_argument("--slots", type=int, nargs="*", default=[3, 10], help="the worlds' K (default 3 10)")
    parser.add_argument("--quick", action="store_true", help="20 logs of 2,000 impressions, scale 20,000")
    args = parser.parse_args()
    if args.quick:
        args.logs, args.impressions, args.scale = 20, 2_000, 20_000
    if args.logs:
        statistics(args.logs, args.impressions, args.slots)
    if args.scale:
        scale(args.scale)


if __name__ == "__main__":
    main()
