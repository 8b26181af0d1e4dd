"""A log's action catalogue: each action's sparse features f_a and, optionally, its category e(a), stored as
:data:`CATALOGUE_FILE` at the log's root."""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from dr_scale.io.atomic import url_to_fs
from dr_scale.logs.contract import LogDataError, combined
from dr_scale.logs.filters import log_root
from dr_scale.logs.listing import ListedLog
from dr_scale.logs.sparse import features_to_csr

#: The optional action catalogue stored at a log's root: per action, its features and embedding.
CATALOGUE_FILE = "_actions.parquet"


@dataclass(frozen=True)
class Catalogue:
    """A log's action catalogue: each action's sparse features and, optionally, its categorical embedding.

    Read from :data:`CATALOGUE_FILE` at the log's root (``dr-scale import`` with an ``[actions]`` table and
    ``dr-scale generate bandit --action-features`` write it) by :func:`read_catalogue`. Columns: ``action``
    (int, 0 … k−1, each once), ``features`` (list<int32>), ``values`` (list<float32>), optionally ``key``
    (the action's value) and ``embedding`` (int e(a) ∈ [0, L): the category the marginalized estimators
    (MIPS) use, p(e|x, a) = 1{e = e(a)}).

    Parameters
    ----------
    features : scipy.sparse.csr_matrix, shape (k, D_A)
        Row a: action a's features.
    embedding : numpy.ndarray of int, shape (k,), or None
        e(a), or None when the catalogue has no ``embedding`` column.
    source : str
        The file, for messages.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> cat = Catalogue(sp.csr_matrix(np.array([[1.0, 0.5], [0.0, 2.0], [1.0, 0.0]])), np.array([0, 1, 1]))
    >>> cat.n_actions, cat.n_categories, cat.table().column_names
    (3, 2, ['action', 'features', 'values', 'embedding'])
    """

    features: sp.csr_matrix
    embedding: np.ndarray | None = None
    source: str = "<catalogue>"

    @property
    def n_actions(self) -> int:
        """k: the catalogue's actions, one row of features each."""
        return int(self.features.shape[0])

    @property
    def n_categories(self) -> int:
        """L = max e(a) + 1 (0 without an embedding)."""
        return 0 if self.embedding is None else int(self.embedding.max(initial=-1)) + 1

    def digest(self) -> str:
        """sha256 of the catalogue's features (CSR arrays) and embedding: what an evaluation using it depends on
        (a report's state cache keys its states by it, so an edited catalogue is recomputed)."""
        X = self.features.tocsr()
        h = hashlib.sha256()
        arrays = (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64),
                  np.asarray(X.shape, dtype=np.int64),
                  np.zeros(0, np.int64) if self.embedding is None else self.embedding.astype(np.int64))
        for a in arrays:
            h.update(str(a.shape).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        h.update(b"embedding" if self.embedding is not None else b"none")
        return h.hexdigest()

    def table(self) -> pa.Table:
        """The catalogue as the Parquet table :func:`read_catalogue` reads."""
        X = self.features
        columns = {"action": pa.array(np.arange(self.n_actions, dtype=np.int32)),
                   "features": pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)),
                                                        pa.array(X.indices.astype(np.int32))),
                   "values": pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)),
                                                      pa.array(X.data.astype(np.float32)))}
        if self.embedding is not None:
            columns["embedding"] = pa.array(self.embedding.astype(np.int32))
        return pa.table(columns)


def catalogue_of(table: pa.Table, source: str) -> Catalogue:
    """A :class:`Catalogue` from its table; a missing or duplicate action, a bad embedding: a LogDataError."""
    for name in ("action", "features"):
        if name not in table.column_names:
            raise LogDataError(source, name, "missing column")
    action = np.asarray(combined(table.column("action")).to_numpy(zero_copy_only=False), dtype=np.int64)
    k = action.size
    if k == 0:
        raise LogDataError(source, "action", "the catalogue has no actions")
    if action.min() < 0 or np.bincount(action).max() > 1 or action.max() != k - 1:
        raise LogDataError(source, "action", f"the actions must be 0 … k−1, each once ({k} rows)")
    order = np.argsort(action, kind="stable")
    table = table.take(pa.array(order))
    values = combined(table.column("values")) if "values" in table.column_names else None
    X = features_to_csr(table.column("features"), int(_max_feature(table)) + 1, values)
    embedding = None
    if "embedding" in table.column_names:
        embedding = np.asarray(combined(table.column("embedding")).to_numpy(zero_copy_only=False))
        if embedding.dtype.kind not in "iu" or embedding.min() < 0:
            raise LogDataError(source, "embedding", "the embedding must be a non-negative integer per action")
        embedding = embedding.astype(np.int64)
    return Catalogue(X, embedding, source)


def _max_feature(table: pa.Table) -> int:
    flat = pc.list_flatten(combined(table.column("features")))
    return int(pc.max(flat).as_py()) if len(flat) else -1


def read_catalogue(url: str | ListedLog, storage_options: dict[str, Any] | None = None) -> Catalogue | None:
    """The action catalogue of the log at ``url`` (:data:`CATALOGUE_FILE` at its root), or None without one.

    Parameters
    ----------
    url : str or OpenedLog
        The log (any fsspec URL), a part file of it or its root folder; an opened log's catalogue is read once.
    storage_options : dict, optional
        fsspec's options for ``url``.

    Returns
    -------
    Catalogue or None

    Examples
    --------
    >>> import os, tempfile, numpy as np, scipy.sparse as sp
    >>> from dr_scale.logs.writing import write_parquet
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     cat = Catalogue(sp.csr_matrix(np.eye(3)), np.array([0, 1, 1]))
    ...     _ = write_parquet(cat.table(), os.path.join(folder, CATALOGUE_FILE))
    ...     again = read_catalogue(folder)
    >>> again.n_actions, again.n_categories, again.embedding.tolist()
    (3, 2, [0, 1, 1])
    """
    if isinstance(url, ListedLog):
        return url.catalogue
    fs, path = url_to_fs(url, storage_options)
    root = log_root(path)
    if fs.isfile(root):
        root = posixpath.dirname(root)
    cat_path = posixpath.join(root, CATALOGUE_FILE)
    if not fs.exists(cat_path):
        return None
    try:
        with fs.open(cat_path, "rb") as f:
            table = pq.read_table(f)
    except Exception as exc:  # noqa: BLE001 - a corrupt file, named
        raise LogDataError(cat_path, None, f"unreadable Parquet ({exc})") from None
    return catalogue_of(table, cat_path)
