"""The paper's covariate-shift sampler and the experiment's keyed random draws (Sec. 5.2).

Propensities. With t_i = x_i·x̄ (x̄ the first principal component), m = min_i t_i and
m̄ = mean_i t_i, the paper sets

    p_i = min{ N(t_i; m + (m̄ − m)/3, (m̄ − m)/4), 1 },

N(·; c, s) the normal *density* with mean c and standard deviation s
(``kernel="density"``, the default, as the paper writes it). Because a density's
height is 1/(s√(2π)), the propensities then depend on the scale of t; the option
``kernel="gaussian"`` uses the unnormalized kernel exp(−(t − c)²/(2s²)) ∈ (0, 1]
instead, which is scale-free. Propensities are floored at ``MIN_PROPENSITY`` (far
tails of the density underflow to 0, which the logged-data contract forbids).

Keyed draws (``dr_scale.core.keyed_random``), all functions of (seed, purpose, keys, row_id):

* subsample membership: row i is in subsample (fraction f, repetition r) with
  probability f independently over rows and repetitions. For each (f, row) the
  repetitions it belongs to are generated as a Bernoulli process over r = 0, 1, …
  by geometric gaps, G_k = ⌊log(1 − U_k)/log(1 − f)⌋ + 1 with
  U_k = uniform(seed, "subsample", f_index, k; row_id): exactly i.i.d. Bernoulli(f)
  indicators, in about 1 + R f draws per row instead of R, and repetition r's
  subsample does not depend on the number of repetitions;
* logging: a_i = 1{uniform(seed, "logging", f_index, r; row_id) < p_i}, drawn afresh
  for every (fraction, repetition) — each cell of the experiment is an independent
  replication of the paper's "subsample, then sample each member with p_i".
"""

from __future__ import annotations

import functools

import numpy as np

from dr_scale.core import keyed_random
from dr_scale.core.errors import ParameterError, UserError

KERNELS = ("density", "gaussian")
MIN_PROPENSITY = 1e-300


def sampler_parameters(m: float, mbar: float) -> tuple[float, float]:
    """(centre, scale) = (m + (m̄ − m)/3, (m̄ − m)/4)."""
    return m + (mbar - m) / 3.0, (mbar - m) / 4.0


def propensity(t: np.ndarray, m: float, mbar: float, kernel: str = "density") -> np.ndarray:
    """p_i = min{N(t_i; m + (m̄−m)/3, (m̄−m)/4), 1} (or the unnormalized kernel)."""
    if kernel not in KERNELS:
        raise ParameterError(f"`kernel` must be one of {KERNELS}, got {kernel!r}")
    centre, scale = sampler_parameters(m, mbar)
    if not scale > 0:
        raise UserError(f"the projections have no spread (min {m}, mean {mbar}); cannot define the sampler")
    log_height = -np.log(scale * np.sqrt(2.0 * np.pi)) if kernel == "density" else 0.0
    k = np.subtract(t, centre, dtype=np.float64)  # then, in place: log k = log height − z²/2, z = (t − c)/s
    k *= 1.0 / scale
    k *= k
    k *= -0.5
    k += log_height
    np.exp(k, out=k)
    return np.clip(k, MIN_PROPENSITY, 1.0, out=k)


def memberships(row_id: np.ndarray, fraction: float, repetitions: int, seed: int, fraction_index: int):
    """(row positions, repetitions) of the (row, r) memberships with r < ``repetitions``, grouped by r.

    Geometric gaps of a Bernoulli(f) process over r, keyed by (seed, "subsample",
    fraction_index, k, row_id); see the module docstring. Draw k is made for the rows
    still below ``repetitions`` after k gaps only, one vectorised call per k. Within a
    repetition the memberships come in the order of (k, row): a deterministic order that
    one radix sort of r gives (ordering by row too would take a second sort).
    """
    if not 0 < fraction <= 1:
        raise ParameterError(f"`fraction` must lie in (0, 1], got {fraction}")
    alive = np.arange(row_id.shape[0], dtype=np.int32 if row_id.shape[0] < 2**31 else np.int64)
    ids = row_id
    position_type = np.int32 if repetitions < 2**30 else np.int64  # holds position + R + 1
    position = np.full(alive.shape[0], -1, dtype=position_type)
    log_q = np.log1p(-fraction) if fraction < 1 else -np.inf
    alive_per_k: list[np.ndarray] = []
    position_per_k: list[np.ndarray] = []
    k = 0
    while alive.size:
        step: int | np.ndarray = 1
        if fraction < 1:  # step = min(⌊log(1 − U)/log(1 − f)⌋, R) + 1, computed in place
            gap = keyed_random.uniform(ids, seed, "subsample", fraction_index, k)
            np.negative(gap, out=gap)
            np.log1p(gap, out=gap)
            np.divide(gap, log_q, out=gap)
            np.floor(gap, out=gap)
            np.minimum(gap, repetitions, out=gap)
            step = gap.astype(position_type)
            step += 1
        position = position + step  # a new array: the previous one was kept in ``reps``
        keep = position < repetitions
        alive, ids, position = alive[keep], ids[keep], position[keep]
        alive_per_k.append(alive)
        position_per_k.append(position)
        k += 1
    rows, reps = np.concatenate(alive_per_k), np.concatenate(position_per_k)
    order = np.argsort(reps.astype(np.min_scalar_type(repetitions)), kind="stable")  # a radix sort
    return rows[order], reps[order]


@functools.lru_cache(maxsize=64)
def _logging_streams(seed: int, fraction_index: int, repetitions: int) -> np.ndarray:
    return np.array([keyed_random.key_words(seed, "logging", fraction_index, r) for r in range(repetitions)])


def logging_actions(p: np.ndarray, row_id: np.ndarray, reps: np.ndarray, seed: int, fraction_index: int) -> np.ndarray:
    """a = 1{uniform(seed, "logging", fraction_index, r; row_id) < p} for each membership (one vectorised draw)."""
    if reps.size == 0:
        return np.zeros(0, dtype=bool)
    streams = _logging_streams(seed, fraction_index, int(reps.max()) + 1)
    return keyed_random.stream_uniform(row_id, streams[reps]) < p
