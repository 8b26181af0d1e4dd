"""The array API refuses what Open Bandit Pipeline refuses: a ValueError naming the argument and an index."""

import numpy as np
import pytest

from dr_scale.ope.estimators import IPS, ClippedDR, DoublyRobust, RowInputs, SwitchDR


def good_log(n=6, k=3):
    rng = np.random.default_rng(0)
    return dict(reward=rng.random(n), action=np.arange(n) % k, propensity=np.full(n, 0.5),
                target_probs=rng.dirichlet(np.ones(k), size=n), reward_hat=rng.random((n, k)))


def changed(**fields):
    log = good_log()
    for name, edit in fields.items():
        log[name] = edit(log[name])
    return log


def at(i, value):
    def edit(a):
        a = a.copy()
        a[i] = value
        return a
    return edit


BAD = {
    "rows summing to 2": (changed(target_probs=lambda p: p * 2), r"target_probs rows must sum to 1: row 0"),
    "negative probability": (changed(target_probs=lambda p: p - np.eye(3)[np.arange(6) % 3] * 2),
                             r"target_probs must hold finite probabilities ≥ 0: target_probs\[0, 0\]"),
    "NaN probability": (changed(target_probs=at((2, 1), np.nan)), r"target_probs.*target_probs\[2, 1\]"),
    "float actions": (changed(action=lambda a: a + 0.9), r"action must hold integer action ids, got dtype float64"),
    "action out of range": (changed(action=at(4, 3)), r"action must be in \[0, 3\): action\[4\] = 3"),
    "negative action": (changed(action=at(1, -1)), r"action must be in \[0, 3\): action\[1\] = -1"),
    "zero propensity": (changed(propensity=at(3, 0.0)), r"propensity outside \(0, 1\]: propensity\[3\] = 0.0"),
    "propensity above 1": (changed(propensity=at(5, 1.5)), r"propensity\[5\] = 1.5"),
    "NaN propensity": (changed(propensity=at(0, np.nan)), r"propensity must be finite: propensity\[0\] = nan"),
    "NaN reward": (changed(reward=at(2, np.nan)), r"reward must be finite: reward\[2\] = nan"),
    "infinite reward": (changed(reward=at(1, np.inf)), r"reward must be finite: reward\[1\] = inf"),
    "unequal lengths": (changed(propensity=lambda p: p[:5]), r"propensity has 5 rows, reward has 6"),
    "empty arrays": ({"reward": np.zeros(0), "action": np.zeros(0, int), "propensity": np.zeros(0),
                      "target_probs": np.zeros((0, 3)), "reward_hat": np.zeros((0, 3))}, r"reward is empty"),
    "2-d reward": (changed(reward=lambda r: r[:, None]), r"reward must be a 1-d array"),
    "NaN model": (changed(reward_hat=at((4, 2), np.nan)), r"reward_hat must be finite: reward_hat\[4, 2\] = nan"),
    "model of another shape": (changed(reward_hat=lambda m: m[:, :2]), r"reward_hat must have shape \(6, 3\)"),
    "string rewards": (changed(reward=lambda r: r.astype(str)), r"reward must hold real numbers"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arrays_are_refused(case):
    log, message = BAD[case]
    with pytest.raises(ValueError, match=message):
        DoublyRobust().estimate(**log)


def test_good_arrays_pass_and_float_actions_are_never_truncated():
    assert np.isfinite(DoublyRobust().estimate(**good_log()).value)
    with pytest.raises(ValueError, match="integer"):  # 1.9 would have become 1
        IPS().estimate(**changed(action=lambda a: np.where(a == 1, 1.9, a).astype(float)))


@pytest.mark.parametrize("make, message", [
    (lambda: ClippedDR(max_weight=-1), r"max_weight should be greater than 0 \(got -1\)"),
    (lambda: ClippedDR(max_weight=0), r"max_weight should be greater than 0 \(got 0\)"),
    (lambda: SwitchDR(tau=float("nan")), r"tau should be greater than or equal to 0 \(got nan\)"),
    (lambda: SwitchDR(tau=-0.5), r"tau should be greater than or equal to 0 \(got -0.5\)"),
    (lambda: SwitchDR(tau="big"), r"tau should be a valid number"),
])
def test_bad_parameters_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("field, value, message", [
    ("propensity", np.array([0.5, 0.0, 0.5]), r"propensity\[1\] = 0.0"),
    ("reward", np.array([1.0, np.nan, 0.0]), r"reward\[1\] = nan"),
    ("target_action", np.array([0.0, 1.0, 1.0]), r"target_action must hold integer"),
    ("action", np.array([0, -2, 1]), r"action\[1\] = -2"),
    ("reward_hat_target", np.array([0.1, 0.2]), r"reward_hat_target has 2 rows, reward has 3"),
])
def test_from_actions_checks_as_from_arrays(field, value, message):
    arrays = dict(reward=np.array([1.0, 0.0, 1.0]), action=np.array([0, 1, 1]), propensity=np.array([0.5, 0.5, 0.4]),
                  target_action=np.array([0, 1, 0]), reward_hat_target=np.array([0.1, 0.2, 0.3]))
    arrays[field] = value
    with pytest.raises(ValueError, match=message):
        RowInputs.from_actions(**arrays)
