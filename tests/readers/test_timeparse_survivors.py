"""Edge rules of readers/timeparse.py not pinned by test_timeparse*.py, against exact arithmetic.

Checked: the vectorised parser reads one-character tokens at every position of
the buffer (the first one included), accepts one trailing separator for any
token count, and returns int64 values / bool flags also when it gives up on a
buffer whose separators do not match the token count; the float converter
reads float32 input by its exact float64 value and returns an empty array for
an empty input; the scalar parser stays exact for plain decimals with more
significant digits than the default 28-digit :mod:`decimal` context
(integer-only, fraction-only and full forms), and refuses bytes that are not
ASCII and letters around a number with the same ``ValueError`` as any other
non-number.
Oracle: :class:`decimal.Decimal` in a context wide enough that no step rounds,
rounded once to ns half away from zero (``ROUND_HALF_UP``), and
:class:`fractions.Fraction` as a second, rounding-free view of the same value.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from expo_prof.readers.timeparse import us_floats_to_ns, us_text_to_ns, us_texts_to_ns


def _exact_ref(text: str) -> int:
    """µs text → ns with no intermediate rounding (precision far above any test token)."""
    with localcontext() as ctx:
        ctx.prec = 500
        return int((Decimal(text) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


def _float_ref(x: float) -> int:
    """Exact value of a double × 1000, rounded once, half away from zero."""
    return _exact_ref(str(Decimal(x)))


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


@pytest.mark.parametrize("sep", [",", ";", "\t", "\x1f"])
def test_one_digit_tokens_parse_at_every_position_of_the_buffer(sep):
    # GIVEN one-digit values at the start, middle and end of a buffer, alone and mixed with longer ones
    buffers = [["8"], ["2", "7"], ["5", "12.25", "3"], ["0", "-1", "9"], ["4", "6.5"]]
    for toks in buffers:
        for trailing in ("", sep):
            buf = (sep.join(toks) + trailing).encode()
            # WHEN parsed vectorised
            out, bad = us_texts_to_ns(buf, len(toks), sep=ord(sep))
            # THEN every token is good and equals the exact Decimal value and the scalar parser
            assert not bad.any(), (buf, bad)
            assert out.tolist() == [_exact_ref(t) for t in toks] == [us_text_to_ns(t) for t in toks]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_a_trailing_separator_is_accepted_for_any_token_count(n):
    # GIVEN n values joined by commas, with and without one trailing comma
    toks = [f"{k * 37}.{k * 7 % 1000:03d}" if k % 2 else f"-{k}.5" for k in range(1, n + 1)]
    for trailing in ("", ","):
        buf = (",".join(toks) + trailing).encode()
        # WHEN parsed vectorised
        out, bad = us_texts_to_ns(buf, n)
        # THEN every token is read, exactly
        assert not bad.any(), buf
        assert out.tolist() == [_exact_ref(t) for t in toks]


@pytest.mark.parametrize(
    ("buf", "n"),
    [(b"1,5", 1), (b"1.5,2,5,3.0", 3), (b"1.5", 2), (b",1.5", 1), (b"1,2,3,", 2)],
)
def test_a_separator_count_mismatch_gives_int64_zeros_and_bool_flags(buf, n):
    # GIVEN a buffer whose separators cannot split it into n tokens (a separator inside a cell,
    #       one too few, one too many without being trailing)
    # WHEN parsed vectorised
    out, bad = us_texts_to_ns(buf, n)
    # THEN every token is flagged bad, with the same array types as a successful parse, so callers
    #      can write exact int64 ns into `out` and select with `bad` / `~bad`
    good_out, good_bad = us_texts_to_ns(b"1.5", 1)
    assert (out.dtype, bad.dtype) == (good_out.dtype, good_bad.dtype) == (np.dtype(np.int64), np.dtype(bool))
    assert out.shape == bad.shape == (n,)
    assert bad.all() and not (~bad).any() and not out.any()
    big = _exact_ref("9223372036854775.807")
    out[0] = big
    assert int(out[0]) == big  # a float64 array would round this to 9223372036854775808


def test_float32_input_is_converted_by_its_exact_value():
    # GIVEN float32 µs values (every float32 is exactly a float64), both signs, in the 40 float32 steps
    #       from 0.0005, 0.0015 and 0.0025 µs towards zero (x * 1000 just under a .5 ns tie, where a
    #       product rounded to float32 lands on the tie) and from 0.0001 and 0.00195 µs
    vals = []
    for start in (0.0005, 0.0015, 0.0025, 0.0001, 0.00195):
        x = np.float32(start)
        for _ in range(40):
            vals += [x, -x]
            x = np.nextafter(x, np.float32(0))
    a = np.array(vals, dtype=np.float32)
    # WHEN converted
    got = us_floats_to_ns(a)
    # THEN each equals the exact product of its value, the same as for the float64 copy
    assert got.dtype == np.int64
    assert got.tolist() == [_float_ref(float(v)) for v in a.tolist()]
    assert got.tolist() == us_floats_to_ns(a.astype(np.float64)).tolist()


@pytest.mark.parametrize("empty", [np.array([]), np.zeros(0, dtype=np.float32), []])
def test_no_float_values_give_no_ns_values(empty):
    # GIVEN an empty input WHEN converted THEN an empty int64 array (one output per input value)
    got = us_floats_to_ns(empty)
    assert got.dtype == np.int64 and got.shape == (0,) and got.tolist() == []


@pytest.mark.parametrize("text", [t + "e0" for t in _LONG_PLAIN] + ["+" + t for t in _LONG_PLAIN if t[0] != "-"]
                         + ["4999999999999999999999999999999e-34", "-1.7364088837142696854999999999999999e15"])
def test_exponent_and_plus_forms_are_exact_whatever_the_decimal_context(text):
    # GIVEN a long value in a form the fast path does not take (an exponent, a leading "+"), and a process
    # whose decimal context was narrowed by someone else
    with localcontext() as ctx:
        ctx.prec = 5
        # WHEN parsed THEN it is the exact value rounded once to ns, as for the plain form
        assert us_text_to_ns(text) == _exact_ref(text) == _fraction_ref(text)


@pytest.mark.parametrize("text", ["1" * 40, "-" + "9" * 35 + ".0005", "4" * 33 + ".4999"])
def test_plain_decimals_are_exact_at_any_length(text):
    # GIVEN a plain decimal with more integer digits than the exponent form's range check allows (10**31 µs)
    # WHEN parsed THEN it is still the exact value rounded once (the plain form is integer arithmetic)
    assert us_text_to_ns(text) == _exact_ref(text) == _fraction_ref(text)
