"""Policy optimization from bandit feedback (paper, Sec. 5.1.3, Table 3 / Fig. class-opt).

One repetition of one data set (:func:`run_repetition`):

1. split the rows at random, 70% training / 30% test;
2. convert the training part to bandit data (uniform logging, p = 1/k);
3. impute every action's reward r_a = −l_a by IPS and by DR
   (:func:`dr_scale.learning.impute.impute_rewards`; DR's ridge model w_a is fitted on
   the training rows whose logged action is a);
4. train DLM and the Filter Tree on each imputation, and the Offset Tree on the
   bandit data itself (rewards 1 − l_a in [0, 1], its offset 1/2);
5. the classification error of each learned policy on the fully labelled test part.

The paper averages 30 repetitions (:func:`summarize`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dr_scale.experiments.classification.bandit import losses_from_labels, to_bandit
from dr_scale.experiments.classification.loss_models import PerActionRidge
from dr_scale.experiments.classification.protocol import cached_dataset, dataset_key, seed_for, split_rows
from dr_scale.learning.dlm import DirectLossMinimization
from dr_scale.learning.filter_tree import FilterTree
from dr_scale.learning.impute import impute_rewards
from dr_scale.learning.offset_tree import OffsetTree

METHODS = ("IPS (DLM)", "DR (DLM)", "IPS (FT)", "DR (FT)", "Offset Tree")


def run_repetition(name: str, repetition: int, options: dict) -> dict:
    """Test errors of the five learners for one random split and one bandit conversion."""
    data = cached_dataset(name, options.get("data_dir"))
    seed, key, rep = int(options["seed"]), dataset_key(name), int(repetition)
    train, test = split_rows(len(data), options.get("train_fraction", 0.7), seed, key, rep)
    k = data.n_classes
    X_train, X_test, y_test = data.X[train], data.X[test], data.y[test]
    bandit = to_bandit(X_train, losses_from_labels(data.y[train], k), seed, key, rep, row_id=train)
    loss_hat = PerActionRidge(alpha=options.get("ridge_alpha", 1.0)).fit_bandit(
        X_train, bandit.action, bandit.loss, k).predict(X_train)
    imputed = {method.upper(): impute_rewards(bandit.action, -bandit.loss, bandit.propensity, k, method, -loss_hat)
               for method in ("ips", "dr")}
    tree_params = options.get("tree")
    record = {"dataset": name, "repetition": rep}
    for imputation, rewards in imputed.items():
        dlm = DirectLossMinimization(**options.get("dlm", {}), random_state=seed_for(seed, "dlm", key, rep))
        record[f"{imputation} (DLM)"] = _error(dlm.fit(X_train, rewards), X_test, y_test)
        tree = FilterTree(tree_params=tree_params, random_state=seed_for(seed, "filter-tree", key, rep))
        record[f"{imputation} (FT)"] = _error(tree.fit(X_train, rewards), X_test, y_test)
    offset = OffsetTree(k, tree_params=tree_params, random_state=seed_for(seed, "offset-tree", key, rep))
    fitted = offset.fit(X_train, bandit.action, 1 - bandit.loss, bandit.propensity)
    record["Offset Tree"] = _error(fitted, X_test, y_test)
    return record


def _error(policy, X, y) -> float:
    return float(np.mean(policy.predict(X) != y))


def summarize(records: list[dict]) -> pd.DataFrame:
    """Mean test error (and its standard error over repetitions) per data set and method."""
    frame = pd.DataFrame(records)
    rows = []
    for name, group in frame.groupby("dataset", sort=False):
        for method in METHODS:
            errors = group[method].to_numpy()
            rows.append({
                "dataset": name, "method": method, "repetitions": len(errors), "error": float(errors.mean()),
                "error_se": float(errors.std(ddof=1) / np.sqrt(len(errors))) if len(errors) > 1 else float("nan"),
            })
    return pd.DataFrame(rows)
