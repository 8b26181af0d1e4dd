"""The true value of a policy on a generated log, from its ``expected_reward`` column.

A generated log (:mod:`dr_scale.synthetic.bandit`) stores E[r | x_i, a] for every row and
action, so the value of a target policy π on its contexts is known exactly:

    V(π) = (1/n) Σ_i Σ_a π(a | x_i) E[r | x_i, a],

with no reward noise. :func:`true_value` computes it as a map-reduce over the parts,
next to the estimates of :func:`dr_scale.ope.evaluation.evaluate_log` on the same rows.
"""

from __future__ import annotations

import dask
import numpy as np
import pyarrow.compute as pc

from dr_scale.logs.contract import LogDataError, combined
from dr_scale.logs.listing import list_parts, log_metadata
from dr_scale.logs.reading import read_partition
from dr_scale.outofcore.compute import compute
from dr_scale.policies import ArrayValues, Policy, parse_policy

COLUMN = "expected_reward"


def expected_rewards(part, k: int) -> np.ndarray:
    """E[r | x_i, a], (n, k), from the part's ``expected_reward`` list column."""
    column = combined(part.table.column(COLUMN))
    values = pc.list_flatten(column).to_numpy(zero_copy_only=False)
    if values.size != len(part) * k:
        raise LogDataError(part.source, COLUMN, f"expected {k} values per row")
    return values.reshape(len(part), k)


def _part_sums(fs, path: str, policy: Policy, d: int, k: int) -> np.ndarray:
    part = read_partition(fs, path, n_features=d, n_actions=k, extra_columns=(COLUMN, *policy.columns))
    expected = expected_rewards(part, k)
    total = policy.distribution(part, k).value(ArrayValues(expected)).sum()  # Σ_i Σ_a π(a | x_i) E[r | x_i, a]
    return np.array([total, float(len(part))])


def true_value(logs: str, policy: Policy | str, *, storage_options: dict | None = None, client=None) -> float:
    """V(π) on the contexts of the generated log at ``logs`` (module docstring)."""
    policy = parse_policy(policy, storage_options)
    fs, paths = list_parts(logs, storage_options)
    meta = log_metadata(fs, paths[0])
    d, k = meta.get("n_features"), meta.get("n_actions") or policy.n_actions
    sums = compute(*[dask.delayed(_part_sums)(fs, p, policy, d, k) for p in paths], client=client)
    total, n = np.sum(sums, axis=0)
    return float(total / n)
