"""Strict JSON out: every file and line dr-scale writes parses under RFC 8259.

Python's ``json`` writes NaN and ±inf as the bare tokens ``NaN`` / ``Infinity``, which
are not JSON (``jq``, browsers and most parsers reject them). :func:`dumps` writes
non-finite numbers as ``null`` and then refuses any left (``allow_nan=False``).
"""

from __future__ import annotations

import json
import math


def finite(obj):
    """Replace NaN and ±inf by None, recursively (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj, **kwargs) -> str:
    """``json.dumps`` with non-finite numbers as ``null``, never a ``NaN`` / ``Infinity`` token."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)
