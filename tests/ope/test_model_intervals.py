"""Answers inside the reward range, the reward model's standard error from the cross-fitting fold models, and
thresholds chosen by SLOPE (docs/estimators.md, "Intervals and their guarantees")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dr_scale.ope.estimators import (
    IPS,
    ClippedDR,
    DirectMethod,
    DoublyRobust,
    DRos,
    DRTuning,
    Estimate,
    IPSTuning,
    SubGaussianDR,
    SubGaussianIPS,
    SwitchDR,
    SwitchDRTuning,
    fold_jackknife,
)
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.estimators.shrinkage import honest_variances, slope, slope_widths
from dr_scale.ope.evaluation import Evaluation, estimate_dict
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.bandit import WorldSettings, generate_rows, make_world
from dr_scale.synthetic.finite_world import BanditWorld


def _negative_dr_log():
    """Six 0/1 rows: π always takes action 0, ρ̂ = 0.2 everywhere; the one row that logged action 0 (p = 0.1, w = 10)
    has r = 0, so DR = (5 · 0.2 + (0.2 + 10 (0 − 0.2))) / 6 = −0.8/6 < 0."""
    action = np.array([0, 1, 1, 1, 1, 1])
    reward = np.array([0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    target = np.zeros((6, 2))
    target[:, 0] = 1.0
    return dict(reward=reward, action=action, propensity=np.array([0.1, 0.9, 0.9, 0.9, 0.9, 0.9]),
                target_probs=target, reward_hat=np.full((6, 2), 0.2))


def test_a_negative_dr_is_projected_into_the_reward_range_and_the_raw_value_kept():
    e = DoublyRobust().estimate(**_negative_dr_log())
    assert e.value == pytest.approx(-0.8 / 6, abs=1e-15) and e.bounds == (0.0, 1.0)
    shown = e.projected(0.05)
    raw_lo, raw_hi = e.ci(0.05)
    assert shown.moved and shown.value == 0.0 and shown.raw_value == e.value
    assert shown.ci == (0.0, min(raw_hi, 1.0)) and shown.raw_ci == (raw_lo, raw_hi) and raw_lo < 0
    assert 0.0 <= shown.cs[0] <= shown.cs[1] <= 1.0
    out = estimate_dict(e, 0.05, "normal")
    assert out["value"] == 0.0 and out["raw_value"] == e.value and out["projected"] is True
    assert out["raw_ci"] == [raw_lo, raw_hi] and out["ci"][0] == 0.0
    el = e.projected(0.05, "el")
    assert 0.0 <= el.ci[0] <= el.ci[1] <= 1.0


def test_an_estimate_inside_the_range_is_left_alone_and_differences_use_the_range_of_a_difference():
    e = IPS().estimate(**{**_negative_dr_log(), "propensity": np.full(6, 0.5)})
    shown = e.projected(0.05)
    assert not shown.moved and shown.ci == e.ci(0.05)
    assert "raw_value" not in estimate_dict(e, 0.05, "normal")
    d = Estimate(-1.4, 0.1, 10, bounds=(-1.0, 1.0)).projected(0.05)
    assert d.value == -1.0 and d.ci == (-1.0, -1.0)  # an interval wholly outside becomes the nearest end


def test_fold_jackknife_is_the_grouped_jackknife_and_widens_the_interval_in_quadrature():
    values = np.array([0.010, 0.013, 0.012, 0.009])
    assert fold_jackknife(values) == pytest.approx(math.sqrt(3 / 4 * np.sum((values - values.mean()) ** 2)),
                                                   rel=1e-15)
    assert math.isnan(fold_jackknife(np.array([0.1])))
    plain = Estimate(0.01, 0.001, 100)
    wide = Estimate(0.01, 0.001, 100, model_stderr=0.002)
    lo, hi = wide.ci(0.05)
    assert (hi - lo) / (plain.ci(0.05)[1] - plain.ci(0.05)[0]) == pytest.approx(math.sqrt(5), rel=1e-12)


def _crossfit_log(rows=1500):
    world = make_world(3, 120, 4, WorldSettings(base=-4.0))
    table, _ = generate_rows(world, 5, 0, rows)
    rng = np.random.default_rng(0)
    folds, d, k = 3, 120, 4
    model = LinearRewardModel(rng.normal(0, 0.01, (d, k)), np.full(k, 0.02),
                              fold_coef=rng.normal(0, 0.01, (folds, d, k)),
                              fold_intercept=0.02 + rng.normal(0, 0.003, (folds, k)))
    return table, model


def test_the_fold_states_merge_over_any_split_and_give_the_model_stderr():
    table, model = _crossfit_log()
    evaluation = Evaluation("uniform", ["DM", "DR", "DRos"], reward_model=model, n_actions=4, n_features=120,
                            allow_other_log=True, baseline="logging")
    whole = evaluation.table_state(table, "log")
    # DR has its CLT: no fold states
    assert set(whole.folds) == {"DM", "DRos", "difference:DM", "difference:DRos"} and len(whole.folds["DM"]) == 3
    pieces = [evaluation.table_state(table.slice(a, b - a), "log") for a, b in ((0, 400), (400, 1450), (1450, 1500))]
    for merged in (pieces[0] + pieces[1] + pieces[2], pieces[2] + (pieces[1] + pieces[0])):
        for name, states in whole.folds.items():
            for a, b in zip(merged.folds[name], states, strict=True):
                assert a.n == b.n
                np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12)
                np.testing.assert_allclose(a.comoment, b.comoment, rtol=1e-9, atol=1e-15)
    result = evaluation.result(whole)
    dm = result.estimates["DM"]
    # DM under fold model j is the mean over the rows of model j's value of the uniform policy
    values = [DirectMethod().result(s).value for s in whole.folds["DM"]]
    assert dm.model_stderr == pytest.approx(fold_jackknife(np.array(values)), rel=1e-15) and dm.model_stderr > 0
    assert not dm.guarantee and dm.model_based and result.estimates["DR"].guarantee
    assert result.estimates["DR"].model_stderr is None
    # V(uniform) − V(logging) by DM: the logging policy's value is the logged mean, which no model moves
    assert result.differences["DM"].model_stderr == pytest.approx(dm.model_stderr, rel=1e-9)
    out = {name: estimate_dict(e, 0.05, "normal") for name, e in result.estimates.items()}
    assert out["DM"]["coverage_guarantee"] is False and out["DM"]["model_stderr"] == dm.model_stderr
    assert "coverage_guarantee" not in out["DR"]
    assert "model-based: no coverage guarantee" in result.table()


def _heavy_log(n=10_000, k=50, seed=1):
    """Rare clicks (≈ 0.5%) logged by a policy that gives 49 of 50 actions probability 1e-5: the uniform target's
    weights are 0.02 on the common action's rows and 2,000 on the few others, one of which is a click (ESS of a
    few rows of 10,000)."""
    rng = np.random.default_rng(seed)
    logging = np.full(k, 1e-5)
    logging[0] = 1.0 - (k - 1) * 1e-5
    action = rng.choice(k, size=n, p=logging)
    reward = (rng.uniform(size=n) < 0.005).astype(float)
    reward[np.flatnonzero(action > 0)[0]] = 1.0
    return dict(reward=reward, action=action, propensity=logging[action], target_probs=np.full((n, k), 1.0 / k),
                reward_hat=np.full((n, k), 0.005))


def test_the_tuned_estimators_choose_a_finite_threshold_when_a_few_rows_carry_the_weights():
    log = _heavy_log()
    w = log["target_probs"][0, log["action"]] / log["propensity"]
    assert w.sum() ** 2 / (w ** 2).sum() < 30  # a heavy-weight log: an ESS of a few rows of 10,000
    for estimator, key in ((SwitchDR(), "tau"), (ClippedDR(), "max_weight"), (IPSTuning(), "lambda_"),
                           (DRTuning(), "lambda_")):
        e = estimator.estimate(**log)
        assert math.isfinite(e.chosen[key]), (estimator, e.chosen)
        assert e.tuning.startswith(f"{'λ' if key == 'lambda_' else key} = ") and "SLOPE" in e.tuning


def _unclicked_policy_log(n=20_000, k=20, seed=3):
    """Clicks at 0.5% on every action, but the action a constant policy takes (logged with p = 0.002, weight 500;
    ~40 rows, ESS ~40) has no click among its rows; ρ̂ = 0.005 everywhere."""
    rng = np.random.default_rng(seed)
    logging = np.full(k, (1.0 - 0.002) / (k - 1))
    logging[12] = 0.002
    action = rng.choice(k, size=n, p=logging)
    reward = ((rng.uniform(size=n) < 0.005) & (action != 12)).astype(float)
    target = np.zeros((n, k))
    target[:, 12] = 1.0
    return dict(reward=reward, action=action, propensity=logging[action], target_probs=target,
                reward_hat=np.full((n, k), 0.005))


@pytest.mark.parametrize("estimator", [SwitchDR(), ClippedDR()], ids=repr)
def test_thresholds_are_finite_where_the_weighted_rows_are_too_few_to_show_their_spread(estimator):
    """With no click among the heavy rows, their sample variance is 0 and SLOPE over it keeps DR (t = ∞, an
    interval as narrow as DM's around a value far from it); the honest variance, mean(ŵ²) · mean((r − ρ̂)²),
    widens DR's interval as those few rows warrant and a finite threshold is chosen, the reason saying so."""
    log = _unclicked_policy_log()
    rows = RowInputs.from_arrays(**log)
    assert 30 <= (w := rows.weight).sum() ** 2 / (w ** 2).sum() <= 60 and not (log["reward"] * w).any()
    state = estimator.state(rows)
    size = len(estimator.thresholds)
    sample = np.diag(state.comoment)[:size] / state.n
    plain = size - 1 - slope(state.mean[:size][::-1], slope_widths(sample, state.n, 0.1)[::-1])
    assert estimator.thresholds[plain] >= w.max()  # SLOPE over the sample variances (obp's): DR's value itself
    honest = honest_variances(state, size)
    assert honest[-1] > 20 * sample[-1]  # DR's: ~500² · 40/n · 0.005 · 10/(40 + 10) against (500 · 0.005)² · 40/n
    w_hat = estimator.modified(w, math.inf)
    floor = np.mean(w_hat ** 2) * np.mean((log["reward"] - 0.005) ** 2)
    ess = w_hat.sum() ** 2 / (w_hat ** 2).sum()
    assert honest[-1] == pytest.approx(sample[-1] + 10 / (ess + 10) * (floor - sample[-1]), rel=1e-9)
    e = estimator.estimate(**log)
    chosen = e.chosen[estimator.parameter]
    assert chosen < w.max() and "variance raised" in e.tuning and f"= {chosen:g} by SLOPE" in e.tuning
    assert abs(e.value - DirectMethod().estimate(**log).value) < abs(DoublyRobust().estimate(**log).value - 0.005)


#: The estimators that choose λ by obp's rules (``Shrinkage``), each with its λ of no shrinkage (ŵ = w: IPS, DR).
SHRINKAGE_TUNED = [(IPSTuning, math.inf), (DRTuning, math.inf), (DRos, math.inf), (SwitchDRTuning, math.inf),
                   (SubGaussianIPS, 0.0), (SubGaussianDR, 0.0)]


@pytest.mark.parametrize(("tuned", "plain"), SHRINKAGE_TUNED, ids=lambda x: getattr(x, "__name__", ""))
def test_obps_tuning_rules_over_honest_variances_shrink_the_weights_of_too_few_rows(tuned, plain):
    """The same log: obp's SLOPE over the sample variances (``variance="sample"``) keeps λ of IPS or DR itself; over
    the honest ones — for IPS u = r, so the floor is mean(ŵ²) · mean(r²) — it shrinks the heavy weights, the
    reason saying why."""
    log = _unclicked_policy_log()
    obps = tuned(variance="sample").estimate(**log)
    assert obps.chosen == {"lambda_": plain} and "raised" not in obps.tuning
    estimator = tuned()
    state = estimator.state(RowInputs.from_arrays(**log))
    size = len(estimator.candidates)
    sample = np.diag(state.comoment)[:size] / state.n
    j = estimator.candidates.index(plain)
    w = estimator.shrink(RowInputs.from_arrays(**log).weight, plain)
    u = log["reward"] - 0.005 if estimator.needs_model else log["reward"]
    floor, ess = np.mean(w ** 2) * np.mean(u ** 2), w.sum() ** 2 / (w ** 2).sum()
    honest = honest_variances(state, size)
    assert honest[j] == pytest.approx(sample[j] + 10 / (ess + 10) * (floor - sample[j]), rel=1e-9)
    e = estimator.estimate(**log)
    assert e.chosen["lambda_"] != plain and "variance raised" in e.tuning
    assert f"λ = {e.chosen['lambda_']:g} by SLOPE" in e.tuning


def test_thresholds_are_chosen_as_obps_slope_where_the_weighted_rows_show_their_spread():
    """On a log with good overlap the floor barely moves the variances: the choice is SLOPE's over the sample
    variances (obp's)."""
    log = BanditWorld.make(epsilon=0.2).sample(5000, seed=4)
    rows = RowInputs.from_arrays(**log)
    for estimator in (SwitchDR(), ClippedDR()):
        state = estimator.state(rows)
        size = len(estimator.thresholds)
        sample = np.diag(state.comoment)[:size] / state.n
        honest = honest_variances(state, size)
        assert np.all(honest >= sample) and np.allclose(honest, sample, rtol=0.01, atol=0)
        plain = size - 1 - slope(state.mean[:size][::-1], slope_widths(sample, state.n, 0.1)[::-1])
        e = estimator.estimate(**log)
        assert e.chosen[estimator.parameter] == estimator.thresholds[plain]
        assert "raised" not in e.tuning and e.tuning.startswith(f"{estimator.parameter} = ")
    for tuned, _ in SHRINKAGE_TUNED:
        for method in ("slope", "mse"):
            honest, obps = tuned(tuning_method=method), tuned(tuning_method=method, variance="sample")
            assert honest.estimate(**log).chosen == obps.estimate(**log).chosen, (tuned, method)


@pytest.mark.slow  # importing obp (scikit-learn, pandas …) takes seconds
def test_switch_and_clipped_dr_choose_as_obps_slope_tuning_on_the_same_arrays():
    from test_shrinkage_estimators import obp_equality

    obp_equality()  # installs the stand-in modules obp imports
    from obp.ope import DoublyRobustTuning, SwitchDoublyRobustTuning

    from dr_scale.ope.estimators import TUNING_GRID

    grid = [*TUNING_GRID, math.inf]
    for seed in range(3):
        log = _heavy_log(n=4000, seed=seed)
        rows = dict(reward=log["reward"], action=log["action"], pscore=log["propensity"],
                    action_dist=log["target_probs"][:, :, None],
                    estimated_rewards_by_reg_model=log["reward_hat"][:, :, None])
        for ours, theirs, key in ((SwitchDR(), SwitchDoublyRobustTuning, "tau"),
                                  (ClippedDR(), DoublyRobustTuning, "max_weight")):
            reference = theirs(lambdas=grid, tuning_method="slope")
            value = reference.estimate_policy_value(**rows)
            e = ours.estimate(**log)
            assert abs(e.value - value) <= 1e-12 and e.chosen[key] == reference.best_hyperparam, (ours, seed)
