"""Estimates per slot, pooled and per impression on a ranking's log: equal to Open Bandit Pipeline's
``estimate_policy_value(..., position=…)`` on the Open Bandit Dataset sample (tests/fixtures/obd), to 1e-12.

The target policy answers per slot (π(a | slot), a :class:`LoggedPolicy` of hand-set frequencies), the reward
model depends on x and on the position (hashed as a feature), so obp's (n, k, positions) arrays are not constant
across positions.
"""

from __future__ import annotations

import gzip
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dr_scale import Evaluation, evaluate_partitions
from dr_scale.logs.importing import from_pandas
from dr_scale.ope.evaluation.slots import SlotResult
from dr_scale.policies.logged import LoggedPolicy, LoggedStats

OBD = Path(__file__).parents[1] / "fixtures" / "obd"
K, SLOTS = 80, 3
NAMES = ["IPS", "SNIPS", "DM", "DR", "SNDR", "SwitchDR(tau=5.0)"]


def _obp():
    """obp's estimators module, with the stand-in torch and seaborn modules of benchmarks/obp_equality.py."""
    if importlib.util.find_spec("obp") is None:
        pytest.skip("Open Bandit Pipeline is not installed (pip install --no-deps --ignore-requires-python obp==0.5.7)")
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        import obp_equality  # noqa: F401 - installs the stand-ins
    finally:
        sys.path.pop(0)
    from obp.ope import estimators

    return estimators


class PositionModel:
    """ρ̂_a(x) = (X W)[:, a]: a reward model of the hashed features (the position among them)."""

    def __init__(self, d: int, seed: int = 0):
        self.W = np.random.default_rng(seed).uniform(0, 0.01, (d, K))
        self.n_actions = K

    def predict(self, X, actions=None):
        out = np.asarray(X @ self.W)
        return out if actions is None else out[:, actions]


@pytest.fixture(scope="module")
def ranked():
    with gzip.open(OBD / "all.csv.gz", "rt") as f:
        raw = pd.read_csv(f, index_col=0, usecols=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    spec = {"action": "item_id", "reward": "click", "propensity": "propensity_score", "slot": "position",
            "impression": ["timestamp", "user_feature_*"], "hash_bits": 10,
            "features": {"categorical": ["user_feature_*", "position"]}}
    part = from_pandas(raw, spec)
    order = np.argsort(raw["item_id"].astype(str).unique())  # the vocabulary orders the item ids as text
    assert part.action.max() == K - 1 and len(order) == K
    rng = np.random.default_rng(35)
    counts = rng.integers(0, 50, (SLOTS, K))
    zeros = np.zeros((SLOTS, K))
    stats = LoggedStats(counts, zeros, zeros, zeros, np.zeros(SLOTS), np.zeros(SLOTS))
    policy = LoggedPolicy("<hand-set frequencies>", "frequencies", stats)
    return part, policy, PositionModel(part.X.shape[1])


@pytest.fixture(scope="module")
def ob():
    return _obp()


@pytest.mark.slow
def test_per_slot_and_pooled_equal_obp(ranked, ob):
    part, policy, model = ranked
    result = evaluate_partitions([part], Evaluation(policy, NAMES, reward_model=model), by_slot=True)
    assert isinstance(result, SlotResult) and sorted(result.slots) == [0, 1, 2]
    assert [r.estimates["IPS"].n for r in result.slots.values()] == np.bincount(part.slot).tolist()
    pi = policy.frequencies()                                   # (slots, k)
    n = len(part)
    action_dist = np.broadcast_to(pi.T[None], (n, K, SLOTS))   # π(a | x_i, position)
    q = model.predict(part.X)                                   # the row's own position is in its x
    rewards_hat = np.broadcast_to(q[:, :, None], (n, K, SLOTS))
    theirs = {"IPS": ob.InverseProbabilityWeighting(), "SNIPS": ob.SelfNormalizedInverseProbabilityWeighting(),
              "DM": ob.DirectMethod(), "DR": ob.DoublyRobust(), "SNDR": ob.SelfNormalizedDoublyRobust(),
              "SwitchDR(tau=5.0)": ob.SwitchDoublyRobust(lambda_=5.0)}
    for rows, ours in [(slice(None), result.pooled), *((part.slot == s, result.slots[s]) for s in range(SLOTS))]:
        for name, estimator in theirs.items():
            value = estimator.estimate_policy_value(
                reward=part.reward[rows], action=part.action[rows], pscore=part.propensity[rows],
                position=part.slot[rows], action_dist=np.ascontiguousarray(action_dist[rows]),
                estimated_rewards_by_reg_model=np.ascontiguousarray(rewards_hat[rows]))
            assert ours.estimates[name].value == pytest.approx(value, abs=1e-12, rel=0), (name, rows)
    for name in NAMES:  # per impression: the sum over the slots, their errors in quadrature
        assert result.impression[name].value == pytest.approx(
            sum(r.estimates[name].value for r in result.slots.values()), abs=1e-15)
        assert result.impression[name].stderr == pytest.approx(
            np.sqrt(sum(r.estimates[name].stderr ** 2 for r in result.slots.values())), rel=1e-12)


def test_by_slot_needs_slots(ranked):
    part, policy, _ = ranked
    from dr_scale.logs.contract import LogDataError, Partition

    bare = Partition(part.source, part.row_id, part.X, part.action, part.reward, part.propensity,
                     part.table.drop_columns(["slot"]))
    with pytest.raises(LogDataError, match="column 'slot': missing column: estimates per slot"):
        evaluate_partitions([bare], Evaluation("uniform", ["IPS"], n_actions=K), by_slot=True)
    with pytest.raises(ValueError, match="column .slot.: missing; the policy logged:<hand-set frequencies>:frequencies "
                                         "answers per slot"):
        evaluate_partitions([bare], Evaluation(policy, ["IPS"]))
