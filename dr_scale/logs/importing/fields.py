"""A raw table's fields as typed arrays — text, numbers, UTC timestamps and days — and the rows found bad on
the way: each refused value is an error naming the file, the line and the column, or (``skip_bad_rows``) a row
dropped and counted by reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dr_scale.logs.contract import LogDataError


class Rows:
    """Where a table's rows are (file and line / row), and the bad rows found so far."""

    def __init__(self, source: str, n: int, line0: int | None, kind: str, skip_bad: bool):
        self.source, self.line0, self.kind, self.skip_bad = source, line0, kind, skip_bad
        self.bad = np.zeros(n, dtype=bool)
        self.reasons: Counter = Counter()

    def where(self, i: int) -> str:
        """Where row ``i`` is: the source and its line (or row) number."""
        return f"{self.source}, {self.kind} {self.line0 + i}" if self.line0 is not None else self.source

    def flag(self, mask: np.ndarray, column: str, reason: str) -> None:
        """Rows of ``mask`` are bad: an error naming the first, or (skipping) counted."""
        mask = np.asarray(mask, dtype=bool) & ~self.bad
        if not mask.any():
            return
        if not self.skip_bad:
            i = int(np.flatnonzero(mask)[0])
            raise LogDataError(self.where(i), column, reason)
        self.bad |= mask
        self.reasons[f"column '{column}': {reason}"] += int(mask.sum())


def _bad_positions(array: pa.Array, convert: Callable[[pa.Array], pa.Array]) -> np.ndarray:
    """Positions of the non-null values of ``array`` that ``convert`` refuses, found by bisection."""
    out: list[int] = []

    def walk(lo: int, hi: int) -> None:
        """Bisect rows [lo, hi): the refused positions among them into ``out``."""
        try:
            convert(array.slice(lo, hi - lo))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
            if hi - lo == 1:
                out.append(lo)
            else:
                mid = (lo + hi) // 2
                walk(lo, mid)
                walk(mid, hi)

    walk(0, len(array))
    return np.array(out, dtype=np.int64)


def converted(array: pa.Array, convert: Callable[[pa.Array], pa.Array], rows: Rows, column: str, reason: str,
              fill: str | int) -> pa.Array:
    """``convert(array)``; values it refuses are bad rows (``reason``) and become ``fill`` when skipped."""
    try:
        return convert(array)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        bad = _bad_positions(array, convert)
        if not bad.size:  # every piece converts, the whole does not
            raise LogDataError(rows.source, column, f"{reason}: the values do not convert together") from None
        mask = np.zeros(len(array), dtype=bool)
        mask[bad] = True
        rows.flag(mask, column, f"{reason} ({array[int(bad[0])].as_py()!r})")
        fixed = pc.if_else(pa.array(mask), pa.scalar(fill, array.type), array)
        return convert(fixed)


def _numbers(array: pa.Array) -> pa.Array:
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        return pc.cast(pc.utf8_trim_whitespace(array), pa.float64())
    if pa.types.is_integer(array.type) or pa.types.is_floating(array.type) or pa.types.is_boolean(array.type):
        return pc.cast(array, pa.float64())
    raise pa.ArrowInvalid(f"wrong type {array.type}")


def column_numbers(table: pa.Table, column: str, rows: Rows, required: bool) -> np.ndarray:
    """float64 values of a column (strings parsed); refused or (if ``required``) missing values are bad rows."""
    array = combined(table.column(column))
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or is_numeric(array.type)):
        raise LogDataError(rows.source, column, f"wrong type {array.type}: expected numbers")
    numbers = converted(array, _numbers, rows, column, "not a number", "0")
    if required and numbers.null_count:
        rows.flag(pc.is_null(numbers).to_numpy(zero_copy_only=False), column, "missing value")
    values: np.ndarray = pc.fill_null(numbers, np.nan).to_numpy(zero_copy_only=False)
    return values


def _integers(array: pa.Array) -> pa.Array:
    """64-bit integers of integer, whole float or text values (``"12"``, ``"12.0"``); others refused."""
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        text = pc.replace_substring_regex(pc.utf8_trim_whitespace(array), r"^([+-]?\d+)\.0*$", r"\1")
        return pc.cast(text, pa.int64())  # digits only: a value beyond 64 bits is refused, never rounded
    if pa.types.is_integer(array.type) or pa.types.is_floating(array.type):
        return pc.cast(array, pa.int64())  # safe: a fraction or a value beyond 64 bits is refused
    raise pa.ArrowInvalid(f"wrong type {array.type}")


def column_integers(table: pa.Table, column: str, rows: Rows) -> np.ndarray:
    """int64 values of a column of ids (text parsed exactly, not through float64); refused or missing values are
    bad rows."""
    array = combined(table.column(column))
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or is_numeric(array.type)):
        raise LogDataError(rows.source, column, f"wrong type {array.type}: expected integers")
    ids = converted(array, _integers, rows, column, "not an integer from -2^63 to 2^63 - 1", "0")
    rows.flag(pc.is_null(ids).to_numpy(zero_copy_only=False), column, "missing value")
    values: np.ndarray = pc.fill_null(ids, 0).to_numpy(zero_copy_only=False)
    return values


def is_numeric(t: pa.DataType) -> bool:
    """Whether an Arrow type holds numbers (integers, floats or booleans)."""
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


def combined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as one array (a chunked one's chunks combined)."""
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def as_text(array: pa.Array) -> pa.Array:
    """Values as text, the raw field of a CSV: integers as ``3``, strings as they are."""
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    if pa.types.is_floating(array.type):  # 3.0 → "3", as pandas' integers-with-nulls often arrive
        whole = pc.equal(array, pc.floor(array))
        as_int = pc.cast(pc.if_else(whole, array, pa.scalar(None, array.type)), pa.int64(), safe=False)
        return pc.if_else(whole, pc.cast(as_int, pa.string()), pc.cast(array, pa.string()))
    return pc.cast(array, pa.string())


#: Plausible times, in seconds since 1970-01-01 UTC: from 1990-01-01 (inclusive) to 2100-01-01 (exclusive). A time
#: outside is a bad row: most often a number in another unit, or a column that holds no times.
TIME_RANGE = (631_152_000, 4_102_444_800)
#: The units of numeric timestamps (``timestamp_unit``) and their counts per second. Their bands of plausible values,
#: ``TIME_RANGE`` times the count (6.3e8 … 4.1e9 seconds, 6.3e11 … 4.1e12 milliseconds, 6.3e14 … 4.1e15
#: microseconds, 6.3e17 … 4.1e18 nanoseconds), are disjoint: ``"auto"`` reads a number in the unit whose band
#: holds it.
TIME_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"


def _epoch_times(x: np.ndarray, unit: str) -> pa.Array:
    """UTC timestamps of numbers since the epoch in ``unit`` (``"auto"``: each number's band, :data:`TIME_UNITS`);
    a number outside :data:`TIME_RANGE` in its unit (in every unit, for ``"auto"``) is null."""
    lo, hi = TIME_RANGE
    seconds = np.full(x.shape, np.nan)
    for name, scale in TIME_UNITS.items():
        if unit in ("auto", name):
            inside = (x >= lo * scale) & (x < hi * scale)
            seconds = np.where(inside, x / scale, seconds)
    missing = np.isnan(seconds)
    micros = np.round(np.where(missing, 0.0, seconds) * 1e6).astype(np.int64)
    return pa.array(micros, type=pa.timestamp("us", "UTC"), mask=missing)


def timestamps(array: pa.Array, zone: str, unit: str = "auto") -> pa.Array:
    """UTC timestamps (microseconds): ISO-8601 text (a naive time is in ``zone``; a date alone is its midnight;
    digits beyond the microsecond are dropped), Arrow timestamps and dates, or numbers since the epoch in ``unit``
    (:func:`_epoch_times`; numbers as text too). A number outside :data:`TIME_RANGE` is null (the caller names it);
    text that is no time is an error (``ArrowInvalid``)."""
    t = array.type
    if pa.types.is_timestamp(t):
        zoned = array if t.tz else pc.assume_timezone(array, zone, ambiguous="earliest", nonexistent="earliest")
        return pc.cast(zoned, pa.timestamp("us", "UTC"), safe=False)
    if is_numeric(t):
        seconds = pc.cast(array, pa.float64(), safe=False)  # nanoseconds lose digits below the microsecond only
        return _epoch_times(pc.fill_null(seconds, np.nan).to_numpy(zero_copy_only=False), unit)
    if pa.types.is_date(t):
        return pc.cast(pc.assume_timezone(pc.cast(array, pa.timestamp("us")), zone), pa.timestamp("us", "UTC"))
    text = pc.utf8_trim_whitespace(pc.cast(array, pa.string()))
    number = pc.fill_null(pc.match_substring_regex(text, _NUMBER), False)
    if pc.any(number).as_py():
        numbers = timestamps(pc.cast(pc.if_else(number, text, pa.scalar(None, pa.string())), pa.float64()), zone,
                             unit)
        rest = timestamps(pc.if_else(number, pa.scalar(None, pa.string()), text), zone, unit)
        return pc.if_else(number, numbers, rest)
    text = pc.replace_substring_regex(text, r"^(\d{4}-\d\d-\d\d)$", r"\1 00:00:00")  # a date alone: its midnight
    text = pc.replace_substring_regex(text, r"(\.\d{6})\d+", r"\1")  # to the microsecond
    zoned = pc.fill_null(pc.match_substring_regex(text, r"(Z|[+-]\d\d(:?\d\d)?)$"), False)
    aware = pc.cast(pc.if_else(zoned, text, pa.scalar(None, pa.string())), pa.timestamp("us", "UTC"))
    naive = pc.cast(pc.if_else(zoned, pa.scalar(None, pa.string()), text), pa.timestamp("us"))
    local = pc.assume_timezone(naive, zone, ambiguous="earliest", nonexistent="earliest").cast(aware.type)
    return pc.if_else(zoned, aware, local)


def implausible_times(stamps: pa.Array, times: pa.Array) -> np.ndarray:
    """The rows whose given timestamp (``stamps``, not null) is no time within :data:`TIME_RANGE` (``times``, their
    UTC timestamps, null or outside it)."""
    lo, hi = (pa.scalar(v * 1_000_000, pa.timestamp("us", "UTC")) for v in TIME_RANGE)
    outside = pc.fill_null(pc.or_(pc.less(times, lo), pc.greater_equal(times, hi)), True)
    mask: np.ndarray = pc.and_(pc.is_valid(stamps), outside).to_numpy(zero_copy_only=False)
    return mask


def implausible_reason(value: object, unit: str) -> str:
    """Why the timestamp ``value`` is refused (:func:`implausible_times`), and the fix."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and pc.match_substring_regex(
            pa.array([value.strip()]), _NUMBER)[0].as_py()):
        units = "seconds, milliseconds, microseconds or nanoseconds" if unit == "auto" else f"{unit}"
        return (f"not a time from 1990 to 2099 as {units} since 1970 ({value!r}); numbers are read by their "
                "magnitude, or in the spec's timestamp_unit (\"s\", \"ms\", \"us\" or \"ns\"); a column of "
                "other numbers is no timestamp")
    return f"a time outside 1990-01-01 … 2099-12-31 ({str(value)!r}); is this the timestamp column?"


def dates(array: pa.Array, zone: str) -> pa.Array:
    """The days (``YYYY-MM-DD``, in ``zone``) of UTC timestamps."""
    local = pc.local_timestamp(pc.cast(array, pa.timestamp("us", zone)))
    return pc.cast(pc.cast(local, pa.date32()), pa.string())

