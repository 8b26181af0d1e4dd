"""Map-reduce passes over the parts of a data set, kept between passes.

The iterative steps (Lanczos for the principal component, conjugate gradients for
ridge) each need one pass over all rows per iteration. A :class:`PartSet` holds the
parts as persisted Dask objects, so a pass costs the arithmetic, not a Parquet decode;
a pass maps a function over the parts and tree-reduces the results with ``+``.

Where the parts are kept:

* on a cluster, in the workers' memory — Dask's own memory manager spills them to the
  workers' local disk beyond their ``--memory-limit``;
* with the local threaded scheduler, in the process's memory, or — given a ``spill``
  folder — as files there (:func:`spill`): a persisted part is then a small
  :class:`Spilled` handle and every pass maps the arrays back read-only (from the page
  cache: ~0.25 ms per 100,000-row part and pass more than in memory), so the resident
  memory does not grow with the number of rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
import os
import tempfile
import uuid

import dask
import numpy as np

from dr_scale.compute import compute, persist

SPLIT_EVERY = 8
#: Parts per task of a summing pass (each task sums its parts in sequence into one sum) …
PARTS_PER_TASK = 20
#: … and at most this many tasks, whose sums may all be waiting at once for the tree reduction.
MAX_TASKS = 8


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    return a + b


def _add_into(total, value):
    """``total + value``, in place where ``total`` allows it (numpy arrays, objects with ``+=``)."""
    if isinstance(total, tuple):
        return tuple(_add_into(x, y) for x, y in zip(total, value))
    return operator.iadd(total, value)


def _sum(*values):
    total = values[0]
    for v in values[1:]:
        total = _add(total, v)
    return total


def tree_sum(items: list, split_every: int = SPLIT_EVERY):
    """A Dask tree reduction with ``+`` (tuples add element-wise)."""
    while len(items) > 1:
        items = [dask.delayed(_sum)(*items[i:i + split_every]) for i in range(0, len(items), split_every)]
    return items[0]


# -- spilling to local files ----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Spilled:
    """A dataclass instance whose array fields wait in ``<folder>/<field>`` as raw bytes.

    ``arrays`` maps each array field to its (dtype, shape), so loading maps the files
    without reading or parsing a header (~0.25 ms per part and pass, against ~0.8 ms for
    ``np.load(mmap_mode="r")`` of ``.npy`` files).
    """

    cls: type
    folder: str
    scalars: dict
    arrays: dict

    def load(self):
        """The instance, its arrays memory-mapped read-only (pages come from the page cache; no copy)."""
        return self.cls(**self.scalars, **{k: _mapped(os.path.join(self.folder, k), *spec)
                                           for k, spec in self.arrays.items()})


def _mapped(path: str, dtype: str, shape: tuple) -> np.ndarray:
    if 0 in shape:  # an empty file cannot be memory-mapped
        return np.empty(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=shape)


def spill(obj, root: str) -> Spilled:
    """Write the array fields of the dataclass instance ``obj`` to a new folder under ``root``."""
    folder = os.path.join(root, uuid.uuid4().hex)
    os.makedirs(folder)
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    arrays = {k: v for k, v in values.items() if isinstance(v, np.ndarray)}
    for k, v in arrays.items():
        np.ascontiguousarray(v).tofile(os.path.join(folder, k))
    return Spilled(type(obj), folder, {k: v for k, v in values.items() if k not in arrays},
                   {k: (v.dtype.str, v.shape) for k, v in arrays.items()})


@contextlib.contextmanager
def spill_folder(setting: str, client=None, disk: str | None = None):
    """The spill folder for a local run, removed on exit; None (keep parts in memory) on a cluster.

    ``setting``: ``"memory"`` → None; ``"disk"`` → a temporary folder inside ``disk`` (the
    system's temporary directory if None — which may be a RAM-backed tmpfs, hence the
    job's default of its cache folder); any other value → a temporary folder inside it.
    """
    if client is not None or setting == "memory":
        yield None
        return
    root = disk if setting == "disk" else setting
    if root is not None:
        os.makedirs(root, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dr-scale-spill-", dir=root) as folder:
        yield folder


def load_part(part):
    """A persisted part itself: read back if it was spilled."""
    return part.load() if isinstance(part, Spilled) else part


def _made(make, spill_root, *args):
    obj = make(*args)
    return obj if spill_root is None else spill(obj, spill_root)


class PartSet:
    """Persisted per-part objects and the passes over them.

    Functions mapped over the parts (``fn(part, *args)``) must return new objects: the
    summing passes add the results of a task's parts into the first one in place.
    """

    def __init__(self, parts: list, client=None, spill: str | None = None):
        self.parts, self.client, self.spill = parts, client, spill

    @classmethod
    def build(cls, make, args_per_part: list[tuple], client=None, progress: bool = False,
              spill: str | None = None) -> "PartSet":
        """Persist ``make(*args)`` for each part's arguments (spilled to files under ``spill`` if given)."""
        if spill is not None and client is not None:
            raise ValueError("spill folders serve the local scheduler; a cluster's workers spill by themselves")
        return cls(persist(*[dask.delayed(_made)(make, spill, *a) for a in args_per_part],
                           client=client, progress=progress), client, spill)

    def sum(self, fn, *args, progress: bool = False):
        """Σ over parts of ``fn(part, *args)``.

        Each task sums a batch of parts one after the other, in place, and the batch sums
        are tree-reduced pairwise, so only a few per-part results (up to (600, 5000)
        float64 blocks here) are alive at once, whatever the part count (batches:
        :meth:`_batches`).
        """
        (total,) = compute(tree_sum(self._groups(_sum_group, fn, args), split_every=2), client=self.client,
                           progress=progress)
        return total

    def accumulate(self, fn, *args, progress: bool = False):
        """Σ over parts, added in place: ``fn(total, part, *args)`` adds the part's term into
        ``total`` and returns it (``total`` is None for a task's first part: fn makes it).

        For terms that are large arrays, this saves each part a fresh result array and
        its addition into the task's sum (see :func:`dr_scale.outofcore.products.add_transposed_product`).
        """
        (total,) = compute(tree_sum(self._groups(_accumulate_group, fn, args), split_every=2), client=self.client,
                           progress=progress)
        return total

    def sum_and_derive(self, fn, *args, progress: bool = False) -> tuple[object, "PartSet"]:
        """For ``fn(total, part, *args) = (total with the part's term added, derived)``: the sum over
        parts, and a new PartSet of the derived objects.

        One pass: the terms are added up in place as in :meth:`accumulate` while the
        derived objects are persisted (or spilled) — what a step needs when its per-part
        sums are large and what it leaves behind must be kept for later passes.
        """
        batches = self._batches()
        groups = self._groups(_sum_derive_group, fn, args, self.spill)
        derived = [None] * len(self.parts)  # back in the parts' order
        for group, batch in zip(groups, batches):
            for j, index in enumerate(batch):
                derived[index] = group[1][j]
        total = tree_sum([g[0] for g in groups], split_every=2)
        *derived, total = persist(*derived, total, client=self.client, progress=progress)
        (total,) = compute(total, client=self.client)
        return total, PartSet(derived, self.client, self.spill)

    def _batches(self) -> list[range]:
        """The parts' positions in interleaved batches of about ``PARTS_PER_TASK`` (at least two batches
        from two parts up, at most ``MAX_TASKS``): one summing task each per pass.

        A task's fixed costs — a fresh (F, d) sum to zero and one more addition in the tree —
        are then spread over ~20 parts: at the paper's size, a ridge pass over 2 batches
        takes ~0.08 s less than over 8 (docs/visits.md). Part i goes to batch i mod n, so
        a set's smaller last part does not leave one batch short of the others (at the
        paper's size 19.5 and 19 parts' work, not 20 and 18.5). The cap bounds the task sums
        alive at once (Dask may finish every batch before the tree adds them), so memory
        does not grow with the number of parts. The batches depend on the parts alone,
        never on the number of workers or threads, so the order of the additions, and with
        it every bit of the sums, is the same on a laptop and on any cluster.
        """
        n_tasks = min(MAX_TASKS, max(min(2, len(self.parts)), -(-len(self.parts) // PARTS_PER_TASK)))
        return [range(i, len(self.parts), n_tasks) for i in range(n_tasks)]

    def _groups(self, group_fn, fn, args, *lead) -> list:
        shared = _share(args)
        return [dask.delayed(group_fn)(fn, shared, *lead, *(self.parts[i] for i in batch))
                for batch in self._batches()]


def _share(args) -> list:
    """Large arrays become one graph key each (not hashed: a fresh key per pass), small ones stay literal."""
    return [dask.delayed(a) if _is_large(a) else a for a in args]


def _accumulate_group(fn, args, *parts):
    total = None
    for part in parts:
        total = fn(total, load_part(part), *args)
    return total


def _add_term(total, part, fn, *args):
    term = fn(part, *args)
    return term if total is None else _add_into(total, term)


def _sum_group(fn, args, *parts):
    return _accumulate_group(_add_term, (fn, *args), *parts)


def _sum_derive_group(fn, args, spill_root, *parts):
    total, derived = None, []
    for part in parts:
        total, made = fn(total, load_part(part), *args)
        derived.append(made if spill_root is None else spill(made, spill_root))
    return total, derived


def _is_large(a) -> bool:
    return getattr(a, "nbytes", 0) > 100_000
