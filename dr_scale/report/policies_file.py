"""The policies file of ``dr-scale report``: candidate policies and a reward-model choice.

TOML (or YAML, same keys)::

    reward_model = "models/rho.npz"        # optional; relative to this file, or any fsspec URL
    estimators = ["DM", "IPS", "DR", "SNIPS", "SNDR"]   # default: these five (IPS, SNIPS without a model);
                                           # with parameters: "ClippedDR(max_weight=50)" or
                                           # {name = "SwitchDR", tau = 20}
    alpha = 0.05                           # 1 − confidence level of the intervals
    interval = "normal"                    # or "el" (empirical likelihood, for heavy-tailed weights)
    min_ess_ratio = 0.1                    # "poor overlap" when ESS / n is below this
    # n_actions = 3, n_features = 50       # optional; default from the reward model or the log's metadata

    [[policy]]
    name = "candidate"
    spec = "column:target_action"          # any spelling of dr_scale.policies.parse_policy

    [[policy]]
    name = "learned"
    spec = "linear:models/policy.npz"      # a learned policy file (dr-scale learn); relative to this file
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from dr_scale.atomic import url_to_fs
from dr_scale.estimators import INTERVAL_METHODS, parse_estimator
from dr_scale.policies import parse_policy
from dr_scale.tomlcompat import tomllib


#: The report's estimators when the file names none (paper Sec. 2 plus self-normalized variants).
DEFAULT_ESTIMATORS = ("DM", "IPS", "DR", "SNIPS", "SNDR")
MODEL_FREE_ESTIMATORS = ("IPS", "SNIPS")
DEFAULT_MIN_ESS_RATIO = 0.1


@dataclass(frozen=True)
class CandidatePolicy:
    name: str
    spec: str


@dataclass
class PoliciesFile:
    """What a report evaluates, as read from the policies file."""

    policies: list[CandidatePolicy]
    estimators: list[str]  # estimator specs (labels): "DR", "ClippedDR(max_weight=50.0)", …
    reward_model: str | None = None
    alpha: float = 0.05
    interval: str = "normal"
    min_ess_ratio: float = DEFAULT_MIN_ESS_RATIO
    n_actions: int | None = None
    n_features: int | None = None
    source: str = ""


def _resolve(path: str, base: str) -> str:
    """A path relative to the policies file's folder, unless absolute or a URL."""
    if "://" in path or path.startswith("/"):
        return path
    protocol, sep, folder = base.rpartition("://")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(folder), path))
    return f"{protocol}{sep}{joined}"


def _resolve_spec(spec: str, base: str) -> str:
    """A linear / softmax policy's file relative to the policies file (``linear:PATH``, ``softmax:PATH:T``)."""
    kind, _, arg = spec.partition(":")
    if kind == "linear" and arg:
        return f"linear:{_resolve(arg, base)}"
    if kind == "softmax" and ":" in arg:
        path, _, temperature = arg.rpartition(":")
        return f"softmax:{_resolve(path, base)}:{temperature}"
    return spec


def parse_policies(data: dict, source: str) -> PoliciesFile:
    """Validate the parsed file; errors name the file and the offending entry."""
    known = {"policy", "policies", "reward_model", "estimators", "alpha", "interval", "min_ess_ratio", "n_actions",
             "n_features"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{source}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    entries = data.get("policy", data.get("policies"))
    if not entries or not isinstance(entries, list):
        raise ValueError(f"{source}: no [[policy]] entries (each needs name = … and spec = …)")
    policies, seen = [], set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "spec" not in entry:
            raise ValueError(f"{source}: policy #{i + 1} needs a 'spec' (e.g. spec = \"column:target_action\")")
        spec = _resolve_spec(str(entry["spec"]), source)
        try:
            parse_policy(spec)
        except ValueError as exc:
            raise ValueError(f"{source}: policy #{i + 1}: {exc}") from exc
        name = str(entry.get("name", spec))
        if name in seen:
            raise ValueError(f"{source}: two policies are named {name!r}")
        seen.add(name)
        policies.append(CandidatePolicy(name, spec))
    model = data.get("reward_model")
    model = _resolve(str(model), source) if model else None
    names = []
    for spec in data.get("estimators") or (DEFAULT_ESTIMATORS if model else MODEL_FREE_ESTIMATORS):
        try:
            label, estimator = parse_estimator(spec)
        except ValueError as exc:
            raise ValueError(f"{source}: estimators: {exc}") from exc
        if estimator.needs_model and not model:
            raise ValueError(f"{source}: estimator {label} needs a reward model; set reward_model = \"FILE.npz\"")
        if label in names:
            raise ValueError(f"{source}: estimator {label} is listed twice")
        names.append(label)
    alpha = float(data.get("alpha", 0.05))
    if not 0 < alpha < 1:
        raise ValueError(f"{source}: alpha = {alpha} must lie in (0, 1)")
    interval = data.get("interval", "normal")
    if interval not in INTERVAL_METHODS:
        raise ValueError(f"{source}: interval = {interval!r}; choose from {', '.join(INTERVAL_METHODS)}")
    return PoliciesFile(policies, names, model, alpha, interval,
                        float(data.get("min_ess_ratio", DEFAULT_MIN_ESS_RATIO)), data.get("n_actions"),
                        data.get("n_features"), source)


def load_policies(url: str, storage_options: dict | None = None) -> PoliciesFile:
    """Read a ``.toml`` or ``.yaml``/``.yml`` policies file from any fsspec URL."""
    fs, path = url_to_fs(url, storage_options)
    with fs.open(path, "rb") as f:
        raw = f.read()
    if path.endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(raw) or {}
    else:
        data = tomllib.loads(raw.decode())
    if not isinstance(data, dict):
        raise ValueError(f"{url}: expected a table of keys at the top level")
    base = url if "://" in url else path
    return parse_policies(data, base)
