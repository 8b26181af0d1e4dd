"""Learned policies: ``linear:POLICY.npz`` (argmax) and ``softmax:POLICY.npz:T`` in the API, evaluate and report."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale.cli import main
from dr_scale.core import keyed_random
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.policies import LinearPolicy, SoftmaxPolicy, parse_policy
from dr_scale.report.policies_file import load_policies

D, K, N = 12, 3, 900


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    """A uniformly logged set with ~4 active binary features a row and a cosine reward."""
    folder = tmp_path_factory.mktemp("linear")
    row_id = np.arange(N, dtype=np.int64)
    u = keyed_random.uniform(np.repeat(row_id, D) * D + np.tile(np.arange(D), N), 1, "features").reshape(N, D)
    X = sp.csr_matrix((u < 0.35).astype(np.float64))
    action = np.minimum((keyed_random.uniform(row_id, 1, "action") * K).astype(np.int64), K - 1)
    table = pa.table({"row_id": row_id, "features": csr_to_features(X), "action": action,
                      "reward": np.cos(row_id), "propensity": np.full(N, 1 / K)})
    url = str(folder / "log")
    write_log(table, url, n_parts=3, n_features=D, n_actions=K)
    rng = np.random.default_rng(0)
    policy = LinearPolicy(rng.normal(size=(D, K)), rng.normal(size=K), {"method": "test"})
    policy.save(str(folder / "policy.npz"))
    return url, X, action, folder, policy


def test_argmax_breaks_ties_to_the_lowest_action():
    policy = LinearPolicy(np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]]), np.zeros(3))
    X = sp.csr_matrix(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    np.testing.assert_array_equal(policy.predict(X), [0, 0, 1, 1])


def test_file_holds_exactly_coef_intercept_and_metadata(log):
    url, X, action, folder, policy = log
    with np.load(folder / "policy.npz", allow_pickle=False) as z:
        assert sorted(z.files) == ["coef", "intercept", "metadata"]
        assert z["coef"].shape == (D, K) and z["intercept"].shape == (K,)
    loaded = parse_policy(f"linear:{folder / 'policy.npz'}")
    np.testing.assert_array_equal(loaded.coef, policy.coef)
    assert loaded.metadata == {"method": "test"} and loaded.n_actions == K
    assert str(loaded).startswith(f"linear:{folder / 'policy.npz'} (sha256 ")


def test_linear_policy_evaluates_like_its_actions_in_a_column(log, tmp_path):
    """IPS of ``linear:`` equals IPS of the same actions written to the log as a column."""
    url, X, action, folder, policy = log
    spec = f"linear:{folder / 'policy.npz'}"
    got = evaluate_log(url, Evaluation(spec, ["IPS"])).estimates["IPS"]
    chosen = policy.predict(X)
    expected = np.mean(np.cos(np.arange(N)) * (chosen == action) * K)
    assert got.value == pytest.approx(expected, rel=1e-12)


def test_softmax_policy_probabilities(log):
    url, X, action, folder, policy = log
    soft = parse_policy(f"softmax:{folder / 'policy.npz'}:0.5")
    assert isinstance(soft, SoftmaxPolicy) and soft.temperature == 0.5
    scores = X @ policy.coef + policy.intercept
    expected = np.exp(scores / 0.5) / np.exp(scores / 0.5).sum(axis=1, keepdims=True)

    class Part:
        source, row_id = "<memory>", np.arange(N)

    Part.X = X
    np.testing.assert_allclose(soft.distribution(Part, K).probs, expected, rtol=1e-12)
    # a cold softmax is the argmax policy; the estimate moves continuously with T
    cold = evaluate_log(url, Evaluation(f"softmax:{folder / 'policy.npz'}:1e-9", ["IPS"])).estimates["IPS"].value
    argmax = evaluate_log(url, Evaluation(f"linear:{folder / 'policy.npz'}", ["IPS"])).estimates["IPS"].value
    assert cold == pytest.approx(argmax, rel=1e-12)


def test_evaluate_command_reads_a_linear_policy(log, capsys):
    url, X, action, folder, policy = log
    assert main(["evaluate", url, "--policy", f"linear:{folder / 'policy.npz'}", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "policy linear:" in out and "IPS" in out


@pytest.mark.parametrize("spec, message", [
    ("linear:{folder}/missing.npz", "missing.npz: no such file"),
    ("linear:{folder}/not-a-policy.npz", "expected arrays 'coef' (d × k) and 'intercept' (k), found weights"),
    ("linear:{folder}/garbage.npz",
     "garbage.npz: not an .npz file (a zip archive of arrays); it begins with b'not a zip file' (text)"),
    ("softmax:{folder}/policy.npz:hot", "temperature T of softmax:POLICY.npz:T must be a number"),
    ("softmax:{folder}/policy.npz:0", "the temperature T must be a positive finite number"),
])
def test_bad_policy_files_are_clear_errors(log, capsys, spec, message):
    url, X, action, folder, policy = log
    np.savez(folder / "not-a-policy.npz", weights=np.zeros(3))
    (folder / "garbage.npz").write_bytes(b"not a zip file")
    assert main(["evaluate", url, "--policy", spec.format(folder=folder), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_policy_with_other_actions_or_features_is_a_clear_error(log, tmp_path, capsys):
    url, X, action, folder, policy = log
    LinearPolicy(np.zeros((D, K + 1)), np.zeros(K + 1)).save(str(tmp_path / "four.npz"))
    assert main(["evaluate", url, "--policy", f"linear:{tmp_path / 'four.npz'}", "--no-progress"]) == 2
    assert "the log has 3 actions" in capsys.readouterr().err
    LinearPolicy(np.zeros((D - 4, K)), np.zeros(K)).save(str(tmp_path / "narrow.npz"))
    assert main(["evaluate", url, "--policy", f"linear:{tmp_path / 'narrow.npz'}", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "column 'features': feature index beyond the policy's 8 features" in err and "row_id=" in err


def test_report_policies_file_resolves_policy_files_relative_to_itself(log, tmp_path):
    url, X, action, folder, policy = log
    (folder / "policies.toml").write_text(
        '[[policy]]\nname = "learned"\nspec = "linear:policy.npz"\n'
        '[[policy]]\nname = "soft"\nspec = "softmax:policy.npz:2"\n')
    pf = load_policies(str(folder / "policies.toml"))
    assert [p.spec for p in pf.policies] == [f"linear:{folder / 'policy.npz'}", f"softmax:{folder / 'policy.npz'}:2"]


def test_a_policy_file_holds_the_features_it_weighs(tmp_path):
    """Rows of coef that are 0 for every action (features no training row had) are not written: a policy over
    d = 2^18 hashed features with 5 in use is a file of 5 rows, loaded back with the same coef, scores and
    digest; a file whose ``features`` do not fit its coef is refused naming it."""
    d = 1 << 18
    coef = np.zeros((d, K))
    used = np.array([3, 70, 4096, 99_999, d - 1])
    coef[used] = np.arange(used.size * K, dtype=np.float64).reshape(-1, K) - 4.0
    policy = LinearPolicy(coef, np.array([0.5, -1.0, 0.0]), {"learner": "test"})
    path = tmp_path / "sparse.npz"
    policy.save(str(path))
    with np.load(path) as z:
        assert z["coef"].shape == (used.size, K) and z["features"].tolist() == used.tolist()
    assert path.stat().st_size < 10_000  # the dense coef alone is 6 MB
    again = LinearPolicy.load(str(path))
    np.testing.assert_array_equal(again.coef, coef)
    assert again.digest == policy.digest and again.n_features == d
    with np.load(path) as z:
        arrays = dict(z)
    arrays["features"] = arrays["features"][::-1].copy()  # not increasing
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    with pytest.raises(Exception, match="bad.npz: .features. must be increasing ids"):
        LinearPolicy.load(str(bad))
