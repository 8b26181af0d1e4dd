"""Several policies in one pass (``evaluate --policy A --policy B …``) vs one evaluation per policy.

    python benchmarks/compare_policies.py [--log URL] [--rows N] [--repeats R]

Writes a generated log (``dr-scale generate bandit``; 1M rows, 4,096 features, 8 actions,
8 days by default) unless ``--log`` is given, fits ρ̂ once, learns a linear policy on the
train rows of the keyed split, then on the test rows evaluates five policies (the learned
one, ``uniform``, ε-greedy around the learned one, ``logging``, ``constant:3``) with all
seven estimators, each against the learned one:

* one :class:`~dr_scale.ope.evaluation.Comparison` (each part read once, every policy's
  state in the same task), and
* five separate ``evaluate_log`` calls (``Evaluation(spec, baseline=learned)``), in the
  same process, as five ``dr-scale evaluate`` runs would do without their start-up.

Both in the same run, alternating, medians of ``--repeats``; the largest relative
difference between the two results is printed beside the times (it should be 0).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from dr_scale.learning.learn import learn_policy
from dr_scale.logs.filters import LogFilter
from dr_scale.logs.opened import open_log
from dr_scale.ope.estimators import make_estimators
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.reward.fitting import fit_reward_model
from dr_scale.synthetic.bandit import generate_bandit

ESTIMATORS = ["DM", "IPS", "DR", "SNIPS", "SNDR", "SwitchDR", "ClippedDR"]


def largest_difference(together, separate: dict) -> float:
    worst = 0.0
    for spec, alone in separate.items():
        got = together.results[spec]
        for mine, theirs in ((got.estimates, alone.estimates), (got.differences, alone.differences)):
            for name, e in theirs.items():
                for a, b in ((mine[name].value, e.value), (mine[name].stderr, e.stderr)):
                    if a == a and b == b:  # NaN (an undefined estimate) on both sides
                        worst = max(worst, abs(a - b) / max(abs(b), 1e-300))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", help="an existing log (default: a generated one in a temporary folder)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        logs = args.log or f"{tmp}/log"
        if not args.log:
            generate_bandit(logs, rows=args.rows, features=4096, actions=8, days=8, rows_per_part=args.rows // 8)
        model = fit_reward_model(logs)
        policy_file = f"{tmp}/policy.npz"
        learn_policy(open_log(logs, log_filter=LogFilter(split="train"))).save(policy_file)
        learned = f"linear:{policy_file}"
        specs = [learned, "uniform", f"epsilon-greedy:0.1:{learned}", "logging", "constant:3"]
        test = LogFilter(split="test")

        def evaluation(spec, baseline=None):
            return Evaluation(spec, make_estimators(ESTIMATORS), reward_model=model, baseline=baseline)

        def together():
            return evaluate_log(logs, {s: evaluation(s) for s in specs}, log_filter=test)

        def separate():
            return {s: evaluate_log(logs, evaluation(s, None if s == learned else learned), log_filter=test)
                    for s in specs}

        times = {"one pass (Comparison)": [], "one evaluate_log per policy": []}
        for _ in range(args.repeats):
            for label, run in zip(times, (together, separate), strict=True):
                start = time.perf_counter()
                result = run()
                times[label].append(time.perf_counter() - start)
                if label.startswith("one pass"):
                    one = result
                else:
                    many = result
        rows = one.results["logging"].weights.n
    base = statistics.median(times["one pass (Comparison)"])
    print(f"{len(specs)} policies × {len(ESTIMATORS)} estimators on the {rows:,} test rows; "
          f"medians of {args.repeats} alternating runs")
    print("| run | wall | vs one pass |")
    print("|---|---:|---:|")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"| {label} | {median:.2f} s | {median / base:.2f}× |")
    print(f"largest relative difference between the two: {largest_difference(one, many):.3g}")


if __name__ == "__main__":
    main()
