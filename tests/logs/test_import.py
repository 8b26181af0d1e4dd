"""``dr-scale import`` and the DataFrame path: raw tables into the log contract by an import spec.

The Open Bandit Dataset sample (tests/fixtures/obd, 10,000 rows of a uniform-random logging
policy over 80 items) is imported with its spec and evaluated; IPS / SNIPS of the uniform
policy must equal Open Bandit Pipeline's IPW / SNIPW on the same rows (when obp is
importable) and the same formulas computed here from the raw CSV with pandas.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pyarrow.parquet as pq
import pytest

from dr_scale.cli import main
from dr_scale.logs.importing import from_dask, from_pandas, import_log
from dr_scale.logs.listing import SPEC_FILE, action_vocabulary
from dr_scale.logs.reading import read_log
from dr_scale.logs.spec import hash_keys
from dr_scale.logs.writing import write_log

OBD = Path(__file__).parents[1] / "fixtures" / "obd"
K = 80


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def log_table(folder) -> pa.Table:
    """Every part of an imported log, in row-id order, with the day of each row."""
    tables = []
    for p in sorted(Path(folder).rglob("part-*.parquet")):
        t = pq.read_table(p)
        day = p.parent.name.removeprefix("date=") if p.parent.name.startswith("date=") else ""
        tables.append(t.append_column("day", pa.array([day] * t.num_rows, pa.string())))
    table = pa.concat_tables(tables, promote_options="default")
    return table.take(np.argsort(table.column("row_id").to_numpy()))


@pytest.fixture(scope="module")
def obd_raw():
    with gzip.open(OBD / "all.csv.gz", "rt") as f:
        return pd.read_csv(f, index_col=0)


@pytest.fixture(scope="module")
def obd_log(tmp_path_factory):
    out = tmp_path_factory.mktemp("obd") / "logs"
    summary = import_log(str(OBD / "all.csv.gz"), str(OBD / "obd.toml"), str(out))
    return out, summary


# -- the Open Bandit Dataset sample ----------------------------------------------------------------
def test_obd_spec_is_short():
    lines = [ln for ln in (OBD / "obd.toml").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(lines) <= 25


def _obp_estimators():
    """obp's estimators module, with stand-in torch and seaborn modules (obp imports them, never calls them)."""
    import importlib.util

    if importlib.util.find_spec("obp") is None:
        pytest.skip("Open Bandit Pipeline is not installed (pip install --no-deps --ignore-requires-python obp==0.5.7)")
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        import obp_equality  # noqa: F401 - installs the stand-ins, as the benchmark does
    finally:
        sys.path.pop(0)
    from obp.ope import estimators

    return estimators


@pytest.fixture(scope="module")
def obd_estimates(obd_log, tmp_path_factory):
    """IPS and SNIPS of the uniform policy on the imported sample, by `dr-scale evaluate`."""
    out, _ = obd_log
    result = tmp_path_factory.mktemp("obd-eval") / "r.json"
    status = main(["evaluate", str(out), "--policy", "uniform", "--estimators", "IPS,SNIPS", "--json", str(result),
                   "--no-progress"])
    assert status == 0
    return {k: e["value"] for k, e in json.loads(result.read_text())["estimates"].items()}


def test_obd_evaluate_equals_the_formulas(obd_log, obd_raw, obd_estimates):
    _, summary = obd_log
    assert (summary.rows, len(summary.days), summary.n_actions, summary.actions_logged) == (10_000, 7, K, K)
    assert summary.propensity == (0.0125, 0.0125)
    r, p = obd_raw["click"].to_numpy(float), obd_raw["propensity_score"].to_numpy()
    w = (1 / K) / p
    assert obd_estimates["IPS"] == pytest.approx(np.mean(w * r), abs=1e-12, rel=0)
    assert obd_estimates["SNIPS"] == pytest.approx(np.sum(w * r) / np.sum(w), abs=1e-12, rel=0)


def test_obd_evaluate_equals_obp(obd_raw, obd_estimates):
    ob = _obp_estimators()
    n = len(obd_raw)
    theirs = dict(reward=obd_raw["click"].to_numpy(float), action=obd_raw["item_id"].to_numpy(),
                  pscore=obd_raw["propensity_score"].to_numpy(), position=obd_raw["position"].to_numpy() - 1,
                  action_dist=np.full((n, K, 3), 1 / K))
    ipw = ob.InverseProbabilityWeighting().estimate_policy_value(**theirs)
    snipw = ob.SelfNormalizedInverseProbabilityWeighting().estimate_policy_value(**theirs)
    assert obd_estimates["IPS"] == pytest.approx(ipw, abs=1e-12, rel=0)
    assert obd_estimates["SNIPS"] == pytest.approx(snipw, abs=1e-12, rel=0)


def test_obd_rows_actions_and_features(obd_log, obd_raw):
    out, _ = obd_log
    table = log_table(out)
    assert table.num_rows == 10_000
    # row positions in the file order; items 0..79 keep their ids (a numeric vocabulary, sorted)
    assert np.array_equal(table.column("row_id").to_numpy() & ((1 << 36) - 1), np.arange(10_000))
    assert np.array_equal(table.column("action").to_numpy(), obd_raw["item_id"].to_numpy())
    assert np.array_equal(table.column("reward").to_numpy(), obd_raw["click"].to_numpy())
    days = pd.to_datetime(obd_raw["timestamp"]).dt.strftime("%Y-%m-%d").to_numpy()
    assert np.array_equal(table.column("day").to_numpy(zero_copy_only=False), days)
    # the features of a few rows equal scikit-learn's FeatureHasher on the raw dicts
    from sklearn.feature_extraction import FeatureHasher

    spec = json.loads((out / SPEC_FILE).read_text())
    cols = spec["features"]
    rows = [0, 17, 4242, 9999]
    dicts = [{**{c: str(obd_raw[c].iloc[i]) for c in cols["categorical"]},
              **{c: float(obd_raw[c].iloc[i]) for c in cols["numeric"]}} for i in rows]
    X = FeatureHasher(2 ** 18, alternate_sign=False).transform(dicts).tocsr()
    for j, i in enumerate(rows):
        ours = dict(zip(table.column("features")[i].as_py(), table.column("values")[i].as_py(), strict=True))
        start, end = X.indptr[j], X.indptr[j + 1]
        nonzero = X.data[start:end] != 0
        theirs = dict(zip(X.indices[start:end][nonzero], X.data[start:end][nonzero], strict=True))
        assert ours.keys() == theirs.keys()
        assert np.allclose([ours[f] for f in theirs], list(theirs.values()), rtol=1e-6)  # float32 values


def test_obd_catalogue(obd_log):
    out, summary = obd_log
    catalogue = pq.read_table(out / "_actions.parquet")
    assert summary.catalogue == K and catalogue.column("action").to_pylist() == list(range(K))
    items = pd.read_csv(OBD / "item_context.csv", index_col=0)
    row = items.iloc[5]
    idx, _ = hash_keys([f"item_feature_{j}={row[f'item_feature_{j}']}" for j in (1, 2, 3)] + ["item_feature_0"], 18)
    assert sorted(catalogue.column("features")[5].as_py()) == sorted(idx.tolist())


def test_hashing_equals_feature_hasher():
    from sklearn.feature_extraction import FeatureHasher

    keys = [f"c{j}=v{i}" for j in range(3) for i in range(2000)]
    idx, fp = hash_keys(keys, 12)
    X = FeatureHasher(2 ** 12, alternate_sign=False, input_type="string").transform([[k] for k in keys])
    assert np.array_equal(idx, X.indices)
    assert np.unique(fp).size == len(keys)


# -- formats and blocks ------------------------------------------------------------------------------------
RAW = """ts,item,click,p,color,size,words
2026-11-01 09:00:00,b,1,0.5,red,1.5,big red
2026-11-01 10:00:00,a,0,0.25,blue,,small
2026-11-02 01:00:00,c,1,0.25,red,2,
2026-11-02 23:30:00,a,0,0.5,,0.5,big big
"""
SPEC = """action = "item"
reward = "click"
propensity = "p"
timestamp = "ts"
hash_bits = 10
{extra}
[features]
categorical = ["color"]
numeric = ["size"]
tokens = ["words"]
"""


def write_raw(folder: Path, text: str = RAW, name: str = "raw.csv", extra: str = "") -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    (folder / "spec.toml").write_text(SPEC.format(extra=extra))
    return folder / name, folder / "spec.toml"


def test_small_import_contents(tmp_path):
    raw, spec = write_raw(tmp_path)
    summary = import_log(str(raw), str(spec), str(tmp_path / "logs"))
    assert (summary.rows, summary.days, summary.n_actions) == (4, ["2026-11-01", "2026-11-02"], 3)
    t = log_table(tmp_path / "logs")
    assert t.column("action").to_pylist() == [1, 0, 2, 0]  # a, b, c by text
    assert t.column("day").to_pylist() == ["2026-11-01", "2026-11-01", "2026-11-02", "2026-11-02"]
    idx, _ = hash_keys(["color=red", "size", "words=big", "words=red"], 10)
    assert dict(zip(t.column("features")[0].as_py(), t.column("values")[0].as_py(), strict=True)) == {
        idx[0]: 1.0, idx[1]: 1.5, idx[2]: 1.0, idx[3]: 1.0}
    big, _ = hash_keys(["words=big", "size"], 10)
    row3 = dict(zip(t.column("features")[3].as_py(), t.column("values")[3].as_py(), strict=True))
    assert row3 == {big[0]: 2.0, big[1]: 0.5}  # a bag of tokens; a missing color is absent
    assert summary.keys == 6  # color=red, color=blue, size, words=big, words=red, words=small


def test_time_zone_moves_days(tmp_path):
    raw, spec = write_raw(tmp_path, extra='timezone = "Asia/Tokyo"')
    summary = import_log(str(raw), str(spec), str(tmp_path / "logs"))
    # naive times are read in the spec's zone: the days are those of the text
    assert summary.days == ["2026-11-01", "2026-11-02"]
    raw.write_text(re.sub(r"(\d\d:\d\d:\d\d),", r"\1+00:00,", RAW))
    summary = import_log(str(raw), str(spec), str(tmp_path / "logs2"))
    # UTC times: 2026-11-02 23:30 UTC is 2026-11-03 in Tokyo
    assert summary.days == ["2026-11-01", "2026-11-02", "2026-11-03"]


@pytest.mark.slow
def test_blocks_formats_and_compression_agree(obd_raw, tmp_path):
    """The OBD CSV read in one block, in ~40 byte-range blocks, gzip-streamed, as JSON lines and as Parquet."""
    csv = tmp_path / "csv" / "all.csv"
    csv.parent.mkdir()
    with gzip.open(OBD / "all.csv.gz", "rb") as f:
        csv.write_bytes(f.read())
    spec = str(OBD / "obd.toml")
    runs = {"one block": (csv, {}), "blocks": (csv, {"blocksize": 128_000}), "gzip": (OBD / "all.csv.gz", {})}
    frame = obd_raw.reset_index(drop=True)
    (tmp_path / "json").mkdir()
    frame.to_json(tmp_path / "json" / "all.jsonl", orient="records", lines=True)
    runs["json"] = (tmp_path / "json" / "all.jsonl", {"blocksize": 1_000_000})
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "pq" / "all.parquet",
                   row_group_size=3000)
    runs["parquet"] = (tmp_path / "pq" / "all.parquet", {})
    tables = {}
    for name, (raw, kwargs) in runs.items():
        out = tmp_path / ("out_" + name.replace(" ", "_"))
        import_log(str(raw), spec, str(out), **kwargs)
        tables[name] = log_table(out)
    base = tables.pop("one block")
    assert base.equals(tables.pop("blocks"))
    positions = base.column("row_id").to_numpy() & ((1 << 36) - 1)
    for name, t in tables.items():  # other files: other ids, the same positions and everything else
        assert np.array_equal(t.column("row_id").to_numpy() & ((1 << 36) - 1), positions), name
        keep = [c for c in base.column_names if c != "row_id"]
        assert t.select(keep).equals(base.select(keep)), name


# -- bad input: one line, nothing written --------------------------------------------------------------
def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


BAD = [
    ("unknown column", RAW, SPEC.format(extra="").replace('numeric = ["size"]', 'numeric = ["sise"]'),
     ["spec.toml: features.numeric#1: no column matching 'sise'", "raw.csv"]),
    ("wrong type", RAW.replace(",1,0.25,red,2,", ",yes,0.25,red,2,"), None,
     ["raw.csv, line 4: column 'click': not a number ('yes')"]),
    ("malformed line", RAW.replace("2026-11-02 01:00:00,c,1,0.25,red,2,\n", "2026-11-02 01:00:00,c\n"), None,
     ["raw.csv, line 4: malformed CSV line: 2 fields where the header has 7"]),
    ("bad timestamp", RAW.replace("2026-11-02 01:00:00", "Nov 2nd 1am"), None,
     ["raw.csv, line 4: column 'ts': not a timestamp", "'Nov 2nd"]),
    ("propensity", RAW.replace(",0.25,blue,", ",1.5,blue,"), None,
     ["raw.csv, line 3: column 'p': propensity outside (0, 1]"]),
    ("missing action", RAW.replace(",c,1,", ",,1,"), None, ["raw.csv, line 4: column 'item': missing action"]),
]


@pytest.mark.parametrize("case, raw, spec, expected", BAD, ids=[b[0] for b in BAD])
def test_bad_input_one_line_nothing_written(case, raw, spec, expected, tmp_path, capsys):
    raw_path, spec_path = write_raw(tmp_path / "in", raw)
    if spec is not None:
        spec_path.write_text(spec)
    status, out, err = run(capsys, "import", str(raw_path), "--spec", str(spec_path), "--out",
                           str(tmp_path / "logs"), "--no-progress")
    assert status == 2 and len(_lines(err)) == 1, err
    for piece in expected:
        assert piece in err
    assert not (tmp_path / "logs").exists()
    assert sorted(os.listdir(tmp_path)) == ["in"]  # no staging folder left either


def test_bad_rows_skipped_and_counted(tmp_path, capsys):
    raw = RAW.replace(",1,0.25,red,2,", ",yes,0.25,red,2,") + "2026-11-03 01:00:00,b\n" + \
        "not a time,b,1,0.5,red,1,\n"
    raw_path, spec_path = write_raw(tmp_path, raw, extra="skip_bad_rows = true")
    status, out, err = run(capsys, "import", str(raw_path), "--spec", str(spec_path), "--out", str(tmp_path / "logs"),
                           "--no-progress")
    assert status == 0, err
    assert "imported 3 rows" in out
    assert "bad rows skipped: 3 (1 × column 'click': not a number ('yes'); 1 × column 'ts': not a timestamp" in out
    assert "1 × malformed line" in out
    assert log_table(tmp_path / "logs").num_rows == 3


def test_later_day_same_ids_and_unseen_action(tmp_path, capsys):
    day1 = ("ts,item,click,p,color,size,words\n2026-11-01 09:00:00,b,1,0.5,red,1,x\n"
            "2026-11-01 10:00:00,a,0,0.5,red,1,x\n")
    raw, spec = write_raw(tmp_path / "d1", day1)
    logs = tmp_path / "logs"
    assert import_log(str(raw), str(spec), str(logs)).n_actions == 2
    day2 = "ts,item,click,p,color,size,words\n2026-11-02 09:00:00,b,1,0.5,red,1,x\n"
    raw2, _ = write_raw(tmp_path / "d2", day2)
    import_log(str(raw2), str(spec), str(logs))
    t = log_table(logs)
    rows = sorted(zip(t.column("day").to_pylist(), t.column("row_id").to_numpy() & ((1 << 36) - 1),
                      t.column("action").to_pylist(), strict=True))
    assert [(day, action) for day, _, action in rows] == [("2026-11-01", 1), ("2026-11-01", 0), ("2026-11-02", 1)]
    assert len(set(t.column("row_id").to_pylist())) == 3  # the two files' positions 0 are different ids
    # a new action value: one line naming it; the log unchanged
    raw3, _ = write_raw(tmp_path / "d3", day2.replace("2026-11-02", "2026-11-03").replace(",b,", ",z,"))
    before = sorted(p.relative_to(logs) for p in logs.rglob("*"))
    status, _, err = run(capsys, "import", str(raw3), "--spec", str(spec), "--out", str(logs), "--no-progress")
    assert status == 2 and len(_lines(err)) == 1
    assert "line 2: column 'item': action value 'z' is not in the log's vocabulary of 2 actions" in err
    assert sorted(p.relative_to(logs) for p in logs.rglob("*")) == before
    # the same file again, or another file of a day the log holds: refused, nothing changed
    status, _, err = run(capsys, "import", str(raw2), "--spec", str(spec), "--out", str(logs), "--no-progress")
    assert status == 2 and "d2/raw.csv: already imported into" in err
    raw4, _ = write_raw(tmp_path / "d4", day2.replace(",b,1,", ",a,1,"))
    status, _, err = run(capsys, "import", str(raw4), "--spec", str(spec), "--out", str(logs), "--no-progress")
    assert status == 2 and "already holds date=2026-11-02" in err
    raw5, _ = write_raw(tmp_path / "d5", day2)  # a copy of d2's file at another path: the same rows
    status, _, err = run(capsys, "import", str(raw5), "--spec", str(spec), "--out", str(logs), "--no-progress")
    assert status == 2 and f"d5/raw.csv: the same rows as {raw2}, imported into" in err
    assert sorted(p.relative_to(logs) for p in logs.rglob("*")) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_reserved_id_for_unseen_actions(tmp_path):
    raw, spec = write_raw(tmp_path / "d1", extra='unseen_actions = "reserved"')
    logs = tmp_path / "logs"
    assert import_log(str(raw), str(spec), str(logs)).n_actions == 4  # a, b, c and <other>
    raw2, _ = write_raw(tmp_path / "d2", "ts,item,click,p,color,size,words\n2026-11-05 09:00:00,z,1,0.5,red,1,x\n")
    import_log(str(raw2), str(spec), str(logs))
    t = log_table(logs)
    assert t.filter(pa.compute.equal(t.column("day"), "2026-11-05")).column("action").to_pylist() == [3]


# -- DataFrames ------------------------------------------------------------------------------------------
def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 600
    return pd.DataFrame({
        "item": rng.choice(["x", "y", "z"], n), "click": rng.integers(0, 2, n).astype(float),
        "p": np.full(n, 1 / 3), "color": rng.choice(["red", "blue", None], n),
        "size": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
        "ts": pd.date_range("2026-11-01", periods=n, freq="17min").astype(str)})


FRAME_SPEC = {"action": "item", "reward": "click", "propensity": "p", "timestamp": "ts", "hash_bits": 12,
              "features": {"categorical": ["color"], "numeric": ["size"]}}


def test_from_pandas_and_from_dask_agree_with_import(tmp_path):
    import dask
    import dask.dataframe as dd

    import dr_scale

    df = _frame()
    part = from_pandas(df, FRAME_SPEC)
    assert part.X.shape == (600, 4096) and set(part.action) == {0, 1, 2}
    evaluation = dr_scale.Evaluation("constant:#1", dr_scale.make_estimators(["IPS", "SNIPS"]))
    in_memory = dr_scale.evaluate_partitions([part], evaluation)
    with dask.config.set({"dataframe.convert-string": True}):
        log = from_dask(dd.from_pandas(df, npartitions=4), FRAME_SPEC)
        on_dask = dr_scale.evaluate_dataframe(log, evaluation)
    df.to_csv(tmp_path / "raw.csv", index=False)
    import_log(str(tmp_path / "raw.csv"), FRAME_SPEC, str(tmp_path / "logs"))
    from_file = dr_scale.evaluate_log(str(tmp_path / "logs"), evaluation)
    for est in ("IPS", "SNIPS"):
        assert in_memory.estimates[est].value == pytest.approx(on_dask.estimates[est].value, abs=1e-12)
        assert in_memory.estimates[est].value == pytest.approx(from_file.estimates[est].value, abs=1e-12)
    # the same features whichever way (row ids: positions; the file's carry the file's id)
    computed = log.compute()
    assert [list(f) for f in computed["features"]] == [list(f) for f in part.table.column("features").to_pylist()]
    # write_log partition_by="date" writes the days an import writes
    write_log(part.table, str(tmp_path / "frame_logs"), partition_by="date", n_features=4096, n_actions=3)
    days = sorted(p.name for p in (tmp_path / "frame_logs").iterdir() if p.name.startswith("date="))
    assert days == sorted(p.name for p in (tmp_path / "logs").iterdir() if p.name.startswith("date="))
    # ... and keeps the vocabulary, as the import does
    assert action_vocabulary(str(tmp_path / "frame_logs")) == action_vocabulary(str(tmp_path / "logs")) == \
        ["x", "y", "z"]
    assert sum(len(p) for p in read_log(str(tmp_path / "frame_logs"))) == 600


def test_evaluate_dataframe_with_dask_string_conversion():
    """A contract DataFrame of Python lists through dd.from_pandas (convert-string on) evaluates."""
    import dask
    import dask.dataframe as dd

    import dr_scale

    df = pd.DataFrame({"row_id": np.arange(6), "features": [[1, 2], [3], [], [2, 4], [0], [1]],
                       "action": [0, 1, 0, 1, 0, 1], "reward": [1.0, 0, 1, 0, 1, 1], "propensity": [0.5] * 6})
    evaluation = dr_scale.Evaluation("constant:0", dr_scale.make_estimators(["IPS"]))
    with dask.config.set({"dataframe.convert-string": True}):
        ddf = dd.from_pandas(df, npartitions=2)
        assert str(ddf.dtypes["features"]).startswith("str")  # the lists did become text
        result = dr_scale.evaluate_dataframe(ddf, evaluation)
    assert result.estimates["IPS"].value == pytest.approx(np.mean([2.0, 0, 2, 0, 2, 0]), abs=1e-12)
    df["features"] = [np.array(f) for f in df["features"]]  # numpy's "[1 2]" text is not a list: said so
    with dask.config.set({"dataframe.convert-string": True}):
        with pytest.raises(dr_scale.LogDataError, match="a list column became text .* dr_scale.from_dask"):
            dr_scale.evaluate_dataframe(dd.from_pandas(df, npartitions=2), evaluation)


def test_evaluate_raw_file_points_to_import(tmp_path, capsys):
    raw, _ = write_raw(tmp_path)
    status, _, err = run(capsys, "evaluate", str(raw), "--no-progress")
    assert status == 2 and "not a Parquet log file (it looks like CSV or text)" in err and "dr-scale import" in err
    pq.write_table(pa.table({"item": ["a"], "click": [1]}), tmp_path / "raw.parquet")
    status, _, err = run(capsys, "evaluate", str(tmp_path / "raw.parquet"), "--no-progress")
    assert status == 2 and "not in the log contract" in err and "dr-scale import" in err


def test_local_cluster_identical(tmp_path, capsys, local_cluster):
    csv = tmp_path / "all.csv"
    with gzip.open(OBD / "all.csv.gz", "rb") as f:
        csv.write_bytes(f.read())
    shutil.copy(OBD / "item_context.csv", tmp_path / "item_context.csv")
    shutil.copy(OBD / "obd.toml", tmp_path / "obd.toml")
    outs = {}
    for name, extra in (("local", []), ("cluster", ["--scheduler", local_cluster.scheduler_address])):
        status, out, err = run(capsys, "import", str(csv), "--spec", str(tmp_path / "obd.toml"), "--out",
                               str(tmp_path / name), "--blocksize", "500000", "--no-progress", *extra)
        assert status == 0, err
        outs[name] = out
    assert outs["local"].replace(str(tmp_path / "local"), "OUT") == outs["cluster"].replace(
        str(tmp_path / "cluster"), "OUT")
    assert log_table(tmp_path / "local").equals(log_table(tmp_path / "cluster"))
    assert pq.read_table(tmp_path / "local" / "_actions.parquet").equals(
        pq.read_table(tmp_path / "cluster" / "_actions.parquet"))


def doc_blocks(page: Path) -> list[tuple[str, str]]:
    """The page's ``bash`` and ``python`` blocks that run (not preceded by ``<!-- not run: … -->``), in order."""
    text = page.read_text()
    out = []
    for m in re.finditer(r"(<!-- not run:[^>]*-->\n)?```(bash|python)\n(.*?)```", text, flags=re.S):
        if not m.group(1):
            out.append((m.group(2), m.group(3)))
    return out


@pytest.mark.slow
def test_import_page_runs(tmp_path, monkeypatch):
    """docs/import.md's blocks run as written in a folder with the sample in data/obd/; the printed summary and
    estimates are the page's."""
    page = Path(__file__).parents[2] / "docs" / "import.md"
    (tmp_path / "data" / "obd").mkdir(parents=True)
    shutil.copy(OBD / "all.csv.gz", tmp_path / "data" / "obd")
    shutil.copy(OBD / "item_context.csv", tmp_path / "data" / "obd")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dr-scale").write_text(f'#!/bin/sh\nexec {sys.executable} -m dr_scale.cli "$@"\n')
    (bin_dir / "dr-scale").chmod(0o755)
    repo = str(Path(__file__).parents[2])
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    monkeypatch.chdir(tmp_path)
    printed = ""
    blocks = doc_blocks(page)
    assert [kind for kind, _ in blocks].count("bash") >= 3 and any(kind == "python" for kind, _ in blocks)
    for kind, code in blocks:
        if kind == "bash":
            done = subprocess.run(["bash", "-e", "-c", code], env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            printed += done.stdout
        else:
            exec(compile(code, str(page), "exec"), {})
    text = page.read_text()
    assert "imported 10,000 rows" in printed
    assert any(line.split()[:2] == ["IPS", "0.00380"] for line in printed.splitlines())
    for line in printed.splitlines():
        if line.startswith(("imported", "days:", "actions:", "features:", "IPS", "SNIPS")):
            assert line.replace(str(tmp_path) + "/", "") in text, line


def test_colliding_features_summed_as_feature_hasher():
    """With 2^3 columns most rows hold two features on one index: summed, as FeatureHasher sums them."""
    from sklearn.feature_extraction import FeatureHasher

    rng = np.random.default_rng(7)
    n = 300
    df = pd.DataFrame({"a": rng.integers(0, 2, n), "r": np.ones(n), "p": np.full(n, 0.5),
                       **{f"c{j}": rng.choice(list("uvwxyz"), n) for j in range(4)},
                       **{f"x{j}": np.round(rng.normal(size=n), 3) for j in range(4)}})
    spec = {"action": "a", "reward": "r", "propensity": "p", "hash_bits": 3,
            "features": {"categorical": ["c*"], "numeric": ["x*"]}}
    log = from_pandas(df, spec)
    dicts = df[[f"c{j}" for j in range(4)] + [f"x{j}" for j in range(4)]].to_dict("records")
    X = FeatureHasher(8, alternate_sign=False).transform(dicts).tocsr()
    X.sum_duplicates()
    X.eliminate_zeros()
    ours = log.X.toarray()
    assert np.allclose(ours, X.toarray(), atol=1e-6)  # values are float32 in the log
    assert all(np.all(np.diff(log.X.indices[s:e]) > 0) for s, e in zip(log.X.indptr[:-1], log.X.indptr[1:],
                                                                         strict=True))  # sorted, once per row


@pytest.mark.slow
def test_killed_import_leaves_no_log(tmp_path):
    """SIGKILL while the parts are being written: no output folder, only the hidden staging folder beside it, which
    the next import into that output removes (its owner, a process of this host, is gone) with a line saying so."""
    import signal
    import time

    csv = tmp_path / "all.csv"
    with gzip.open(OBD / "all.csv.gz", "rb") as f:
        body = f.read()
    head, _, rows = body.partition(b"\n")
    csv.write_bytes(head + b"\n" + rows * 20)  # 200,000 rows: seconds of work
    repo = str(Path(__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    spec = tmp_path / "spec.toml"
    spec.write_text((OBD / "obd.toml").read_text().split("[actions]")[0].replace('timestamp = "timestamp"\n', ""))
    proc = subprocess.Popen([sys.executable, "-m", "dr_scale.cli", "import", str(csv), "--spec", str(spec), "--out",
                             str(tmp_path / "logs"), "--blocksize", "1000000", "--no-progress"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    staged = []
    while time.monotonic() < deadline and proc.poll() is None:
        staged = [p for p in tmp_path.glob(".logs.import-*") if any(p.rglob("*.parquet"))]
        if staged:
            break
        time.sleep(0.05)
    assert staged, "the import ended before it wrote a part; make the input bigger"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not (tmp_path / "logs").exists()
    assert [p.name for p in tmp_path.glob(".logs.import-*")] == [staged[0].name]

    small = tmp_path / "small.csv"
    small.write_bytes(head + b"\n" + rows)
    again = subprocess.run([sys.executable, "-m", "dr_scale.cli", "import", str(small), "--spec", str(spec), "--out",
                            str(tmp_path / "logs"), "--no-progress"], env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"removed {staged[0]}, the staging folder of an import that was killed (process {proc.pid})" in again.stderr
    assert not list(tmp_path.glob(".logs.import-*"))
    assert not list((tmp_path / "logs").rglob("_dr_scale_import_owner.json"))  # the owner file is not published


def test_any_fsspec_url():
    """Raw data and log on another filesystem (memory://): the staged folder is moved, not renamed."""
    import fsspec

    fs = fsspec.filesystem("memory")
    with fs.open("/import-test/raw.csv", "w") as f:
        f.write(RAW)
    spec = {"action": "item", "reward": "click", "propensity": "p", "timestamp": "ts",
            "features": {"categorical": ["color"]}}
    try:
        summary = import_log("memory://import-test/raw.csv", spec, "memory://import-test/logs")
        assert summary.rows == 4
        assert sorted(p.rsplit("/", 2)[-2] for p in fs.find("/import-test/logs") if p.endswith(".parquet")) == [
            "date=2026-11-01", "date=2026-11-02"]
        assert not [p for p in fs.ls("/import-test", detail=False) if ".import-" in p]
        assert sum(len(p) for p in read_log("memory://import-test/logs")) == 4
    finally:
        fs.rm("/import-test", recursive=True)


def test_rows_by_day_keep_their_order_in_or_out_of_time_order():
    """A block's rows by day: slices of a time-ordered block, a filter per day otherwise — the same parts."""
    from dr_scale.logs.importing.passes import by_date

    rng = np.random.default_rng(3)
    days = np.array(["2026-11-01", "2026-11-02", "2026-11-03"])
    for dates in (np.sort(rng.choice(days, 50)), rng.choice(days, 50), np.full(50, days[1])):
        table = pa.table({"row_id": np.arange(50), "date": dates})
        expected = [(d, table.filter(pa.compute.equal(table.column("date"), d)).drop_columns(["date"]))
                    for d in sorted(set(dates))]
        got = by_date(table)
        assert [d for d, _ in got] == [d for d, _ in expected]
        assert all(g.equals(e) for (_, g), (_, e) in zip(got, expected, strict=True))


def test_distinct_and_union_equal_numpy():
    from dr_scale.logs.importing.features import distinct, union

    rng = np.random.default_rng(4)
    parts = [np.unique(rng.integers(0, 1000, size, dtype=np.uint64)) for size in (0, 1, 300, 700)]
    assert np.array_equal(union(parts), np.unique(np.concatenate(parts)))
    assert np.array_equal(union(parts[:1]), parts[0])
    mixed = np.concatenate(parts)
    assert np.array_equal(distinct(mixed), np.unique(mixed)) and distinct(mixed[:0]).size == 0


# -- rankings: slots and impressions --------------------------------------------------------------------------
RANKED = """ts,user,item,position,click,p
2026-11-01 09:00:00,u1,a,1,0,0.5
2026-11-01 09:00:00,u1,b,2,1,0.5
2026-11-01 09:00:05,u2,b,1,0,0.5
2026-11-01 09:00:05,u1,a,2,0,0.5
2026-11-01 09:00:00,u1,c,3,1,1.0
"""
RANKED_SPEC = """action = "item"
reward = "click"
propensity = "p"
slot = "position"
impression = ["ts", "user"]
{extra}
[features]
categorical = ["user"]
"""


def test_slots_and_impressions_imported(tmp_path):
    (tmp_path / "raw.csv").write_text(RANKED)
    (tmp_path / "spec.toml").write_text(RANKED_SPEC.format(extra=""))
    import_log(str(tmp_path / "raw.csv"), str(tmp_path / "spec.toml"), str(tmp_path / "logs"))
    t = log_table(tmp_path / "logs")
    assert t.schema.field("slot").type == pa.int32() and t.schema.field("impression").type == pa.int64()
    assert t.column("slot").to_pylist() == [0, 1, 0, 1, 2]  # positions 1..3, first_slot = 1
    imp = t.column("impression").to_pylist()
    assert imp[0] == imp[1] == imp[4] and len({imp[0], imp[2], imp[3]}) == 3  # (ts, user) pairs
    _, fp = hash_keys(["2026-11-01 09:00:00\x1fu1"], 10)
    assert imp[0] == int(fp[0] & np.uint64(2 ** 63 - 1))  # the documented hash
    part = read_log(str(tmp_path / "logs"))[0]
    assert part.slot.tolist() == [0, 1, 0, 1, 2] and part.impression.tolist() == imp
    # the same rows by from_pandas, 0-based positions
    df = pd.read_csv(io.StringIO(RANKED)).assign(position=lambda d: d.position - 1)
    spec = {"action": "item", "reward": "click", "propensity": "p", "slot": "position", "first_slot": 0,
            "impression": ["ts", "user"], "features": {"categorical": ["user"]}}
    log = from_pandas(df, spec)
    assert log.slot.tolist() == [0, 1, 0, 1, 2] and log.impression.tolist() == imp


def test_bad_slots_refused(tmp_path):
    (tmp_path / "raw.csv").write_text(RANKED.replace("u2,b,1,", "u2,b,0,"))
    (tmp_path / "spec.toml").write_text(RANKED_SPEC.format(extra=""))
    with pytest.raises(ValueError, match=r"raw.csv, line 4: column 'position': a position below first_slot = 1"):
        import_log(str(tmp_path / "raw.csv"), str(tmp_path / "spec.toml"), str(tmp_path / "logs"))
    assert not (tmp_path / "logs").exists()
    table = pa.table({"row_id": pa.array([1, 2], pa.int64()), "features": pa.array([[0], [1]], pa.list_(pa.int32())),
                      "action": [0, 1], "reward": [1.0, 0.0], "propensity": [0.5, 0.5],
                      "slot": pa.array([0, -1], pa.int32())})
    with pytest.raises(ValueError, match=r"column 'slot': negative slot .*row_id=2"):
        write_log(table, str(tmp_path / "written"))
    with pytest.raises(ValueError, match=r"column 'impression': wrong type double"):
        write_log(table.drop_columns("slot").append_column("impression", pa.array([1.0, 2.0])),
                  str(tmp_path / "written"))
