"""The slate estimators: equal to Open Bandit Pipeline 0.5.7's (obp.ope.estimators_slate) and the pseudoinverse to
vw-estimators' and to a by-hand sum; their states merge."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from dr_scale.core.errors import ParameterError
from dr_scale.ope.estimators import Difference
from dr_scale.ope.estimators.slate import (
    SLATE_ESTIMATORS,
    SlateCascadeDR,
    SlateInputs,
    SlateOnPolicy,
    SlatePseudoInverse,
    SlateStandardIPS,
)
from dr_scale.ope.moments import Moments

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def obp_slate():
    """obp.ope.estimators_slate, with the stand-in modules of benchmarks/obp_equality.py."""
    if importlib.util.find_spec("obp") is None:
        pytest.skip("Open Bandit Pipeline is not installed (pip install --no-deps --ignore-requires-python obp==0.5.7)")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import obp_equality  # noqa: F401  (installs the stand-in torch)
    finally:
        sys.path.pop(0)
    from obp.ope import estimators_slate

    return estimators_slate


def obp_layout(n=60, k=3, items=5, seed=0):
    """Random obp-style slate arrays: n slates of k slots, rows sorted by slate and position."""
    rng = np.random.default_rng(seed)
    rows = n * k
    dist = rng.dirichlet(np.ones(items), size=rows)
    pscore_item = rng.uniform(0.05, 1.0, rows)
    pscore_cascade = np.cumprod(rng.uniform(0.1, 1.0, (n, k)), axis=1).ravel()
    slate_p = np.repeat(rng.uniform(0.01, 0.5, n), k)
    return dict(
        slate_id=np.repeat(np.arange(n) * 3 + 11, k), position=np.tile(np.arange(k), n),
        reward=rng.binomial(1, 0.4, rows).astype(float), action=rng.integers(0, items, rows),
        pscore=slate_p, evaluation_policy_pscore=np.repeat(rng.uniform(0.01, 0.5, n), k),
        pscore_item_position=pscore_item, evaluation_policy_pscore_item_position=rng.uniform(0.05, 1.0, rows),
        pscore_cascade=pscore_cascade,
        evaluation_policy_pscore_cascade=np.cumprod(rng.uniform(0.1, 1.0, (n, k)), axis=1).ravel(),
        q_hat=rng.uniform(0, 1, rows * items), evaluation_policy_action_dist=dist.ravel(),
    ), k, items


PAIRS = {  # our name: (obp class, the obp arguments it reads)
    "SlateIPS": ("SlateStandardIPS", ("pscore", "evaluation_policy_pscore")),
    "SlateIIPS": ("SlateIndependentIPS", ("pscore_item_position", "evaluation_policy_pscore_item_position")),
    "SlateRIPS": ("SlateRewardInteractionIPS", ("pscore_cascade", "evaluation_policy_pscore_cascade")),
    "SNSlateIPS": ("SelfNormalizedSlateStandardIPS", ("pscore", "evaluation_policy_pscore")),
    "SNSlateIIPS": ("SelfNormalizedSlateIndependentIPS",
                    ("pscore_item_position", "evaluation_policy_pscore_item_position")),
    "SNSlateRIPS": ("SelfNormalizedSlateRewardInteractionIPS", ("pscore_cascade", "evaluation_policy_pscore_cascade")),
    "SlateCascadeDR": ("SlateCascadeDoublyRobust", ("pscore_cascade", "evaluation_policy_pscore_cascade", "action",
                                                    "q_hat", "evaluation_policy_action_dist")),
}


@pytest.mark.parametrize("name", PAIRS)
def test_each_slate_estimator_equals_obps(name):
    slate = obp_slate()
    arrays, k, items = obp_layout()
    cls_name, keys = PAIRS[name]
    args = {key: arrays[key] for key in ("slate_id", "reward", "position", *keys)}
    extra = {"n_unique_action": items} if name == "SlateCascadeDR" else {}
    theirs = getattr(slate, cls_name)(len_list=k, **extra).estimate_policy_value(**args)
    ours = SLATE_ESTIMATORS[name]().estimate(**args, len_list=k, n_unique_action=items).value
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)


def test_rows_in_any_order_give_the_same_impressions():
    arrays, k, items = obp_layout(n=20)
    order = np.random.default_rng(1).permutation(20 * k)
    keys = ("slate_id", "reward", "position", "pscore_cascade", "evaluation_policy_pscore_cascade")
    a = SlateInputs.from_obp(**{key: arrays[key] for key in keys})
    b = SlateInputs.from_obp(**{key: arrays[key][order] for key in keys})
    np.testing.assert_array_equal(a.prefix_weight, b.prefix_weight)
    np.testing.assert_array_equal(a.reward, b.reward)


def test_the_merged_states_of_two_halves_are_the_state_of_the_whole():
    arrays, k, items = obp_layout(n=40)
    rows = SlateInputs.from_obp(**arrays, len_list=k, n_unique_action=items)
    halves = [SlateInputs(*(None if v is None else v[s] for v in vars(rows).values()))
              for s in (slice(0, 17), slice(17, None))]
    for estimator in (cls() for cls in SLATE_ESTIMATORS.values()):
        whole, merged = estimator.state(rows), estimator.state(halves[0]) + estimator.state(halves[1])
        assert merged.n == whole.n == 40
        np.testing.assert_allclose(merged.mean, whole.mean, rtol=1e-13)
        np.testing.assert_allclose(merged.comoment, whole.comoment, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(merged.low, whole.low)
        assert estimator.result(merged).value == pytest.approx(estimator.result(whole).value, rel=1e-13)
        restored = Moments.from_dict(merged.to_dict())  # the report's cache: exact
        np.testing.assert_array_equal(restored.mean, merged.mean)
        np.testing.assert_array_equal(restored.comoment, merged.comoment)


def test_pseudoinverse_by_hand_and_equal_to_vw_estimators():
    rng = np.random.default_rng(3)
    n, k = 50, 4
    p_log, p_pred = rng.uniform(0.05, 1, (n, k)), rng.uniform(0.0, 1, (n, k))
    reward = rng.binomial(1, 0.3, (n, k)).astype(float)
    rows = SlateInputs.from_rows(np.repeat(np.arange(n), k), np.tile(np.arange(k), n), reward.ravel(),
                                 slot_weight=(p_pred / p_log).ravel())
    est = SlatePseudoInverse().result(SlatePseudoInverse().state(rows))
    by_hand = np.mean([reward[i].sum() * (sum(p_pred[i, j] / p_log[i, j] for j in range(k)) - (k - 1))
                       for i in range(n)])
    assert est.value == pytest.approx(by_hand, rel=1e-13)
    if importlib.util.find_spec("estimators") is None:
        pytest.skip("vw-estimators is not installed (pip install vw-estimators==0.2.2)")
    from estimators.slates import gaussian, pseudo_inverse

    theirs, interval = pseudo_inverse.Estimator(), gaussian.Interval()
    for i in range(n):
        for state in (theirs, interval):
            state.add_example(p_log[i].tolist(), float(reward[i].sum()), p_pred[i].tolist())
    assert est.value == pytest.approx(theirs.get(), rel=1e-12)
    np.testing.assert_allclose(est.ci(0.05), interval.get(0.05), rtol=1e-10)


def test_paired_difference_against_the_logging_policy_from_one_state():
    arrays, k, items = obp_layout(n=30)
    rows = SlateInputs.from_obp(**arrays, len_list=k, n_unique_action=items)
    diff = Difference(SlateStandardIPS(), SlateOnPolicy())
    est = diff.result(diff.state(rows, rows))
    totals = rows.total
    assert est.value == pytest.approx(np.mean(rows.slate_weight * totals) - totals.mean(), rel=1e-12)
    d = rows.slate_weight * totals - totals
    assert est.stderr == pytest.approx(d.std(ddof=1) / np.sqrt(30), rel=1e-10)
    lo, hi = SlateStandardIPS().estimate(rows=rows).cs(0.05)
    assert lo < SlateStandardIPS().estimate(rows=rows).value < hi


def test_a_missing_input_is_named():
    rows = SlateInputs.from_rows([0, 0], [0, 1], [1.0, 0.0], slot_weight=[1.0, 1.0])
    with pytest.raises(ParameterError, match="SlateCascadeDR needs the prefix weights"):
        SlateCascadeDR().state(rows)
    with pytest.raises(ParameterError, match="twice"):
        SlateInputs.from_rows([0, 0], [1, 1], [1.0, 0.0])
