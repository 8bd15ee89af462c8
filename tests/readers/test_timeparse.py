"""Exact µs → ns conversion (expo_prof.readers.timeparse)."""

from __future__ import annotations

import random
from decimal import Decimal

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from expo_prof.readers.timeparse import FLOAT_EXACT_LIMIT_US, us_floats_to_ns, us_text_to_ns, us_texts_to_ns


def _ref(text: str) -> int:
    return int((Decimal(text.strip().strip('"').strip()) * 1000).to_integral_value(rounding="ROUND_HALF_UP"))


def test_known_ascend_string_timestamp_is_exact():
    """GIVEN the Start Time cell torch_npu writes (tab inside the quotes)
    WHEN it is parsed THEN every digit survives (a float64 would give ...269.75 µs)."""
    assert us_text_to_ns('"1736408883714269.685\t"') == 1736408883714269685
    assert float("1736408883714269.685") * 1000 != 1736408883714269685  # why: float64 loses it


@given(st.integers(min_value=0, max_value=9 * 10**17), st.integers(min_value=0, max_value=9))
def test_text_parse_matches_decimal(ns, extra):
    """GIVEN any µs decimal with up to 4 fraction digits WHEN parsed (scalar and vectorised)
    THEN both equal the Decimal reference rounded half up."""
    text = f"{ns // 1000}.{ns % 1000:03d}{extra}"
    assert us_text_to_ns(text) == _ref(text)
    out, bad = us_texts_to_ns(f'"{text}\t",{text}'.encode(), 2)
    assert not bad.any()
    assert out.tolist() == [_ref(text), _ref(text)]


def test_vectorised_parse_marks_non_numbers_and_keeps_the_rest():
    """GIVEN a mix of good and bad tokens WHEN parsed vectorised THEN good ones are exact, bad ones flagged."""
    toks = ["12.5", "abc", "-3.25", "", "1.2.3", "7", " 9.9995 ", "1e-05"]
    out, bad = us_texts_to_ns(",".join(toks).encode(), len(toks))
    assert bad.tolist() == [False, True, False, True, True, False, False, True]
    assert out[[0, 2, 5, 6]].tolist() == [12500, -3250, 7000, 10000]
    assert us_text_to_ns("1e-05") == 0 and us_text_to_ns("2.5e-3") == 3  # exponent via Decimal


def test_float_conversion_is_exact_below_the_limit_where_naive_rounding_is_not():
    """GIVEN 3-decimal µs values below 2**43 µs as the nearest float64 (what a JSON decoder yields)
    WHEN converted THEN us_floats_to_ns returns the exact ns, while round(x*1000) is off for some."""
    rng = random.Random(7)
    ns = np.array([rng.randrange(0, int(FLOAT_EXACT_LIMIT_US) * 1000) for _ in range(200_000)], dtype=np.int64)
    floats = np.array([float(f"{v // 1000}.{v % 1000:03d}") for v in ns.tolist()])
    assert np.array_equal(us_floats_to_ns(floats), ns)
    naive = np.array([round(x * 1000) for x in floats.tolist()], dtype=np.int64)
    assert (naive != ns).sum() > 0  # the reason for the exact product


def test_float_conversion_rounds_half_away_from_zero_and_handles_signs():
    """GIVEN exactly representable halves and negatives WHEN converted THEN rounding is half away from zero."""
    vals = np.array([0.0005, -0.0005, 1.5, -2.25, 0.0, 123.0])
    # 0.0005 is not exactly representable: its double is slightly above 0.0005 -> rounds to 1 ns.
    assert us_floats_to_ns(vals).tolist() == [1, -1, 1500, -2250, 0, 123000]


@given(st.integers(min_value=-9 * 10**17, max_value=9 * 10**17), st.text(alphabet="0123456789", min_size=1, max_size=4))
def test_negative_and_long_fractions_round_half_away_from_zero(ns, more):
    """GIVEN any µs decimal, negative ones included, with 4 to 7 fraction digits
    WHEN parsed (scalar and vectorised) THEN both equal the Decimal reference (half away from zero)."""
    sign = "-" if ns < 0 else ""
    text = f"{sign}{abs(ns) // 1000}.{abs(ns) % 1000:03d}{more}"
    assert us_text_to_ns(text) == _ref(text)
    out, bad = us_texts_to_ns(f"{text},{text}".encode(), 2)
    assert not bad.any()
    assert out.tolist() == [_ref(text), _ref(text)]


def test_negative_rounding_examples():
    """GIVEN -3.2506 µs and -3.2504 µs WHEN parsed THEN -3251 ns and -3250 ns (away from zero, not toward +inf)."""
    toks = ["-3.2506", "-3.2504", "-0.0005", "3.2506"]
    out, bad = us_texts_to_ns(",".join(toks).encode(), len(toks))
    assert not bad.any()
    assert out.tolist() == [-3251, -3250, -1, 3251]
    assert [us_text_to_ns(t) for t in toks] == [-3251, -3250, -1, 3251]


def test_separator_count_mismatch_marks_every_token_bad():
    """GIVEN a buffer whose separators do not split into n tokens (a separator inside a cell)
    WHEN parsed vectorised THEN every token is marked bad (callers then parse them one by one)."""
    out, bad = us_texts_to_ns(b"1.5,2,5,3.0", 3)
    assert bad.tolist() == [True, True, True] and out.tolist() == [0, 0, 0]
    # A trailing separator is allowed and does not count as a token.
    out, bad = us_texts_to_ns(b"1.5,2.25,", 2)
    assert not bad.any() and out.tolist() == [1500, 2250]
    # One separator too few is a mismatch too.
    _, bad = us_texts_to_ns(b"1.5", 2)
    assert bad.all()
