"""The partitions of a log share: listing, the date window, and each partition's identity.

A partition is one Parquet part file. Its **identity** is what the filesystem can
tell about its content without reading it: the path, the size, and the first of a
content checksum (S3/MinIO ``ETag``, GCS ``md5Hash``/``crc32c``, Azure ``etag`` …)
or, failing that, a modification time (local ``mtime``, ``LastModified``,
``created`` for ``memory://``). A cached state is trusted only for an identical
identity, so a rewritten partition is recomputed.

Dates come from hive-style path segments ``date=YYYY-MM-DD`` (also ``dt=``, ``day=``,
``ds=``, and ``YYYYMMDD``). ``window = Nd`` keeps the partitions of the N days ending
at ``until`` (default: the newest date in the share).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Any

from dr_scale.core.errors import ParameterError
from dr_scale.logs.filters import DATE_SEGMENT, LogFilter, partition_date  # noqa: F401 - the report's names for them
from dr_scale.logs.opened import open_log

CHECKSUM_KEYS = ("ETag", "etag", "md5Hash", "crc32c", "content_md5", "checksum")
TIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "created")
WINDOW = re.compile(r"^(\d+)\s*([dw])$")
MAX_WINDOW_DAYS = 36_525  # a century


@dataclass(frozen=True)
class PartitionInfo:
    """A part file, its date (None if not date-partitioned), its identity and the filter of the rows to read
    from it (the log's, when it selects rows within parts)."""

    path: str
    date: datetime.date | None
    identity: dict
    log_filter: LogFilter | None = None

    @property
    def day(self) -> str | None:
        """The partition's date as YYYY-MM-DD, or None for an undated one."""
        return self.date.isoformat() if self.date else None


def identity(fs, path: str, info: dict) -> dict:
    """Path, size and the best content fingerprint the filesystem offers, as strings."""
    ident = {"path": path, "size": str(info.get("size"))}
    for keys, label in ((CHECKSUM_KEYS, "checksum"), (TIME_KEYS, "mtime")):
        key = next((k for k in keys if info.get(k) is not None), None)
        if key is not None:
            value = info[key]
            ident[label] = f"{key}={value.isoformat() if hasattr(value, 'isoformat') else value!r}"
            break
    return ident


def list_partitions(logs: Any, storage_options: dict | None = None) -> tuple[Any, list[PartitionInfo]]:
    """The filesystem and every part file of the log ``logs`` (a URL, or opened:
    :func:`~dr_scale.logs.opened.open_log`, whose listing is the store's as it was opened), sorted by path, with
    identities."""
    logs = open_log(logs, storage_options)
    fs, _ = logs.listing()
    rows = logs.log_filter if logs.log_filter and logs.log_filter.selects_rows else None
    return fs, [PartitionInfo(p, partition_date(p), _with_rows(identity(fs, p, fs.info(p)), rows), rows)
                for p in logs.paths]


def _with_rows(ident: dict, rows: LogFilter | None) -> dict:
    """The identity of a partition read with a split names the split: a state of other rows is not trusted."""
    return {**ident, "rows": str(rows)} if rows is not None else ident


def parse_window(window: str | None) -> int | None:
    """Days in a window spelled ``7d`` or ``2w``; None for ``all`` (or no window)."""
    if window is None or window.strip().lower() == "all":
        return None
    match = WINDOW.match(window.strip().lower())
    if not match or int(match.group(1)) < 1:
        raise ParameterError(f"`window` {window!r}: use Nd (days), Nw (weeks) or all")
    days = int(match.group(1)) * (7 if match.group(2) == "w" else 1)
    if days > MAX_WINDOW_DAYS:
        raise ParameterError(f"`window` {window!r}: at most {MAX_WINDOW_DAYS} days; use all for every partition")
    return days


def select_window(parts: list[PartitionInfo], days: int | None,
                  until: datetime.date | None = None) -> tuple[list[PartitionInfo], dict]:
    """The partitions inside the window, and the window's description for the report."""
    if days is None:
        if until is not None:
            raise ParameterError("`until` needs a window of Nd or Nw; with the whole share (all) it would be ignored")
        dates = [p.date for p in parts if p.date]
        return parts, {"days": None, "first": min(dates).isoformat() if dates else None,
                       "last": max(dates).isoformat() if dates else None}
    undated = [p.path for p in parts if p.date is None]
    if undated:
        raise ParameterError(f"a `window` of {days} days needs date-partitioned logs (date=YYYY-MM-DD/…); "
                             f"{undated[0]} has no date in its path (use all)")
    last = until or max(p.date for p in parts if p.date is not None)
    try:
        first = last - datetime.timedelta(days=days - 1)
    except OverflowError:
        raise ParameterError(f"a `window` of {days} days ending {last} starts before year 1; "
                             "use a shorter one") from None
    chosen = [p for p in parts if p.date is not None and first <= p.date <= last]
    if not chosen:
        raise FileNotFoundError(f"no partitions dated {first} … {last}: check the window and until")
    return chosen, {"days": days, "first": first.isoformat(), "last": last.isoformat()}
