"""Log filters: days of date partitions and the keyed train/test split, in the contract's reading."""

import datetime
import pickle

import numpy as np
import pyarrow as pa
import pytest
from conftest import evaluation

from dr_scale.core.errors import ParameterError
from dr_scale.logs.contract import LogDataError
from dr_scale.logs.filters import DayRange, LogFilter, PartFile, in_test, log_root
from dr_scale.logs.listing import list_parts
from dr_scale.logs.opened import OpenedLog, open_log
from dr_scale.logs.reading import partition_from_table, read_log
from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import evaluate_dataframe, evaluate_log
from dr_scale.reward.models import fold_of
from dr_scale.synthetic.example import N_ACTIONS, N_FEATURES, example_paths

LOGS, MODEL = example_paths()  # 14,000 rows in date=2026-11-01 … 2026-11-07, 2,000 a day


def row_ids(parts) -> np.ndarray:
    return np.concatenate([p.row_id for p in parts])


@pytest.mark.parametrize("text, first, last", [
    ("2026-11-02:2026-11-04", "2026-11-02", "2026-11-04"),
    ("2026-11-03", "2026-11-03", "2026-11-03"),
    (":2026-11-02", None, "2026-11-02"),
    ("2026-11-06:", "2026-11-06", None),
])
def test_day_ranges_are_inclusive_with_open_ends(text, first, last):
    days = DayRange.parse(text)
    assert days == DayRange(*(d and datetime.date.fromisoformat(d) for d in (first, last)))
    _, paths = list_parts(LOGS, log_filter=LogFilter(days=text))
    chosen = sorted({p.split("date=")[1][:10] for p in paths})
    every = [f"2026-11-0{d}" for d in range(1, 8)]
    assert chosen == [d for d in every if (first or "") <= d and d <= (last or "9999")]


@pytest.mark.parametrize("text", ["2026-11-32", "2026/11/02", "yesterday", ":", "2026-11-05:2026-11-01",
                                  "2026-11-01:2026-11-02:2026-11-03"])
def test_a_malformed_day_range_names_days(text):
    with pytest.raises(ParameterError) as err:
        LogFilter(days=text)
    assert err.value.parameters == ("days",)


def test_a_range_without_partitions_and_an_undated_log_are_errors(tmp_path, example):
    with pytest.raises(ParameterError, match=r"matches no partition of .* \(its days run from 2026-11-01 to "
                                             r"2026-11-07\)"):
        list_parts(LOGS, log_filter=LogFilter(days="2027-01-01:"))
    table, _, _ = example
    write_log(table.slice(0, 100), str(tmp_path / "undated"), n_features=N_FEATURES, n_actions=N_ACTIONS)
    with pytest.raises(ParameterError, match="needs date-partitioned logs"):
        list_parts(str(tmp_path / "undated"), log_filter=LogFilter(days="2026-11-01"))


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5, float("nan"), "a fifth", True])
def test_a_fraction_outside_the_open_unit_interval_is_refused(fraction):
    with pytest.raises(ParameterError) as err:
        LogFilter(split="test", test_fraction=fraction)
    assert err.value.parameters == ("test_fraction",)


def test_split_is_disjoint_exhaustive_and_independent_of_partitioning(tmp_path, example):
    table, _, _ = example
    fraction = 0.25
    halves = {}
    for n_parts in (1, 7):
        url = str(tmp_path / f"log{n_parts}")
        write_log(table, url, n_parts=n_parts, n_features=N_FEATURES, n_actions=N_ACTIONS)
        halves[n_parts] = {split: row_ids(read_log(url, log_filter=LogFilter(split=split, test_fraction=fraction)))
                           for split in ("train", "test")}
    train, test = halves[1]["train"], halves[1]["test"]
    assert np.intersect1d(train, test).size == 0
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.sort(table.column("row_id").to_numpy()))
    for split in ("train", "test"):
        assert np.array_equal(np.sort(halves[7][split]), np.sort(halves[1][split]))
    n = table.num_rows  # the test share is Binomial(n, fraction) / n: within 5 standard deviations
    assert abs(test.size / n - fraction) < 5 * np.sqrt(fraction * (1 - fraction) / n)
    assert np.array_equal(in_test(test, fraction), np.ones(test.size, bool))  # the documented formula


def test_cross_fitting_folds_are_keyed_independently_of_the_split():
    """Folds (purpose "cross-fit fold") and the split ("train/test split"), same seed: every fold has its
    share of test rows, and the train rows spread evenly over the folds."""
    ids = np.arange(200_000)
    test = in_test(ids, 0.2, 0)
    folds = fold_of(ids, 5, 0)
    for j in range(5):
        in_fold = folds == j
        share = test[in_fold].mean()
        assert abs(share - 0.2) < 5 * np.sqrt(0.2 * 0.8 / in_fold.sum())
        train_share = (in_fold & ~test).sum() / (~test).sum()
        assert abs(train_share - 0.2) < 5 * np.sqrt(0.2 * 0.8 / (~test).sum())


def test_an_opened_log_carries_its_filter_through_pickling():
    f = LogFilter(days="2026-11-02:2026-11-03", split="train", test_fraction=0.3, split_seed=4)
    logs = open_log(LOGS, log_filter=f)
    assert str(logs) == LOGS
    again = pickle.loads(pickle.dumps(logs))
    assert isinstance(again, OpenedLog) and again.log_filter == f and again.paths == logs.paths
    _, parts = list_parts(logs)
    assert len(parts) == 2 and all(isinstance(p, PartFile) and pickle.loads(pickle.dumps(p)).log_filter == f
                                   for p in parts)


def test_evaluate_on_days_equals_evaluate_on_those_folders():
    model_eval = evaluation(MODEL)
    by_filter = evaluate_log(LOGS, model_eval, log_filter=LogFilter(days="2026-11-02:2026-11-04"))
    by_glob = evaluate_log(LOGS + "/date=2026-11-0[2-4]", model_eval)
    for name, e in by_glob.estimates.items():
        assert by_filter.estimates[name].value == pytest.approx(e.value, rel=1e-12)
        assert by_filter.estimates[name].n == e.n == 6000


def test_the_split_of_a_dataframe_equals_the_split_of_its_log(tmp_path, example):
    import dask.dataframe as dd

    table, model, _ = example
    f = LogFilter(split="test", test_fraction=0.3)
    write_log(table, str(tmp_path / "log"), n_parts=4, n_features=N_FEATURES, n_actions=N_ACTIONS)
    frame = evaluate_dataframe(dd.read_parquet(str(tmp_path / "log")), evaluation(model), log_filter=f)
    log = evaluate_log(str(tmp_path / "log"), evaluation(model), log_filter=f)
    assert frame.estimates["DR"].value == pytest.approx(log.estimates["DR"].value, rel=1e-12)
    assert frame.estimates["IPS"].n == log.estimates["IPS"].n == int(in_test(table.column("row_id").to_numpy(),
                                                                             0.3).sum())


def test_days_of_a_table_by_its_date_column_and_a_split_needs_row_ids():
    table = pa.table({"row_id": pa.array([1, 2, 3], pa.int64()),
                      "features": pa.array([[0], [1], [0]], pa.list_(pa.int32())),
                      "action": [0, 1, 0], "reward": [1.0, 0.0, 1.0], "propensity": [0.5, 0.5, 0.5],
                      "date": ["2026-11-01", "2026-11-02", "2026-11-03"]})
    part = partition_from_table(table, "<t>", log_filter=LogFilter(days="2026-11-02:"))
    assert part.row_id.tolist() == [2, 3]
    with pytest.raises(LogDataError, match="column 'row_id': missing column: the test split is keyed by"):
        partition_from_table(table.drop_columns(["row_id"]), "<t>", log_filter=LogFilter(split="test"))
    with pytest.raises(ParameterError, match="needs date partitions"):
        partition_from_table(table.drop_columns(["date"]), "<t>", log_filter=LogFilter(days="2026-11-02"))


def test_log_root_strips_globs_files_and_hive_folders():
    assert log_root("s3://b/logs/date=2026-11-0*/part-1.parquet") == "s3://b/logs"
    assert log_root("logs/date=2026-11-01/hour=3/part-1.parquet") == "logs"
    assert log_root("logs") == "logs"
