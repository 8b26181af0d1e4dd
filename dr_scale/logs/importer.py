"""Raw tables in: CSV, JSON lines or Parquet (or a DataFrame) → the log contract, by an import spec.

:func:`import_log` is ``dr-scale import RAW --spec SPEC.toml --out LOGS``. The raw data is
one file, a folder or a glob at any fsspec URL, compressed or not (by the file name's
extension: ``.gz``, ``.bz2``, ``.xz``, ``.zst``…). It is read out of core as blocks — byte
ranges of an uncompressed CSV / JSON-lines file cut at line ends (as Dask's ``read_csv``
cuts them), one streamed file for a compressed one, the row groups of a Parquet file —
one Dask task per block, never the whole table in memory. Each task parses its block with
pyarrow, turns it into the contract's columns (:func:`convert_table`: the action through
the vocabulary, features hashed as :mod:`dr_scale.logs.spec` says) and writes one Parquet
part per day into a staging folder beside the output.

Two passes. The first reads only the action column (and counts each block's lines): it
builds the vocabulary — the action values in a stable order, and the catalogue's keys —
and gives each block the line number of its first row. The second converts and writes.
A log already at ``--out`` (imported before, with its ``_dr_scale_spec.json``) lends its
vocabulary instead, so a later day gets the same ids; a value it lacks is an error
naming it, or the reserved id ``<other>`` when the spec says ``unseen_actions = "reserved"``.

Row ids: the ``row_id`` column, or a stable id from the file and the row's position,
``(h(file) << 36) | position`` with h a 27-bit MurmurHash3 of the file's path (without the
URL's protocol) and position the row's index in the file (its data line, from 0): the same
file at the same path gets the same ids in every import. The spec file stored with the log
keeps each file's h; two files with one h — in one import, or a file and one imported
before — are an error asking for a ``row_id`` column, and a file imported before is refused.

Bad rows — a field that is not a number, a missing action, reward or propensity, a
propensity outside (0, 1], a timestamp that does not parse, a malformed CSV line — are an
error naming the file, the line and the column; with ``skip_bad_rows = true`` they are
skipped and counted by reason in the summary. Nothing is written until every block is
converted: the parts are written to the staging folder, which becomes the output in one
rename (on an object store, a copy of each file) after the spec file is written in it;
an error or a kill leaves the output untouched (a killed import leaves the hidden staging
folder ``.NAME.import-HEX`` beside it, which readers of the output never see).
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.io.strict_json import dumps
from dr_scale.logs.contract import META_ACTIONS, META_FEATURES, LogDataError, Partition, propensity_fault
from dr_scale.logs.listing import SPEC_FILE
from dr_scale.logs.reading import partition_from_table
from dr_scale.logs.spec import (
    CATALOGUE_FILE,
    Columns,
    ImportSpec,
    Vocabulary,
    check_same_hashing,
    hash_keys,
    hash_strings,
    load_saved,
    read_spec,
    saved_spec,
)
from dr_scale.logs.writing import write_parquet

#: Bytes per block of an uncompressed CSV / JSON-lines file.
DEFAULT_BLOCKSIZE = 16 << 20
#: Rows per batch when a compressed file or a Parquet file is streamed.
BATCH_ROWS = 262_144
FORMATS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json",
           ".parquet": "parquet", ".pq": "parquet"}
POSITION_BITS = 36
FILE_BITS = 63 - POSITION_BITS


# -- listing the raw files ----------------------------------------------------------------------------
def _format_of(path: str, given: str | None) -> tuple[str, str | None]:
    """(format, compression) of a raw file, from the spec's ``format`` or the file name."""
    from fsspec.utils import infer_compression

    compression = infer_compression(path)
    stem = path[: path.rfind(".")] if compression else path
    ext = posixpath.splitext(stem)[1].lower()
    fmt = given or FORMATS.get(ext)
    if fmt is None:
        raise UserError(f"{path}: cannot tell the format from the name; set format = \"csv\", \"json\" or "
                        "\"parquet\" in the spec")
    if fmt == "parquet" and compression:
        raise UserError(f"{path}: a Parquet file is compressed inside; give it without the {compression} layer")
    return fmt, compression


def list_raw(url: str, storage_options: dict | None = None) -> tuple[object, list[str]]:
    """The filesystem and the sorted raw files under ``url`` (file, folder or glob; names starting with ``.`` or
    ``_`` skipped)."""
    fs, path = url_to_fs(url, storage_options)
    if any(ch in path for ch in "*?["):
        files = sorted(p for match in fs.glob(path) for p in (fs.find(match) if fs.isdir(match) else [match]))
    elif fs.isdir(path):
        files = sorted(fs.find(path))
    elif fs.exists(path):
        files = [path]
    else:
        raise UserError(f"{url}: no such file or folder")
    files = [p for p in files if not posixpath.basename(p).startswith((".", "_"))]
    if not files:
        raise UserError(f"{url}: no files found")
    return fs, files


@dataclass(frozen=True)
class Block:
    """One task's share of the raw data: a byte range of a file, or a whole file (streamed)."""

    index: int
    path: str
    fmt: str
    compression: str | None
    start: int = 0
    length: int | None = None  # None: the whole file, streamed

    @property
    def first(self) -> bool:
        return self.start == 0


def plan_blocks(fs, files: list[str], spec: ImportSpec, blocksize: int) -> list[Block]:
    blocks = []
    for path in files:
        fmt, compression = _format_of(path, spec.format)
        if fmt == "parquet" or compression:
            blocks.append(Block(len(blocks), path, fmt, compression))
            continue
        size = fs.size(path)
        for start in range(0, max(size, 1), blocksize):
            blocks.append(Block(len(blocks), path, fmt, None, start, blocksize))
    return blocks


# -- reading a block ------------------------------------------------------------------------------
class _Invalid:
    """pyarrow's ``invalid_row_handler``: skip (counted) or fail (remembering the line's text)."""

    def __init__(self, skip: bool):
        self.skip, self.count, self.text = skip, 0, None

    def __call__(self, row) -> str:
        if self.skip:
            self.count += 1
            return "skip"
        self.text = (row.text, row.expected_columns, row.actual_columns)
        return "error"


def _csv_options(spec: ImportSpec, names: list[str], used: list[str], handler, numeric=()):
    """pyarrow's CSV options: the ``used`` columns as text, those of ``numeric`` parsed as float64."""
    import pyarrow.csv as pcsv

    types = {c: pa.float64() if c in numeric else pa.string() for c in used}
    return dict(parse_options=pcsv.ParseOptions(delimiter=spec.delimiter, invalid_row_handler=handler),
                convert_options=pcsv.ConvertOptions(include_columns=used, strings_can_be_null=True,
                                                    column_types=types))


def header(fs, block: Block, spec: ImportSpec) -> list[str]:
    """The column names of a raw file (the CSV header line, the JSON keys of the first lines, the Parquet schema)."""
    with fs.open(block.path, "rb", compression=block.compression) as f:
        if block.fmt == "parquet":
            return pq.ParquetFile(f).schema_arrow.names
        if block.fmt == "json":
            import pyarrow.json as pj

            head = f.read(1 << 20)
            head = head[: head.rfind(b"\n") + 1] or head
            try:
                return pj.read_json(io.BytesIO(head)).column_names
            except pa.ArrowInvalid as exc:
                raise LogDataError(block.path, None, f"not JSON lines ({exc})") from None
        import pyarrow.csv as pcsv

        line = f.readline()
    try:
        return pcsv.read_csv(io.BytesIO(line), parse_options=pcsv.ParseOptions(delimiter=spec.delimiter)).column_names
    except pa.ArrowInvalid as exc:
        raise LogDataError(block.path, None, f"no CSV header line ({exc})") from None


def _block_bytes(fs, block: Block) -> bytes:
    from fsspec.utils import read_block

    with fs.open(block.path, "rb") as f:
        return read_block(f, block.start, block.length, delimiter=b"\n")


def _line_count(data: bytes) -> int:
    newlines = int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")))  # bytes.count: slower
    return newlines + (1 if data and not data.endswith(b"\n") else 0)


def _first_line(fs, block: Block) -> int:
    """The physical line number (from 1) of a byte block's first line: one more than the lines before it."""
    if block.start == 0:
        return 1
    from fsspec.utils import read_block

    with fs.open(block.path, "rb") as f:
        return 1 + read_block(f, 0, block.start, delimiter=b"\n").count(b"\n")


def _parse_error(fs, block: Block, text: bytes | None, prepended: bool, exc: Exception,
                 handler: _Invalid | None) -> LogDataError:
    """A parser's error as one line naming the file and the line."""
    message = " ".join(str(exc).split())
    if handler is not None and handler.text is not None:
        line_text, expected, actual = handler.text
        reason = f"malformed CSV line: {actual} fields where the header has {expected}"
        pos = text.find(line_text.encode()) if text is not None else -1
        if pos < 0:
            return LogDataError(block.path, None, f"{reason} ({line_text[:60]!r})")
        before = text[:pos].count(b"\n")
        line = _first_line(fs, block) + before - (1 if prepended else 0)
        return LogDataError(f"{block.path}, line {line}", None, reason)
    return LogDataError(block.path, None, f"cannot parse {block.fmt.upper()} ({message})")


def read_tables(fs, block: Block, spec: ImportSpec, names: list[str], used: list[str], skip: Counter,
                data: bytes | None = None, numeric=()):
    """Yield (table of the ``used`` columns, line or row number of its first row) for the block.

    Lines count from 1 (a CSV's header is line 1); Parquet rows from 0. A byte block's tables
    carry its line offset within the block (the caller knows the block's first line); ``data``
    are its bytes if already read. Malformed CSV lines skipped under ``skip_bad_rows`` are counted in ``skip``.
    The columns of ``numeric`` in an uncompressed CSV are parsed as numbers by the parser; if one does not
    parse, the block is read again as text, where the converter names the line (the parser does not).
    """
    handler = _Invalid(spec.skip_bad_rows)
    if block.fmt == "parquet":
        line0 = 0
        with fs.open(block.path, "rb") as f:
            try:
                pf = pq.ParquetFile(f)
                for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=used):
                    yield pa.Table.from_batches([batch]), line0
                    line0 += batch.num_rows
            except pa.ArrowException as exc:
                reason = " ".join(str(exc).split())
                raise LogDataError(block.path, None, f"unreadable Parquet file ({reason})") from None
        return
    if block.length is None:  # a compressed file, streamed
        line0 = 2 if block.fmt == "csv" else 1
        with fs.open(block.path, "rb", compression=block.compression) as f:
            try:
                if block.fmt == "csv":
                    import pyarrow.csv as pcsv

                    reader = pcsv.open_csv(f, read_options=pcsv.ReadOptions(block_size=16 << 20),
                                           **_csv_options(spec, names, used, handler))
                else:
                    import pyarrow.json as pj

                    reader = pj.open_json(f, read_options=pj.ReadOptions(block_size=16 << 20))
                for batch in reader:
                    table = pa.Table.from_batches([batch])
                    if block.fmt == "json":
                        table = _json_columns(table, used)
                    yield table, line0
                    line0 += batch.num_rows
            except pa.ArrowInvalid as exc:
                raise _parse_error(fs, block, None, False, exc, handler) from None
        skip["malformed line"] += handler.count
        return
    data = _block_bytes(fs, block) if data is None else data
    if not data or data.isspace():
        return
    prepended = block.fmt == "csv" and not block.first
    text = _header_bytes(fs, block) + data if prepended else data
    try:
        if block.fmt == "csv":
            import pyarrow.csv as pcsv

            try:
                table = pcsv.read_csv(io.BytesIO(text), **_csv_options(spec, names, used, handler, numeric))
            except pa.ArrowInvalid as exc:
                if not numeric or "conversion error" not in str(exc):
                    raise
                handler = _Invalid(spec.skip_bad_rows)
                table = pcsv.read_csv(io.BytesIO(text), **_csv_options(spec, names, used, handler))
        else:
            import pyarrow.json as pj

            table = _json_columns(pj.read_json(io.BytesIO(text)), used)
    except pa.ArrowInvalid as exc:
        raise _parse_error(fs, block, text, prepended, exc, handler) from None
    skip["malformed line"] += handler.count
    yield table, 0


def _header_bytes(fs, block: Block) -> bytes:
    with fs.open(block.path, "rb") as f:
        return f.readline()


def _json_columns(table: pa.Table, used: list[str]) -> pa.Table:
    """The ``used`` columns of a JSON-lines table (a key absent from every line of the block: all null)."""
    return pa.table({c: table.column(c) if c in table.column_names else pa.nulls(table.num_rows) for c in used})


# -- converting a table ---------------------------------------------------------------------------
class _Rows:
    """Where a table's rows are (file and line / row), and the bad rows found so far."""

    def __init__(self, source: str, n: int, line0: int | None, kind: str, skip_bad: bool):
        self.source, self.line0, self.kind, self.skip_bad = source, line0, kind, skip_bad
        self.bad = np.zeros(n, dtype=bool)
        self.reasons: Counter = Counter()

    def where(self, i: int) -> str:
        return f"{self.source}, {self.kind} {self.line0 + i}" if self.line0 is not None else self.source

    def flag(self, mask: np.ndarray, column: str, reason: str) -> None:
        """Rows of ``mask`` are bad: an error naming the first, or (skipping) counted."""
        mask = np.asarray(mask, dtype=bool) & ~self.bad
        if not mask.any():
            return
        if not self.skip_bad:
            i = int(np.flatnonzero(mask)[0])
            raise LogDataError(self.where(i), column, reason)
        self.bad |= mask
        self.reasons[f"column '{column}': {reason}"] += int(mask.sum())


def _bad_positions(array: pa.Array, convert) -> np.ndarray:
    """Positions of the non-null values of ``array`` that ``convert`` refuses, found by bisection."""
    out: list[int] = []

    def walk(lo: int, hi: int) -> None:
        try:
            convert(array.slice(lo, hi - lo))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
            if hi - lo == 1:
                out.append(lo)
            else:
                mid = (lo + hi) // 2
                walk(lo, mid)
                walk(mid, hi)

    walk(0, len(array))
    return np.array(out, dtype=np.int64)


def _converted(array: pa.Array, convert, rows: _Rows, column: str, reason: str, fill) -> pa.Array:
    """``convert(array)``; values it refuses are bad rows (``reason``) and become ``fill`` when skipped."""
    try:
        return convert(array)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        bad = _bad_positions(array, convert)
        if not bad.size:  # every piece converts, the whole does not
            raise LogDataError(rows.source, column, f"{reason}: the values do not convert together") from None
        mask = np.zeros(len(array), dtype=bool)
        mask[bad] = True
        rows.flag(mask, column, f"{reason} ({array[int(bad[0])].as_py()!r})")
        fixed = pc.if_else(pa.array(mask), pa.scalar(fill, array.type), array)
        return convert(fixed)


def _numbers(array: pa.Array) -> pa.Array:
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        return pc.cast(pc.utf8_trim_whitespace(array), pa.float64())
    if pa.types.is_integer(array.type) or pa.types.is_floating(array.type) or pa.types.is_boolean(array.type):
        return pc.cast(array, pa.float64())
    raise pa.ArrowInvalid(f"wrong type {array.type}")


def _column_numbers(table: pa.Table, column: str, rows: _Rows, required: bool) -> np.ndarray:
    """float64 values of a column (strings parsed); refused or (if ``required``) missing values are bad rows."""
    array = _one(table.column(column))
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or _numeric_type(array.type)):
        raise LogDataError(rows.source, column, f"wrong type {array.type}: expected numbers")
    numbers = _converted(array, _numbers, rows, column, "not a number", "0")
    if required and numbers.null_count:
        rows.flag(pc.is_null(numbers).to_numpy(zero_copy_only=False), column, "missing value")
    return pc.fill_null(numbers, np.nan).to_numpy(zero_copy_only=False)


def _numeric_type(t) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _one(column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _text(array: pa.Array) -> pa.Array:
    """Values as text, the raw field of a CSV: integers as ``3``, strings as they are."""
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    if pa.types.is_floating(array.type):  # 3.0 → "3", as pandas' integers-with-nulls often arrive
        whole = pc.equal(array, pc.floor(array))
        as_int = pc.cast(pc.if_else(whole, array, pa.scalar(None, array.type)), pa.int64(), safe=False)
        return pc.if_else(whole, pc.cast(as_int, pa.string()), pc.cast(array, pa.string()))
    return pc.cast(array, pa.string())


def _timestamps(array: pa.Array, zone: str) -> pa.Array:
    """UTC timestamps: ISO-8601 text (a naive time is in ``zone``), Arrow timestamps, or seconds since the epoch."""
    t = array.type
    if pa.types.is_timestamp(t):
        return array if t.tz else pc.assume_timezone(array, zone, ambiguous="earliest", nonexistent="earliest")
    if _numeric_type(t):
        return pc.cast(pc.cast(pc.multiply(pc.cast(array, pa.float64()), 1e6), pa.int64()), pa.timestamp("us", "UTC"))
    if pa.types.is_date(t):
        return pc.assume_timezone(pc.cast(array, pa.timestamp("us")), zone)
    text = pc.utf8_trim_whitespace(pc.cast(array, pa.string()))
    zoned = pc.fill_null(pc.match_substring_regex(text, r"(Z|[+-]\d\d(:?\d\d)?)$"), False)
    aware = pc.cast(pc.if_else(zoned, text, pa.scalar(None, pa.string())), pa.timestamp("us", "UTC"))
    naive = pc.cast(pc.if_else(zoned, pa.scalar(None, pa.string()), text), pa.timestamp("us"))
    local = pc.assume_timezone(naive, zone, ambiguous="earliest", nonexistent="earliest").cast(aware.type)
    return pc.if_else(zoned, aware, local)


def _dates(array: pa.Array, zone: str) -> pa.Array:
    local = pc.local_timestamp(pc.cast(array, pa.timestamp("us", zone)))
    return pc.cast(pc.cast(local, pa.date32()), pa.string())


def _hashed(keys: pa.Array, prefix: str, bits: int, fps: list) -> np.ndarray:
    """Indices of the distinct ``keys`` (text) under ``prefix=``; their fingerprints appended to ``fps``."""
    idx, fp = hash_strings(pc.binary_join_element_wise(f"{prefix}=", keys, ""), bits)
    fps.append(fp)
    return idx


def _features(table: pa.Table, cols: Columns, spec: ImportSpec, rows: _Rows, fps: list):
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
        encoded = pc.dictionary_encode(_text(_one(table.column(c))))
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
            x = _column_numbers(table, c, rows, required=False)
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
        array = _one(table.column(c))
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            array = pc.utf8_split_whitespace(_text(array))
        flat = pc.list_flatten(array)
        parent = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        encoded = pc.dictionary_encode(_text(flat))
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


def _summed_repeats(r: np.ndarray, i: np.ndarray, v: np.ndarray):
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


def _list_column(offsets: np.ndarray, flat: np.ndarray, typ) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat, type=typ))


@dataclass
class Converted:
    """A converted table and what the summary needs of it."""

    table: pa.Table          # the contract's columns, plus ``date`` when the spec has a timestamp
    bad: Counter = field(default_factory=Counter)
    fingerprints: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    values: bool = False


def convert_table(table: pa.Table, cols: Columns, spec: ImportSpec, vocabulary: Vocabulary, *, source: str,
                  line0: int | None, kind: str = "line", file_id: int | None = None,
                  position0: int = 0, values: bool | None = None) -> Converted:
    """The rows of a raw ``table`` as the contract's columns (module docstring); bad rows raise or are dropped.

    ``line0``: the line (or row) number of the first row, for messages; ``file_id`` and
    ``position0``: the stable row id of row i is ``file_id << 36 | position0 + i`` when the spec names no
    ``row_id`` column (``file_id`` None: ``position0 + i``).
    """
    n = table.num_rows
    rows = _Rows(source, n, line0, kind, spec.skip_bad_rows)
    # action, through the vocabulary
    action_text = _text(_one(table.column(cols.action)))
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
    reward = _column_numbers(table, cols.reward, rows, required=True)
    rows.flag(~np.isfinite(reward) & ~rows.bad, cols.reward, "NaN or infinite reward")
    propensity = (_column_numbers(table, cols.propensity, rows, required=True) if cols.propensity is not None
                  else None)  # not logged: the log has no propensity column
    fault = None if propensity is None else propensity_fault(np.where(np.isnan(propensity) & rows.bad, 1.0,
                                                                      propensity))
    if fault is not None:
        mask, rule = fault
        rows.flag(mask, cols.propensity, f"propensity {rule}")
    if cols.row_id is not None:
        ids = _column_numbers(table, cols.row_id, rows, required=True)
        rows.flag(np.isfinite(ids) & (ids != np.floor(ids)), cols.row_id, "not an integer")
        row_id = np.nan_to_num(ids).astype(np.int64)
    else:
        row_id = np.arange(position0, position0 + n, dtype=np.int64)
        if file_id is not None:
            row_id |= np.int64(file_id) << np.int64(POSITION_BITS)
    date = None
    if cols.timestamp is not None:
        stamps = _one(table.column(cols.timestamp))
        rows.flag(pc.is_null(stamps).to_numpy(zero_copy_only=False), cols.timestamp, "missing timestamp")
        ts = _converted(stamps, lambda a: _timestamps(a, spec.timezone), rows, cols.timestamp,
                        "not a timestamp (ISO 8601, e.g. 2019-11-24 00:00:34+00:00)",
                        "1970-01-01T00:00:00+00:00" if not _numeric_type(stamps.type) else 0)
        date = _dates(ts, spec.timezone)
    fps: list = []
    r, i, v = _features(table, cols, spec, rows, fps)

    keep = ~rows.bad
    if rows.bad.any():
        kept_rows = np.flatnonzero(keep)
        new_pos = np.cumsum(keep) - 1
        entry = keep[r]
        r, i, v = new_pos[r[entry]], i[entry], v[entry]
        action, reward, row_id = action[keep], reward[keep], row_id[keep]
        propensity = None if propensity is None else propensity[keep]
        date = date.take(pa.array(kept_rows)) if date is not None else None
    m = int(keep.sum())
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=m), out=offsets[1:])
    columns = {"row_id": pa.array(row_id, pa.int64()),
               "features": _list_column(offsets, i.astype(np.int32), pa.int32()),
               "action": pa.array(action.astype(np.int32)), "reward": pa.array(reward)}
    if propensity is not None:
        columns["propensity"] = pa.array(propensity)
    has_values = (bool(cols.numeric or cols.tokens) or bool((v != 1).any())) if values is None else values
    if has_values:
        columns["values"] = _list_column(offsets, v.astype(np.float32), pa.float32())
    if date is not None:
        columns["date"] = date
    fingerprints = _distinct(np.concatenate(fps)) if fps else np.zeros(0, np.uint64)
    return Converted(pa.table(columns), rows.reasons, fingerprints, has_values)


# -- the import ----------------------------------------------------------------------------------------
@dataclass
class BlockStats:
    """What one block contributed; ``+`` merges two (associative), for the tree reduction."""

    rows: int = 0
    bad: Counter = field(default_factory=Counter)
    days: frozenset = frozenset()
    actions: frozenset = frozenset()
    p_min: float = np.inf
    p_max: float = -np.inf
    fingerprints: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    files: tuple = ()

    def __add__(self, other: BlockStats) -> BlockStats:
        return BlockStats(self.rows + other.rows, self.bad + other.bad, self.days | other.days,
                          self.actions | other.actions, min(self.p_min, other.p_min), max(self.p_max, other.p_max),
                          _union([self.fingerprints, other.fingerprints]), self.files + other.files)


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` by a sort (numpy's hash-based ``unique`` of 64-bit integers is ~100 times slower)."""
    out = np.sort(values)
    return out[np.concatenate([[True], out[1:] != out[:-1]])] if out.size else out


def _union(arrays: list[np.ndarray]) -> np.ndarray:
    """The sorted distinct values of sorted arrays of distinct values (``np.union1d`` of them all): a merge of
    the sorted runs (a stable sort), then each value once."""
    out = np.concatenate(arrays)
    if len(arrays) > 1 and out.size:
        out.sort(kind="stable")
        out = out[np.concatenate([[True], out[1:] != out[:-1]])]
    return out


def _file_id(name: str) -> int:
    """A file's 27-bit id: its path's MurmurHash3 (unsigned), masked."""
    from dr_scale.logs.spec import murmurhash3_32

    return int(murmurhash3_32(pa.array([name]), 0).view(np.uint32)[0]) & ((1 << FILE_BITS) - 1)


def survey_block(fs, block: Block, spec: ImportSpec, names: list[str], action: str, values_wanted: bool = True):
    """First pass: (data lines in a byte block, distinct action values as text — only if ``values_wanted``)."""
    values: set = set()
    lines = 0
    data = None
    skip: Counter = Counter()
    if block.length is not None:
        data = _block_bytes(fs, block)
        lines = _line_count(data) - (1 if block.first and block.fmt == "csv" else 0)
    if not values_wanted:
        return lines, values
    for table, _ in read_tables(fs, block, spec, names, [action], skip, data):
        values.update(v for v in pc.unique(_text(_one(table.column(action)))).to_pylist() if v is not None)
    return lines, values


def convert_block(fs, block: Block, spec: ImportSpec, names: list[str], cols: Columns, vocabulary: Vocabulary,
                  line0: int, out_fs, staging: str, tag: str, file_id: int | None) -> BlockStats:
    """Second pass: convert one block and write its parts (one per day) under ``staging``.

    ``line0``: the line number of a byte block's first data row (from the first pass).
    """
    skip: Counter = Counter()
    stats = BlockStats(files=(block.path,))
    writers: dict = {}
    d, k = 1 << spec.hash_bits, len(vocabulary)
    kind = "row" if block.fmt == "parquet" else "line"
    header_lines = 0 if block.fmt == "parquet" else (2 if block.fmt == "csv" else 1)
    with contextlib.ExitStack() as stack:
        numeric = {*cols.numeric, cols.reward, *([cols.propensity] if cols.propensity else [])}
        for table, first in read_tables(fs, block, spec, names, cols.used, skip, numeric=numeric):
            if block.length is not None:
                first = line0 + first
            out = convert_table(table, cols, spec, vocabulary, source=block.path, line0=first, kind=kind,
                                file_id=file_id, position0=first - header_lines)
            stats = stats + BlockStats(out.table.num_rows, out.bad, fingerprints=out.fingerprints,
                                       files=())
            if out.table.num_rows == 0:
                continue
            partition_from_table(out.table, block.path, d, k)  # the contract's own checks, before writing
            if "propensity" in out.table.column_names:
                p = out.table.column("propensity")
                stats.p_min = min(stats.p_min, pc.min(p).as_py())
                stats.p_max = max(stats.p_max, pc.max(p).as_py())
            stats.actions = stats.actions | frozenset(pc.unique(out.table.column("action")).to_pylist())
            groups = _by_date(out.table)
            for day, piece in groups:
                folder = posixpath.join(staging, f"date={day}") if day else staging
                piece = piece.replace_schema_metadata(_schema(piece, d, k).metadata)
                writer = writers.get(day)
                if writer is None:
                    out_fs.makedirs(folder, exist_ok=True)
                    f = stack.enter_context(out_fs.open(posixpath.join(folder, f"part-{tag}-{block.index:05d}.parquet"),
                                                        "wb"))
                    writer = writers[day] = stack.enter_context(pq.ParquetWriter(
                        f, piece.schema, compression="zstd", use_dictionary=["action"], write_statistics=["row_id"]))
                elif writer.schema != piece.schema:  # e.g. a block whose first batch had no values column
                    piece = piece.cast(writer.schema) if set(piece.schema.names) == set(writer.schema.names) else piece
                writer.write_table(piece)
            stats.days = stats.days | frozenset(day for day, _ in groups if day)
    stats.bad = stats.bad + skip
    return stats


def _schema(table: pa.Table, d: int, k: int) -> pa.Schema:
    return table.schema.with_metadata({META_FEATURES: str(d).encode(), META_ACTIONS: str(k).encode()})


def _by_date(table: pa.Table) -> list[tuple[str | None, pa.Table]]:
    """The table's rows by day, in day order, each day's rows in their order: slices where each day's rows
    are together (a log in time order), else a filter per day."""
    if "date" not in table.column_names:
        return [(None, table)]
    dates = _one(table.column("date"))
    rest = table.drop_columns(["date"])
    if not dates.null_count and len(dates):
        encoded = pc.dictionary_encode(dates)
        days = encoded.dictionary.to_pylist()
        codes = encoded.indices.to_numpy()
        bounds = np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1, [len(codes)]])
        if bounds.size - 1 == len(days):  # one run of rows per day
            runs = [(days[codes[lo]], rest.slice(lo, hi - lo)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
            return sorted(runs, key=lambda run: run[0])
    return [(day, rest.filter(pc.equal(dates, day))) for day in sorted(pc.unique(dates).to_pylist())]


@dataclass
class ImportSummary:
    """What an import wrote: its printed summary is :meth:`text`."""

    out: str
    rows: int
    bad: Counter
    days: list
    n_actions: int
    actions_logged: int
    n_features: int
    features_used: int
    keys: int
    collisions: int
    propensity: tuple | None  # (min, max), None when the spec names no propensity column
    files: int
    catalogue: int | None = None

    def text(self) -> str:
        lines = [f"imported {self.rows:,} rows from {self.files} file(s) into {self.out}"]
        lines.append("days: " + (f"{len(self.days)} ({self.days[0]} … {self.days[-1]})" if self.days else
                                 "none (no timestamp in the spec)"))
        lines.append(f"actions: {self.n_actions} in the vocabulary, {self.actions_logged} logged")
        lines.append(f"features: {self.features_used:,} of 2^{self.n_features.bit_length() - 1} used by "
                     f"{self.keys:,} distinct keys; {self.collisions:,} collision(s)")
        if self.propensity is None:
            lines.append("propensity: none (the spec names no propensity column: weight the log by estimated "
                         "propensities, --estimate-propensity; docs/propensities.md)")
        else:
            lines.append(f"propensity: {self.propensity[0]:.6g} … {self.propensity[1]:.6g}")
        if self.catalogue is not None:
            lines.append(f"item catalogue: {self.catalogue} actions with features ({CATALOGUE_FILE})")
        total = sum(self.bad.values())
        lines.append(f"bad rows skipped: {total:,}" + (" (" + "; ".join(f"{n:,} × {reason}" for reason, n in
                                                                          sorted(self.bad.items())) + ")"
                                                          if total else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"out": self.out, "rows": self.rows, "bad_rows": dict(self.bad), "days": self.days,
                "n_actions": self.n_actions, "actions_logged": self.actions_logged, "n_features": self.n_features,
                "features_used": self.features_used, "keys": self.keys, "collisions": self.collisions,
                "propensity": None if self.propensity is None else list(self.propensity), "files": self.files}


def _collisions(fingerprints: np.ndarray, bits: int) -> tuple[int, int]:
    """(distinct indices, collisions) of the distinct keys' fingerprints (the high word is the index's hash)."""
    h = (fingerprints >> np.uint64(32)).astype(np.uint32).view(np.int32).astype(np.int64)
    mask = (1 << bits) - 1
    idx = np.where(h == -(1 << 31), (2147483647 - mask) & mask, np.abs(h) & mask)
    used = _distinct(idx).size
    return used, fingerprints.size - used


def _staging_name(out: str) -> str:
    parent, name = posixpath.split(out.rstrip("/"))
    return posixpath.join(parent, f".{name}.import-{uuid.uuid4().hex}")


def import_log(raw: str, spec, out: str, *, client=None, storage_options: dict | None = None,
               blocksize: int = DEFAULT_BLOCKSIZE, progress: bool = False) -> ImportSummary:
    """Import the raw table(s) at ``raw`` into a log at ``out`` by ``spec`` (module docstring).

    Parameters
    ----------
    raw : str
        A CSV, JSON-lines or Parquet file, folder or glob, at any fsspec URL, compressed or not.
    spec : str, dict or ImportSpec
        The import spec (a TOML file, see :mod:`dr_scale.logs.spec`).
    out : str
        The log's folder: new, or a log imported before with the same spec (new days are added).
    client : distributed.Client, optional
        Where the tasks run (default: Dask's local threaded scheduler).
    storage_options : dict, optional
        fsspec options of the raw data's and the log's filesystems (credentials, an endpoint).
    blocksize : int
        Bytes per block of an uncompressed CSV / JSON-lines file (a task holds about 60 times its block
        at most).
    progress : bool
        Show a progress bar of the two passes.

    Returns
    -------
    ImportSummary
        Rows, days, actions, features used, collisions, propensity range and skipped rows.

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "raw.csv"), "w") as f:
    ...     _ = f.write("item,click,p,color\\nb,1,0.5,red\\na,0,0.5,blue\\n")
    >>> spec = {"action": "item", "reward": "click", "propensity": "p", "features": {"categorical": ["color"]}}
    >>> summary = import_log(os.path.join(folder, "raw.csv"), spec, os.path.join(folder, "logs"))
    >>> summary.rows, summary.n_actions, summary.collisions
    (2, 2, 0)
    """
    from dr_scale.core.errors import check_output_folder
    from dr_scale.io.config import PositiveInt, check
    from dr_scale.outofcore.compute import compute
    from dr_scale.outofcore.mergeable import tree_reduce

    check(PositiveInt, "blocksize", blocksize)
    spec, spec_source = read_spec(spec, storage_options)
    fs, files = list_raw(raw, storage_options)
    blocks = plan_blocks(fs, files, spec, blocksize)
    names = header(fs, blocks[0], spec)
    cols = Columns(spec, names, spec_source, files[0])
    out_fs, out_path = url_to_fs(out, storage_options)
    check_output_folder(out, out_fs, out_path)
    spec_path = posixpath.join(out_path, SPEC_FILE)
    saved = load_saved(out_fs, spec_path) if out_fs.exists(spec_path) else None
    if saved is None and out_fs.isdir(out_path) and out_fs.ls(out_path, detail=False):
        raise UserError(f"{out}: the folder is not empty and holds no {SPEC_FILE}; give a new folder (or a log "
                        "imported before, to add days to it)")
    for block in blocks[1:]:
        if block.first and block.path != blocks[0].path:
            other = header(fs, block, spec)
            missing = [c for c in cols.used if c not in other]
            if missing:
                raise LogDataError(block.path, missing[0], f"missing column (present in {files[0]})")
    vocabulary = check_same_hashing(saved, spec, cols, out, spec_source) if saved else None
    catalogue = _read_catalogue(spec, spec_source, raw, storage_options) if spec.actions else None

    import dask

    wanted = vocabulary is None  # a log imported before lends its vocabulary: the first pass only counts lines
    survey = [dask.delayed(survey_block, pure=False)(fs, b, spec, names, cols.action, wanted) for b in blocks
              if wanted or b.length is not None]
    surveyed = iter(compute(*survey, client=client, progress=progress))
    surveyed = [next(surveyed) if wanted or b.length is not None else (0, set()) for b in blocks]
    if vocabulary is None:
        values = set().union(*(v for _, v in surveyed))
        if catalogue is not None:
            values |= set(catalogue[0])
        vocabulary = Vocabulary.of(values, reserved=spec.unseen_actions == "reserved")
    starts, line = [], 0
    for block, (lines, _) in zip(blocks, surveyed, strict=True):
        if block.first:
            line = 2 if block.fmt == "csv" else 1
        starts.append(line)
        line += lines  # the data lines of the byte blocks before, in the same file
    file_ids: dict = {}
    earlier = {int(fid): path for path, fid in (saved or {}).get("row_id_files", {}).items()}
    if cols.row_id is None:
        for block in blocks:
            file_ids.setdefault(block.path, _file_id(block.path))
        by_id = dict(earlier)
        for path, fid in file_ids.items():
            if by_id.get(fid, path) != path:
                raise UserError(f"{by_id[fid]} and {path} get the same stable row ids; name a row_id column in the "
                                "spec")
            if fid in earlier:
                raise UserError(f"{path}: already imported into {out}; its rows would repeat")
            by_id[fid] = path

    staging = _staging_name(out_path)
    tag = uuid.uuid4().hex[:8]
    try:
        convert = dask.delayed(convert_block, pure=False)
        tasks = [convert(fs, b, spec, names, cols, vocabulary, s, out_fs, staging, tag, file_ids.get(b.path))
                 for b, s in zip(blocks, starts, strict=True)]
        (stats,) = compute(tree_reduce(tasks, _sum_stats), client=client, progress=progress)
        if stats.rows == 0:
            raise LogDataError(raw, None, "no rows to import" + (" (every row was bad)" if stats.bad else ""))
        days = sorted(stats.days)
        if saved is not None:
            clash = [day for day in days if out_fs.exists(posixpath.join(out_path, f"date={day}"))]
            if clash:
                raise UserError(f"{out}: already holds date={clash[0]}; import that day into a new log, or remove "
                                "its folder first")
        document = saved_spec(spec, cols, vocabulary)
        if cols.row_id is None:  # each file's id, so that a later import refuses a file whose ids would clash
            document["row_id_files"] = {**(saved or {}).get("row_id_files", {}), **file_ids}
        atomic_write(out_fs, posixpath.join(staging, SPEC_FILE), dumps(document, indent=2))
        n_catalogue = None
        if catalogue is not None:
            table = catalogue_table(catalogue, spec, vocabulary, spec_source)
            n_catalogue = table.num_rows
            write_parquet(_schema_table(table, 1 << spec.hash_bits, len(vocabulary)),
                          posixpath.join(staging, CATALOGUE_FILE), fs=out_fs)
        _publish(out_fs, staging, out_path, saved is not None)
    except BaseException:
        with contextlib.suppress(Exception):
            if out_fs.exists(staging):
                out_fs.rm(staging, recursive=True)
        raise
    used, collisions = _collisions(stats.fingerprints, spec.hash_bits)
    return ImportSummary(out, stats.rows, stats.bad, days, len(vocabulary), len(stats.actions), 1 << spec.hash_bits,
                         used, int(stats.fingerprints.size), collisions,
                         (stats.p_min, stats.p_max) if spec.propensity is not None else None,
                         len(set(stats.files)), n_catalogue)


def _sum_stats(items) -> BlockStats:
    """The merge of blocks' stats (:func:`~dr_scale.outofcore.mergeable.tree_reduce`'s node): their ``+``, with
    the fingerprints' sorted runs merged once for all rather than pair by pair."""
    items = list(items)
    total, none = BlockStats(), np.zeros(0, np.uint64)
    for s in items:  # the fingerprints merged once, below
        total = total + replace(s, fingerprints=none)
    return replace(total, fingerprints=_union([s.fingerprints for s in items]))


def _publish(fs, staging: str, out: str, adding: bool) -> None:
    """Make the staged log the output: one rename of the folder, or (adding days) one per day and the spec last."""
    from dr_scale.io.atomic import interrupts_deferred

    with interrupts_deferred() as interrupted:
        if not adding:
            if fs.isdir(out):
                fs.rmdir(out)  # an empty folder (checked before the work)
            fs.mv(staging, out, recursive=True)
        else:
            for entry in sorted(fs.ls(staging, detail=False)):
                base = posixpath.basename(entry.rstrip("/"))
                if base != SPEC_FILE:
                    fs.mv(entry, posixpath.join(out, base), recursive=True)
            fs.mv(posixpath.join(staging, SPEC_FILE), posixpath.join(out, SPEC_FILE))
            fs.rm(staging, recursive=True)
    if interrupted:
        raise KeyboardInterrupt("the interrupt came while publishing; the log was written completely before it "
                                "took effect")


# -- the item catalogue -----------------------------------------------------------------------------
def _read_catalogue(spec: ImportSpec, spec_source: str, raw: str, storage_options):
    """(keys as text, the catalogue's table) — a small table, read whole. A relative path is beside the spec file."""
    cat = spec.actions
    path = cat.table
    if "://" not in path and not posixpath.isabs(path) and spec_source != "<spec>":
        path = posixpath.join(posixpath.dirname(spec_source), path)
    fs, p = url_to_fs(path, storage_options)
    if not fs.exists(p):
        from dr_scale.io.config import ConfigError

        raise ConfigError(f"actions.table: no such file {path}", spec_source)
    fmt, compression = _format_of(p, None)
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
    from dr_scale.io.config import ConfigError

    for key in ["key", "categorical", "numeric", "tokens"]:
        names = [getattr(cat, key)] if key == "key" else getattr(cat, key)
        for name in names:
            if name not in table.column_names:
                raise ConfigError(f"actions.{key}: no column {name!r} in {path}", spec_source)
    keys = _text(_one(table.column(cat.key)))
    if keys.null_count:
        raise LogDataError(path, cat.key, "missing key")
    if len(pc.unique(keys)) != len(keys):
        raise LogDataError(path, cat.key, "duplicate keys")
    return keys.to_pylist(), table, path


def catalogue_table(catalogue, spec: ImportSpec, vocabulary: Vocabulary, spec_source: str) -> pa.Table:
    """The catalogue as (action, key, features, values): each item's hashed features, in action order."""
    keys, table, path = catalogue
    cat = spec.actions
    item_spec = ImportSpec(action=cat.key, reward=cat.key, propensity=cat.key, hash_bits=spec.hash_bits,
                           features={"categorical": cat.categorical, "numeric": cat.numeric, "tokens": cat.tokens})
    cols = Columns(item_spec, table.column_names, spec_source, path)
    rows = _Rows(path, table.num_rows, 2, "line", False)
    r, i, v = _features(table, cols, item_spec, rows, [])
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
                     "features": _list_column(new_offsets, i[take].astype(np.int32), pa.int32()),
                     "values": _list_column(new_offsets, v[take].astype(np.float32), pa.float32())})


def _schema_table(table: pa.Table, d: int, k: int) -> pa.Table:
    return table.replace_schema_metadata({META_FEATURES: str(d).encode(), META_ACTIONS: str(k).encode()})


# -- DataFrames ------------------------------------------------------------------------------------
def _frame_table(df) -> pa.Table:
    return pa.Table.from_pandas(df, preserve_index=False)


def _vocabulary_for(spec: ImportSpec, values, actions) -> Vocabulary:
    if actions is not None:
        return Vocabulary([str(a) for a in actions], spec.unseen_actions == "reserved")
    return Vocabulary.of(values, reserved=spec.unseen_actions == "reserved")


def from_pandas(df, spec, *, actions=None) -> Partition:
    """A pandas DataFrame of raw columns as an in-memory log, by an import spec.

    The conversion is :func:`import_log`'s (:func:`convert_table`); row ids are the
    ``row_id`` column or the row positions 0 … n−1. The result is a
    :class:`~dr_scale.logs.contract.Partition` that ``evaluate_partitions([log], …)``
    takes and whose ``table`` ``write_log(log.table, url, partition_by="date", …)`` writes.

    Parameters
    ----------
    df : pandas.DataFrame
        The raw table (pandas 2 or 3; any string dtype).
    spec : str, dict or ImportSpec
        The import spec (a TOML file, a mapping or a model).
    actions : list, optional
        The vocabulary, the action values in id order (e.g. a saved spec's); default: the
        values in ``df``, sorted.

    Returns
    -------
    Partition
        The log: X (n × 2^hash_bits CSR), action, reward, propensity, row_id and the table.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"item": ["b", "a", "b"], "click": [1, 0, 1], "p": [0.5, 0.5, 0.5],
    ...                    "color": ["red", "blue", "red"]})
    >>> log = from_pandas(df, {"action": "item", "reward": "click", "propensity": "p",
    ...                        "features": {"categorical": ["color"]}, "hash_bits": 10})
    >>> log.action.tolist(), log.X.shape
    ([1, 0, 1], (3, 1024))
    """
    spec, source = read_spec(spec)
    if type(df).__name__ != "DataFrame" or not hasattr(df, "columns"):
        raise ParameterError(f"`df` must be a pandas DataFrame, got {type(df).__name__}")
    table = _frame_table(df)
    cols = Columns(spec, table.column_names, source, "the DataFrame")
    values = [v for v in pc.unique(_text(_one(table.column(cols.action)))).to_pylist() if v is not None]
    vocabulary = _vocabulary_for(spec, values, actions)
    out = convert_table(table, cols, spec, vocabulary, source="<DataFrame>", line0=0, kind="row")
    return partition_from_table(out.table, "<DataFrame>", 1 << spec.hash_bits, len(vocabulary))


def from_dask(ddf, spec, *, actions=None):
    """A Dask DataFrame of raw columns as a Dask DataFrame in the log contract, by an import spec.

    One pass finds the action values (unless ``actions`` is given) and the partitions'
    lengths (row ids are the ``row_id`` column or the row positions); the result's
    partitions are converted lazily by :func:`convert_table`. ``features`` and ``values``
    are Arrow list columns (``pandas.ArrowDtype``), which Dask's string conversion leaves
    alone; ``evaluate_dataframe`` takes the result. With a timestamp, a ``date`` column
    (``YYYY-MM-DD``) is added.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The raw table (any string dtype; Dask's ``dataframe.convert-string`` on or off).
    spec : str, dict or ImportSpec
        The import spec (a TOML file, a mapping or a model).
    actions : list, optional
        The vocabulary, the action values in id order; default: the values in ``ddf``, sorted.

    Returns
    -------
    dask.dataframe.DataFrame
        The log's columns (``row_id``, ``features``, ``action``, ``reward``, ``propensity``, ``values``
        and ``date`` with a timestamp), converted partition by partition when computed.

    Examples
    --------
    >>> import pandas as pd, dask.dataframe as dd
    >>> df = pd.DataFrame({"item": ["b", "a", "b", "a"], "click": [1, 0, 1, 1], "p": [0.5] * 4,
    ...                    "color": ["red", "blue", "red", "red"]})
    >>> spec = {"action": "item", "reward": "click", "propensity": "p", "features": {"categorical": ["color"]}}
    >>> log = from_dask(dd.from_pandas(df, npartitions=2), spec)
    >>> log.compute()["action"].tolist()
    [1, 0, 1, 0]
    """
    import dask

    spec, source = read_spec(spec)
    if not hasattr(ddf, "map_partitions"):
        raise ParameterError(f"`ddf` must be a Dask DataFrame, got {type(ddf).__name__}")
    cols = Columns(spec, list(ddf.columns), source, "the Dask DataFrame")

    def survey(pdf):
        text = _text(_one(_frame_table(pdf[[cols.action]]).column(0)))
        return len(pdf), {v for v in pc.unique(text).to_pylist() if v is not None}

    surveyed = dask.compute(*[dask.delayed(survey)(d) for d in ddf.to_delayed()])
    vocabulary = _vocabulary_for(spec, set().union(*(s for _, s in surveyed)), actions)
    starts = np.concatenate([[0], np.cumsum([n for n, _ in surveyed])[:-1]]).astype(np.int64)
    d, k = 1 << spec.hash_bits, len(vocabulary)

    def convert(pdf, partition_info=None):
        i = partition_info["number"] if partition_info else 0
        out = convert_table(_frame_table(pdf), cols, spec, vocabulary, source=f"<dataframe partition {i}>",
                            line0=int(starts[i]), kind="row", position0=int(starts[i]), values=True)
        partition_from_table(out.table, f"<dataframe partition {i}>", d, k)
        return _contract_frame(out.table)

    meta = _contract_frame(convert_table(_frame_table(ddf._meta), cols, spec, vocabulary, source="<meta>",
                                         line0=0, kind="row", values=True).table)
    return ddf.map_partitions(convert, meta=meta)


def _contract_frame(table: pa.Table):
    """A contract table as pandas, its list columns as Arrow dtypes (nothing becomes text)."""
    import pandas as pd

    frame = table.to_pandas(types_mapper=lambda t: pd.ArrowDtype(t) if pa.types.is_list(t) else None)
    if "date" in frame.columns:
        frame["date"] = frame["date"].astype(pd.ArrowDtype(pa.string()))
    return frame
