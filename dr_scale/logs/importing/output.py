"""The log an import writes: its folder checked, a log imported before there (whose saved spec lends the
vocabulary and the files' row ids), the staging folder, and publishing.

A log already at ``--out`` (imported before, with its ``_dr_scale_spec.json``) takes new days: the spec file
stored with the log keeps each file's id of its stable row ids, and two files with one id — in one import, or
a file and one imported before — are an error asking for a ``row_id`` column, while a file imported before is
refused. Nothing is written until every block is converted: the parts are written to a staging folder, which
becomes the output in one rename (on an object store, a copy of each file) after the spec file is written in
it; an error or a kill leaves the output untouched. The staging folder (``.NAME.import-HEX``, hidden beside the
output) holds an owner file naming the host and process writing it (:data:`OWNER_FILE`); a process killed outright
(SIGKILL, a lost machine) cannot remove its folder, and the next import into that output removes every such folder
whose owner ran on this host and is gone (one on another host is left: its process cannot be checked from here).
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import socket
import uuid
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.parquet as pq

from dr_scale.core.errors import UserError, check_output_folder
from dr_scale.io.atomic import atomic_write, interrupts_deferred, url_to_fs
from dr_scale.io.cache import owner_record, process_alive
from dr_scale.io.strict_json import dumps
from dr_scale.logs.catalogue import CATALOGUE_FILE
from dr_scale.logs.importing.convert import file_id_of
from dr_scale.logs.listing import SPEC_FILE
from dr_scale.logs.spec import load_saved

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


#: The file in a staging folder naming the import writing it: ``{"host": …, "pid": …}``; not published.
OWNER_FILE = "_dr_scale_import_owner.json"


@dataclass(frozen=True)
class OutputLog:
    """The log folder an import writes: ``url`` as given, its filesystem and path, and the spec saved there by an
    import before (None for a new log)."""

    url: str
    fs: AbstractFileSystem
    path: str
    saved: dict | None

    @classmethod
    def open(cls, url: str, storage_options: dict | None = None) -> OutputLog:
        """The output at ``url``: a new or empty folder, or a log imported before (else an error)."""
        fs, path = url_to_fs(url, storage_options)
        check_output_folder(url, fs, path)
        spec_path = posixpath.join(path, SPEC_FILE)
        saved = load_saved(fs, spec_path) if fs.exists(spec_path) else None
        if saved is None and fs.isdir(path) and fs.ls(path, detail=False):
            raise UserError(f"{url}: the folder is not empty and holds no {SPEC_FILE}; give a new folder (or a log "
                            "imported before, to add days to it)")
        return cls(url, fs, path, saved)

    @property
    def _saved_files(self) -> dict:
        files: dict = (self.saved or {}).get("row_id_files", {})
        return files

    def row_id_files(self, paths: list[str]) -> dict[str, int]:
        """Each raw file's id in its stable row ids (:func:`~dr_scale.logs.importing.convert.file_id_of`); two
        files with one id, or a file imported into this log before, are an error."""
        earlier = {int(fid): path for path, fid in self._saved_files.items()}
        file_ids = {path: file_id_of(path) for path in paths}
        by_id = dict(earlier)
        for path, fid in file_ids.items():
            if by_id.get(fid, path) != path:
                raise UserError(f"{by_id[fid]} and {path} get the same stable row ids; name a row_id column in the "
                                "spec")
            if fid in earlier:
                raise UserError(f"{path}: already imported into {self.url}; its rows would repeat")
            by_id[fid] = path
        return file_ids

    def check_new_content(self, contents: dict[str, int]) -> None:
        """No two raw files of the import, and none of them and a file imported into this log before, have the same
        rows (:func:`~dr_scale.logs.importing.convert.content_hash`): a copy at another path, compressed or in
        another format would add its rows again."""
        earlier: dict = (self.saved or {}).get("contents", {})
        seen: dict[str, str] = {}
        for path, content in contents.items():
            digest = f"{content:016x}"
            if earlier.get(digest) == path:
                raise UserError(f"{path}: already imported into {self.url}; its rows would repeat")
            if digest in earlier:
                raise UserError(f"{path}: the same rows as {earlier[digest]}, imported into {self.url} before; they "
                                "would be there twice. Import only files whose rows are not in the log yet")
            if digest in seen:
                raise UserError(f"{seen[digest]} and {path} hold the same rows; they would be imported twice: give "
                                "one of them")
            seen[digest] = path

    def check_new_row_ids(self, staging: str, column: str) -> None:
        """With a ``row_id`` column: the staged rows' ids are distinct (across the import's blocks and files), and,
        adding to a log imported before, none is in the log already (the parts whose row-id range, from their
        footers, overlaps the new ids' are read)."""
        new = _row_ids(self.fs, self.fs.find(staging))
        repeated = new[1:][new[1:] == new[:-1]]
        if repeated.size:
            raise UserError(f"column {column!r}: row id {int(repeated[0])} is on two rows of the import (in two "
                            "blocks or files); row ids name rows once")
        if self.saved is None or not new.size:
            return
        lo, hi = int(new.min()), int(new.max())
        old = [p for p in self.fs.find(self.path) if p.endswith(".parquet")
               and posixpath.basename(p) != CATALOGUE_FILE and _may_hold(self.fs, p, lo, hi)]
        both = np.intersect1d(new, _row_ids(self.fs, old)) if old else new[:0]
        if both.size:
            raise UserError(f"{self.url}: already holds row_id {int(both[0])} ({both.size:,} of the new rows' ids); "
                            "these rows were imported before: import only new rows")

    def check_new_days(self, days: Iterable[str]) -> None:
        """Adding to a log imported before: none of ``days`` is in it already."""
        if self.saved is not None:
            clash = [day for day in sorted(days) if self.fs.exists(posixpath.join(self.path, f"date={day}"))]
            if clash:
                raise UserError(f"{self.url}: already holds date={clash[0]}; import that day into a new log, or "
                                "remove its folder first")

    @contextlib.contextmanager
    def staged(self) -> Iterator[str]:
        """A staging folder beside the log (``.NAME.import-HEX``), removed when the body fails or is
        interrupted."""
        parent, name = posixpath.split(self.path.rstrip("/"))
        _remove_abandoned(self.fs, parent, f".{name}.import-")
        staging = posixpath.join(parent, f".{name}.import-{uuid.uuid4().hex}")
        try:
            atomic_write(self.fs, posixpath.join(staging, OWNER_FILE),
                         json.dumps(owner_record()))
            yield staging
        except BaseException:
            with contextlib.suppress(Exception):
                if self.fs.exists(staging):
                    self.fs.rm(staging, recursive=True)
            raise

    def write_spec(self, staging: str, document: dict, file_ids: dict, contents: dict[str, int]) -> None:
        """The spec file in ``staging``: ``document`` (the saved spec), every raw file's content hash (``contents``
        added to those imported before) and, for stable row ids (``file_ids`` not empty), every file's id
        (``file_ids`` added to those imported before), so that a later import refuses a file whose rows are in the
        log or whose ids would clash."""
        earlier: dict = (self.saved or {}).get("contents", {})
        document = {**document, "contents": {**earlier, **{f"{h:016x}": p for p, h in contents.items()}}}
        if file_ids:
            document = {**document, "row_id_files": {**self._saved_files, **file_ids}}
        atomic_write(self.fs, posixpath.join(staging, SPEC_FILE), dumps(document, indent=2))

    def publish(self, staging: str) -> None:
        """Make the staged log the output: one rename of the folder, or (adding days) one per day and the spec
        last."""
        fs, out = self.fs, self.path
        with interrupts_deferred() as interrupted:
            fs.rm(posixpath.join(staging, OWNER_FILE))
            if self.saved is None:
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


def _remove_abandoned(fs: AbstractFileSystem, parent: str, prefix: str) -> None:
    """Remove the staging folders ``parent/PREFIX*`` whose owner file names this host and a process that is gone
    (a killed import's), with a warning naming each."""
    try:
        entries = fs.ls(parent, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return
    host = socket.gethostname()
    for entry in entries:
        folder = entry.rstrip("/")
        if not posixpath.basename(folder).startswith(prefix):
            continue
        try:
            with fs.open(posixpath.join(folder, OWNER_FILE), "rb") as f:
                owner = json.loads(f.read(4096))
            pid = int(owner["pid"])
            mine = owner["host"] == host
        except Exception:  # noqa: BLE001 - no readable owner (being created, or not an import's): leave it
            continue
        if mine and not process_alive(pid):
            fs.rm(folder, recursive=True)
            warnings.warn(f"removed {folder}, the staging folder of an import that was killed (process {pid}); "
                          "nothing of it had been published", stacklevel=2)


def _row_ids(fs: AbstractFileSystem, paths: list[str]) -> np.ndarray:
    """The sorted row ids of the Parquet files among ``paths``."""
    ids = []
    for p in paths:
        if p.endswith(".parquet") and posixpath.basename(p) != CATALOGUE_FILE:
            with fs.open(p, "rb") as f:
                ids.append(pq.read_table(f, columns=["row_id"]).column("row_id").to_numpy())
    return np.sort(np.concatenate(ids)) if ids else np.zeros(0, np.int64)


def _may_hold(fs: AbstractFileSystem, path: str, lo: int, hi: int) -> bool:
    """Whether the part at ``path`` may hold a row id in [lo, hi]: its footer's row-id statistics say so, or it
    has none."""
    with fs.open(path, "rb") as f:
        meta = pq.ParquetFile(f).metadata
    names = meta.schema.names
    if "row_id" not in names:
        return False
    column = names.index("row_id")
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max or (stats.min <= hi and stats.max >= lo):
            return True
    return False
