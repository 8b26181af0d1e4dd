"""Map-reduce passes over the parts of a data set, kept between passes.

The iterative steps (Lanczos for the principal component, conjugate gradients for
ridge) each need one pass over all rows per iteration. A :class:`PartSet` holds the
parts as persisted Dask objects, so a pass costs the arithmetic, not a Parquet decode;
a pass maps a function over the parts and sums the results with ``+`` down a fixed binary tree
(:func:`tree_nodes`), in place; the states of other collections merge by
:func:`dr_scale.outofcore.mergeable.tree_reduce`.

Where the parts are kept:

* with the local threaded scheduler or a ``LocalCluster`` on this machine (``--local-workers``),
  in memory (the process's, the workers'), or — given a ``spill`` folder — as files there
  (:func:`spill`): a persisted part is then a small :class:`Spilled` handle and every pass
  maps the arrays back read-only (from the page cache), so the resident memory does not grow
  with the number of rows, and a part moves between worker processes as a file name;
* on a cluster of other machines, in the workers' memory — Dask's own memory manager spills
  them to the workers' local disk beyond their memory limit, measuring them with
  :class:`Held`'s ``__sizeof__``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
import os
import tempfile
import uuid
from collections.abc import Callable

import dask
import numpy as np
from dask.system import CPU_COUNT

from dr_scale.core.errors import ParameterError
from dr_scale.io.cache import spill_workspace
from dr_scale.outofcore.compute import check_client, cluster_workers, compute, persist


def _add_into(total, value):
    """``total + value``, in place where ``total`` allows it (numpy arrays, objects with ``+=``)."""
    if isinstance(total, tuple):
        return tuple(_add_into(x, y) for x, y in zip(total, value))
    return operator.iadd(total, value)


# -- spilling to local files ----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Spilled:
    """A dataclass instance whose array fields wait in ``<folder>/<field>`` as raw bytes.

    ``arrays`` maps each array field to its (dtype, shape), so loading maps the files
    without reading or parsing a header (as ``np.load(mmap_mode="r")`` of ``.npy`` files would, on
    every pass).
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
    os.mkdir(folder)  # not makedirs: a task still running after an interrupt must not re-create a removed ``root``
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    arrays = {k: v for k, v in values.items() if isinstance(v, np.ndarray)}
    for k, v in arrays.items():
        np.ascontiguousarray(v).tofile(os.path.join(folder, k))
    return Spilled(type(obj), folder, {k: v for k, v in values.items() if k not in arrays},
                   {k: (v.dtype.str, v.shape) for k, v in arrays.items()})


@contextlib.contextmanager
def spill_folder(setting: str, client=None, disk: str | None = None):
    """The spill folder of a run on this machine (:func:`on_this_machine`), removed on exit; None (keep parts in
    memory) on a cluster of other machines.

    ``setting``: ``"memory"`` → None; ``"disk"`` → a temporary folder inside ``disk`` (the
    system's temporary directory if None — which may be a RAM-backed tmpfs, hence the
    job's default of its cache folder); any other value → a temporary folder inside it.
    The folder is locked by this run and removed on every exit it survives; folders of runs
    that were killed are removed by the next one (:func:`dr_scale.io.cache.spill_workspace`).
    """
    if setting == "memory" or not on_this_machine(client):
        yield None
        return
    root = disk if setting == "disk" else setting
    with spill_workspace(root if root is not None else tempfile.gettempdir()) as folder:
        yield folder


def on_this_machine(client) -> bool:
    """Whether the tasks of ``client`` run on this machine, with its files: the local threaded scheduler (None)
    or the client's own ``LocalCluster`` (``--local-workers``)."""
    if client is None:
        return True
    from distributed import LocalCluster

    return isinstance(getattr(client, "cluster", None), LocalCluster)


class Held:
    """A dataclass that passes keep between passes, measured by Dask as the bytes of its fields.

    Dask's memory manager decides what a worker spills by ``dask.sizeof``, which for an object of an
    unregistered class is ``sys.getsizeof``: ~50 bytes for a part of hundreds of MB, which would never
    be spilled and would push the worker past its memory limit instead.
    """

    def __sizeof__(self) -> int:
        from dask.sizeof import sizeof

        fields = dataclasses.fields(self)  # type: ignore[arg-type]  # the subclasses are dataclasses
        return object.__sizeof__(self) + sum(sizeof(getattr(self, f.name)) for f in fields)


def load_part(part):
    """A persisted part itself: read back if it was spilled."""
    return part.load() if isinstance(part, Spilled) else part


def given(obj):
    """The object itself: :meth:`PartSet.build`'s ``make`` for parts already made in this process."""
    return obj


def _made(make, spill_root, *args):
    obj = make(*args)
    return obj if spill_root is None else spill(obj, spill_root)


class PartSet:
    """Persisted per-part objects and the passes over them.

    Functions mapped over the parts (``fn(part, *args)``) must return new objects: the
    summing passes add the results into one of them in place, within a task and up the tree of tasks.
    """

    def __init__(self, parts: list, client=None, spill: str | None = None):
        self.parts, self.client, self.spill = parts, client, spill
        #: Where the passes' pending sums wait (:class:`Pending`): files of the spill folder named for this set.
        self.pending = None if spill is None else os.path.join(spill, f"pending-{uuid.uuid4().hex}")

    @classmethod
    def build(cls, make, args_per_part: list[tuple], client=None, progress: bool = False,
              spill: str | None = None) -> PartSet:
        """Persist ``make(*args)`` for each part's arguments (spilled to files under ``spill`` if given)."""
        check_client(client)
        if spill is not None and not on_this_machine(client):
            raise ParameterError("`spill` folders serve this machine's processes; a cluster's workers spill by "
                                 "themselves")
        slots = worker_slots(client)
        made = []
        for j, (lo, hi) in enumerate(tree_nodes(len(args_per_part), len(slots) if slots else 1)):
            with placed(slots, j):  # a summing task's parts on one worker, the tasks on different ones
                made += [dask.delayed(_made)(make, spill, *a) for a in args_per_part[lo:hi]]
        return cls(persist(*made, client=client, progress=progress), client, spill)

    def sum(self, fn, *args, progress: bool = False):
        """Σ over parts of ``fn(part, *args)``, in the parts' summation tree (:func:`tree_nodes`)."""
        (total,) = compute(self._tree(_sum_node, fn, args, self.pending), client=self.client, progress=progress)
        return total

    def accumulate(self, fn: Callable[..., np.ndarray], *args: object, progress: bool = False) -> np.ndarray:
        """Σ over parts of ``fn(None, part, *args)``, in the parts' summation tree: for functions
        ``fn(total, part, *args)`` that add the part's term into ``total`` in place (None: make it), so the
        same function serves a loop over in-memory parts."""
        (total,) = compute(self._tree(_accumulate_node, fn, args, self.pending), client=self.client, progress=progress)
        return total

    def sum_and_derive(self, fn, *args, progress: bool = False, keep: bool = False) -> tuple:
        """For ``fn(None, part, *args) = (the part's term, derived)``: the sum over parts (as in
        :meth:`accumulate`), and a new PartSet of the derived objects, in one pass — what a step needs
        when what it leaves behind must be kept for later passes. ``keep=True``: the sum stays where it was
        computed (a worker's memory), returned as a persisted Dask object, for later tasks that use it there
        rather than receive it from the client.
        """
        nodes = tree_nodes(len(self.parts), task_count(self.client))
        tasks = self._node_tasks(nodes, _derive_node, fn, args, self.spill, self.pending)
        derived = [task[1][j] for task, (lo, hi) in zip(tasks.values(), nodes) for j in range(hi - lo)]
        total = _combine(0, len(self.parts), {node: task[0] for node, task in tasks.items()})
        *derived, total = persist(*derived, total, client=self.client, progress=progress)
        if not keep:
            (total,) = compute(total, client=self.client)
        return total, PartSet(derived, self.client, self.spill)

    def _tree(self, node_fn, fn, args, *lead):
        """The sum over parts as a graph: one task per node of :func:`tree_nodes`, added up the tree above them."""
        tasks = self._node_tasks(tree_nodes(len(self.parts), task_count(self.client)), node_fn, fn, args, *lead)
        return _combine(0, len(self.parts), tasks)

    def _node_tasks(self, nodes, node_fn, fn, args, *lead) -> dict:
        shared = _share(args, len(nodes), worker_slots(self.client))
        return {(lo, hi): dask.delayed(node_fn)(fn, shared[j], *lead, lo, hi, *self.parts[lo:hi])
                for j, (lo, hi) in enumerate(nodes)}


def task_count(client=None) -> int:
    """The threads that run tasks: the cluster's worker threads, or the local scheduler's."""
    if client is None:
        return dask.config.get("num_workers", None) or CPU_COUNT
    return max(1, len(worker_slots(client)))


def worker_slots(client=None) -> list[str]:
    """The cluster's worker threads as their workers' addresses, one round of the workers per thread
    (empty for the local scheduler)."""
    if client is None:
        return []
    workers = sorted(cluster_workers(client).items())
    rounds = max((w.get("nthreads", 1) for _, w in workers), default=0)
    return [address for r in range(rounds) for address, w in workers if w.get("nthreads", 1) > r]


@contextlib.contextmanager
def placed(slots: list[str], j: int):
    """Tasks made in the block prefer the worker of slot j (any other may run them, e.g. after a failure)."""
    if not slots:
        yield
        return
    with dask.annotate(workers=[slots[j % len(slots)]], allow_other_workers=True):
        yield


def tree_nodes(n_parts: int, n_tasks: int) -> list[tuple[int, int]]:
    """The nodes [lo, hi) of the parts' summation tree that become a pass's tasks, in order.

    The tree depends on the number of parts alone: node [lo, hi) is the sum of [lo, mid) and
    [mid, hi), mid = ⌊(lo + hi)/2⌋, down to single parts, so every sum is added up in the same
    order — and has the same bits — whatever the number of tasks. From the root, the widest node
    (the first of equals) is split until there are ``min(n_tasks, n_parts)`` nodes: each is a
    task that sums its run of parts down its subtree; the tree above them is a few ``+`` tasks
    on the workers, next to the data.
    """
    nodes = [(0, n_parts)]
    while len(nodes) < min(n_tasks, n_parts):
        i = max(range(len(nodes)), key=lambda j: nodes[j][1] - nodes[j][0])
        lo, hi = nodes[i]
        nodes[i:i + 1] = [(lo, (lo + hi) // 2), ((lo + hi) // 2, hi)]
    return nodes


def _combine(lo: int, hi: int, tasks: dict):
    """The graph of node [lo, hi)'s sum: its task if it has one, else the sum of its halves' graphs."""
    if (lo, hi) in tasks:
        return tasks[lo, hi]
    mid = (lo + hi) // 2
    return dask.delayed(_add_into)(_combine(lo, mid, tasks), _combine(mid, hi, tasks))


#: A pending sum of at least this many bytes waits for its sibling in a file of the spill folder (:class:`Pending`).
PARK_BYTES = 16 * 2 ** 20


@dataclasses.dataclass
class Parked:
    """A pending array in the file ``path`` (raw bytes of ``dtype`` and ``shape``)."""

    path: str
    dtype: np.dtype
    shape: tuple


class Pending:
    """Where a task's pending sums wait for their siblings in :func:`_node_sum`.

    Adding up a subtree of L parts in the fixed tree order keeps the left half's sum while the right half is added
    up: ⌈log₂ L⌉ sums at once, each an (F, D) array of a fit's gradient (a hundred MB at 60 fits of 250,000
    features) — the pass's memory would grow with the rows. Given the spill folder of a run on this machine, a task
    writes those of :data:`PARK_BYTES` or more to a file until their sibling is done, which it then adds in place,
    in chunks: ``right += left`` has the bits of ``left += right`` (IEEE addition is commutative), so the sums, and
    the bits, are the tree's whatever waits where, and a task holds one such array at a time. The waiting sums are
    a stack (the last one written is the first added), so the file of the i-th is ``<prefix>-<i>``: the same files
    serve every pass of the part set, overwritten in place — pages already in the page cache, ~0.1 s per 100 MB
    written and added back here against ~0.4 s for new files — and go with the spill folder.

    ``prefix``: the files' path and name up to the index (the part set's and the task's; None: nothing is
    written). ``free``: the list of zeroed-for-reuse arrays of :func:`_accumulate_node` (None: none): a parked
    array's memory serves the next part's term.
    """

    def __init__(self, prefix: str | None, free: list | None = None):
        self.prefix, self.free, self.parked = prefix, free, 0

    def put(self, value):
        """``value``, or a :class:`Parked` handle of it written to a file of the spill folder."""
        if (self.prefix is None or not isinstance(value, np.ndarray) or value.nbytes < PARK_BYTES
                or not value.flags.c_contiguous):
            return value
        path = f"{self.prefix}-{self.parked}"
        self.parked += 1
        with open(path, "r+b" if os.path.exists(path) else "wb") as f:  # r+: overwritten, not truncated
            value.tofile(f)
        if self.free is not None and not self.free:
            self.free.append(value)
        return Parked(path, value.dtype, value.shape)

    def add(self, left, right):
        """``left + right`` (``left`` as :meth:`put` returned it), in place in one of them."""
        if not isinstance(left, Parked):
            total = _add_into(left, right)
            if self.free is not None and isinstance(right, np.ndarray) and not self.free:
                self.free.append(right)
            return total
        if not (isinstance(right, np.ndarray) and right.flags.c_contiguous and right.shape == left.shape):
            right = np.array(right, dtype=left.dtype)  # a writable copy the file is added into
        flat, step = right.reshape(-1), PARK_BYTES // left.dtype.itemsize
        with open(left.path, "rb") as f:
            for lo in range(0, flat.size, step):
                chunk = np.fromfile(f, left.dtype, count=min(step, flat.size - lo))
                flat[lo:lo + chunk.size] += chunk
        self.parked -= 1
        return right


def _node_sum(term, lo: int, hi: int, parts: tuple, first: int, pending: Pending):
    """Σ of ``term(part)`` over parts [lo, hi) (``parts`` starts at part ``first``), down the fixed tree, the left
    halves' sums waiting in ``pending``."""
    if hi - lo == 1:
        return term(load_part(parts[lo - first]))
    mid = (lo + hi) // 2
    left = pending.put(_node_sum(term, lo, mid, parts, first, pending))
    return pending.add(left, _node_sum(term, mid, hi, parts, first, pending))


def _prefix(pending: str | None, lo: int) -> str | None:
    """The task's files for its pending sums: the part set's ``pending`` prefix and the task's first part."""
    return None if pending is None else f"{pending}-{lo}"


def _sum_node(fn, args, pending, lo, hi, *parts):
    return _node_sum(lambda part: fn(part, *args), lo, hi, parts, lo, Pending(_prefix(pending, lo)))


def _accumulate_node(fn: Callable, args: tuple, pending: str | None, lo: int, hi: int,
                     *parts: object) -> np.ndarray:
    """As :func:`_sum_node` for ``fn(total, part, *args)``; a leaf adds into the zeroed array of a subtree already
    added up instead of a new one, so a task allocates one array per sum it holds at once, not one per part (the
    same sums: 0 + term either way)."""
    free: list = []

    def term(part):
        """``fn(total, part, *args)``, into a reused zeroed total where one is free."""
        total = free.pop() if free else None
        if total is not None:
            total.fill(0.0)
        return fn(total, part, *args)

    return _node_sum(term, lo, hi, parts, lo, Pending(_prefix(pending, lo), free))


def _derive_node(fn, args, spill_root, pending, lo, hi, *parts):
    derived = []

    def term(part):
        """``fn``'s term of the part; what it derives is kept (spilled if asked)."""
        total, made = fn(None, part, *args)
        derived.append(made if spill_root is None else spill(made, spill_root))
        return total

    return _node_sum(term, lo, hi, parts, lo, Pending(_prefix(pending, lo))), derived


def _share(args, n_tasks: int, slots: list[str]) -> list[list]:
    """Each task's arguments: small ones stay literal; a large array becomes one graph key (not hashed: a
    fresh key per pass) and, on a cluster, a copy on each task's worker (:func:`placed`, as the task's parts
    are) made down a binary tree — task j's copy is received from task ⌊(j − 1)/2⌋'s — so the array leaves
    the client once and reaches W workers in ⌈log₂(W + 1)⌉ rounds of transfers, not W sends from one worker
    (``fit``'s conjugate-gradient directions, (k·d) floats, on every pass)."""
    columns = []
    for a in args:
        if not _is_large(a):
            columns.append([a] * n_tasks)
            continue
        if not slots:
            columns.append([dask.delayed(a)] * n_tasks)
            continue
        copies: list = []  # task 0's copy too: the array's own key goes where it is first needed
        for j in range(n_tasks):
            with placed(slots, j):
                copies.append(dask.delayed(_received)(copies[(j - 1) // 2] if j else dask.delayed(a)))
        columns.append(copies)
    return [list(task_args) for task_args in zip(*columns)] if columns else [[] for _ in range(n_tasks)]


def _received(a):
    """``a`` itself: a task whose output is ``a`` on the task's worker (a copy made by the transfer)."""
    return a


def _is_large(a) -> bool:
    return getattr(a, "nbytes", 0) > 100_000
