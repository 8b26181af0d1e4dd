"""Where dr-scale keeps generated data and spilled parts: ``$DR_SCALE_CACHE``, else ``~/.cache/dr-scale``."""

from __future__ import annotations

import os

CACHE_ENV = "DR_SCALE_CACHE"


def cache_root(configured: str = "") -> str:
    return configured or os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "dr-scale")


def spill_root(configured_cache: str = "") -> str:
    """Where ``spill = "disk"`` puts its temporary folders: ``<cache>/spill`` (the system's temporary
    directory may be a RAM-backed tmpfs)."""
    return os.path.join(cache_root(configured_cache), "spill")
