"""Which rows of a log to read: a range of days and a keyed train/test split (:class:`LogFilter`).

Every reader of the log contract applies a filter in the same place
(:func:`dr_scale.logs.listing.list_parts` keeps the part files of the chosen days,
:func:`~dr_scale.logs.reading.read_partition` and
:func:`~dr_scale.logs.reading.partition_from_table` keep the chosen rows of a part), so the
commands, the Python API, a local run and a cluster select the same rows.

**Days.** ``days="2019-11-24:2019-11-28"`` keeps the part files under a hive-style
``date=YYYY-MM-DD`` folder (also ``dt=``, ``day=``, ``ds=`` and ``YYYYMMDD``) dated from the
first to the last day, both included; ``"2019-11-24"`` is one day, ``":2019-11-28"`` every
day up to the 28th, ``"2019-11-24:"`` every day from the 24th. A table (a DataFrame's
partition) is filtered by its ``date`` column instead, where it has one.

**Split.** Row i is a *test* row when

    u_i = keyed_random.uniform(row_id_i, split_seed, "train/test split") < test_fraction,

a *train* row otherwise (:func:`in_test`). u_i depends on the row's id and the seed only,
so a row is in the same half however the log is partitioned, and the two halves are
disjoint and together the whole log. Cross-fitting folds and held-out rows use other
purpose strings ("cross-fit fold", "lambda holdout"), so they are drawn independently of
the split: ``learn --split train`` cross-fits within the train rows as it would on any log.

A filter travels with an opened log (:func:`dr_scale.logs.opened.open_log`), which every function taking a
log accepts; a per-part task carries it beside the part's path (:class:`PartFile`).
"""

from __future__ import annotations

import datetime
import posixpath
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dr_scale.core import keyed_random
from dr_scale.core.errors import ParameterError, UserError

#: The purpose string of the train/test split's keyed draws.
SPLIT_PURPOSE = "train/test split"
SPLITS = ("train", "test")
DEFAULT_TEST_FRACTION = 0.2
#: A hive-style date folder: ``date=2019-11-24`` (also dt=, day=, ds=; dashes optional).
DATE_SEGMENT = re.compile(r"(?:^|/)(?:date|dt|day|ds)=(\d{4})-?(\d{2})-?(\d{2})(?:/|$)")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def partition_date(path: str) -> datetime.date | None:
    """The date of a hive-style ``date=YYYY-MM-DD`` segment of ``path``, if any.

    >>> partition_date("logs/date=2019-11-24/part-00000.parquet")
    datetime.date(2019, 11, 24)
    >>> partition_date("logs/part-00000.parquet") is None
    True
    """
    match = DATE_SEGMENT.search(path)
    if not match:
        return None
    try:
        return datetime.date(*map(int, match.groups()))
    except ValueError as exc:
        raise UserError(f"{path}: bad date in partition path ({exc})") from None


@dataclass(frozen=True)
class DayRange:
    """Days from ``first`` to ``last``, both included; None is an open end.

    >>> r = DayRange.parse("2019-11-24:2019-11-28")
    >>> r.first, r.last, str(r)
    (datetime.date(2019, 11, 24), datetime.date(2019, 11, 28), '2019-11-24:2019-11-28')
    >>> DayRange.parse("2019-11-24").contains(datetime.date(2019, 11, 24))
    True
    >>> str(DayRange.parse(":2019-11-28"))
    ':2019-11-28'
    """

    first: datetime.date | None
    last: datetime.date | None

    @classmethod
    def parse(cls, text: str) -> DayRange:
        """``FIRST:LAST``, ``DAY``, ``:LAST`` or ``FIRST:`` (days as YYYY-MM-DD)."""
        if not isinstance(text, str):
            raise ParameterError(f"`days` must be a string such as '2019-11-24:2019-11-28', got {text!r}")
        first, colon, last = text.strip().partition(":")
        if not colon:
            last = first
        if not (first or last):
            raise ParameterError(f"`days` {text!r}: give FIRST:LAST, DAY, :LAST or FIRST: (days as YYYY-MM-DD)")
        ends: list[datetime.date | None] = []
        for end in (first, last):
            if not end:
                ends.append(None)
                continue
            try:
                if not _DAY.match(end):
                    raise ValueError("not YYYY-MM-DD")
                ends.append(datetime.date.fromisoformat(end))
            except ValueError:
                raise ParameterError(f"`days` {text!r}: {end!r} is not a day YYYY-MM-DD (give FIRST:LAST, DAY, "
                                     ":LAST or FIRST:)") from None
        if ends[0] and ends[1] and ends[0] > ends[1]:
            raise ParameterError(f"`days` {text!r}: the first day is after the last")
        return cls(*ends)

    def contains(self, day: datetime.date) -> bool:
        """Whether ``day`` is in [first, last] (an open end holds every day on its side)."""
        return (self.first is None or self.first <= day) and (self.last is None or day <= self.last)

    def __str__(self) -> str:
        first, last = (d.isoformat() if d else "" for d in (self.first, self.last))
        return first if first and first == last else f"{first}:{last}"


def in_test(row_id: np.ndarray, test_fraction: float, split_seed: int = 0) -> np.ndarray:
    """Whether each row is a test row: u(row_id) < ``test_fraction``, u keyed by (``split_seed``, "train/test split").

    Parameters
    ----------
    row_id : ndarray of int64
        The rows' stable ids.
    test_fraction : float
        The expected share of test rows, in (0, 1).
    split_seed : int
        The key of the draws.

    Returns
    -------
    ndarray of bool
        True for the test rows; the others are the train rows.

    Examples
    --------
    >>> import numpy as np
    >>> test = in_test(np.arange(100_000), 0.2)
    >>> round(float(test.mean()), 2)
    0.2
    >>> bool((in_test(np.arange(10), 0.2)[3:7] == in_test(np.arange(3, 7), 0.2)).all())
    True
    """
    return keyed_random.uniform(np.asarray(row_id), split_seed, SPLIT_PURPOSE) < test_fraction


@dataclass(frozen=True)
class LogFilter:
    """The rows of a log to read: the days ``days`` and the ``split`` half (module docstring).

    Parameters
    ----------
    days : str or DayRange, optional
        ``"FIRST:LAST"``, ``"DAY"``, ``":LAST"`` or ``"FIRST:"``: the date partitions to read.
    split : {"train", "test"}, optional
        The half of the keyed split to read (default: every row).
    test_fraction : float
        The share of test rows, in (0, 1) (default 0.2).
    split_seed : int
        The key of the split (default 0).

    Examples
    --------
    >>> f = LogFilter(days="2019-11-24:2019-11-28", split="test", test_fraction=0.25)
    >>> str(f)
    'days 2019-11-24:2019-11-28, test rows (u(row_id) < 0.25, split seed 0)'
    """

    days: DayRange | str | None = None
    split: str | None = None
    test_fraction: float = DEFAULT_TEST_FRACTION
    split_seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.days, str):
            object.__setattr__(self, "days", DayRange.parse(self.days))
        elif self.days is not None and not isinstance(self.days, DayRange):
            raise ParameterError(f"`days` must be a string such as '2019-11-24:2019-11-28', got {self.days!r}")
        if self.split is not None and self.split not in SPLITS:
            raise ParameterError(f"`split` must be train or test, got {self.split!r}")
        if self.split is not None or self.test_fraction != DEFAULT_TEST_FRACTION or self.split_seed != 0:
            from dr_scale.io.config import NonNegativeInt, TestFraction, check  # pydantic: only for a split

            object.__setattr__(self, "test_fraction", check(TestFraction, "test_fraction", self.test_fraction))
            object.__setattr__(self, "split_seed", check(NonNegativeInt, "split_seed", self.split_seed))

    @property
    def selects_rows(self) -> bool:
        """Whether the filter selects rows within a part (a train/test split), not only whole parts."""
        return self.split is not None

    def __bool__(self) -> bool:
        return self.days is not None or self.split is not None

    def select_parts(self, url: str, paths: list[str]) -> list[str]:
        """The part files of the chosen days (all without ``days``); an error when none is left."""
        if not isinstance(self.days, DayRange):  # no days (a string is parsed into a DayRange when made)
            return paths
        dated = [(p, partition_date(p)) for p in paths]
        undated = [p for p, day in dated if day is None]
        if undated:
            raise ParameterError(f"`days` {self.days} needs date-partitioned logs (date=YYYY-MM-DD/…); "
                                 f"{undated[0]} has no date in its path")
        chosen = [p for p, day in dated if day is not None and self.days.contains(day)]
        if not chosen:
            days = sorted({day for _, day in dated if day is not None})
            raise ParameterError(f"`days` {self.days} matches no partition of {url} (its days run from "
                                 f"{days[0]} to {days[-1]})")
        return chosen

    def row_mask(self, row_id: np.ndarray) -> np.ndarray | None:
        """The rows of the chosen half (None: every row)."""
        if self.split is None:
            return None
        test = in_test(row_id, self.test_fraction, self.split_seed)
        return test if self.split == "test" else ~test

    def other_half_of(self, recorded: dict | None) -> bool:
        """Whether these rows are the other half of the keyed split ``recorded`` (a filter's :meth:`to_dict`,
        as a model or policy records the rows it was fitted on): the same ``test_fraction`` and ``split_seed``,
        the other side — rows disjoint from the recorded ones whatever the partitions.

        >>> LogFilter(split="test").other_half_of(LogFilter(split="train").to_dict())
        True
        >>> LogFilter(split="test").other_half_of(LogFilter(split="train", test_fraction=0.3).to_dict())
        False
        """
        recorded = recorded or {}
        return (self.split is not None and recorded.get("split") in ("train", "test")
                and recorded["split"] != self.split and recorded.get("test_fraction") == self.test_fraction
                and recorded.get("split_seed") == self.split_seed)

    def to_dict(self) -> dict:
        """The filter as a JSON object (for ``--json`` outputs and model metadata), the split's rule spelled out."""
        out: dict[str, str | float | int] = {}
        if self.days is not None:
            out["days"] = str(self.days)
        if self.split is not None:
            out.update(split=self.split, test_fraction=self.test_fraction, split_seed=int(self.split_seed),
                       split_rule='u(row_id) < test_fraction, u keyed by (split_seed, "train/test split")')
        return out

    def __str__(self) -> str:
        words = []
        if self.days is not None:
            words.append(f"days {self.days}")
        if self.split is not None:
            words.append(f"{self.split} rows (u(row_id) {'<' if self.split == 'test' else '≥'} "
                         f"{self.test_fraction:g}, split seed {self.split_seed})")
        return ", ".join(words) or "every row"


class PartFile(NamedTuple):
    """One part file's ``path`` and the ``log_filter`` of the rows to read from it: what a per-part task carries
    when the filter selects rows within parts (its split), so that the readers of the contract keep them."""

    path: str
    log_filter: LogFilter

    def __str__(self) -> str:
        return self.path

    def __fspath__(self) -> str:
        return self.path


def part_paths(url: str, paths: list[str], log_filter: LogFilter | None) -> list:
    """The paths of the chosen days; each a :class:`PartFile` carrying the filter when it selects rows within
    parts."""
    if not log_filter:
        return paths
    paths = log_filter.select_parts(url, paths)
    return [PartFile(p, log_filter) for p in paths] if log_filter.selects_rows else list(paths)


def unpacked(path: str | PartFile, log_filter: LogFilter | None = None) -> tuple[str, LogFilter | None]:
    """(the path, the filter) of a part: ``log_filter`` where given, else the one a :class:`PartFile` carries."""
    if isinstance(path, PartFile):
        return path.path, log_filter if log_filter is not None else path.log_filter
    if log_filter is not None and not isinstance(log_filter, LogFilter):
        raise ParameterError(f"`log_filter` must be a LogFilter, got {type(log_filter).__name__}")
    return path, log_filter


def log_root(url_path: str) -> str:
    """The folder of a log's URL path above its glob characters, part file and ``key=value`` folders.

    >>> log_root("data/logs/date=2019-11-2*/part-0.parquet")
    'data/logs'
    >>> log_root("data/logs/")
    'data/logs'
    """
    path = url_path.rstrip("/")
    for i, ch in enumerate(path):
        if ch in "*?[":
            path = path[:i].rpartition("/")[0]
            break
    if path.endswith(".parquet"):
        path = posixpath.dirname(path)
    while "=" in posixpath.basename(path):
        path = posixpath.dirname(path)
    return path
