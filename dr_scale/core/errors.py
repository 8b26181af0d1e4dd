"""User and environment errors, and the one line the command prints for any error.

:class:`UserError` is bad input or a bad environment — a file, a column, an option, a
store — with a message that names it and says what to do. Library code raises it on purpose
(or a subclass: :class:`dr_scale.logs.contract.LogDataError`, :class:`dr_scale.io.config.ConfigError`,
:class:`ParameterError` for a bad argument, naming the parameter); the command line
(:func:`dr_scale.cli.main`) prints ``dr-scale COMMAND: error: MESSAGE``, a parameter
written as the command's flag, and exits 2.

Besides :class:`UserError`, :func:`describe` reads as the user's or the environment's
exactly these errors of the standard library, fsspec and the object-store clients, so every
command gets them right without catching them itself:

* ``OSError`` and its subclasses (``FileNotFoundError`` of a path the user gave, a read-only
  folder, a path that is a file, a full disk, ``ConnectionError`` / ``TimeoutError`` of a
  store or scheduler): the path and what to do;
* the object-store clients' missing or refused credentials and unreachable endpoints;
* a ``TypeError`` "unexpected keyword argument" out of a filesystem given the user's
  storage options;
* ``MemoryError`` and ``RecursionError`` (input nested too deeply).

Anything else — a bare ``ValueError``, ``TypeError``, ``KeyError`` … — is a bug of dr-scale:
it prints as an internal error with the hint to rerun with ``--debug`` and report it.

>>> describe(ParameterError("`rows` must be positive, got 0"), {"rows": "--rows"})
'--rows must be positive, got 0'
>>> describe(FileNotFoundError(2, "No such file or directory", "logs/"))
'logs/: no such file or folder'
>>> describe(ValueError("cannot convert float NaN to integer"))
'unexpected ValueError: cannot convert float NaN to integer (an internal error of dr-scale: rerun ... report it)'
"""

from __future__ import annotations

import errno
import os
import re

TYPE_CHECKING = False  # typing itself is not imported at run time: a command's start stays short
if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


class UserError(ValueError):
    """Bad input or environment, raised on purpose; the message names the file / column / row / option and the fix.

    The command line prints it as one line and exits 2 (:func:`describe`); an error that is not a
    ``UserError`` (nor one of the library errors :func:`describe` reads as the environment's) is a bug.
    A ``ValueError`` so that library callers catching ``ValueError`` keep working.

    Parameters
    ----------
    message : str
        What is wrong and what to do.

    Examples
    --------
    >>> err = UserError("logs/part-0.parquet: not a Parquet file; give the log's folder")
    >>> isinstance(err, ValueError), describe(err)
    (True, "logs/part-0.parquet: not a Parquet file; give the log's folder")
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)  # the one argument: it survives pickling (a Dask worker's error)


class ConvergenceWarning(UserWarning):
    """An iterative fit stopped at its most passes (``max_iter``) before its stopping rule (``rtol``) held.

    The model is usable but not solved to the tolerance asked for: raise ``max_iter`` or ``rtol``, or make the
    warning an error (``warnings.simplefilter("error", dr_scale.ConvergenceWarning)``). Every fitter of the
    cross-fitting engine gives it (:mod:`dr_scale.crossfit.engine`).

    Parameters
    ----------
    message : str
        Which fit, how many of its models did not converge, rtol and max_iter.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("ρ̂: 2 fit(s) did not reach rtol 1e-08 in 5 passes", ConvergenceWarning)
    >>> caught[0].category.__name__
    'ConvergenceWarning'
    """

    def __init__(self, message: str):
        super().__init__(message)


class ParameterError(UserError):
    """A bad argument of a library function: the message names the function's parameters
    (``rows``, ``window``), never a command-line flag.

    The message marks each parameter it names in backticks; ``str()`` prints them plain
    and :meth:`naming` as other names, e.g. the flags of the command that passed them, so
    the same error reads right from Python, from a job file (whose keys are the
    parameters) and from the command line.

    Parameters
    ----------
    message : str
        What is wrong, each parameter it names in backticks.

    Examples
    --------
    >>> err = ParameterError("`days` must be between 1 and `rows` (10), got 11")
    >>> str(err), err.parameters
    ('days must be between 1 and rows (10), got 11', ('days', 'rows'))
    >>> err.naming({"days": "--days", "rows": "--rows"})
    '--days must be between 1 and --rows (10), got 11'
    """

    _MARK = re.compile(r"`((?!\d)\w+)`")  # a parameter: a word not starting with a digit (λ too)

    def __str__(self) -> str:
        return self.naming({})

    @property
    def parameters(self) -> tuple[str, ...]:
        """The parameters the message names, in order."""
        return tuple(m.group(1) for m in self._MARK.finditer(self.args[0]))

    def naming(self, names: dict[str, str]) -> str:
        """The message with each marked parameter written ``names[parameter]`` (plain where not in ``names``)."""
        return self._MARK.sub(lambda m: names.get(m.group(1), m.group(1)), self.args[0])


#: Hints for OS errors by errno: what the path is and what to do.
_OS_HINTS = {
    errno.ENOENT: "no such file or folder",
    errno.EACCES: "permission denied: check the file's or folder's permissions, or choose another path",
    errno.EPERM: "operation not permitted: choose another path",
    errno.EROFS: "read-only file system: choose a writable path",
    errno.EISDIR: "is a folder: give a file name",
    errno.ENOTDIR: "a part of this path is a file, not a folder: choose another path",
    errno.EEXIST: "already exists and is not a folder: choose another path",
    errno.ENOSPC: "no space left on the device",
    errno.ENAMETOOLONG: "file name too long",
}


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _object_store_error(exc: BaseException) -> str | None:
    """A message for botocore / aiohttp failures (no credentials, unreachable endpoint), or None."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:  # the error and what it was raised from
        seen.add(id(cause))
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for e in chain:
        name = type(e).__name__
        if name in ("NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError"):
            return ("no credentials for the object store: set them in the environment (e.g. AWS_ACCESS_KEY_ID / "
                    "AWS_SECRET_ACCESS_KEY) or in a JSON file given with --storage-options FILE "
                    "(or $DR_SCALE_STORAGE_OPTIONS)")
        if name in ("EndpointConnectionError", "ConnectTimeoutError", "ClientConnectorError", "ConnectionClosedError"):
            return (f"cannot reach the object store ({_one_line(e)}): check the endpoint_url in the storage options "
                    "and that the store is running")
        if name in ("InvalidAccessKeyId", "SignatureDoesNotMatch") or "InvalidAccessKeyId" in str(e):
            return f"the object store refused the credentials ({_one_line(e)}): check the storage options"
    return None


def describe(exc: BaseException, names: dict[str, str] | None = None) -> str:
    """One line saying what went wrong and, where known, what to do.

    ``names`` maps parameter names to what the user called them (a command's flags): a
    :class:`ParameterError`'s parameters are written so.
    """
    if isinstance(exc, ParameterError) and names:
        return _one_line(exc.naming(names))
    if isinstance(exc, UserError):
        return _one_line(exc)
    store = _object_store_error(exc)
    if store:
        return store
    if isinstance(exc, BrokenPipeError):
        return "the output was closed before everything was written (a pipe such as `| head`)"
    if isinstance(exc, OSError) and exc.errno in _OS_HINTS and getattr(exc, "filename", None):
        return f"{exc.filename}: {_OS_HINTS[exc.errno]}"
    if isinstance(exc, OSError) and exc.errno in _OS_HINTS:
        return f"{exc.strerror or _OS_HINTS[exc.errno]} (while writing or reading the command's files or output)"
    if isinstance(exc, OSError):
        return _one_line(exc) or type(exc).__name__
    if isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc):
        return (f"an option was not accepted ({_one_line(exc)}): check the storage options (--storage-options, "
                "$DR_SCALE_STORAGE_OPTIONS or the job's storage_options) and the job's settings")
    if isinstance(exc, RecursionError):
        return "input nested too deeply"
    if isinstance(exc, MemoryError):
        return "out of memory: use smaller partitions or more workers"
    return internal_error(exc)


def internal_error(exc: BaseException) -> str:
    """The line of an error that is a bug of dr-scale: its type and message, and the hint to report it."""
    message = f": {_one_line(exc)}" if _one_line(exc) else ""
    return (f"unexpected {type(exc).__name__}{message} (an internal error of dr-scale: rerun with --debug for the "
            "traceback, and please report it)")


#: What :func:`dr_scale.io.atomic.temporary_name` adds to a file's name: ``.NAME.tmp-<32 hex>``.
TEMPORARY_NAME_EXTRA = len(".") + len(".tmp-") + 32


def check_output_file(url: str, fs: AbstractFileSystem, path: str) -> None:
    """Refuse, before the work, an output file path that cannot be written: a folder (a rename would
    drop the file inside it), a file or read-only folder on the way, or a name that is too long for
    the filesystem once the temporary suffix of the atomic write is added.

    Every command that writes a file (``fit --out``, ``learn --out``, ``evaluate --json``) calls it
    before it starts computing.
    """
    if fs.isdir(path):
        raise UserError(f"{url}: is a folder; give a file name for this output")
    _check_name_lengths(fs, path, url, TEMPORARY_NAME_EXTRA)
    _check_local_parent(fs, path, url)


def check_output_folder(url: str, fs: AbstractFileSystem, path: str) -> None:
    """Refuse an output folder path that is a file, lies under a read-only local folder, or has a
    name longer than the filesystem allows."""
    if fs.exists(path) and not fs.isdir(path):
        raise UserError(f"{url}: is a file, not a folder; give a folder for this output")
    _check_name_lengths(fs, path, url, 0)
    _check_local_parent(fs, path + "/x", url)


def _name_max(fs: AbstractFileSystem, path: str) -> int:
    """The longest file name the filesystem of ``path`` takes (a local folder's ``PC_NAME_MAX``, else 255)."""
    if "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
        parent = os.path.dirname(path) or "."
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        try:
            return os.pathconf(parent or ".", "PC_NAME_MAX")
        except (OSError, ValueError):
            return 255
    return 1024  # object stores: keys up to 1024 bytes


def _check_name_lengths(fs: AbstractFileSystem, path: str, url: str, extra: int) -> None:
    limit = _name_max(fs, path)
    *folders, name = [c for c in path.split("/") if c] or [""]
    for part in folders:
        if len(part.encode()) > limit:
            raise UserError(f"{url}: the folder name {part[:40]}… is {len(part.encode())} bytes; this filesystem "
                            f"takes at most {limit}: choose a shorter path")
    if len(name.encode()) + extra > limit:
        raise UserError(f"{url}: the file name is {len(name.encode())} bytes; with the temporary suffix of its "
                        f"atomic write ({extra} bytes) this filesystem takes at most {limit - extra}: "
                        "choose a shorter name")


def _check_local_parent(fs: AbstractFileSystem, path: str, url: str) -> None:
    """For a local path: the nearest existing ancestor must be a writable folder."""
    if "file" not in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
        return
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    parent = parent or "."
    if not os.path.isdir(parent):
        raise UserError(f"{url}: {parent} is a file, not a folder; choose another path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{url}: cannot write into {parent} (permission denied); choose a writable path")
