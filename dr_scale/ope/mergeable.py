"""The mergeable-state contract and its one reduction (:mod:`dr_scale.outofcore.mergeable`), under the name the
estimators' modules know it by."""

from dr_scale.outofcore.mergeable import Mergeable, Persisted, merge_all, tree_reduce

__all__ = ["Mergeable", "Persisted", "merge_all", "tree_reduce"]
