"""Sparse target policies and MIPS through ``dr-scale evaluate``: the local threaded scheduler, the shared
LocalCluster and a command-line cluster give the same JSON, bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from dr_scale.logs.catalogue import read_catalogue
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.item_world import generate_item_bandit
from tests.conftest import cli

pytestmark = pytest.mark.slow  # clusters start in seconds


@pytest.fixture(scope="module")
def item_log(tmp_path_factory):
    """3,000 rows of a 1,000-item world in 3 parts, and a per-category reward model (an intercept per item)."""
    root = tmp_path_factory.mktemp("items")
    folder = root / "log"
    generate_item_bandit(str(folder), rows=3000, rows_per_part=1000, seed=6, features=200, actions=1000,
                         action_features=4, embedding_categories=10)
    catalogue = read_catalogue(str(folder))
    log = pq.read_table(str(folder), columns=["action", "reward"])
    category = catalogue.embedding[log.column("action").to_numpy()]
    means = np.bincount(category, log.column("reward").to_numpy(), 10) / np.bincount(category, minlength=10)
    LinearRewardModel(coef=np.zeros((200, 1000)), intercept=means[catalogue.embedding]).save(str(root / "model.npz"))
    return folder, root / "model.npz"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("policy", ["sparse:target_topk", "scorer:{folder}/_target_policy.npz"])
def test_sparse_policies_and_mips_identical_on_threads_and_clusters(item_log, dask_cluster, local_cluster, tmp_path,
                                                                     capsys, policy):
    folder, model = item_log
    policy = policy.format(folder=folder)
    outputs = {}
    for mode, extra in (("threads", []), ("localcluster", ["--scheduler", local_cluster.scheduler_address]),
                        ("cluster", ["--scheduler", dask_cluster.address])):
        out = tmp_path / f"{mode}.json"
        code, _, err = cli(capsys, "evaluate", folder, "--policy", policy, "--reward-model", model,
                           "--estimators", "IPS,SNIPS,DM,DR,MIPS,SNMIPS", "--baseline", "uniform",
                           "--json", out, "--no-progress", *extra)
        assert code == 0, err
        outputs[mode] = json.loads(out.read_text())
    assert outputs["threads"]["estimates"]["MIPS"]["n"] == 3000
    assert "marginal" in outputs["threads"]["diagnostics"]  # MIPS's own weights, merged over the parts
    assert outputs["localcluster"] == outputs["threads"]  # bit for bit: JSON floats round-trip exactly
    assert outputs["cluster"] == outputs["threads"]
