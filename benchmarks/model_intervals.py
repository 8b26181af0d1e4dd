"""Intervals of the model-based and tuned estimators on generated click worlds: coverage, range, thresholds.

    python benchmarks/model_intervals.py --logs 200
    python benchmarks/model_intervals.py --cost-rows 200000


One world of rare clicks (:mod:`dr_scale.synthetic.bandit` with the action offsets' mean b = −7: a click rate near
0.5%; d = 200 features, k = 20 actions, the logging policy's smallest propensity 0.001). ``--logs`` logs of
``--rows`` rows are drawn from it with seeds 0, 1, …; on each a cross-fitted logistic reward model is fitted
(``FitSettings(model="logistic", folds=3, lam=10)``: a fixed λ, to keep the run a few minutes) and two policies
are evaluated on the same rows: the uniform policy and ``constant:A``, A the action the logger takes least (its
ESS is small). Their true values come from 400,000 fresh contexts of the world (E_x Σ_a π(a|x) σ(s_a(x))).

Printed per policy and estimator: how often the 95% normal interval (projected into the rewards' range, with the
reward model's fold-jackknife standard error for the model-based estimators) covers the truth, with its binomial
standard error √(c(1 − c)/R); the mean width, and that of the rows' standard error alone (2 z SE, no model
spread); whether the output claims a coverage guarantee; how many raw
values and intervals lay outside [0, 1] (the projection's work) and how many shown ones do (must be 0); and the
thresholds SwitchDR and ClippedDR chose and the λ of DRos and SubGaussianDR, over honest variances and
(``variance=sample``) over the sample ones, obp's rule.

``--cost-rows N`` instead times the state of ``--estimators DM,IPS,DR`` of the uniform policy on one log of N rows
(d = 4,096, a 3-fold logistic model): with the fold models' states (the model asked K + 1 times for DM) and without
them (the same evaluation with ``fold_states`` returning none), best of 3, and prints the ratio.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import tempfile
import time

import numpy as np
import pyarrow.parquet as pq

from dr_scale import Evaluation, evaluate_log
from dr_scale.crossfit.settings import FitSettings
from dr_scale.reward.fitting import fit_reward_model
from dr_scale.synthetic.bandit import WorldSettings, generate_rows, make_world

#: DRos and SubGaussianDR twice: over honest variances (the default) and over the sample ones (obp's choice).
ESTIMATORS = ["DM", "DRos", "DRos(variance=sample)", "SubGaussianDR", "SubGaussianDR(variance=sample)", "SwitchDR",
              "ClippedDR", "DR", "IPS"]
D, K = 200, 20


def truths(world, policies: dict) -> dict:
    """E_x Σ_a π(a|x) σ(s_a(x)) of each policy over 400,000 fresh contexts (rows far beyond any log's ids)."""
    X = world.contexts(10 ** 9, 400_000, 12345)
    expected, _ = world.scores(X)
    return {name: float(expected.mean()) if action is None else float(expected[:, action].mean())
            for name, action in policies.items()}


def cost(rows: int) -> None:
    """Seconds of one state of DM, IPS, DR with and without the fold models' states, and their ratio."""
    from dr_scale.ope.evaluation import specification

    world = make_world(1, 4096, K, WorldSettings(base=-7.0))
    table, _ = generate_rows(world, 0, 0, rows)
    with tempfile.TemporaryDirectory() as folder:
        os.makedirs(os.path.join(folder, "log"))
        pq.write_table(table, os.path.join(folder, "log", "part-0.parquet"))
        model = fit_reward_model(os.path.join(folder, "log"), FitSettings(model="logistic", folds=3, lam=10.0))
    evaluation = Evaluation("uniform", ["DM", "IPS", "DR"], reward_model=model)

    def best() -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            evaluation.table_state(table, "log")
            times.append(time.perf_counter() - start)
        return min(times)

    with_folds = best()
    original = specification.Evaluation.fold_states
    specification.Evaluation.fold_states = lambda self, part, rows, base=None: {}  # type: ignore[method-assign]
    try:
        without = best()
    finally:
        specification.Evaluation.fold_states = original  # type: ignore[method-assign]
    print(f"{rows} rows, d = 4096, k = {K}, 3 folds, uniform policy, DM,IPS,DR: state {with_folds:.2f} s with the "
          f"fold states, {without:.2f} s without; ratio {with_folds / without:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logs", type=int, default=200)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--cost-rows", type=int, default=0, help="time the fold states on one log of this many rows")
    args = parser.parse_args()
    if args.cost_rows:
        cost(args.cost_rows)
        return
    world = make_world(1, D, K, WorldSettings(base=-7.0))
    first, _ = generate_rows(world, 10 ** 6, 0, 50_000)
    shares = np.bincount(first.column("action").to_numpy(), minlength=K)
    rare = int(np.argmin(shares))
    policies = {"uniform": None, f"constant:{rare}": rare}
    truth = truths(world, policies)
    print(f"world: d = {D}, k = {K}, click rate {first.column('reward').to_numpy().mean():.4f}; truths "
          + ", ".join(f"{p} {v:.5f}" for p, v in truth.items()))
    covered, widths, guarantee = collections.Counter(), collections.defaultdict(list), {}
    row_widths = collections.defaultdict(list)  # 2 z SE of the rows alone: the interval without the model's spread
    raw_outside, shown_outside, chosen, ess = collections.Counter(), collections.Counter(), collections.defaultdict(
        collections.Counter), collections.defaultdict(list)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(args.logs):
            table, _ = generate_rows(world, seed, 0, args.rows)
            log = os.path.join(folder, f"log{seed}")
            os.makedirs(log)
            pq.write_table(table, os.path.join(log, "part-0.parquet"))
            model = fit_reward_model(log, FitSettings(model="logistic", folds=3, lam=10.0))
            for policy in policies:
                result = evaluate_log(log, Evaluation(policy, ESTIMATORS, reward_model=model))
                ess[policy].append(result.weights.ess)
                for name, e in result.to_dict()["estimates"].items():
                    key = (policy, name)
                    lo, hi = e["ci"]
                    covered[key] += lo <= truth[policy] <= hi
                    widths[key].append(hi - lo)
                    row_widths[key].append(2 * 1.959963984540054 * e["stderr"])
                    guarantee[key] = e.get("coverage_guarantee", True)
                    raw = [e.get("raw_value", e["value"]), *e.get("raw_ci", e["ci"])]
                    raw_outside[key] += any(not 0.0 <= x <= 1.0 for x in raw)
                    shown_outside[key] += any(not 0.0 <= x <= 1.0 for x in [e["value"], lo, hi])
                    for parameter, value in e.get("chosen", {}).items():
                        chosen[key][f"{parameter}={value}"] += 1
            if seed == 0:
                print(f"first log: {time.perf_counter() - start:.1f} s")
    n = args.logs
    print(f"\n{n} logs of {args.rows} rows, {time.perf_counter() - start:.0f} s; 95% normal intervals")
    print(f"{'policy':<12} {'estimator':<30} {'coverage':>9} {'± s.e.':>7} {'mean width':>11} {'rows only':>10} "
          f"{'guarantee':>10} {'raw outside [0,1]':>18} {'shown outside':>14}")
    for policy in policies:
        for name in ESTIMATORS:
            key = (policy, name)
            c = covered[key] / n
            print(f"{policy:<12} {name:<30} {c:>9.3f} {math.sqrt(c * (1 - c) / n):>7.3f} "
                  f"{np.mean(widths[key]):>11.5f} {np.mean(row_widths[key]):>10.5f} "
                  f"{'yes' if guarantee[key] else 'no':>10} {raw_outside[key]:>18d} "
                  f"{shown_outside[key]:>14d}")
        print(f"{policy:<12} ESS median {np.median(ess[policy]):.0f} (min {min(ess[policy]):.0f}) of {args.rows}")
        for name in ESTIMATORS[1:7]:
            counts = sorted(chosen[(policy, name)].items())
            print(f"{'':<12} {name} chose: " + ", ".join(f"{k} ×{v}" for k, v in counts))


if __name__ == "__main__":
    main()
