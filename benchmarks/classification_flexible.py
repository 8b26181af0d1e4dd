"""Table 2's protocol with a flexible loss model: does DR then beat IPS where the linear ridge does not?

The paper's policy-evaluation protocol (dr_scale.experiments.classification.evaluation_experiment,
pipelines/classification_eval.toml's options): per data set a DLM policy π trained on
the fully labelled training half, evaluated on the test half converted to bandit data
with uniform logging. Under that logging the spread of IPS and DR over conversions is
known exactly (``Prepared.sd_theory``): sd(DR)/sd(IPS) = √(mean (l_π − l̂_π)² / mean l_π²),
so DR beats IPS exactly when the loss model's squared error on π's actions is below π's
error rate — no Monte-Carlo needed. This compares the ridge loss model with one
``HistGradientBoostingRegressor`` per action (a :class:`~dr_scale.reward.sklearn_models.SklearnRewardModel`),
both fitted on the training half, as the protocol fits its loss model: the test rows
are never seen by the model, which is what cross-fitting gives on a single log.

    python benchmarks/classification_flexible.py [--datasets ecoli,glass]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from dr_scale.experiments.classification.evaluation_experiment import prepare
from dr_scale.experiments.classification.protocol import dataset_names
from dr_scale.io.tomlcompat import tomllib
from dr_scale.reward.sklearn_models import SklearnRewardModel

PIPELINE = Path(__file__).resolve().parents[1] / "pipelines" / "classification_eval.toml"


class PerActionRegressors:
    """l̂_a(x): a clone of ``estimator`` fitted on (x, l_a) for each action (full information)."""

    def __init__(self, estimator):
        self.estimator = estimator

    def fit(self, X, L):
        self.model_ = SklearnRewardModel([clone(self.estimator).fit(X, L[:, a]) for a in range(L.shape[1])],
                                         float(np.mean(L)))
        return self

    def predict(self, X):
        return self.model_.predict(X)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="all", help="all, or comma-separated names")
    args = parser.parse_args()
    options = tomllib.loads(PIPELINE.read_text())
    print(f"{'data set':<12} {'e(π)':>7} {'MSE ridge':>10} {'MSE HGB':>9} {'sd DR/IPS ridge':>16} "
          f"{'sd DR/IPS HGB':>14} {'s':>6}")
    wins = {"ridge": 0, "hgb": 0}
    names = dataset_names(args.datasets)
    for name in names:
        start = time.perf_counter()
        with threadpool_limits(limits=1):  # OpenMP in HistGradientBoosting: one thread on a shared machine
            ridge = prepare(name, options)
            hgb = prepare(name, options, PerActionRegressors(HistGradientBoostingRegressor(random_state=0)))
        row = {}
        for label, p in (("ridge", ridge), ("hgb", hgb)):
            loss_pi = np.einsum("ij,ij->i", p.target_probs, p.test_losses)
            hat_pi = np.einsum("ij,ij->i", p.target_probs, p.loss_hat)
            sd = p.sd_theory()
            row[label] = (float(np.mean((loss_pi - hat_pi) ** 2)), sd["DR"] / sd["IPS"])
            wins[label] += sd["DR"] <= sd["IPS"]
        assert ridge.true_error == hgb.true_error  # the same policy on the same test half
        print(f"{name:<12} {ridge.true_error:>7.3f} {row['ridge'][0]:>10.3f} {row['hgb'][0]:>9.3f} "
              f"{row['ridge'][1]:>16.2f} {row['hgb'][1]:>14.2f} {time.perf_counter() - start:>6.1f}")
    print(f"DR's exact sd ≤ IPS's on {wins['ridge']} of {len(names)} with ridge, {wins['hgb']} of {len(names)} "
          "with per-action HistGradientBoosting")


if __name__ == "__main__":
    main()
