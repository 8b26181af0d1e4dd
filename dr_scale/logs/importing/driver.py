"""``dr-scale import``: a raw table into a log, step by step (the steps are the package's modules)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr_scale.io.config import PositiveInt, check
from dr_scale.logs.contract import LogDataError
from dr_scale.logs.importing.catalogue import check_coverage, check_later_catalogue, read_items, write_catalogue
from dr_scale.logs.importing.output import OutputLog
from dr_scale.logs.importing.passes import convert_blocks, survey
from dr_scale.logs.importing.raw import DEFAULT_BLOCKSIZE, RawTable
from dr_scale.logs.importing.summary import ImportSummary
from dr_scale.logs.spec import Columns, ImportSpec, Vocabulary, check_same_meaning, read_spec, saved_spec

if TYPE_CHECKING:
    from distributed import Client


def import_log(raw: str, spec: str | dict | ImportSpec, out: str, *, client: Client | None = None,
               storage_options: dict | None = None,
               blocksize: int = DEFAULT_BLOCKSIZE, progress: bool = False) -> ImportSummary:
    """Import the raw table(s) at ``raw`` into a log at ``out`` by ``spec`` (:mod:`dr_scale.logs.importing`).

    Parameters
    ----------
    raw : str
        A CSV, JSON-lines or Parquet file, folder or glob, at any fsspec URL, compressed or not.
    spec : str, dict or ImportSpec
        The import spec (a TOML file, see :mod:`dr_scale.logs.spec`).
    out : str
        The log's folder: new, or a log imported before with the same spec (new days are added).
    client : distributed.Client, optional
        Where the tasks run (default: Dask's local threaded scheduler).
    storage_options : dict, optional
        fsspec options of the raw data's and the log's filesystems (credentials, an endpoint).
    blocksize : int
        Bytes per block of an uncompressed CSV / JSON-lines file (a task holds about 60 times its block
        at most).
    progress : bool
        Show a progress bar of the two passes.

    Returns
    -------
    ImportSummary
        Rows, days, actions, features used, collisions, propensity range and skipped rows.

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "raw.csv"), "w") as f:
    ...     _ = f.write("item,click,p,color\\nb,1,0.5,red\\na,0,0.5,blue\\n")
    >>> spec = {"action": "item", "reward": "click", "propensity": "p", "features": {"categorical": ["color"]}}
    >>> summary = import_log(os.path.join(folder, "raw.csv"), spec, os.path.join(folder, "logs"))
    >>> summary.rows, summary.n_actions, summary.collisions
    (2, 2, 0)
    """
    check(PositiveInt, "blocksize", blocksize)
    spec, spec_source = read_spec(spec, storage_options)
    table = RawTable.open(raw, spec, storage_options, blocksize)
    cols = Columns(spec, table.names, spec_source, table.files[0])
    output = OutputLog.open(out, storage_options)
    table.check_headers(spec, cols.used)
    lent = check_same_meaning(output.saved, spec, cols, out, spec_source) if output.saved else None
    catalogue = read_items(spec, spec_source, storage_options) if spec.actions else None
    starts, values = survey(table, spec, cols.action, lent is None, client=client, progress=progress)
    if catalogue and lent is not None:
        check_later_catalogue(catalogue, lent, output.fs, output.path, out)
    vocabulary = lent if lent is not None else Vocabulary.of(values | set(catalogue[0] if catalogue else ()),
                                                             reserved=spec.unseen_actions == "reserved")
    file_ids = output.row_id_files(table.files) if cols.row_id is None else {}
    with output.staged() as staging:
        stats = convert_blocks(table, spec, cols, vocabulary, starts, file_ids, output.fs, staging, client=client,
                               progress=progress)
        if stats.rows == 0:
            raise LogDataError(raw, None, "no rows to import" + (" (every row was bad)" if stats.bad else ""))
        coverage = (check_coverage(catalogue, vocabulary, stats.actions, spec.actions.key)
                    if catalogue and spec.actions else None)
        output.check_new_content(stats.contents)
        output.check_new_days(stats.days)
        if cols.row_id is not None:
            output.check_new_row_ids(staging, cols.row_id)
        output.write_spec(staging, saved_spec(spec, cols, vocabulary), file_ids, stats.contents)
        n_catalogue = (write_catalogue(catalogue, spec, vocabulary, spec_source, output.fs, staging) if catalogue
                       else None)
        output.publish(staging)
    return ImportSummary.of(out, stats, spec, len(vocabulary), n_catalogue, coverage)
