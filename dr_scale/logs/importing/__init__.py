"""Raw tables in: CSV, JSON lines or Parquet (or a DataFrame) → the log contract, by an import spec.

:func:`import_log` is ``dr-scale import RAW --spec SPEC.toml --out LOGS``. The raw data is one file, a folder
or a glob at any fsspec URL, compressed or not, read out of core as blocks (:mod:`.raw`), one Dask task per
block, never the whole table in memory. Each task parses its block with pyarrow, turns it into the contract's
columns (:mod:`.convert`: the action through the vocabulary, the fields parsed by :mod:`.fields`, the features
hashed as :mod:`dr_scale.logs.spec` says by :mod:`.features`) and writes one Parquet part per day into a
staging folder beside the output (:mod:`.output`).

Two passes (:mod:`.passes`). The first reads only the action column (and counts each block's lines): it
builds the vocabulary — the action values in a stable order, and the keys of the item catalogue
(:mod:`.catalogue`) — and gives each block the line number of its first row. The second converts and writes.
A log already at ``--out`` (imported before, with its ``_dr_scale_spec.json``) lends its vocabulary instead, so
a later day gets the same ids; a value it lacks is an error naming it, or the reserved id ``<other>`` when the
spec says ``unseen_actions = "reserved"``. Bad rows are an error naming the file, the line and the column, or,
with ``skip_bad_rows = true``, skipped and counted by reason in the summary (:mod:`.summary`). Nothing is
written until every block is converted; the staging folder then becomes the output in one rename.

DataFrames take the same conversion (:mod:`.frames`): :func:`from_pandas`, :func:`from_dask`.
"""

from dr_scale.logs.importing.driver import import_log
from dr_scale.logs.importing.frames import from_dask, from_pandas
from dr_scale.logs.importing.summary import ImportSummary

__all__ = ["ImportSummary", "from_dask", "from_pandas", "import_log"]
