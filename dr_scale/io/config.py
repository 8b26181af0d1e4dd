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
import numbers
import sys
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
#: A finite float ≥ 0: a generated world's position bias η.
NonNegativeFinite = Annotated[float, Field(ge=0, allow_inf_nan=False)]
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
#: The target mean reward of a generated click log, in (0, 0.5] (:mod:`dr_scale.synthetic.bandit`).
ClickRate = Annotated[float, Field(gt=0, le=0.5, allow_inf_nan=False)]
#: The smallest penalty λ taken: float64's smallest normal number (a subnormal λ has lost its precision).
MIN_PENALTY = sys.float_info.min
#: The smallest relative tolerance taken: float64's precision (no solve in float64 reaches a smaller residual).
MIN_RTOL = sys.float_info.epsilon


def _number(value) -> float | None:
    """``value`` as a float (a string as the command line gives it), or None if it is no number."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else None


def penalty(value, name: str = "lam", auto: bool = True):
    """λ by the one rule of every fitter, from the command line to the solver: a finite number ≥ 2.2e-308
    (:data:`MIN_PENALTY`), or ``"auto"`` where ``auto``; anything else a
    :class:`~dr_scale.core.errors.ParameterError` naming ``name``. A string is read as a number.

    >>> penalty("10"), penalty("auto"), penalty(2)
    (10.0, 'auto', 2.0)
    >>> penalty(0)
    Traceback (most recent call last):
    ...
    dr_scale.core.errors.ParameterError: lam must be a positive number or 'auto', got 0
    """
    if auto and value == "auto" and isinstance(value, str):
        return value
    number = _number(value)
    if number is None or not number > 0:
        raise ParameterError(f"`{name}` must be a positive number{' or ' + repr('auto') if auto else ''}, "
                             f"got {value!r}")
    if not math.isfinite(number):
        raise ParameterError(f"`{name}` must be a finite number (an infinite penalty fits nothing), got {value!r}")
    if number < MIN_PENALTY:
        raise ParameterError(f"`{name}` = {value} is below float64's smallest normal number ({MIN_PENALTY:.3g}); "
                             "give a larger λ")
    return number


def tolerance(value, name: str = "rtol") -> float:
    """A solver's relative tolerance (CG's ‖residual‖ ≤ rtol ‖rhs‖, L-BFGS's ‖∇L‖ ≤ rtol ‖∇L(x₀)‖) by the one rule
    of every fitter: a number in [2.2e-16, 1) (:data:`MIN_RTOL`, float64's precision); anything else a
    :class:`~dr_scale.core.errors.ParameterError` naming ``name``. A string is read as a number.

    >>> tolerance("1e-6")
    1e-06
    >>> tolerance(1e-20)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dr_scale.core.errors.ParameterError: rtol must be in [2.22e-16, 1) (float64's precision ...), got 1e-20
    """
    number = _number(value)
    if number is None or not MIN_RTOL <= number < 1:
        raise ParameterError(f"`{name}` must be in [{MIN_RTOL:.3g}, 1) (float64's precision is {MIN_RTOL:.3g}: a "
                             f"smaller residual is never reached), got {value!r}")
    return number


def rule_option(rule, name: str, **kwargs):
    """An ``argparse`` ``type=`` checking a command-line value by ``rule`` (:func:`penalty`, :func:`tolerance`),
    its messages naming ``name``."""
    def convert(text: str):
        """``rule(text)``, a :class:`~dr_scale.core.errors.ParameterError` as argparse's error."""
        try:
            return rule(text, name, **kwargs)
        except ParameterError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


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
