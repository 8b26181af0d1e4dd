"""Checks of the estimators' array inputs, as Open Bandit Pipeline makes them.

Every path into the estimators (``RowInputs.from_arrays``, ``RowInputs.from_actions``)
goes through these. A failed check raises a :class:`~dr_scale.core.errors.UserError` (a
``ValueError``) that names the argument and gives an example index, e.g. ``propensity outside (0, 1]:
propensity[3] = 0.0``. The rules a log's columns obey are the log contract's (:mod:`dr_scale.logs.contract`),
stated there once.
"""

from __future__ import annotations

import numpy as np

from dr_scale.core.errors import UserError
from dr_scale.logs.contract import not_probabilities, propensity_fault, row_sums, row_sums_off


def _example(name: str, bad: np.ndarray, values: np.ndarray) -> str:
    """``name[i] = value`` for the first index where ``bad`` holds."""
    i = np.unravel_index(int(np.argmax(bad)), bad.shape)
    index = ", ".join(str(int(j)) for j in i)
    return f"{name}[{index}] = {values[i].item()!r}"


def _floats(name: str, values) -> np.ndarray:
    """``values`` as a float64 array; text or objects that are not numbers name the argument."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be an array of numbers, got {type(values).__name__} {values!r:.40}") from None


def vector(name: str, values, n: int | None = None, allow_empty: bool = False) -> np.ndarray:
    """A 1-d float64 array of finite numbers (of length ``n`` when given; non-empty unless ``allow_empty``:
    a partition may have no rows, the arrays of a whole evaluation may not)."""
    a = np.asarray(values)
    if a.ndim != 1:
        raise UserError(f"{name} must be a 1-d array, got shape {a.shape}")
    if a.size == 0 and not allow_empty and n is None:
        raise UserError(f"{name} is empty: the estimators need at least one row")
    if n is not None and a.size != n:
        raise UserError(f"{name} has {a.size} rows, reward has {n}: the arrays must have equal lengths")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == bool) or np.iscomplexobj(a):
        raise UserError(f"{name} must hold real numbers, got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    bad = ~np.isfinite(a)
    if bad.any():
        raise UserError(f"{name} must be finite: {_example(name, bad, a)}")
    return a


def actions(name: str, values, n: int, k: int | None) -> np.ndarray:
    """Integer action ids in [0, k): float ids are refused, never truncated."""
    a = np.asarray(values)
    if a.ndim != 1 or a.size != n:
        raise UserError(f"{name} must be a 1-d array of {n} rows (as reward), got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        example = f" (e.g. {name}[0] = {a[0].item()!r})" if a.size else ""
        raise UserError(f"{name} must hold integer action ids, got dtype {a.dtype}{example}")
    a = a.astype(np.int64, copy=False)
    bad = (a < 0) if k is None else ((a < 0) | (a >= k))
    if bad.any():
        where = "≥ 0" if k is None else f"in [0, {k})"
        raise UserError(f"{name} must be {where}: {_example(name, bad, a)}")
    return a


def propensities(values, n: int) -> np.ndarray:
    """The logging policy's probabilities of the logged actions: the log contract's rule
    (:func:`dr_scale.logs.contract.propensity_fault`: in (0, 1], at least ``MIN_PROPENSITY``)."""
    p = vector("propensity", values, n)
    fault = propensity_fault(p)
    if fault is not None:
        bad, rule = fault
        raise UserError(f"propensity {rule}: {_example('propensity', bad, p)}")
    return p


def probabilities(name: str, values, n: int) -> np.ndarray:
    """An (n, k) array of finite, non-negative rows summing to 1 (within
    :data:`dr_scale.logs.contract.ROW_SUM_TOLERANCE`)."""
    p = _floats(name, values)
    if p.ndim != 2 or p.shape[0] != n or p.shape[1] == 0:
        raise UserError(f"{name} must have shape (n, k) with n={n} and k ≥ 1, got {p.shape}")
    bad = not_probabilities(p)
    if bad.any():
        raise UserError(f"{name} must hold finite probabilities ≥ 0: {_example(name, bad, p)}")
    sums = row_sums(p)
    off = row_sums_off(sums)
    if off.any():
        i = int(np.argmax(off))
        raise UserError(f"{name} rows must sum to 1: row {i} sums to {sums[i].item()!r}")
    return p


def matrix(name: str, values, shape: tuple[int, int]) -> np.ndarray:
    """A float64 array of the given shape, every entry finite."""
    a = _floats(name, values)
    if a.shape != shape:
        raise UserError(f"{name} must have shape {shape}, got {a.shape}")
    bad = ~np.isfinite(a)
    if bad.any():
        raise UserError(f"{name} must be finite: {_example(name, bad, a)}")
    return a
