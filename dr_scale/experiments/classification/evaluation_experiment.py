"""Policy evaluation on classification data (paper, Sec. 5.1.2, Table 2 / Fig. class-eval).

Per data set:

1. split the rows at random into a training and a test half;
2. train a DLM policy π on the fully labelled training half (Appendix A);
3. its true error on the fully labelled test half, e(π) = mean_i 1{π(x_i) ≠ c_i}, is the ground truth;
4. fit the ridge loss model l̂(x, a) = w_a·x on the fully labelled training half;
5. repeat R times: convert the test half to bandit data (uniform logging, p = 1/k) and
   estimate e(π) with DM, IPS and DR (:mod:`dr_scale.ope.estimators`, with the loss in
   place of the reward — the estimators are linear in it).

Steps 1–4 happen once per data set (:func:`prepare`); a repetition is only a keyed
draw of the logged actions and three means (:func:`run_repetitions`), so a block of
repetitions is one cheap task. Summary per estimator: bias = mean(ê) − e(π), its
Monte-Carlo standard error sd(ê)/√R, and rmse = √mean((ê − e(π))²).

Given the test half (m rows), the spread of IPS and DR over conversions is known
exactly: under uniform logging the per-row terms have variances (k − 1) l_π(x_i)² and
(k − 1) (l_π(x_i) − l̂_π(x_i))², so

    sd(IPS) = √((k − 1)/m · mean_i l_π(x_i)²),
    sd(DR)  = √((k − 1)/m · mean_i (l_π(x_i) − l̂_π(x_i))²),

and DR beats IPS exactly when the loss model's squared error on the policy's actions
is below the policy's error rate (l ∈ {0, 1}). These are reported as ``sd_theory``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dr_scale.experiments.classification.bandit import log_actions, losses_from_labels
from dr_scale.experiments.classification.loss_models import PerActionRidge
from dr_scale.experiments.classification.protocol import cached_dataset, dataset_key, seed_for, split_rows
from dr_scale.learning.dlm import DirectLossMinimization
from dr_scale.ope.estimators import IPS, DirectMethod, DoublyRobust

ESTIMATORS = {"DM": DirectMethod(), "IPS": IPS(), "DR": DoublyRobust()}


@dataclass
class Prepared:
    """What every repetition of one data set shares."""

    name: str
    test_row_id: np.ndarray  # (m,)
    test_losses: np.ndarray  # (m, k): l_a = 1{a ≠ c}
    target_probs: np.ndarray  # (m, k): one-hot π(x)
    loss_hat: np.ndarray  # (m, k): l̂(x, a)
    true_error: float
    training_loss: float

    def sd_theory(self) -> dict[str, float]:
        """Exact standard deviations of the IPS and DR estimates over conversions (module docstring)."""
        m, k = self.test_losses.shape
        loss_pi = np.einsum("ij,ij->i", self.target_probs, self.test_losses)
        hat_pi = np.einsum("ij,ij->i", self.target_probs, self.loss_hat)
        return {"DM": 0.0, "IPS": float(np.sqrt((k - 1) / m * np.mean(loss_pi ** 2))),
                "DR": float(np.sqrt((k - 1) / m * np.mean((loss_pi - hat_pi) ** 2)))}


def prepare(name: str, options: dict, loss_model=None) -> Prepared:
    """Split, train the DLM policy and the loss model, and compute the ground truth.

    ``loss_model``: any ``fit(X, L)`` / ``predict(X) -> (n, k)`` model of the losses in place of
    the ridge (benchmarks/classification_flexible.py compares a flexible one)."""
    data = cached_dataset(name, options.get("data_dir"))
    seed, key = int(options["seed"]), dataset_key(name)
    train, test = split_rows(len(data), options.get("train_fraction", 0.5), seed, key)
    losses = losses_from_labels(data.y, data.n_classes)
    policy = DirectLossMinimization(**options.get("dlm", {}), random_state=seed_for(seed, "dlm", key))
    policy.fit(data.X[train], -losses[train])  # rewards r_a = −l_a
    action = policy.predict(data.X[test])
    target_probs = np.eye(data.n_classes)[action]
    test_losses = losses[test]
    if loss_model is None:
        loss_model = PerActionRidge(alpha=options.get("ridge_alpha", 1.0))
    loss_model.fit(data.X[train], losses[train])
    return Prepared(name, test, test_losses, target_probs, loss_model.predict(data.X[test]),
                    float(np.mean(test_losses[np.arange(len(test)), action])), -policy.training_reward_)


def run_repetitions(prepared: Prepared, repetitions, options: dict) -> list[dict]:
    """DM, IPS and DR estimates of e(π) for each repetition of the test half's conversion."""
    seed, key = int(options["seed"]), dataset_key(prepared.name)
    m, k = prepared.test_losses.shape
    records = []
    theory = prepared.sd_theory()
    for rep in repetitions:
        action, propensity = log_actions(prepared.test_row_id, k, seed, key, int(rep))
        loss = prepared.test_losses[np.arange(m), action]
        record = {"dataset": prepared.name, "repetition": int(rep), "true_error": prepared.true_error}
        for est_name, estimator in ESTIMATORS.items():
            estimate = estimator.estimate(reward=loss, action=action, propensity=propensity,
                                          target_probs=prepared.target_probs, reward_hat=prepared.loss_hat)
            record[est_name] = estimate.value
            record[f"{est_name}_stderr"] = estimate.stderr
            record[f"{est_name}_sd_theory"] = theory[est_name]
        records.append(record)
    return records


def summarize(records: list[dict]) -> pd.DataFrame:
    """Bias (with its Monte-Carlo standard error) and rmse per data set and estimator."""
    frame = pd.DataFrame(records)
    rows = []
    for name, group in frame.groupby("dataset", sort=False):
        truth = float(group["true_error"].iloc[0])
        for est_name in ESTIMATORS:
            error = group[est_name].to_numpy() - truth
            rows.append({
                "dataset": name, "estimator": est_name, "repetitions": len(error), "true_error": truth,
                "bias": float(error.mean()),
                "bias_se": float(error.std(ddof=1) / np.sqrt(len(error))) if len(error) > 1 else float("nan"),
                "rmse": float(np.sqrt(np.mean(error ** 2))),
                "sd": float(error.std(ddof=1)) if len(error) > 1 else float("nan"),
                "sd_theory": float(group[f"{est_name}_sd_theory"].iloc[0]),
            })
    return pd.DataFrame(rows)
