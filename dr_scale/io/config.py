"""Typed, validated configuration: job files, policies files and command-line options.

One validator for all of them — pydantic models and annotated types — so a value has the
same rules whether it comes from a TOML/YAML file, ``--set KEY=VALUE`` or an option:

* :func:`read_config_file` parses a ``.toml`` / ``.yaml`` / ``.yml`` file (any fsspec URL);
  a syntax error names the file and the line;
* :func:`validate` checks a parsed mapping against a model (:class:`Model`: unknown keys
  are errors, types are strict — ``skip_bad_partitions = "false"`` is refused, not read
  as true — ranges are checked) and raises one :class:`ConfigError` naming the file and
  every offending key;
* :func:`option` turns an annotated type into an ``argparse`` ``type=``, so ``--alpha 2``
  is refused with the same rule as ``alpha = 2`` in a file;
* :func:`check` applies the same rule to a library function's argument, raising a
  :class:`~dr_scale.core.errors.ParameterError` that names the parameter.

The annotated types below (:data:`Alpha`, :data:`PositiveInt`, …) are the shared rules.
"""

from __future__ import annotations

import argparse
import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from dr_scale.core.errors import ParameterError, UserError

#: A finite float (NaN and ±inf refused).
Finite = Annotated[float, Field(allow_inf_nan=False)]
#: 1 − confidence level of an interval, in (0, 1).
Alpha = Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]
#: The share of test rows of a keyed train/test split (:mod:`dr_scale.logs.filters`), in (0, 1).
TestFraction = Alpha
#: A share in [0, 1].
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
#: A positive finite float.
PositiveFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: A positive float or +inf (NaN refused): a clip M, a tolerance's upper end.
PositiveOrInf = Annotated[float, Field(gt=0)]
#: A float ≥ 0 or +inf (NaN refused): a switch threshold τ.
NonNegativeOrInf = Annotated[float, Field(ge=0)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
#: A seed of keyed randomness (:mod:`dr_scale.core.keyed_random` keys on 64 bits: a larger seed would wrap).
Seed = Annotated[int, Field(ge=0, lt=2 ** 64)]
#: A number of cross-fitting folds K ≥ 2 (row i's fold ⌊K·u(row_id_i)⌋, fold model j fitted on the others).
Folds = Annotated[int, Field(ge=2)]
#: The floor of estimated propensities, in (0, 1) (:mod:`dr_scale.propensity.diagnostics`).
PropensityFloor = Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]
#: The uniform share ε of a generated logging policy, in [0, 0.5] (:mod:`dr_scale.synthetic.bandit`).
UniformShare = Annotated[float, Field(ge=0, le=0.5, allow_inf_nan=False)]


class ConfigError(UserError):
    """A configuration value (file key or option) that breaks its rule; ``source`` is the file, if any."""

    def __init__(self, message: str, source: str | None = None):
        super().__init__(f"{source}: {message}" if source else message)
        self.message, self.source = message, source

    def in_file(self, source: str) -> ConfigError:
        """The same error, naming ``source`` if it names no file yet."""
        return self if self.source else ConfigError(self.message, source)


class Model(BaseModel):
    """Base of every configuration model: unknown keys refused, strict types, frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _loc(loc: tuple) -> str:
    return ".".join(f"#{x + 1}" if isinstance(x, int) else str(x) for x in loc) or "(top level)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def error_lines(exc: ValidationError, known: list[str] | None = None) -> list[str]:
    """One phrase per validation error: the key, the rule broken and the value given."""
    out = []
    for e in exc.errors(include_url=False):
        loc = _loc(tuple(x for x in e["loc"] if not (isinstance(x, str) and x.startswith(("function-", "tagged-")))))
        if e["type"] == "extra_forbidden":
            hint = f"; known keys: {', '.join(known)}" if known and len(e["loc"]) == 1 else ""
            out.append(f"{loc}: unknown key{hint}")
        elif e["type"] == "missing":
            out.append(f"{loc}: missing (required)")
        else:
            msg = e["msg"].replace("Input should be", "should be").replace("Value error, ", "")
            out.append(f"{loc}: {msg} (got {_short(e.get('input'))})")
    return out


def validate(model: type[Model], data: Any, source: str | None = None):
    """``model`` built from the mapping ``data``; a :class:`ConfigError` naming ``source`` and every bad key."""
    if not isinstance(data, dict):
        raise ConfigError(f"expected a table of keys, got {type(data).__name__}", source)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        known = sorted(f.alias or k for k, f in model.model_fields.items())
        raise ConfigError("; ".join(error_lines(exc, known)), source) from None


def read_config_file(url: str, storage_options: dict | None = None) -> dict:
    """The top-level table of a TOML or YAML (``.yaml``/``.yml``) file at any fsspec URL."""
    from dr_scale.io.atomic import url_to_fs
    from dr_scale.io.tomlcompat import tomllib

    fs, path = url_to_fs(url, storage_options)
    if fs.isdir(path):
        raise ConfigError("is a folder; give a .toml or .yaml file", url)
    if not fs.exists(path):
        raise ConfigError("no such file", url)
    with fs.open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not a UTF-8 text file ({exc.reason} at byte {exc.start})", url) from None
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"not valid YAML: {' '.join(str(exc).split())}", url) from None
        data = {} if data is None else data
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"not valid TOML: {exc}", url) from None
    if not isinstance(data, dict):
        raise ConfigError(f"expected a table of keys at the top level, got {type(data).__name__}", url)
    _check_finite(data, url)
    return data


def _check_finite(obj, source: str, where: str = "") -> None:
    """TOML and YAML allow ``nan`` and ``inf``; a configuration never means them (``inf`` only where typed so)."""
    if isinstance(obj, float) and math.isnan(obj):
        raise ConfigError(f"{where or 'value'}: NaN is not a valid setting", source)
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check_finite(v, source, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_finite(v, source, f"{where}#{i + 1}")


def option(annotation, name: str | None = None):
    """An ``argparse`` ``type=`` that parses and checks a command-line value by ``annotation``."""
    adapter = _adapter(annotation)

    def convert(text: str) -> Any:
        """The value ``text`` parsed and checked by ``annotation``; argparse's one-line error otherwise."""
        try:
            return adapter.validate_python(text, strict=False)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError("; ".join(line.split(": ", 1)[-1] for line in error_lines(exc))) from None

    convert.__name__ = name or str(getattr(annotation, "__name__", "value"))
    return convert


_ADAPTERS: dict[int, tuple[Any, TypeAdapter]] = {}


def _adapter(annotation) -> TypeAdapter:
    """One ``TypeAdapter`` per annotated type (building one costs ~0.1 ms; the rules are module constants)."""
    kept = _ADAPTERS.get(id(annotation))
    if kept is None or kept[0] is not annotation:
        kept = _ADAPTERS[id(annotation)] = (annotation, TypeAdapter(annotation))
    return kept[1]


def check(annotation, name: str, value):
    """``value`` checked by the rule ``annotation``, as a library function's argument ``name``.

    The rule and its phrase are those of :func:`option` and of a file key; a bool is not
    a number here. A broken rule is a :class:`~dr_scale.core.errors.ParameterError` naming ``name``.

    >>> check(PositiveInt, "rows", 5)
    5
    >>> check(Alpha, "alpha", 2)
    Traceback (most recent call last):
    ...
    dr_scale.core.errors.ParameterError: alpha should be less than 1 (got 2)
    """
    if isinstance(value, bool):
        raise ParameterError(f"`{name}` should be a number (got {value!r})")
    try:
        return _adapter(annotation).validate_python(value)
    except ValidationError as exc:
        raise ParameterError("; ".join(f"`{name}` {line.split(': ', 1)[-1]}" for line in error_lines(exc))) from None
