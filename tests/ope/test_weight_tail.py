"""The weights' tail diagnostics of WeightStats: the Pareto k̂ from a mergeable top-M sample, the top-1% share."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dr_scale.ope.diagnostics import TOP_M, WEIGHT_EDGES, WeightStats, pareto_k
from dr_scale.outofcore.mergeable import merge_all


def stats_of(weight, reward):
    return WeightStats.of(weight, np.full(weight.size, 0.5), reward)


def pareto_weights(k: float, n: int, seed: int) -> np.ndarray:
    """Weights whose tail is generalized Pareto with shape k (a Pareto-tailed distribution, scale 1)."""
    u = np.random.default_rng(seed).uniform(size=n)
    return (u ** -k - 1) / k


def test_top_sample_merges_exactly_and_gives_the_same_k_for_any_partitioning():
    w = pareto_weights(0.5, 20_000, 1) * (np.random.default_rng(2).uniform(size=20_000) < 0.6)  # 40% zero weights
    r = np.random.default_rng(3).binomial(1, 0.3, 20_000).astype(float)
    whole = stats_of(w, r)
    positive = np.sort(w[w > 0])[::-1]
    np.testing.assert_array_equal(whole.top, positive[:TOP_M])
    for cuts in ([0, 7_000, 20_000], [0, 1, 333, 5_000, 19_999, 20_000]):
        parts = [stats_of(w[a:b], r[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
        for merged in (merge_all(parts), merge_all(parts[::-1])):
            np.testing.assert_array_equal(merged.top, whole.top)
            np.testing.assert_allclose(merged.value_histogram, whole.value_histogram, rtol=1e-12)  # float sums
            assert merged.pareto_k == whole.pareto_k
    assert WeightStats.from_dict(whole.to_dict()).pareto_k == whole.pareto_k


@pytest.mark.slow
@pytest.mark.parametrize("k", [0.2, 0.5, 0.9])
def test_pareto_k_recovers_the_tail_shape(k):
    """Mean k̂ over 40 samples of 5,000 weights within 4 standard errors of the mean of the truth, the standard
    error from k̂'s asymptotic one, (1 + k) / √M (M = 3√5000 = 213 tail weights)."""
    n, reps = 5_000, 40
    m = math.ceil(3 * math.sqrt(n))
    estimates = [stats_of(pareto_weights(k, n, seed), np.ones(n)).pareto_k for seed in range(reps)]
    assert abs(np.mean(estimates) - k) < 4 * (1 + k) / math.sqrt(m) / math.sqrt(reps)


def test_pareto_k_is_nan_for_a_short_or_discrete_tail():
    assert math.isnan(stats_of(np.r_[np.zeros(100), np.full(30, 4.0)], np.ones(130)).pareto_k)  # all ties
    assert math.isnan(stats_of(np.array([1.0, 2.0, 3.0]), np.ones(3)).pareto_k)  # too few
    assert math.isnan(pareto_k(np.array([5.0] * 200 + [1.0] * 200), 400))
    assert math.isnan(WeightStats.empty().pareto_k)


def test_top_share_equals_the_exact_share_within_the_boundary_bin():
    rng = np.random.default_rng(5)
    for seed in range(5):
        n = 10_000
        w = pareto_weights(0.4, n, seed) * (rng.uniform(size=n) < 0.5)
        r = rng.binomial(1, 0.2, n).astype(float)
        s = stats_of(w, r)
        order = np.argsort(-w, kind="stable")
        top = order[: np.count_nonzero(w) // 100]  # the top 1% of the positive weights
        exact = (w[top] * r[top]).sum() / (w * r).sum()
        # the share is exact up to the rows of the bin where the top 1% ends, taken in proportion
        edge = np.searchsorted(WEIGHT_EDGES, w[top[-1]], side="right") - 1
        boundary = s.value_histogram[edge] / s.value_histogram.sum()
        assert abs(s.top_share() - exact) <= boundary + 1e-12
    assert math.isnan(stats_of(np.ones(10), np.zeros(10)).top_share())  # no value to share
    assert stats_of(np.r_[np.full(99, 1.0), 100.0], np.ones(100)).top_share() == pytest.approx(100 / 199)
    # zero weights do not count: the top 1% of 100 equal positive weights among 10,000 rows carry 1% of the value
    assert stats_of(np.r_[np.zeros(9_900), np.full(100, 80.0)], np.ones(10_000)).top_share() == pytest.approx(0.01)


def test_heavy_tail_is_warned():
    heavy = stats_of(1 / np.random.default_rng(0).uniform(size=5_000), np.ones(5_000))  # k = 1
    assert heavy.pareto_k > 0.7 and any(w.startswith("heavy-tailed weights: Pareto k̂") for w in heavy.warnings())
    light = stats_of(np.random.default_rng(0).uniform(1, 2, 5_000), np.ones(5_000))
    assert not any("heavy-tailed" in w for w in light.warnings())
