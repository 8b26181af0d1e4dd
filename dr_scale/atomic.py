"""Atomic writes through fsspec: write to a temporary name beside the target, then rename.

A reader never sees a half-written file: either the old content or the new. On an
object store the final "rename" is a server-side copy of a complete object, which is
equally all-or-nothing for readers.
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid

from dr_scale.storage import url_to_fs  # noqa: F401 - the writers' filesystems, which pickle without secrets


def temporary_name(path: str) -> str:
    head, tail = posixpath.split(path)
    return posixpath.join(head, f".{tail}.tmp-{uuid.uuid4().hex}")


@contextlib.contextmanager
def atomic_open(fs, path: str, mode: str = "wb"):
    """Open ``path`` for writing such that it appears only once complete."""
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
    first (e.g. a manifest) last. The renames are separate operations, not one
    transaction.
    """
    staged: list[tuple[str, str]] = []
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
    for tmp, path in staged:
        fs.mv(tmp, path)
