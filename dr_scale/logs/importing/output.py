"""The log an import writes: its folder checked, a log imported before there (whose saved spec lends the
vocabulary and the files' row ids), the staging folder, and publishing.

A log already at ``--out`` (imported before, with its ``_dr_scale_spec.json``) takes new days: the spec file
stored with the log keeps each file's id of its stable row ids, and two files with one id — in one import, or
a file and one imported before — are an error asking for a ``row_id`` column, while a file imported before is
refused. Nothing is written until every block is converted: the parts are written to a staging folder, which
becomes the output in one rename (on an object store, a copy of each file) after the spec file is written in
it; an error or a kill leaves the output untouched (a killed import leaves the hidden staging folder
``.NAME.import-HEX`` beside it, which readers of the output never see).
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dr_scale.core.errors import UserError, check_output_folder
from dr_scale.io.atomic import atomic_write, interrupts_deferred, url_to_fs
from dr_scale.io.strict_json import dumps
from dr_scale.logs.importing.convert import file_id_of
from dr_scale.logs.listing import SPEC_FILE
from dr_scale.logs.spec import load_saved

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


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
        staging = posixpath.join(parent, f".{name}.import-{uuid.uuid4().hex}")
        try:
            yield staging
        except BaseException:
            with contextlib.suppress(Exception):
                if self.fs.exists(staging):
                    self.fs.rm(staging, recursive=True)
            raise

    def write_spec(self, staging: str, document: dict, file_ids: dict) -> None:
        """The spec file in ``staging``: ``document`` (the saved spec) and, for stable row ids (``file_ids`` not
        empty), every file's id (``file_ids`` added to those imported before), so that a later import refuses a
        file whose ids would clash."""
        if file_ids:
            document = {**document, "row_id_files": {**self._saved_files, **file_ids}}
        atomic_write(self.fs, posixpath.join(staging, SPEC_FILE), dumps(document, indent=2))

    def publish(self, staging: str) -> None:
        """Make the staged log the output: one rename of the folder, or (adding days) one per day and the spec
        last."""
        fs, out = self.fs, self.path
        with interrupts_deferred() as interrupted:
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
