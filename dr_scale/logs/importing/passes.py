"""The import's two passes over the raw blocks, one Dask task per block, and the statistics a block returns.

The first pass reads only the action column (and counts each byte block's lines): it gives the action values,
from which the vocabulary is built (unless a log imported before lends its own), and each block the line number
of its first row. The second converts each block (:func:`~dr_scale.logs.importing.convert.convert_table`) and
writes one Parquet part per day into the staging folder; the blocks' :class:`BlockStats` are merged down
:func:`~dr_scale.outofcore.mergeable.tree_reduce`'s tree.
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dr_scale.logs.importing.convert import check_scalars, convert_table, with_shape
from dr_scale.logs.importing.features import union
from dr_scale.logs.importing.fields import as_text, combined
from dr_scale.logs.importing.raw import Block, RawTable, block_bytes, line_count, read_tables
from dr_scale.logs.reading import partition_from_table
from dr_scale.logs.spec import Columns, ImportSpec, Vocabulary

if TYPE_CHECKING:
    from distributed import Client
    from fsspec import AbstractFileSystem


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
    contents: dict = field(default_factory=dict)  # raw file → Σ of its rows' content hashes mod 2^64

    def __add__(self, other: BlockStats) -> BlockStats:
        contents = dict(self.contents)
        for path, h in other.contents.items():
            contents[path] = (contents.get(path, 0) + h) % (1 << 64)
        return BlockStats(self.rows + other.rows, self.bad + other.bad, self.days | other.days,
                          self.actions | other.actions, min(self.p_min, other.p_min), max(self.p_max, other.p_max),
                          union([self.fingerprints, other.fingerprints]), self.files + other.files, contents)


def survey(raw: RawTable, spec: ImportSpec, action: str, values_wanted: bool, *, client: Client | None = None,
           progress: bool = False) -> tuple[list[int], set]:
    """First pass: (the line number of each block's first data row, the distinct action values as text — none
    unless ``values_wanted``; without, only the byte blocks are read, to count their lines).

    Lines count from 1 (a CSV's header is line 1); a byte block's first row follows the data lines of the byte
    blocks before it in its file.
    """
    import dask

    from dr_scale.outofcore.compute import compute

    blocks = raw.blocks
    read = [dask.delayed(survey_block, pure=False)(raw.fs, b, spec, raw.names, action, values_wanted) for b in blocks
            if values_wanted or b.length is not None]
    surveyed = iter(compute(*read, client=client, progress=progress))
    surveyed = [next(surveyed) if values_wanted or b.length is not None else (0, set()) for b in blocks]
    starts, line = [], 0
    for block, (lines, _) in zip(blocks, surveyed, strict=True):
        if block.first:
            line = 2 if block.fmt == "csv" else 1
        starts.append(line)
        line += lines  # the data lines of the byte blocks before, in the same file
    return starts, set().union(*(v for _, v in surveyed))


def convert_blocks(raw: RawTable, spec: ImportSpec, cols: Columns, vocabulary: Vocabulary, starts: list[int],
                   file_ids: dict, out_fs: AbstractFileSystem, staging: str, *, client: Client | None = None,
                   progress: bool = False) -> BlockStats:
    """Second pass: every block converted (:func:`convert_block`, its first data row on line ``starts[i]``, its
    file's row ids by ``file_ids``) and written under ``staging``; the merge of the blocks' stats."""
    import dask

    from dr_scale.outofcore.compute import compute
    from dr_scale.outofcore.mergeable import tree_reduce

    tag = uuid.uuid4().hex[:8]
    convert = dask.delayed(convert_block, pure=False)
    tasks = [convert(raw.fs, b, spec, raw.names, cols, vocabulary, s, out_fs, staging, tag, file_ids.get(b.path))
             for b, s in zip(raw.blocks, starts, strict=True)]
    stats: BlockStats
    (stats,) = compute(tree_reduce(tasks, _sum_stats), client=client, progress=progress)
    return stats


def survey_block(fs: AbstractFileSystem, block: Block, spec: ImportSpec, names: list[str], action: str,
                 values_wanted: bool = True) -> tuple[int, set[str]]:
    """First pass, one block: (data lines in a byte block, distinct action values as text — only if
    ``values_wanted``)."""
    values: set[str] = set()
    lines = 0
    data = None
    skip: Counter = Counter()
    if block.length is not None:
        data = block_bytes(fs, block)
        lines = line_count(data) - (1 if block.first and block.fmt == "csv" else 0)
    if not values_wanted:
        return lines, values
    for table, _ in read_tables(fs, block, spec, names, [action], skip, data):
        check_scalars(table, [action], [], block.path)
        values.update(v for v in pc.unique(as_text(combined(table.column(action)))).to_pylist() if v is not None)
    return lines, values


def convert_block(fs: AbstractFileSystem, block: Block, spec: ImportSpec, names: list[str], cols: Columns,
                  vocabulary: Vocabulary,
                  line0: int, out_fs: AbstractFileSystem, staging: str, tag: str, file_id: int | None) -> BlockStats:
    """Second pass, one block: convert it and write its parts (one per day) under ``staging``.

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
                                       files=(), contents={block.path: out.content})
            if out.table.num_rows == 0:
                continue
            partition_from_table(out.table, block.path, d, k)  # the contract's own checks, before writing
            if "propensity" in out.table.column_names:
                p = out.table.column("propensity")
                stats.p_min = min(stats.p_min, pc.min(p).as_py())
                stats.p_max = max(stats.p_max, pc.max(p).as_py())
            stats.actions = stats.actions | frozenset(pc.unique(out.table.column("action")).to_pylist())
            groups = by_date(out.table)
            for day, piece in groups:
                folder = posixpath.join(staging, f"date={day}") if day else staging
                piece = with_shape(piece, d, k)
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


def by_date(table: pa.Table) -> list[tuple[str | None, pa.Table]]:
    """The table's rows by day, in day order, each day's rows in their order: slices where each day's rows
    are together (a log in time order), else a filter per day."""
    if "date" not in table.column_names:
        return [(None, table)]
    dates = combined(table.column("date"))
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


def _sum_stats(items: Iterable[BlockStats]) -> BlockStats:
    """The merge of blocks' stats (:func:`~dr_scale.outofcore.mergeable.tree_reduce`'s node): their ``+``, with
    the fingerprints' sorted runs merged once for all rather than pair by pair."""
    items = list(items)
    total, none = BlockStats(), np.zeros(0, np.uint64)
    for s in items:  # the fingerprints merged once, below
        total = total + replace(s, fingerprints=none)
    return replace(total, fingerprints=union([s.fingerprints for s in items]))

