"""Estimators: closed forms, identities, the paper's bias theorem, CI coverage, merge laws."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dr_scale.ope.estimators import (
    IPS,
    SNDR,
    SNIPS,
    ClippedDR,
    DirectMethod,
    DoublyRobust,
    RowInputs,
    SwitchDR,
    make_estimators,
)
from dr_scale.ope.moments import Moments

# A tiny log worked by hand (k = 2, stochastic target policy).
TINY = dict(
    reward=np.array([1.0, 0.0, 2.0]),
    action=np.array([0, 1, 1]),
    propensity=np.array([0.5, 0.25, 0.8]),
    target_probs=np.array([[0.8, 0.2], [0.5, 0.5], [0.0, 1.0]]),
    reward_hat=np.array([[0.6, 0.3], [0.2, 0.4], [1.0, 1.5]]),
)
# By hand: w = (1.6, 2, 1.25); ρ̂_π = (0.54, 0.3, 1.5); ρ̂_a = (0.6, 0.4, 1.5).
HAND_TERMS = {
    "DM": [0.54, 0.3, 1.5],
    "IPS": [1.6, 0.0, 2.5],
    "DR": [0.54 + 1.6 * 0.4, 0.3 - 2 * 0.4, 1.5 + 1.25 * 0.5],
    "SwitchDR(tau=1.5)": [0.54, 0.3, 1.5 + 1.25 * 0.5],
    "ClippedDR(M=1.8)": [0.54 + 1.6 * 0.4, 0.3 - 1.8 * 0.4, 1.5 + 1.25 * 0.5],
}
HAND_VALUES = {
    "DM": 0.78,
    "IPS": 4.1 / 3,
    "DR": 0.935,
    "SwitchDR(tau=1.5)": 2.965 / 3,
    "ClippedDR(M=1.8)": 2.885 / 3,
    "SNIPS": 4.1 / 4.85,
    "SNDR": 0.78 + 0.465 / 4.85,
}
MEAN_ESTIMATORS = {
    "DM": DirectMethod(),
    "IPS": IPS(),
    "DR": DoublyRobust(),
    "SwitchDR(tau=1.5)": SwitchDR(tau=1.5),
    "ClippedDR(M=1.8)": ClippedDR(max_weight=1.8),
}


@pytest.mark.parametrize("name", list(MEAN_ESTIMATORS))
def test_mean_estimators_closed_form(name):
    est = MEAN_ESTIMATORS[name].estimate(**TINY)
    terms = np.array(HAND_TERMS[name])
    assert est.value == pytest.approx(HAND_VALUES[name], rel=1e-12)
    assert est.stderr == pytest.approx(np.sqrt(terms.var(ddof=1) / 3), rel=1e-12)
    assert est.n == 3
    lo, hi = est.ci(0.05)
    assert (lo + hi) / 2 == pytest.approx(est.value)
    assert hi - lo == pytest.approx(2 * 1.959963984540054 * est.stderr)


def test_self_normalized_closed_form():
    assert SNIPS().estimate(**TINY).value == pytest.approx(HAND_VALUES["SNIPS"], rel=1e-12)
    assert SNDR().estimate(**TINY).value == pytest.approx(HAND_VALUES["SNDR"], rel=1e-12)


def test_snips_stderr_is_the_delta_method():
    w = np.array([1.6, 2.0, 1.25])
    wr = np.array([1.6, 0.0, 2.5])
    v = wr.sum() / w.sum()
    # Linearization of the ratio: (w r − v w) / mean(w).
    infl = (wr - v * w) / w.mean()
    assert SNIPS().estimate(**TINY).stderr == pytest.approx(np.sqrt(infl.var(ddof=1) / 3), rel=1e-12)


# -- identities ---------------------------------------------------------------
def random_log(n=400, k=4, seed=0):
    rng = np.random.default_rng(seed)
    logging = rng.dirichlet(np.ones(k), size=n)
    action = np.array([rng.choice(k, p=p) for p in logging])
    return dict(
        reward=rng.normal(size=n),
        action=action,
        propensity=logging[np.arange(n), action],
        target_probs=rng.dirichlet(np.ones(k), size=n),
        reward_hat=rng.normal(size=(n, k)),
    )


def test_dr_equals_ips_when_model_is_zero():
    log = random_log()
    log["reward_hat"] = np.zeros_like(log["reward_hat"])
    dr, ips = DoublyRobust().estimate(**log), IPS().estimate(**log)
    assert dr.value == pytest.approx(ips.value, rel=1e-13)
    assert dr.stderr == pytest.approx(ips.stderr, rel=1e-13)


def test_dr_equals_dm_when_target_never_picks_logged_action():
    log = random_log()
    k = log["target_probs"].shape[1]
    target = (log["action"] + 1) % k
    log["target_probs"] = np.eye(k)[target]
    dr, dm = DoublyRobust().estimate(**log), DirectMethod().estimate(**log)
    assert dr.value == dm.value and dr.stderr == pytest.approx(dm.stderr, rel=1e-14)


def same_as_dr(est, dr):
    """Equal values; standard errors to rounding (DR's state also holds w: another BLAS kernel)."""
    assert est.value == dr.value and est.n == dr.n
    assert est.stderr == pytest.approx(dr.stderr, rel=1e-14)


def test_switch_dr_limits():
    log = random_log()
    dr, dm = DoublyRobust().estimate(**log), DirectMethod().estimate(**log)
    same_as_dr(SwitchDR(tau=np.inf).estimate(**log), dr)
    assert SwitchDR(tau=0.0).estimate(**log).value == pytest.approx(dm.value, rel=1e-13)
    mid = SwitchDR(tau=1.0).estimate(**log).value
    assert mid not in (dr.value, dm.value)


def test_clipping_at_infinity_is_dr_and_clipping_bounds_weights():
    log = random_log()
    same_as_dr(ClippedDR(max_weight=np.inf).estimate(**log), DoublyRobust().estimate(**log))
    tiny_clip = ClippedDR(max_weight=1e-12).estimate(**log)
    assert tiny_clip.value == pytest.approx(DirectMethod().estimate(**log).value, abs=1e-9)


def test_model_is_required_for_dm_and_dr():
    log = random_log()
    log.pop("reward_hat")
    for est in (DirectMethod(), DoublyRobust(), SNDR(), SwitchDR(), ClippedDR()):
        with pytest.raises(ValueError, match="needs a reward model"):
            est.estimate(**log)
    assert np.isfinite(IPS().estimate(**log).value)


def test_bad_arrays_are_rejected():
    log = random_log(n=10)
    with pytest.raises(ValueError, match="propensity"):
        IPS().estimate(**{**log, "propensity": np.zeros(10)})
    with pytest.raises(ValueError, match="action"):
        IPS().estimate(**{**log, "action": np.full(10, 7)})
    with pytest.raises(ValueError, match="shape"):
        DoublyRobust().estimate(**{**log, "reward_hat": np.zeros((10, 2))})


def test_make_estimators_by_name():
    ests = make_estimators(["DR", "ClippedDR", "SwitchDR"], clip=3.0, tau=2.0)
    assert ests["ClippedDR"].max_weight == 3.0 and ests["SwitchDR"].tau == 2.0
    with pytest.raises(ValueError, match="unknown estimator"):
        make_estimators(["XYZ"])


# -- the paper's bias theorem (Thm. 1) ---------------------------------------------
def finite_world(seed=1):
    """A finite world: 12 contexts, 3 actions, known ρ and p, deliberately wrong ρ̂ and p̂."""
    rng = np.random.default_rng(seed)
    n_ctx, k = 12, 3
    rho = rng.uniform(0.1, 0.9, size=(n_ctx, k))
    p = rng.dirichlet(2 * np.ones(k), size=n_ctx)
    p_hat = p * rng.uniform(0.6, 1.4, size=p.shape)  # multiplicative error, not normalised
    rho_hat = rho + rng.uniform(-0.3, 0.3, size=rho.shape)  # additive error Δ
    pi = rng.dirichlet(np.ones(k), size=n_ctx)
    return rho, p, p_hat, rho_hat, pi


def simulate_estimates(estimator, reps=300, n=2000, seed=2):
    rho, p, p_hat, rho_hat, pi = finite_world()
    rng = np.random.default_rng(seed)
    k = rho.shape[1]
    values = []
    for _ in range(reps):
        x = rng.integers(0, rho.shape[0], size=n)
        a = (rng.random(n)[:, None] >= np.cumsum(p[x], axis=1)).sum(axis=1).clip(max=k - 1)
        r = (rng.random(n) < rho[x, a]).astype(float)
        values.append(estimator.estimate(reward=r, action=a, propensity=p_hat[x, a],
                                         target_probs=pi[x], reward_hat=rho_hat[x]).value)
    return np.array(values)


@pytest.mark.parametrize("name", ["DR", "IPS", "DM"])
def test_bias_theorem(name):
    """Mean of V̂ − V over repetitions equals the theorem's bias within 3 Monte-Carlo SEs.

    Δ = ρ̂ − ρ, δ = 1 − p/p̂;  bias(DR) = E_x Σ_a π Δ δ,  bias(IPS) = −E_x Σ_a π ρ δ,
    bias(DM) = E_x Σ_a π Δ  (Dudík et al. 2011, Sec. 3).
    """
    rho, p, p_hat, rho_hat, pi = finite_world()
    delta_add, delta_mul = rho_hat - rho, 1 - p / p_hat
    truth = np.mean(np.sum(pi * rho, axis=1))
    bias = {
        "DR": np.mean(np.sum(pi * delta_add * delta_mul, axis=1)),
        "IPS": -np.mean(np.sum(pi * rho * delta_mul, axis=1)),
        "DM": np.mean(np.sum(pi * delta_add, axis=1)),
    }[name]
    est = {"DR": DoublyRobust(), "IPS": IPS(), "DM": DirectMethod()}[name]
    values = simulate_estimates(est)
    mc_se = values.std(ddof=1) / np.sqrt(values.size)
    assert abs(values.mean() - truth - bias) < 3 * mc_se
    # The test has teeth: the bias is many Monte-Carlo SEs away from zero.
    assert abs(bias) > 5 * mc_se


def normal_ci_coverage(reps: int, n: int = 300, seed: int = 3) -> float:
    """The share of ``reps`` logs of n rows of :func:`finite_world` whose DR 95% normal interval covers the truth
    (``benchmarks/statistical_checks.py`` runs it at 2,000 logs)."""
    rho, p, _, rho_hat, pi = finite_world()
    truth = np.mean(np.sum(pi * rho, axis=1))
    rng = np.random.default_rng(seed)
    k, covered = rho.shape[1], 0
    for _ in range(reps):
        x = rng.integers(0, rho.shape[0], size=n)
        a = (rng.random(n)[:, None] >= np.cumsum(p[x], axis=1)).sum(axis=1).clip(max=k - 1)
        r = (rng.random(n) < rho[x, a]).astype(float)
        lo, hi = DoublyRobust().estimate(reward=r, action=a, propensity=p[x, a], target_probs=pi[x],
                                         reward_hat=rho_hat[x]).ci(0.05)
        covered += lo <= truth <= hi
    return covered / reps


def test_normal_ci_coverage():
    """95% intervals of DR cover the true value 95% ± 3 binomial sds of the time over 400 fixed-seed logs
    (sd √(0.95 · 0.05 / 400) = 0.011: an interval of 0.8× the width, covering ~89%, fails)."""
    reps = 400
    assert abs(normal_ci_coverage(reps) - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / reps)


# -- merge laws (property-based) ------------------------------------------------
columns = st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(values=columns, data=st.data())
def test_moments_merge_in_any_order_and_grouping(values, data):
    z = np.array(values)
    w = np.cos(z)  # a second, correlated quantity
    whole = Moments.of(z, w)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(z)), max_size=6)))
    pieces = [Moments.of(z[a:b], w[a:b]) for a, b in zip([0, *cuts], [*cuts, len(z)])]
    order = data.draw(st.permutations(range(len(pieces))))
    merged = Moments.empty(2)
    for i in order:
        merged = merged + pieces[i]
    # Grouping: a balanced tree, ((p0 + p1) + (p2 + p3)) + …, as Dask's tree reduction merges
    level = pieces
    while len(level) > 1:
        level = [sum(level[i:i + 2][1:], level[i]) for i in range(0, len(level), 2)]
    grouped = level[0]
    for state in (merged, grouped):
        assert state.n == whole.n
        np.testing.assert_allclose(state.mean, whole.mean, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(state.comoment, whole.comoment, rtol=1e-9, atol=1e-6)


def test_estimate_from_merged_states_equals_whole():
    log = random_log(n=1000)
    rows = RowInputs.from_arrays(**log)
    halves = [RowInputs(*(None if f is None else f[s] for f in (rows.reward, rows.weight, rows.reward_hat_pi,
                                                                    rows.reward_hat_logged)))
              for s in (slice(0, 337), slice(337, None))]
    for est in (SNDR(), DoublyRobust(), SNIPS()):
        merged = est.result(est.state(halves[0]) + est.state(halves[1]))
        whole = est.result(est.state(rows))
        assert merged.value == pytest.approx(whole.value, rel=1e-12)
        assert merged.stderr == pytest.approx(whole.stderr, rel=1e-12)


def test_the_abstract_bases_cannot_be_instantiated():
    """The base classes are abstract: an estimator without per-row terms (or a λ family without its weight ŵ_λ,
    a threshold family without its correction) is a TypeError when made, not a failure when first used."""
    from dr_scale.ope.estimators import ESTIMATORS, Estimator, Shrinkage
    from dr_scale.ope.estimators.tuning import _Thresholded

    for base in (Estimator, Shrinkage, _Thresholded):
        with pytest.raises(TypeError, match="abstract"):
            base()
    assert all(isinstance(cls(), Estimator) for cls in ESTIMATORS.values())


def _random_rows(n: int = 5000, seed: int = 3) -> RowInputs:
    rng = np.random.default_rng(seed)
    k = 4
    target = rng.dirichlet(np.ones(k), size=n)
    return RowInputs.from_arrays(reward=rng.binomial(1, 0.3, n).astype(float), action=rng.integers(0, k, n),
                                 propensity=np.full(n, 1 / k), target_probs=target, reward_hat=rng.random((n, k)))


@pytest.mark.parametrize("name", ["DM", "IPS", "DR", "SNIPS", "SNDR"])
def test_a_plain_estimators_state_is_the_moments_of_its_terms_whichever_others_share_the_rows(name):
    rows, alone = _random_rows(), _random_rows()
    estimators = make_estimators(["DM", "IPS", "DR", "SNIPS", "SNDR"])
    together = {key: est.state(rows) for key, est in estimators.items()}[name]
    by_terms = Moments.of(*estimators[name].terms(rows), ranges=rows.ranges)
    np.testing.assert_array_equal(together.mean, by_terms.mean)  # the rows' means: the same pairwise sums
    np.testing.assert_allclose(together.comoment, by_terms.comoment, rtol=1e-12, atol=1e-9)
    state_alone = estimators[name].state(alone)  # a run asking for this estimator alone: the same bits
    np.testing.assert_array_equal(state_alone.comoment, together.comoment)
    np.testing.assert_array_equal(np.r_[state_alone.low, state_alone.high], np.r_[together.low, together.high])


def test_the_plain_estimators_of_one_batch_stack_its_terms_once_and_tuned_thresholds_bin_it_once(monkeypatch):
    rows = _random_rows()
    stacks, bincounts = [], []
    of, bincount = Moments.of.__func__, np.bincount
    monkeypatch.setattr(Moments, "of", classmethod(lambda cls, *c, **kw: stacks.append(len(c)) or of(cls, *c, **kw)))
    monkeypatch.setattr(np, "bincount", lambda *a, **kw: bincounts.append(1) or bincount(*a, **kw))
    for est in make_estimators(["DM", "IPS", "DR", "SNIPS", "SNDR"]).values():
        est.state(rows)
    assert stacks == [5]  # (w r, w, ρ̂_π, w d, ρ̂_π + w d), once
    SwitchDR().state(rows)
    binned = len(bincounts)
    ClippedDR().state(rows)  # the same grid: its per-bin sums are SwitchDR's
    assert binned == 17 and len(bincounts) == binned
