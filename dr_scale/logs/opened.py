"""One log, opened once: its URL, storage options and filter, its parts listed and its footers read once.

:func:`open_log` gives an :class:`OpenedLog`, which every function taking a log accepts in place of its URL
(:func:`~dr_scale.logs.listing.list_parts`, :func:`~dr_scale.logs.listing.log_metadata`,
:func:`~dr_scale.logs.listing.has_propensity`, :func:`~dr_scale.logs.listing.log_footprint`,
:func:`~dr_scale.logs.listing.action_vocabulary`, :func:`~dr_scale.logs.catalogue.read_catalogue`,
:func:`~dr_scale.logs.reading.read_log`, the fitters, the evaluator, the learners and the report): a command
opens its log once, and each fact of the log costs one round trip to the store in the whole command
(each part's footer at most one read besides the reads of its rows; docs/benchmarks.md counts them on S3).

The facts are read when first asked for, under a lock (Dask's threaded scheduler may ask from several
threads), and kept. Pickled (a task shipped to a worker), the log carries its URL, its filesystem (without
secrets, :class:`~dr_scale.io.storage.PortableFileSystem`), its filter and its listing; not its footers.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.io.storage import url_to_fs
from dr_scale.logs.catalogue import Catalogue, read_catalogue
from dr_scale.logs.contract import Partition
from dr_scale.logs.filters import LogFilter
from dr_scale.logs.listing import (
    Footprint,
    ListedLog,
    action_vocabulary,
    footprint_of,
    list_parts,
    read_footer,
    schema_facts,
)
from dr_scale.logs.reading import read_partition

if TYPE_CHECKING:
    import pyarrow.parquet as pq
    from fsspec import AbstractFileSystem

#: What the state of a pickled log keeps (the rest is read again where needed).
_PICKLED = ("url", "log_filter", "_fs", "_parts")


class OpenedLog(ListedLog):
    """A log at ``url`` (any fsspec URL: a Parquet file, a folder of parts, a glob), read through
    ``storage_options`` and ``log_filter``, whose facts are each read once.

    Parameters
    ----------
    url : str or os.PathLike
        The log's URL or path.
    storage_options : dict or None
        fsspec's options for ``url``.
    log_filter : LogFilter or None
        The days and the split's rows to read (:mod:`dr_scale.logs.filters`); none: every row.

    Attributes
    ----------
    fs, parts
        The filesystem and the part files after the filter's days (listed once; :meth:`listing`); each a
        :class:`~dr_scale.logs.filters.PartFile` carrying the filter when it selects rows, else a path.
    paths
        The parts' paths.
    footers
        Each part's Parquet footer (:meth:`footer`: read once, when first needed).
    metadata, has_propensity
        The first part's ``dr_scale.n_features`` / ``dr_scale.n_actions`` schema metadata, and whether the log
        has the ``propensity`` column.
    footprint
        Rows, largest feature id and action of the whole log from its footers
        (:class:`~dr_scale.logs.listing.Footprint`).
    vocabulary, catalogue
        The action vocabulary and the action catalogue at the log's root, or None.
    fingerprint
        The parts' content identity from their footers (:attr:`fingerprint`).

    Examples
    --------
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs = open_log(example_paths()[0], log_filter=LogFilter(days="2026-11-01:2026-11-02"))
    >>> len(logs.paths), logs.metadata, logs.dimensions()
    (2, {'n_features': 50, 'n_actions': 3}, (50, 3))
    >>> logs.dimensions(n_features=60), logs.footprint.rows, open_log(logs) is logs
    ((60, 3), 4000, True)
    >>> len(logs.fingerprint)
    16
    """

    def __init__(self, url: str | os.PathLike, storage_options: dict | None = None,
                 log_filter: LogFilter | None = None) -> None:
        if not isinstance(url, (str, os.PathLike)):
            raise UserError(f"expected a path or URL (a str), got {type(url).__name__} {url!r:.60}")
        if log_filter is not None and not isinstance(log_filter, LogFilter):
            raise ParameterError(f"`log_filter` must be a LogFilter, got {type(log_filter).__name__}")
        self.url, self.storage_options, self.log_filter = os.fspath(url), storage_options, log_filter or None
        self._fs: Any = None
        self._parts: list[Any] | None = None
        self._facts: dict = {}
        self._footers: dict = {}
        self._lock = threading.RLock()

    # -- pickling: paths + fs + filter, no secrets and no footers ------------------------------------
    def __getstate__(self) -> dict:
        self.listing()
        return {name: getattr(self, name) for name in _PICKLED}

    def __setstate__(self, state: dict) -> None:
        OpenedLog.__init__(self, state["url"], None, state["log_filter"])
        self._fs, self._parts = state["_fs"], state["_parts"]

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"OpenedLog({self.url!r}{f', {self.log_filter!r}' if self.log_filter else ''})"

    # -- the listing ---------------------------------------------------------------------------------
    def listing(self) -> tuple[object, list]:
        """(the filesystem, the part files), listed on first use (:func:`~dr_scale.logs.listing.list_parts`), past
        any listing an earlier reader of the store in this process left in the filesystem's cache."""
        if self._parts is None:
            with self._lock:
                if self._parts is None:
                    url_to_fs(self.url, self.storage_options)[0].invalidate_cache()  # the store's listing of now
                    self._fs, self._parts = list_parts(self.url, self.storage_options, self.log_filter)
        return self._fs, self._parts

    @property
    def fs(self) -> AbstractFileSystem:
        """The log's filesystem (fsspec), from :meth:`listing`."""
        return self.listing()[0]

    @property
    def parts(self) -> list:
        """The part files, listed once (:meth:`listing`), in path order."""
        return self.listing()[1]

    @property
    def paths(self) -> list[str]:
        """The part files' paths."""
        return [str(p) for p in self.parts]

    def read(self, part: str | os.PathLike, **kwargs: Any) -> Partition:
        """One part read and validated with this log's filter (:func:`~dr_scale.logs.reading.read_partition`)."""
        return read_partition(self.fs, str(part), log_filter=self.log_filter, **kwargs)

    # -- the footers -----------------------------------------------------------------------------------
    def footer(self, i: int = 0) -> pq.FileMetaData:
        """Part ``i``'s Parquet footer (``pyarrow.parquet.FileMetaData``), read once."""
        footer = self._footers.get(i)
        if footer is None:
            with self._lock:
                footer = self._footers.get(i)
                if footer is None:
                    footer = self._footers[i] = read_footer(self.fs, self.paths[i])
        return footer

    @property
    def footers(self) -> list:
        """Every part's Parquet footer (:meth:`footer`), each read once."""
        return [self.footer(i) for i in range(len(self.parts))]

    @property
    def metadata(self) -> dict[str, int]:
        """``n_features`` / ``n_actions`` of the first part's dr_scale schema metadata, where present."""
        return dict(schema_facts(self.footer(0))[0])

    @property
    def has_propensity(self) -> bool:
        """Whether the log has a ``propensity`` column (the first part's schema)."""
        return schema_facts(self.footer(0))[1]

    @property
    def footprint(self) -> Footprint:
        """The parts' rows and bytes from their footers (:func:`~dr_scale.logs.contract.footprint_of`), once."""
        out: Footprint = self._fact("footprint", lambda: footprint_of(self.footers))
        return out

    def dimensions(self, n_features: int | None = None, n_actions: int | None = None,
                   fitted: tuple = ()) -> tuple[int | None, int | None]:
        """(d, k) of the log, each by one rule: **the explicit setting** (``n_features``, ``n_actions``), else
        **the log's metadata** (``dr_scale.n_features`` / ``dr_scale.n_actions`` of its first part; k also the
        length of its action vocabulary), else **the data**: the d and k of the first of the ``fitted`` models
        (fitted on the log's rows) that has them, else None — the readers then size each part by its rows, the
        fitters by the largest id + 1 of the rows they read."""
        meta, vocabulary = dict(self.metadata), self.vocabulary
        if vocabulary is not None:
            meta.setdefault("n_actions", len(vocabulary))
        out = []
        for given, what in ((n_features, "n_features"), (n_actions, "n_actions")):
            if given is None:
                given = meta.get(what, next((getattr(m, what) for m in fitted if getattr(m, what, None) is not None),
                                            None))
            out.append(given)
        return out[0], out[1]

    # -- files beside the parts -------------------------------------------------------------------------
    @property
    def vocabulary(self) -> list | None:
        """The action vocabulary beside the log (the values its action ids name), or None; read once."""
        out: list[Any] | None = self._fact("vocabulary", lambda: action_vocabulary(self.url, self.storage_options))
        return out

    @property
    def catalogue(self) -> Catalogue | None:
        """The action catalogue beside the log (the actions' features and categories), or None; read once."""
        out: Catalogue | None = self._fact("catalogue", lambda: read_catalogue(self.url, self.storage_options))
        return out

    @property
    def fingerprint(self) -> str:
        """What the parts hold, from their footers alone (16 hex digits): a hash over the parts in order of each
        one's path below the log's root, rows, row groups, and per row group its rows, byte size and the
        ``row_id`` column's statistics (min, max, nulls). It identifies the log's content as written: a part
        added, removed, renamed or rewritten with other rows changes it; the same parts copied to another
        store or folder keep it. It does not hash the values themselves (two writes of the same row ids with
        other rewards of the same encoded size would share it)."""
        out: str = self._fact("fingerprint", self._fingerprint)
        return out

    def _fingerprint(self) -> str:
        digest = hashlib.blake2b(digest_size=8)
        paths = self.paths
        prefix = _common_folder(paths)
        for path, footer in zip(paths, self.footers):
            digest.update(f"{path[len(prefix):]}|{footer.num_rows}|{footer.num_row_groups}".encode())
            for g in range(footer.num_row_groups):
                group = footer.row_group(g)
                digest.update(f"|{group.num_rows}:{group.total_byte_size}".encode())
                for c in range(group.num_columns):
                    column = group.column(c)
                    stats = column.statistics
                    if column.path_in_schema == "row_id" and stats is not None and stats.has_min_max:
                        digest.update(f":{stats.min}:{stats.max}:{stats.null_count}".encode())
            digest.update(b"\n")
        return digest.hexdigest()

    def _fact(self, name: str, read: Callable[[], Any]) -> Any:
        if name not in self._facts:
            with self._lock:
                if name not in self._facts:
                    self._facts[name] = read()
        return self._facts[name]


def _common_folder(paths: list[str]) -> str:
    """The longest folder (ending in "/") that holds every path."""
    first, last = min(paths), max(paths)
    i = 0
    while i < min(len(first), len(last)) and first[i] == last[i]:
        i += 1
    return first[:first.rfind("/", 0, i) + 1] if len(paths) > 1 else first[:first.rfind("/") + 1]


def open_log(logs: str | os.PathLike | OpenedLog, storage_options: dict | None = None,
             log_filter: LogFilter | None = None) -> OpenedLog:
    """The log ``logs`` opened (:class:`OpenedLog`): a URL with its ``storage_options`` and ``log_filter``, or
    an opened log as it is (so that every entry point opens what it is given once).

    Parameters
    ----------
    logs : str or OpenedLog
        The log's URL (a Parquet file, a folder of parts, a glob; any fsspec URL), or the log opened.
    storage_options : dict or None
        fsspec's options for the URL.
    log_filter : LogFilter or None
        The days and the split's rows to read (:mod:`dr_scale.logs.filters`).

    Returns
    -------
    OpenedLog
        ``logs`` itself when it is one; an opened log given another filter or other storage options than its
        own is a :class:`~dr_scale.core.errors.ParameterError` (its facts were read through its own).

    Examples
    --------
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs = open_log(example_paths()[0], log_filter=LogFilter(split="test"))
    >>> open_log(logs) is logs, str(logs) == example_paths()[0], str(logs.log_filter)
    (True, True, 'test rows (u(row_id) < 0.2, split seed 0)')
    """
    if isinstance(logs, OpenedLog):
        if log_filter is not None and log_filter != logs.log_filter:
            raise ParameterError(f"`log_filter` {log_filter}: the log {logs} was opened with "
                                 f"{logs.log_filter or 'no filter'}")
        if storage_options and storage_options != logs.storage_options:
            raise ParameterError(f"`storage_options`: the log {logs} was opened with other storage options")
        return logs
    return OpenedLog(logs, storage_options, log_filter)
