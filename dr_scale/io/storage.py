"""Filesystems that travel in Dask task graphs without their secrets.

A task that reads a part carries the filesystem it reads from. fsspec pickles a
filesystem with the options it was made with, so an explicit ``{"key": …, "secret": …}``
would travel with every task to the scheduler and the workers (and into their logs and
spill files). :func:`url_to_fs` returns a :class:`PortableFileSystem` instead: it
behaves as the fsspec filesystem it wraps, and pickles as its class, its arguments and
its *public* options only.

The rule. An option is secret when its name contains one of :data:`SECRET_WORDS`
(``key``, ``secret``, ``token``, ``password``, ``passwd``, ``credential``,
``connection_string``), at any depth of nested dicts (``client_kwargs``,
``config_kwargs``): ``key``, ``secret``, ``token``, ``aws_secret_access_key``,
``account_key``, ``sas_token``, ``client_secret`` … are stripped; ``endpoint_url``,
``region_name``, ``anon``, ``profile``, ``account_name`` travel. A process that unpickles
a filesystem whose secrets were stripped re-supplies them from its own configuration
(:func:`local_secrets`): the Dask config key ``dr-scale.storage-options`` (a YAML file in
the worker's Dask config folder, e.g. a mounted Kubernetes Secret, or the variable
``DASK_DR_SCALE__STORAGE_OPTIONS``), then the variable ``DR_SCALE_STORAGE_OPTIONS``
(JSON) — only their secret entries are used. With nothing configured there, the
filesystem's own credential chain applies (``AWS_ACCESS_KEY_ID``, an instance role …).
In the process that made it (the local threaded scheduler) a filesystem is never
pickled and keeps every option it was given.
"""

from __future__ import annotations

import json
import logging
import os

import dask
import fsspec

from dr_scale.core.errors import UserError

#: Substrings of an option's name (lower case) that make it secret.
SECRET_WORDS = ("key", "secret", "token", "password", "passwd", "credential", "connection_string")
#: Where a worker finds the secrets it re-supplies: a Dask config key, then an environment variable (JSON).
CONFIG_KEY = "dr-scale.storage-options"
STORAGE_OPTIONS_ENV = "DR_SCALE_STORAGE_OPTIONS"

logger = logging.getLogger(__name__)


def is_secret(name: str) -> bool:
    """Whether a storage option named ``name`` is secret (see the module docstring)."""
    lowered = str(name).lower()
    return any(word in lowered for word in SECRET_WORDS)


def public_options(options: dict) -> dict:
    """``options`` without its secret entries, at any depth."""
    return {k: public_options(v) if isinstance(v, dict) else v for k, v in options.items() if not is_secret(k)}


def secret_options(options: dict) -> dict:
    """Only the secret entries of ``options`` (with the nested dicts that hold some)."""
    out = {}
    for k, v in options.items():
        if is_secret(k):
            out[k] = v
        elif isinstance(v, dict) and (inner := secret_options(v)):
            out[k] = inner
    return out


def merged(base: dict, top: dict) -> dict:
    """``base`` updated by ``top``, nested dicts merged key by key."""
    out = dict(base)
    for k, v in top.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def local_secrets() -> dict:
    """The secret storage options this process holds: Dask config ``dr-scale.storage-options``, then (for
    keys it lacks) ``$DR_SCALE_STORAGE_OPTIONS`` (JSON), secret entries only."""
    configured = dask.config.get(CONFIG_KEY, None) or {}
    raw = os.environ.get(STORAGE_OPTIONS_ENV)
    return secret_options(merged(json.loads(raw) if raw else {}, dict(configured)))


def worker_environment(storage_options: dict | None) -> dict:
    """Environment for worker processes this process starts (a ``LocalCluster``), holding the secrets of
    ``storage_options`` so that the workers can re-supply them (:func:`local_secrets`); empty if none."""
    secrets = secret_options(storage_options or {})
    if not secrets:
        return {}
    return {STORAGE_OPTIONS_ENV: json.dumps(merged(json.loads(os.environ.get(STORAGE_OPTIONS_ENV) or "{}"),
                                                   secrets))}


class PortableFileSystem:
    """An fsspec filesystem (every attribute and method is the wrapped one's) that pickles without secrets.

    Pickled: the filesystem's class, its positional arguments and :func:`public_options` of its
    options. Unpickled, it makes the same class on first use, with the public options plus, where
    secrets were stripped, :func:`local_secrets` of the unpickling process.
    """

    def __init__(self, fs=None, spec: tuple | None = None):
        self._fs, self._spec = fs, spec

    @property
    def fs(self):
        """The fsspec filesystem."""
        if self._fs is None:
            cls, args, options, stripped = self._spec
            if stripped:
                secrets = local_secrets()
                if not secrets:
                    logger.warning("%s: storage options' secrets do not travel to workers, and this process has "
                                   "none (Dask config %s or $%s); using the filesystem's own credential chain",
                                   cls.__name__, CONFIG_KEY, STORAGE_OPTIONS_ENV)
                options = merged(options, secrets)
            self._fs = cls(*args, **options)
        return self._fs

    def __getattr__(self, name):
        if name in ("_fs", "_spec"):  # not yet set: while unpickling
            raise AttributeError(name)
        return getattr(self.fs, name)

    def __reduce__(self):
        if self._fs is None:
            return PortableFileSystem, (None, self._spec)
        options = dict(self._fs.storage_options)
        public = public_options(options)
        return PortableFileSystem, (None, (type(self._fs), self._fs.storage_args, public, public != options))

    def __dask_tokenize__(self):
        return type(self).__name__, self._spec if self._fs is None else self._fs.__dask_tokenize__()

    def __repr__(self) -> str:
        return f"PortableFileSystem({type(self._fs).__name__ if self._spec is None else self._spec[0].__name__})"


def storage_options(path: str | dict | None = None) -> dict:
    """fsspec storage options: a dict as is, a JSON file's object, else the DR_SCALE_STORAGE_OPTIONS variable.

    Credentials never travel on the command line; the file or variable holds them.
    """
    if isinstance(path, dict):
        return path
    if path:
        try:
            with open(path) as f:
                text = f.read()
        except OSError as exc:
            raise UserError(f"storage options file {path}: {exc.strerror or exc}") from None
        return _options_object(text, f"storage options file {path}")
    raw = os.environ.get(STORAGE_OPTIONS_ENV)
    return _options_object(raw, f"${STORAGE_OPTIONS_ENV}") if raw and raw.strip() else {}


def _options_object(text: str, where: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a JSON object of fsspec options, got {type(value).__name__}")
    return value


def url_to_fs(url: str, storage_options: dict | None = None) -> tuple[PortableFileSystem, str]:
    """(filesystem, path) for any fsspec URL or local path; the filesystem pickles without secrets."""
    if not isinstance(url, (str, os.PathLike)):
        raise UserError(f"expected a path or URL (a str), got {type(url).__name__} {url!r:.60}")
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (TypeError, ValueError) as exc:  # an unknown protocol, an option the filesystem does not take
        raise UserError(f"{url}: cannot open this location with the storage options given "
                        f"({type(exc).__name__}: {' '.join(str(exc).split())})") from None
    return PortableFileSystem(fs), path
