"""Randomness as a function of (seed, purpose, keys…, row_id).

Every random draw over rows in dr-scale — subsample membership and logging actions in
the experiments, cross-fitting folds, held-out and validation rows, the principal
component's starting sample — is a pure function of the run's seed, a purpose string,
small integer keys (a fraction index, a repetition) and the row's stable ``row_id``.
(The synthetic visits set is drawn with numpy's generator, one stream per Parquet part:
:mod:`dr_scale.synthetic.visits`.) The draw does not
depend on which partition the row sits in or in what order rows are processed, so
results are bit-identical for any partitioning, worker count, retry or resume.

The generator is counter-based: the key words are folded together with the
SplitMix64 finaliser (Steele, Lea & Flood 2014), a bijective 64-bit mixer that
passes BigCrush when applied to a counter, and the top 53 bits give a float64
in [0, 1).

For many draws per row over consecutive row ids (a generator's rows), :func:`positions`
reads a stretch of the Philox-4×64 stream (Salmon et al. 2011) keyed by (seed, purpose):
the draw at position p (e.g. p = row_id · m + j for the j-th of m draws of a row) is
the same whatever stretch it is read in, at ~1/3 of the mixer's cost per draw.
"""

from __future__ import annotations

import hashlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, vectorised over uint64 (wrapping arithmetic)."""
    z = (z + _GOLDEN).astype(np.uint64, copy=False)  # a new array: the steps below run in place on it
    shifted = np.empty_like(z)
    for shift, multiplier in ((30, _M1), (27, _M2)):
        z ^= np.right_shift(z, np.uint64(shift), out=shifted)
        z *= multiplier
    z ^= np.right_shift(z, np.uint64(31), out=shifted)
    return z


def _purpose_word(purpose: str) -> np.uint64:
    word: np.uint64 = np.uint64(int.from_bytes(hashlib.blake2b(purpose.encode(), digest_size=8).digest(), "little"))
    return word


def key_words(seed: int, purpose: str, *keys: int) -> np.uint64:
    """Fold (seed, purpose, keys…) into one 64-bit stream key."""
    with np.errstate(over="ignore"):
        h = _mix(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
        h = _mix(h ^ _purpose_word(purpose))
        for k in keys:
            h = _mix(h ^ np.uint64(k & 0xFFFFFFFFFFFFFFFF))
    key: np.uint64 = np.uint64(h[0])
    return key


def uniform(row_id: np.ndarray, seed: int, purpose: str, *keys: int) -> np.ndarray:
    """U[0, 1) draws, one per row, determined by (seed, purpose, keys, row_id)."""
    return stream_uniform(row_id, key_words(seed, purpose, *keys))


def stream_uniform(row_id: np.ndarray, stream: np.uint64 | np.ndarray) -> np.ndarray:
    """``uniform`` for stream keys from :func:`key_words`: one key for all rows, or one per row.

    Per-row keys let a single vectorised call draw for rows of many (purpose, keys)
    streams at once, with the same values as one ``uniform`` call per stream.
    """
    ids = np.asarray(row_id).astype(np.uint64, copy=False)
    with np.errstate(over="ignore"):
        bits = _mix(_mix(ids ^ stream) + stream)
    bits >>= np.uint64(11)  # the top 53 bits, shifted and scaled in place (no temporary arrays)
    out = bits.astype(np.float64)
    out *= 1.0 / (1 << 53)
    return out


def positions(first: int, count: int, seed: int, purpose: str) -> np.ndarray:
    """U[0, 1) draws at positions ``first … first + count − 1`` of the (seed, purpose) Philox stream.

    Philox-4×64 yields four 64-bit words per counter value: position p is word p mod 4
    of counter value p // 4 (NumPy's Philox with ``counter`` set, ``Generator.random``'s
    top 53 bits), so any split of a range of positions gives the same draws.
    """
    generator = np.random.Generator(np.random.Philox(key=[int(key_words(seed, purpose)), 0],
                                                     counter=[first // 4, 0, 0, 0]))
    skip = first % 4
    return generator.random(skip + count)[skip:]


def bernoulli(probability: np.ndarray, row_id: np.ndarray, seed: int, purpose: str, *keys: int) -> np.ndarray:
    """Boolean draws with the given per-row probabilities, keyed by row id."""
    return uniform(row_id, seed, purpose, *keys) < probability


def categorical(probs: np.ndarray, row_id: np.ndarray, seed: int, purpose: str, *keys: int) -> np.ndarray:
    """One action per row from the rows of ``probs`` (n, k), keyed by row id."""
    u = uniform(row_id, seed, purpose, *keys)
    cdf = np.cumsum(probs, axis=1)
    cdf[:, -1] = np.inf  # guard against rounding: every row picks some action
    chosen: np.ndarray = (u[:, None] >= cdf).sum(axis=1)
    return chosen


def row_hash(*columns: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's values across equal-length columns (integers, or float64 by their bits)."""
    h = np.zeros(np.asarray(columns[0]).shape[0], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in columns:
            column = np.ascontiguousarray(column)
            words = column.view(np.uint64) if column.dtype == np.float64 else column.astype(np.uint64)
            h = _mix(h ^ words)
    return h
