"""The third round of bad and tricky input on the import side: raw tables checked against the spec, the saved
spec, the log on disk and by content, each case a small raw table written here and imported in-process.

Each case is a row of a table — (the raw files, the spec, the expected exit, a fragment of the expected line) —
and meets the corpus's rules (test_bad_input_corpus.py's ``run``: exit 0, 2 or 3, one error line, no traceback,
no "unexpected" fallback). A refusal also names no library exception and leaves no log and no staging folder; an
import that succeeds is checked for what it wrote (its days, its vocabulary, its rows). Groups: column roles
(each format × each pair of roles, and the DataFrame path), timestamps (units by magnitude or ``timestamp_unit``,
the plausible range, dates, sub-microsecond text), the item catalogue against the log, a later import against the
saved spec and the rows already there, formats and encodings sniffed before parsing, row ids, the DataFrame entry
points, and constant policies naming an id beyond k.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_bad_input_corpus import run

from dr_scale.core.errors import UserError
from dr_scale.logs.listing import action_vocabulary

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

#: Library names a user's message never shows.
LIBRARY = re.compile(r"Arrow\w*|UnicodeDecodeError|BadZipFile|RuntimeWarning|Traceback|please report|codec can't")
T0 = 1_764_583_200  # 2025-12-01 09:00:00 UTC
DAYS = ["2025-12-01", "2025-12-02"]


def rows(ts: list | None = None, **columns) -> list[dict]:
    """Three raw rows: timestamp, item, click, p, color, size (``columns`` replace or add columns)."""
    base = {"ts": ts if ts is not None else ["2025-12-01 09:00:00", "2025-12-01 10:00:00", "2025-12-02 10:00:00"],
            "item": ["a", "b", "a"], "click": [1, 0, 0], "p": [0.5, 0.5, 0.5], "color": ["red", "blue", "red"],
            "size": [1.5, 2.0, 0.5]}
    base.update(columns)
    return [dict(zip(base, values, strict=True)) for values in zip(*base.values(), strict=True)]


def encode(fmt: str, table: list[dict], delimiter: str = ",") -> bytes:
    """The rows as a CSV, JSON-lines or Parquet file's bytes."""
    if fmt == "parquet":
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(table), sink)
        return sink.getvalue()
    if fmt == "json":
        return "".join(json.dumps(r) + "\n" for r in table).encode()
    names = list(table[0])
    lines = [delimiter.join(names)] + [delimiter.join("" if r[c] is None else str(r[c]) for c in names) for r in table]
    return ("\n".join(lines) + "\n").encode()


EXT = {"csv": "csv", "json": "jsonl", "parquet": "parquet"}


def spec(features: str = 'categorical = ["color"]\nnumeric = ["size"]', actions: str = "", **keys) -> str:
    """A spec: action item, reward click, propensity p, timestamp ts (``keys`` replace them; None drops one)."""
    base = {"action": "item", "reward": "click", "propensity": "p", "timestamp": "ts"}
    base.update(keys)
    lines = [f"{k} = {json.dumps(v)}" for k, v in base.items() if v is not None]
    return "\n".join(lines) + f"\n[features]\n{features}\n" + (f"[actions]\n{actions}\n" if actions else "")


@dataclass
class Case:
    """One import (or a sequence of imports into one log, each but the last succeeding): the files, the raw file of
    each step and its spec, the expected exit of the last, a fragment of its error line (or of its summary), and a
    check of the log written."""

    files: dict
    steps: list  # [(raw file, spec file)]
    code: int
    fragment: str
    check: object = None
    specs: dict = field(default_factory=dict)


def one(raw: bytes, name: str, spec_text: str, code: int, fragment: str, check=None, **extra) -> Case:
    return Case({name: raw, **extra}, [(name, "spec.toml")], code, fragment, check, {"spec.toml": spec_text})


def days_are(expected: list[str]):
    def check(logs: Path) -> None:
        assert sorted(p.name for p in logs.iterdir() if p.name.startswith("date=")) == [f"date={d}" for d in expected]
    return check


def vocabulary_is(expected: list[str]):
    def check(logs: Path) -> None:
        assert action_vocabulary(str(logs)) == expected
    return check


def rows_are(n: int):
    def check(logs: Path) -> None:
        assert sum(pq.read_metadata(p).num_rows for p in logs.rglob("part-*.parquet")) == n
    return check


CASES: dict[str, Case] = {}

# -- column roles: each role pair, in each format -------------------------------------------------------------
ROLE_SPECS = {
    "pattern-c*-matches-reward": (spec(features='categorical = ["c*"]'), "column 'click' is both the reward and the "
                                  "features.categorical (by the pattern 'c*')"),
    "pattern-p*-matches-propensity": (spec(features='numeric = ["p*"]'), "column 'p' is both the propensity and"),
    "pattern-*-matches-all": (spec(features='categorical = ["*"]'), "column 'ts' is both the timestamp and"),
    "action-as-feature": (spec(features='categorical = ["item"]'), "column 'item' is both the action and the "
                          "features.categorical"),
    "reward-as-feature": (spec(features='numeric = ["click"]'), "column 'click' is both the reward and the "
                          "features.numeric"),
    "propensity-as-feature": (spec(features='numeric = ["p"]'), "column 'p' is both the propensity and"),
    "timestamp-as-feature": (spec(features='categorical = ["ts"]'), "column 'ts' is both the timestamp and"),
    "row-id-as-feature": (spec(features='numeric = ["size"]', row_id="size"), "column 'size' is both the row_id and"),
    "action-is-reward": (spec(reward="item"), "column 'item' is both the action and the reward"),
    "reward-is-propensity": (spec(propensity="click"), "column 'click' is both the reward and the propensity"),
    "action-is-propensity": (spec(propensity="item"), "column 'item' is both the action and the propensity"),
    "action-is-timestamp": (spec(timestamp="item"), "column 'item' is both the action and the timestamp"),
    "reward-is-timestamp": (spec(timestamp="click"), "column 'click' is both the reward and the timestamp"),
    "row-id-is-action": (spec(row_id="item"), "column 'item' is both the action and the row_id"),
    "categorical-and-numeric": (spec(features='categorical = ["color", "size"]\nnumeric = ["size"]'),
                                "column 'size' is both the features.categorical and the features.numeric"),
    "tokens-and-categorical": (spec(features='categorical = ["color"]\ntokens = ["col*"]'),
                               "column 'color' is both the features.categorical and the features.tokens (by the "
                               "pattern 'col*')"),
}
for fmt in ("csv", "json", "parquet"):
    for name, (text, fragment) in ROLE_SPECS.items():
        CASES[f"roles-{name}-{fmt}"] = one(encode(fmt, rows()), f"raw.{EXT[fmt]}", text, 2, fragment)

# -- timestamps ------------------------------------------------------------------------------------------------
SECONDS = [T0, T0 + 3600, T0 + 86400]
for fmt in ("csv", "json", "parquet"):
    for unit, scale in (("s", 1), ("ms", 1000), ("us", 10**6), ("ns", 10**9)):
        CASES[f"time-epoch-{unit}-{fmt}"] = one(encode(fmt, rows([t * scale for t in SECONDS])), f"raw.{EXT[fmt]}",
                                                spec(), 0, "days: 2 (2025-12-01 … 2025-12-02)", days_are(DAYS))
    CASES[f"time-epoch-float-seconds-{fmt}"] = one(encode(fmt, rows([t + 0.25 for t in SECONDS])), f"raw.{EXT[fmt]}",
                                                   spec(), 0, "days: 2", days_are(DAYS))
    CASES[f"time-date-only-{fmt}"] = one(encode(fmt, rows(["2025-12-01", "2025-12-01", "2025-12-02"])),
                                         f"raw.{EXT[fmt]}", spec(), 0, "days: 2", days_are(DAYS))
    CASES[f"time-float-5.8-{fmt}"] = one(encode(fmt, rows([5.8, 5.81, 5.79])), f"raw.{EXT[fmt]}", spec(), 2,
                                         "column 'ts': not a time from 1990 to 2099 as seconds, milliseconds, "
                                         "microseconds or nanoseconds since 1970")
    CASES[f"time-year-2500-{fmt}"] = one(encode(fmt, rows(["2500-01-01 09:00:00"] * 3)), f"raw.{EXT[fmt]}", spec(),
                                         2, "column 'ts': a time outside 1990-01-01 … 2099-12-31 ('2500-01-01")
    CASES[f"time-zero-{fmt}"] = one(encode(fmt, rows([0, 0, 0])), f"raw.{EXT[fmt]}", spec(), 2,
                                    "not a time from 1990 to 2099")
for fmt in ("csv", "json"):
    CASES[f"time-iso-nanoseconds-{fmt}"] = one(encode(fmt, rows(["2025-12-01T09:00:00.123456789Z",
                                                                 "2025-12-01T10:00:00.999999999Z",
                                                                 "2025-12-02T10:00:00.000000001Z"])),
                                               f"raw.{EXT[fmt]}", spec(), 0, "days: 2", days_are(DAYS))
    CASES[f"time-ms-as-seconds-{fmt}"] = one(encode(fmt, rows([t * 1000 for t in SECONDS])), f"raw.{EXT[fmt]}",
                                             spec(timestamp_unit="s"), 2, "not a time from 1990 to 2099 as s since")
    CASES[f"time-ms-declared-{fmt}"] = one(encode(fmt, rows([t * 1000 for t in SECONDS])), f"raw.{EXT[fmt]}",
                                           spec(timestamp_unit="ms"), 0, "days: 2", days_are(DAYS))
CASES["time-seconds-declared-ms-csv"] = one(encode("csv", rows(SECONDS)), "raw.csv", spec(timestamp_unit="ms"), 2,
                                            "as ms since 1970")
CASES["time-between-bands-csv"] = one(encode("csv", rows([10**11] * 3)), "raw.csv", spec(), 2, "('100000000000')")
CASES["time-negative-csv"] = one(encode("csv", rows([-T0] * 3)), "raw.csv", spec(), 2, "not a time from 1990")
CASES["time-year-1900-csv"] = one(encode("csv", rows(["1900-01-01 00:00:00"] * 3)), "raw.csv", spec(), 2,
                                  "a time outside 1990-01-01")
CASES["time-1989-12-31-csv"] = one(encode("csv", rows(["1989-12-31 23:59:59+00:00"] * 3)), "raw.csv", spec(), 2,
                                   "a time outside 1990-01-01")
CASES["time-not-a-time-csv"] = one(encode("csv", rows(["Nov 2nd 1am"] * 3)), "raw.csv", spec(), 2,
                                   "column 'ts': not a timestamp (ISO 8601")
CASES["time-offset-moves-day-csv"] = one(encode("csv", rows(["2025-12-01T23:30:00-05:00"] * 3)), "raw.csv", spec(),
                                         0, "days: 1", days_are(["2025-12-02"]))
CASES["time-zone-key-csv"] = one(encode("csv", rows(["2025-12-01 23:30:00"] * 3)), "raw.csv",
                                 spec(timezone="Asia/Tokyo"), 0, "days: 1", days_are(["2025-12-01"]))
for key, value in (("timezone", "Asia/Tokyo"), ("timestamp_unit", "ms")):
    CASES[f"time-{key}-without-timestamp"] = one(encode("csv", rows()), "raw.csv", spec(timestamp=None, **{key: value}),
                                                 2, f"spec.toml: {key}: says how the timestamp column is read, but "
                                                    "the spec names none")
CASES["time-skip-bad-5.8-csv"] = one(encode("csv", rows([5.8, T0, T0 + 86400])), "raw.csv",
                                     spec() + "", 0, "", None)
CASES["time-skip-bad-5.8-csv"].specs["spec.toml"] = "skip_bad_rows = true\n" + spec()
CASES["time-skip-bad-5.8-csv"].fragment = "bad rows skipped: 1 (1 × column 'ts': not a time from 1990 to 2099"


def _typed_parquet(ts: pa.Array) -> bytes:
    table = pa.Table.from_pylist(rows()).set_column(0, "ts", ts)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


STAMPS = [np.datetime64("2025-12-01T09:00:00"), np.datetime64("2025-12-01T10:00:00"),
          np.datetime64("2025-12-02T10:00:00")]
for name, array in {"timestamp-ns": pa.array(np.array(STAMPS, "datetime64[ns]")),
                    "timestamp-s": pa.array(np.array(STAMPS, "datetime64[s]")),
                    "timestamp-ms-utc": pa.array(np.array(STAMPS, "datetime64[ms]")).cast(pa.timestamp("ms", "UTC")),
                    "date32": pa.array(np.array(STAMPS, "datetime64[D]")).cast(pa.date32())}.items():
    CASES[f"time-parquet-{name}"] = one(_typed_parquet(array), "raw.parquet", spec(), 0, "days: 2", days_are(DAYS))
CASES["time-parquet-timestamp-1900"] = one(_typed_parquet(pa.array(np.array(
    [np.datetime64("1900-01-01T00:00:00")] * 3, "datetime64[us]"))), "raw.parquet", spec(), 2,
    "a time outside 1990-01-01")
CASES["time-parquet-bool"] = one(_typed_parquet(pa.array([True, False, True])), "raw.parquet", spec(), 2,
                                 "not a time from 1990 to 2099")

# -- the item catalogue against the log ----------------------------------------------------------------------------
NUMBERED = rows(item=["007", "008", "009"])
CATALOGUE = 'table = "items.{ext}"\nkey = "item"\ncategorical = ["brand"]\nnumeric = ["price"]'


def items(fmt: str, keys: list, brand: list | None = None) -> bytes:
    table = [{"item": k, "price": 1.5, "brand": b} for k, b in zip(keys, brand or ["x"] * len(keys), strict=True)]
    if not table:
        return b"item,price,brand\n"
    return encode(fmt, table)


for fmt in ("csv", "json", "parquet"):
    cat = CATALOGUE.format(ext=EXT[fmt])
    log_csv = encode("csv", NUMBERED)
    CASES[f"catalogue-keys-as-text-{fmt}"] = Case(
        {"raw.csv": log_csv, f"items.{EXT[fmt]}": items(fmt, ["007", "008", "009"])}, [("raw.csv", "spec.toml")],
        0, "catalogue coverage: 3 of 3 logged actions", vocabulary_is(["007", "008", "009"]),
        {"spec.toml": spec(actions=cat)})
    CASES[f"catalogue-partial-coverage-{fmt}"] = Case(
        {"raw.csv": log_csv, f"items.{EXT[fmt]}": items(fmt, ["007", "008"])}, [("raw.csv", "spec.toml")], 0,
        "catalogue coverage: 2 of 3 logged actions (1 without item features, e.g. '009')",
        vocabulary_is(["007", "008", "009"]), {"spec.toml": spec(actions=cat)})
    CASES[f"catalogue-extra-items-{fmt}"] = Case(
        {"raw.csv": log_csv, f"items.{EXT[fmt]}": items(fmt, ["007", "008", "009", "010"])},
        [("raw.csv", "spec.toml")], 0, "catalogue coverage: 3 of 3", vocabulary_is(["007", "008", "009", "010"]),
        {"spec.toml": spec(actions=cat)})
    CASES[f"catalogue-no-overlap-{fmt}"] = Case(
        {"raw.csv": log_csv, f"items.{EXT[fmt]}": items(fmt, ["1", "2"])}, [("raw.csv", "spec.toml")], 2,
        "column 'item': none of its 2 keys ('1', '2') is a logged action (the log's actions: '007', '008', '009')",
        None, {"spec.toml": spec(actions=cat)})
    CASES[f"catalogue-duplicate-key-{fmt}"] = Case(
        {"raw.csv": log_csv, f"items.{EXT[fmt]}": items(fmt, ["007", "008", "007"])}, [("raw.csv", "spec.toml")], 2,
        "column 'item': duplicate key '007'", None, {"spec.toml": spec(actions=cat)})
    CASES[f"catalogue-empty-key-{fmt}"] = Case(
        {"raw.csv": log_csv, f"items.{EXT[fmt]}": items(fmt, ["007", ""])}, [("raw.csv", "spec.toml")], 2,
        "column 'item': missing or empty key", None, {"spec.toml": spec(actions=cat)})
    CASES[f"catalogue-blank-key-{fmt}"] = Case(
        {"raw.csv": log_csv, f"items.{EXT[fmt]}": items(fmt, ["007", "  "])}, [("raw.csv", "spec.toml")], 2,
        "missing or empty key", None, {"spec.toml": spec(actions=cat)})
CASES["catalogue-numbers-in-json"] = Case(
    {"raw.jsonl": encode("json", rows(item=[7, 8, 9])), "items.jsonl": items("json", [7, 8])},
    [("raw.jsonl", "spec.toml")], 0, "catalogue coverage: 2 of 3", vocabulary_is(["7", "8", "9"]),
    {"spec.toml": spec(actions=CATALOGUE.format(ext="jsonl"))})
CASES["catalogue-gzip-named-csv"] = Case(
    {"raw.csv": encode("csv", NUMBERED), "items.csv": gzip.compress(items("csv", ["007", "009"]))},
    [("raw.csv", "spec.toml")], 0, "catalogue coverage: 2 of 3", vocabulary_is(["007", "008", "009"]),
    {"spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})
CASES["catalogue-no-rows"] = Case(
    {"raw.csv": encode("csv", NUMBERED), "items.csv": items("csv", [])}, [("raw.csv", "spec.toml")], 2,
    "no items: the catalogue has no rows", None, {"spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})
CASES["catalogue-missing-file"] = Case(
    {"raw.csv": encode("csv", NUMBERED)}, [("raw.csv", "spec.toml")], 2, "actions.table: no such file", None,
    {"spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})
CASES["catalogue-missing-key-column"] = Case(
    {"raw.csv": encode("csv", NUMBERED), "items.csv": b"sku,price,brand\n007,1,x\n"}, [("raw.csv", "spec.toml")], 2,
    "actions.key: no column 'item' in", None, {"spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})
CASES["catalogue-price-not-a-number"] = Case(
    {"raw.csv": encode("csv", NUMBERED), "items.csv": b"item,price,brand\n007,1,x\n008,cheap,y\n"},
    [("raw.csv", "spec.toml")], 2, "items.csv, line 3: column 'price': not a number ('cheap')", None,
    {"spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})
CASES["catalogue-utf16"] = Case(
    {"raw.csv": encode("csv", NUMBERED), "items.csv": items("csv", ["007"]).decode().encode("utf-16")},
    [("raw.csv", "spec.toml")], 2, "UTF-16 or UTF-32 text", None,
    {"spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})
CASES["catalogue-nested-key"] = Case(
    {"raw.csv": encode("csv", NUMBERED), "items.jsonl": b'{"item": ["007"], "price": 1, "brand": "x"}\n'},
    [("raw.csv", "spec.toml")], 2, "column 'item': a list in each row", None,
    {"spec.toml": spec(actions=CATALOGUE.format(ext="jsonl"))})
CASES["catalogue-semicolons"] = Case(
    {"raw.csv": encode("csv", NUMBERED), "items.csv": items("csv", ["007"]).replace(b",", b";")},
    [("raw.csv", "spec.toml")], 2, "look separated by ';': set delimiter", None,
    {"spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})
CASES["catalogue-later-import-unknown-key"] = Case(
    {"day1.csv": encode("csv", NUMBERED), "day2.csv": encode("csv", rows(["2025-12-05 09:00:00"] * 3,
                                                                         item=["007"] * 3)),
     "items.csv": items("csv", ["007", "011"])},
    [("day1.csv", "first.toml"), ("day2.csv", "spec.toml")], 2, "key '011' is not in the vocabulary of the log", None,
    {"first.toml": spec(), "spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})

DAY5 = encode("csv", rows(["2025-12-05 09:00:00"] * 3, item=["007"] * 3))
CASES["catalogue-later-import-lacks-items"] = Case(
    {"day1.csv": encode("csv", NUMBERED), "day2.csv": DAY5, "items.csv": items("csv", ["007", "008", "009"]),
     "new/items.csv": items("csv", ["007", "008"])},
    [("day1.csv", "spec.toml"), ("day2.csv", "new/spec.toml")], 2, "lacks 1 item(s) of the catalogue of the log at",
    None, {"spec.toml": spec(actions=CATALOGUE.format(ext="csv")),
           "new/spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})
CASES["catalogue-later-import-other-columns"] = Case(
    {"day1.csv": encode("csv", NUMBERED), "day2.csv": DAY5, "items.csv": items("csv", ["007", "008", "009"])},
    [("day1.csv", "spec.toml"), ("day2.csv", "other.toml")], 2,
    "actions.numeric [] (the log's catalogue has ['price'])", None,
    {"spec.toml": spec(actions=CATALOGUE.format(ext="csv")),
     "other.toml": spec(actions=CATALOGUE.format(ext="csv").replace('numeric = ["price"]', ""))})
CASES["catalogue-later-import-updated-items"] = Case(
    {"day1.csv": encode("csv", NUMBERED), "day2.csv": DAY5, "items.csv": items("csv", ["007", "008", "009"]),
     "new/items.csv": items("csv", ["007", "008", "009"], ["y", "y", "z"])},
    [("day1.csv", "spec.toml"), ("day2.csv", "new/spec.toml")], 0, "catalogue coverage: 1 of 1 logged actions",
    vocabulary_is(["007", "008", "009"]), {"spec.toml": spec(actions=CATALOGUE.format(ext="csv")),
                                           "new/spec.toml": spec(actions=CATALOGUE.format(ext="csv"))})

# -- a later import against the saved spec and the rows already there ------------------------------------------
DAY1, DAY2 = encode("csv", rows()), encode("csv", rows(["2025-12-05 09:00:00"] * 3))
LATER = {
    "timezone": ({"timezone": "Asia/Tokyo"}, "timezone 'Asia/Tokyo' (the log has 'UTC')"),
    "no-propensity": ({"propensity": None}, "no propensity (the log has logged propensities from 'p')"),
    "no-timestamp": ({"timestamp": None}, "no timestamp (the log has a timestamp (dated folders) from 'ts')"),
    "timestamp-unit": ({"timestamp_unit": "ms"}, "timestamp_unit 'ms' (the log has 'auto')"),
    "hash-bits": ({"hash_bits": 12}, "hash_bits 12 (the log has 18)"),
    "row-id-added": ({"row_id": "size"}, "row_id 'size' (the log has no row_id)"),
    "unseen-actions": ({"unseen_actions": "reserved"}, "unseen_actions 'reserved'"),
    "action-column": ({"action": "color"}, "action 'color' (the log has 'item')"),
}
for name, (keys, fragment) in LATER.items():
    features = 'categorical = ["color"]' if name in ("row-id-added",) else (
        'categorical = ["item"]\nnumeric = ["size"]' if name == "action-column" else
        'categorical = ["color"]\nnumeric = ["size"]')
    CASES[f"later-{name}"] = Case({"day1.csv": DAY1, "day2.csv": DAY2}, [("day1.csv", "first.toml"),
                                                                         ("day2.csv", "spec.toml")],
                                  2, fragment, None, {"first.toml": spec(), "spec.toml": spec(features, **keys)})
CASES["later-features"] = Case({"day1.csv": DAY1, "day2.csv": DAY2}, [("day1.csv", "first.toml"),
                                                                      ("day2.csv", "spec.toml")], 2,
                               "features.numeric [] (the log has ['size'])", None,
                               {"first.toml": spec(), "spec.toml": spec('categorical = ["color"]')})
CASES["later-propensity-added"] = Case({"day1.csv": DAY1, "day2.csv": DAY2}, [("day1.csv", "first.toml"),
                                                                              ("day2.csv", "spec.toml")], 2,
                                       "propensity 'p' (the log has no propensity)", None,
                                       {"first.toml": spec(propensity=None), "spec.toml": spec()})
CASES["later-timestamp-added"] = Case({"day1.csv": DAY1, "day2.csv": DAY2}, [("day1.csv", "first.toml"),
                                                                             ("day2.csv", "spec.toml")], 2,
                                      "timestamp 'ts' (the log has no timestamp)", None,
                                      {"first.toml": spec(timestamp=None), "spec.toml": spec()})
CASES["later-same-spec-new-day"] = Case({"day1.csv": DAY1, "day2.csv": DAY2}, [("day1.csv", "spec.toml"),
                                                                               ("day2.csv", "spec.toml")], 0,
                                        "imported 3 rows", days_are([*DAYS, "2025-12-05"]), {"spec.toml": spec()})
for fmt in ("csv", "json", "parquet"):
    raw = encode(fmt, rows())
    CASES[f"later-copy-at-another-path-{fmt}"] = Case(
        {f"a.{EXT[fmt]}": raw, f"copy/a.{EXT[fmt]}": raw}, [(f"a.{EXT[fmt]}", "spec.toml"),
                                                            (f"copy/a.{EXT[fmt]}", "spec.toml")], 2,
        f"copy/a.{EXT[fmt]}: the same rows as", None, {"spec.toml": spec(timestamp=None)})
    CASES[f"later-same-file-again-{fmt}"] = Case(
        {f"a.{EXT[fmt]}": raw}, [(f"a.{EXT[fmt]}", "spec.toml"), (f"a.{EXT[fmt]}", "spec.toml")], 2,
        "already imported into", None, {"spec.toml": spec(timestamp=None)})
CASES["later-two-copies-in-one-import"] = Case(
    {"in/a.csv": DAY1, "in/b.csv": DAY1}, [("in", "spec.toml")], 2, "hold the same rows", None,
    {"spec.toml": spec(timestamp=None)})
COPIES = {  # the rows of a.csv again, in another file: compressed, in another format, in another order
    "gzip": ("a.csv.gz", gzip.compress(DAY1)),
    "parquet": ("a.parquet", encode("parquet", rows())),
    "json": ("a.jsonl", encode("json", rows())),
    "reordered-rows": ("b.csv", encode("csv", rows()[::-1])),
    "reordered-columns": ("b.csv", encode("csv", [dict(reversed(list(r.items()))) for r in rows()])),
}
for name, (file, data) in COPIES.items():
    CASES[f"later-copy-{name}"] = Case({"a.csv": DAY1, f"copy/{file}": data}, [("a.csv", "spec.toml"),
                                                                             (f"copy/{file}", "spec.toml")], 2,
                                       f"copy/{file}: the same rows as", None, {"spec.toml": spec(timestamp=None)})
CASES["later-one-row-changed"] = Case({"a.csv": DAY1, "b.csv": encode("csv", rows(click=[1, 1, 0]))},
                                      [("a.csv", "spec.toml"), ("b.csv", "spec.toml")], 0, "imported 3 rows",
                                      rows_are(6), {"spec.toml": spec(timestamp=None)})
CASES["later-row-ids-already-there"] = Case(
    {"a.csv": encode("csv", rows(rid=[1, 2, 3])), "b.csv": encode("csv", rows(rid=[3, 4, 5], size=[9.0, 9.0, 9.0]))},
    [("a.csv", "spec.toml"), ("b.csv", "spec.toml")], 2, "already holds row_id 3 (1 of the new rows' ids)", None,
    {"spec.toml": spec(timestamp=None, row_id="rid")})
CASES["row-ids-repeated-across-files"] = Case(
    {"in/a.csv": encode("csv", rows(rid=[1, 2, 3])), "in/b.csv": encode("csv", rows(rid=[3, 4, 5], size=[9.0] * 3))},
    [("in", "spec.toml")], 2, "column 'rid': row id 3 is on two rows of the import (in two blocks or files)", None,
    {"spec.toml": spec(timestamp=None, row_id="rid")})
CASES["later-new-row-ids"] = Case(
    {"a.csv": encode("csv", rows(rid=[1, 2, 3])), "b.csv": encode("csv", rows(rid=[4, 5, 6], size=[9.0, 9.0, 9.0]))},
    [("a.csv", "spec.toml"), ("b.csv", "spec.toml")], 0, "imported 3 rows", rows_are(6),
    {"spec.toml": spec(timestamp=None, row_id="rid")})

# -- formats and encodings, sniffed before parsing ----------------------------------------------------------------
CSV = encode("csv", rows())


def _zstd(data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as f:
        f.write(data)
    return sink.getvalue().to_pybytes()


def _zip(data: bytes) -> bytes:
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w") as z:
        z.writestr("raw.csv", data)
    return sink.getvalue()


READ = {  # (file name, bytes): read as what the content is, whatever the name
    "gzip-named-csv": ("raw.csv", gzip.compress(CSV)),
    "plain-named-gz": ("raw.csv.gz", CSV),
    "zstd": ("raw.csv.zst", _zstd(CSV)),
    "zstd-named-csv": ("raw.csv", _zstd(CSV)),
    "bz2": ("raw.csv.bz2", bz2.compress(CSV)),
    "xz": ("raw.csv.xz", lzma.compress(CSV)),
    "zip": ("raw.csv.zip", _zip(CSV)),
    "plain-named-zip": ("raw.csv.zip", CSV),
    "utf8-bom": ("raw.csv", b"\xef\xbb\xbf" + CSV),
    "parquet-named-csv": ("raw.csv", encode("parquet", rows())),
    "parquet-named-jsonl": ("raw.jsonl", encode("parquet", rows())),
    "gzip-json": ("raw.jsonl.gz", gzip.compress(encode("json", rows()))),
    "zstd-json": ("raw.jsonl.zst", _zstd(encode("json", rows()))),
    "crlf": ("raw.csv", CSV.replace(b"\n", b"\r\n")),
    "utf8-bom-crlf": ("raw.csv", b"\xef\xbb\xbf" + CSV.replace(b"\n", b"\r\n")),
    "utf8-bom-gzip": ("raw.csv.gz", gzip.compress(b"\xef\xbb\xbf" + CSV)),
    "utf8-bom-json": ("raw.jsonl", b"\xef\xbb\xbf" + encode("json", rows())),
    "quoted-header": ("raw.csv", CSV.replace(b"ts,item,click,p,color,size", b'"ts","item","click","p","color","size"')),
}
for name, (file, data) in READ.items():
    CASES[f"format-{name}"] = one(data, file, spec(), 0, "imported 3 rows", days_are(DAYS))
CASES["format-semicolon-with-delimiter"] = one(encode("csv", rows(), ";"), "raw.csv", 'delimiter = ";"\n' + spec(), 0,
                                               "imported 3 rows", days_are(DAYS))
CASES["format-tsv-with-delimiter"] = one(encode("csv", rows(), "\t"), "raw.tsv", 'delimiter = "\\t"\n' + spec(), 0,
                                         "imported 3 rows", days_are(DAYS))
PARQUET = encode("parquet", rows())
REFUSED = {  # (file name, bytes, spec, fragment)
    "utf16-le-bom": ("raw.csv", CSV.decode().encode("utf-16"), spec(), "UTF-16 or UTF-32 text"),
    "utf16-be-bom": ("raw.csv", b"\xfe\xff" + CSV.decode().encode("utf-16-be"), spec(), "UTF-16 or UTF-32 text"),
    "utf16-no-bom": ("raw.csv", CSV.decode().encode("utf-16-le"), spec(), "UTF-16 or UTF-32 text"),
    "utf32": ("raw.csv", CSV.decode().encode("utf-32"), spec(), "UTF-16 or UTF-32 text"),
    "utf16-json": ("raw.jsonl", encode("json", rows()).decode().encode("utf-16"), spec(), "UTF-16 or UTF-32"),
    "utf16-gzip": ("raw.csv.gz", gzip.compress(CSV.decode().encode("utf-16")), spec(), "UTF-16 or UTF-32"),
    "latin1-header": ("raw.csv", CSV.replace(b"color", "colör".encode("latin-1")),
                      spec(features='categorical = ["col*"]'), "line 1: not UTF-8 text (byte 0xf6)"),
    "latin1-value": ("raw.csv", CSV.replace(b"blue", "bleü".encode("latin-1")), spec(), "raw.csv, line 3: not UTF-8"),
    "semicolons": ("raw.csv", encode("csv", rows(), ";"), spec(), "look separated by ';': set delimiter = \";\""),
    "tabs": ("raw.tsv", encode("csv", rows(), "\t"), spec(), "look separated by tabs: set delimiter = \"\\t\""),
    "pipes": ("raw.csv", encode("csv", rows(), "|"), spec(), "look separated by '|': set delimiter = \"|\""),
    "truncated-parquet": ("raw.parquet", PARQUET[:-40], spec(), "raw.parquet: not a complete Parquet file"),
    "zero-byte-parquet": ("raw.parquet", b"", spec(), "not a Parquet file (its first bytes are not Parquet's 'PAR1': "
                          "an empty file)"),
    "empty-json": ("raw.jsonl", b"\n", spec(), "empty file: no JSON line"),
    "parquet-header-only": ("raw.parquet", PARQUET[:200], spec(), "not a complete Parquet file"),
    "empty-csv": ("raw.csv", b"", spec(), "empty file: no CSV header line"),
    "truncated-gzip": ("raw.csv.gz", gzip.compress(CSV * 50)[:60], spec(), "cannot be decompressed as gzip: damaged"),
    "corrupt-zip": ("raw.csv.zip", b"PK\x03\x04" + b"\x00" * 40, spec(), "cannot be decompressed as zip: damaged"),
    "truncated-zstd": ("raw.csv.zst", _zstd(CSV * 50)[:30], spec(), "cannot be decompressed as zstd: damaged"),
    "csv-declared-parquet": ("raw.csv", CSV, 'format = "parquet"\n' + spec(), "not a Parquet file (its first bytes"),
    "unknown-extension": ("raw.dat", CSV, spec(), "cannot tell the format from the name"),
    "csv-named-jsonl": ("raw.jsonl", CSV, spec(), "not JSON lines, one object a line"),
    "nested-json-feature": ("raw.jsonl", encode("json", rows(color=[{"x": 1}] * 3)), spec(),
                            "column 'color': an object (nested JSON) in each row"),
    "nested-json-action": ("raw.jsonl", encode("json", rows(item=[{"id": 1}] * 3)), spec(),
                           "column 'item': an object (nested JSON) in each row"),
    "nested-json-reward": ("raw.jsonl", encode("json", rows(click=[{"v": 1}] * 3)), spec(), "column 'click'"),
    "list-json-feature": ("raw.jsonl", encode("json", rows(color=[["r", "g"]] * 3)), spec(),
                          "column 'color': a list in each row"),
    "list-json-action": ("raw.jsonl", encode("json", rows(item=[["a"]] * 3)), spec(), "column 'item': a list in each"),
    "list-parquet-feature": ("raw.parquet", encode("parquet", rows(color=[["r"], ["g"], ["r"]])), spec(),
                             "column 'color': a list in each row"),
    "list-parquet-action": ("raw.parquet", encode("parquet", rows(item=[["a"], ["b"], ["a"]])), spec(),
                            "column 'item': a list in each row"),
    "list-parquet-timestamp": ("raw.parquet", encode("parquet", rows([[1], [2], [3]])), spec(),
                               "column 'ts': a list in each row"),
    "row-id-2^63-csv": ("raw.csv", encode("csv", rows(rid=[2**63, 1, 2])), spec(row_id="rid"),
                        "raw.csv, line 2: column 'rid': not an integer from -2^63 to 2^63 - 1 ('9223372036854775808')"),
    "row-id-2^63-json": ("raw.jsonl", encode("json", rows(rid=[2**63, 1, 2])), spec(row_id="rid"), "column 'rid'"),
    "row-id-below-int64-csv": ("raw.csv", encode("csv", rows(rid=[-(2**63) - 1, 1, 2])), spec(row_id="rid"),
                               "not an integer from -2^63 to 2^63 - 1"),
    "row-id-fraction-csv": ("raw.csv", encode("csv", rows(rid=["1.5", "2", "3"])), spec(row_id="rid"),
                            "line 2: column 'rid': not an integer"),
    "row-id-text-csv": ("raw.csv", encode("csv", rows(rid=["x1", "2", "3"])), spec(row_id="rid"),
                        "not an integer from -2^63"),
    "row-id-1e20-parquet": ("raw.parquet", encode("parquet", rows(rid=[1e20, 1.0, 2.0])), spec(row_id="rid"),
                            "raw.parquet, row 0: column 'rid': not an integer"),
    "row-id-duplicate-after-2^53": ("raw.csv", encode("csv", rows(rid=[2**60 + 1, 2**60 + 1, 5])), spec(row_id="rid"),
                                    "raw.csv, line 3: column 'rid': row id 1152921504606846977 repeats an earlier "
                                    "row's"),
}
for name, (file, data, text, fragment) in REFUSED.items():
    CASES[f"format-{name}"] = one(data, file, text, 2, fragment)
CASES["format-row-ids-beyond-2^53-kept"] = one(encode("csv", rows(rid=[2**60 + 1, 2**60 + 2, 2**60 + 3])), "raw.csv",
                                               spec(row_id="rid"), 0, "imported 3 rows", None)


def _row_ids_exact(logs: Path) -> None:
    ids = sorted(i for p in logs.rglob("part-*.parquet") for i in pq.read_table(p).column("row_id").to_pylist())
    assert ids == [2**60 + 1, 2**60 + 2, 2**60 + 3]


CASES["format-row-ids-beyond-2^53-kept"].check = _row_ids_exact


def _write(folder: Path, files: dict) -> None:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


@pytest.mark.parametrize("name", sorted(CASES))
def test_import_case(tmp_path, capsys, name):
    case = CASES[name]
    inputs = tmp_path / "in"
    _write(inputs, case.files)
    _write(inputs, case.specs)
    logs = tmp_path / "logs"
    *before, last = case.steps
    for raw, spec_name in before:
        code, _, err = run(["import", inputs / raw, "--spec", inputs / spec_name, "--out", logs, "--no-progress"],
                           capsys, tmp_path)
        assert code == 0, err
    listing = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    raw, spec_name = last
    code, out, err = run(["import", inputs / raw, "--spec", inputs / spec_name, "--out", logs, "--no-progress"],
                         capsys, tmp_path)
    assert code == case.code, (code, out, err)
    if code == 2:
        (line,) = [x for x in err.splitlines() if ": error: " in x]
        assert case.fragment in line, line
        assert not LIBRARY.search(err), err
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == listing  # nothing written or left
    else:
        assert case.fragment in out, out
        if case.check is not None:
            case.check(logs)


# -- the DataFrame entry points ------------------------------------------------------------------------------------
FRAME_SPEC = {"action": "item", "reward": "click", "propensity": "p", "features": {"categorical": ["color"]}}


def _frame(**columns) -> pd.DataFrame:
    base = {"item": ["a", "b", "c"], "click": [1, 0, 1], "p": [0.5] * 3, "color": ["r", "g", "r"]}
    return pd.DataFrame({**base, **columns})


def _from_dask(df: pd.DataFrame, spec_: dict = FRAME_SPEC, **kwargs):
    import dask.dataframe as dd

    import dr_scale

    return dr_scale.from_dask(dd.from_pandas(df, npartitions=2), spec_, **kwargs).compute()


def _from_pandas(df: pd.DataFrame, spec_: dict = FRAME_SPEC, **kwargs):
    import dr_scale

    return dr_scale.from_pandas(df, spec_, **kwargs)


def _contract() -> pd.DataFrame:
    """Three rows in the log contract."""
    return pd.DataFrame({"row_id": np.arange(3), "features": [[0], [1], []], "action": [0, 1, 0],
                         "reward": [1.0, 0.0, 1.0], "propensity": [0.5] * 3})


def _dask(df: pd.DataFrame):
    import dask.dataframe as dd

    return dd.from_pandas(df, npartitions=1)


def _without_string_conversion(run):
    import dask

    with dask.config.set({"dataframe.convert-string": False}):
        return run()


def _empty_partition():
    from dr_scale.logs.reading import partition_from_table

    table = pa.table({"row_id": pa.array([], pa.int64()), "features": pa.array([], pa.list_(pa.int32())),
                      "action": pa.array([], pa.int64()), "reward": pa.array([], pa.float64()),
                      "propensity": pa.array([], pa.float64())})
    return partition_from_table(table, "<empty>", 2, 2)


FRAME_REFUSED = {
    "pandas-empty": (lambda: _from_pandas(_frame().iloc[:0]), "no rows: a log with no rows is an error"),
    "pandas-all-rows-bad-skipped": (lambda: _from_pandas(_frame(click=["x", "y", "z"]),
                                                         {**FRAME_SPEC, "skip_bad_rows": True}), "no rows"),
    "dask-empty": (lambda: _from_dask(_frame().iloc[:0]), "no rows: a log with no rows is an error"),
    "pandas-mixed-action": (lambda: _from_pandas(_frame(item=[7, "a", 3])),
                            "column 'item': mixed types in one column: 7 (int) and 'a' (str)"),
    "pandas-mixed-feature": (lambda: _from_pandas(_frame(color=["r", 7, "g"])), "column 'color': mixed types"),
    "pandas-mixed-reward": (lambda: _from_pandas(_frame(click=[1, "yes", 0])), "column 'click': mixed types"),
    "pandas-duplicate-actions": (lambda: _from_pandas(_frame(), actions=["a", "b", "c", "d", "e", "a"]),
                                 "lists 'a' twice"),
    "dask-duplicate-actions": (lambda: _from_dask(_frame(), actions=["a", "b", "a", "c"]), "lists 'a' twice"),
    "pandas-actions-empty": (lambda: _from_pandas(_frame(), actions=[]), "actions is empty"),
    "pandas-actions-string": (lambda: _from_pandas(_frame(), actions="abc"), "must be a list of the action values"),
    "pandas-action-not-in-actions": (lambda: _from_pandas(_frame(), actions=["a", "b"]),
                                     "action value 'c' is not in the log's vocabulary of 2 actions"),
    "pandas-role-clash": (lambda: _from_pandas(_frame(), {**FRAME_SPEC, "features": {"categorical": ["c*"]}}),
                          "column 'click' is both the reward and the features.categorical (by the pattern 'c*')"),
    "pandas-action-is-reward": (lambda: _from_pandas(_frame(), {**FRAME_SPEC, "reward": "item"}),
                                "column 'item' is both the action and the reward"),
    "dask-role-clash": (lambda: _from_dask(_frame(), {**FRAME_SPEC, "propensity": "click"}),
                        "column 'click' is both the reward and the propensity"),
    "pandas-list-action": (lambda: _from_pandas(_frame(item=[["a"], ["b"], ["a"]])), "column 'item': a list"),
    "pandas-timestamp-5.8": (lambda: _from_pandas(_frame(ts=[5.8, 5.9, 6.0]), {**FRAME_SPEC, "timestamp": "ts"}),
                             "row 0: column 'ts': not a time from 1990 to 2099"),
    "evaluate-dataframe-empty": (lambda: __import__("dr_scale").evaluate_dataframe(
        _dask(_contract().iloc[:0]), __import__("dr_scale").Evaluation("constant:#0", ["IPS"])),
        "no rows; nothing to evaluate (a log with no rows is an error)"),
    "evaluate-dataframe-text-reward": (lambda: __import__("dr_scale").evaluate_dataframe(
        _dask(_contract().assign(reward=[1.0, "x", 0.0])), __import__("dr_scale").Evaluation("constant:#0", ["IPS"])),
        "column 'reward': wrong type"),
    "evaluate-dataframe-mixed-reward": (lambda: _without_string_conversion(lambda: __import__(
        "dr_scale").evaluate_dataframe(_dask(_contract().assign(reward=[1.0, "x", 0.0])),
                                       __import__("dr_scale").Evaluation("constant:#0", ["IPS"]))),
        "<dataframe partition 0>: column 'reward': mixed types in one column: 1.0 (float) and 'x' (str)"),
    "table-from-pandas-mixed-action": (lambda: __import__("dr_scale.logs.writing").logs.writing.table_from_pandas(
        _contract().assign(action=[0, "a", 1])), "<DataFrame>: column 'action': mixed types in one column"),
    "evaluate-partitions-zero-rows": (lambda: __import__("dr_scale").evaluate_partitions(
        [_empty_partition()],
        __import__("dr_scale").Evaluation("constant:#0", ["IPS"], n_actions=2)), "no rows; nothing to evaluate"),
    "write-log-n-actions-disagree": (lambda: __import__("dr_scale").write_log(
        _from_pandas(_frame()).table, "memory://frame-log-k", n_actions=7),
        "n_actions = 7, but the table's vocabulary (from_pandas) has 3 actions"),
}


@pytest.mark.parametrize("name", sorted(FRAME_REFUSED))
def test_dataframe_refused(name):
    make, fragment = FRAME_REFUSED[name]
    with pytest.raises(UserError) as info:
        make()
    assert fragment in str(info.value) and not LIBRARY.search(str(info.value)), str(info.value)


@pytest.mark.parametrize("name", sorted(ROLE_SPECS))
def test_dataframe_roles(name):
    """The import's role cases through from_pandas: the same refusal, naming the column and both roles."""
    import tomllib

    text, fragment = ROLE_SPECS[name]
    with pytest.raises(UserError) as info:
        _from_pandas(pd.DataFrame(rows()), tomllib.loads(text))
    assert fragment in str(info.value), str(info.value)


def test_dataframe_timestamps_by_magnitude():
    """Epoch milliseconds in a DataFrame are read as milliseconds (the days of the text times)."""
    log = _from_pandas(_frame(ts=[T0 * 1000, (T0 + 3600) * 1000, (T0 + 86400) * 1000]),
                       {**FRAME_SPEC, "timestamp": "ts"})
    assert log.table.column("date").to_pylist() == [DAYS[0], DAYS[0], DAYS[1]]


@pytest.mark.parametrize("how", ["write_log-then-evaluate-cli", "evaluate_partitions"])
def test_a_dataframe_log_keeps_its_vocabulary(tmp_path, capsys, how):
    """``constant:b`` names the action by value on a log built from a DataFrame: written by write_log (the CLI
    reads the vocabulary beside it), or in memory."""
    import dr_scale

    df = _frame(item=["c", "b", "a"], click=[0, 1, 0])
    log = _from_pandas(df)
    if how == "evaluate_partitions":
        result = dr_scale.evaluate_partitions([log], dr_scale.Evaluation("constant:b", ["IPS"]))
        assert result.estimates["IPS"].value == pytest.approx(1 / 0.5 / 3)  # the one row of b, reward 1, p 0.5
        return
    dr_scale.write_log(log.table, str(tmp_path / "frame-log"))
    assert action_vocabulary(str(tmp_path / "frame-log")) == ["a", "b", "c"]
    code, out, err = run(["evaluate", tmp_path / "frame-log", "--policy", "constant:b", "--estimators", "IPS",
                          "--json", tmp_path / "r.json", "--no-progress"], capsys, tmp_path)
    assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["estimates"]["IPS"]["value"] == pytest.approx(2 / 3)


# -- constant and top-k policies naming an id beyond k -------------------------------------------------------------
@pytest.fixture(scope="module")
def five_actions(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("five")
    raw = encode("csv", [{"item": a, "click": i % 2, "p": 0.2, "color": "r"} for i, a in enumerate("abcdeabcde")])
    (folder / "raw.csv").write_bytes(raw)
    (folder / "spec.toml").write_text(spec('categorical = ["color"]', timestamp=None))
    from dr_scale.logs.importing import import_log

    import_log(str(folder / "raw.csv"), str(folder / "spec.toml"), str(folder / "logs"))
    return folder / "logs"


POLICIES = {
    "constant:#9": (2, "policy constant:#9: action #9 is not one of the log's 5 actions (ids #0 … #4)"),
    "constant:#5": (2, "action #5 is not one of the log's 5 actions"),
    "constant:9": (2, "policy constant:9: '9' is not one of the log's 5 actions (a, b, c, d, e)"),
    "topk:#0,#9": (2, "policy topk:#0,#9 (#0,#9): action #9 is not one of the log's 5 actions"),
    "constant:#4": (0, "IPS"),
    "constant:e": (0, "IPS"),
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_policy_naming_an_action_beyond_k(tmp_path, capsys, five_actions, policy):
    code, fragment = POLICIES[policy]
    status, out, err = run(["evaluate", five_actions, "--policy", policy, "--estimators", "IPS", "--no-progress"],
                           capsys, tmp_path)
    assert status == code, err
    text = out if code == 0 else [x for x in err.splitlines() if ": error: " in x][0]
    assert fragment in text and "<constant policy>" not in text and "row_id" not in text, text


def test_round3_import_corpus_size():
    """At least 170 distinct inputs of this round on the import side."""
    counted = len(CASES) + len(ROLE_SPECS) + len(FRAME_REFUSED) + 1 + 2 + len(POLICIES)
    assert counted >= 170, counted
