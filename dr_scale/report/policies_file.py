"""The policies file of ``dr-scale report``: candidate policies and a reward-model choice.

TOML (or YAML, same keys)::

    reward_model = "models/rho.npz"        # optional; relative to this file, or any fsspec URL
    propensity_model = "models/pi0.npz"    # optional: estimated propensities (dr-scale fit-propensity on this log)
    propensity_floor = 0.001               # their floor (docs/propensities.md)
    estimators = ["DM", "IPS", "DR", "SNIPS", "SNDR"]   # default: these five (IPS, SNIPS without a model);
                                           # with parameters: "ClippedDR(max_weight=50)" or
                                           # {name = "SwitchDR", tau = 20}, "DRos(lambda_=10)",
                                           # {name = "DRos", lambdas = [10, 100, inf]}
    alpha = 0.05                           # 1 − confidence level of the intervals
    interval = "normal"                    # or "el" (empirical likelihood, for heavy-tailed weights)
    min_ess_ratio = 0.1                    # "poor overlap" when ESS / n is below this
    min_support = 10                       # "insufficient data" below this many rows with π's action and a reward
    # n_actions = 3, n_features = 50       # optional; default from the reward model or the log's metadata
    fail_on = ["support"]                  # exit status 4 when the report carries such an alert ("support",
                                           # "drift", "verdict"; default none: alerts are warnings only)

    [alerts]                               # thresholds of the support and drift alerts (dr_scale.report.alerts);
    max_weight_mean_z = 5.0                # these are the defaults
    max_unlogged_share = 0.0
    max_pareto_k = 0.7
    max_top_share = 0.5
    max_ess_ratio_drop = 0.7
    max_top_share_rise = 0.3
    max_pareto_k_rise = 0.5
    history_days = 14
    min_history_days = 3

    [[policy]]
    name = "candidate"
    spec = "column:target_action"          # any spelling of dr_scale.policies.parse_policy

    [[policy]]
    name = "learned"
    spec = "linear:models/policy.npz"      # a learned policy file (dr-scale learn); relative to this file

    [[policy]]
    name = "B"
    spec = "logged:../logs-b:frequencies"  # the policy that wrote another log (docs/rankings.md); relative too
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from dr_scale.core.errors import UserError
from dr_scale.io.atomic import url_to_fs
from dr_scale.io.config import (
    Alpha,
    ConfigError,
    Model,
    NonNegativeInt,
    PositiveInt,
    PropensityFloor,
    Share,
    read_config_file,
    validate,
)
from dr_scale.ope.diagnostics import DEFAULT_MIN_ESS_RATIO, DEFAULT_MIN_SUPPORT
from dr_scale.ope.estimators import parse_estimator
from dr_scale.policies import Policy, parse_policy
from dr_scale.policies.logged import FORMS
from dr_scale.propensity.diagnostics import DEFAULT_PROPENSITY_FLOOR
from dr_scale.report.alerts import AlertSettings, FailOn

#: The report's estimators when the file names none (paper Sec. 2 plus self-normalized variants).
DEFAULT_ESTIMATORS = ("DM", "IPS", "DR", "SNIPS", "SNDR")
MODEL_FREE_ESTIMATORS = ("IPS", "SNIPS")


@dataclass(frozen=True)
class CandidatePolicy:
    """A policy the report evaluates: its name, its spec as written, and the policy it parses to (its file read
    once, when the policies file is)."""

    name: str
    spec: str
    policy: Policy


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
    min_support: int = DEFAULT_MIN_SUPPORT
    alerts: AlertSettings = field(default_factory=AlertSettings)
    fail_on: list[str] = field(default_factory=list)  # alert kinds that make the report exit with status 4
    propensity_model: str | None = None
    propensity_floor: float = DEFAULT_PROPENSITY_FLOOR


def _resolve(path: str, base: str) -> str:
    """A path relative to the policies file's folder, unless absolute or a URL."""
    if "://" in path or path.startswith("/"):
        return path
    protocol, sep, folder = base.rpartition("://")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(folder), path))
    return f"{protocol}{sep}{joined}"


def _resolve_spec(spec: str, base: str) -> str:
    """A linear / softmax policy's file, or another log, relative to the policies file (``linear:PATH``,
    ``softmax:PATH:T``, ``logged:PATH[:FORM]``)."""
    kind, _, arg = spec.partition(":")
    if kind == "logged" and arg:
        path, _, form = arg.rpartition(":")
        return f"logged:{_resolve(path, base)}:{form}" if path and form in FORMS else f"logged:{_resolve(arg, base)}"
    if kind == "linear" and arg:
        return f"linear:{_resolve(arg, base)}"
    if kind == "softmax" and ":" in arg:
        path, _, temperature = arg.rpartition(":")
        return f"softmax:{_resolve(path, base)}:{temperature}"
    return spec


class PolicyEntry(Model):
    name: Annotated[str, Field(min_length=1)] | None = None
    spec: Annotated[str, Field(min_length=1)]


class PoliciesFileModel(Model):
    """The keys of a policies file, typed (module docstring)."""

    policy: Annotated[list[PolicyEntry], Field(min_length=1)] | None = None
    policies: Annotated[list[PolicyEntry], Field(min_length=1)] | None = None
    reward_model: Annotated[str, Field(min_length=1)] | None = None
    propensity_model: Annotated[str, Field(min_length=1)] | None = None
    propensity_floor: PropensityFloor = DEFAULT_PROPENSITY_FLOOR
    estimators: Annotated[list[str | dict[str, str | float | bool | list[float] | None]],
                          Field(min_length=1)] | None = None
    alpha: Alpha = 0.05
    interval: Literal["normal", "el"] = "normal"
    min_ess_ratio: Share = DEFAULT_MIN_ESS_RATIO
    min_support: NonNegativeInt = DEFAULT_MIN_SUPPORT
    n_actions: PositiveInt | None = None
    n_features: PositiveInt | None = None
    alerts: AlertSettings = AlertSettings()
    fail_on: FailOn = []


def parse_policies(data: dict, source: str, storage_options: dict | None = None) -> PoliciesFile:
    """Validate the parsed file; errors name the file and the offending entry. Each policy's spec is parsed here,
    its file (``linear:``, ``softmax:``, ``scorer:``) read with ``storage_options``."""
    model = validate(PoliciesFileModel, data, source)
    if model.policy and model.policies:
        raise ConfigError("give the candidates as [[policy]] or as policies = [...], not both", source)
    entries = model.policy or model.policies
    if not entries:
        raise ConfigError("no [[policy]] entries (each needs name = … and spec = …)", source)
    policies, seen = [], set()
    for i, entry in enumerate(entries):
        spec = _resolve_spec(entry.spec, source)
        try:
            policy = parse_policy(spec, storage_options)
        except UserError as exc:
            raise ConfigError(f"policy #{i + 1}: {exc}", source) from None
        name = entry.name or spec
        if name in seen:
            raise ConfigError(f"two policies are named {name!r}", source)
        seen.add(name)
        policies.append(CandidatePolicy(name, spec, policy))
    reward_model = _resolve(model.reward_model, source) if model.reward_model else None
    names = []
    for spec in model.estimators or (DEFAULT_ESTIMATORS if reward_model else MODEL_FREE_ESTIMATORS):
        try:
            label, estimator = parse_estimator(spec)
        except UserError as exc:
            raise ConfigError(f"estimators: {exc}", source) from None
        if estimator.needs_model and not reward_model:
            raise ConfigError(f"estimator {label} needs a reward model; set reward_model = \"FILE.npz\"", source)
        if label in names:
            raise ConfigError(f"estimators: {label} appears twice", source)
        names.append(label)
    return PoliciesFile(policies, names, reward_model, model.alpha, model.interval, model.min_ess_ratio,
                        model.n_actions, model.n_features, source, model.min_support, model.alerts,
                        list(dict.fromkeys(model.fail_on)),
                        _resolve(model.propensity_model, source) if model.propensity_model else None,
                        model.propensity_floor)


def load_policies(url: str, storage_options: dict | None = None) -> PoliciesFile:
    """Read a ``.toml`` or ``.yaml``/``.yml`` policies file from any fsspec URL."""
    data = read_config_file(url, storage_options)
    fs, path = url_to_fs(url, storage_options)
    base = url if "://" in url else path
    return parse_policies(data, base, storage_options)
