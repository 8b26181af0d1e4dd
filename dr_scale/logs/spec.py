"""The import spec: how a raw table's columns become the log contract, and the hashing of features.

A spec is a TOML file (or a mapping) validated by :class:`ImportSpec`, the typed model
of :mod:`dr_scale.io.config` (unknown keys refused, strict types, every error naming the
file and the key)::

    action = "item_id"               # any type; a vocabulary maps its values to 0..k-1
    reward = "click"
    propensity = "propensity_score"  # optional: without it the log has no propensity column
    timestamp = "timestamp"          # optional: date=YYYY-MM-DD/ partitions in `timezone`
    slot = "position"                # optional: a ranking's position, `first_slot` (default 1) = the top
    impression = ["timestamp", "user_feature_*"]  # optional: the columns whose values key one impression
    hash_bits = 18
    [features]
    categorical = ["user_feature_0", "position"]
    numeric = ["user-item_affinity_*"]   # globs match the raw table's columns

Feature hashing
---------------
Each feature becomes an index in [0, 2^hash_bits) by MurmurHash3 (x86, 32 bit, seed 0)
of a key that names its namespace — the column:

* categorical column ``c`` with value ``v`` (its text): key ``"c=v"``, value 1;
* numeric column ``c`` with number ``x``: key ``"c"``, value x (a missing value or 0 is absent);
* tokens column ``c`` (a list, or text split on whitespace): key ``"c=t"`` per token t,
  value the number of times t occurs in the row (a bag of tokens).

The index of key s is ``|h(s)| mod 2^hash_bits`` with h the signed 32-bit MurmurHash3 —
exactly scikit-learn's ``FeatureHasher(n_features=2**hash_bits, alternate_sign=False)``
on the dicts ``{c: v}`` (strings become ``"c=v"``, numbers stay ``c``), so a pipeline
built on FeatureHasher gets the same ids. Vowpal Wabbit uses the same MurmurHash3 with
the namespace's hash as the seed; here the namespace is part of the key instead, which
is what FeatureHasher does and keeps the two equal. Features of one row that land on one
index are summed (as both do).

The function is ``sklearn.utils.murmurhash3_32``'s: scikit-learn is already a dependency,
well kept, and its C MurmurHash3 is the one FeatureHasher uses — identical ids are the
point. Keys are hashed once per distinct value of a block, not per row; :func:`murmurhash3_32`
here computes the same function vectorised with numpy over a pyarrow array of keys (a
Python call per key cost ~8 µs with the string conversions, the hashing of a block's
≈10⁵–10⁶ distinct keys seconds; vectorised it is milliseconds), and the tests check it
against scikit-learn's key by key. ``mmh3`` computes the same function but would be a new
dependency with the same per-key call; ``xxhash`` is a different function (no
FeatureHasher or Vowpal Wabbit compatibility).

A collision is a distinct key whose index another distinct key already has; they are
counted with a second, independent 32-bit hash of each key (seed 1) as the key's
64-bit fingerprint together with the first.
"""

from __future__ import annotations

import fnmatch
import json
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from dr_scale.core.errors import UserError
from dr_scale.io.config import ConfigError, Model, read_config_file, validate
from dr_scale.logs.catalogue import CATALOGUE_FILE  # noqa: F401 - the optional item catalogue beside a log
from dr_scale.logs.listing import SPEC_FILE

#: The version of the file stored beside an imported log (:data:`~dr_scale.logs.listing.SPEC_FILE`): the vocabulary
#: and the hashing spec.
SPEC_VERSION = 1
HASH_LIBRARY = "sklearn.utils.murmurhash3_32"

HashBits = Annotated[int, Field(ge=1, le=31)]
ColumnName = Annotated[str, Field(min_length=1)]


class FeatureColumns(Model):
    """The raw columns that become hashed features, by kind (globs allowed)."""

    categorical: list[ColumnName] = []
    numeric: list[ColumnName] = []
    tokens: list[ColumnName] = []


class ActionCatalogue(Model):
    """An item catalogue: per-action features in a separate table, joined by the action's value."""

    table: ColumnName
    key: ColumnName
    categorical: list[ColumnName] = []
    numeric: list[ColumnName] = []
    tokens: list[ColumnName] = []


class ImportSpec(Model):
    """How a raw table becomes the log contract (see the module docstring)."""

    action: ColumnName
    reward: ColumnName
    propensity: ColumnName | None = None  # None: the logging probabilities were not logged (docs/propensities.md)
    row_id: ColumnName | None = None
    timestamp: ColumnName | None = None
    #: A ranking logged one row per slot: the raw column of the row's position, whose value ``first_slot`` is the
    #: top (the log's ``slot`` is the position − ``first_slot``, from 0), and the column (or columns, globs
    #: allowed) whose values together identify an impression (the log's ``impression``: their hash).
    slot: ColumnName | None = None
    first_slot: Annotated[int, Field(ge=0)] = 1
    impression: ColumnName | list[ColumnName] | None = None
    #: The unit of numeric timestamps since 1970-01-01 UTC: told by magnitude ("auto", :data:`TIME_UNITS`'s
    #: disjoint bands within :data:`TIME_RANGE`), or given.
    timestamp_unit: Literal["auto", "s", "ms", "us", "ns"] = "auto"
    timezone: str = "UTC"
    hash_bits: HashBits = 18
    format: Literal["csv", "json", "parquet"] | None = None
    delimiter: Annotated[str, Field(min_length=1, max_length=1)] = ","
    skip_bad_rows: bool = False
    #: What a later import does with an action value the saved vocabulary lacks: an error naming it, or the
    #: reserved id k−1 (the vocabulary then has one more id, "<other>", from the first import on).
    unseen_actions: Literal["error", "reserved"] = "error"
    features: FeatureColumns = FeatureColumns()
    actions: ActionCatalogue | None = None

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as 'UTC' or 'Asia/Tokyo')") from None
        return value

    @field_validator("timezone", "timestamp_unit")
    @classmethod
    def _with_a_timestamp(cls, value: str, info: ValidationInfo) -> str:
        """``timezone`` and ``timestamp_unit`` say how the timestamp column is read: given without one, refused."""
        if info.data.get("timestamp") is None:
            raise ValueError("says how the timestamp column is read, but the spec names none: name it (timestamp = "
                             "\"COLUMN\"), or drop the key")
        return value


def read_spec(spec, storage_options: dict | None = None) -> tuple[ImportSpec, str]:
    """The :class:`ImportSpec` of a TOML/YAML file, a mapping or a spec, and the name errors use for it."""
    if isinstance(spec, ImportSpec):
        return spec, "<spec>"
    if isinstance(spec, dict):
        return validate(ImportSpec, spec, "<spec>"), "<spec>"
    if not isinstance(spec, str):
        raise UserError(f"the spec must be a TOML file name, a dict or an ImportSpec, got {type(spec).__name__}")
    return validate(ImportSpec, read_config_file(spec, storage_options), spec), spec


# -- columns ----------------------------------------------------------------------------------------
class Columns:
    """A spec's columns resolved against a raw table's column names (globs expanded, each checked)."""

    def __init__(self, spec: ImportSpec, names: list[str], spec_source: str, data_source: str, *,
                 roles: bool = True):
        """``roles``: check that each column has one role (:meth:`_check_disjoint`); an item catalogue's columns
        (whose key is no action column) are checked as features only."""
        self.spec = spec
        missing = []

        def one(key: str, name: str | None) -> str | None:
            """The column ``name`` (None if the spec names none), noted as missing if the table has no such column."""
            if name is not None and name not in names:
                missing.append((key, name))
            return name

        def required(key: str, name: str) -> str:
            """The column ``name`` the spec must give, noted as missing if the table has no such column."""
            one(key, name)
            return name

        def many(key: str, patterns: list[str]) -> list[str]:
            """The columns matching each of ``patterns`` (globs expanded), in order, each once; a pattern that
            matches none is noted as missing."""
            out: list[str] = []
            for i, pattern in enumerate(patterns):
                hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)] if any(
                    c in pattern for c in "*?[") else ([pattern] if pattern in names else [])
                if not hits:
                    missing.append((f"{key}#{i + 1}", pattern))
                out += [h for h in hits if h not in out]
            return out

        self.action = required("action", spec.action)
        self.reward = required("reward", spec.reward)
        self.propensity = one("propensity", spec.propensity)
        self.row_id = one("row_id", spec.row_id)
        self.timestamp = one("timestamp", spec.timestamp)
        self.slot = one("slot", spec.slot)
        impression = [spec.impression] if isinstance(spec.impression, str) else spec.impression
        self.impression = many("impression", impression) if impression is not None else None
        self.categorical = many("features.categorical", spec.features.categorical)
        self.numeric = many("features.numeric", spec.features.numeric)
        self.tokens = many("features.tokens", spec.features.tokens)
        if missing:
            key, name = missing[0]
            shown = ", ".join(names[:12]) + (", …" if len(names) > 12 else "")
            raise ConfigError(f"{key}: no column matching {name!r} in {data_source} (its columns: {shown})",
                              spec_source)
        if roles:
            self._check_disjoint(spec_source)
        else:
            for kind, cols in (("categorical", self.categorical), ("numeric", self.numeric), ("tokens", self.tokens)):
                for other, cols2 in (("numeric", self.numeric), ("tokens", self.tokens)):
                    both = sorted(set(cols) & set(cols2)) if other != kind and kind < other else []
                    if both:
                        raise ConfigError(f"features: column {both[0]!r} is both {kind} and {other}", spec_source)

    def _check_disjoint(self, spec_source: str) -> None:
        """Each raw column in one role: the action, reward, propensity, row id, timestamp and each feature column
        distinct (a reward among the features would leak into x); an error naming the column, both roles and,
        for a pattern, the pattern that matched it."""
        spec = self.spec
        roles: dict[str, str] = {}
        assigned: list[tuple[str, str | None]] = [
            ("action", self.action), ("reward", self.reward), ("propensity", self.propensity),
            ("row_id", self.row_id), ("timestamp", self.timestamp)]
        for kind in ("categorical", "numeric", "tokens"):
            patterns = getattr(spec.features, kind)
            for column in getattr(self, kind):
                pattern = next(p for p in patterns if fnmatch.fnmatchcase(column, p))
                shown = f"features.{kind}" + (f" (by the pattern {pattern!r})" if pattern != column else "")
                assigned.append((shown, column))
        for role, column in assigned:
            if column is None:
                continue
            if column in roles:
                raise ConfigError(f"column {column!r} is both the {roles[column]} and the {role}; a column has one "
                                  "role (a reward or propensity among the features leaks into x): name another "
                                  "column, or narrow the pattern", spec_source)
            roles[column] = role

    @property
    def used(self) -> list[str]:
        """Every raw column the import reads, in a fixed order."""
        out: list[str] = []
        for c in [self.action, self.reward, self.propensity, self.row_id, self.timestamp, self.slot,
                  *(self.impression or []), *self.categorical, *self.numeric, *self.tokens]:
            if c is not None and c not in out:
                out.append(c)
        return out

    def to_dict(self) -> dict:
        """The resolved feature columns, by kind."""
        return {"categorical": self.categorical, "numeric": self.numeric, "tokens": self.tokens}


# -- hashing ----------------------------------------------------------------------------------------
def hash_keys(keys: list[str], bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices in [0, 2^bits) as int32, 64-bit fingerprints) of ``keys`` (module docstring).

    >>> idx, _ = hash_keys(["user_feature_0=a", "position"], 18)
    >>> from sklearn.feature_extraction import FeatureHasher
    >>> X = FeatureHasher(2**18, alternate_sign=False).transform([{"user_feature_0": "a", "position": 1.0}])
    >>> sorted(idx.tolist()) == sorted(X.indices.tolist())
    True
    """
    import pyarrow as pa

    return hash_strings(pa.array(keys, pa.string()), bits)


def hash_strings(keys, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hash_keys` of a pyarrow string array (no nulls), without a Python call per key."""
    h, h1 = _murmurhash3_32(keys, (0, 1))
    h = h.astype(np.int64)
    mask = (1 << bits) - 1
    # |h| mod 2^bits, with FeatureHasher's rule for h = -2^31 (whose |h| overflows int32)
    idx = np.where(h == -(1 << 31), (2147483647 - mask) & mask, np.abs(h) & mask).astype(np.int32)
    fp = ((h & 0xFFFFFFFF).astype(np.uint64) << np.uint64(32)) | h1.view(np.uint32).astype(np.uint64)
    return idx, fp


_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmurhash3_32(keys, seed: int) -> np.ndarray:
    """MurmurHash3 x86 32-bit of each UTF-8 string of a pyarrow array, signed (``sklearn.utils.murmurhash3_32``).

    Vectorised with numpy over the keys of each length (Appleby's reference algorithm:
    4-byte little-endian blocks, the tail, then the finaliser ``fmix32``); equal to
    ``sklearn.utils.murmurhash3_32(key, seed)`` key by key (tests/logs/test_import.py checks it).

    >>> import pyarrow as pa
    >>> from sklearn.utils import murmurhash3_32 as reference
    >>> keys = ["", "a", "ab", "abc", "abcd", "color=red", "größe=groß"]
    >>> murmurhash3_32(pa.array(keys), 7).tolist() == [reference(k, 7) for k in keys]
    True
    """
    return _murmurhash3_32(keys, (seed,))[0]


def _murmurhash3_32(keys, seeds: tuple) -> list[np.ndarray]:
    """:func:`murmurhash3_32` of the keys under each seed: the keys' blocks are read and mixed once for all."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = pc.cast(keys, pa.large_string()) if not pa.types.is_large_string(keys.type) else keys
    if keys.offset or keys.null_count:
        keys = pa.concat_arrays([pc.fill_null(keys, "")])
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int64, count=len(keys) + 1)
    data = keys.buffers()[2]
    buf = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    outs = [np.empty(len(keys), dtype=np.uint32) for _ in seeds]
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        length = int(length)
        hs = [np.full(rows.size, seed, dtype=np.uint32) for seed in seeds]
        if length:
            chars = buf[starts[rows, None] + np.arange(length)]
            n_blocks = length // 4
            if n_blocks:
                blocks = np.ascontiguousarray(chars[:, : 4 * n_blocks]).view("<u4")
                for j in range(n_blocks):
                    k = blocks[:, j] * _C1
                    k = _rotl(k, 15) * _C2
                    for s, h in enumerate(hs):
                        h ^= k
                        hs[s] = _rotl(h, 13) * np.uint32(5) + np.uint32(0xE6546B64)
            tail = chars[:, 4 * n_blocks:].astype(np.uint32)
            if tail.shape[1]:
                k = np.zeros(rows.size, dtype=np.uint32)
                for j in range(tail.shape[1] - 1, -1, -1):
                    k ^= tail[:, j] << np.uint32(8 * j)
                k = _rotl(k * _C1, 15) * _C2
                for h in hs:
                    h ^= k
        for h, out in zip(hs, outs, strict=True):
            h ^= np.uint32(length)
            h ^= h >> np.uint32(16)
            h *= np.uint32(0x85EBCA6B)
            h ^= h >> np.uint32(13)
            h *= np.uint32(0xC2B2AE35)
            h ^= h >> np.uint32(16)
            out[rows] = h
    return [out.view(np.int32) for out in outs]


# -- the saved spec: vocabulary and hashing --------------------------------------------------------
OTHER = "<other>"


class Vocabulary:
    """Action values (as text) ↔ ids 0..k−1, in a stable order: numerically if every value is an integer,
    else by text; with ``reserved``, id k−1 is :data:`OTHER`, for values a later import has not seen."""

    def __init__(self, values: list[str], reserved: bool = False):
        self.values = list(values)
        self.reserved = reserved

    @classmethod
    def of(cls, values, reserved: bool = False) -> Vocabulary:
        """The vocabulary of ``values``: sorted (as integers where they all are), with the reserved <other> last when
        asked for."""
        values = sorted(set(values) - {OTHER})
        try:
            values = sorted(values, key=int)
        except ValueError:
            pass
        return cls(values + ([OTHER] if reserved else []), reserved)

    def __len__(self) -> int:
        return len(self.values)


def saved_spec(spec: ImportSpec, columns: Columns, vocabulary: Vocabulary) -> dict:
    """The document stored as :data:`dr_scale.logs.listing.SPEC_FILE` beside a log: what a later import needs."""
    return {
        "version": SPEC_VERSION,
        "hashing": {"library": HASH_LIBRARY, "function": "MurmurHash3_x86_32", "seed": 0,
                    "index": "|h(key)| mod 2^bits (scikit-learn FeatureHasher, alternate_sign=False)",
                    "keys": {"categorical": "column=value", "numeric": "column", "tokens": "column=token"},
                    "bits": spec.hash_bits},
        "action": {"column": spec.action, "values": vocabulary.values, "reserved": vocabulary.reserved},
        "columns": {"reward": spec.reward, "propensity": spec.propensity, "row_id": spec.row_id,
                    "timestamp": spec.timestamp, "timezone": spec.timezone, "timestamp_unit": spec.timestamp_unit},
        "features": columns.to_dict(),
        "actions": None if spec.actions is None else {
            "key": spec.actions.key, "categorical": spec.actions.categorical, "numeric": spec.actions.numeric,
            "tokens": spec.actions.tokens},
        "n_features": 1 << spec.hash_bits,
        "n_actions": len(vocabulary),
    }


#: The schema-metadata key of a log table built from a DataFrame (``from_pandas``) that holds its saved spec
#: (:func:`saved_spec`, as JSON): ``write_log`` stores it as the log's spec file, so the log keeps its vocabulary.
META_SPEC = b"dr_scale.spec"


def table_spec(table) -> dict | None:
    """The saved spec a table built from a DataFrame carries in its schema metadata (:data:`META_SPEC`), or None."""
    raw = (table.schema.metadata or {}).get(META_SPEC)
    return json.loads(raw) if raw else None


def load_saved(fs, path: str) -> dict:
    """The saved spec document at ``path``."""
    with fs.open(path, "rb") as f:
        try:
            doc = json.loads(f.read().decode())
        except ValueError as exc:
            raise UserError(f"{path}: not a dr-scale spec file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("version") != SPEC_VERSION:
        raise UserError(f"{path}: not a dr-scale spec file of version {SPEC_VERSION}")
    return doc


def check_same_meaning(doc: dict, spec: ImportSpec, columns: Columns, source: str, spec_source: str) -> Vocabulary:
    """The saved vocabulary, if ``spec`` gives the rows the meaning the saved spec gave the log's: the same hashing
    (bits, action column, feature columns), the same unseen-action rule, propensities logged or not as before, a
    timestamp or not as before (in the same zone and unit), a row id column or not as before; else an error naming
    each key that differs, with the log's value."""
    differences = []
    if doc["hashing"]["bits"] != spec.hash_bits:
        differences.append(f"hash_bits {spec.hash_bits} (the log has {doc['hashing']['bits']})")
    if doc["action"]["column"] != spec.action:
        differences.append(f"action {spec.action!r} (the log has {doc['action']['column']!r})")
    for kind, cols in columns.to_dict().items():
        if doc["features"].get(kind) != cols:
            differences.append(f"features.{kind} {cols} (the log has {doc['features'].get(kind)})")
    if bool(doc["action"]["reserved"]) != (spec.unseen_actions == "reserved"):
        differences.append(f"unseen_actions {spec.unseen_actions!r}")
    saved = doc.get("columns", {})
    for key, meaning in (("propensity", "logged propensities"), ("timestamp", "a timestamp (dated folders)"),
                         ("row_id", "a row id column")):
        had, has = saved.get(key) is not None, getattr(spec, key) is not None
        if had != has:
            differences.append(f"no {key} (the log has {meaning} from {saved.get(key)!r})" if had
                               else f"{key} {getattr(spec, key)!r} (the log has no {key})")
    if "actions" in doc and doc["actions"] is not None and spec.actions is not None:
        for key in ("key", "categorical", "numeric", "tokens"):
            if doc["actions"].get(key) != getattr(spec.actions, key):
                differences.append(f"actions.{key} {getattr(spec.actions, key)!r} (the log's catalogue has "
                                   f"{doc['actions'].get(key)!r})")
    if spec.timestamp is not None and saved.get("timestamp") is not None:
        for key, default in (("timezone", "UTC"), ("timestamp_unit", "auto")):
            if saved.get(key, default) != getattr(spec, key):
                differences.append(f"{key} {getattr(spec, key)!r} (the log has {saved.get(key, default)!r})")
    if differences:
        raise ConfigError(f"differs from the spec the log at {source} was imported with: {'; '.join(differences)}; "
                          f"give these keys the log's values (its {SPEC_FILE} lists them), or import into a new "
                          "folder", spec_source)
    return Vocabulary(doc["action"]["values"], bool(doc["action"]["reserved"]))
