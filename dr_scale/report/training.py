"""What a learned policy was trained on, and the guard against evaluating it on those rows.

A policy evaluated on the log it was learned from is scored in-sample: its value is
optimistic, often wildly (a policy fitted to five days' clicks, evaluated on a week that
contains those five days). ``dr-scale learn`` stores in the policy file's metadata, under
``"training"``, what it read:

* ``logs`` — the log's URL (without credentials);
* ``partitions`` — every part file it read: its path, its date (from a ``date=YYYY-MM-DD``
  segment, or None) and, where the filesystem gives one, a content key (size and checksum,
  e.g. an S3 ETag), which also recognises a copy of a part at another path;
* ``dates`` — the distinct dates, and ``fingerprint`` — a SHA-256 over the partitions'
  identities (path, size, checksum or mtime: :func:`dr_scale.report.partitions.identity`);
* ``rows`` — the content sketch of the rows it read (:class:`dr_scale.logs.sketch.RowSketch`: the row count and
  the 4,096 smallest content hashes of (row_id, action, reward, feature ids)), which recognises the training rows
  wherever they are later read: a copy, a move, another folder name, a re-import or a log written again from a
  DataFrame, and a log that holds only some of them (the fraction of the rows read that are training rows);
* ``split`` — the keyed split the learner used (its seed and the reward model's folds):
  every row of every partition listed was read by ``learn``, the validation rows included;
* ``log_filter`` — the rows it read when the log was filtered (``--split train``, ``--days``):
  a policy learned on one half of a keyed train/test split is not in-sample on the other half
  (same ``test_fraction`` and ``split_seed``), so evaluating it there is no overlap.

``dr-scale evaluate`` and ``dr-scale report`` compare it with the partitions they read
(:func:`training_overlap`) — by path and content key, and by content: one more read of the rows'
``row_id``, ``action``, ``reward`` and ``features`` (:func:`dr_scale.logs.sketch.overlap_counts`). A partition
the policy was trained on, or rows it was trained on, make them refuse, with exit status 2 and the days (or
the fraction of in-sample rows) named, unless ``--allow-training-overlap`` — then every output labels the
policy's results as in-sample. A wrapped policy (``epsilon-greedy:EPS:linear:P.npz``, ``softmax:P.npz:T``,
any policy holding another) is checked through every policy it holds.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from dr_scale.core.errors import UserError
from dr_scale.logs.opened import open_log
from dr_scale.logs.reading import read_partition
from dr_scale.logs.sketch import RowSketch, in_sample_fraction, overlap_counts
from dr_scale.policies import ItemScorerPolicy, LinearPolicy, Policy
from dr_scale.report.partitions import PartitionInfo, list_partitions

TRAINING = "training"


def _redact(url: str) -> str:
    from dr_scale.report.render import redact  # imports matplotlib's plots module lazily: only here

    redacted = redact(url)
    assert redacted is not None  # a URL stays a URL
    return redacted


def content_key(ident: dict) -> str | None:
    """Size and content checksum of a partition, if the filesystem gives a checksum (else None: path only)."""
    return f"{ident.get('size')}:{ident['checksum']}" if "checksum" in ident else None


def training_record(logs, storage_options: dict | None = None, *, seed: int = 0,
                    folds: int | None = None) -> dict:
    """The ``"training"`` metadata of a policy learned from the log ``logs`` (a URL, or opened with its filter:
    :func:`~dr_scale.logs.opened.open_log`) (module docstring).

    Examples
    --------
    >>> from dr_scale.synthetic.example import example_paths
    >>> record = training_record(example_paths()[0])
    >>> record["dates"][:2], len(record["partitions"]), len(record["fingerprint"])
    (['2026-11-01', '2026-11-02'], 7, 64)
    """
    logs = open_log(logs, storage_options)
    fs, parts = list_partitions(logs)
    identities = [p.identity for p in parts]
    log_filter = logs.log_filter
    return {
        "logs": _redact(str(logs)),
        "partitions": [{"path": p.path, "date": p.day, "content": content_key(p.identity)} for p in parts],
        "dates": sorted({p.day for p in parts if p.day}),
        "fingerprint": hashlib.sha256(json.dumps(identities, sort_keys=True).encode()).hexdigest(),
        "rows": (summed(fs, parts, RowSketch.of) or RowSketch()).to_dict(),
        "split": {"seed": seed, "reward_model_folds": folds},
        "log_filter": log_filter.to_dict() if log_filter else {},
    }


def summed(fs: Any, parts: list[PartitionInfo], fn: Any, *args: Any) -> Any:
    """Σ over the partitions of ``fn(part, *args)`` of each part read (with its filter), one Dask task a part."""
    import dask

    from dr_scale.outofcore.mergeable import merge_all

    def term(path: str, log_filter: Any) -> Any:
        """``fn`` of one part, read."""
        return fn(read_partition(fs, path, log_filter=log_filter), *args)

    return merge_all(dask.compute(*[dask.delayed(term)(p.path, p.log_filter) for p in parts]))


def held_policies(policy: Any) -> list[Policy]:
    """``policy`` and every policy it holds, at any depth (the inner policy of ``epsilon-greedy:EPS:P``, the linear
    policy of ``softmax:P.npz:T``, the members of a mixture …): any field that is a Policy or a list of them."""
    if not isinstance(policy, Policy):
        return []
    out = [policy]
    for value in vars(policy).values():
        for inner in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(inner, Policy) and inner is not policy:
                out += held_policies(inner)
    return out


def training_of(policy: Policy | str | None) -> dict | None:
    """The training record in the metadata of the first policy file ``policy`` holds (:func:`held_policies`)."""
    return next(iter(training_records(policy)), None)


def training_records(policy: Policy | str | None) -> list[dict]:
    """The training records of every (linear or scorer) policy file ``policy`` holds (:func:`held_policies`)."""
    out = []
    for held in held_policies(policy):
        if isinstance(held, (LinearPolicy, ItemScorerPolicy)):
            record = held.metadata.get(TRAINING)
            if isinstance(record, dict):
                out.append(record)
    return out


@dataclass
class Overlap:
    """A policy's training rows among those read: the partitions (by path or content key) and the fraction of the
    rows read that it was trained on (by content, :mod:`dr_scale.logs.sketch`; None: not measured)."""

    parts: list[PartitionInfo]
    fraction: float | None

    def __bool__(self) -> bool:
        return bool(self.parts) or bool(self.fraction)


def training_overlap(policy: Policy | str | None, parts: list[PartitionInfo], read=None, fs=None) -> Overlap:
    """The partitions of ``parts`` the policy was trained on — the same path, or the same content key — and, given
    the filesystem ``fs``, the fraction of their rows it was trained on by content. None of either when ``read``,
    the filter of the rows read, is the other half of the policy's keyed split
    (:meth:`~dr_scale.logs.filters.LogFilter.other_half_of`)."""
    records = [r for r in training_records(policy)
               if not (read is not None and read.other_half_of(r.get("log_filter")))]
    paths = {p.get("path") for r in records for p in r.get("partitions", [])}
    contents = {p.get("content") for r in records for p in r.get("partitions", []) if p.get("content")}
    by_path = [p for p in parts if p.path in paths or (content_key(p.identity) or "") in contents]
    sketches = [s for r in records if (s := RowSketch.from_dict(r.get("rows"))) is not None]
    fraction = None
    if fs is not None and sketches and parts:
        counts = summed(fs, parts, overlap_counts, sketches)
        fractions = [f for row in counts if (f := in_sample_fraction(row)) is not None]
        fraction = max(fractions) if fractions else None
    return Overlap(by_path, fraction)


def describe(overlap: Overlap | list[PartitionInfo]) -> str:
    """The overlapping days (or, for undated partitions, their paths) and the fraction of in-sample rows, for
    messages and labels."""
    parts, fraction = (overlap.parts, overlap.fraction) if isinstance(overlap, Overlap) else (overlap, None)
    days = sorted({p.day for p in parts if p.day})
    undated = [p.path for p in parts if not p.day]
    out = []
    if days:
        out.append(f"day{'s' if len(days) > 1 else ''} {', '.join(days)}")
    if undated:
        shown = ", ".join(undated[:3]) + (f" and {len(undated) - 3} more" if len(undated) > 3 else "")
        out.append(f"partition{'s' if len(undated) > 1 else ''} {shown}")
    if fraction:
        share = f"{100 * fraction:.3g}% of the rows"
        return f"{' and '.join(out)} ({share} read, by content)" if out else f"{share} (matched by content)"
    return " and ".join(out)


def check_training_overlap(policies: dict[str, Policy | str | None], parts: list[PartitionInfo], *,
                           allow: bool = False, flag: str = "--allow-training-overlap", read=None,
                           fs=None) -> dict[str, str]:
    """In-sample policies by name, with the overlapping days and the fraction of in-sample rows in words
    (:func:`describe`); refuse (a ``UserError``) unless ``allow``.

    ``policies`` maps a name (how the user knows the policy) to the policy; those without a
    training record pass. ``read``: the filter of the rows read; ``fs``: their filesystem, for the check by
    content (:func:`training_overlap`).
    """
    found = {name: describe(overlap) for name, policy in policies.items()
             if (overlap := training_overlap(policy, parts, read, fs))}
    if found and not allow:
        name, days = next(iter(found.items()))
        raise UserError(f"policy {name} was learned on {days} of the log read here, so its estimate would be "
                        f"in-sample (optimistic); evaluate it on days it was not trained on, or pass {flag} to "
                        "label its results in-sample")
    return found
