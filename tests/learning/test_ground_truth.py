"""Ground truth: learn on one day of a generated log, the true value on the next (``generate bandit``).

The generated world knows E[r | x, a] for every row and action (``expected_reward``),
so a policy's true value on the next day's contexts is V(π) = (1/m) Σ_i E[r | x_i, π(x_i)],
with no reward noise. The yardstick is the best linear policy fitted with full
information: the same ridge scores fitted to E[r | x, a] itself (every action, every
row), its λ the best of a grid by true value. The targets: the DR-learned policy
captures ≥ 80% of that policy's gain over the logging policy, and DR-learned ≥ IPS-learned.

Tolerance: the values are means over the m next-day contexts, so each comparison
carries the standard error of a paired mean difference over those contexts; a target
is met when it holds within two such standard errors (one-sided, ≈ 2.3% if exactly on
the line). The learned policies themselves are fixed by the seeds.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest
import scipy.sparse as sp

from dr_scale.learning.learn import LearnSettings, learn_policy
from dr_scale.logs.reading import read_log
from dr_scale.outofcore import ridge
from dr_scale.synthetic.bandit import generate_bandit

ROWS_PER_DAY, FEATURES, ACTIONS = 100_000, 1 << 12, 10


def day(url: str):
    """(X, E[r | x, a] (m, k), logged actions) of one day's parts."""
    parts = read_log(url, n_features=FEATURES, extra_columns=("expected_reward",))
    X = sp.vstack([p.X for p in parts]).tocsr()
    expected = np.vstack([pc.list_flatten(p.table.column("expected_reward")).to_numpy().reshape(len(p), -1)
                          for p in parts])
    return X, expected, np.concatenate([p.action for p in parts])


def full_information_scores(X, expected, lam: float):
    """Ridge scores of E[r | x, a] on x for every action over every row (the same solver as ``learn``)."""
    k = expected.shape[1]
    stats = ridge.RidgeStats(np.full(k, X.shape[0]), np.tile(np.asarray(X.sum(axis=0)), (k, 1)),
                             np.tile(np.asarray(X.multiply(X).sum(axis=0)), (k, 1)), expected.sum(axis=0),
                             np.asarray(X.T @ expected).T)
    fit = ridge.fit(lambda P: np.asarray(X.T @ (X @ P.T)).T, stats, lam, rtol=1e-8)
    return fit.coef.T, fit.intercept


@pytest.mark.slow
def test_dr_learned_policy_captures_most_of_the_full_information_gain(tmp_path):
    url = str(tmp_path / "log")
    generate_bandit(url, rows=2 * ROWS_PER_DAY, features=FEATURES, actions=ACTIONS, days=2, seed=0,
                    rows_per_part=25_000)
    first, second = (f"{url}/date=2026-11-0{i}" for i in (1, 2))
    X, expected, logged = day(second)
    rows = np.arange(X.shape[0])

    def values_of(actions):
        return expected[rows, actions]

    logging = values_of(logged)  # E[r | x, a_i] at the logged actions: unbiased for the logger's value
    X_train, expected_train, _ = day(first)
    full = max((values_of(np.argmax(X @ c + b, axis=1)) for c, b in
                (full_information_scores(X_train, expected_train, lam) for lam in (1.0, 10.0, 100.0, 1000.0))),
               key=np.mean)
    dr = values_of(learn_policy(first, LearnSettings(method="dr")).predict(X))
    ips = values_of(learn_policy(first, LearnSettings(method="ips")).predict(X))

    m = len(rows)
    gain = full.mean() - logging.mean()
    captured = (dr.mean() - logging.mean()) / gain
    # se of the captured share: the paired differences dr − logging and full − logging, by the delta method
    se_captured = np.std((dr - logging) - captured * (full - logging), ddof=1) / np.sqrt(m) / gain
    se_dr_ips = np.std(dr - ips, ddof=1) / np.sqrt(m)
    report = (f"logging {logging.mean():.4f}, full-information linear {full.mean():.4f}, DR {dr.mean():.4f}, "
              f"IPS {ips.mean():.4f}; DR captures {captured:.3f} ± {se_captured:.3f} of the gain")
    print(report)  # shown with -s: the figures docs/learning.md quotes
    assert gain > 0, report
    assert captured >= 0.8 - 2 * se_captured, report
    assert dr.mean() - ips.mean() >= -2 * se_dr_ips, report
