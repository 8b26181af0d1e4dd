"""The estimators by name and the spec grammar: ``"DR"``, ``"ClippedDR(max_weight=50)"``, a table."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import fields

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.ope.estimators.balanced import BalancedIPW
from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.direct import DirectMethod
from dr_scale.ope.estimators.dr import SNDR, DoublyRobust
from dr_scale.ope.estimators.embed import MIPS, SNMIPS
from dr_scale.ope.estimators.ips import IPS, SNIPS
from dr_scale.ope.estimators.replay import ReplayMethod
from dr_scale.ope.estimators.subgaussian import SubGaussianDR, SubGaussianIPS
from dr_scale.ope.estimators.tuning import ClippedDR, DRos, DRTuning, IPSTuning, SwitchDR, SwitchDRTuning

ESTIMATORS: dict[str, type[Estimator]] = {
    cls.name: cls for cls in (DirectMethod, IPS, DoublyRobust, SNIPS, SNDR, SwitchDR, ClippedDR, DRos, SubGaussianIPS,
                              SubGaussianDR, IPSTuning, DRTuning, SwitchDRTuning, MIPS, SNMIPS, ReplayMethod,
                              BalancedIPW)}
#: The estimators a command runs when none are named (with a reward model; IPS and SNIPS without one).
STANDARD_ESTIMATORS = ("DM", "IPS", "DR", "SNIPS", "SNDR", "SwitchDR", "ClippedDR")
_SPEC = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*$")
_LIST_COMMA = re.compile(r",\s*(?![^()]*\))")  # a comma outside parentheses
_ARG_COMMA = re.compile(r",(?![^\[\]()]*[\])])")  # a comma outside brackets: lambdas=[10, 100], delta=0.1


def parse_estimator_list(text: str, where: str = "estimators") -> list[str]:
    """Estimator specs from a comma-separated string (``"DR,IPS,ClippedDR(max_weight=50)"``)."""
    specs = [spec.strip() for spec in _LIST_COMMA.split(str(text))]
    if not all(specs):
        raise UserError(f"{where} {text!r}: an empty name; give comma-separated names from {', '.join(ESTIMATORS)}")
    return specs


def _forms(cls: type[Estimator]) -> str:
    """How to write an estimator of class ``cls``: its bare name and an example with parameters."""
    example = getattr(cls, "example", "") or {"ClippedDR": "ClippedDR(max_weight=50)",
                                              "SwitchDR": "SwitchDR(tau=20)"}.get(cls.name, "")
    if not example:
        return cls.name
    return f"{cls.name}, {example}" if " or " in example else f"{cls.name} or {example}"


def parse_estimator(spec: str | dict) -> tuple[str, Estimator]:
    """An estimator from ``"DR"``, ``"ClippedDR(max_weight=50)"`` or a table ``{"name": …, "max_weight": 50}``.

    Returns (label, estimator): the label is the name, with the parameters when given (``repr``, which
    parses back). A list parameter is written in brackets (``DRos(lambdas=[10, 100, inf])``). A bad spec
    raises a ``UserError`` naming the spec and the forms its estimator accepts.

    >>> parse_estimator("ClippedDR(max_weight=50)")
    ('ClippedDR(max_weight=50.0)', ClippedDR(max_weight=50.0))
    >>> parse_estimator({"name": "SwitchDR", "tau": 20})[1]
    SwitchDR(tau=20.0)
    >>> parse_estimator("DRos(lambdas=[100, 10], tuning_method=mse)")[0]
    'DRos(lambdas=[10.0, 100.0], tuning_method=mse)'
    """
    if isinstance(spec, dict):
        params = {k: v for k, v in spec.items() if k != "name"}
        name = spec.get("name")
        shown: object = f"{name}({', '.join(f'{k}={v}' for k, v in params.items())})" if params else name
    else:
        shown = spec
        match = _SPEC.match(str(spec))
        if not match:
            raise UserError(f"cannot read estimator {shown!r}; write e.g. DR or ClippedDR(max_weight=50)")
        name, args = match.group(1), (match.group(2) or "").strip()
        params = {}
        for arg in filter(None, (a.strip() for a in _ARG_COMMA.split(args))):
            key, eq, value = arg.partition("=")
            if not eq:
                example = getattr(ESTIMATORS.get(name), "example", "")
                raise UserError(f"estimator {shown!r}: write parameters as name=value"
                                + (f", e.g. {example}" if example else ""))
            if key.strip() in params:
                raise UserError(f"estimator {shown!r}: {key.strip()} is given twice; give each parameter once")
            params[key.strip()] = value.strip().strip("'\"")
    if name not in ESTIMATORS:
        raise UserError(f"unknown estimator {name!r}" + (f" in {shown!r}" if shown != name else "")
                        + f"; choose from {', '.join(ESTIMATORS)}")
    cls = ESTIMATORS[name]
    allowed = [f.name for f in fields(cls)]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise UserError(f"estimator {shown!r}: {name} has no parameter {', '.join(unknown)}"
                        + (f"; it takes {', '.join(allowed)}: write e.g. {_forms(cls)}" if allowed
                           else "; it takes none"))
    try:
        estimator = cls(**{k: None if str(v).lower() == "none" else v for k, v in params.items()})
    except UserError as exc:
        raise UserError(f"estimator {shown!r}: {exc}; write e.g. {_forms(cls)}") from None
    return (getattr(estimator, "label", None) or repr(estimator) if params else name), estimator


def make_estimators(specs: Iterable[str | dict], *, clip: float | None = None,
                    tau: float | None = None) -> dict[str, Estimator]:
    """Estimators by spec (:func:`parse_estimator`), keyed by label; ``clip`` / ``tau`` set the bare names'.

    A spec is a name from ``DM``, ``IPS``, ``DR``, ``SNIPS``, ``SNDR``, ``SwitchDR``, ``ClippedDR``,
    ``DRos``, ``SubGaussianIPS``, ``SubGaussianDR``, ``IPSTuning``, ``DRTuning``, ``SwitchDRTuning``, ``MIPS``,
    ``SNMIPS``, ``RM`` (:class:`ReplayMethod`), ``BIPW`` (:class:`BalancedIPW`), optionally with parameters
    (``"ClippedDR(max_weight=50)"``, ``"DRos(lambda_=10)"``, ``"IPS(lambda_=50)"``), or a table
    (``{"name": "SwitchDR", "tau": 20}``). A spec with parameters is labelled with them. ``DRos``,
    ``SubGaussianIPS``, ``SubGaussianDR``, ``IPSTuning``, ``DRTuning`` and ``SwitchDRTuning`` without
    ``lambda_`` choose it from the data as obp's ``…Tuning`` classes do.

    Parameters
    ----------
    specs : list or tuple of str or dict
        The estimators' specs, each label at most once.
    clip : float or None, default None
        The clip M of a bare ``ClippedDR`` (None: tuned).
    tau : float or None, default None
        The threshold τ of a bare ``SwitchDR`` (None: tuned).

    Returns
    -------
    dict of str to Estimator
        The estimators, keyed by label, in the order of ``specs``.

    Raises
    ------
    UserError
        An unknown name or parameter, a parameter given twice, a label given twice, ``specs`` not a list, or
        ``clip`` (``tau``) without a bare ``ClippedDR`` (``SwitchDR``) to set.

    See Also
    --------
    Estimator : What each value is.
    dr_scale.Evaluation : Takes the same specs.

    Examples
    --------
    >>> make_estimators(["DR", "IPS", "ClippedDR(max_weight=50)"])
    {'DR': DoublyRobust(), 'IPS': IPS(), 'ClippedDR(max_weight=50.0)': ClippedDR(max_weight=50.0)}
    >>> make_estimators(["SwitchDR", {"name": "SwitchDR", "tau": 5}], tau=20)
    {'SwitchDR': SwitchDR(tau=20.0), 'SwitchDR(tau=5.0)': SwitchDR(tau=5.0)}
    """
    if not isinstance(specs, (list, tuple)):
        raise UserError(f"estimators {specs!r}: give a list of names, e.g. [\"DR\", \"IPS\"]")
    out = {}
    for spec in specs:
        label, estimator = parse_estimator(spec)
        if label in out:
            raise UserError(f"estimator {label!r} is named twice")
        if label == "ClippedDR" and clip is not None:
            estimator = ClippedDR(max_weight=clip)
        elif label == "SwitchDR" and tau is not None:
            estimator = SwitchDR(tau=tau)
        out[label] = estimator
    for value, param, bare in ((clip, "clip", "ClippedDR"), (tau, "tau", "SwitchDR")):
        if value is not None and bare not in out:
            own = [label for label in out if label.startswith(bare + "(")]
            raise ParameterError(f"`{param}` sets the {'clip M' if param == 'clip' else 'threshold τ'} of a bare "
                                 f"{bare}, and none of the estimators ({', '.join(out)}) is one"
                                 + (f" ({own[0]} sets its own)" if own else "")
                                 + f": add {bare} or drop `{param}`")
    return out
