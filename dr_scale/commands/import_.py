"""``dr-scale import RAW --spec SPEC.toml --out LOGS``: a raw table (CSV, JSON lines, Parquet) into the log contract."""

from __future__ import annotations

from dr_scale.commands.common import (
    POSITIVE_INT,
    add_compute_options,
    add_storage_option,
    storage_options,
    warnings_as_lines,
)
from dr_scale.outofcore.compute import dask_session

DEFAULT_BLOCKSIZE = 16 << 20  # dr_scale.logs.importing.raw.DEFAULT_BLOCKSIZE, without importing pyarrow for --help


def add_parser(sub) -> None:
    """Add ``dr-scale import`` and its options to the sub-command parsers ``sub``."""
    p = sub.add_parser("import", help="import a raw table (CSV, JSON lines, Parquet) as a logged data set",
                       description="Read a raw table — one file, a folder or a glob at any fsspec URL, compressed or "
                                   "not — out of core, map the action's values to ids 0..k-1, hash the features "
                                   "into 2^hash_bits as the spec says, and write the log contract partitioned by "
                                   "day (docs/import.md). LOGS must be new, empty, or a log imported before with "
                                   "the same spec (its vocabulary is used; new days are added).")
    p.add_argument("raw", help="CSV / JSON-lines / Parquet file, folder, glob or fsspec URL")
    p.add_argument("--spec", required=True, metavar="SPEC.toml", help="the import spec (docs/import.md)")
    p.add_argument("--out", required=True, metavar="LOGS", help="the log's folder (any fsspec URL)")
    p.add_argument("--blocksize", type=POSITIVE_INT, default=DEFAULT_BLOCKSIZE, metavar="BYTES",
                   help=f"bytes per task of an uncompressed CSV / JSON-lines file (default {DEFAULT_BLOCKSIZE}); a "
                        "task holds about 60 times its block at most")
    add_compute_options(p)
    add_storage_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Run ``dr-scale import``: the raw table imported as a log (:func:`~dr_scale.logs.importing.import_log`); the
    exit status.
    """
    from dr_scale.io.outputs import check_not_an_input
    from dr_scale.logs.importing import import_log

    opts = storage_options(args.storage_options)
    check_not_an_input(args.out, [args.raw, args.spec], opts)  # the log never replaces its raw table or spec
    with warnings_as_lines("import"), dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        summary = import_log(args.raw, args.spec, args.out, client=client, storage_options=opts,
                             blocksize=args.blocksize, progress=not args.no_progress)
    print(summary.text())
    return 0
