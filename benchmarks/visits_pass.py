"""The full-data IPS / DR pass against a bare read pass, side by side (target: ≤ 1.3×).

Two pairs of passes over the same users, each pass one task per part file on Dask's
threaded scheduler, summed by the same tree reduction:

* **logged view** (ρ̂ and propensities given — the target's own terms): the
  sampler's logged view (x, a, r = a·v, p) of the visits set, a logged data set of the
  core contract. The bare pass reads and validates every part into CSR and arrays
  (``read_partition``); the estimates pass is what ``dr-scale evaluate VIEW --policy
  constant:1 --estimators IPS,DR --reward-model RHO`` runs per part (the same read, then
  the policy's probabilities, ρ̂, and the IPS and DR states with their standard errors
  and the weight diagnostics).
* **visits set, propensities from x̄**: the visits set's own parts, the bare pass read
  into CSR (``read_visits_part``); the estimates pass also computes, per part, the
  propensities p_i from a given x̄ (one more mat-vec), the keyed logging draws a_i, ρ̂ and
  the IPS / DR sums.

Each pass runs ``--rounds`` times after one warm-up round (page cache warm), the four
passes in turn within a round. It prints the ratio of the median times and the median
of the per-round ratios (each round's pair measured back to back, so a slow spell of
the machine — CPU steal on a shared VM — affects both sides of a ratio alike), and the
ratio of the process's CPU times (``time.process_time``: both threads, without the
time the VM's host took away).

    python benchmarks/visits_pass.py --data /work/data/visits-paper-v3 [--logged VIEW]

Without ``--logged`` the logged view is written from ``--data`` into a temporary folder
first (~11 s at the paper's size) and removed at the end.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import dask
import numpy as np

from dr_scale.experiments.visits.data import read_visits_part, visits_parts
from dr_scale.experiments.visits.experiment import fit_sampler, load_parts
from dr_scale.experiments.visits.job import embedded_dataset
from dr_scale.experiments.visits.logged import full_data_sums, write_logged_view
from dr_scale.experiments.visits.sampler import propensity
from dr_scale.logs.listing import list_parts
from dr_scale.logs.reading import read_partition
from dr_scale.ope.estimators import make_estimators
from dr_scale.ope.evaluation import Evaluation
from dr_scale.outofcore.compute import compute
from dr_scale.outofcore.mergeable import tree_reduce
from dr_scale.reward.models import LinearRewardModel


def read_view(fs, path, d):
    return np.array([len(read_partition(fs, path, n_features=d, n_actions=2))])


def read_visits(fs, path, d):
    return np.array([len(read_visits_part(fs, path, d))])


def visits_estimates(fs, path, d, xbar, m, mbar, coef, intercept):
    return full_data_sums(read_visits_part(fs, path, d), xbar, m, mbar, coef, intercept)


def write_view(url: str, folder: str) -> str:
    """The logged view of the visits set at ``url``, written under ``folder``."""
    parts = load_parts(url)
    comp, m, mbar = fit_sampler(parts)
    view = f"{folder}/logged"
    write_logged_view(parts, view, comp.vector, m, mbar)
    return view


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="visits set URL (default: the embedded 385,000-row set)")
    ap.add_argument("--logged", help="its logged view (default: written from --data into a temporary folder)")
    ap.add_argument("--rounds", type=int, default=11)
    args = ap.parse_args()
    url = args.data or embedded_dataset(385_000, 5000, 0)
    with tempfile.TemporaryDirectory(prefix="dr-scale-view-") as folder:
        view = args.logged or write_view(url, folder)
        run(url, view, args.rounds)


def run(url: str, view: str, rounds: int) -> None:
    fs, paths, d = visits_parts(url)
    vfs, vpaths = list_parts(view)
    rng = np.random.default_rng(0)
    xbar = rng.normal(size=d)
    xbar /= np.linalg.norm(xbar)
    coef, intercept, m, mbar = rng.normal(0, 0.5, d), 20.0, -1.0, 0.5
    model = LinearRewardModel(np.column_stack([np.zeros(d), coef]), np.array([0.0, intercept]))  # ρ̂_0 ≡ 0
    evaluation = Evaluation("constant:1", make_estimators(["IPS", "DR"]), reward_model=model, n_features=d,
                            n_actions=2)
    propensity(np.zeros(1), m, mbar)  # import and warm up outside the timings
    passes = {
        "logged view: bare read": [dask.delayed(read_view)(vfs, p, d) for p in vpaths],
        "logged view: read + IPS/DR": [dask.delayed(evaluation.file_state)(vfs, p) for p in vpaths],
        "visits set: bare read": [dask.delayed(read_visits)(fs, p, d) for p in paths],
        "visits set: read + p, a, IPS/DR": [dask.delayed(visits_estimates)(fs, p, d, xbar, m, mbar, coef, intercept)
                                            for p in paths],
    }
    times = {name: [] for name in passes}
    cpu = {name: [] for name in passes}
    for r in range(rounds + 1):  # round 0 warms the page cache and is not counted
        for name, graph in passes.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            (total,) = compute(tree_reduce(graph))
            if r:
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
            if name == "logged view: read + IPS/DR":
                n_view = total.estimators["IPS"].n
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"visits set {url}: {len(paths)} parts; logged view {view}: {n_view:,} rows in {len(vpaths)} parts; "
          f"{rounds} rounds (medians)")
    for k, v in med.items():
        print(f"{k:>32}: {v:6.2f} s, CPU {statistics.median(cpu[k]):5.2f} s   "
              f"(all: {', '.join(f'{t:.2f}' for t in times[k])})")
    for what in ("logged view", "visits set"):
        name = next(k for k in times if k.startswith(what) and "IPS" in k)
        per_round = [e / b for e, b in zip(times[name], times[f"{what}: bare read"])]
        cpu_ratio = statistics.median(cpu[name]) / statistics.median(cpu[f"{what}: bare read"])
        print(f"{what}: ratio of the medians {med[name] / med[f'{what}: bare read']:.2f}, median of the rounds' "
              f"ratios {statistics.median(per_round):.2f} (target ≤ 1.3; rounds: "
              f"{', '.join(f'{x:.2f}' for x in per_round)}); CPU time ratio {cpu_ratio:.2f}")

if __name__ == "__main__":
    main()
