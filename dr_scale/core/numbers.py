"""Numbers for people: one rule for every printed table, report page and plot.

A number alone is shown to a few significant digits (3 unless asked): ``0.00259407`` reads
``0.00259``, ``0.29`` reads ``0.290`` (so a column of numbers lines up), ``2645.3`` reads
``2645`` (digits left of the point are never rounded away) and ``1.234e-07`` reads ``1.23e-07``.

An estimate is shown to the precision its standard error supports: the value and its interval's
bounds are rounded to the decimal place of the standard error's second significant digit, the
standard error itself to two significant digits (JCGM 100:2008, *Guide to the expression of
uncertainty in measurement*, 7.2.6), so ``0.0360967 ± 0.02485, [-0.0126097, 0.0848031]`` reads
``0.036 ± 0.025, [-0.013, 0.085]``. Rounding the value and the bounds to one decimal place keeps
their order: a printed interval contains its printed value whenever the interval contains the
value. Machine outputs (JSON) keep every digit.
"""

from __future__ import annotations

import math

#: What an undefined number (None, NaN, ±inf) reads as.
MISSING = "—"
#: The most decimals a number rounded to its standard error's place gets.
MAX_DECIMALS = 10


def _exponent(x: float, digits: int) -> int:
    """The power of ten of x's leading digit once x is rounded to ``digits`` significant digits."""
    return int(f"{x:.{digits - 1}e}".rpartition("e")[2])


def number(x: float | None, digits: int = 3, *, sign: bool = False, scale: float | None = None) -> str:
    """``x`` as text for a person: ``digits`` significant digits, or rounded to the place ``scale`` supports.

    Parameters
    ----------
    x : float or None
        The number; None, NaN and ±inf read :data:`MISSING`.
    digits : int, default 3
        Significant digits of ``x`` (trailing zeros kept: ``0.290``) — or, with ``scale``, of
        ``scale``: ``x`` is then rounded to the decimal place of the ``digits``-th significant digit
        of ``scale`` (2 for an estimate's standard error, JCGM 100:2008 7.2.6), so numbers rounded to
        one scale line up and keep their order.
    sign : bool, default False
        Write "+" before a positive number (a difference).
    scale : float, optional
        The uncertainty of ``x`` (its standard error); ignored when not positive and finite.

    Returns
    -------
    str
        Fixed-point text; scientific notation (``1.23e-07``) only for a number alone whose leading
        digit is below 10⁻⁴ or above 10¹⁴.

    Examples
    --------
    >>> number(0.00259407), number(0.29), number(2645.3), number(1.0), number(-1.2345e-07), number(None)
    ('0.00259', '0.290', '2645', '1.00', '-1.23e-07', '—')
    >>> number(0.0360967, 2, scale=0.02485), number(-0.0126097, 2, scale=0.02485), number(0.02485, 2)
    ('0.036', '-0.013', '0.025')
    >>> number(0.00377597, 2, scale=3.995e-05), number(0.0032, 2, sign=True, scale=0.0011)
    ('0.003776', '+0.0032')
    """
    if x is None or not math.isfinite(x):
        return MISSING
    x = float(x)
    plus = "+" if sign else ""
    if scale is not None and math.isfinite(scale) and scale > 0:
        decimals = min(max(digits - 1 - _exponent(float(scale), digits), 0), MAX_DECIMALS)
        text = format(x, f"{plus}.{decimals}f")
        return format(0.0, f"{plus}.{decimals}f") if float(text) == 0 else text  # never "-0.000"
    if x == 0:
        return "0"
    e = _exponent(x, digits)
    if not -5 < e < 15:
        return format(x, f"{plus}.{digits - 1}e")
    return format(x, f"{plus}.{max(digits - 1 - e, 0)}f")


def estimate(value: float | None, stderr: float | None, ci: tuple[float | None, float | None] = (None, None), *,
             sign: bool = False) -> tuple[str, str, str]:
    """An estimate as text: its value, standard error and interval ``[lo, hi]``, each by :func:`number` rounded to
    the place of the standard error's second significant digit (JCGM 100:2008 7.2.6).

    Examples
    --------
    >>> estimate(0.0360967, 0.02485, (-0.0126097, 0.0848031))
    ('0.036', '0.025', '[-0.013, 0.085]')
    >>> estimate(-0.0449654, 0.01321, (-0.0708511, -0.0190798), sign=True)
    ('-0.045', '0.013', '[-0.071, -0.019]')
    """
    lo, hi = (number(x, 2, sign=sign, scale=stderr) for x in ci)
    return number(value, 2, sign=sign, scale=stderr), number(stderr, 2, scale=stderr), f"[{lo}, {hi}]"


def percent(share: float | None, digits: int = 2) -> str:
    """A share in [0, 1] as a percentage to ``digits`` significant digits (:func:`number`).

    Examples
    --------
    >>> percent(0.6834), percent(0.05), percent(0.000123), percent(0.0), percent(None)
    ('68%', '5.0%', '0.012%', '0%', '—')
    """
    return MISSING if share is None or not math.isfinite(share) else number(100 * share, digits) + "%"
