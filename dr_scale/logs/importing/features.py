"""A table's features hashed as :mod:`dr_scale.logs.spec` says — (row, index, value) triples, CSR as Arrow list
columns — and the fingerprints of the distinct keys hashed, from which the summary counts the collisions.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dr_scale.logs.importing.fields import Rows, as_text, column_numbers, combined
from dr_scale.logs.spec import Columns, ImportSpec, hash_keys, hash_strings


def _hashed(keys: pa.Array, prefix: str, bits: int, fps: list) -> np.ndarray:
    """Indices of the distinct ``keys`` (text) under ``prefix=``; their fingerprints appended to ``fps``."""
    idx, fp = hash_strings(pc.binary_join_element_wise(f"{prefix}=", keys, ""), bits)
    fps.append(fp)
    return idx


def hashed_features(table: pa.Table, cols: Columns, spec: ImportSpec, rows: Rows,
                    fps: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, index, value) triples of every hashed feature (module docstring of :mod:`dr_scale.logs.spec`), by row
    and index within a row, the values of one index in a row summed.

    Categorical and numeric columns give at most one feature per row each: they fill an n × m matrix of
    keys — the index shifted left, the column number in the low bits; absent ones a key above every index,
    so they sort last — sorted within each row, no sort of the whole block (int32 keys when the index and
    the column number fit in 31 bits, as with ``hash_bits`` ≤ 25 and up to 32 such columns); token columns
    add their (row, index) pairs and a sort by (row, index).
    """
    n = table.num_rows
    dense = cols.categorical + cols.numeric
    m = len(dense)
    shift = max(1, (m - 1).bit_length())
    dtype = np.int32 if spec.hash_bits + shift <= 30 else np.int64
    absent = dtype(1 << spec.hash_bits) << dtype(shift)  # above every index's key
    # one row per column (contiguous), then transposed: each row's entries together
    key = np.full((m, n), absent, dtype=dtype)
    value = np.empty((m, n))
    value[: len(cols.categorical)] = 1.0
    for j, c in enumerate(cols.categorical):
        encoded = pc.dictionary_encode(as_text(combined(table.column(c))))
        if not len(encoded.dictionary) or encoded.indices.null_count == len(encoded.indices):
            continue
        idx = _hashed(encoded.dictionary, c, spec.hash_bits, fps).astype(dtype) << dtype(shift) | dtype(j)
        if encoded.indices.null_count:
            present = pc.is_valid(encoded.indices).to_numpy(zero_copy_only=False)
            codes = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)
            np.copyto(key[j], idx[codes], where=present)
        else:
            np.take(idx, encoded.indices.to_numpy(), out=key[j])
    if cols.numeric:
        name_idx, fp = hash_keys(list(cols.numeric), spec.hash_bits)
        fps.append(fp)
        for j, c in enumerate(cols.numeric, start=len(cols.categorical)):
            x = column_numbers(table, c, rows, required=False)
            rows.flag(np.isinf(x), c, "infinite value")
            key[j, np.isfinite(x) & (x != 0)] = dtype(name_idx[j - len(cols.categorical)]) << dtype(shift) | dtype(j)
            value[j] = x
    key = key.T.copy()  # (n, m), C order
    key.sort(axis=1)
    flat = key.ravel()
    at = np.flatnonzero(flat < absent)  # row * m + slot of each present entry, in (row, index) order
    present = flat[at]
    r = at // m
    i = present >> dtype(shift)
    column = (present & dtype((1 << shift) - 1)).astype(np.int64)
    v = value.ravel()[column * n + r]
    if not cols.tokens:
        return _summed_repeats(r, i, v)
    parts_r, parts_i, parts_v = [r], [i], [v]
    for c in cols.tokens:
        array = combined(table.column(c))
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            array = pc.utf8_split_whitespace(as_text(array))
        flat = pc.list_flatten(array)
        parent = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        encoded = pc.dictionary_encode(as_text(flat))
        keep = pc.is_valid(encoded.indices).to_numpy(zero_copy_only=False)
        if not len(encoded.dictionary) or not keep.any():
            continue
        idx = _hashed(encoded.dictionary, c, spec.hash_bits, fps)
        codes = encoded.indices.to_numpy(zero_copy_only=False)[keep].astype(np.int64)
        parts_r.append(parent[keep].astype(np.int64))
        parts_i.append(idx[codes].astype(np.int64))
        parts_v.append(np.ones(codes.size))
    r, i, v = np.concatenate(parts_r), np.concatenate(parts_i), np.concatenate(parts_v)
    key = r << 31 | i
    order = np.argsort(key, kind="stable")
    return _summed_repeats(r[order], i[order], v[order])


def _summed_repeats(r: np.ndarray, i: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, index, value) sorted by (row, index), each index of a row once, its values summed.

    Repeats (two features of a row hashed to one index) are rare: the rows are compared only where two
    neighbouring indices are equal, and only the repeated entries are removed.
    """
    repeat = np.flatnonzero(i[1:] == i[:-1]) + 1
    repeat = repeat[r[repeat] == r[repeat - 1]]
    if repeat.size:
        first = np.ones(i.size, dtype=bool)
        first[repeat] = False
        starts = np.flatnonzero(first)
        v = v.copy()
        np.add.at(v, starts[np.searchsorted(starts, repeat, side="right") - 1], v[repeat])
        r, i, v = r[first], i[first], v[first]
    return r, i.astype(np.int32, copy=False), v


def list_column(offsets: np.ndarray, flat: np.ndarray, typ: pa.DataType) -> pa.Array:
    """An Arrow list column: row i holds ``flat[offsets[i]:offsets[i + 1]]`` as ``typ``."""
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat, type=typ))



def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` by a sort (numpy's hash-based ``unique`` of 64-bit integers is ~100 times slower)."""
    out = np.sort(values)
    return out[np.concatenate([[True], out[1:] != out[:-1]])] if out.size else out


def union(arrays: list[np.ndarray]) -> np.ndarray:
    """The sorted distinct values of sorted arrays of distinct values (``np.union1d`` of them all): a merge of
    the sorted runs (a stable sort), then each value once."""
    out = np.concatenate(arrays)
    if len(arrays) > 1 and out.size:
        out.sort(kind="stable")
        out = out[np.concatenate([[True], out[1:] != out[:-1]])]
    return out



def collisions(fingerprints: np.ndarray, bits: int) -> tuple[int, int]:
    """(distinct indices, collisions) of the distinct keys' fingerprints (the high word is the index's hash)."""
    h = (fingerprints >> np.uint64(32)).astype(np.uint32).view(np.int32).astype(np.int64)
    mask = (1 << bits) - 1
    idx = np.where(h == -(1 << 31), (2147483647 - mask) & mask, np.abs(h) & mask)
    used = distinct(idx).size
    return used, fingerprints.size - used

