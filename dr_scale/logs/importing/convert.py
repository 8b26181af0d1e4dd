"""A raw table's rows as the log contract's columns, by an import spec.

The action goes through the vocabulary (a value it lacks is an error naming it, or the reserved id ``<other>``
when the spec says ``unseen_actions = "reserved"``); reward, propensity and row id are parsed as numbers and
checked as the contract checks them (:func:`~dr_scale.logs.contract.propensity_fault`); a timestamp becomes its
day (``date``, ``YYYY-MM-DD`` in the spec's time zone); the features are hashed (:mod:`.features`).

Rankings: the ``slot`` column is the spec's slot column minus ``first_slot`` (an integer ≥ 0, else a bad row); the
``impression`` column is the hash of the spec's impression columns' text, joined by U+001F: the 64-bit
fingerprint of :func:`~dr_scale.logs.spec.hash_strings` (two MurmurHash3 seeds) with its top bit cleared, so
rows with equal values in those columns share an id in every block, file and import (two distinct
impressions collide with probability ~2⁻⁶³ a pair).

Row ids: the ``row_id`` column, or a stable id from the file and the row's position,
``(h(file) << 36) | position`` with h a 27-bit MurmurHash3 of the file's path (without the
URL's protocol) and position the row's index in the file (its data line, from 0): the same
file at the same path gets the same ids in every import.

Bad rows — a field that is not a number, a missing action, reward or propensity, a
propensity outside (0, 1], a timestamp that does not parse — are an error naming the file, the line and the
column; with ``skip_bad_rows = true`` they are dropped and counted by reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dr_scale.logs.contract import IMPRESSION, META_ACTIONS, META_FEATURES, SLOT, LogDataError, propensity_fault
from dr_scale.logs.importing.features import distinct, hashed_features, list_column
from dr_scale.logs.importing.fields import (
    Rows,
    as_text,
    column_integers,
    column_numbers,
    combined,
    converted,
    dates,
    implausible_reason,
    implausible_times,
    is_numeric,
    timestamps,
)
from dr_scale.logs.spec import Columns, ImportSpec, Vocabulary, hash_strings, murmurhash3_32

#: Bits of a stable row id that hold the row's position in its file; the file's id is above them.
POSITION_BITS = 36
FILE_BITS = 63 - POSITION_BITS


@dataclass
class Converted:
    """A converted table and what the summary needs of it."""

    table: pa.Table          # the contract's columns, plus ``date`` when the spec has a timestamp
    bad: Counter = field(default_factory=Counter)
    fingerprints: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    values: bool = False
    content: int = 0  # Σ of the rows' content hashes mod 2^64 (:func:`content_hash`)


def convert_table(table: pa.Table, cols: Columns, spec: ImportSpec, vocabulary: Vocabulary, *, source: str,
                  line0: int | None, kind: str = "line", file_id: int | None = None,
                  position0: int = 0, values: bool | None = None) -> Converted:
    """The rows of a raw ``table`` as the contract's columns (this module's docstring); bad rows raise or are dropped.

    ``line0``: the line (or row) number of the first row, for messages; ``file_id`` and
    ``position0``: the stable row id of row i is ``file_id << 36 | position0 + i`` when the spec names no
    ``row_id`` column (``file_id`` None: ``position0 + i``).
    """
    n = table.num_rows
    rows = Rows(source, n, line0, kind, spec.skip_bad_rows)
    check_scalars(table, cols.used, cols.tokens, source)
    # action, through the vocabulary
    action_text = as_text(combined(table.column(cols.action)))
    rows.flag(pc.is_null(action_text).to_numpy(zero_copy_only=False), cols.action, "missing action")
    action = pc.index_in(action_text, value_set=pa.array(vocabulary.values, pa.string()))
    unseen = (pc.is_null(action).to_numpy(zero_copy_only=False)
              & pc.is_valid(action_text).to_numpy(zero_copy_only=False))
    action = pc.fill_null(action, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    if unseen.any():
        if vocabulary.reserved:
            action[unseen] = len(vocabulary) - 1
        else:
            value = action_text[int(np.flatnonzero(unseen)[0])].as_py()
            rows.flag(unseen, cols.action, f"action value {value!r} is not in the log's vocabulary of "
                                           f"{len(vocabulary)} actions (import with unseen_actions = \"reserved\" "
                                           "to map new values to <other>, or into a new log)")
    reward = column_numbers(table, cols.reward, rows, required=True)
    rows.flag(~np.isfinite(reward) & ~rows.bad, cols.reward, "NaN or infinite reward")
    propensity = (column_numbers(table, cols.propensity, rows, required=True) if cols.propensity is not None
                  else None)  # not logged: the log has no propensity column
    fault = None if propensity is None else propensity_fault(np.where(np.isnan(propensity) & rows.bad, 1.0,
                                                                      propensity))
    if fault is not None:
        assert cols.propensity is not None  # a fault of the logged propensities
        mask, rule = fault
        rows.flag(mask, cols.propensity, f"propensity {rule}")
    if cols.row_id is not None:
        row_id = column_integers(table, cols.row_id, rows)
        order = np.argsort(row_id, kind="stable")
        again = np.zeros(n, dtype=bool)
        again[order[1:][row_id[order][1:] == row_id[order][:-1]]] = True  # each repeat after its first row
        if (again & ~rows.bad).any():
            rows.flag(again, cols.row_id, f"row id {int(row_id[np.flatnonzero(again & ~rows.bad)[0]])} repeats an "
                                          "earlier row's")
    else:
        row_id = np.arange(position0, position0 + n, dtype=np.int64)
        if file_id is not None:
            row_id |= np.int64(file_id) << np.int64(POSITION_BITS)
    slot = impression = None
    if cols.slot is not None:
        raw_slot = column_numbers(table, cols.slot, rows, required=True)
        rows.flag(np.isfinite(raw_slot) & (raw_slot != np.floor(raw_slot)), cols.slot, "not an integer")
        slot = np.nan_to_num(raw_slot, nan=spec.first_slot).astype(np.int64) - spec.first_slot
        rows.flag(slot < 0, cols.slot, f"a position below first_slot = {spec.first_slot} (the top position)")
    if cols.impression is not None:
        impression = impression_ids(table, cols.impression, rows)
    date = None
    if cols.timestamp is not None:
        stamps = combined(table.column(cols.timestamp))
        rows.flag(pc.is_null(stamps).to_numpy(zero_copy_only=False), cols.timestamp, "missing timestamp")
        ts = converted(stamps, lambda a: timestamps(a, spec.timezone, spec.timestamp_unit), rows, cols.timestamp,
                        "not a timestamp (ISO 8601, e.g. 2019-11-24 00:00:34+00:00, or a number since 1970)",
                        "2000-01-01T00:00:00+00:00" if not is_numeric(stamps.type) else 946_684_800)
        implausible = implausible_times(stamps, ts) & ~rows.bad
        if implausible.any():
            value = stamps[int(np.flatnonzero(implausible)[0])].as_py()
            rows.flag(implausible, cols.timestamp, implausible_reason(value, spec.timestamp_unit))
        date = dates(ts, spec.timezone)
    fps: list = []
    r, i, v = hashed_features(table, cols, spec, rows, fps)

    keep = ~rows.bad
    if rows.bad.any():
        kept_rows = np.flatnonzero(keep)
        new_pos = np.cumsum(keep) - 1
        entry = keep[r]
        r, i, v = new_pos[r[entry]], i[entry], v[entry]
        action, reward, row_id = action[keep], reward[keep], row_id[keep]
        propensity = None if propensity is None else propensity[keep]
        slot = None if slot is None else slot[keep]
        impression = None if impression is None else impression[keep]
        date = date.take(pa.array(kept_rows)) if date is not None else None
    m = int(keep.sum())
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=m), out=offsets[1:])
    columns = {"row_id": pa.array(row_id, pa.int64()),
               "features": list_column(offsets, i.astype(np.int32), pa.int32()),
               "action": pa.array(action.astype(np.int32)), "reward": pa.array(reward)}
    if propensity is not None:
        columns["propensity"] = pa.array(propensity)
    if slot is not None:
        columns[SLOT] = pa.array(slot.astype(np.int32))
    if impression is not None:
        columns[IMPRESSION] = pa.array(impression, pa.int64())
    has_values = (bool(cols.numeric or cols.tokens) or bool((v != 1).any())) if values is None else values
    if has_values:
        columns["values"] = list_column(offsets, v.astype(np.float32), pa.float32())
    if date is not None:
        columns["date"] = date
    fingerprints = distinct(np.concatenate(fps)) if fps else np.zeros(0, np.uint64)
    table = pa.table(columns)
    return Converted(table, rows.reasons, fingerprints, has_values, content_hash(table, offsets, i, v))



def impression_ids(table: pa.Table, columns: list[str], rows: Rows) -> np.ndarray:
    """The impression id of each row: the 63-bit hash of its ``columns``' text joined by U+001F (module docstring);
    a missing value is a bad row."""
    texts = [as_text(combined(table.column(c))) for c in columns]
    for c, text in zip(columns, texts, strict=True):
        rows.flag(pc.is_null(text).to_numpy(zero_copy_only=False), c, "missing value (an impression column)")
    joined = texts[0] if len(texts) == 1 else pc.binary_join_element_wise(*texts, "\x1f")
    _, fingerprint = hash_strings(pc.fill_null(joined, ""), 1)
    ids: np.ndarray = (fingerprint & np.uint64(0x7FFFFFFFFFFFFFFF)).astype(np.int64)
    return ids


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser of 64-bit words (Steele, Lea & Flood 2014): each output bit depends on every input
    bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: np.ndarray = x ^ (x >> np.uint64(31))
    return out


def content_hash(table: pa.Table, offsets: np.ndarray, index: np.ndarray, value: np.ndarray) -> int:
    """Σ over the rows of a hash of each row's content — action, reward, propensity, day and its (index, value)
    features, not its row id — mod 2^64: a multiset hash, so a file's is the sum of its blocks' and a copy of its
    rows (at another path, compressed, in another format or order) has the same."""
    n = table.num_rows
    if not n:
        return 0
    h = _mix(table.column("action").to_numpy().astype(np.uint64) + np.uint64(1))
    h = _mix(h ^ table.column("reward").to_numpy().astype(np.float64).view(np.uint64))
    if "propensity" in table.column_names:
        h = _mix(h ^ table.column("propensity").to_numpy().astype(np.float64).view(np.uint64))
    if "date" in table.column_names:
        days = pc.dictionary_encode(combined(table.column("date")))
        day_hash = murmurhash3_32(days.dictionary, 7).astype(np.int64).astype(np.uint64)
        h = _mix(h ^ day_hash[days.indices.to_numpy()])
    entry = _mix((index.astype(np.uint64) << np.uint64(32)) | value.astype(np.float32).view(np.uint32).astype(
        np.uint64))
    sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(entry, dtype=np.uint64)])  # wraps mod 2^64
    h = _mix(h ^ _mix(sums[offsets[1:]] - sums[offsets[:-1]]))
    return int(h.sum(dtype=np.uint64))


def check_scalars(table: pa.Table, columns: list[str], tokens: list[str], source: str) -> None:
    """Each of ``columns`` holds one value a row (a list only in a column of ``tokens``); else an error naming the
    column and the fix."""
    for column in columns:
        typ = table.schema.field(column).type
        listed = pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)
        nested = pa.types.is_struct(typ) or pa.types.is_map(typ) or pa.types.is_union(typ)
        if nested or (listed and column not in tokens):
            what, fix = (("a list", "a list of tokens goes under features.tokens") if listed else
                         ("an object (nested JSON)", "flatten it into columns, e.g. with pandas.json_normalize"))
            raise LogDataError(source, column, f"{what} in each row ({typ}), where the spec needs one value a row; "
                                               f"{fix}")


def file_id_of(name: str) -> int:
    """A file's 27-bit id: its path's MurmurHash3 (unsigned), masked."""
    return int(murmurhash3_32(pa.array([name]), 0).view(np.uint32)[0]) & ((1 << FILE_BITS) - 1)



def with_shape(table: pa.Table, d: int, k: int) -> pa.Table:
    """The table with the log's d (features) and k (actions) in its schema's metadata, as every part carries
    them."""
    return table.replace_schema_metadata({META_FEATURES: str(d).encode(), META_ACTIONS: str(k).encode()})

