"""Outputs never destroy inputs: the one rule of every command that writes, checked before the work.

An output (a file: ``fit --out``, ``fit-propensity --out``, ``learn --out``, ``evaluate --json``; a folder:
``report --out``, ``import --out``, ``generate … --out``) is refused, with a line naming it and the reason, when

* it **is an input** of the run (the log, a model or policy file, the policies file …), **lies inside an input
  log** (a part of the log being fitted), or **holds an input** (a folder around the log);
* it is **an existing file dr-scale did not write**: one not listed in the manifest :data:`OUTPUTS` of its folder;
* it is **a non-empty folder holding files dr-scale did not write** (a file folder output): every entry must be
  listed in the folder's :data:`OUTPUTS`, or be dr-scale's own bookkeeping (:data:`OWN`, temporaries).

Each writer records what it wrote in :data:`OUTPUTS` (:func:`record_outputs`), a JSON file beside the outputs:
``{"format": "dr-scale/outputs", "files": [names relative to the folder]}``. ``--overwrite`` and the report's
plot clean-up remove only what it lists. A dr-scale file written before the manifest existed is a file dr-scale
did not write here: remove it yourself, once.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterable
from typing import Any

from dr_scale.core.errors import UserError
from dr_scale.io.atomic import MANIFEST, MARKER, TEMPORARY, atomic_write, incomplete_folder, written_by_dr_scale
from dr_scale.io.storage import url_to_fs

#: The manifest of what dr-scale wrote in a folder.
OUTPUTS = "_dr_scale_outputs.json"
FORMAT = "dr-scale/outputs"
#: dr-scale's bookkeeping files in an output folder (the writer's marker and manifests).
OWN = frozenset({OUTPUTS, MARKER, MANIFEST})


def recorded(fs: Any, folder: str) -> set[str]:
    """The names (relative to ``folder``) its :data:`OUTPUTS` lists; empty without one (or an unreadable one)."""
    try:
        with fs.open(posixpath.join(folder, OUTPUTS), "rb") as f:
            document = json.loads(f.read(16 << 20))
    except Exception:  # noqa: BLE001 - missing or unreadable: nothing recorded
        return set()
    files = document.get("files") if isinstance(document, dict) and document.get("format") == FORMAT else None
    return {str(name) for name in files} if isinstance(files, list) else set()


def record_outputs(fs: Any, folder: str, names: Iterable[str]) -> None:
    """Add ``names`` (relative to ``folder``) to the folder's :data:`OUTPUTS`, written atomically."""
    names = set(names) - OWN
    known = recorded(fs, folder)
    if names - known:
        atomic_write(fs, posixpath.join(folder, OUTPUTS),
                     json.dumps({"format": FORMAT, "files": sorted(known | names)}, indent=1))


def record_file(url: str, storage_options: dict | None = None) -> None:
    """Record the file at ``url`` (just written) in its folder's :data:`OUTPUTS`."""
    fs, path = url_to_fs(url, storage_options)
    folder, name = posixpath.split(path)
    record_outputs(fs, folder, [name])


def _where(url: str, storage_options: dict | None) -> tuple[tuple, str]:
    """(the filesystem's protocol, the path): a local path resolved (symbolic links, ``..``)."""
    fs, path = url_to_fs(url, storage_options)
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if "file" in protocol or "local" in protocol:
        return ("file",), os.path.realpath(path)
    return protocol, path.rstrip("/")


def check_not_an_input(url: str, inputs: Iterable[str | None], storage_options: dict | None = None) -> None:
    """Refuse an output ``url`` that is one of ``inputs``, lies inside one (a part of a log folder) or holds one."""
    protocol, out = _where(url, storage_options)
    for given in filter(None, inputs):
        given = str(given)
        cut = min((given.find(c) for c in "*?[" if c in given), default=-1)  # a glob: the folder before it
        p, inp = _where(given if cut < 0 else given[:cut].rsplit("/", 1)[0] or ".", storage_options)
        if p != protocol:
            continue
        if out == inp:
            raise UserError(f"{url}: is an input of this run ({given}); writing it would destroy it: choose "
                            "another output path")
        if out.startswith(inp.rstrip("/") + "/"):
            raise UserError(f"{url}: lies inside the input {given}; writing it would change or destroy that input: "
                            "choose an output path outside it")
        if inp.startswith(out.rstrip("/") + "/"):
            raise UserError(f"{url}: holds the input {given}; choose an output path that does not contain the "
                            "run's inputs")


def check_output_file(url: str, inputs: Iterable[str | None] = (), storage_options: dict | None = None) -> None:
    """The rule (module docstring) for an output file, before the work: besides
    :func:`dr_scale.core.errors.check_output_file` (a folder, too long a name, a read-only folder), not an input,
    and not an existing file dr-scale did not write."""
    from dr_scale.core.errors import check_output_file as check_writable

    fs, path = url_to_fs(url, storage_options)
    check_writable(url, fs, path)
    check_not_an_input(url, inputs, storage_options)
    if fs.exists(path):
        folder, name = posixpath.split(path)
        if name not in recorded(fs, folder):
            raise UserError(f"{url}: exists and dr-scale did not write it (it is not listed in {OUTPUTS} beside it); "
                            "choose a new name, or move or remove the file yourself")


def foreign_entries(fs: Any, root: str, allowed: Iterable[str] = ()) -> list[str]:
    """The entries of the folder ``root`` dr-scale did not write: not in its :data:`OUTPUTS`, not :data:`OWN`,
    not a temporary file, not one of ``allowed`` (names a writer recognises as its own)."""
    if not fs.isdir(root):
        return []
    known = recorded(fs, root) | OWN | set(allowed)
    out = []
    for entry in fs.ls(root, detail=False):
        name = posixpath.basename(entry.rstrip("/"))
        if name in known or TEMPORARY.match(name):
            continue
        if fs.isdir(entry) and any(k.startswith(name + "/") for k in known):
            out += [f"{name}/{e}" for e in foreign_entries(fs, entry, {k[len(name) + 1:] for k in known
                                                                        if k.startswith(name + "/")})]
            continue
        out.append(name)
    return out


def check_output_folder(url: str, inputs: Iterable[str | None] = (), storage_options: dict | None = None,
                        allowed: Iterable[str] = ()) -> None:
    """The rule (module docstring) for an output folder, before the work: besides
    :func:`dr_scale.core.errors.check_output_folder` (a file, too long a name, a read-only folder), not an input,
    and no entry dr-scale did not write in it (:func:`foreign_entries`)."""
    from dr_scale.core.errors import check_output_folder as check_writable

    fs, root = url_to_fs(url, storage_options)
    check_writable(url, fs, root)
    check_not_an_input(url, inputs, storage_options)
    foreign = foreign_entries(fs, root, allowed)
    if foreign:
        raise UserError(f"{url}: holds {foreign[0]}{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''}, "
                        f"which dr-scale did not write (not listed in {OUTPUTS}); choose a new or empty folder")


def publish_folder(fs: Any, root: str, manifest: str) -> None:
    """A folder writer's last step: every file under ``root`` recorded in its :data:`OUTPUTS`, then the writer's
    ``manifest`` (JSON text) written as :data:`~dr_scale.io.atomic.MANIFEST`, which marks the folder complete."""
    prefix = root.rstrip("/") + "/"
    record_outputs(fs, root, [p[len(prefix):] for p in fs.find(root) if p.startswith(prefix)])
    atomic_write(fs, posixpath.join(root, MANIFEST), manifest)


#: The files a folder writer began before it was interrupted (a marker, no manifest, nothing recorded yet).
PART_FILES = re.compile(r"^(date=[^/]+|part-\d+\.parquet|_actions\.parquet|_target_policy\.npz|_policy_[^/]+\.npz)$")


def check_replaceable(url: str, fs: Any, root: str) -> None:
    """``--overwrite`` of the folder ``root``: every entry is dr-scale's (:func:`foreign_entries`; in a folder whose
    writer was interrupted — :func:`~dr_scale.io.atomic.incomplete_folder` — also its parts), else refused with one
    of the others named: nothing of the user's is deleted."""
    foreign = foreign_entries(fs, root)
    if incomplete_folder(fs, root):
        foreign = [name for name in foreign if not PART_FILES.match(name)]
    if foreign:
        raise UserError(f"{url}: not replaced: it holds {foreign[0]}"
                        f"{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''}, which dr-scale did not "
                        f"write (not listed in {OUTPUTS}); move it out, or choose another folder")


def prepare_output_folder(url: str, fs, root: str, *, overwrite: bool, writer: str) -> None:
    """Make ``root`` ready for a writer that fills a whole folder; claim it with the :data:`MARKER`.

    A missing or empty folder is used as is. A non-empty one is refused unless ``overwrite``, and
    then replaced only if dr-scale wrote it (:func:`written_by_dr_scale`): a folder of notes, or a
    file (a policy ``.npz``) where the folder should be, is refused with a line naming it, never
    deleted. The marker is written before the first part, so an interrupted writer's folder is
    recognised — by ``--overwrite``, and by readers, which refuse a marked folder without its manifest.
    """
    from dr_scale.core.errors import ParameterError
    from dr_scale.core.errors import check_output_folder as check_writable

    if fs.exists(root) and not fs.isdir(root):
        raise UserError(f"{url}: is a file, not a folder; --overwrite replaces only a folder dr-scale wrote "
                        "(it holds _manifest.json or _dr_scale): choose another path")
    check_writable(url, fs, root)
    entries = fs.ls(root, detail=False) if fs.exists(root) else []
    if entries:
        if not overwrite:
            raise ParameterError(f"{url}: exists and is not empty; choose a new folder or pass `overwrite`")
        if not written_by_dr_scale(fs, root):
            example = posixpath.basename(sorted(entries)[0].rstrip("/"))
            raise UserError(f"{url}: not replaced: dr-scale did not write this folder (no {MANIFEST} or {MARKER} in "
                            f"it; it holds e.g. {example}); choose another folder, or remove it yourself")
        check_replaceable(url, fs, root)  # every file in it dr-scale's: nothing of the user's is deleted
        fs.rm(root, recursive=True)
    import socket

    atomic_write(fs, posixpath.join(root, MARKER), json.dumps({"writer": writer, "host": socket.gethostname(),
                                                                "pid": os.getpid()}))
