"""Estimator parameters travel: specs, policies files, cache fingerprints; tuned SwitchDR / ClippedDR."""

import io

import numpy as np
import pytest

from dr_scale.ope.estimators import (
    TUNING_GRID,
    ClippedDR,
    DoublyRobust,
    DRTuning,
    IPSTuning,
    RowInputs,
    SwitchDR,
    SwitchDRTuning,
    make_estimators,
    parse_estimator,
)
from dr_scale.ope.evaluation import Evaluation
from dr_scale.ope.moments import Moments
from dr_scale.report.make import compute_report
from dr_scale.report.policies_file import parse_policies
from dr_scale.report.state_cache import fingerprint
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import example_paths
from dr_scale.synthetic.finite_world import BanditWorld


@pytest.mark.parametrize("spec, label, estimator", [
    ("DR", "DR", DoublyRobust()),
    ("ClippedDR(max_weight=50)", "ClippedDR(max_weight=50.0)", ClippedDR(max_weight=50.0)),
    (" SwitchDR( tau = 2.5 ) ", "SwitchDR(tau=2.5)", SwitchDR(tau=2.5)),
    ({"name": "ClippedDR", "max_weight": 7}, "ClippedDR(max_weight=7.0)", ClippedDR(max_weight=7.0)),
    ("SwitchDR", "SwitchDR", SwitchDR()),
])
def test_specs(spec, label, estimator):
    assert parse_estimator(spec) == (label, estimator)


@pytest.mark.parametrize("spec, message", [
    ("ClippedDR(tau=3)", "has no parameter tau; it takes max_weight"),
    ("SNIPS(max_weight=3)", "has no parameter max_weight; it takes none"),
    ("ClippedDR(max_weight=-1)", "max_weight should be greater than 0"),
    ("SwitchDR(tau=nan)", "tau should be greater than or equal to 0"),
    ("SwitchDR(tau=x)", "tau should be a valid number"),
    ("ClippedDR(50)", "name=value"),
    ("Magic", "unknown estimator"),
])
def test_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_estimator(spec)


def test_policies_file_parameters_reach_the_estimates_and_the_fingerprint():
    data = {"policy": [{"name": "c", "spec": "constant:0"}], "reward_model": "m.npz", "interval": "el",
            "estimators": ["DR", "ClippedDR(max_weight=2)", {"name": "SwitchDR", "tau": 3}]}
    pf = parse_policies(data, "p.toml")
    assert pf.estimators == ["DR", "ClippedDR(max_weight=2.0)", "SwitchDR(tau=3.0)"] and pf.interval == "el"
    with pytest.raises(ValueError, match="p.toml: interval"):
        parse_policies({**data, "interval": "wide"}, "p.toml")
    with pytest.raises(ValueError, match="p.toml: estimators: .*max_weight should be greater than 0"):
        parse_policies({**data, "estimators": ["ClippedDR(max_weight=0)"]}, "p.toml")
    model = LinearRewardModel(np.zeros((4, 2)), np.zeros(2))
    evaluations = {m: Evaluation("constant:0", make_estimators([f"ClippedDR(max_weight={m})"]), reward_model=model)
                   for m in (2, 50)}
    assert fingerprint(evaluations[2]) != fingerprint(evaluations[50])
    assert fingerprint(Evaluation("constant:0", ["IPS"])) != fingerprint(Evaluation("constant:0", ["IPS"],
                                                                                    baseline="logging"))


def test_tuned_thresholds_are_chosen_and_reported():
    log = BanditWorld.make(epsilon=0.02).sample(2000, seed=2)
    dr = DoublyRobust().estimate(**log)
    for est, key in ((SwitchDR(), "tau"), (ClippedDR(), "max_weight")):
        tuned = est.estimate(**log)
        chosen = tuned.chosen[key]
        fixed = type(est)(**{key: chosen}).estimate(**log)
        assert tuned.value == pytest.approx(fixed.value, rel=1e-12) and tuned.stderr == pytest.approx(fixed.stderr)
        assert chosen == np.inf or tuned.stderr < dr.stderr  # a threshold only where it saves variance
    clipped = ClippedDR().estimate(**log)
    assert clipped.chosen["max_weight"] < np.inf and clipped.value != dr.value  # not a copy of DR here


@pytest.mark.parametrize("mix", [0.0, 0.3], ids=["deterministic", "stochastic"])
@pytest.mark.parametrize("estimator", [SwitchDR(), ClippedDR(), DRTuning(), SwitchDRTuning(lambdas=[2, 5, 20]),
                                       IPSTuning(lambdas=[0, 2, 5, 20, np.inf])], ids=repr)
def test_tuned_state_from_bin_sums_equals_the_stacked_terms(estimator, mix):
    log = BanditWorld.make(epsilon=0.02).sample(5000, seed=1)
    log["target_probs"] = (1 - mix) * log["target_probs"] + mix / 5  # stochastic: weights in more bins
    rows = RowInputs.from_arrays(**log)
    binned, stacked = estimator.state(rows), Moments.of(*estimator.terms(rows), ranges=rows.ranges)
    assert binned.n == stacked.n and len(set(np.searchsorted(TUNING_GRID, rows.weight))) >= 3 - (mix == 0)
    np.testing.assert_allclose(binned.mean, stacked.mean, rtol=1e-13)
    np.testing.assert_allclose(binned.comoment, stacked.comoment, rtol=1e-12, atol=1e-12 * stacked.comoment.max())
    np.testing.assert_array_equal(binned.low, stacked.low)


def test_report_cache_is_not_shared_across_parameter_values(tmp_path):
    """A cached state of ClippedDR(max_weight=2) is never served for max_weight=5 (the fingerprint differs)."""
    logs, model = example_paths()
    cache = str(tmp_path / "cache")

    def report(max_weight):
        data = {"policy": [{"name": "c", "spec": "column:target_action"}], "reward_model": model,
                "estimators": [f"ClippedDR(max_weight={max_weight})"]}
        return compute_report(logs, parse_policies(data, str(tmp_path / "p.toml")), cache, window="2d",
                              log=io.StringIO())

    def sources(r):
        return {p["source"] for p in r["partitions"]}

    first, again, other = report(2), report(2), report(5)
    assert sources(first) == {"read"} and sources(again) == {"cache"} and sources(other) == {"read"}
    value = {r["estimators"][0]: r["policies"][0]["estimates"][r["estimators"][0]]["value"] for r in (first, other)}
    assert value["ClippedDR(max_weight=2.0)"] != value["ClippedDR(max_weight=5.0)"]
