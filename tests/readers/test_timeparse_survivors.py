"""Edge rules of readers/timeparse.py not pinned by test_timeparse*.py, against exact arithmetic.

Checked: the scalar parser stays exact for plain decimals with more significant
digits than the default 28-digit :mod:`decimal` context (integer-only,
fraction-only and full forms), it refuses bytes that are not ASCII and letters
around a number with the same ``ValueError`` as any other non-number.
Oracle: :class:`decimal.Decimal` in a context wide enough that no step rounds,
rounded once to ns half away from zero (``ROUND_HALF_UP``), and
:class:`fractions.Fraction` as a second, rounding-free view of the same value.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

import pytest

from expo_prof.readers.timeparse import us_text_to_ns


def _exact_ref(text: str) -> int:
    """µs text → ns with no intermediate rounding (precision far above any test token)."""
    with localcontext() as ctx:
        ctx.prec = 500
        return int((Decimal(text) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


def _fraction_ref(text: str) -> int:
    """The same value via Fraction: nearest integer ns, ties away from zero."""
    q = Fraction(text) * 1000
    mag = abs(q)
    n = int(mag)  # floor for a non-negative value
    if mag - n >= Fraction(1, 2):
        n += 1
    return -n if q < 0 else n


# Plain decimals with 29..40 significant digits, in every form the fast path accepts: digits on
# both sides, integer only, fraction only, a bare trailing dot. Several sit just below a .5 ns
# boundary, where rounding the product to 28 digits first would round up (0.4999…9 -> 0.5 -> 1).
_LONG_PLAIN = [
    ".0004999999999999999999999999999999",
    "-.0004999999999999999999999999999999",
    "0.0004999999999999999999999999999999",
    "12.3454999999999999999999999999999999",
    "1234567890123456789012345678901",
    "-98765432109876543210987654321",
    "1234567890123456789012345678901.",
    "1736408883714269.6854999999999999999999999",
]


@pytest.mark.parametrize("text", _LONG_PLAIN)
def test_plain_decimals_with_more_than_28_digits_are_exact(text):
    # GIVEN a plain decimal longer than the default Decimal precision (28 significant digits)
    # WHEN the scalar parser converts it to ns
    got = us_text_to_ns(text)
    # THEN the result is the exact value rounded once, half away from zero (two independent oracles)
    assert _exact_ref(text) == _fraction_ref(text)
    assert got == _exact_ref(text)


def test_long_values_below_a_half_ns_boundary_round_down():
    # GIVEN values whose 4th..nth fraction digits are 4999…9 (just below half a ns), long enough that
    # a 28-digit intermediate product would read them as exactly .5
    texts = [t for t in _LONG_PLAIN if "4999999999999999999999" in t]
    # WHEN parsed
    got = [us_text_to_ns(t) for t in texts]
    # THEN each lies within half a ns below the exact value, i.e. it rounded towards zero
    for t, g in zip(texts, got):
        exact = Fraction(t) * 1000
        assert abs(exact) - abs(g) > 0 and abs(exact) - abs(g) < Fraction(1, 2), (t, g)


@pytest.mark.parametrize(
    "raw",
    [
        "１２.５".encode(),  # full-width digits in UTF-8
        "٣.٥".encode(),  # Arabic-Indic digits in UTF-8
        b"1.5\xb5s",  # a Latin-1 micro sign after the value
        b'"\xff7"',  # a stray high byte inside quotes
    ],
)
def test_bytes_that_are_not_ascii_are_refused_like_any_non_number(raw):
    # GIVEN bytes (a raw JSON/CSV cell) holding a non-ASCII byte
    # WHEN the scalar parser reads them
    # THEN it raises the parser's own ValueError ("not a number"), not a codec error,
    #      and the bytes view and memoryview view behave the same
    for view in (raw, bytearray(raw), memoryview(raw)):
        with pytest.raises(ValueError, match="^not a number: ") as err:
            us_text_to_ns(view)
        assert type(err.value) is ValueError


@pytest.mark.parametrize("text", ["X1.5", "1.5X", "XX2XX", '"X3"', "x4", "5.25us"])
def test_letters_around_a_number_are_refused(text):
    # GIVEN a number with letters before or after it (only whitespace and double quotes are padding)
    # WHEN parsed by the scalar parser
    # THEN it is not a number
    with pytest.raises(ValueError, match="^not a number: "):
        us_text_to_ns(text)
    # and the same number without the letters parses (the letters alone are the reason)
    core = text.strip('"').strip("Xxus")
    assert us_text_to_ns(core) == _exact_ref(core)
