"""obp 0.5.7's MIPS on the item world's dense (n, k, 1) arrays beside dr-scale's sparse MIPS: values and peak memory.

    PYTHONPATH=. python benchmarks/obp_mips_memory.py LOG ROWS

LOG is a log written by ``dr-scale generate bandit --action-features …`` (its catalogue, target
column and world parameters); the first ROWS rows of its first part are evaluated both ways. obp needs the logging
policy's and the target policy's probabilities of every action, (n, k, 1) float64 each; they are
built from the world's definition (π₀(a|x) = π₀(e(a)|x) ν(a|e(a))), then obp's
``MarginalizedInverseProbabilityWeighting`` and its SN form run with the true p(e|a). Prints both
values, the dense arrays' size, and the process's peak RSS after dr-scale's run and after obp's
(``resource.getrusage``; dr-scale's runs first, so its figure is its own).
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import obp_equality  # noqa: E402,F401 - stand-in torch for obp, as the equality benchmark does

from dr_scale import Evaluation, evaluate_partitions  # noqa: E402
from dr_scale.logs.catalogue import read_catalogue
from dr_scale.logs.listing import list_parts
from dr_scale.logs.reading import read_partition  # noqa: E402
from dr_scale.policies import SparsePolicy  # noqa: E402
from dr_scale.synthetic.item_world import make_item_world  # noqa: E402


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(log: str, rows: int) -> None:
    manifest = json.loads((Path(log) / "_manifest.json").read_text())
    world = make_item_world(manifest["seed"], manifest["features"], manifest["actions"],
                            manifest["action_features"], manifest["embedding_categories"], manifest["target_top_k"])
    catalogue = read_catalogue(log)
    fs, paths = list_parts(log)
    part = read_partition(fs, paths[0], extra_columns=("embedding_propensity", "target_topk"))
    assert len(part) >= rows, f"the first part has {len(part)} rows; give ROWS ≤ that"
    from dr_scale.logs.contract import Partition

    part = Partition(part.source, part.row_id[:rows], part.X[:rows], part.action[:rows], part.reward[:rows],
                     part.propensity[:rows], part.table.slice(0, rows))
    evaluation = Evaluation("sparse:target_topk", ["MIPS", "SNMIPS"], n_actions=catalogue.n_actions,
                            catalogue=catalogue)
    ours = evaluate_partitions([part], evaluation)
    ours_peak = peak_mib()
    k, n = catalogue.n_actions, rows
    z = world.latent(part.X)
    pi_b = (world.category_logging(z)[:, world.embedding] * world.within)[:, :, None]  # (n, k, 1)
    action_dist = SparsePolicy("target_topk").distribution(part, k).dense()[:, :, None]
    p_e_a = np.zeros((k, catalogue.n_categories, 1))
    p_e_a[np.arange(k), catalogue.embedding, 0] = 1.0
    from obp.ope import estimators_embed as ob

    arrays = dict(reward=part.reward, action=part.action, action_embed=catalogue.embedding[part.action][:, None],
                  pi_b=pi_b, action_dist=action_dist, position=np.zeros(n, int), p_e_a=p_e_a)
    theirs = {"MIPS": ob.MarginalizedInverseProbabilityWeighting(n_actions=k).estimate_policy_value(**arrays),
              "SNMIPS": ob.SelfNormalizedMarginalizedInverseProbabilityWeighting(n_actions=k)
              .estimate_policy_value(**arrays)}
    print(f"rows {n:,}, actions {k:,}: obp's two dense (n, k, 1) float64 arrays {2 * pi_b.nbytes / 2**20:,.0f} MiB "
          f"(8·n·k bytes each; at 1M × 10^4: {8e6 * 1e4 / 1e9:,.0f} GB each)")
    for name in theirs:
        print(f"{name:7s} dr-scale {ours.estimates[name].value:.15f}  obp {theirs[name]:.15f}  "
              f"|diff| {abs(ours.estimates[name].value - theirs[name]):.2e}")
    print(f"peak RSS: after dr-scale {ours_peak:,.0f} MiB, after obp {peak_mib():,.0f} MiB")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
