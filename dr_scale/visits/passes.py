"""Map-reduce passes over the parts of a data set, kept in Dask memory between passes.

The iterative steps (Lanczos for the principal component, conjugate gradients for
ridge) each need one pass over all rows per iteration. A :class:`PartSet` holds the
parts as persisted Dask objects — in the local process for the threaded scheduler, on
the workers of a cluster — so a pass costs the arithmetic, not a re-read; a pass maps a
function over the parts and tree-reduces the results with ``+``.
"""

from __future__ import annotations


import dask

from dr_scale.compute import compute, persist

SPLIT_EVERY = 8
#: Tasks per summing pass (each sums a group of parts in sequence).
TASKS = 8


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    return a + b


def _sum(*values):
    total = values[0]
    for v in values[1:]:
        total = _add(total, v)
    return total


def tree_sum(items: list, split_every: int = SPLIT_EVERY):
    """A Dask tree reduction with ``+`` (tuples add element-wise)."""
    while len(items) > 1:
        items = [dask.delayed(_sum, pure=True)(*items[i:i + split_every]) for i in range(0, len(items), split_every)]
    return items[0]


class PartSet:
    """Persisted per-part objects and the passes over them."""

    def __init__(self, parts: list, client=None):
        self.parts, self.client = parts, client

    @classmethod
    def build(cls, make, args_per_part: list[tuple], client=None, progress: bool = False) -> "PartSet":
        """Persist ``make(*args)`` for each part's arguments."""
        return cls(persist(*[dask.delayed(make, pure=True)(*a) for a in args_per_part], client=client,
                           progress=progress), client)

    def map(self, fn, *args) -> list:
        """Delayed ``fn(part, *args)`` per part; large arguments are shipped once per pass."""
        shared = _share(args)
        return [dask.delayed(fn, pure=True)(p, *shared) for p in self.parts]

    def sum(self, fn, *args, progress: bool = False):
        """Σ over parts of ``fn(part, *args)``.

        Each task sums a group of about len(parts)/TASKS parts one after the other, and the
        group sums are tree-reduced pairwise, so only a few per-part results (up to
        (600, 5000) float64 blocks here) are alive at once, whatever the part count.
        """
        per_task = -(-len(self.parts) // TASKS)
        shared = _share(args)
        groups = [dask.delayed(_sum_group, pure=True)(fn, shared, *self.parts[i:i + per_task])
                  for i in range(0, len(self.parts), per_task)]
        (total,) = compute(tree_sum(groups, split_every=2), client=self.client, progress=progress)
        return total

    def derive(self, fn, *args, progress: bool = False) -> "PartSet":
        """A new persisted PartSet of ``fn(part, *args)``."""
        return PartSet(persist(*self.map(fn, *args), client=self.client, progress=progress), self.client)


def _share(args) -> list:
    """Large arrays become one graph key each (not hashed: a fresh key per pass), small ones stay literal."""
    return [dask.delayed(a) if _is_large(a) else a for a in args]


def _sum_group(fn, args, *parts):
    total = fn(parts[0], *args)
    for part in parts[1:]:
        total = _add(total, fn(part, *args))
    return total


def _is_large(a) -> bool:
    return getattr(a, "nbytes", 0) > 100_000
