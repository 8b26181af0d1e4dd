"""The one reduction of mergeable states: Dask's tree, the same for a bag and for a list of delayed states."""

import dask
import dask.bag as db

from dr_scale.outofcore.mergeable import tree_reduce


def _bracket(states) -> str:
    """A merge that writes the tree down: the merged states in brackets."""
    return "(" + ",".join(states) + ")"


def test_the_tree_merges_runs_of_split_every_consecutive_states_level_by_level():
    leaves = [str(i) for i in range(20)]
    (tree,) = dask.compute(tree_reduce([dask.delayed(s) for s in leaves], _bracket), scheduler="sync")
    runs = [",".join(f"({i})" for i in range(lo, min(lo + 8, 20))) for lo in (0, 8, 16)]
    assert tree == "(" + ",".join(f"({run})" for run in runs) + ")"
    (from_bag,) = dask.compute(tree_reduce(db.from_sequence(leaves, npartitions=20), _bracket), scheduler="sync")
    assert from_bag == tree
    (few,) = dask.compute(tree_reduce([dask.delayed(s) for s in leaves[:3]], _bracket), scheduler="sync")
    assert few == "((0),(1),(2))"
