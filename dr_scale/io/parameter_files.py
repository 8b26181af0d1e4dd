"""Linear parameter files — reward models and policies: ``.npz`` of ``coef`` (d × k) and ``intercept`` (k).

A file from a colleague is data, not code: read without pickle, every array checked
(shapes, finite numbers). Anything else is a :class:`ParameterFileError` naming the file
and what is wrong with it.
"""

from __future__ import annotations

import io

import numpy as np

from dr_scale.core.errors import UserError
from dr_scale.io.atomic import atomic_write
from dr_scale.io.storage import url_to_fs


class ParameterFileError(UserError):
    """A model or policy file (or object) that cannot be used: the message names it and what is wrong."""


def write_npz(url: str, storage_options: dict | None, **arrays: np.ndarray) -> None:
    """Write ``arrays`` as the ``.npz`` at ``url`` (any fsspec URL), atomically: arrays and JSON, never a pickle."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub reads a ** key as its allow_pickle
    fs, path = url_to_fs(url, storage_options)
    atomic_write(fs, path, buf.getvalue())


#: The first bytes of an ``.npz`` (a zip archive: a local file header, or an empty archive's end record) and of a
#: single ``.npy`` array (refused below as such).
NPZ_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY")


def _is_text(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) reads as UTF-8 text (a TOML, JSON or CSV file given for a model)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a character cut at the end of the head
    return True


def read_npz_file(url: str, storage_options: dict | None, where: str) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``url`` (read once, never a pickle); a missing, folder or unreadable file is a
    :class:`ParameterFileError` naming ``where``."""
    fs, path = url_to_fs(url, storage_options)
    if fs.isdir(path):
        raise ParameterFileError(f"{where}: is a folder; give the .npz file")
    if not fs.exists(path):
        raise ParameterFileError(f"{where}: no such file")
    with fs.open(path, "rb") as f:
        raw = f.read()
    if not raw.startswith(NPZ_MAGIC):  # else numpy would try it as a pickle and advise loading it unsafely
        raise ParameterFileError(f"{where}: not an .npz file (a zip archive of arrays); it begins with "
                                 f"{raw[:24]!r}" + (" (text)" if _is_text(raw[:256]) else ""))
    try:
        loaded = np.load(io.BytesIO(raw), allow_pickle=False)
        arrays = None  # a single .npy array (no context manager, nothing to close)
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded as z:
                arrays = {k: z[k] for k in z.files}
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file
        raise ParameterFileError(f"{where}: not a readable .npz file ({type(exc).__name__}: {exc})") from None
    if arrays is None:
        raise ParameterFileError(f"{where}: a single array, not an .npz of named arrays")
    return arrays


def read_linear_file(url: str, storage_options: dict | None, where: str) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``url``, with ``coef`` and ``intercept`` checked (:func:`linear_arrays`)."""
    return linear_arrays(read_npz_file(url, storage_options, where), where)


def linear_arrays(arrays: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    """A linear file's ``arrays`` with ``coef`` and ``intercept`` checked (:func:`checked_linear`); a file without
    them is a :class:`ParameterFileError` naming ``where``."""
    if "coef" not in arrays or "intercept" not in arrays:
        raise ParameterFileError(f"{where}: expected arrays 'coef' (d × k) and 'intercept' (k), found "
                                 f"{', '.join(sorted(arrays)) or 'none'}")
    arrays["coef"], arrays["intercept"] = checked_linear(arrays["coef"], arrays["intercept"], where)
    return arrays


def checked_linear(coef, intercept, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(coef (d, k), intercept (k,)) as finite float64 arrays, or a :class:`ParameterFileError`."""
    coef, intercept = np.asarray(coef), np.asarray(intercept)
    for name, a in (("coef", coef), ("intercept", intercept)):
        if a.dtype.kind not in "biuf":
            raise ParameterFileError(f"{where}: '{name}' holds {a.dtype}, expected numbers")
    if coef.ndim == 1:
        coef = coef[:, None]
    if coef.ndim != 2 or coef.shape[0] < 1 or coef.shape[1] < 1:
        raise ParameterFileError(f"{where}: 'coef' has shape {coef.shape}, expected (d, k) with d, k ≥ 1")
    intercept = intercept.reshape(-1) if intercept.ndim <= 1 or intercept.size == coef.shape[1] else intercept
    if intercept.shape != (coef.shape[1],):
        raise ParameterFileError(f"{where}: 'intercept' has shape {intercept.shape}, expected ({coef.shape[1]},) — "
                                 "one per "
                         f"action of 'coef' {coef.shape}")
    coef, intercept = coef.astype(np.float64, copy=False), intercept.astype(np.float64, copy=False)  # views kept
    for name, a in (("coef", coef), ("intercept", intercept)):
        if not np.isfinite(a).all():
            raise ParameterFileError(f"{where}: '{name}' has NaN or infinite entries (e.g. at index "
                             f"{tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])})")
    return coef, intercept


def checked_features(features, rows: int, dimension: int, name: str = "features", per: str = "row of 'coef'",
                     space: str = "n_features") -> np.ndarray:
    """A file's ``features`` — the sorted ids, in [0, ``dimension``), of the ``rows`` rows of a coef stored sized by
    use (the other features weigh 0) — as int64; else a ``ValueError`` saying what is wrong. ``name``, ``per`` and
    ``space`` name the ids, what each is one of, and the dimension in the message (a shared model's item columns:
    ``"item_columns"``, ``"column of 'item_features'"``, ``"n_item_features"``)."""
    features = np.asarray(features)
    if features.ndim != 1 or features.dtype.kind not in "iu" or features.size != rows:
        raise ValueError(f"'{name}' must be {rows} integer ids (one per {per}), got "
                         f"{features.dtype} of shape {features.shape}")
    if features.size and (features[0] < 0 or features[-1] >= dimension or np.any(np.diff(features) <= 0)):
        raise ValueError(f"'{name}' must be increasing ids in [0, {space} = {dimension})")
    out: np.ndarray = features.astype(np.int64)
    return out


def stored_layout(arrays: dict[str, np.ndarray], where: str, rows: int, ids: str = "features",
                  size: str = "n_features", per: str = "row of 'coef'") -> tuple[np.ndarray, int] | None:
    """The layout of a parameter file stored sized by use — its ids ``arrays[ids]`` (sorted, in [0, d), one per
    ``per``; :func:`checked_features`) and its dimension d = ``arrays[size]`` — or None for a dense file (neither
    array). One without the other, a dimension that is not one integer ≥ 1, or bad ids are a
    :class:`ParameterFileError` naming ``where``."""
    if ids not in arrays and size not in arrays:
        return None
    if ids not in arrays or size not in arrays:
        raise ParameterFileError(f"{where}: '{ids}' and '{size}' go together (a file sized by use has both)")
    dimension = np.asarray(arrays[size])
    if dimension.shape != () or dimension.dtype.kind not in "iu" or int(dimension) < 1:
        raise ParameterFileError(f"{where}: '{size}' must be one integer d ≥ 1, got {dimension.dtype} "
                                 f"{dimension.tolist()!r}")
    try:
        return checked_features(arrays[ids], rows, int(dimension), ids, per, size), int(dimension)
    except ValueError as exc:
        raise ParameterFileError(f"{where}: {exc}") from None


def used_rows(*coefs: np.ndarray | None) -> np.ndarray:
    """The sorted ids of the rows (features) where any of ``coefs`` — each (d, k), or (F, d, k) for fold models;
    None skipped — has a non-zero weight: the rows a file sized by use keeps (a feature of weight 0 adds exactly 0
    to every prediction). Row 0 alone where none has one (a coef has d ≥ 1 rows)."""
    present = np.zeros(coefs[0].shape[-2], dtype=bool) if coefs[0] is not None else np.zeros(0, dtype=bool)
    for coef in coefs:
        if coef is not None:
            present |= np.asarray(coef).reshape(-1, *coef.shape[-2:]).any(axis=(0, 2))
    used: np.ndarray = np.flatnonzero(present).astype(np.int64)
    return used if used.size else np.zeros(1, np.int64)


def spread_rows(rows: np.ndarray, features: np.ndarray, dimension: int) -> np.ndarray:
    """(d, k): the (m, k) ``rows`` at the feature ids ``features``, zeros elsewhere — a coef sized by use over all
    d = ``dimension`` features."""
    out = np.zeros((dimension, rows.shape[1]))
    out[features] = rows
    return out


def file_metadata(arrays: dict[str, np.ndarray], where: str) -> dict:
    """The JSON object in a parameter file's ``metadata`` entry ({} without one); anything else — not JSON, or
    JSON that is not an object — is a :class:`ParameterFileError` naming ``where``."""
    import json

    if "metadata" not in arrays:
        return {}
    try:
        meta = json.loads(str(arrays["metadata"]))
    except ValueError as exc:
        raise ParameterFileError(f"{where}: unreadable metadata ({exc})") from None
    if not isinstance(meta, dict):
        raise ParameterFileError(f"{where}: unreadable metadata (a JSON {type(meta).__name__}, not an object of "
                                 "named fields)")
    return meta
