"""The estimated propensities' diagnostics (dr_scale/propensity/diagnostics.py) against their formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dr_scale.propensity.diagnostics import CALIBRATION_EDGES, PropensityState, reliability_figure

N, K = 4000, 5


def _draw(seed: int = 0):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(K, 0.7), N)
    action = np.array([rng.choice(K, p=p) for p in probs])  # drawn from probs: calibrated
    return rng, probs, action


def test_figures_equal_their_formulas():
    rng, probs, action = _draw()
    target = rng.dirichlet(np.ones(K), N)
    logged = probs[np.arange(N), action] * rng.uniform(0.9, 1.1, N)
    floor = 0.05
    s = PropensityState.of(probs, action, floor=floor, target=target, logged=np.minimum(logged, 1.0)).summary()
    y = np.eye(K)[action]
    p_a = probs[np.arange(N), action]
    assert s["brier"] == pytest.approx(((probs - y) ** 2).sum(axis=1).mean(), rel=1e-12)
    assert s["log_loss"]["model"] == pytest.approx(-np.log(p_a).mean(), rel=1e-12)
    f = np.bincount(action, minlength=K) / N
    assert s["log_loss"]["marginal"] == pytest.approx(-(f * np.log(f)).sum(), rel=1e-12)
    assert s["log_loss"]["uniform"] == pytest.approx(math.log(K))
    assert s["floored_rows"] == int((p_a < floor).sum())
    assert s["support_share_below_floor"] == pytest.approx((target * (probs < floor)).sum(axis=1).mean(), rel=1e-12)
    # classwise ECE by its definition, bin by bin
    bins = np.clip(np.searchsorted(CALIBRATION_EDGES, probs, side="right") - 1, 0, CALIBRATION_EDGES.size - 2)
    ece = 0.0
    for a in range(K):
        for b in np.unique(bins[:, a]):
            m = bins[:, a] == b
            ece += m.sum() / N * abs(y[m, a].mean() - probs[m, a].mean())
    assert s["ece"] == pytest.approx(ece / K, rel=1e-10)
    q = np.minimum(logged, 1.0)
    comparison = s["logged_vs_estimated"]
    assert comparison["correlation"] == pytest.approx(np.corrcoef(q, p_a)[0, 1], rel=1e-9)
    for level, value in comparison["ratio_quantiles"].items():  # to the histogram's bin width
        assert value == pytest.approx(np.quantile(p_a / q, float(level)), rel=0.006)


def test_a_calibrated_model_has_a_small_ece_a_distorted_one_a_large_one():
    _, probs, action = _draw(1)
    sharp = probs ** 2 / (probs ** 2).sum(axis=1, keepdims=True)  # overconfident
    state = PropensityState.of(probs, action)
    good, bad = state.ece(), PropensityState.of(sharp, action).ece()
    # calibrated: only the sampling noise of the bins' frequencies, E|ȳ_b − p̄_b| ≈ √(2/π) √(p̄(1 − p̄)/n_b)
    counts = state.bin_counts
    mean_p = state.bin_p / np.maximum(counts, 1)
    noise = (np.sqrt(2 / np.pi) * np.sqrt(counts * mean_p * (1 - mean_p))).sum() / (N * K)
    assert good < 1.5 * noise < 4 * noise < bad


def test_support_of_a_deterministic_target_and_warnings():
    _, probs, action = _draw(2)
    target = np.argmin(probs, axis=1)  # the least likely action: often below the floor
    state = PropensityState.of(probs, action, floor=0.05, target=target)
    share = (probs[np.arange(N), target] < 0.05).mean()
    assert state.support_share() == pytest.approx(share)
    assert state.support_fails() and any("support fails" in w for w in state.warnings())
    assert state.logged_comparison() is None
    # "compare with DM" only where DM is estimated; without a reward model the advice is to fit one
    (with_dm,) = [w for w in state.warnings() if "support fails" in w]
    (without,) = [w for w in state.warnings(with_dm=False) if "support fails" in w]
    assert with_dm.endswith(": compare with DM") and "fit a reward model (--fit-reward-model)" in without


def test_a_model_worse_than_the_baselines_is_named():
    _, probs, action = _draw(3)
    wrong = np.roll(probs, 1, axis=1)  # another action's probabilities
    assert any("no better than a context-free baseline" in w for w in PropensityState.of(wrong, action).warnings())
    assert not any("baseline" in w for w in PropensityState.of(probs, action).warnings())


@pytest.mark.slow
def test_reliability_figure_has_one_panel_per_action_group():
    _, probs, action = _draw(4)
    state = PropensityState.of(probs, action)
    assert [g["actions"] for g in state.reliability()] == [[a, a] for a in range(K)]
    fig = reliability_figure(state)
    assert len([ax for ax in fig.axes if ax.has_data()]) == K
    wide = PropensityState.of(np.full((10, 80), 1 / 80), np.arange(10))
    assert len(wide.groups()) == 8 and wide.groups()[-1] == (70, 79)
