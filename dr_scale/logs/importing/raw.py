"""The raw table as blocks: listing the files, their format and compression, and reading a block's rows.

The raw data is one file, a folder or a glob at any fsspec URL, compressed or not: each file's compression
(gzip, bzip2, xz, zstd, zip) and whether it is Parquet are told by its first bytes (:func:`sniff`), CSV from
JSON lines by the spec's ``format`` or the name; a text file must be UTF-8 (:func:`header` says how to convert
one that is not, and which delimiter a one-column header line suggests). It is read as blocks — byte ranges of an
uncompressed CSV / JSON-lines file cut at line ends (as Dask's ``read_csv`` cuts them), one streamed file for a
compressed one, a whole Parquet file read by row groups — each parsed by pyarrow into tables of the columns the
spec uses, never the whole table in memory.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import zipfile
from collections import Counter
from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dr_scale.core.errors import UserError
from dr_scale.io.atomic import url_to_fs
from dr_scale.logs.contract import LogDataError
from dr_scale.logs.spec import ImportSpec

if TYPE_CHECKING:
    import pyarrow.csv as pcsv
    from fsspec import AbstractFileSystem

#: Bytes per block of an uncompressed CSV / JSON-lines file.
DEFAULT_BLOCKSIZE = 16 << 20
#: Rows per batch when a compressed file or a Parquet file is streamed.
BATCH_ROWS = 262_144
FORMATS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json",
           ".parquet": "parquet", ".pq": "parquet"}


#: The first bytes of the compressed formats read, and of Parquet: a file's compression and whether it is Parquet
#: are told by its content, whatever its name.
MAGIC = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz",
         b"PK\x03\x04": "zip", b"PAR1": "parquet"}
#: Name endings of compressed files, dropped before the format is told from the name.
COMPRESSED_NAMES = (".gz", ".gzip", ".bz2", ".xz", ".lzma", ".zst", ".zstd", ".zip")


def sniff(fs: AbstractFileSystem, path: str) -> str | None:
    """What a file's first bytes say it is: a compression of :data:`MAGIC`, ``"parquet"``, ``"empty"`` (no bytes),
    or None (text, or another format)."""
    with fs.open(path, "rb") as f:
        head = bytes(f.read(8))
    if not head:
        return "empty"
    return next((kind for magic, kind in MAGIC.items() if head.startswith(magic)), None)


def format_of(path: str, given: str | None, sniffed: str | None = None) -> tuple[str, str | None]:
    """(format, compression) of a raw file: Parquet and the compression by its first bytes (``sniffed``,
    :func:`sniff`), CSV or JSON lines by the spec's ``format`` or the file name (a compression ending dropped)."""
    stem = path
    while stem.lower().endswith(COMPRESSED_NAMES):
        stem = stem[: stem.rfind(".")]
    if sniffed == "parquet":
        return "parquet", None
    compression = sniffed if sniffed in MAGIC.values() else None
    fmt = given or FORMATS.get(posixpath.splitext(stem)[1].lower())
    if fmt is None:
        raise UserError(f"{path}: cannot tell the format from the name; set format = \"csv\", \"json\" or "
                        "\"parquet\" in the spec")
    if fmt == "parquet":
        what = (f"{compression}-compressed" if compression else "an empty file" if sniffed == "empty"
                else "text or another format")
        raise UserError(f"{path}: not a Parquet file (its first bytes are not Parquet's 'PAR1': {what}); set "
                        "format = \"csv\" or \"json\" in the spec, or give the Parquet file")
    return fmt, compression


class _Stream(io.RawIOBase):
    """A pyarrow input stream as a Python raw stream (for ``io.BufferedReader``'s ``readline``)."""

    def __init__(self, stream: pa.NativeFile):
        self.stream = stream

    def readable(self) -> bool:
        """A raw stream that reads."""
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        """Up to ``len(buffer)`` decompressed bytes into ``buffer``; their number (0 at the end)."""
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


@contextlib.contextmanager
def open_raw(fs: AbstractFileSystem, path: str, compression: str | None) -> Iterator[IO[bytes]]:
    """A raw file's bytes, decompressed: zstd by pyarrow's codec, the others by fsspec's."""
    if compression == "zstd":
        with fs.open(path, "rb") as f:
            yield io.BufferedReader(_Stream(pa.CompressedInputStream(pa.PythonFile(f, mode="r"), "zstd")))
    else:
        with fs.open(path, "rb", compression=compression) as f:
            yield f


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
        """Whether the block starts its file."""
        return self.start == 0


def plan_blocks(fs: AbstractFileSystem, files: list[str], spec: ImportSpec, blocksize: int) -> list[Block]:
    """The blocks of the raw files, numbered in order: ``blocksize`` bytes of an uncompressed CSV / JSON-lines
    file each, a compressed or Parquet file whole."""
    blocks: list[Block] = []
    for path in files:
        fmt, compression = format_of(path, spec.format, sniff(fs, path))
        if fmt == "parquet" or compression:
            blocks.append(Block(len(blocks), path, fmt, compression))
            continue
        size = fs.size(path)
        for start in range(0, max(size, 1), blocksize):
            blocks.append(Block(len(blocks), path, fmt, None, start, blocksize))
    return blocks


@dataclass(frozen=True)
class RawTable:
    """The raw files at a URL (:func:`list_raw`), their blocks (:func:`plan_blocks`) and the first file's column
    names (:func:`header`)."""

    fs: object
    files: list[str]
    blocks: list[Block]
    names: list[str]

    @classmethod
    def open(cls, url: str, spec: ImportSpec, storage_options: dict | None = None,
             blocksize: int = DEFAULT_BLOCKSIZE) -> RawTable:
        """The raw table at ``url`` (file, folder or glob), cut into blocks of ``blocksize`` bytes."""
        fs, files = list_raw(url, storage_options)
        blocks = plan_blocks(fs, files, spec, blocksize)
        return cls(fs, files, blocks, header(fs, blocks[0], spec))

    def check_headers(self, spec: ImportSpec, used: list[str]) -> None:
        """Every file's header has the ``used`` columns that the first file's has (an error naming the first
        missing one)."""
        for block in self.blocks[1:]:
            if block.first and block.path != self.files[0]:
                other = header(self.fs, block, spec)
                missing = [c for c in used if c not in other]
                if missing:
                    raise LogDataError(block.path, missing[0], f"missing column (present in {self.files[0]})")


class _Invalid:
    """pyarrow's ``invalid_row_handler``: skip (counted) or fail (remembering the line's text)."""

    def __init__(self, skip: bool):
        self.skip, self.count = skip, 0
        self.text: tuple[str, int, int] | None = None

    def __call__(self, row: pcsv.InvalidRow) -> str:
        if self.skip:
            self.count += 1
            return "skip"
        self.text = (row.text, row.expected_columns, row.actual_columns)
        return "error"


def _csv_options(spec: ImportSpec, names: list[str], used: list[str], handler: _Invalid | None,
                 numeric: Container[str] = ()) -> dict[str, Any]:
    """pyarrow's CSV options: the ``used`` columns as text, those of ``numeric`` parsed as float64."""
    import pyarrow.csv as pcsv

    types = {c: pa.float64() if c in numeric else pa.string() for c in used}
    return dict(parse_options=pcsv.ParseOptions(delimiter=spec.delimiter, invalid_row_handler=handler),
                convert_options=pcsv.ConvertOptions(include_columns=used, strings_can_be_null=True,
                                                    column_types=types))


def header(fs: AbstractFileSystem, block: Block, spec: ImportSpec) -> list[str]:
    """The column names of a raw file (the CSV header line, the JSON keys of the first lines, the Parquet schema);
    a file that is not UTF-8 text, or whose header line holds one column that another delimiter would split, is
    an error saying what to do."""
    if block.fmt == "parquet":
        with fs.open(block.path, "rb") as f:
            try:
                return list(pq.ParquetFile(f).schema_arrow.names)
            except pa.ArrowException:
                raise LogDataError(block.path, None, "not a complete Parquet file (no footer: truncated, or still "
                                                     "being written); copy it again") from None
    try:
        with open_raw(fs, block.path, block.compression) as f:
            head = f.read(1 << 20) if block.fmt == "json" else f.readline()
    except DECOMPRESSION_ERRORS as exc:
        raise _damaged(block, exc) from None
    _check_text(block.path, head)
    if not head.strip():
        first = "JSON line" if block.fmt == "json" else "CSV header line"
        raise LogDataError(block.path, None, f"empty file: no {first}")
    if block.fmt == "json":
        import pyarrow.json as pj

        head = head[: head.rfind(b"\n") + 1] or head
        try:
            return list(pj.read_json(io.BytesIO(head)).column_names)
        except pa.ArrowInvalid as exc:
            raise LogDataError(block.path, None, f"not JSON lines, one object a line ({_reason(exc)})") from None
    import pyarrow.csv as pcsv

    try:
        names = list(pcsv.read_csv(io.BytesIO(head), parse_options=pcsv.ParseOptions(
            delimiter=spec.delimiter)).column_names)
    except pa.ArrowInvalid as exc:
        raise LogDataError(block.path, None, f"no CSV header line ({_reason(exc)})") from None
    if len(names) == 1:
        text = head.decode()
        guess = max(";\t|,", key=text.count)
        if guess != spec.delimiter and text.count(guess):
            by, shown = ("tabs", "\\t") if guess == "\t" else (repr(guess), guess)
            raise LogDataError(block.path, None, f"the header line is one column ({text.strip()[:60]!r}); its fields "
                                                 f"look separated by {by}: set delimiter = \"{shown}\" in the spec")
    return names


def _check_text(path: str, head: bytes) -> None:
    """The first bytes of a text file are UTF-8 (a UTF-8 byte-order mark allowed); else an error saying how to
    convert it."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
        raise LogDataError(path, None, "UTF-16 or UTF-32 text (a byte-order mark or NUL bytes); dr-scale reads "
                                       "UTF-8: convert it, e.g. iconv -f UTF-16 -t UTF-8")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not a character cut at the end of the bytes read
            line = head[: exc.start].count(b"\n") + 1
            raise LogDataError(f"{path}, line {line}", None,
                               f"not UTF-8 text (byte {head[exc.start]:#04x}); convert it to UTF-8, e.g. iconv -f "
                               "LATIN1 -t UTF-8") from None


#: What a damaged or cut-short compressed file raises while it is read.
DECOMPRESSION_ERRORS = (OSError, EOFError, zipfile.BadZipFile, pa.ArrowInvalid)


def _damaged(block: Block, exc: Exception) -> LogDataError:
    return LogDataError(block.path, None, f"cannot be decompressed as {block.compression}: damaged or cut short "
                                          f"({_reason(exc)}); copy it again")


def _reason(exc: Exception) -> str:
    """A parser's message, on one line."""
    return " ".join(str(exc).split())


def block_bytes(fs: AbstractFileSystem, block: Block) -> bytes:
    """A byte block's bytes, cut at line ends (fsspec's ``read_block``)."""
    from fsspec.utils import read_block

    with fs.open(block.path, "rb") as f:
        return bytes(read_block(f, block.start, block.length, delimiter=b"\n"))


def line_count(data: bytes) -> int:
    """The lines in ``data``: its newlines, and one more for a last line without one."""
    newlines = int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")))  # bytes.count: slower
    return newlines + (1 if data and not data.endswith(b"\n") else 0)


def _first_line(fs: AbstractFileSystem, block: Block) -> int:
    """The physical line number (from 1) of a byte block's first line: one more than the lines before it."""
    if block.start == 0:
        return 1
    from fsspec.utils import read_block

    with fs.open(block.path, "rb") as f:
        return 1 + int(read_block(f, 0, block.start, delimiter=b"\n").count(b"\n"))


def _parse_error(fs: AbstractFileSystem, block: Block, text: bytes | None, prepended: bool, exc: Exception,
                 handler: _Invalid | None) -> LogDataError:
    """A parser's error as one line naming the file and the line."""
    message = _reason(exc)
    if "UTF8" in message:
        where = block.path
        if text is not None:
            try:
                text.decode("utf-8")
            except UnicodeDecodeError as bad:
                line = _first_line(fs, block) + text[: bad.start].count(b"\n") - (1 if prepended else 0)
                where = f"{block.path}, line {line}"
        return LogDataError(where, None, "not UTF-8 text; convert it to UTF-8, e.g. iconv -f LATIN1 -t UTF-8")
    if handler is not None and handler.text is not None:
        line_text, expected, actual = handler.text
        reason = f"malformed CSV line: {actual} fields where the header has {expected}"
        pos = text.find(line_text.encode()) if text is not None else -1
        if text is None or pos < 0:
            return LogDataError(block.path, None, f"{reason} ({line_text[:60]!r})")
        before = text[:pos].count(b"\n")
        line = _first_line(fs, block) + before - (1 if prepended else 0)
        return LogDataError(f"{block.path}, line {line}", None, reason)
    return LogDataError(block.path, None, f"cannot parse {block.fmt.upper()} ({message})")


def read_tables(fs: AbstractFileSystem, block: Block, spec: ImportSpec, names: list[str], used: list[str],
                skip: Counter, data: bytes | None = None,
                numeric: Container[str] = ()) -> Iterator[tuple[pa.Table, int]]:
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
        with contextlib.ExitStack() as stack:
            try:
                f = stack.enter_context(open_raw(fs, block.path, block.compression))
                if block.fmt == "csv":
                    import pyarrow.csv as pcsv

                    reader = pcsv.open_csv(f, read_options=pcsv.ReadOptions(block_size=16 << 20),
                                           **_csv_options(spec, names, used, handler))
                else:
                    import pyarrow.json as pj

                    options = pj.ReadOptions(block_size=16 << 20)
                    # pyarrow ≥ 19 streams JSON lines; before it, the decompressed file is read whole
                    reader = (pj.open_json(f, read_options=options) if hasattr(pj, "open_json")
                              else pj.read_json(f, read_options=options).to_batches())
                for batch in reader:
                    table = pa.Table.from_batches([batch])
                    if block.fmt == "json":
                        table = _json_columns(table, used)
                    yield table, line0
                    line0 += batch.num_rows
            except pa.ArrowInvalid as exc:
                raise _parse_error(fs, block, None, False, exc, handler) from None
            except DECOMPRESSION_ERRORS as exc:
                raise _damaged(block, exc) from None
        skip["malformed line"] += handler.count
        return
    data = block_bytes(fs, block) if data is None else data
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


def _header_bytes(fs: AbstractFileSystem, block: Block) -> bytes:
    with fs.open(block.path, "rb") as f:
        return bytes(f.readline())


def _json_columns(table: pa.Table, used: list[str]) -> pa.Table:
    """The ``used`` columns of a JSON-lines table (a key absent from every line of the block: all null)."""
    return pa.table({c: table.column(c) if c in table.column_names else pa.nulls(table.num_rows) for c in used})

