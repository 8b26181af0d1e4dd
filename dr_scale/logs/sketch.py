"""A log's identity by its rows: a bottom-k sketch of its rows' content hashes, mergeable in any order.

A row's **content hash** h(row) is the 64-bit :func:`~dr_scale.core.keyed_random.row_hash` of its ``row_id``,
logged ``action``, ``reward`` and feature ids (the feature ids folded into one word per row, Σ_j mix(id_j) mod 2⁶⁴,
so their order does not matter). It depends on the rows alone: the same rows copied (``cp -r``), moved, re-imported
into another folder or written again from a DataFrame hash alike; two logs that merely reuse row ids 0 … n−1 do not.

The **sketch** of a set of rows T (Broder 1997, "On the resemblance and containment of documents"; the bottom-k
form of Cohen & Kaplan 2007) keeps the m = :data:`SKETCH_SIZE` smallest distinct hashes, S(T), and the row
count. Two sketches merge by keeping the m smallest of their union, so the parts of a log can be sketched in any
order and grouping. With τ = max S(T) (every hash, τ = 2⁶⁴ − 1, when T has fewer than m distinct rows), the
rows of T with h ≤ τ are exactly S(T): for another set E, each row of E with h ≤ τ is checked exactly
(h ∈ S(T)), and since h is a hash, those rows are a uniform sample of E. The **in-sample fraction**

    |E ∩ T| / |E|  ≈  #{e ∈ E : h(e) ≤ τ, h(e) ∈ S(T)} / #{e ∈ E : h(e) ≤ τ}

is exact when T has fewer than m distinct rows, and otherwise rests on about m·|E|/|T| checked rows of E
(:func:`overlap_counts` sums both counts per part, :func:`in_sample_fraction` divides them).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dr_scale.core.keyed_random import row_hash

#: m, the hashes a sketch keeps: 4,096 × 8 bytes (44 KB of base64 in a policy file's metadata).
SKETCH_SIZE = 4096
ALL = np.uint64(2**64 - 1)


def content_hashes(part: Any) -> np.ndarray:
    """h(row) of each row of a read part (:class:`~dr_scale.logs.contract.Partition`: ``row_id``, ``action``,
    ``reward``, ``X``): row_hash(row_id, action, reward, Σ_j mix(feature id_j) mod 2⁶⁴)."""
    X = part.X
    with np.errstate(over="ignore"):
        if X is None or X.indices.size == 0:
            features = np.zeros(len(part.row_id), np.uint64)
        else:
            per_id = np.concatenate([np.zeros(1, np.uint64), np.cumsum(row_hash(X.indices.astype(np.int64)),
                                                                       dtype=np.uint64)])
            features = per_id[X.indptr[1:]] - per_id[X.indptr[:-1]]
        return row_hash(np.asarray(part.row_id, np.int64), np.asarray(part.action, np.int64),
                        np.asarray(part.reward, np.float64), features)


@dataclass
class RowSketch:
    """The bottom-k sketch of a set of rows (module docstring): ``rows`` counted, ``hashes`` the
    :data:`SKETCH_SIZE` smallest distinct content hashes, sorted. Merge with ``+``.

    Examples
    --------
    >>> a, b = RowSketch.of_hashes(np.arange(5, dtype=np.uint64)), RowSketch.of_hashes(np.arange(3, 9, dtype=np.uint64))
    >>> (a + b).rows, (a + b).hashes.tolist() == list(range(9)), RowSketch.from_dict((a + b).to_dict()) == a + b
    (11, True, True)
    """

    rows: int = 0
    hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))

    @classmethod
    def of_hashes(cls, hashes: np.ndarray) -> RowSketch:
        """The sketch of rows with these content hashes."""
        return cls(int(hashes.size), np.unique(hashes)[:SKETCH_SIZE])

    @classmethod
    def of(cls, part: Any) -> RowSketch:
        """The sketch of a read part's rows (:func:`content_hashes`)."""
        return cls.of_hashes(content_hashes(part))

    def __add__(self, other: RowSketch) -> RowSketch:
        return RowSketch(self.rows + other.rows, np.union1d(self.hashes, other.hashes)[:SKETCH_SIZE])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowSketch) and self.rows == other.rows and np.array_equal(self.hashes, other.hashes)

    @property
    def threshold(self) -> np.uint64:
        """τ: the largest hash kept when the sketch is full, else 2⁶⁴ − 1 (every row's hash is kept)."""
        return np.uint64(self.hashes[-1]) if self.hashes.size >= SKETCH_SIZE else ALL

    def to_dict(self) -> dict:
        """``{"rows", "size", "hashes"}``: the hashes as base64 of little-endian uint64 (JSON metadata)."""
        return {"rows": self.rows, "size": SKETCH_SIZE,
                "hashes": base64.b64encode(self.hashes.astype("<u8").tobytes()).decode()}

    @classmethod
    def from_dict(cls, record: Any) -> RowSketch | None:
        """The sketch of :meth:`to_dict`; None for a record that is not one (an older or edited file)."""
        try:
            hashes = np.frombuffer(base64.b64decode(record["hashes"], validate=True), "<u8").astype(np.uint64)
            rows = int(record["rows"])
        except (KeyError, TypeError, ValueError):
            return None
        if rows < hashes.size or np.any(np.diff(hashes) <= 0):
            return None
        return cls(rows, hashes)


def overlap_counts(part: Any, sketches: list[RowSketch]) -> np.ndarray:
    """For each sketch S(T): (rows of ``part``, rows with h ≤ τ, those of them in S(T)) — summed over parts,
    :func:`in_sample_fraction`'s counts."""
    h = content_hashes(part)
    out = np.zeros((len(sketches), 3), np.int64)
    for i, sketch in enumerate(sketches):
        checked = h[h <= sketch.threshold]
        out[i] = h.size, checked.size, int(np.isin(checked, sketch.hashes).sum())
    return out


def in_sample_fraction(counts: np.ndarray) -> float | None:
    """|E ∩ T| / |E| from one row of summed :func:`overlap_counts`; None when no row of E was checked (E has no
    rows, or is too small beside T for its sample: about m·|E|/|T| < 1)."""
    _, checked, matched = (int(c) for c in counts)
    return matched / checked if checked else None
