"""The shared model and the item scorer on the local scheduler and on a LocalCluster of worker processes: bit for
bit the same.

``fit --model shared --folds 2 --lam auto`` on a generated item log in 4 parts, once with the default local
scheduler and once on the session's shared ``distributed.LocalCluster`` of two worker processes (``--scheduler``).
Every pass reduces per-part sums in a fixed tree (:func:`dr_scale.outofcore.passes.tree_nodes`), so where a
task runs cannot change a float: the model files' arrays and the printed text must be equal, not merely close.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import cli

from dr_scale.synthetic.item_world import generate_item_bandit

pytestmark = pytest.mark.slow  # on the shared LocalCluster



@pytest.fixture(scope="module")
def item_log(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("items") / "log")
    # 10^4 items: sums over the catalogue as long as that are where a multithreaded BLAS (this process) and a
    # single-threaded one (a worker process) would add in other orders
    generate_item_bandit(url, rows=4000, rows_per_part=1000, seed=4, features=100, actions=10_000, action_features=8,
                         embedding_categories=6)
    return url


@pytest.mark.timeout(300)
@pytest.mark.parametrize("model", ["shared-ridge", "shared-logistic"])
def test_fit_shared_identical_locally_and_on_a_localcluster(modes, item_log, tmp_path, capsys, model):
    runs = {}
    for mode, extra in modes.items():
        out = tmp_path / f"{mode}.npz"
        code, stdout, err = cli(capsys, "fit", item_log, "--model", model, "--folds", "2", "--out", out,
                                "--no-progress", *extra)
        assert code == 0, err
        runs[mode] = stdout, np.load(out, allow_pickle=False)
    (local_out, local), (cluster_out, cluster) = runs.values()
    assert local_out == cluster_out and "2 folds" in local_out and "(auto)" in local_out
    assert sorted(local.files) == sorted(cluster.files) and "fold_theta" in local.files
    for name in local.files:
        np.testing.assert_array_equal(cluster[name], local[name], err_msg=name)  # exact, not approximate


@pytest.mark.timeout(300)
def test_learn_scorer_identical_locally_and_on_a_localcluster(modes, item_log, tmp_path, capsys):
    runs = {}
    for mode, extra in modes.items():
        out = tmp_path / f"{mode}.npz"
        code, stdout, err = cli(capsys, "learn", item_log, "--learner", "scorer", "--folds", "2", "--out", out,
                                "--no-progress", *extra)
        assert code == 0, err
        runs[mode] = stdout, np.load(out, allow_pickle=False)
    (local_out, local), (cluster_out, cluster) = runs.values()
    assert local_out == cluster_out and "2 fold models" in local_out
    for name in local.files:
        np.testing.assert_array_equal(cluster[name], local[name], err_msg=name)
