"""Every printed interval contains its point estimate; too few supporting rows are flagged, not claimed."""

import numpy as np
import pytest

from dr_scale.logs.reading import partition_from_table
from dr_scale.ope.evaluation import LOGGING, Evaluation, evaluate_partitions
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.bandit import generate_rows, make_world

D, K = 200, 5
ESTIMATORS = ["DM", "IPS", "SNIPS", "DR", "SNDR", "SwitchDR", "ClippedDR"]


def generated(seed: int):
    """A generated log (200 to 3,000 rows) and a poor reward model whose predictions go below 0 (as a ridge
    fit to click rates does), so DM and DR can fall outside the rewards' range."""
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(200, 3000))
    table, _ = generate_rows(make_world(seed, D, K), seed, 0, rows)
    model = LinearRewardModel(rng.normal(0, 0.02, size=(D, K)), rng.normal(0.0, 0.05, size=K))
    return partition_from_table(table, f"<generated log {seed}>", D, K), model, rng


@pytest.mark.slow
def test_every_printed_interval_contains_its_estimate_on_200_generated_logs():
    checked = outside_range = 0
    for seed in range(200):
        part, model, rng = generated(seed)
        a, b = (int(x) for x in rng.choice(K, size=2, replace=False))
        for baseline in (LOGGING, f"constant:{b}"):
            evaluation = Evaluation(f"constant:{a}", ESTIMATORS, reward_model=model, n_actions=K, n_features=D,
                                    baseline=baseline)
            result = evaluate_partitions([part], evaluation)
            for interval in ("normal", "el"):
                doc = result.to_dict(0.05, interval)
                entries = list(doc["estimates"].items()) + [(f"{k} difference", v) for k, v in doc["difference"].items()
                                                            if isinstance(v, dict)]
                for name, e in entries:
                    if not np.isfinite(e["value"]):  # SNIPS when π never takes a logged action: "—"
                        continue
                    for key in ("ci", "cs"):
                        lo, hi = e[key]
                        assert lo <= e["value"] <= hi, (seed, baseline, interval, name, key, e)
                        checked += 1
                    if "difference" not in name:
                        assert 0 <= e["value"] <= 1, (seed, name, e)  # projected into the rewards' range
                        if e.get("projected"):  # the raw value or an end of its interval lay outside [0, 1]
                            lo, hi = e["raw_ci"]
                            assert lo <= e["raw_value"] <= hi, (seed, name, e)
                            outside_range += not 0 <= e["raw_value"] <= 1  # the hard case
    assert checked > 200 * 2 * 2 * 2 * 10  # every estimator and difference had a value to check
    assert outside_range > 0  # the hard case (a raw estimate outside the rewards' range) occurred


def test_too_few_rows_with_a_reward_are_flagged_not_claimed():
    """A constant policy on a log where it matches a few rows and none of them has a click."""
    part, model, _ = generated(3)
    keep = np.flatnonzero((part.action != 0) | (part.reward == 0))  # no click where the logged action is 0
    table = part.table.take(keep)
    small = partition_from_table(table, "<no clicks on action 0>", D, K)
    result = evaluate_partitions([small], Evaluation("constant:0", ["IPS", "DR"], reward_model=model,
                                                     n_actions=K, n_features=D, baseline=LOGGING))
    assert result.weights.n_matched > 0 and result.weights.n_informative == 0
    doc = result.to_dict()
    assert doc["insufficient_data"] and all(e["insufficient_data"] for e in doc["estimates"].values())
    assert all(e["insufficient_data"] for k, e in doc["difference"].items() if isinstance(e, dict))
    table_text = result.table()
    assert "insufficient data" in table_text and "fewer than 10" in table_text
    # With enough support, no flag.
    full = evaluate_partitions([part], Evaluation("constant:0", ["IPS"], n_actions=K, baseline=LOGGING, min_support=1))
    assert full.weights.n_informative >= 1 and not full.to_dict()["insufficient_data"]


def test_min_support_is_checked():
    with pytest.raises(ValueError, match="min_support"):
        Evaluation("constant:0", ["IPS"], min_support=-1)
