"""A log's part files and what is read without reading a row: the footers (d, k, whether propensities were
logged, row counts and maxima), the action vocabulary beside the parts.

:func:`list_parts` lists the Parquet part files under a URL (a file, a folder, a glob), keeping a filter's
days; :func:`read_footer` reads one part's footer, :func:`schema_facts` and :func:`footprint_of` what it tells;
:func:`action_vocabulary` reads the value of each action id from :data:`SPEC_FILE`. An opened log
(:class:`ListedLog`, :class:`dr_scale.logs.opened.OpenedLog`) answers each of them from what it read once.
"""

from __future__ import annotations

import abc
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from dr_scale.core.errors import ParameterError
from dr_scale.io.atomic import MANIFEST, MARKER, incomplete_folder, url_to_fs
from dr_scale.logs.contract import IMPORT_HINT, META_ACTIONS, META_FEATURES, PROPENSITY, LogDataError
from dr_scale.logs.filters import LogFilter, log_root, part_paths

if TYPE_CHECKING:
    from dr_scale.logs.catalogue import Catalogue


class ListedLog(abc.ABC):
    """A log whose part files are listed, and whose footers, schema, vocabulary and catalogue are read, once
    (:class:`dr_scale.logs.opened.OpenedLog`): the functions below that take a log's URL return its cached
    facts when given one."""

    @abc.abstractmethod
    def listing(self) -> tuple[object, list]:
        """(the filesystem, the part files as :func:`list_parts` returns them)."""

    @property
    @abc.abstractmethod
    def metadata(self) -> dict[str, int]:
        """:func:`log_metadata` of the first part."""

    @property
    @abc.abstractmethod
    def has_propensity(self) -> bool:
        """:func:`has_propensity` of the first part."""

    @property
    @abc.abstractmethod
    def footprint(self) -> Footprint:
        """:func:`log_footprint`."""

    @property
    @abc.abstractmethod
    def vocabulary(self) -> list | None:
        """:func:`action_vocabulary`."""

    @property
    @abc.abstractmethod
    def catalogue(self) -> Catalogue | None:
        """:func:`read_catalogue`."""


def _parquet_files(fs, folder: str) -> list[str]:
    return sorted(p for p in fs.find(folder) if p.endswith(".parquet"))


def list_parts(url, storage_options: dict | None = None,
               log_filter: LogFilter | None = None) -> tuple[object, list]:
    """The filesystem and the sorted Parquet part files under ``url`` (file, folder or glob).

    A glob may match folders too (``logs/date=2026-11-0[1-5]``): their Parquet files count.
    ``log_filter`` keeps the parts of its days; with a split, each part is a
    :class:`~dr_scale.logs.filters.PartFile` carrying the filter, so that :func:`read_partition` keeps the
    split's rows. An opened log (:class:`ListedLog`) gives its listing, made once, with its own filter.
    """
    if isinstance(url, ListedLog):
        if log_filter is not None:
            raise ParameterError("`log_filter`: an opened log carries its own filter (open_log(url, log_filter=…))")
        return url.listing()
    if log_filter is not None and not isinstance(log_filter, LogFilter):
        raise ParameterError(f"`log_filter` must be a LogFilter, got {type(log_filter).__name__}")
    fs, path = url_to_fs(url, storage_options)
    if any(ch in path for ch in "*?["):
        paths = [p for match in sorted(fs.glob(path))
                 for p in (_parquet_files(fs, match) if fs.isdir(match) else [match])]
    elif fs.isdir(path):
        if incomplete_folder(fs, path):
            raise LogDataError(url, None, f"incomplete: dr-scale began writing this folder ({MARKER}) and was "
                                          f"interrupted before its {MANIFEST}; write it again (generate … --overwrite)")
        paths = _parquet_files(fs, path)
    elif fs.exists(path):
        paths = [path]
    else:
        raise FileNotFoundError(f"{url}: no such file or folder")
    paths = [p for p in paths if not posixpath.basename(p).startswith((".", "_"))]
    if not paths:
        others = [p for p in (fs.find(path) if fs.isdir(path) else []) if not posixpath.basename(p).startswith(".")]
        if others:
            raise LogDataError(url, None, f"no Parquet files found, only {len(others)} other file(s) such as "
                                          f"{posixpath.basename(others[0])}; {IMPORT_HINT}")
        raise FileNotFoundError(f"{url}: no Parquet files found")
    return fs, part_paths(url, paths, log_filter)



def _not_parquet(fs, path: str) -> str | None:
    """What a file that is not Parquet looks like (``"CSV or text"``, ``"JSON"``, ``"gzip-compressed"``…), else None."""
    try:
        with fs.open(path, "rb") as f:
            head = f.read(512)
    except Exception:  # noqa: BLE001 - unreadable: the caller's own error says so
        return None
    if head[:4] == b"PAR1":
        return None
    if head[:2] == b"\x1f\x8b":
        return "a gzip-compressed file"
    text = head.lstrip()
    if text[:1] in (b"{", b"["):
        return "JSON"
    if head and all(32 <= b < 127 or b in (9, 10, 13) or b >= 128 for b in head):
        return "CSV or text"
    return "not Parquet" if head else "an empty file"


def unreadable(fs, path: str, exc: Exception) -> LogDataError:
    """The :class:`LogDataError` of a file the Parquet reader failed on with ``exc``: what the file looks like
    when it is not Parquet (CSV, JSON, gzip…), else the reader's own error."""
    kind = _not_parquet(fs, path)
    if kind is not None:
        return LogDataError(path, None, f"not a Parquet log file (it looks like {kind}); {IMPORT_HINT}")
    return LogDataError(path, None, f"unreadable Parquet file ({type(exc).__name__}: {exc})")


def log_metadata(fs, path=None) -> dict[str, int]:
    """``n_features`` and ``n_actions`` from a part file's schema metadata, where present; of an opened log
    (:class:`ListedLog`, given alone), its first part's, read once."""
    if isinstance(fs, ListedLog):
        return fs.metadata
    return schema_facts(read_footer(fs, path))[0]


def has_propensity(fs, path=None) -> bool:
    """Whether the part file at ``path`` has the ``propensity`` column (the logging probabilities were logged);
    true also for a file that lacks other columns of the contract, which the reader refuses for those. Of an
    opened log (:class:`ListedLog`, given alone), its first part's, read once."""
    if isinstance(fs, ListedLog):
        return fs.has_propensity
    return schema_facts(read_footer(fs, path))[1]


def read_footer(fs, path) -> pq.FileMetaData:
    """The Parquet footer of the part file at ``path`` (one read of the file's tail, no data); an unreadable
    file is a :class:`LogDataError` naming it."""
    path = str(path)
    try:
        with fs.open(path, "rb") as f:
            return pq.ParquetFile(f).metadata
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file
        raise unreadable(fs, path, exc) from exc


def contract_columns(footer: pq.FileMetaData) -> set[str] | None:
    """The column names of a part file's footer, or None if the file is not a log of the contract at all (no
    ``row_id``, ``action`` and ``reward``: a raw table, which the reader refuses as such)."""
    names = set(footer.schema.to_arrow_schema().names)
    return names if {"row_id", "action", "reward"} <= names else None


def schema_facts(footer: pq.FileMetaData) -> tuple[dict[str, int], bool]:
    """(``n_features`` and ``n_actions`` of the dr_scale schema metadata where present, whether the file has
    the ``propensity`` column or is not a log of the contract at all) of a part file's footer."""
    meta, names = footer.metadata or {}, contract_columns(footer)
    out = {}
    if META_FEATURES in meta:
        out["n_features"] = int(meta[META_FEATURES])
    if META_ACTIONS in meta:
        out["n_actions"] = int(meta[META_ACTIONS])
    return out, names is None or PROPENSITY in names


#: The file at a log's root describing how it was imported; its ``actions`` list is the action
#: vocabulary: the value of action id a is ``actions[a]``.
SPEC_FILE = "_dr_scale_spec.json"


def action_vocabulary(url, storage_options: dict | None = None) -> list | None:
    """The action values of the log at ``url`` in id order (``action.values`` of :data:`SPEC_FILE` at the
    log's root, :func:`~dr_scale.logs.filters.log_root`, as ``dr-scale import`` writes it), or None when the
    log has no vocabulary; of an opened log (:class:`ListedLog`), read once.

    A vocabulary that is not a list of distinct values is a :class:`LogDataError` naming the file.
    """
    import json

    if isinstance(url, ListedLog):
        return url.vocabulary
    fs, path = url_to_fs(url, storage_options)
    root = log_root(path)
    if fs.isfile(root):  # one part file, or a file that is no log (the reader says so)
        root = posixpath.dirname(root)
    spec_path = posixpath.join(root, SPEC_FILE)
    try:
        with fs.open(spec_path, "rb") as f:
            document = json.load(f)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        raise LogDataError(spec_path, None, f"unreadable JSON ({exc})") from None
    action = document.get("action") if isinstance(document, dict) else None
    actions = action.get("values") if isinstance(action, dict) else None
    if actions is None:
        return None
    if not isinstance(actions, list) or not actions:
        raise LogDataError(spec_path, None, "'action.values' must be a non-empty list of the action values in id order")
    names = [str(a) for a in actions]
    if len(set(names)) != len(names):
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise LogDataError(spec_path, None, f"'action.values' names {dup!r} twice")
    return actions


@dataclass(frozen=True)
class Footprint:
    """What the part files' footers tell without reading a row: rows, the largest feature id and
    action (Parquet column statistics; None where a writer left them out) and the dr_scale metadata."""

    rows: int
    max_feature: int | None
    max_action: int | None
    metadata: dict


def log_footprint(url, storage_options: dict | None = None) -> Footprint:
    """The :class:`Footprint` of the log at ``url``, from its part files' footers (no data read); of an opened
    log (:class:`ListedLog`), its footers read once."""
    if isinstance(url, ListedLog):
        return url.footprint
    fs, paths = list_parts(url, storage_options)
    return footprint_of([read_footer(fs, p) for p in paths])


def footprint_of(footers: list[pq.FileMetaData]) -> Footprint:
    """The :class:`Footprint` of the part files of these footers (the metadata: the first part's)."""
    rows = 0
    maxima: dict[str, list[int | None]] = {"features": [], "action": []}
    meta = schema_facts(footers[0])[0] if footers else {}
    for footer in footers:
        rows += footer.num_rows
        for g in range(footer.num_row_groups):
            group = footer.row_group(g)
            for c in range(group.num_columns):
                column = group.column(c)
                name = {"features.list.element": "features", "features.list.item": "features",
                        "action": "action"}.get(column.path_in_schema)
                stats = column.statistics
                if name and stats is not None and stats.has_min_max and isinstance(stats.max, int):
                    maxima[name].append(stats.max)
                elif name and group.num_rows:
                    maxima[name].append(None)
    top = {k: (None if not v or None in v else max(x for x in v if x is not None)) for k, v in maxima.items()}
    return Footprint(rows, top["features"], top["action"], meta)

