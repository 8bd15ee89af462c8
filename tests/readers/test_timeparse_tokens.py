"""Token rules and float limits of readers/timeparse.py, against Decimal.

GIVEN tokens with every padding character a profiler writes (quotes, space,
tab, CR, LF), tokens that are not plain decimals, very long and very short
values, other separators, and float64 values of any magnitude, WHEN converted,
THEN the result equals the exact Decimal computation (half away from zero), or
the token is marked bad / the value refused.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof.readers.timeparse import us_floats_to_ns, us_text_to_ns, us_texts_to_ns


def _ref(text: str) -> int:
    return int((Decimal(text.strip().strip('"').strip()) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


def _float_ref(x: float) -> int:
    # Decimal(x) is the double's exact value; ROUND_HALF_UP rounds ties away from zero
    with localcontext() as ctx:
        ctx.prec = 200
        return int((Decimal(x) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


@pytest.mark.parametrize("pad", ['"', " ", "\t", "\r", "\n", '" \t', '\r\n'])
def test_padding_around_a_token_is_ignored(pad):
    toks = ["12.345", "-0.5", "7", "1736408883714269.685"]
    buf = ",".join(f"{pad}{t}{pad[::-1]}" for t in toks).encode()
    out, bad = us_texts_to_ns(buf, len(toks))
    assert not bad.any()
    assert out.tolist() == [_ref(t) for t in toks]


@pytest.mark.parametrize("tok", ["+1", "1e3", "0x10", "1 2", "1-2", "--1", "1.-2", "-", ".", "1..2", "1,", "١٢", "a1",
                                 "1/2", "1:2", "1;2", "*"])
def test_anything_but_one_plain_decimal_is_bad(tok):
    # GIVEN the token between two good ones WHEN parsed vectorised THEN only it is bad (its value 0)
    buf = f"1.5;{tok};2.5".encode()
    out, bad = us_texts_to_ns(buf, 3, sep=ord(";"))
    if ";" in tok:  # a separator inside a token: the split is ambiguous, every token is bad
        assert bad.all()
        return
    assert bad.tolist() == [False, True, False] and out.tolist() == [1500, 0, 2500]


@pytest.mark.parametrize("tok", ["-.5", ".25", "5.", "-0", "0000012.5000", "-999999999999999.9995", "0.0004999"])
def test_short_and_long_forms_match_decimal(tok):
    out, bad = us_texts_to_ns(tok.encode(), 1)
    assert not bad[0] and out[0] == _ref(tok) == us_text_to_ns(tok)


def test_integer_part_limit():
    # GIVEN 16 integer digits (1e15 µs .. 9.2e15 µs fits int64 ns) and 17 (1e16 µs = 1e19 ns does not)
    out, bad = us_texts_to_ns(b"1736408883714269.685,12345678901234567.5", 2)
    assert bad.tolist() == [False, True] and out[0] == 1736408883714269685


def test_other_separators_and_a_trailing_one():
    out, bad = us_texts_to_ns(b"1.5\t2\t", 2, sep=ord("\t"))
    assert not bad.any() and out.tolist() == [1500, 2000]
    out, bad = us_texts_to_ns(b"", 0)
    assert out.dtype == np.int64 and len(out) == len(bad) == 0 and bad.dtype == bool


def test_many_chunks_give_the_same_values_as_one():
    # GIVEN 800 k tokens (more than one 8 MiB chunk of characters) with varied values
    n = 800_000
    ns = np.arange(n, dtype=np.int64) * 7919 - 3_000_000_000
    toks = [f"{'-' if v < 0 else ''}{abs(v) // 1000}.{abs(v) % 1000:03d}" for v in ns.tolist()]
    buf = ",".join(toks).encode()
    assert len(buf) > 8 << 20
    out, bad = us_texts_to_ns(buf, n)
    assert not bad.any() and np.array_equal(out, ns)


def _floats(lo, hi):
    return st.floats(min_value=lo, max_value=hi, exclude_max=True, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_floats(0.0, 2.0**53), _floats(0.0, 2.0**53).map(lambda v: -v), _floats(2.0**-9, 2.0**-5),
                 _floats(2.0**-9, 2.0**-5).map(lambda v: -v)))
def test_float_conversion_is_the_exact_product_rounded_once(x):
    # GIVEN a double below 2**53 µs in magnitude (subnormal to huge) THEN exactly round(Decimal(x) * 1000)
    assert us_floats_to_ns(np.array([x])).tolist() == [_float_ref(x)]


def test_float_conversion_where_the_rounding_shift_once_overflowed():
    """GIVEN |x| in [2**-9, 2**-5) µs, where prod + half passed 2**63 (0.0038 µs came back as -4 ns)
    WHEN converted THEN the exact rounded product, with its sign."""
    vals = [0.0038, 0.0077, 0.0156, -0.0038, 0.00351, 0.0155, 2.0**-9, 2.0**-5 - 2.0**-30]
    got = us_floats_to_ns(np.array(vals)).tolist()
    assert got == [_float_ref(v) for v in vals]
    assert got[:4] == [4, 8, 16, -4] and all((g > 0) == (v > 0) for g, v in zip(got, vals))


def test_sixteen_digit_integer_parts_are_bad_not_wrapped():
    """GIVEN µs texts whose ns value passes int64 (16-digit integer parts from 9223372036854775.808)
    WHEN parsed vectorised THEN they are marked bad (the scalar parser then says they are out of range),
    while the largest value that fits is exact."""
    toks = [b"9223372036854775.808", b"9999999999999999.999", b"9223372036854775.807", b"-9223372036854775.807"]
    out, bad = us_texts_to_ns(b",".join(toks), len(toks))
    assert bad.tolist() == [True, True, False, False]
    assert out.tolist()[2:] == [9223372036854775807, -9223372036854775807]


def test_float_conversion_edge_values():
    vals = [0.0, -0.0, 5e-324, 0.0004999, 0.0015, -0.0015, 0.0025, 1.0005, 2.0**52 + 0.5, -(2.0**53 - 1), 2.0**-20]
    assert us_floats_to_ns(np.array(vals)).tolist() == [_float_ref(v) for v in vals]
    assert us_floats_to_ns(np.array([])).dtype == np.int64
    for bad, msg in ((2.0**53, "time value out of range"), (-(2.0**53), "time value out of range"),
                     (float("nan"), "non-finite time value"), (float("-inf"), "non-finite time value")):
        with pytest.raises(ValueError, match=f"^{msg}$"):
            us_floats_to_ns(np.array([1.0, bad]))


def test_scalar_parse_refuses_what_is_not_a_number():
    for text in ("abc", "", "1.2.3", "--1"):
        with pytest.raises(ValueError, match="^not a number: "):
            us_text_to_ns(text)
    for text in ("inf", "NaN", "-Infinity"):
        with pytest.raises(ValueError, match="^not a finite number: "):
            us_text_to_ns(text)
    with pytest.raises(OverflowError, match="^time value out of range: "):
        us_text_to_ns("1e31")
    assert us_text_to_ns("1e30") == 10**33  # the last exponent accepted (adjusted() == 30)
    assert us_text_to_ns(b'"2.5"') == 2500 and us_text_to_ns(memoryview(b" 7 ")) == 7000
