"""DataFrames of raw columns into the log contract, by an import spec: a pandas one as an in-memory log, a Dask
one as a Dask DataFrame converted partition by partition (:func:`~dr_scale.logs.importing.convert.convert_table`,
as :func:`~dr_scale.logs.importing.driver.import_log` converts a raw file's blocks).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dr_scale.core.errors import ParameterError
from dr_scale.logs.contract import LogDataError, Partition
from dr_scale.logs.importing.convert import check_scalars, convert_table
from dr_scale.logs.importing.fields import as_text, combined
from dr_scale.logs.reading import partition_from_table
from dr_scale.logs.spec import META_SPEC, Columns, ImportSpec, Vocabulary, read_spec, saved_spec
from dr_scale.logs.writing import frame_to_arrow

if TYPE_CHECKING:
    import dask.dataframe as dd
    import pandas as pd


def _vocabulary_for(spec: ImportSpec, values: Iterable[str], actions: Sequence[object] | None) -> Vocabulary:
    """The vocabulary: ``actions`` as given (each value once), else the values found."""
    if actions is not None:
        if isinstance(actions, (str, bytes)) or not isinstance(actions, Sequence):
            raise ParameterError(f"`actions` must be a list of the action values in id order, got "
                                 f"{type(actions).__name__}")
        names = [str(a) for a in actions]
        if not names:
            raise ParameterError("`actions` is empty: list the action values in id order")
        seen: set[str] = set()
        for a in names:
            if a in seen:
                raise ParameterError(f"`actions` lists {a!r} twice; give each action value once, in id order")
            seen.add(a)
        return Vocabulary(names, spec.unseen_actions == "reserved")
    return Vocabulary.of(values, reserved=spec.unseen_actions == "reserved")


def _no_rows(source: str) -> LogDataError:
    return LogDataError(source, None, "no rows: a log with no rows is an error")


def from_pandas(df: pd.DataFrame, spec: str | dict | ImportSpec, *, actions: Sequence[object] | None = None
                ) -> Partition:
    """A pandas DataFrame of raw columns as an in-memory log, by an import spec.

    The conversion is :func:`~dr_scale.logs.importing.driver.import_log`'s (:func:`convert_table`); row ids are the
    ``row_id`` column or the row positions 0 … n−1. The result is a
    :class:`~dr_scale.logs.contract.Partition` that ``evaluate_partitions([log], …)``
    takes and whose ``table`` ``write_log(log.table, url, partition_by="date", …)`` writes. The table carries
    the spec and the vocabulary in its schema metadata (:data:`~dr_scale.logs.spec.META_SPEC`): ``write_log``
    stores them as the log's spec file, so that ``constant:b`` names an action by value on the written log, and
    ``evaluate_partitions`` resolves such names on the partition. An empty DataFrame, a column of mixed types
    and an action listed twice in ``actions`` are errors.

    Parameters
    ----------
    df : pandas.DataFrame
        The raw table (pandas 2 or 3; any string dtype).
    spec : str, dict or ImportSpec
        The import spec (a TOML file, a mapping or a model).
    actions : list, optional
        The vocabulary, the action values in id order (e.g. a saved spec's); default: the
        values in ``df``, sorted.

    Returns
    -------
    Partition
        The log: X (n × 2^hash_bits CSR), action, reward, propensity, row_id and the table.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"item": ["b", "a", "b"], "click": [1, 0, 1], "p": [0.5, 0.5, 0.5],
    ...                    "color": ["red", "blue", "red"]})
    >>> log = from_pandas(df, {"action": "item", "reward": "click", "propensity": "p",
    ...                        "features": {"categorical": ["color"]}, "hash_bits": 10})
    >>> log.action.tolist(), log.X.shape
    ([1, 0, 1], (3, 1024))
    """
    spec, source = read_spec(spec)
    if type(df).__name__ != "DataFrame" or not hasattr(df, "columns"):
        raise ParameterError(f"`df` must be a pandas DataFrame, got {type(df).__name__}")
    if not len(df):
        raise _no_rows("<DataFrame>")
    table = frame_to_arrow(df, "<DataFrame>")
    cols = Columns(spec, table.column_names, source, "the DataFrame")
    check_scalars(table, [cols.action], [], "<DataFrame>")
    values = [v for v in pc.unique(as_text(combined(table.column(cols.action)))).to_pylist() if v is not None]
    vocabulary = _vocabulary_for(spec, values, actions)
    out = convert_table(table, cols, spec, vocabulary, source="<DataFrame>", line0=0, kind="row")
    if not out.table.num_rows:
        raise _no_rows("<DataFrame>")
    document = json.dumps(saved_spec(spec, cols, vocabulary)).encode()
    return partition_from_table(out.table.replace_schema_metadata({META_SPEC: document}), "<DataFrame>",
                                1 << spec.hash_bits, len(vocabulary))


def from_dask(ddf: dd.DataFrame, spec: str | dict | ImportSpec, *, actions: Sequence[object] | None = None
              ) -> dd.DataFrame:
    """A Dask DataFrame of raw columns as a Dask DataFrame in the log contract, by an import spec.

    One pass finds the action values (unless ``actions`` is given) and the partitions'
    lengths (row ids are the ``row_id`` column or the row positions); the result's
    partitions are converted lazily by :func:`convert_table`. ``features`` and ``values``
    are Arrow list columns (``pandas.ArrowDtype``), which Dask's string conversion leaves
    alone; ``evaluate_dataframe`` takes the result. With a timestamp, a ``date`` column
    (``YYYY-MM-DD``) is added.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The raw table (any string dtype; Dask's ``dataframe.convert-string`` on or off).
    spec : str, dict or ImportSpec
        The import spec (a TOML file, a mapping or a model).
    actions : list, optional
        The vocabulary, the action values in id order; default: the values in ``ddf``, sorted.

    Returns
    -------
    dask.dataframe.DataFrame
        The log's columns (``row_id``, ``features``, ``action``, ``reward``, ``propensity``, ``values``
        and ``date`` with a timestamp), converted partition by partition when computed.

    Examples
    --------
    >>> import pandas as pd, dask.dataframe as dd
    >>> df = pd.DataFrame({"item": ["b", "a", "b", "a"], "click": [1, 0, 1, 1], "p": [0.5] * 4,
    ...                    "color": ["red", "blue", "red", "red"]})
    >>> spec = {"action": "item", "reward": "click", "propensity": "p", "features": {"categorical": ["color"]}}
    >>> log = from_dask(dd.from_pandas(df, npartitions=2), spec)
    >>> log.compute()["action"].tolist()
    [1, 0, 1, 0]
    """
    import dask

    spec, source = read_spec(spec)
    if not hasattr(ddf, "map_partitions"):
        raise ParameterError(f"`ddf` must be a Dask DataFrame, got {type(ddf).__name__}")
    cols = Columns(spec, list(ddf.columns), source, "the Dask DataFrame")

    def survey(pdf: pd.DataFrame) -> tuple[int, set[str]]:
        """(rows, distinct action values as text) of one pandas partition."""
        table = frame_to_arrow(pdf[[cols.action]], "<dataframe partition>")
        check_scalars(table, [cols.action], [], "<dataframe partition>")
        text = as_text(combined(table.column(0)))
        return len(pdf), {v for v in pc.unique(text).to_pylist() if v is not None}

    surveyed = dask.compute(*[dask.delayed(survey)(d) for d in ddf.to_delayed()])
    if not sum(n for n, _ in surveyed):
        raise _no_rows("<Dask DataFrame>")
    vocabulary = _vocabulary_for(spec, set().union(*(s for _, s in surveyed)), actions)
    starts = np.concatenate([[0], np.cumsum([n for n, _ in surveyed])[:-1]]).astype(np.int64)
    d, k = 1 << spec.hash_bits, len(vocabulary)

    def convert(pdf: pd.DataFrame, partition_info: dict | None = None) -> pd.DataFrame:
        """Partition ``partition_info["number"]`` in the log contract, its row ids from its first row's position."""
        i = partition_info["number"] if partition_info else 0
        where = f"<dataframe partition {i}>"
        out = convert_table(frame_to_arrow(pdf, where), cols, spec, vocabulary, source=where, line0=int(starts[i]),
                            kind="row", position0=int(starts[i]), values=True)
        partition_from_table(out.table, where, d, k)
        return _contract_frame(out.table)

    meta = _contract_frame(convert_table(frame_to_arrow(ddf._meta, "<meta>"), cols, spec, vocabulary, source="<meta>",
                                         line0=0, kind="row", values=True).table)
    converted: dd.DataFrame = ddf.map_partitions(convert, meta=meta)
    return converted


def _contract_frame(table: pa.Table) -> pd.DataFrame:
    """A contract table as pandas, its list columns as Arrow dtypes (nothing becomes text)."""
    import pandas as pd

    frame: pd.DataFrame = table.to_pandas(types_mapper=lambda t: pd.ArrowDtype(t) if pa.types.is_list(t) else None)
    if "date" in frame.columns:
        frame["date"] = frame["date"].astype(pd.ArrowDtype(pa.string()))
    return frame
