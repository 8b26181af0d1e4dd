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
* ``split`` — the keyed split the learner used (its seed and the reward model's folds):
  every row of every partition listed was read by ``learn``, the validation rows included;
* ``log_filter`` — the rows it read when the log was filtered (``--split train``, ``--days``):
  a policy learned on one half of a keyed train/test split is not in-sample on the other half
  (same ``test_fraction`` and ``split_seed``), so evaluating it there is no overlap.

``dr-scale evaluate`` and ``dr-scale report`` compare it with the partitions they read
(:func:`training_overlap`); a partition the policy was trained on makes them refuse, with
exit status 2 and the days named, unless ``--allow-training-overlap`` — then every output
labels the policy's results as in-sample.
"""

from __future__ import annotations

import hashlib
import json

from dr_scale.core.errors import UserError
from dr_scale.logs.opened import open_log
from dr_scale.policies import ItemScorerPolicy, LinearPolicy, Policy, SoftmaxPolicy
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
    _, parts = list_partitions(logs)
    identities = [p.identity for p in parts]
    log_filter = logs.log_filter
    return {
        "logs": _redact(str(logs)),
        "partitions": [{"path": p.path, "date": p.day, "content": content_key(p.identity)} for p in parts],
        "dates": sorted({p.day for p in parts if p.day}),
        "fingerprint": hashlib.sha256(json.dumps(identities, sort_keys=True).encode()).hexdigest(),
        "split": {"seed": seed, "reward_model_folds": folds},
        "log_filter": log_filter.to_dict() if log_filter else {},
    }


def training_of(policy: Policy | str | None) -> dict | None:
    """The training record in a (linear or softmax) policy file's metadata, if any."""
    if isinstance(policy, SoftmaxPolicy):
        policy = policy.linear
    if isinstance(policy, (LinearPolicy, ItemScorerPolicy)):
        record = policy.metadata.get(TRAINING)
        return record if isinstance(record, dict) else None
    return None


def training_overlap(policy: Policy | str | None, parts: list[PartitionInfo], read=None) -> list[PartitionInfo]:
    """The partitions of ``parts`` the policy was trained on: the same path, or the same content key (none
    when ``read``, the filter of the rows read, is the other half of the policy's keyed split:
    :meth:`~dr_scale.logs.filters.LogFilter.other_half_of`)."""
    record = training_of(policy)
    if not record or (read is not None and read.other_half_of(record.get("log_filter"))):
        return []
    paths = {p.get("path") for p in record.get("partitions", [])}
    contents = {p.get("content") for p in record.get("partitions", []) if p.get("content")}
    return [p for p in parts if p.path in paths or (content_key(p.identity) or "") in contents]


def describe(parts: list[PartitionInfo]) -> str:
    """The overlapping days (or, for undated partitions, their paths), for messages and labels."""
    days = sorted({p.day for p in parts if p.day})
    undated = [p.path for p in parts if not p.day]
    out = []
    if days:
        out.append(f"day{'s' if len(days) > 1 else ''} {', '.join(days)}")
    if undated:
        shown = ", ".join(undated[:3]) + (f" and {len(undated) - 3} more" if len(undated) > 3 else "")
        out.append(f"partition{'s' if len(undated) > 1 else ''} {shown}")
    return " and ".join(out)


def check_training_overlap(policies: dict[str, Policy | str | None], parts: list[PartitionInfo], *,
                           allow: bool = False, flag: str = "--allow-training-overlap", read=None) -> dict[str, str]:
    """In-sample policies by name, with the overlapping days in words; refuse (a ``UserError``) unless ``allow``.

    ``policies`` maps a name (how the user knows the policy) to the policy; those without a
    training record pass. ``read``: the filter of the rows read.
    """
    found = {name: describe(overlap) for name, policy in policies.items()
             if (overlap := training_overlap(policy, parts, read))}
    if found and not allow:
        name, days = next(iter(found.items()))
        raise UserError(f"policy {name} was learned on {days} of the log read here, so its estimate would be "
                        f"in-sample (optimistic); evaluate it on days it was not trained on, or pass {flag} to "
                        "label its results in-sample")
    return found
