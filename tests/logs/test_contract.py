"""The logged-data contract: CSR conversion, atomic writes, and loud failure on bad data."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from dr_scale.logs.contract import LogDataError
from dr_scale.logs.listing import list_parts
from dr_scale.logs.reading import read_log, read_partition
from dr_scale.logs.sparse import csr_to_features, features_to_csr
from dr_scale.logs.writing import write_log


def good_table(n=50, d=20, k=3, seed=0, values=False):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=seed)
    cols = {
        "row_id": np.arange(100, 100 + n, dtype=np.int64),
        "features": csr_to_features(X),
        "action": rng.integers(0, k, n).astype(np.int32),
        "reward": rng.random(n),
        "propensity": rng.uniform(0.1, 1.0, n),
    }
    if values:
        cols["values"] = pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)),
                                                  pa.array(X.data.astype(np.float32)))
    return pa.table(cols), X


def test_features_round_trip_to_csr_without_row_loops():
    table, X = good_table(values=True)
    Y = features_to_csr(table.column("features"), 20, table.column("values"))
    np.testing.assert_allclose(Y.toarray(), X.astype(np.float32).toarray(), rtol=1e-6)
    binary = features_to_csr(table.column("features"), 20)
    np.testing.assert_array_equal(binary.toarray(), (X.toarray() != 0).astype(float))
    # binary features: int32 indices as scipy's kernels take them, and shared read-only ones as data
    assert binary.indptr.dtype == binary.indices.dtype == np.int32
    again = features_to_csr(table.column("features"), 20)
    assert not binary.data.flags.writeable and binary.data.base is again.data.base
    # A sliced (offset) list array converts too.
    sliced = table.slice(10, 7).column("features")
    np.testing.assert_array_equal(features_to_csr(sliced, 20).toarray(), binary[10:17].toarray())


def test_write_and_read_a_partitioned_log(tmp_path):
    table, X = good_table(n=103)
    written = write_log(table, str(tmp_path / "log"), n_parts=4, n_features=20, n_actions=3)
    assert len(written) == 4
    fs, paths = list_parts(str(tmp_path / "log"))
    parts = [read_partition(fs, p) for p in paths]  # d and k from the metadata
    assert sum(len(p) for p in parts) == 103
    np.testing.assert_array_equal(sp.vstack([p.X for p in parts]).toarray(), (X.toarray() != 0))
    np.testing.assert_array_equal(np.concatenate([p.row_id for p in parts]), table.column("row_id").to_numpy())
    assert not [p for p in (tmp_path / "log").iterdir() if ".tmp-" in p.name]


def test_hive_partitioned_folder_and_glob(tmp_path):
    table, _ = good_table(n=40)
    write_log(table.slice(0, 20), str(tmp_path / "log" / "date=2026-01-01"), n_features=20)
    write_log(table.slice(20), str(tmp_path / "log" / "date=2026-01-02"), n_features=20)
    assert len(read_log(str(tmp_path / "log"))) == 2
    assert len(read_log(str(tmp_path / "log" / "date=*" / "*.parquet"))) == 2
    # a glob of day folders reads the folders' files (a range of days)
    assert [len(p) for p in read_log(str(tmp_path / "log" / "date=2026-01-0[2-3]"))] == [20]
    assert len(read_log(str(tmp_path / "log" / "date=*"))) == 2


def test_memory_filesystem_round_trip():
    table, _ = good_table(n=30)
    write_log(table, "memory://contract/log", n_parts=2, n_features=20)
    assert sum(len(p) for p in read_log("memory://contract/log")) == 30


BAD_CASES = [
    ("propensity", lambda c: c.__setitem__("propensity", np.where(np.arange(50) == 7, 0.0, c["propensity"])),
     "propensity outside (0, 1]", 107),
    ("propensity", lambda c: c.__setitem__("propensity", np.where(np.arange(50) == 8, 1.5, c["propensity"])),
     "propensity outside (0, 1]", 108),
    ("reward", lambda c: c.__setitem__("reward", np.where(np.arange(50) == 9, np.nan, c["reward"])),
     "NaN or infinite reward", 109),
    ("reward", lambda c: c.__setitem__("reward", np.where(np.arange(50) == 3, np.inf, c["reward"])),
     "NaN or infinite reward", 103),
    ("action", lambda c: c.__setitem__("action", np.where(np.arange(50) == 5, 3, c["action"]).astype(np.int32)),
     "action out of range [0, 3)", 105),
    ("row_id", lambda c: c.__setitem__("row_id", np.where(np.arange(50) == 4, 101, c["row_id"])),
     "duplicate row id", 101),
    ("action", lambda c: c.pop("action"), "missing column", None),
    ("propensity", lambda c: c.__setitem__("propensity", np.ones(50, dtype=np.int64)), "wrong type", None),
    ("row_id", lambda c: c.__setitem__("row_id", c["row_id"].astype(str)), "wrong type", None),
]


def columns_of(table):
    return {name: (table.column(name).to_numpy() if name != "features" else table.column(name))
            for name in table.column_names}


@pytest.mark.parametrize("column,corrupt,reason,row_id", BAD_CASES)
def test_bad_data_is_rejected_by_name_and_nothing_is_written(tmp_path, column, corrupt, reason, row_id):
    table, _ = good_table()
    cols = columns_of(table)
    corrupt(cols)
    bad = pa.table(cols)
    out = tmp_path / "out"
    with pytest.raises(LogDataError) as err:
        write_log(bad, str(out), n_parts=3, n_features=20, n_actions=3)
    message = str(err.value)
    assert f"column '{column}'" in message and reason in message
    if row_id is not None:
        assert f"row_id={row_id}" in message
    assert not out.exists()

    # The same data already on disk is rejected on read, naming the file.
    path = tmp_path / "bad.parquet"
    pq.write_table(bad, path)
    fs, (p,) = list_parts(str(path))
    with pytest.raises(LogDataError, match="bad.parquet"):
        read_partition(fs, p, n_features=20, n_actions=3)


def test_feature_index_out_of_range_names_the_row(tmp_path):
    table, _ = good_table()
    path = tmp_path / "f.parquet"
    pq.write_table(table, path)
    fs, (p,) = list_parts(str(path))
    features = table.column("features").combine_chunks()
    offsets, flat = features.offsets.to_numpy(), features.values.to_numpy()
    first_bad_row = int(np.searchsorted(offsets, np.flatnonzero(flat >= 1)[0], side="right") - 1)
    with pytest.raises(LogDataError) as err:
        read_partition(fs, p, n_features=1)
    assert "column 'features'" in str(err.value) and "feature index out of range [0, 1)" in str(err.value)
    assert f"row_id={100 + first_bad_row}" in str(err.value)

    negative = pa.ListArray.from_arrays(features.offsets, pa.array(np.where(
        np.arange(len(features.values)) == 0, -1, features.values.to_numpy()).astype(np.int32)))
    cols = columns_of(table)
    cols["features"] = negative
    pq.write_table(pa.table(cols), path)
    with pytest.raises(LogDataError, match="feature index out of range"):
        read_partition(fs, p, n_features=20)


def test_null_values_and_values_length_mismatch(tmp_path):
    table, _ = good_table(values=True)
    cols = columns_of(table)
    cols["reward"] = pa.array([None if i == 2 else v for i, v in enumerate(cols["reward"])], pa.float64())
    with pytest.raises(LogDataError, match=r"column 'reward': null values \(e.g. row_id=102\)"):
        write_log(pa.table(cols), str(tmp_path / "x"))
    cols = columns_of(table)
    cols["values"] = pa.array([[1.0]] * 50, pa.list_(pa.float32()))
    with pytest.raises(LogDataError, match="column 'values': list length differs"):
        write_log(pa.table(cols), str(tmp_path / "x"), n_features=20)


def test_unreadable_and_missing_files(tmp_path):
    path = tmp_path / "corrupt.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    fs, (p,) = list_parts(str(path))
    with pytest.raises(LogDataError, match="corrupt.parquet: unreadable Parquet file"):
        read_partition(fs, p)
    with pytest.raises(FileNotFoundError):
        list_parts(str(tmp_path / "nothing-here"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no Parquet files"):
        list_parts(str(tmp_path / "empty"))


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    import dr_scale.logs.writing as writing

    table, _ = good_table()

    def explode(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(writing.pq, "write_table", explode)
    with pytest.raises(RuntimeError):
        write_log(table, str(tmp_path / "one.parquet"))
    assert list(tmp_path.iterdir()) == []


def test_binary_features_share_small_arrays_of_ones_and_leave_a_large_one_with_its_matrix(monkeypatch):
    import gc
    import weakref

    from dr_scale.logs import sparse

    monkeypatch.setattr(sparse, "SHARED_ONES", 8)
    monkeypatch.setattr(sparse, "_ONES", {})
    small = [sparse.binary_csr(np.array([0, 2, 3]), np.array([0, 4, 1]), 5) for _ in range(2)]
    assert small[0].data.base is small[1].data.base  # one shared array
    large = sparse.binary_csr(np.arange(11), np.arange(10) % 5, 5)
    np.testing.assert_array_equal(large.toarray().sum(axis=1), 1.0)
    base = weakref.ref(large.data.base)
    del large
    gc.collect()
    assert base() is None  # gone with its matrix: not held for the process's life
