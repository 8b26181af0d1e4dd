"""The opened log: each fact read once, (d, k) by one rule, its fingerprint, and what travels to a worker."""

import collections
import pickle
import threading
from pathlib import Path

import pytest

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.logs.catalogue import read_catalogue
from dr_scale.logs.filters import LogFilter
from dr_scale.logs.listing import action_vocabulary, has_propensity, list_parts, log_footprint, log_metadata
from dr_scale.logs.opened import OpenedLog, open_log
from dr_scale.logs.writing import write_log
from dr_scale.synthetic.bandit import generate_bandit
from dr_scale.synthetic.example import example_paths

LOGS, _ = example_paths()  # 7 parts, date=2026-11-01 … 2026-11-07


class Counted:
    """A filesystem that counts the opens and listings per path."""

    def __init__(self, fs):
        self.fs, self.calls = fs, collections.Counter()

    def open(self, path, *args, **kwargs):
        self.calls["open", str(path)] += 1
        return self.fs.open(path, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.fs, name)


def counted(logs: OpenedLog) -> Counted:
    fs, _ = logs.listing()
    logs._fs = Counted(fs)
    return logs._fs


def test_each_fact_is_read_once_and_the_functions_of_the_contract_return_it():
    logs = open_log(LOGS)
    fs = counted(logs)
    for _ in range(3):
        assert list_parts(logs) == (fs, logs.parts)
        assert log_metadata(logs) == {"n_features": 50, "n_actions": 3}
        assert has_propensity(logs) is True
        assert log_footprint(logs).rows == 14_000
        assert logs.fingerprint
    assert action_vocabulary(logs) is None and read_catalogue(logs) is None
    opens = collections.Counter(path for (kind, path), n in fs.calls.items() for _ in range(n))
    assert sorted(opens) == logs.paths and set(opens.values()) == {1}  # one footer read per part


def test_the_footers_are_read_once_under_concurrent_readers():
    logs = open_log(LOGS)
    fs = counted(logs)
    threads = [threading.Thread(target=lambda: logs.footprint) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(fs.calls.values()) == {1} and len(fs.calls) == 7


def test_open_log_is_idempotent_and_refuses_another_filter():
    logs = open_log(LOGS, log_filter=LogFilter(split="test"))
    assert open_log(logs) is logs and open_log(logs, log_filter=LogFilter(split="test")) is logs
    with pytest.raises(ParameterError, match="opened with"):
        open_log(logs, log_filter=LogFilter(split="train"))
    with pytest.raises(ParameterError, match="carries its own filter"):
        list_parts(logs, log_filter=LogFilter(split="train"))
    with pytest.raises(UserError, match="expected a path or URL"):
        OpenedLog(3)
    assert open_log(Path(LOGS)).paths == open_log(LOGS).paths


def test_dimensions_explicit_then_metadata_then_the_data(tmp_path):
    logs = open_log(LOGS)
    assert logs.dimensions() == (50, 3) and logs.dimensions(40, 5) == (40, 5)
    bare = str(tmp_path / "bare")
    write_log(open_log(LOGS).read(logs.paths[0]).table.select(["row_id", "features", "action", "reward",
                                                                "propensity"]).replace_schema_metadata(None), bare)
    model = type("Model", (), {"n_features": 50, "n_actions": 3})()
    assert open_log(bare).dimensions() == (None, None)
    assert open_log(bare).dimensions(fitted=(None, model)) == (50, 3)
    assert open_log(bare).dimensions(7, fitted=(model,)) == (7, 3)


def test_the_pickled_log_carries_its_listing_and_filter_not_its_footers_nor_secrets():
    logs = open_log(LOGS, {"auto_mkdir": True}, LogFilter(days="2026-11-02:2026-11-03"))
    _ = logs.footprint
    again = pickle.loads(pickle.dumps(logs))
    assert again.paths == logs.paths and again.log_filter == logs.log_filter
    assert again._footers == {} and again.storage_options is None
    assert len(pickle.dumps(logs)) < 2_000


def test_the_fingerprint_identifies_the_content_not_the_folder(tmp_path):
    a, b, c = (str(tmp_path / name) for name in "abc")
    generate_bandit(a, rows=3000, features=100, actions=3, seed=1, rows_per_part=1000)
    generate_bandit(b, rows=3000, features=100, actions=3, seed=1, rows_per_part=1000)
    generate_bandit(c, rows=3000, features=100, actions=3, seed=2, rows_per_part=1000)
    assert open_log(a).fingerprint == open_log(b).fingerprint != open_log(c).fingerprint
