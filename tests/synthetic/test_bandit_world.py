"""``dr-scale generate bandit``: the contract, identical output for any split, days, calibration, truth."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from dr_scale.cli import main
from dr_scale.core import keyed_random
from dr_scale.logs.reading import read_log
from dr_scale.synthetic.bandit import MANIFEST, WorldSettings, field_starts, generate_bandit, make_world, part_paths

D, K = 512, 4


def generate(out, rows=3000, **kwargs):
    return generate_bandit(str(out), rows=rows, features=kwargs.pop("features", D), actions=kwargs.pop("actions", K),
                           seed=kwargs.pop("seed", 3), **kwargs)


def read_all(out) -> tuple[list, pa.Table]:
    """The log's partitions (core reader, validated against its metadata) and all its columns as one table."""
    parts = read_log(str(out), n_features=D, extra_columns=("expected_reward",))
    return parts, pa.concat_tables([p.table for p in parts])


def test_the_log_reads_back_with_the_core_reader(tmp_path):
    manifest = generate(tmp_path / "log", rows_per_part=700)
    parts, table = read_all(tmp_path / "log")
    assert manifest["parts"] == len(parts) == 5
    assert table.schema.metadata[b"dr_scale.n_features"] == str(D).encode()
    assert table.schema.metadata[b"dr_scale.n_actions"] == str(K).encode()
    assert table.schema.field("expected_reward").type == pa.list_(pa.float64())
    assert np.array_equal(table.column("row_id").to_numpy(), np.arange(3000))
    expected = np.stack(table.column("expected_reward").to_numpy(zero_copy_only=False))
    assert expected.shape == (3000, K) and np.all((expected > 0) & (expected < 1))
    assert set(np.unique(table.column("reward").to_numpy())) <= {0.0, 1.0}
    active = np.concatenate([np.diff(p.X.indptr) for p in parts])
    assert 25 < active.mean() < 35 and active.max() <= 40
    for p in parts:  # sorted, distinct ids within every row
        steps = np.diff(p.X.indices)
        first = np.zeros(p.X.nnz, dtype=bool)
        first[p.X.indptr[:-1][np.diff(p.X.indptr) > 0]] = True
        assert np.all(steps[~first[1:]] > 0)


def test_identical_for_any_part_size(tmp_path):
    generate(tmp_path / "a", rows_per_part=3000)
    generate(tmp_path / "b", rows_per_part=333)
    a, b = read_all(tmp_path / "a")[1], read_all(tmp_path / "b")[1]
    assert len(read_all(tmp_path / "b")[0]) == 10
    assert a.equals(b)


def test_days_are_hive_partitions_of_the_same_world(tmp_path):
    manifest = generate(tmp_path / "days", rows=3001, days=3, rows_per_part=600)
    generate(tmp_path / "flat", rows=3001)
    folders = sorted(p.name for p in (tmp_path / "days").iterdir() if p.is_dir())
    assert folders == ["date=2026-11-01", "date=2026-11-02", "date=2026-11-03"]
    days = [read_log(str(tmp_path / "days" / f)) for f in folders]
    assert [[len(p) for p in day] for day in days] == [[500, 500], [500, 500], [500, 501]]
    assert manifest["parts"] == 6
    assert read_all(tmp_path / "days")[1].equals(read_all(tmp_path / "flat")[1])


@pytest.mark.parametrize("d", [80, 81, 128, 1000, 2**18])
def test_fields_cover_the_features_with_at_least_two_ids_each(d):
    starts = field_starts(d, WorldSettings())
    sizes = np.diff(starts)
    assert starts[0] == 0 and starts[-1] == d and len(sizes) == 40
    assert sizes.min() >= 2 and np.all(np.diff(sizes) >= 0)  # growing: the last field is the largest


def test_part_paths_cover_every_row_once():
    paths = part_paths(10_007, 4, 1000)
    firsts = [first for _, first, _ in paths]
    assert firsts == sorted(firsts) and firsts[0] == 0
    assert sum(n for _, _, n in paths) == 10_007
    assert all(f1 + n == f2 for (_, f1, n), (_, f2, _) in zip(paths, paths[1:]))
    assert max(n for _, _, n in paths) <= 1000


def test_calibration_equals_direct_computation_on_the_written_data(tmp_path):
    manifest = generate(tmp_path / "log", rows=4000, rows_per_part=900)
    on_disk = json.loads((tmp_path / "log" / MANIFEST).read_text())
    assert on_disk["calibration"] == manifest["calibration"]
    cal = manifest["calibration"]
    parts, table = read_all(tmp_path / "log")
    expected = np.stack(table.column("expected_reward").to_numpy(zero_copy_only=False))
    propensity = table.column("propensity").to_numpy()
    action = table.column("action").to_numpy()
    # the logging policy's probabilities of the written contexts, from the world
    world = make_world(3, D, K)
    probs = np.vstack([world.scores(p.X)[1] for p in parts])
    assert np.allclose(np.vstack([world.scores(p.X)[0] for p in parts]), expected, rtol=0, atol=0)
    assert np.array_equal(probs[np.arange(len(action)), action], propensity)
    direct = {
        "rows": 4000,
        "mean_active_features": float(np.mean(np.concatenate([np.diff(p.X.indptr) for p in parts]))),
        "mean_reward": float(table.column("reward").to_numpy().mean()),
        "min_propensity": float(propensity.min()),
        "max_propensity": float(propensity.max()),
        "max_weight": float(1 / propensity.min()),
        "logged_action_shares": (np.bincount(action, minlength=K) / 4000).tolist(),
        "logging_value": float((probs * expected).sum(axis=1).mean()),
        "constant_values": expected.mean(axis=0).tolist(),
        "best_constant_action": int(expected.mean(axis=0).argmax()),
        "best_constant_value": float(expected.mean(axis=0).max()),
        "oracle_value": float(expected.max(axis=1).mean()),
    }
    assert cal.keys() == direct.keys()
    for key, value in direct.items():
        np.testing.assert_allclose(cal[key], value, rtol=1e-12, err_msg=key)


def test_logged_actions_and_rewards_follow_the_stated_probabilities(tmp_path):
    """Σ_i 1{a_i = a} vs Σ_i μ(a|x_i) and Σ_i r_i vs Σ_i E[r | x_i, a_i], within 4 binomial standard deviations."""
    generate(tmp_path / "log", rows=20_000, rows_per_part=5000, actions=6)
    parts = read_log(str(tmp_path / "log"), n_features=D, n_actions=6, extra_columns=("expected_reward",))
    world = make_world(3, D, 6)
    probs = np.vstack([world.scores(p.X)[1] for p in parts])
    action = np.concatenate([p.action for p in parts])
    counts = np.bincount(action, minlength=6)
    sd = np.sqrt((probs * (1 - probs)).sum(axis=0))
    assert np.all(np.abs(counts - probs.sum(axis=0)) < 4 * sd)
    expected = np.vstack([np.stack(p.table.column("expected_reward").to_numpy(zero_copy_only=False)) for p in parts])
    mean_logged = expected[np.arange(len(action)), action]
    reward = np.concatenate([p.reward for p in parts])
    assert abs(reward.sum() - mean_logged.sum()) < 4 * np.sqrt((mean_logged * (1 - mean_logged)).sum())
    assert 0.001 <= probs.min() < 0.002  # near the uniform share's floor ε/k = 0.001


def test_feature_popularity_is_skewed_within_a_field():
    """Field 0 (always present): the frequency of its top id is the power law's mass on [1, 2)."""
    world = make_world(0, 4096, 3)
    X = world.contexts(0, 50_000, 0)
    n0 = world.field_start[1]
    counts = np.bincount(X.indices[X.indices < n0], minlength=n0)
    assert counts.sum() == 50_000  # q_0 = 1: one feature of field 0 in every row
    s = world.settings.zipf
    top = (1 - 2.0 ** (1 - s)) / (1 - (n0 + 1.0) ** (1 - s))
    assert abs(counts[0] - 50_000 * top) < 4 * np.sqrt(50_000 * top * (1 - top))
    assert np.all(np.diff(counts[:5]) < 0)


def test_positions_give_the_same_draws_for_any_split():
    full = keyed_random.positions(0, 1000, 7, "p")
    for first in (1, 2, 3, 4, 5, 333, 998):
        assert np.array_equal(keyed_random.positions(first, 1000 - first, 7, "p"), full[first:])
    big = 2**40 + 3
    assert np.array_equal(keyed_random.positions(big, 10, 7, "p"), keyed_random.positions(big - 3, 13, 7, "p")[3:])
    assert not np.array_equal(keyed_random.positions(0, 10, 7, "q"), full[:10])
    assert not np.array_equal(keyed_random.positions(0, 10, 8, "p"), full[:10])


@pytest.mark.parametrize("options, message", [
    (["--rows", "0"], "argument --rows: should be greater than or equal to 1"),
    (["--rows", "10", "--features", "10"], "--features must be at least 80"),
    (["--rows", "10", "--features", str(2**25)], "--features must be at most"),
    (["--rows", "10", "--actions", "1"], "--actions must be in [2, 500]"),
    (["--rows", "10", "--days", "0"], "argument --days: should be greater than or equal to 1"),
    (["--rows", "10", "--days", "11"], "--days must be between 1 and --rows"),
    (["--rows", "10", "--rows-per-part", "0"], "argument --rows-per-part: should be greater than or equal to 1"),
    (["--rows", "10", "--seed", "-1"], "argument --seed: should be greater than or equal to 0"),
])
def test_bad_options_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, options, message):
    out = tmp_path / "out"
    assert main(["generate", "bandit", "--out", str(out), "--features", "256", "--no-progress", *options]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(("dr-scale generate: error: ", "dr-scale generate bandit: error: "))  # run, parse
    assert message in err and "\n" not in err
    assert not out.exists()


def test_a_non_empty_output_folder_is_refused_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    args = ["generate", "bandit", "--rows", "100", "--features", "256", "--out", str(out), "--no-progress"]
    assert main(args) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert (out / "keep.txt").exists()
    assert main([*args, "--overwrite"]) == 2  # not a folder dr-scale wrote: never deleted
    assert "dr-scale did not write this folder" in capsys.readouterr().err and (out / "keep.txt").exists()
    (out / "keep.txt").unlink()
    assert main(args) == 0
    assert main(args) == 2
    assert main([*args, "--overwrite"]) == 0  # its own log: replaced
    printed = capsys.readouterr().out
    assert "true value, logging" in printed and "best constant policy      constant:" in printed


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local_cluster", "dask_cluster"])
def test_identical_on_threads_and_on_a_cluster(tmp_path, request, where):
    """The command on the shared LocalCluster or a command-line cluster (``--scheduler``)."""
    cluster = request.getfixturevalue(where)
    option = ["--scheduler", cluster.scheduler_address if where == "local_cluster" else cluster.address]
    common = ["generate", "bandit", "--rows", "6000", "--features", str(D), "--actions", str(K), "--seed", "3",
              "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "threads"), "--rows-per-part", "1000"]) == 0
    assert main([*common, "--out", str(tmp_path / "cluster"), "--rows-per-part", "1500", *option]) == 0
    assert read_all(tmp_path / "threads")[1].equals(read_all(tmp_path / "cluster")[1])
    a = json.loads((tmp_path / "threads" / MANIFEST).read_text())["calibration"]
    b = json.loads((tmp_path / "cluster" / MANIFEST).read_text())["calibration"]
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-12, err_msg=key)
