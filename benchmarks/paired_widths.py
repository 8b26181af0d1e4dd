"""Paired vs unpaired standard errors of V(A) − V(B) on the bundled example log.

    python benchmarks/paired_widths.py

For three comparisons on the bundled example (``dr_scale/synthetic/data/example``), per estimator:
the paired standard error of ``dr-scale evaluate --baseline`` (one joint state of both
policies' per-row terms) beside the unpaired √(SE_A² + SE_B²) of two separate
evaluations, which ignores their correlation. The logging policy's SE is that of the
logged rewards' mean.
"""

from __future__ import annotations

import numpy as np

from dr_scale.ope.estimators import OnPolicy
from dr_scale.ope.evaluation import LOGGING, Evaluation, evaluate_log
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import example_paths

NAMES = ["IPS", "DR", "SNIPS", "SNDR"]
COMPARISONS = (("column:target_action", LOGGING), ("column:target_action", "constant:2"), ("constant:0", "constant:1"))


def main() -> None:
    logs, model_path = example_paths()
    model = LinearRewardModel.load(model_path)
    print("| comparison | estimator | V(A) − V(B) | paired SE | unpaired √(SE_A² + SE_B²) | paired / unpaired |")
    print("|---|---|---:|---:|---:|---:|")
    for a, b in COMPARISONS:
        paired = evaluate_log(logs, Evaluation(a, NAMES, reward_model=model, baseline=b))
        if b == LOGGING:
            on_policy = evaluate_log(logs, Evaluation(a, {"logging": OnPolicy()})).estimates["logging"].stderr
            se_b = dict.fromkeys(NAMES, on_policy)
        else:
            alone = evaluate_log(logs, Evaluation(b, NAMES, reward_model=model))
            se_b = {n: alone.estimates[n].stderr for n in NAMES}
        for n in NAMES:
            d = paired.differences[n]
            unpaired = np.hypot(paired.estimates[n].stderr, se_b[n])
            print(f"| {a} − {b} | {n} | {d.value:+.4f} | {d.stderr:.4f} | {unpaired:.4f} | {d.stderr / unpaired:.2f} |")


if __name__ == "__main__":
    main()
