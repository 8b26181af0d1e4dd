"""The item catalogue of an import spec's ``[actions]``: a small table of the actions' own features, read whole,
its keys joining the vocabulary, written beside the log as each item's hashed features in action order.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dr_scale.io.atomic import url_to_fs
from dr_scale.io.config import ConfigError
from dr_scale.logs.catalogue import CATALOGUE_FILE
from dr_scale.logs.contract import LogDataError
from dr_scale.logs.importing.convert import check_scalars, with_shape
from dr_scale.logs.importing.features import hashed_features, list_column
from dr_scale.logs.importing.fields import Rows, as_text, combined
from dr_scale.logs.importing.raw import Block, format_of, header, read_tables, sniff
from dr_scale.logs.spec import Columns, FeatureColumns, ImportSpec, Vocabulary
from dr_scale.logs.writing import write_parquet

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


#: An item catalogue read whole: (its keys as text, its table, its path).
Items = tuple[list[str], pa.Table, str]


def read_items(spec: ImportSpec, spec_source: str, storage_options: dict | None = None) -> Items:
    """(keys as text, the catalogue's table, its path) — a small table, read whole, as the raw table's blocks are
    read (its format and compression told as theirs, every column as its text, so that a key ``007`` stays
    ``007`` as the log's actions do). A relative path is beside the spec file; a missing, empty or repeated key is
    an error naming the line."""
    cat = spec.actions
    assert cat is not None  # read for a spec with [actions]
    path = cat.table
    if "://" not in path and not posixpath.isabs(path) and spec_source != "<spec>":
        path = posixpath.join(posixpath.dirname(spec_source), path)
    fs, p = url_to_fs(path, storage_options)
    if not fs.isfile(p):
        raise ConfigError(f"actions.table: no such file {path}", spec_source)
    fmt, compression = format_of(p, None, sniff(fs, p))
    block = Block(0, p, fmt, compression)
    names = header(fs, block, spec)
    for key in ["key", "categorical", "numeric", "tokens"]:
        for name in [getattr(cat, key)] if key == "key" else getattr(cat, key):
            if name not in names:
                raise ConfigError(f"actions.{key}: no column {name!r} in {path} (its columns: {', '.join(names[:12])})",
                                  spec_source)
    used = list(dict.fromkeys([cat.key, *cat.categorical, *cat.numeric, *cat.tokens]))
    tables = [t for t, _ in read_tables(fs, block, spec.model_copy(update={"skip_bad_rows": False}), names, used,
                                        Counter())]
    table = pa.concat_tables(tables) if tables else pa.table({c: pa.array([], pa.string()) for c in used})
    check_scalars(table, [cat.key, *cat.categorical, *cat.numeric], cat.tokens, path)
    keys = as_text(combined(table.column(cat.key)))
    first = 2 if fmt == "csv" else (1 if fmt == "json" else 0)
    where = "row" if fmt == "parquet" else "line"
    empty = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(keys), ""), True).to_numpy(zero_copy_only=False)
    if empty.any():
        i = int(np.flatnonzero(empty)[0])
        raise LogDataError(f"{path}, {where} {first + i}", cat.key, "missing or empty key")
    if not len(keys):
        raise LogDataError(path, None, "no items: the catalogue has no rows")
    values = keys.to_pylist()
    first_at: dict[str, int] = {}
    for i, v in enumerate(values):
        if first_at.setdefault(v, i) != i:
            raise LogDataError(f"{path}, {where} {first + i}", cat.key, f"duplicate key {v!r}")
    return values, table, path


def check_coverage(catalogue: Items, vocabulary: Vocabulary, logged: Iterable[int], key: str) -> tuple[int, int, list]:
    """(logged actions the catalogue describes, logged actions, examples of logged values it lacks); a catalogue
    that describes none of the logged actions is an error (its keys are not the log's action values)."""
    keys, _, path = catalogue
    index = {value: a for a, value in enumerate(vocabulary.values)}
    ids = {index[k] for k in keys}
    logged = sorted(set(logged))
    covered = [a for a in logged if a in ids]
    if not covered:
        shown = ", ".join(repr(k) for k in keys[:3]) + (", …" if len(keys) > 3 else "")
        logged_shown = ", ".join(repr(vocabulary.values[a]) for a in logged[:3]) + (", …" if len(logged) > 3 else "")
        raise LogDataError(path, key, f"none of its {len(keys)} keys ({shown}) is a logged action (the log's "
                                      f"actions: {logged_shown}); the key column must hold the values of the "
                                      "action column")
    missing = [vocabulary.values[a] for a in logged if a not in ids]
    return len(covered), len(logged), missing[:3]


def check_later_catalogue(catalogue: Items, vocabulary: Vocabulary, fs: AbstractFileSystem, folder: str,
                          source: str) -> None:
    """A later import's catalogue names actions of the log's vocabulary only (its ids are fixed), and every item of
    the log's catalogue (it replaces it whole)."""
    keys, _, path = catalogue
    known = set(vocabulary.values)
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise LogDataError(path, None, f"key {unknown[0]!r} is not in the vocabulary of the log at {source} "
                                       f"({len(unknown)} such key(s)); a later import's catalogue describes the "
                                       "log's actions: import it with the log's first file, or into a new log")
    saved = posixpath.join(folder, CATALOGUE_FILE)
    if fs.exists(saved):
        with fs.open(saved, "rb") as f:
            before = pq.read_table(f, columns=["key"]).column("key").to_pylist()
        lost = sorted(set(before) - set(keys))
        if lost:
            raise LogDataError(path, None, f"lacks {len(lost)} item(s) of the catalogue of the log at {source} (e.g. "
                                           f"{lost[0]!r}); the new catalogue replaces the log's whole: give every "
                                           "item")


def catalogue_table(catalogue: Items, spec: ImportSpec, vocabulary: Vocabulary, spec_source: str) -> pa.Table:
    """The catalogue as (action, key, features, values): each item's hashed features, in action order."""
    keys, table, path = catalogue
    cat = spec.actions
    assert cat is not None  # written for a spec with [actions]
    item_spec = ImportSpec(action=cat.key, reward=cat.key, propensity=cat.key, hash_bits=spec.hash_bits,
                           features=FeatureColumns(categorical=cat.categorical, numeric=cat.numeric, tokens=cat.tokens))
    cols = Columns(item_spec, table.column_names, spec_source, path, roles=False)
    rows = Rows(path, table.num_rows, 2, "line", False)
    r, i, v = hashed_features(table, cols, item_spec, rows, [])
    index = {value: a for a, value in enumerate(vocabulary.values)}
    action = np.array([index[k] for k in keys], dtype=np.int32)
    order = np.argsort(action, kind="stable")
    n = len(keys)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=offsets[1:])
    starts, ends = offsets[order], offsets[order + 1]
    take = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)]) if n else np.zeros(0, np.int64)
    new_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=new_offsets[1:])
    return pa.table({"action": pa.array(action[order]), "key": pa.array([keys[j] for j in order], pa.string()),
                     "features": list_column(new_offsets, i[take].astype(np.int32), pa.int32()),
                     "values": list_column(new_offsets, v[take].astype(np.float32), pa.float32())})


def write_catalogue(catalogue: Items, spec: ImportSpec, vocabulary: Vocabulary, spec_source: str,
                    fs: AbstractFileSystem, folder: str) -> int:
    """The catalogue written as :data:`~dr_scale.logs.spec.CATALOGUE_FILE` in ``folder``; its number of actions."""
    table = catalogue_table(catalogue, spec, vocabulary, spec_source)
    write_parquet(with_shape(table, 1 << spec.hash_bits, len(vocabulary)), posixpath.join(folder, CATALOGUE_FILE),
                  fs=fs)
    rows: int = table.num_rows
    return rows
