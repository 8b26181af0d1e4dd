"""Per-partition cache of :class:`~dr_scale.ope.evaluation.PolicyState`, verified before use.

One JSON file per (evaluation, partition)::

    <cache>/<evaluation fingerprint>/<sha256(partition path)>.json
    {"format": "dr-scale/state-cache", "version": 7, "fingerprint": …, "identity": {…},
     "state": PolicyState.to_dict(), "sha256": <sha256 of the canonical JSON of the rest>}

The **fingerprint** hashes everything a state depends on besides the data: the policy
and baseline spellings (for a linear or softmax policy the spelling carries the digest
of the file's coefficients, so a re-learned policy file is a new policy), the estimators
(names and ``repr``, which carries their parameters), the reward model's coefficients,
k, d, for a marginalized estimator (MIPS) the action catalogue's digest and the embedding
propensity's column, and :data:`STATE_VERSION`. An entry is used only if it parses, its checksum
matches, and its fingerprint and partition identity equal the current ones; anything
else (truncated, corrupt, stale) is recomputed and overwritten, never trusted.
Python's ``json`` writes floats with ``repr``, which round-trips float64 exactly, so
a cached state is bit-identical to a freshly computed one.
"""

from __future__ import annotations

import hashlib
import json
import posixpath

from dr_scale.io import strict_json
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.ope.evaluation import Evaluation, PolicyState
from dr_scale.policies import parameters_digest

#: Bump when the layout or the meaning of a PolicyState changes: every entry is then stale.
STATE_VERSION = 8
FORMAT = "dr-scale/state-cache"


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def model_digest(model) -> str | None:
    """sha256 of a reward model's parameters (None without a model)."""
    if model is None:
        return None
    arrays = model.parameters() if hasattr(model, "parameters") else (model.coef, model.intercept)
    return parameters_digest(*arrays)


def fingerprint(evaluation: Evaluation) -> str:
    """What a partition's state depends on besides the partition itself."""
    key = {
        "version": STATE_VERSION,
        "policy": str(evaluation.policy),
        "baseline": None if evaluation.baseline is None else str(evaluation.baseline),
        "estimators": [[name, repr(e)] for name, e in evaluation.estimators.items()],
        "reward_model": model_digest(evaluation.reward_model),
        **({} if evaluation.propensity_model is None else {
            "propensity_model": model_digest(evaluation.propensity_model),
            "propensity_floor": evaluation.propensity_floor}),
        "n_actions": evaluation.n_actions,
        "n_features": evaluation.n_features,
    }
    if evaluation.needs_embedding:  # MIPS's weights: the catalogue's e(a) and p_π₀(e|x)'s column
        catalogue = evaluation.catalogue
        key["catalogue"] = None if catalogue is None else catalogue.digest()
        key["embedding_propensity"] = evaluation.embedding_propensity
    return _digest(key)[:24]


class StateCache:
    """Read and write verified per-partition states under a folder URL."""

    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = url
        self.fs, self.root = url_to_fs(url, storage_options)

    def entry_path(self, fp: str, partition_path: str) -> str:
        """The cache file of a partition's state under fingerprint ``fp``."""
        return posixpath.join(self.root, fp, hashlib.sha256(partition_path.encode()).hexdigest()[:32] + ".json")

    def store(self, fp: str, ident: dict, state: PolicyState) -> None:
        """Write a partition's state, with its identity and a SHA-256 of the entry, atomically."""
        body = {"format": FORMAT, "version": STATE_VERSION, "fingerprint": fp, "identity": ident,
                "state": state.to_dict()}
        atomic_write(self.fs, self.entry_path(fp, ident["path"]), strict_json.dumps({**body, "sha256": _digest(body)}))

    @staticmethod
    def verify(raw: bytes, fp: str, ident: dict) -> PolicyState | str:
        """The cached state, or the reason it cannot be trusted."""
        try:
            entry = json.loads(raw)
            claimed = entry.pop("sha256")
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            return f"unreadable ({type(exc).__name__})"
        if claimed != _digest(entry):
            return "checksum mismatch"
        if entry.get("format") != FORMAT or entry.get("version") != STATE_VERSION or entry.get("fingerprint") != fp:
            return "other version or evaluation"
        if entry.get("identity") != ident:
            return "partition changed"
        return PolicyState.from_dict(entry["state"])

    def load(self, wanted: list[tuple[str, dict]]) -> tuple[dict[tuple[str, str], PolicyState],
                                                           dict[tuple[str, str], str]]:
        """For (fingerprint, identity) pairs: the trusted states, and why others were rejected.

        Missing entries appear in neither; entries are fetched concurrently (``fs.cat`` of many paths).
        """
        paths = {self.entry_path(fp, ident["path"]): (fp, ident) for fp, ident in wanted}
        self.fs.invalidate_cache()
        raw = self.fs.cat(list(paths), on_error="return") if paths else {}
        states, rejected = {}, {}
        for path, (fp, ident) in paths.items():
            data = raw.get(path)
            if data is None or isinstance(data, (FileNotFoundError, KeyError)):
                continue
            if isinstance(data, BaseException):
                rejected[(fp, ident["path"])] = f"unreadable ({type(data).__name__})"
                continue
            verdict = self.verify(data, fp, ident)
            if isinstance(verdict, str):
                rejected[(fp, ident["path"])] = verdict
            else:
                states[(fp, ident["path"])] = verdict
        return states, rejected
