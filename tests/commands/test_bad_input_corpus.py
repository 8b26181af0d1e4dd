"""A corpus of bad inputs against the command line: every one ends in a clear error, never a crash.

Each case builds its bad input in ``tmp_path`` (a log with a poisoned column, a broken
model file, a malformed policies or job file, an out-of-range option …) and runs the
real command in-process (``dr_scale.cli.main``). The rules, for every case:

* the exit status is 0, 2 or 3 (130 is an interrupt, not reachable here);
* no traceback, and an error is one line ``dr-scale COMMAND: error: …`` that is not the
  "unexpected" fallback (a case that hits it is an error path still to write);
* every JSON file the command wrote parses with NaN / Infinity rejected;
* no numpy RuntimeWarning (overflow, invalid value) escapes;
* sanity: every interval written contains its point estimate, and an estimate that rests on
  zero matched rows (no logged action with positive probability under the policy) says so
  in its warnings.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dr_scale.cli import main
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.reward.models import LinearRewardModel

N, D, K = 60, 5, 3
ALLOWED = {0, 2, 3}
#: A numpy warning (overflow …) would print lines beside the one error line: none may escape. The sweep
#: (~480 command runs) is ``slow``, except the cases whose message is checked too (``EVALUATE_MESSAGES``):
#: the dev loop runs those.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")
slow = pytest.mark.slow


def good_columns(n: int = N, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    import scipy.sparse as sp

    X = sp.random(n, D, density=0.4, format="csr", random_state=seed)
    return {"row_id": pa.array(np.arange(100, 100 + n, dtype=np.int64)), "features": csr_to_features(X),
            "action": pa.array(rng.integers(0, K, n)), "reward": pa.array(rng.random(n)),
            "propensity": pa.array(np.full(n, 1 / K)), "target_action": pa.array(rng.integers(0, K, n))}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus-base")
    write_log(pa.table(good_columns()), str(root / "logs"), n_parts=3, n_features=D, n_actions=K)
    for day in (1, 2, 3):
        write_log(pa.table(good_columns(20, day)), str(root / "share" / f"date=2026-11-0{day}"), n_features=D,
                  n_actions=K)
    LinearRewardModel(np.full((D, K), 0.1), np.zeros(K)).save(str(root / "model.npz"))
    (root / "policies.toml").write_text('reward_model = "model.npz"\n[[policy]]\nname = "c"\n'
                                        'spec = "column:target_action"\n')
    (root / "a-file").write_text("x")
    return root


def strict_json(text: str):
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def check_rules(code: int, err: str, out_dir: Path) -> None:
    assert code in ALLOWED, (code, err)
    assert "Traceback" not in err, err
    if code == 2:
        errors = [line for line in err.splitlines() if ": error: " in line]
        assert len(errors) == 1, err
        assert errors[0].startswith("dr-scale"), err
        assert "unexpected" not in errors[0], err
    for path in out_dir.rglob("*.json"):
        check_sanity(strict_json(path.read_text()), path)


def _estimates_and_warnings(doc) -> list[tuple[dict, dict, list]]:
    """(estimates, diagnostics, warnings) of an evaluate --json document and of each report policy and day."""
    if not isinstance(doc, dict):
        return []
    out = []
    if "estimates" in doc and "diagnostics" in doc:
        out.append((doc["estimates"], doc["diagnostics"], doc.get("warnings", [])))
    for policy in doc.get("policies", []) if doc.get("schema") == "dr-scale/report" else []:
        out.append((policy["estimates"], policy["diagnostics"], policy["warnings"]))
        out += [(day["estimates"], {}, policy["warnings"]) for day in policy.get("by_day", [])]
    return out


def check_sanity(doc, path) -> None:
    """Every interval contains its point estimate; no estimate rests on zero matched rows unsaid."""
    for estimates, diagnostics, warnings in _estimates_and_warnings(doc):
        for name, e in estimates.items():
            value, ci = e.get("value"), e.get("ci") or [None, None]
            if value is None or None in ci:
                continue
            slack = 1e-9 * max(1.0, abs(value))
            assert ci[0] - slack <= value <= ci[1] + slack, (path, name, value, ci)
        if diagnostics.get("matched_rows") == 0:
            assert any("0 matched rows" in w for w in warnings), (path, warnings)


# -- bad logs ------------------------------------------------------------------------
def _col(values, typ=None):
    return pa.array(values, typ) if typ is not None else pa.array(values)


def _set(name, make):
    """A mutation setting column ``name`` to ``make(n)``."""
    def mutate(cols):
        cols[name] = make(len(cols["row_id"]))
        return cols
    return mutate


def _drop(name):
    def mutate(cols):
        cols.pop(name)
        return cols
    return mutate


def _at(name, i, value, typ=None):
    def mutate(cols):
        values = cols[name].to_pylist()
        values[i] = value
        cols[name] = pa.array(values, typ or cols[name].type)
        return cols
    return mutate


LOG_MUTATIONS = {
    **{f"propensity={v!r}": _at("propensity", 5, v) for v in
       (0.0, -0.1, 1.5, float("nan"), float("inf"), 1e-12, 5e-324, 1e-300, None)},
    "propensity-all-1e-12": _set("propensity", lambda n: _col(np.full(n, 1e-12))),
    "propensity-int": _set("propensity", lambda n: _col(np.ones(n, dtype=np.int64))),
    "propensity-string": _set("propensity", lambda n: _col(["0.5"] * n)),
    **{f"reward={v!r}": _at("reward", 7, v) for v in (float("nan"), float("inf"), float("-inf"), None, 1e308)},
    "reward-huge": _set("reward", lambda n: _col(np.full(n, 1e308))),
    "reward-string": _set("reward", lambda n: _col(["1"] * n)),
    "reward-bool": _set("reward", lambda n: _col([True] * n)),
    **{f"action={v!r}": _at("action", 3, v) for v in (-1, 99, None)},
    "action-float": _set("action", lambda n: _col(np.zeros(n))),
    "action-string": _set("action", lambda n: _col(["0"] * n)),
    "row_id-duplicate": _at("row_id", 4, 100),
    "row_id-null": _at("row_id", 4, None),
    "row_id-float": _set("row_id", lambda n: _col(np.arange(n, dtype=np.float64))),
    "row_id-string": _set("row_id", lambda n: _col([str(i) for i in range(n)])),
    "features-negative": _at("features", 2, [-1]),
    "features-too-big": _at("features", 2, [D + 10]),
    "features-null-list": _at("features", 2, None),
    "features-null-inside": _at("features", 2, [0, None]),
    "features-strings": _set("features", lambda n: _col([["a"]] * n)),
    "features-int": _set("features", lambda n: _col(np.zeros(n, dtype=np.int32))),
    "features-float-list": _set("features", lambda n: _col([[0.5]] * n)),
    "values-nan": lambda c: {**c, "values": _col([[float("nan")] * len(f) for f in c["features"].to_pylist()],
                                                 pa.list_(pa.float32()))},
    "values-inf": lambda c: {**c, "values": _col([[float("inf")] * len(f) for f in c["features"].to_pylist()],
                                                 pa.list_(pa.float32()))},
    "values-null-inside": lambda c: {**c, "values": _col([[None] * len(f) for f in c["features"].to_pylist()],
                                                         pa.list_(pa.float32()))},
    "values-length": lambda c: {**c, "values": _col([[1.0]] * len(c["row_id"]), pa.list_(pa.float32()))},
    "values-strings": lambda c: {**c, "values": _col([["x"] * len(f) for f in c["features"].to_pylist()])},
    "values-huge": lambda c: {**c, "values": _col([[3e38] * len(f) for f in c["features"].to_pylist()],
                                                  pa.list_(pa.float32()))},
    **{f"missing-{name}": _drop(name) for name in ("row_id", "features", "action", "reward", "propensity",
                                                    "target_action")},
    "target-float": _set("target_action", lambda n: _col(np.zeros(n))),
    "target-out-of-range": _at("target_action", 1, 7),
    "target-negative": _at("target_action", 1, -2),
    "target-null": _at("target_action", 1, None),
    "target-string": _set("target_action", lambda n: _col(["1"] * n)),
    "zero-rows": lambda c: {k: v.slice(0, 0) for k, v in c.items()},
    "one-row": lambda c: {k: v.slice(0, 1) for k, v in c.items()},
}


def write_bad_log(root: Path, name: str, parts: int = 3) -> Path:
    """A log of ``parts`` files whose second carries the mutation ``name`` (written around write_log's checks)."""
    folder = root / "bad-log"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(parts):
        cols = good_columns(N // parts, i)
        cols["row_id"] = pa.array(np.arange(N // parts, dtype=np.int64) + 1000 * i)
        if i == 1:
            cols = LOG_MUTATIONS[name](cols)
        table = pa.table(cols).replace_schema_metadata({b"dr_scale.n_features": str(D).encode(),
                                                       b"dr_scale.n_actions": str(K).encode()})
        pq.write_table(table, folder / f"part-{i:05d}.parquet")
    return folder


def run(argv, capsys, out_dir: Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    check_rules(code, captured.err, out_dir)
    return code, captured.out, captured.err


@slow
@pytest.mark.parametrize("name", sorted(LOG_MUTATIONS))
@pytest.mark.parametrize("command", ["evaluate-dr", "evaluate-ips", "report"])
def test_bad_log(tmp_path, capsys, base, name, command):
    logs = write_bad_log(tmp_path, name)
    out = tmp_path / "out"
    if command == "report":
        share = tmp_path / "share" / "date=2026-11-01"
        share.parent.mkdir()
        logs.rename(share)
        code, _, err = run(["report", "--logs", tmp_path / "share", "--policies", base / "policies.toml", "--out", out,
                            "--no-progress"], capsys, out)
        if code == 3:
            assert "bad partition" in err
        return
    model = ["--reward-model", base / "model.npz"] if command == "evaluate-dr" else ["--policy", "constant:1"]
    code, stdout, _ = run(["evaluate", logs, *model, "--json", out / "r.json", "--no-progress"], capsys, out)
    if code == 0:
        assert "nan" not in stdout.lower() and "inf" not in stdout.lower(), stdout
        assert (out / "r.json").exists()


# -- bad files and folders as logs ------------------------------------------------------
def _files(root: Path) -> dict:
    (root / "empty-dir").mkdir()
    (root / "text.parquet").write_text("not parquet")
    (root / "zero.parquet").write_bytes(b"")
    (root / "par1.parquet").write_bytes(b"PAR1" + b"\0" * 20 + b"PAR1")
    (root / "hidden-only").mkdir()
    (root / "hidden-only" / ".part.parquet").write_text("x")
    (root / "csv.csv").write_text("a,b\n1,2\n")
    return {"missing": root / "nope", "empty-dir": root / "empty-dir", "text": root / "text.parquet",
            "zero-bytes": root / "zero.parquet", "par1": root / "par1.parquet", "hidden-only": root / "hidden-only",
            "csv": root / "csv.csv", "glob-nothing": str(root / "*.nothing"), "dev-null": "/dev/null",
            "memory-missing": "memory://nothing/here", "unknown-protocol": "nosuchproto://x/y"}


@slow
@pytest.mark.parametrize("which", ["missing", "empty-dir", "text", "zero-bytes", "par1", "hidden-only", "csv",
                                   "glob-nothing", "dev-null", "memory-missing", "unknown-protocol"])
@pytest.mark.parametrize("command", ["evaluate", "report", "fit"])
def test_bad_log_path(tmp_path, capsys, base, which, command):
    logs = _files(tmp_path)[which]
    out = tmp_path / "out"
    argv = {"evaluate": ["evaluate", logs, "--policy", "constant:0", "--no-progress"],
            "report": ["report", "--logs", logs, "--policies", base / "policies.toml", "--out", out, "--no-progress"],
            "fit": ["fit", logs, "--out", out / "m.npz", "--no-progress"]}[command]
    code, _, _ = run(argv, capsys, out)
    assert code in (2, 3)


# -- options ------------------------------------------------------------------------------
EVALUATE_OPTIONS = [
    *[["--alpha", v] for v in ("0", "1", "2", "-1", "nan", "inf", "abc", "")],
    *[["--clip", v] for v in ("-1", "0", "nan", "abc")],
    *[["--tau", v] for v in ("-1", "nan", "x")],
    *[["--n-actions", v] for v in ("0", "-3", "1.5", "abc", "2", "99999")],
    *[["--local-workers", v] for v in ("0", "-1", "x")],
    *[["--min-ess-ratio", v] for v in ("-1", "2", "nan")],
    *[["--estimators", v] for v in ("", ",", "DR,,IPS", "XX", "DR,DR", "dr", " DR , IPS ")],
    *[["--policy", v] for v in ("constant:-1", "constant:x", "constant:99", "constant:", "column:", "column:nope",
                                "column:reward", "column:propensity", "column:features", "probs:propensity",
                                "probs:nope", "probs:features", "callable:nomodule_xyz:f", "callable:os:nope",
                                "callable:math", "callable:json:dumps", "callable:os:getcwd", "callable::",
                                "linear:nofile.npz", "softmax:nofile.npz:abc", "softmax:x", "bogus", "", ":",
                                "column:row_id")],
    ["--scheduler", "not-an-address"], ["--scheduler", "foo://x:1"], ["--scheduler", "tcp://127.0.0.1:99999"],
    ["--scheduler", "tcp://x:1", "--local-workers", "2"],
    ["--bogus-option"], ["extra-positional"],
    *[["--baseline", v] for v in ("bogus", "constant:-1", "column:nope", "logging", "constant:0", "")],
    *[["--interval", v] for v in ("el", "wald", "")],
    *[["--fit-reward-model", *v] for v in ([], ["--folds", "1"], ["--folds", "0"], ["--folds", "x"], ["--lam", "0"],
                                           ["--lam", "-1"], ["--lam", "nan"], ["--lam", "auto"], ["--lam", "x"])],
    *[["--policy", f"linear:{v}"] for v in ("", "/dev/null", "/tmp")],
    ["--policy", "callable:json:loads"],
]

#: The error line of some of the cases above (each also meets the corpus's rules).
EVALUATE_MESSAGES = {
    ("--alpha", "0"): "argument --alpha: should be greater than 0",
    ("--alpha", "2"): "argument --alpha: should be less than 1",
    ("--alpha", "-1"): "argument --alpha: should be greater than 0",
    ("--alpha", "nan"): "argument --alpha: should be a finite number",
    ("--clip", "-1"): "argument --clip: should be greater than 0",
    ("--tau", "-1"): "argument --tau: should be greater than or equal to 0",
    ("--n-actions", "0"): "argument --n-actions: should be greater than or equal to 1",
    ("--local-workers", "0"): "argument --local-workers: should be greater than or equal to 1",
    ("--local-workers", "-1"): "argument --local-workers: should be greater than or equal to 1",
    ("--scheduler", "not-an-address"): "--scheduler 'not-an-address': missing port number",
    ("--policy", "probs:propensity"): "column 'propensity': wrong type double: probs: policies read a list<float>",
    ("--policy", "callable:nomodule_xyz:f"): "policy callable:nomodule_xyz:f: cannot import module 'nomodule_xyz'",
    ("--policy", "callable:json:loads"): "policy callable:json:loads raised TypeError",
}


@pytest.mark.parametrize("extra", [pytest.param(e, id=" ".join(e) or "empty",
                                                 marks=() if tuple(e) in EVALUATE_MESSAGES else slow)
                                    for e in EVALUATE_OPTIONS])
def test_bad_evaluate_option(tmp_path, capsys, base, extra):
    out = tmp_path / "out"
    code, _, err = run(["evaluate", base / "logs", "--reward-model", base / "model.npz", *extra, "--json",
                        out / "r.json", "--no-progress"], capsys, out)
    if tuple(extra) in EVALUATE_MESSAGES:
        message = EVALUATE_MESSAGES[tuple(extra)]
        (line,) = [x for x in err.splitlines() if ": error: " in x]
        assert code == 2 and message in line, err
        assert not message.startswith("argument ") or "(see dr-scale evaluate --help)" in err, err


def _model_files(root: Path) -> dict:
    files = {}

    def npz(name, **arrays):
        path = root / f"{name}.npz"
        np.savez(path, **arrays)
        files[name] = path

    npz("no-coef", intercept=np.zeros(K))
    npz("no-intercept", coef=np.zeros((D, K)))
    npz("scalar-coef", coef=np.array(1.0), intercept=np.zeros(K))
    npz("wrong-intercept", coef=np.zeros((D, K)), intercept=np.zeros(K + 2))
    npz("nan-coef", coef=np.full((D, K), np.nan), intercept=np.zeros(K))
    npz("inf-intercept", coef=np.zeros((D, K)), intercept=np.full(K, np.inf))
    npz("two-actions", coef=np.zeros((D, 2)), intercept=np.zeros(2))
    npz("four-actions", coef=np.zeros((D, 4)), intercept=np.zeros(4))
    npz("more-features", coef=np.zeros((D + 3, K)), intercept=np.zeros(K))
    npz("string-coef", coef=np.array([["a"] * K] * D), intercept=np.zeros(K))
    npz("3d-coef", coef=np.zeros((D, K, 2)), intercept=np.zeros(K))
    npz("empty-coef", coef=np.zeros((0, K)), intercept=np.zeros(K))
    npz("huge-coef", coef=np.full((D, K), 1e308), intercept=np.zeros(K))
    npz("bad-folds", coef=np.zeros((D, K)), intercept=np.zeros(K), fold_coef=np.zeros(7))
    np.save(root / "plain.npy", np.zeros(3))
    files["npy"] = root / "plain.npy"
    (root / "text.npz").write_text("not a zip")
    files["text"] = root / "text.npz"
    (root / "empty.npz").write_bytes(b"")
    files["empty"] = root / "empty.npz"
    files["missing"] = root / "none.npz"
    files["folder"] = root
    return files


MODELS = ["no-coef", "no-intercept", "scalar-coef", "wrong-intercept", "nan-coef", "inf-intercept", "two-actions",
          "four-actions", "more-features", "string-coef", "3d-coef", "empty-coef", "huge-coef", "bad-folds", "npy",
          "text", "empty", "missing", "folder"]


@slow
@pytest.mark.parametrize("which", MODELS)
@pytest.mark.parametrize("command", ["evaluate", "report"])
def test_bad_reward_model(tmp_path, capsys, base, which, command):
    model = _model_files(tmp_path)[which]
    out = tmp_path / "out"
    if command == "evaluate":
        code, _, _ = run(["evaluate", base / "logs", "--reward-model", model, "--json", out / "r.json",
                          "--no-progress"], capsys, out)
    else:
        policies = tmp_path / "p.toml"
        policies.write_text(f'reward_model = "{model}"\n[[policy]]\nspec = "constant:1"\n')
        code, _, _ = run(["report", "--logs", base / "share", "--policies", policies, "--out", out, "--no-progress"],
                         capsys, out)
    assert code == 2


# -- outputs --------------------------------------------------------------------------------
OUTPUTS = {
    "json-is-folder": lambda b, t: ["evaluate", b / "logs", "--policy", "constant:0", "--json", t, "--no-progress"],
    "json-under-file": lambda b, t: ["evaluate", b / "logs", "--policy", "constant:0", "--json",
                                     b / "a-file" / "r.json", "--no-progress"],
    "json-in-proc": lambda b, t: ["evaluate", b / "logs", "--policy", "constant:0", "--json", "/proc/dr-scale.json",
                                  "--no-progress"],
    "report-out-is-file": lambda b, t: ["report", "--logs", b / "share", "--policies", b / "policies.toml", "--out",
                                        b / "a-file", "--no-progress"],
    "report-out-under-file": lambda b, t: ["report", "--logs", b / "share", "--policies", b / "policies.toml",
                                           "--out", b / "a-file" / "x", "--no-progress"],
    "report-cache-is-file": lambda b, t: ["report", "--logs", b / "share", "--policies", b / "policies.toml", "--out",
                                          t / "o", "--cache", b / "a-file", "--no-progress"],
    "report-out-in-proc": lambda b, t: ["report", "--logs", b / "share", "--policies", b / "policies.toml", "--out",
                                        "/proc/dr-scale-report", "--no-progress"],
    "fit-out-is-folder": lambda b, t: ["fit", b / "logs", "--out", t, "--no-progress"],
    "fit-out-under-file": lambda b, t: ["fit", b / "logs", "--out", b / "a-file" / "m.npz", "--no-progress"],
    "generate-out-is-file": lambda b, t: ["generate", "visits", "--rows", "50", "--features", "10", "--out",
                                          b / "a-file", "--no-calibration", "--no-progress"],
}


@slow
@pytest.mark.parametrize("which", sorted(OUTPUTS))
def test_bad_output_path(tmp_path, capsys, base, which):
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, _ = run(OUTPUTS[which](base, tmp_path), capsys, tmp_path)
    assert code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing dropped into a folder named as a file


# -- storage options ------------------------------------------------------------------------
@slow
@pytest.mark.parametrize("content", [None, "", "{", "[1, 2]", '"x"', "null", '{"anon": "maybe"}'])
def test_bad_storage_options_file(tmp_path, capsys, base, content):
    path = tmp_path / "opts.json"
    if content is not None:
        path.write_text(content)
    run(["evaluate", base / "logs", "--policy", "constant:0", "--storage-options", path, "--no-progress"], capsys,
        tmp_path / "out")


@slow
@pytest.mark.parametrize("content", ["{", "[1]", "3"])
def test_bad_storage_options_variable(tmp_path, capsys, base, monkeypatch, content):
    monkeypatch.setenv("DR_SCALE_STORAGE_OPTIONS", content)
    code, _, err = run(["evaluate", base / "logs", "--policy", "constant:0", "--no-progress"], capsys, tmp_path)
    assert code == 2 and "DR_SCALE_STORAGE_OPTIONS" in err


# -- policies files -------------------------------------------------------------------------
POLICIES = {
    "bad-toml": "[[policy]\nspec = 1",
    "not-utf8": b"\xff\xfe\x00bad",
    "empty": "",
    "no-policies": 'alpha = 0.1\n',
    "unknown-key": 'colour = 1\n[[policy]]\nspec = "constant:0"\n',
    "alpha-0": 'alpha = 0\n[[policy]]\nspec = "constant:0"\n',
    "alpha-1": 'alpha = 1\n[[policy]]\nspec = "constant:0"\n',
    "alpha-nan": 'alpha = nan\n[[policy]]\nspec = "constant:0"\n',
    "alpha-string": 'alpha = "0.05"\n[[policy]]\nspec = "constant:0"\n',
    "min-ess-negative": 'min_ess_ratio = -1\n[[policy]]\nspec = "constant:0"\n',
    "min-ess-2": 'min_ess_ratio = 2\n[[policy]]\nspec = "constant:0"\n',
    "estimators-string": 'estimators = "DR"\n[[policy]]\nspec = "constant:0"\n',
    "estimators-empty": 'estimators = []\n[[policy]]\nspec = "constant:0"\n',
    "estimators-unknown": 'estimators = ["XX"]\n[[policy]]\nspec = "constant:0"\n',
    "estimators-int": 'estimators = [1]\n[[policy]]\nspec = "constant:0"\n',
    "estimators-twice": 'estimators = ["IPS", "IPS"]\n[[policy]]\nspec = "constant:0"\n',
    "needs-model": 'estimators = ["DR"]\n[[policy]]\nspec = "constant:0"\n',
    "n-actions-0": 'n_actions = 0\n[[policy]]\nspec = "constant:0"\n',
    "n-actions-string": 'n_actions = "3"\n[[policy]]\nspec = "constant:0"\n',
    "n-actions-wrong": 'n_actions = 2\n[[policy]]\nspec = "constant:0"\n',
    "spec-missing": '[[policy]]\nname = "x"\n',
    "spec-int": '[[policy]]\nspec = 3\n',
    "spec-empty": '[[policy]]\nspec = ""\n',
    "spec-bad": '[[policy]]\nspec = "nonsense"\n',
    "spec-callable-missing": '[[policy]]\nspec = "callable:no_such_module_q:f"\n',
    "names-twice": '[[policy]]\nname = "a"\nspec = "constant:0"\n[[policy]]\nname = "a"\nspec = "constant:1"\n',
    "policy-not-table": 'policy = [1, 2]\n',
    "policy-table": '[policy]\nspec = "constant:0"\n',
    "both-forms": 'policies = [{spec = "constant:0"}]\n[[policy]]\nspec = "constant:1"\n',
    "model-missing": 'reward_model = "none.npz"\n[[policy]]\nspec = "constant:0"\n',
    "model-int": 'reward_model = 3\n[[policy]]\nspec = "constant:0"\n',
    "yaml:bad": "policy: [\n  - spec: x\n",
    "yaml:list": "- 1\n- 2\n",
    "yaml:scalar": "hello\n",
    "yaml:empty": "",
    "yaml:unknown": "colour: red\npolicy:\n  - spec: constant:0\n",
    "yaml:alpha-bool": "alpha: yes\npolicy:\n  - spec: constant:0\n",
    "yaml:nested-deep": "policy: " + "[" * 200 + "]" * 200 + "\n",
    "yaml:anchor-bomb": "a: &a [x, x]\nb: &b [*a, *a]\npolicy: [{spec: constant:0}]\n",
}


@slow
@pytest.mark.parametrize("which", sorted(POLICIES))
def test_bad_policies_file(tmp_path, capsys, base, which):
    content = POLICIES[which]
    path = tmp_path / ("p.yaml" if which.startswith("yaml:") else "p.toml")
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, _, err = run(["report", "--logs", base / "share", "--policies", path, "--out", tmp_path / "o",
                        "--no-progress"], capsys, tmp_path)
    assert code == 2 and str(path) in err


@slow
@pytest.mark.parametrize("extra", [
    ["--window", "0d"], ["--window", "99999999999d"], ["--window", "x"], ["--window", "-1d"], ["--window", "7y"],
    ["--until", "2026-11-03"], ["--until", "yesterday"], ["--window", "3d", "--until", "0001-01-01"],
    ["--window", "3d", "--until", "2020-01-01"], ["--policies", "/nonexistent.toml"], ["--policies", "/tmp"],
], ids=lambda e: " ".join(e))
def test_bad_report_option(tmp_path, capsys, base, extra):
    argv = ["report", "--logs", base / "share", "--policies", base / "policies.toml", "--out", tmp_path / "o",
            "--no-progress"]
    if extra[0] == "--policies":
        argv[4] = extra[1]
        extra = []
    code, _, _ = run([*argv, *extra], capsys, tmp_path)
    assert code == 2


# -- job files ------------------------------------------------------------------------------------
JOBS = {
    "missing-job": ("", []),
    "unknown-job": ('job = "nope"\n', []),
    "job-int": ("job = 1\n", []),
    "bad-toml": ('job = "visits"\nrows = \n', []),
    "visits-fractions-scalar": ('job = "visits"\nfractions = 0.05\n', []),
    "visits-fractions-empty": ('job = "visits"\nfractions = []\n', []),
    "visits-fractions-2": ('job = "visits"\nfractions = [2.0]\n', []),
    "visits-repetitions-0": ('job = "visits"\nrepetitions = 0\n', []),
    "visits-rtol-negative": ('job = "visits"\nrtol = -1\n', []),
    "visits-rtol-nan": ('job = "visits"\nrtol = nan\n', []),
    "visits-lam-negative": ('job = "visits"\nlam = -1.0\n', []),
    "visits-kernel": ('job = "visits"\nkernel = "box"\n', []),
    "visits-rows-string": ('job = "visits"\nrows = "many"\n', []),
    "visits-unknown": ('job = "visits"\ncolour = 1\n', []),
    "visits-storage-list": ('job = "visits"\nstorage_options = [1]\n', []),
    "visits-set-rows": ('job = "visits"\n', ["--set", "rows=abc"]),
    "visits-set-no-equals": ('job = "visits"\n', ["--set", "rows"], "--set"),
    "visits-set-empty-key": ('job = "visits"\n', ["--set", "=3"], "--set"),
    "visits-set-unknown": ('job = "visits"\n', ["--set", "bogus=1"]),
    "visits-out-is-file": ('job = "visits"\nout = "{a_file}"\n', [], "a-file: is a file"),
    "report-skip-string": ('job = "report"\nlogs = "{share}"\npolicies = "{policies}"\nout = "{out}"\n'
                           'skip_bad_partitions = "false"\n', []),
    "report-until-bad": ('job = "report"\nlogs = "{share}"\npolicies = "{policies}"\nout = "{out}"\n'
                         'until = "soon"\n', []),
    "report-until-no-window": ('job = "report"\nlogs = "{share}"\npolicies = "{policies}"\nout = "{out}"\n'
                               'until = 2026-11-02\n', [], "until needs a window"),
    "report-missing-logs": ('job = "report"\npolicies = "{policies}"\nout = "{out}"\n', []),
    "report-unknown": ('job = "report"\nlogs = "{share}"\npolicies = "{policies}"\nout = "{out}"\nx = 1\n', []),
    "report-storage-int": ('job = "report"\nlogs = "{share}"\npolicies = "{policies}"\nout = "{out}"\n'
                           'storage_options = 3\n', []),
    "report-storage-missing-file": ('job = "report"\nlogs = "{share}"\npolicies = "{policies}"\nout = "{out}"\n'
                                    'storage_options = "/nonexistent.json"\n', [], "/nonexistent.json"),
    "report-window-int": ('job = "report"\nlogs = "{share}"\npolicies = "{policies}"\nout = "{out}"\nwindow = 7\n',
                          []),
    "class-repetitions-0": ('job = "classification_eval"\nrepetitions = 0\n', []),
    "class-datasets-unknown": ('job = "classification_eval"\ndatasets = ["iris"]\n', []),
    "class-datasets-empty": ('job = "classification_eval"\ndatasets = []\n', []),
    "class-dlm-unknown": ('job = "classification_opt"\n[dlm]\nbogus = 1\n', []),
    "class-dlm-negative": ('job = "classification_opt"\n[dlm]\nepsilon = -1.0\n', []),
    "class-tree-bad": ('job = "classification_opt"\n[tree]\nmax_depth = -1\n', []),
    "class-tree-unknown": ('job = "classification_opt"\n[tree]\nbogus = 1\n', []),
    "class-block-0": ('job = "classification_eval"\nblock = 0\n', []),
    "class-seed-negative": ('job = "classification_eval"\nseed = -1\n', []),
    "class-train-fraction": ('job = "classification_eval"\ntrain_fraction = 1.5\n', []),
    "class-output-is-file": ('job = "classification_eval"\noutput = "{a_file}"\ndatasets = ["ecoli"]\n', [],
                             "a-file: is a file"),
}


@slow
@pytest.mark.parametrize("which", sorted(JOBS))
def test_bad_job_file(tmp_path, capsys, base, which):
    text, extra, *named = JOBS[which]
    path = tmp_path / "job.toml"
    path.write_text(text.format(share=base / "share", policies=base / "policies.toml", out=tmp_path / "o",
                                a_file=base / "a-file"))
    code, _, err = run(["run", path, *extra, "--no-progress"], capsys, tmp_path)
    assert code == 2 and (named[0] if named else str(path)) in err


@slow
@pytest.mark.parametrize("which", ["missing", "folder", "binary"])
def test_bad_job_path(tmp_path, capsys, which):
    path = {"missing": tmp_path / "none.toml", "folder": tmp_path, "binary": tmp_path / "b.toml"}[which]
    if which == "binary":
        path.write_bytes(b"\x00\xff\xfe")
    code, _, err = run(["run", path], capsys, tmp_path)
    assert code == 2 and str(path) in err


@slow
@pytest.mark.parametrize("extra", [["--rows", "0"], ["--rows", "-5"], ["--rows", "abc"], ["--features", "0"],
                                   ["--rows-per-part", "0"], ["--seed", "x"]], ids=lambda e: " ".join(e))
def test_bad_generate_option(tmp_path, capsys, extra):
    code, _, _ = run(["generate", "visits", "--out", tmp_path / "g", "--no-calibration", "--no-progress", *extra],
                     capsys, tmp_path)
    assert code == 2
    assert not (tmp_path / "g").exists()


@slow
@pytest.mark.parametrize("argv", [[], ["bogus"], ["evaluate", "--help"], ["fit", "--help"], ["run", "--help"],
                                  ["report", "--help"], ["generate", "--help"], ["generate", "visits", "--help"],
                                  ["learn", "--help"], ["generate", "bandit", "--help"],
                                  ["--debug"], ["generate"]], ids=lambda a: " ".join(a) or "none")
def test_usage(capsys, tmp_path, argv):
    code, _, _ = run(argv, capsys, tmp_path)
    assert code == (0 if "--help" in argv else 2)


LEARN_OPTIONS = [["--method", "x"], ["--learner", "x"], ["--lam", "0"], ["--lam", "nan"], ["--folds", "0"],
                 ["--folds", "1"], ["--n-actions", "0"], ["--n-actions", "2"], ["--n-features", "-1"],
                 ["--max-iter", "0"], ["--max-iter", "-5"], ["--spill", ""], ["--method", "dm"],
                 ["--out", "/proc/p.npz"]]


@slow
@pytest.mark.parametrize("extra", LEARN_OPTIONS, ids=lambda e: " ".join(e))
def test_bad_learn_option(tmp_path, capsys, base, extra):
    out = tmp_path / "out"
    argv = ["learn", base / "logs", "--out", out / "p.npz", "--no-progress", *extra]
    run(argv, capsys, out)


BANDIT_OPTIONS = [["--rows", "0"], ["--rows", "-1"], ["--rows", "x"], ["--features", "0"], ["--actions", "0"],
                  ["--actions", "1"], ["--days", "0"], ["--days", "-2"], ["--rows-per-part", "0"], ["--seed", "-1"],
                  ["--rows", "5", "--days", "10"], ["--features", "1.5"]]


@slow
@pytest.mark.parametrize("extra", BANDIT_OPTIONS, ids=lambda e: " ".join(e))
def test_bad_generate_bandit_option(tmp_path, capsys, extra):
    out = tmp_path / "out"
    argv = ["generate", "bandit", "--rows", "40", "--features", "16", "--actions", "3", "--out", out,
            "--no-progress", *extra]
    run(argv, capsys, out)


@slow
@pytest.mark.parametrize("which", ["out-is-file", "out-not-empty", "out-in-proc"])
def test_bad_generate_bandit_output(tmp_path, capsys, base, which):
    out = {"out-is-file": base / "a-file", "out-not-empty": base, "out-in-proc": "/proc/dr-scale-bandit"}[which]
    code, _, _ = run(["generate", "bandit", "--rows", "40", "--features", "16", "--actions", "3", "--out", out,
                      "--no-progress"], capsys, tmp_path)
    assert code == 2


# -- the newer surface: policies that do not fit, --overwrite, limits, fingerprints, never-logged actions ---------
def _newer_files(base: Path, tmp: Path) -> dict:
    """Inputs of the newer-surface cases, made once per case in ``tmp``."""
    rng = np.random.default_rng(0)
    files = {}
    for name, (d, k, scale) in {"pol": (D, K, 1.0), "pol_k2": (D, 2, 1.0), "pol_d2": (2, K, 1.0),
                                "huge": (D, K, 1e308)}.items():
        files[name] = tmp / f"{name}.npz"
        np.savez(files[name], coef=scale * (rng.normal(size=(d, k)) if scale == 1.0 else np.ones((d, k))),
                 intercept=np.zeros(k), metadata=np.array("{}"))
    files["notes"] = tmp / "notes"
    files["notes"].mkdir()
    (files["notes"] / "keep.txt").write_text("x")
    no_meta = tmp / "no-meta" / "date=2026-11-01"
    no_meta.mkdir(parents=True)
    pq.write_table(pa.table(good_columns(30)), no_meta / "part-00000.parquet")
    files["no_meta"] = no_meta.parent
    stray = good_columns(30)
    feats = stray["features"].to_pylist()
    feats[3] = feats[3] + [10_000_000]
    stray["features"] = pa.array(feats, pa.list_(pa.int32()))
    (tmp / "stray").mkdir()
    pq.write_table(pa.table(stray), tmp / "stray" / "part-00000.parquet")
    files["stray"] = tmp / "stray"
    no2 = good_columns(30)
    no2["action"] = pa.array(np.arange(30) % 2)  # action 2 never logged (k = 3)
    write_log(pa.table(no2), str(tmp / "no2" / "date=2026-11-01"), n_features=D, n_actions=K)
    files["no2"] = tmp / "no2"
    LinearRewardModel(np.full((D, K), 0.1), np.zeros(K), np.full((2, D, K), 0.1), np.zeros((2, K)), 0,
                      {"fingerprint": "7:00000000000000ff"}).save(str(tmp / "cf.npz"))
    files["cf"] = tmp / "cf.npz"
    huge = good_columns(30)
    huge["reward"] = pa.array(huge["reward"].to_numpy() * 1e300)
    write_log(pa.table(huge), str(tmp / "huge-rewards"), n_features=D, n_actions=K)
    files["huge_rewards"] = tmp / "huge-rewards"
    return files


def _policies(tmp: Path, body: str) -> Path:
    path = tmp / "policies.toml"
    path.write_text(body)
    return path


def _report(b, t, policies, logs=None, *extra):
    return ["report", "--logs", logs or b / "share", "--policies", policies, "--out", t / "o", "--no-progress", *extra]


def _evaluate(b, *extra, logs=None):
    return ["evaluate", logs or b / "logs", *extra, "--json", "OUT/r.json", "--no-progress"]


GEN = ["generate", "bandit", "--rows", "40", "--features", "96", "--actions", "3", "--no-progress"]
NEWER = {
    # a policy that does not fit the log: the policies file's error, never the partitions' (exit 2)
    **{f"report-policy-k2{'-skip' if skip else ''}{'-no-meta' if nm else ''}": (
        lambda b, t, f, skip=skip, nm=nm: _report(
            b, t, _policies(t, f'[[policy]]\nname = "k2"\nspec = "linear:{f["pol_k2"]}"\n'),
            f["no_meta"] if nm else None, *(["--skip-bad-partitions"] if skip else [])), {2})
       for skip in (False, True) for nm in (False, True)},
    "report-policy-d2": (lambda b, t, f: _report(b, t, _policies(
        t, f'[[policy]]\nname = "d2"\nspec = "linear:{f["pol_d2"]}"\n'), None, "--skip-bad-partitions"), {2}),
    "report-policies-disagree-on-k": (lambda b, t, f: _report(b, t, _policies(
        t, f'[[policy]]\nspec = "linear:{f["pol"]}"\n[[policy]]\nspec = "linear:{f["pol_k2"]}"\n'),
        f["no_meta"]), {2}),
    "report-never-logged-action": (lambda b, t, f: _report(b, t, _policies(
        t, f'reward_model = "{b / "model.npz"}"\n[[policy]]\nspec = "constant:2"\n'), f["no2"]), {0}),
    "report-never-logged-action-el": (lambda b, t, f: _report(b, t, _policies(
        t, f'interval = "el"\nreward_model = "{b / "model.npz"}"\n[[policy]]\nspec = "constant:2"\n'),
        f["no2"]), {0}),
    # --overwrite replaces only what dr-scale wrote
    "overwrite-notes": (lambda b, t, f: [*GEN, "--out", f["notes"], "--overwrite"], {2}),
    "overwrite-policy-file": (lambda b, t, f: [*GEN, "--out", f["pol"], "--overwrite"], {2}),
    "overwrite-not-given": (lambda b, t, f: [*GEN, "--out", f["notes"]], {2}),
    "visits-overwrite-notes": (lambda b, t, f: ["generate", "visits", "--rows", "30", "--features", "8",
                                                "--no-calibration", "--no-progress", "--out", f["notes"],
                                                "--overwrite"], {2}),
    # outputs checked before the work
    **{f"{cmd}-out-name-too-long": (lambda b, t, f, cmd=cmd: [cmd, b / "logs", "--out", t / ("n" * 240 + ".npz"),
                                                              "--no-progress"], {2}) for cmd in ("fit", "learn")},
    "learn-out-is-folder": (lambda b, t, f: ["learn", b / "logs", "--out", t, "--no-progress"], {2}),
    "json-name-too-long": (lambda b, t, f: ["evaluate", b / "logs", "--policy", "constant:1", "--json",
                                            t / ("j" * 240 + ".json"), "--no-progress"], {2}),
    # limits that fail fast
    "fit-folds-beyond-rows": (lambda b, t, f: ["fit", b / "logs", "--folds", "61", "--out", t / "m.npz",
                                               "--no-progress"], {2}),
    "learn-folds-beyond-rows": (lambda b, t, f: ["learn", b / "logs", "--folds", "500", "--out", t / "p.npz",
                                                 "--no-progress"], {2}),
    "evaluate-folds-beyond-rows": (lambda b, t, f: _evaluate(b, "--fit-reward-model", "--folds", "5000"), {2}),
    "local-workers-1000": (lambda b, t, f: ["fit", b / "logs", "--local-workers", "1000", "--out", t / "m.npz",
                                            "--no-progress"], {2}),
    "stray-feature-id": (lambda b, t, f: ["fit", f["stray"], "--out", t / "m.npz", "--no-progress"], {2}),
    "n-features-2^31": (lambda b, t, f: ["fit", b / "logs", "--n-features", "2147483648", "--out", t / "m.npz",
                                         "--no-progress"], {0}),  # sized by the features used: no d-sized array
    **{f"fit{' '.join(extra)}": (lambda b, t, f, extra=extra: ["fit", b / "logs", *extra, "--out", t / "m.npz",
                                                                "--no-progress"], {2})
       for extra in (("--lam", "inf"), ("--lam", "1e-320"), ("--rtol", "1e-300"),
                     ("--seed", "1180591620717411303424"), ("--folds", "2.7"))},
    # options that a fitted model would silently ignore; a cross-fitted model from another log
    **{f"evaluate-model{' '.join(extra)}": (lambda b, t, f, extra=extra: _evaluate(
        b, "--reward-model", b / "model.npz", *extra), {2})
       for extra in (("--folds", "3"), ("--lam", "2"), ("--rtol", "1e-6"), ("--seed", "3"))},
    "learn-model-folds": (lambda b, t, f: ["learn", b / "logs", "--reward-model", b / "model.npz", "--folds", "3",
                                           "--out", t / "p.npz", "--no-progress"], {2}),
    "cross-fitted-other-log": (lambda b, t, f: _evaluate(b, "--reward-model", f["cf"]), {2}),
    "cross-fitted-other-log-allowed": (lambda b, t, f: _evaluate(b, "--reward-model", f["cf"],
                                                                 "--allow-other-log"), {0}),
    # never-logged actions: a warning with the share, and "0 matched rows" said
    "evaluate-never-logged-action": (lambda b, t, f: _evaluate(b, "--policy", "constant:2", "--reward-model",
                                                               b / "model.npz", logs=f["no2"]), {0}),
    "evaluate-never-logged-action-el": (lambda b, t, f: _evaluate(b, "--policy", "constant:2", "--reward-model",
                                                                  b / "model.npz", "--interval", "el",
                                                                  logs=f["no2"]), {0}),
    "evaluate-fitted-never-logged-action": (lambda b, t, f: _evaluate(b, "--policy", "constant:2",
                                                                      "--fit-reward-model", logs=f["no2"]), {0}),
    # rewards beyond the fits' range; learn on actions never logged and with a model from another log
    **{f"{cmd}-rewards-1e300": (lambda b, t, f, cmd=cmd: [cmd, f["huge_rewards"], "--out", t / "m.npz",
                                                         "--no-progress"], {2}) for cmd in ("fit", "learn")},
    "evaluate-fitted-rewards-1e300": (lambda b, t, f: _evaluate(b, "--fit-reward-model", logs=f["huge_rewards"]),
                                      {2}),
    **{f"learn-never-logged-action{'-allowed' if allow else ''}-{learner}": (
        lambda b, t, f, allow=allow, learner=learner: [
            "learn", f["no2"], "--learner", learner, "--out", t / "p.npz", "--no-progress",
            *(["--allow-unlogged-actions"] if allow else [])], {0})
       for allow in (False, True) for learner in ("ridge", "dlm")},
    "learn-cross-fitted-other-log": (lambda b, t, f: ["learn", b / "logs", "--reward-model", f["cf"], "--out",
                                                      t / "p.npz", "--no-progress"], {2}),
    "learn-cross-fitted-other-log-allowed": (lambda b, t, f: ["learn", b / "logs", "--reward-model", f["cf"],
                                                              "--allow-other-log", "--out", t / "p.npz",
                                                              "--no-progress"], {0}),
    # policies whose scores overflow, bad temperatures
    "softmax-huge-scores": (lambda b, t, f: _evaluate(b, "--policy", f"softmax:{f['huge']}:1"), {2}),
    "linear-huge-scores": (lambda b, t, f: _evaluate(b, "--policy", f"linear:{f['huge']}"), {2}),
    **{f"softmax-T={v}": (lambda b, t, f, v=v: _evaluate(b, "--policy", f"softmax:{f['pol']}:{v}"),
                          {2} if v in ("0", "-1", "nan", "inf") else {0})
       for v in ("0", "-1", "nan", "inf", "1e-320", "1e300")},
}


@slow
@pytest.mark.parametrize("which", sorted(NEWER))
def test_newer_surface(tmp_path, capsys, base, which):
    make, codes = NEWER[which]
    files = _newer_files(base, tmp_path)
    out = tmp_path / "OUT"
    argv = [str(a).replace("OUT/", f"{out}/") for a in make(base, tmp_path, files)]
    code, _, err = run(argv, capsys, tmp_path)
    assert code in codes, (code, err)


def test_corpus_size():
    """The corpus holds at least 200 distinct bad inputs."""
    counted = (3 * len(LOG_MUTATIONS) + 3 * 11 + len(EVALUATE_OPTIONS) + 2 * len(MODELS) + len(OUTPUTS) + 7 + 3
               + len(POLICIES) + 11 + len(JOBS) + 3 + 6 + len(LEARN_OPTIONS) + len(BANDIT_OPTIONS) + 3 + len(NEWER))
    assert counted >= 200 + len(NEWER), counted


# -- through the real process: what only a process has (its streams, its environment) ----------------------
def _process(argv, env: dict | None = None) -> tuple[int, str]:
    """Run ``dr-scale`` with ``argv`` (a list, or a shell string after the executable) in a fresh process."""
    import os
    import shlex
    import subprocess
    import sys

    exe = str(Path(sys.executable).parent / "dr-scale")
    command = f"{shlex.quote(exe)} {argv}" if isinstance(argv, str) else [exe, *map(str, argv)]
    proc = subprocess.run(command, shell=isinstance(argv, str), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=180, env={**os.environ, **(env or {})})
    return proc.returncode, proc.stderr.decode()


@pytest.mark.slow
def test_process_level_cases(tmp_path, base):
    """A full disk as stdout, a bad environment: exit 2 with one line, never a traceback or a hang."""
    import concurrent.futures
    import shlex

    cases = {
        "full disk": (f"evaluate {shlex.quote(str(base / 'logs'))} --no-progress > /dev/full", None,
                      "No space left on device"),
        "bad scheduler variable": (["evaluate", base / "logs", "--no-progress"],
                                   {"DASK_SCHEDULER_ADDRESS": "garbage"}, "--scheduler 'garbage'"),
        "bad connect timeout": (["evaluate", base / "logs", "--scheduler", "tcp://127.0.0.1:1", "--no-progress"],
                                {"DASK_DR_SCALE__CONNECT_TIMEOUT": "abc"}, "dr-scale.connect-timeout = 'abc'"),
        "bad storage variable": (["evaluate", base / "logs", "--no-progress"], {"DR_SCALE_STORAGE_OPTIONS": "{"},
                                 "$DR_SCALE_STORAGE_OPTIONS: not valid JSON"),
        "cache is a file": (["run", Path(__file__).parents[2] / "pipelines" / "visits.toml", "--set", "rows=100",
                             "--set", "features=10", "--set", f"out={tmp_path / 'v'}", "--no-progress"],
                            {"DR_SCALE_CACHE": str(base / "a-file")}, "a-file is a file, not a folder"),
    }
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        results = dict(zip(cases, pool.map(lambda case: _process(case[0], case[1]), cases.values())))
    for name, (code, err) in results.items():
        assert code == 2, (name, code, err)
        assert "Traceback" not in err and cases[name][2] in err, (name, err)
        assert len([line for line in err.splitlines() if ": error: " in line]) == 1, (name, err)


def test_a_closed_pipe_is_named():
    from dr_scale.core.errors import describe

    assert describe(BrokenPipeError(32, "Broken pipe")).startswith("the output was closed before everything was")
