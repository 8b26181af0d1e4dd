"""Atomic writes through fsspec: write to a temporary name beside the target, then rename.

A reader never sees a half-written file: either the old content or the new. On an
object store the final "rename" is a server-side copy of a complete object, which is
equally all-or-nothing for readers.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import signal
import threading
import uuid
from collections.abc import Iterator

from dr_scale.core.errors import UserError
from dr_scale.io.storage import url_to_fs  # noqa: F401 - the writers' filesystems, which pickle without secrets


def _refuse_folder(fs, path: str) -> None:
    """A folder at the target would receive the file inside it (``mv`` into a folder): refuse."""
    if fs.isdir(path):
        raise UserError(f"{path}: is a folder; give a file name for this output")


def temporary_name(path: str) -> str:
    """``.NAME.tmp-<32 hex>`` beside ``path`` (:data:`dr_scale.core.errors.TEMPORARY_NAME_EXTRA` bytes longer)."""
    head, tail = posixpath.split(path)
    return posixpath.join(head, f".{tail}.tmp-{uuid.uuid4().hex}")


@contextlib.contextmanager
def atomic_open(fs, path: str, mode: str = "wb"):
    """Open ``path`` for writing such that it appears only once complete."""
    _refuse_folder(fs, path)
    tmp = temporary_name(path)
    parent = posixpath.dirname(path)
    if parent:
        fs.makedirs(parent, exist_ok=True)
    try:
        with fs.open(tmp, mode) as f:
            yield f
        fs.mv(tmp, path)
    except BaseException:
        with contextlib.suppress(Exception):
            if fs.exists(tmp):
                fs.rm(tmp)
        raise


def atomic_write(fs, path: str, data: bytes | str) -> None:
    """Write ``data`` (bytes or text) to ``path`` atomically."""
    with atomic_open(fs, path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def atomic_write_all(fs, files: dict[str, bytes | str]) -> None:
    """Write several files, none of which changes until all are completely written.

    Every file goes to a temporary name beside its target first; a failure while
    writing any of them removes the temporaries and leaves every target untouched.
    Only then are they renamed, in the order given, so put the file readers open
    first (e.g. a manifest) last: it is the commit marker. The renames are separate
    operations, not one transaction; an interrupt (Ctrl-C) that arrives during them takes
    effect once all are done, as a ``KeyboardInterrupt`` saying so. A kill (SIGKILL)
    between two renames leaves the earlier files new and the marker old, and temporary
    files that :func:`remove_temporaries` clears.
    """
    staged: list[tuple[str, str]] = []
    for path in files:
        _refuse_folder(fs, path)
    try:
        for path, data in files.items():
            tmp = temporary_name(path)
            parent = posixpath.dirname(path)
            if parent:
                fs.makedirs(parent, exist_ok=True)
            staged.append((tmp, path))
            with fs.open(tmp, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(Exception):
                if fs.exists(tmp):
                    fs.rm(tmp)
        raise
    with interrupts_deferred() as interrupted:
        for tmp, path in staged:
            fs.mv(tmp, path)
    if interrupted:
        raise KeyboardInterrupt(f"the interrupt came while publishing; all {len(staged)} files were written "
                                "completely before it took effect")


TEMPORARY = re.compile(r"^\..+\.tmp-[0-9a-f]{32}$")


def remove_temporaries(fs, folder: str) -> list[str]:
    """Remove the temporary files (:func:`temporary_name`) a killed writer left in ``folder``.

    Only for folders with one writer at a time (a concurrent writer's temporaries would go too).
    """
    if not fs.isdir(folder):
        return []
    stale = [p for p in fs.ls(folder, detail=False) if TEMPORARY.match(posixpath.basename(p.rstrip("/")))]
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            fs.rm(path)
    return stale


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[list[int]]:
    """Hold Ctrl-C (SIGINT) for the block; yields a list that is non-empty if one arrived.

    Only the main thread can set signal handlers; elsewhere the block runs unshielded.
    """
    arrived: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield arrived
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: arrived.append(signum))
    try:
        yield arrived
    finally:
        signal.signal(signal.SIGINT, previous)


# -- folders dr-scale writes, and what --overwrite may replace -------------------------------------------
#: The marker a dr-scale writer puts in an output folder before its first part: the folder is dr-scale's
#: (``--overwrite`` may replace it), and without the writer's manifest beside it, it is incomplete.
MARKER = "_dr_scale"
#: The manifest a generator writes last: its presence marks a complete folder.
MANIFEST = "_manifest.json"
REPORT_FILE, REPORT_SCHEMA = "report.json", "dr-scale/report"


def _json_of(fs, path: str):
    import json

    try:
        with fs.open(path, "rb") as f:
            return json.loads(f.read(1 << 20))
    except Exception:  # noqa: BLE001 - unreadable or not JSON: not dr-scale's
        return None


def written_by_dr_scale(fs, root: str) -> bool:
    """True if the folder ``root`` is one dr-scale wrote: it holds the :data:`MARKER`, a generator's
    :data:`MANIFEST` (``"generator": "dr_scale…"``) or a report's ``report.json`` (schema ``dr-scale/report``)."""
    if fs.exists(posixpath.join(root, MARKER)):
        return True
    manifest = _json_of(fs, posixpath.join(root, MANIFEST))
    if isinstance(manifest, dict) and str(manifest.get("generator", "")).startswith("dr_scale"):
        return True
    report = _json_of(fs, posixpath.join(root, REPORT_FILE))
    return isinstance(report, dict) and report.get("schema") == REPORT_SCHEMA


def incomplete_folder(fs, root: str) -> bool:
    """True if dr-scale began writing ``root`` (the :data:`MARKER`) and did not finish (no :data:`MANIFEST`)."""
    return fs.exists(posixpath.join(root, MARKER)) and not fs.exists(posixpath.join(root, MANIFEST))


@contextlib.contextmanager
def incomplete_on_interrupt(url: str):
    """An interrupt while a folder writer fills ``url``: say what it leaves (the marker, no manifest)."""
    try:
        yield
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"{url} is left incomplete ({MARKER} without {MANIFEST}): readers refuse it; "
                                "write it again with --overwrite") from None
