"""Coverage and width of the normal and empirical-likelihood intervals over simulated worlds.

    python benchmarks/interval_coverage.py --reps 1000 --vw-reps 200

Each world (:class:`dr_scale.synthetic.finite_world.BanditWorld`: 100 contexts, 5 actions,
Bernoulli rewards, a deliberately wrong reward model, a deterministic target policy,
ε-greedy logging; max weight 5/ε) is sampled ``--reps`` times at n = 2000 with fixed
seeds. For IPS, SNIPS, DR and SNDR it prints how often the 95% interval covers the
true value and its mean width, for ``ci(0.05)`` (normal) and ``ci(0.05, method="el")``;
and, as a reference implementation's figures on the first ``--vw-reps`` samples, the
``cressieread`` interval of vw-estimators 0.2.2 (``pip install vw-estimators==0.2.2``;
its defaults: w_max = ∞, reward bounds from the data).
The Monte-Carlo standard error of a coverage c over R samples is √(c(1 − c)/R)
(0.007 at c = 0.95, R = 1000).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dr_scale.ope.estimators import IPS, SNDR, SNIPS, DoublyRobust
from dr_scale.synthetic.finite_world import BanditWorld, interval_coverage

ESTIMATORS = {"IPS": IPS(), "SNIPS": SNIPS(), "DR": DoublyRobust(), "SNDR": SNDR()}
N = 2000


def vw_interval(log) -> tuple[float, float]:
    from estimators.bandits import cressieread

    interval = cressieread.Interval(empirical_r_bounds=True)
    pi = log["target_probs"][np.arange(len(log["action"])), log["action"]]
    for p, r, q in zip(log["propensity"], log["reward"], pi):
        interval.add_example(p_log=p, r=r, p_pred=q)
    return tuple(interval.get(0.05))


def world_rows(epsilon: float, seed: int, reps: int, vw_reps: int) -> list[str]:
    world = BanditWorld.make(epsilon, seed=seed)
    covered, width = interval_coverage(world, ESTIMATORS, reps, N)
    vw_cov, vw_width = 0, 0.0
    for rep in range(vw_reps):
        lo, hi = vw_interval(world.sample(N, seed=1000 + rep))
        vw_cov += lo <= world.value <= hi
        vw_width += hi - lo
    rows = []
    for name in ESTIMATORS:
        n_cov, el_cov = covered[name, "normal"], covered[name, "el"]
        n_w, el_w = width[name, "normal"], width[name, "el"]
        vw = f"{vw_cov / vw_reps:.3f} / {vw_width / vw_reps:.4f}" if vw_reps and name == "IPS" else ""
        rows.append(f"| ε = {epsilon:g}, seed {seed} (max w {world.max_weight:.0f}) | {name} | {n_cov:.3f} | "
                    f"{el_cov:.3f} | {n_w:.4f} | {el_w:.4f} | {el_w / n_w:.2f} | {vw} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--vw-reps", type=int, default=200, help="samples for vw-estimators' interval (0: skip)")
    parser.add_argument("--epsilons", default="0.5,0.3,0.1,0.05,0.02")
    parser.add_argument("--seeds", default="0,1,2", help="world seeds")
    args = parser.parse_args()
    print("| world | estimator | normal coverage | EL coverage | normal width | EL width | EL / normal width | "
          "vw cressieread coverage / width |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    start = time.process_time()
    for epsilon in map(float, args.epsilons.split(",")):
        for seed in map(int, args.seeds.split(",")):
            for row in world_rows(epsilon, seed, args.reps, args.vw_reps):
                print(row, flush=True)
    print(f"\nCPU time: {time.process_time() - start:.1f} s")


if __name__ == "__main__":
    main()
