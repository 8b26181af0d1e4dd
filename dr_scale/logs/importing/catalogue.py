"""The item catalogue of an import spec's ``[actions]``: a small table of the actions' own features, read whole,
its keys joining the vocabulary, written beside the log as each item's hashed features in action order.
"""

from __future__ import annotations

import io
import posixpath
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dr_scale.io.atomic import url_to_fs
from dr_scale.io.config import ConfigError
from dr_scale.logs.catalogue import CATALOGUE_FILE
from dr_scale.logs.contract import LogDataError
from dr_scale.logs.importing.convert import with_shape
from dr_scale.logs.importing.features import hashed_features, list_column
from dr_scale.logs.importing.fields import Rows, as_text, combined
from dr_scale.logs.importing.raw import format_of
from dr_scale.logs.spec import Columns, FeatureColumns, ImportSpec, Vocabulary
from dr_scale.logs.writing import write_parquet

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


#: An item catalogue read whole: (its keys as text, its table, its path).
Items = tuple[list[str], pa.Table, str]


def read_items(spec: ImportSpec, spec_source: str, storage_options: dict | None = None) -> Items:
    """(keys as text, the catalogue's table, its path) — a small table, read whole. A relative path is beside the
    spec file."""
    cat = spec.actions
    assert cat is not None  # read for a spec with [actions]
    path = cat.table
    if "://" not in path and not posixpath.isabs(path) and spec_source != "<spec>":
        path = posixpath.join(posixpath.dirname(spec_source), path)
    fs, p = url_to_fs(path, storage_options)
    if not fs.exists(p):
        raise ConfigError(f"actions.table: no such file {path}", spec_source)
    fmt, compression = format_of(p, None)
    with fs.open(p, "rb", compression=compression) as f:
        data = f.read()
    if fmt == "parquet":
        table = pq.read_table(io.BytesIO(data))
    elif fmt == "json":
        import pyarrow.json as pj

        table = pj.read_json(io.BytesIO(data))
    else:
        import pyarrow.csv as pcsv

        table = pcsv.read_csv(io.BytesIO(data), parse_options=pcsv.ParseOptions(delimiter=spec.delimiter))
    for key in ["key", "categorical", "numeric", "tokens"]:
        names = [getattr(cat, key)] if key == "key" else getattr(cat, key)
        for name in names:
            if name not in table.column_names:
                raise ConfigError(f"actions.{key}: no column {name!r} in {path}", spec_source)
    keys = as_text(combined(table.column(cat.key)))
    if keys.null_count:
        raise LogDataError(path, cat.key, "missing key")
    if len(pc.unique(keys)) != len(keys):
        raise LogDataError(path, cat.key, "duplicate keys")
    return keys.to_pylist(), table, path


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
