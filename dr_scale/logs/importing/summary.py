"""What an import wrote, as the ``import`` command prints it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from dr_scale.logs.catalogue import CATALOGUE_FILE
from dr_scale.logs.importing.features import collisions
from dr_scale.logs.importing.passes import BlockStats
from dr_scale.logs.spec import ImportSpec


@dataclass
class ImportSummary:
    """What an import wrote: its printed summary is :meth:`text`.

    Parameters
    ----------
    out : str
        The log's folder.
    rows : int
        The rows written.
    bad : collections.Counter
        The bad rows skipped, by reason.
    days : list of str
        The days written (``YYYY-MM-DD``), sorted; empty without a timestamp.
    n_actions : int
        k, the actions of the vocabulary.
    actions_logged : int
        The actions that occur in the rows.
    n_features : int
        d = 2^hash_bits, the hashed feature space.
    features_used : int
        The distinct feature indices the keys hash to.
    keys : int
        The distinct feature keys.
    collisions : int
        The keys that share an index with another key.
    propensity : tuple of float or None
        (min, max) of the logged propensities; None when the spec names no propensity column.
    files : int
        The raw files read.
    catalogue : int, optional
        The actions of the item catalogue written beside the log, if any.
    coverage : tuple, optional
        With a catalogue: (logged actions it describes, logged actions, examples of logged values it lacks).

    Examples
    --------
    >>> from collections import Counter
    >>> summary = ImportSummary("log/", 3, Counter(), ["2024-01-01"], 2, 2, 1 << 18, 5, 5, 0, (0.2, 0.8), 1)
    >>> print(summary.text().splitlines()[0])
    imported 3 rows from 1 file(s) into log/
    """

    out: str
    rows: int
    bad: Counter
    days: list
    n_actions: int
    actions_logged: int
    n_features: int
    features_used: int
    keys: int
    collisions: int
    propensity: tuple | None  # (min, max), None when the spec names no propensity column
    files: int
    catalogue: int | None = None
    coverage: tuple | None = None

    @classmethod
    def of(cls, out: str, stats: BlockStats, spec: ImportSpec, n_actions: int,
           catalogue: int | None, coverage: tuple | None = None) -> ImportSummary:
        """The summary of an import into ``out`` whose blocks' merged stats are ``stats``: the distinct feature
        indices and their collisions counted from the keys' fingerprints."""
        used, n_collisions = collisions(stats.fingerprints, spec.hash_bits)
        return cls(out, stats.rows, stats.bad, sorted(stats.days), n_actions, len(stats.actions), 1 << spec.hash_bits,
                   used, int(stats.fingerprints.size), n_collisions,
                   (stats.p_min, stats.p_max) if spec.propensity is not None else None, len(set(stats.files)),
                   catalogue, coverage)

    def text(self) -> str:
        """The summary the ``import`` command prints, one fact a line."""
        lines = [f"imported {self.rows:,} rows from {self.files} file(s) into {self.out}"]
        lines.append("days: " + (f"{len(self.days)} ({self.days[0]} … {self.days[-1]})" if self.days else
                                 "none (no timestamp in the spec)"))
        lines.append(f"actions: {self.n_actions} in the vocabulary, {self.actions_logged} logged")
        lines.append(f"features: {self.features_used:,} of 2^{self.n_features.bit_length() - 1} used by "
                     f"{self.keys:,} distinct keys; {self.collisions:,} collision(s)")
        if self.propensity is None:
            lines.append("propensity: none (the spec names no propensity column: weight the log by estimated "
                         "propensities, --estimate-propensity; docs/propensities.md)")
        else:
            lines.append(f"propensity: {self.propensity[0]:.6g} … {self.propensity[1]:.6g}")
        if self.catalogue is not None:
            lines.append(f"item catalogue: {self.catalogue} actions with features ({CATALOGUE_FILE})")
        if self.coverage is not None:
            covered, logged, missing = self.coverage
            lines.append(f"catalogue coverage: {covered} of {logged} logged actions" + (
                f" ({logged - covered} without item features, e.g. {', '.join(map(repr, missing))})"
                if covered < logged else ""))
        total = sum(self.bad.values())
        lines.append(f"bad rows skipped: {total:,}" + (" (" + "; ".join(f"{n:,} × {reason}" for reason, n in
                                                                          sorted(self.bad.items())) + ")"
                                                          if total else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The summary as a JSON object (``bad`` as ``bad_rows``)."""
        return {"out": self.out, "rows": self.rows, "bad_rows": dict(self.bad), "days": self.days,
                "n_actions": self.n_actions, "actions_logged": self.actions_logged, "n_features": self.n_features,
                "features_used": self.features_used, "keys": self.keys, "collisions": self.collisions,
                "propensity": None if self.propensity is None else list(self.propensity), "files": self.files,
                "catalogue": self.catalogue,
                "catalogue_coverage": None if self.coverage is None else {
                    "covered": self.coverage[0], "logged": self.coverage[1], "missing_examples": self.coverage[2]}}

