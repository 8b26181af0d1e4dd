"""The small example log bundled with the package (``dr_scale/synthetic/data/example``).

A week of a 3-action contextual bandit: 2,000 decisions a day, 50 sparse binary
features (~5 active), Bernoulli rewards with P(r=1 | x, a) = σ(x·β_a − 1), a
softmax logging policy with known propensities, and a candidate policy stored in
``target_action``. Written hive-partitioned by date, with a per-action ridge reward
model fitted on the logged rows. Regenerate with ``python -m dr_scale.synthetic.example``.
"""

from __future__ import annotations

import argparse
import datetime
import posixpath
from pathlib import Path

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.reward.models import LinearRewardModel

N_FEATURES, N_ACTIONS, ROWS_PER_DAY, DAYS = 50, 3, 2000, 7
START = datetime.date(2026, 11, 1)


def example_paths() -> tuple[str, str]:
    """(log folder, reward model file) of the bundled example."""
    root = Path(__file__).parent / "data" / "example"
    return str(root / "logs"), str(root / "reward_model.npz")


def simulate(n: int, seed: int = 0, first_row: int = 0):
    """Full-information simulation: (row_id, X, expected rewards (n, k), logging probs (n, k))."""
    row_id = np.arange(first_row, first_row + n, dtype=np.int64)
    rng = np.random.default_rng(seed)
    beta = rng.normal(0, 1.0, size=(N_FEATURES, N_ACTIONS))
    scores = rng.normal(0, 0.4, size=(N_FEATURES, N_ACTIONS))
    popularity = np.linspace(0.2, 0.02, N_FEATURES)
    active = np.column_stack([keyed_random.uniform(row_id, seed, "example-feature", j) < popularity[j]
                              for j in range(N_FEATURES)])
    X = sp.csr_matrix(active.astype(np.float64))
    expected = 1 / (1 + np.exp(-(X @ beta - 1.0)))
    logits = X @ scores
    logging = np.exp(logits - logits.max(axis=1, keepdims=True))
    logging /= logging.sum(axis=1, keepdims=True)
    return row_id, X, expected, logging


def candidate_policy(X, row_id=None) -> np.ndarray:
    """The candidate policy stored in ``target_action``: a fixed linear rule (usable as ``callable:``)."""
    w = np.random.default_rng(1).normal(size=(N_FEATURES, N_ACTIONS))
    return np.asarray(X @ w).argmax(axis=1)


def make_example(seed: int = 0) -> tuple[pa.Table, LinearRewardModel, float]:
    """The example log (with a ``date`` column), its reward model and the true target value."""
    from sklearn.linear_model import Ridge  # imported when the example is made, not when its paths are read

    n = ROWS_PER_DAY * DAYS
    row_id, X, expected, logging = simulate(n, seed)
    action = keyed_random.categorical(logging, row_id, seed, "example-action")
    reward = (keyed_random.uniform(row_id, seed, "example-reward") < expected[np.arange(n), action]).astype(np.float64)
    target = candidate_policy(X)
    model = LinearRewardModel(np.zeros((N_FEATURES, N_ACTIONS)), np.zeros(N_ACTIONS))
    for a in range(N_ACTIONS):
        fit = Ridge(alpha=1.0).fit(X[action == a], reward[action == a])
        model.coef[:, a], model.intercept[a] = fit.coef_, fit.intercept_
    dates = np.repeat([str(START + datetime.timedelta(days=i)) for i in range(DAYS)], ROWS_PER_DAY)
    table = pa.table({
        "row_id": row_id,
        "features": csr_to_features(X),
        "action": action.astype(np.int32),
        "reward": reward,
        "propensity": logging[np.arange(n), action],
        "target_action": target.astype(np.int32),
        "date": dates,
    })
    return table, model, float(expected[np.arange(n), target].mean())


def write_example(out: str, seed: int = 0, storage_options: dict | None = None) -> float:
    """Write the example under ``out`` (logs/date=…/part-00000.parquet, reward_model.npz), any fsspec URL."""
    table, model, truth = make_example(seed)
    dates = table.column("date").to_numpy(zero_copy_only=False)
    for day in np.unique(dates):
        part = table.filter(pa.array(dates == day)).drop_columns(["date"])
        write_log(part, posixpath.join(out, "logs", f"date={day}"), n_features=N_FEATURES, n_actions=N_ACTIONS,
                  storage_options=storage_options)
    model.save(posixpath.join(out, "reward_model.npz"), storage_options)
    return truth


def write_example_parts(out: str, n_parts: int, seed: int = 0) -> float:
    """Write the example as one undated log of ``n_parts`` parts (``out/logs``) and ``out/model.npz``."""
    table, model, truth = make_example(seed)
    write_log(table.drop_columns(["date"]), posixpath.join(out, "logs"), n_parts=n_parts,
              n_features=N_FEATURES, n_actions=N_ACTIONS)
    model.save(posixpath.join(out, "model.npz"))
    return truth


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="dr_scale/synthetic/data/example")
    truth = write_example(parser.parse_args().out)
    print(f"true value of the candidate policy: {truth:.6f}")
