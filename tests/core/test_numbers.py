"""Numbers for people (dr_scale.core.numbers): significant digits, estimates to their standard error's place."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dr_scale.core.numbers import MISSING, number, percent

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize("x, digits, text", [
    (0.00259407, 3, "0.00259"), (0.0025, 3, "0.00250"), (2645.3, 3, "2645"), (0.999999, 3, "1.00"),
    (-0.0004999, 3, "-0.000500"), (1.2345e-07, 3, "1.23e-07"), (1e-05, 3, "1.00e-05"), (3.0, 2, "3.0"),
    (123.456, 4, "123.5"), (0.0, 3, "0"),
])
def test_a_number_alone_has_significant_digits_and_no_exponent_in_the_usual_range(x, digits, text):
    assert number(x, digits) == text


@pytest.mark.parametrize("x", [None, math.nan, math.inf, -math.inf])
def test_undefined_numbers_read_missing(x):
    assert number(x) == MISSING and number(x, 2, scale=0.1) == MISSING and percent(x) == MISSING


def test_an_estimate_is_rounded_to_its_standard_errors_second_digit():
    se = 0.02485
    assert [number(v, 2, scale=se) for v in (0.0360967, se, -0.0126097, 0.0848031)] == [
        "0.036", "0.025", "-0.013", "0.085"]
    assert number(0.0069712, 2, scale=0.0069712) == "0.0070"  # trailing zero kept: two significant digits
    assert number(0.0412, 2, sign=True, scale=0.004) == "+0.0412"
    assert number(-1e-9, 2, scale=0.01) == "0.000"  # never "-0.000"
    assert number(0.5, 2, scale=0.0) == "0.50"  # no usable scale: significant digits of x


@pytest.mark.slow
@given(finite, finite, finite, st.floats(min_value=1e-9, max_value=1e3))
def test_a_printed_interval_contains_its_printed_value(a, b, c, se):
    lo, v, hi = sorted((a, b, c))
    lo_t, v_t, hi_t = (float(number(x, 2, scale=se)) for x in (lo, v, hi))
    assert lo_t <= v_t <= hi_t


@given(finite, st.integers(min_value=1, max_value=6))
def test_significant_digits_are_within_half_a_unit_of_the_last_digit(x, digits):
    text = number(x, digits)
    if x == 0:
        assert text == "0"
        return
    got = float(text)
    exponent = math.floor(math.log10(abs(got))) if got else 0
    assert abs(got - x) <= 0.5 * 10.0 ** (max(exponent - digits + 1, -15)) * (1 + 1e-9) + 1e-300
