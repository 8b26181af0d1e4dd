"""``tomllib`` on Python ≥ 3.11, the ``tomli`` back-port on 3.10 (same API)."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["tomllib"]
