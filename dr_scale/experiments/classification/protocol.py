"""Pieces shared by the two experiments: keyed splits and seeds, options, cached data.

A run's randomness is a function of (seed, purpose, data set, repetition, row): the
train/test split orders the rows by a keyed uniform draw, and learners get integer
seeds folded from the same keys, so any task gives the same numbers wherever and
whenever it runs (which is what makes runs resumable task by task).
"""

from __future__ import annotations

import functools
import zlib

import numpy as np

from dr_scale.core import keyed_random
from dr_scale.core.errors import UserError
from dr_scale.experiments.classification.datasets import NAMES, load_dataset


def dataset_key(name: str) -> int:
    """A stable integer key for a data set name (CRC-32)."""
    return zlib.crc32(name.encode())


def seed_for(seed: int, purpose: str, *keys: int) -> int:
    """An integer seed (for scikit-learn style ``random_state``) keyed like every other draw."""
    return int(keyed_random.key_words(seed, purpose, *keys) % np.uint64(2**31))


def split_rows(n: int, train_fraction: float, seed: int, *keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Random train/test split: rows ordered by a keyed uniform draw; the first ⌊f·n⌋ train."""
    order = np.argsort(keyed_random.uniform(np.arange(n), seed, "classification-split", *keys), kind="stable")
    cut = int(np.floor(train_fraction * n))
    return np.sort(order[:cut]), np.sort(order[cut:])


@functools.lru_cache(maxsize=16)
def cached_dataset(name: str, data_dir: str | None):
    """Each worker loads (and verifies) a data set once."""
    return load_dataset(name, data_dir)


def dataset_names(option) -> list[str]:
    """``"all"`` or a list / comma-separated string of names, validated."""
    if option in (None, "all"):
        return list(NAMES)
    names = [s.strip() for s in option.split(",")] if isinstance(option, str) else list(option)
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise UserError(f"unknown data set(s) {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    return names
