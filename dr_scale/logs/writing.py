"""Writing a log: a table validated against the whole contract, then written as Parquet part files, each
atomically (temporary name, then rename), so nothing is written on failure; the (d, k) of the schema
metadata; a pandas DataFrame's list columns back as lists (:func:`table_from_pandas`)."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.io.atomic import atomic_open, atomic_write, url_to_fs
from dr_scale.io.strict_json import dumps
from dr_scale.logs.catalogue import CATALOGUE_FILE, Catalogue
from dr_scale.logs.contract import META_ACTIONS, META_FEATURES, LogDataError, combined, first_null
from dr_scale.logs.listing import SPEC_FILE
from dr_scale.logs.reading import partition_from_table
from dr_scale.logs.spec import META_SPEC, table_spec
from dr_scale.logs.targets import check_target_columns

if TYPE_CHECKING:
    import pandas as pd
    from fsspec import AbstractFileSystem


def with_log_metadata(table: pa.Table, n_features: int | None, n_actions: int | None) -> pa.Table:
    """``table`` with d and k in its schema metadata (``dr_scale.n_features``, ``dr_scale.n_actions``; None leaves
    one out), as every part file of a log carries them."""
    meta = dict(table.schema.metadata or {})
    if n_features is not None:
        meta[META_FEATURES] = str(int(n_features)).encode()
    if n_actions is not None:
        meta[META_ACTIONS] = str(int(n_actions)).encode()
    return table.replace_schema_metadata(meta)


def write_parquet(table: pa.Table, url: str, storage_options: dict[str, Any] | None = None,
                  fs: AbstractFileSystem | None = None) -> str:
    """Write one Parquet file atomically (temporary name, then rename)."""
    if fs is None:
        fs, url = url_to_fs(url, storage_options)
    with atomic_open(fs, url, "wb") as f:
        pq.write_table(table, f, compression="zstd")
    return url


def write_log(
    table: pa.Table,
    url: str,
    *,
    n_parts: int = 1,
    n_features: int | None = None,
    n_actions: int | None = None,
    storage_options: dict | None = None,
    partition_by: str | None = None,
    catalogue: Catalogue | None = None,
) -> list[str]:
    """Validate ``table`` against the whole contract and write it as a logged data set.

    ``partition_by="date"``: one folder ``date=VALUE/`` per value of the table's ``date``
    column (text ``YYYY-MM-DD`` or a date type; the column itself is not written into the
    parts), each holding ``n_parts`` parts (fewer for a day with fewer rows).

    ``url`` ending in ``.parquet`` gives one file; otherwise a folder of ``n_parts``
    part files ``part-00000.parquet`` … of near-equal, non-zero row counts
    (1 ≤ ``n_parts`` ≤ rows). Everything is validated before anything is written: the
    required columns (``features`` included), the optional ``values``, and the target
    policy columns ``target_action`` (integers in [0, k)) and ``target_probs`` (k
    probabilities per row summing to 1) when present. Each part is written atomically;
    docs/data-contract.md says what a crash part-way leaves.

    A table from a DataFrame (``from_pandas(...).table``) carries its spec and action vocabulary: written to a
    folder, they become the log's spec file (``_dr_scale_spec.json``), so that policies name actions by value
    on it; k is the vocabulary's.

    Parameters
    ----------
    table : pyarrow.Table
        The rows: ``row_id``, ``features`` (lists of feature indices), ``action``, ``reward``,
        ``propensity`` and the optional columns of docs/data-contract.md.
    url : str
        Where to write: a ``.parquet`` file or a folder (any fsspec URL).
    n_parts : int
        The number of part files (per day with ``partition_by``), 1 ≤ ``n_parts`` ≤ rows.
    n_features : int or None
        The number of features d, stored in the parts' metadata (None: worked out when read).
    n_actions : int or None
        The number of actions k, stored in the parts' metadata (None: worked out when read).
    storage_options : dict or None
        fsspec's options for ``url``.
    partition_by : str or None
        ``"date"`` for one folder per day, or None.
    catalogue : Catalogue or None
        The action catalogue (each action's features and embedding), written as :data:`CATALOGUE_FILE` at the
        folder's root (:func:`read_catalogue` reads it); its k must be the log's.

    Returns
    -------
    list of str
        The paths written.

    See Also
    --------
    read_log : Reads them back.

    Examples
    --------
    >>> import tempfile, pyarrow as pa
    >>> from dr_scale import read_log
    >>> table = pa.table({"row_id": [0, 1, 2, 3], "features": [[0], [1], [0, 1], []], "action": [0, 1, 1, 0],
    ...                   "reward": [1.0, 0.0, 1.0, 0.0], "propensity": [0.5, 0.5, 0.5, 0.5]})
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     paths = write_log(table, folder + "/log", n_parts=2, n_actions=2)
    ...     parts = read_log(folder + "/log")
    >>> [p.rsplit("/", 1)[1] for p in paths]
    ['part-00000.parquet', 'part-00001.parquet']
    >>> [len(p) for p in parts], parts[0].X.shape, parts[1].action.tolist()
    ([2, 2], (2, 2), [1, 0])
    """
    if not isinstance(table, pa.Table):
        hint = (" (convert a pandas DataFrame with pyarrow.Table.from_pandas(df, preserve_index=False))"
                if type(table).__name__ == "DataFrame" else "")
        raise ParameterError(f"`table` must be a pyarrow.Table, got {type(table).__name__}{hint}")
    if table.num_rows == 0:
        raise LogDataError(url, None, "no rows to write")
    if isinstance(n_parts, bool) or not isinstance(n_parts, (int, np.integer)) or not 1 <= n_parts <= table.num_rows:
        raise UserError(f"{url}: n_parts = {n_parts!r}: give an integer from 1 to the number of rows "
                        f"({table.num_rows}), so that no part is empty")
    for name, value in (("n_features", n_features), ("n_actions", n_actions)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
            raise UserError(f"{url}: {name} = {value!r}: give a positive integer (or None)")
    if partition_by is not None:
        if partition_by != "date":
            raise ParameterError(f"`partition_by` must be None or 'date', got {partition_by!r}")
        if "date" not in table.column_names:
            raise LogDataError(url, "date", "missing column (partition_by='date' writes one folder per date)")
        dates = table.column("date")
        if dates.null_count:
            raise LogDataError(url, "date", "null values", int(table.column("row_id")[first_null(dates)].as_py()))
        dates = pc.cast(dates, pa.string())
        table = table.drop_columns(["date"])
    document = table_spec(table)
    if document is not None:  # a table from a DataFrame (from_pandas): its spec and vocabulary
        table = table.replace_schema_metadata({k: v for k, v in (table.schema.metadata or {}).items()
                                               if k != META_SPEC})
        if n_actions is not None and n_actions != document["n_actions"]:
            raise UserError(f"{url}: n_actions = {n_actions}, but the table's vocabulary (from_pandas) has "
                            f"{document['n_actions']} actions; leave n_actions out, or give "
                            f"{document['n_actions']}")
        n_actions = document["n_actions"]
    part = partition_from_table(table, url, n_features, n_actions, with_features=True)
    check_target_columns(part, n_actions)
    table = with_log_metadata(table, n_features, n_actions)
    fs, path = url_to_fs(url, storage_options)
    if catalogue is not None:
        k = n_actions if n_actions is not None else int(part.action.max(initial=0)) + 1
        if not isinstance(catalogue, Catalogue) or catalogue.n_actions < k:
            raise ParameterError(f"`catalogue` must be a Catalogue of the log's {k} actions")
        if path.endswith(".parquet"):
            raise UserError(f"{url}: a catalogue is stored beside the parts; give a folder, not a .parquet file")
        write_parquet(catalogue.table(), posixpath.join(path, CATALOGUE_FILE), fs=fs)
    if document is not None and not path.endswith(".parquet"):
        spec_path = posixpath.join(path, SPEC_FILE)
        atomic_write(fs, spec_path, dumps(document, indent=2))
    if partition_by is not None:
        if path.endswith(".parquet"):
            raise UserError(f"{url}: partition_by='date' writes a folder per date; give a folder, not a .parquet file")
        written = []
        for day in sorted(pc.unique(dates).to_pylist()):
            piece = table.filter(pc.equal(dates, day))
            written += _write_parts(piece, fs, posixpath.join(path, f"date={day}"), min(n_parts, piece.num_rows))
        return written
    if path.endswith(".parquet"):
        if n_parts != 1:
            raise UserError(f"{url}: a .parquet file holds one part; give a folder for n_parts = {n_parts}")
        return [write_parquet(table, path, fs=fs)]
    return _write_parts(table, fs, path, n_parts)


def _write_parts(table: pa.Table, fs: AbstractFileSystem, path: str, n_parts: int) -> list[str]:
    bounds = np.linspace(0, table.num_rows, n_parts + 1).astype(int)
    written = []
    for i in range(n_parts):
        piece = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        written.append(write_parquet(piece, posixpath.join(path, f"part-{i:05d}.parquet"), fs=fs))
    return written


def frame_to_arrow(df: pd.DataFrame, source: str) -> pa.Table:
    """A pandas DataFrame as an Arrow table (its index dropped); a column whose values are of mixed types (7 and
    ``'a'``) is an error naming it, two of its types and the fix."""
    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        for name in df.columns:
            try:
                pa.array(df[name], from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                values = df[name].dropna()
                kinds: dict[str, object] = {}
                for v in values:
                    kinds.setdefault(type(v).__name__, v)
                shown = " and ".join(f"{v!r} ({t})" for t, v in list(kinds.items())[:2])
                raise LogDataError(source, str(name), f"mixed types in one column: {shown}; give the column one "
                                                      f"type, e.g. df[{str(name)!r}].astype(str)") from None
        raise LogDataError(source, None, f"not convertible to Arrow ({' '.join(str(exc).split())})") from None


#: The contract's list columns and their value types, for :func:`table_from_pandas`.
LIST_COLUMNS = {"features": pa.int32(), "values": pa.float32(), "target_probs": pa.float64()}


def table_from_pandas(frame: pd.DataFrame, source: str = "<DataFrame>") -> pa.Table:
    """A pandas DataFrame (e.g. a Dask partition) as an Arrow table, its list columns as lists.

    Dask's ``dataframe.convert-string`` (on by default) turns an object column of Python
    lists into text (``"[3, 17]"``) when the DataFrame is made; the contract's list columns
    (``features``, ``values``, ``target_probs``) that arrive as text are parsed back as
    JSON arrays. Text that is not one — numpy's ``"[3 17]"``, or a long array shortened
    with ``...`` — is an error saying how to keep the lists (Arrow list dtypes, which Dask
    leaves alone, or ``dr_scale.from_dask``).
    """
    table = frame_to_arrow(frame, source)
    for name, value_type in LIST_COLUMNS.items():
        if name not in table.column_names:
            continue
        column = table.column(name)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        table = table.set_column(table.column_names.index(name), name,
                                 _lists_from_text(combined(column), value_type, source, name))
    return table


def _lists_from_text(text: pa.Array, value_type: pa.DataType, source: str, column: str) -> pa.Array:
    import io

    import pyarrow.json as pj

    if not len(text):
        return pa.array([], pa.list_(value_type))
    if text.null_count:
        raise LogDataError(source, column, "null values")
    body = "\n".join(f'{{"v":{t}}}' for t in text.to_pylist()).encode()
    try:
        parsed = pj.read_json(io.BytesIO(body), parse_options=pj.ParseOptions(
            explicit_schema=pa.schema([("v", pa.list_(value_type))]))).column("v")
    except pa.ArrowInvalid:
        import json

        def not_a_list(t: str) -> bool:
            """Whether the text ``t`` is not a JSON list."""
            try:
                return not isinstance(json.loads(t), list)
            except ValueError:
                return True

        example = next(t for t in text.to_pylist() if not_a_list(t))
        raise LogDataError(source, column, f"wrong type {text.type}: a list column became text (e.g. "
                                           f"{example[:40]!r}), as Dask's dataframe.convert-string does to "
                                           "object columns, and the text is not a list of numbers; keep the lists "
                                           "as pandas.ArrowDtype(pyarrow.list_(...)) columns, or build the log with "
                                           "dr_scale.from_dask") from None
    return combined(parsed)
