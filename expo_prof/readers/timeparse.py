"""Exact conversion of profiler timestamps (microseconds) to int64 nanoseconds.

Profilers write times in microseconds with a fraction: Kineto as JSON numbers
with three decimals (``"ts": 5145889024274.393``), torch_npu as decimal strings
(``"ts": "1736408883714269.685"``) and CSV cells (``1736408883714269.685\\t``).
A float64 cannot hold an epoch timestamp in µs to the nanosecond (its spacing
at 1.7e15 is 0.25 µs), so:

* text is parsed as integers (:func:`us_text_to_ns`, :func:`us_texts_to_ns`),
  digit by digit, never through a float;
* a float that a JSON decoder already produced is converted with the *exact*
  product ``x * 1000`` rounded once to the nearest integer
  (:func:`us_floats_to_ns`). A decimal with at most three fraction digits
  whose value is below ``2**43`` µs (8.8e12 µs, about 102 days) survives the
  round trip text → nearest double → exact ×1000 → nearest integer unchanged:
  below 2**43 the spacing of doubles is at most 2**-10 µs, so the double is
  within 0.49 ns of the decimal and the exact product rounds back to it.
  Above 2**43 µs two 3-decimal values can share one double, and no
  arithmetic recovers them. The naive ``round(x * 1000)`` is *not* exact even
  below the limit: the product is rounded to a double first, which can push
  it across the .5 boundary (813 of 300,000 random 3-decimal values in
  [0, 2**43) µs came out 1 ns off; tests/readers/test_timeparse.py). Kineto's
  relative timestamps reach 6.9e12 µs in the real traces, close to the limit.

Readers therefore decode floats only when every value is below
:data:`FLOAT_EXACT_LIMIT_US` and fall back to the text otherwise.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation, localcontext

import numpy as np

#: Largest |µs| value whose 3-decimal text survives a float64 round trip exactly.
FLOAT_EXACT_LIMIT_US = float(2**43)

_NUM_RE = re.compile(r"\s*(-?)(\d*)(?:\.(\d*))?\s*")

_POW10 = np.array([10**k for k in range(19)], dtype=np.int64)
_POW10U = _POW10.astype(np.uint64)


def us_text_to_ns(text: str | bytes) -> int:
    """Parse one decimal µs value (``"1736408883714269.685\\t"``) to integer ns exactly.

    Digits beyond the nanosecond are rounded half away from zero. Surrounding
    whitespace and double quotes are ignored; an exponent (``1e-05``) is
    accepted via :class:`decimal.Decimal`. Raises :class:`ValueError` on
    anything that is not a number.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("ascii", "replace")
    s = text.strip().strip('"').strip()
    m = _NUM_RE.fullmatch(s)
    if m and (m.group(2) or m.group(3)):
        sign, whole, frac = m.group(1), m.group(2) or "0", m.group(3) or ""
        ns = int(whole) * 1000 + int((frac[:3]).ljust(3, "0"))
        if len(frac) > 3 and frac[3] >= "5":
            ns += 1
        return -ns if sign else ns
    try:
        d = Decimal(s)
    except InvalidOperation:
        raise ValueError(f"not a number: {text!r}") from None
    if not d.is_finite():
        raise ValueError(f"not a finite number: {text!r}")
    if d.adjusted() > 30:  # far past any int64 ns (and past what Decimal can scale: 1e999999)
        raise OverflowError(f"time value out of range: {text!r}")
    # Exact: the process-wide context keeps 28 digits, and rounding d * 1000 to them before the
    # rounding to integer ns could move a value past a half-ns boundary (and depends on the caller).
    with localcontext() as ctx:  # (localcontext(prec=...) needs Python 3.11)
        ctx.prec = len(d.as_tuple().digits) + 4
        q = (d * 1000).to_integral_value(rounding="ROUND_HALF_UP")
    return int(q)


def us_floats_to_ns(a: np.ndarray) -> np.ndarray:
    """Exact ``round(a * 1000)`` for a float64 array of µs values, as int64 ns.

    The product is formed exactly in integer arithmetic (mantissa × 1000, then
    one rounding shift), so the only rounding is the final one, half away from
    zero. Values with ``|a| >= 2**53`` µs are out of range (ValueError).
    """
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.isfinite(a).all():
        raise ValueError("non-finite time value")
    neg = a < 0
    x = np.abs(a)
    if (x >= 2.0**53).any():
        raise ValueError("time value out of range")
    m, e = np.frexp(x)  # x = m * 2**e, 0.5 <= m < 1 (or m == 0)
    mant = (m * 2.0**53).astype(np.int64)  # exact: 53-bit integer mantissa
    prod = mant * 1000  # < 2**63: exact
    shift = (53 - e).astype(np.int64)  # x*1000 = prod * 2**-shift; shift >= 1 here
    out = np.empty_like(prod)
    big = shift >= 62
    small = ~big
    if small.any():
        # In uint64: prod < 2**53 * 1000 < 2**63, but prod + half can pass 2**63 when the shift is 59..61
        # (|x| in about [0.0035, 0.0156) µs); in int64 that wrapped and flipped the sign.
        s = shift[small].astype(np.uint64)
        half = np.left_shift(np.uint64(1), s - np.uint64(1))
        out[small] = np.right_shift(prod[small].astype(np.uint64) + half, s).astype(np.int64)
    if big.any():  # |x*1000| < 2: a float is exact enough to round
        out[big] = np.floor(x[big] * 1000.0 + 0.5).astype(np.int64)
    out[neg] = -out[neg]
    return out


def us_texts_to_ns(buf: bytes, n: int, sep: int = ord(",")) -> tuple[np.ndarray, np.ndarray]:
    """Parse ``n`` decimal µs values joined by ``sep`` in ``buf`` to int64 ns, vectorised.

    Each token may be quoted and padded with whitespace (``"123.456\\t"``).
    Returns ``(ns, bad)`` where ``bad`` marks tokens that are not plain
    decimals (those get 0 in ``ns``; callers parse them with
    :func:`us_text_to_ns` or report them). If the separator count does not
    match ``n`` every token is marked bad. Works in chunks so temporary
    arrays stay small.
    """
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    raw = np.frombuffer(buf, dtype=np.uint8)
    seps = np.flatnonzero(raw == sep)
    # Token i spans [starts[i], ends[i]); a trailing separator is optional.
    if seps.size == n - 1:
        ends = np.append(seps, raw.size)
    elif seps.size == n and seps[-1] == raw.size - 1:
        ends = seps
    else:
        ends = None
    if ends is None:
        # A separator inside a token (garbage text): the split is ambiguous,
        # so every token is reported bad and the caller parses them one by one.
        return np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    out = np.zeros(n, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    # Chunk by tokens so that per-character temporaries stay around 64 MB.
    chunk_chars = 8 << 20
    i = 0
    while i < n:
        j = int(np.searchsorted(ends, ends[i] + chunk_chars, side="right"))
        j = max(j, i + 1)
        _parse_chunk(raw, starts[i:j], ends[i:j], out[i:j], bad[i:j], sep)
        i = j
    return out, bad


def _parse_chunk(
    raw: np.ndarray, starts: np.ndarray, ends: np.ndarray, out: np.ndarray, bad: np.ndarray, sep: int
) -> None:
    base = int(starts[0])
    stop = int(ends[-1])
    # One padding separator at the end keeps every reduceat segment non-empty.
    c = np.empty(stop - base + 1, dtype=np.int16)
    c[:-1] = raw[base:stop]
    c[-1] = sep
    lo = starts - base  # segment i = [lo[i], lo[i+1]) holds token i and its separator
    is_digit = (c >= 48) & (c <= 57)
    is_dot = c == 46
    is_minus = c == 45
    is_pad = (c == 34) | (c == 32) | (c == 9) | (c == 13) | (c == 10) | (c == sep)
    is_other = ~(is_digit | is_dot | is_minus | is_pad)
    idx = np.arange(c.size, dtype=np.int64)
    big = np.int64(c.size + 1)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.add.reduceat(mask.astype(np.int64), lo)

    ndig = count(is_digit)
    ndot = count(is_dot)
    nminus = count(is_minus)
    nother = count(is_other)
    # Core span: first..last non-padding char; digits must fill it (besides
    # one dot and one leading minus), otherwise the token is "bad".
    core = ~is_pad
    first = np.minimum.reduceat(np.where(core, idx, big), lo)
    last = np.maximum.reduceat(np.where(core, idx, -1), lo)
    span = np.where(last >= first, last - first + 1, 0)
    minus_pos = np.maximum.reduceat(np.where(is_minus, idx, -1), lo)
    dot_pos = np.maximum.reduceat(np.where(is_dot, idx, -1), lo)
    ok = (ndig > 0) & (ndot <= 1) & (nother == 0) & (nminus <= 1)
    ok &= span == (ndig + ndot + nminus)
    ok &= (nminus == 0) | (minus_pos == first)
    # Anchor: the dot, or one past the last core char when there is no dot.
    anchor = np.where(ndot > 0, dot_pos, last + 1)
    seg_len = np.diff(np.append(lo, c.size))
    a = np.repeat(anchor, seg_len)
    # Power of ten in ns: integer digit at i -> 3 + (anchor - i - 1); fraction digit -> 3 - (i - anchor).
    p = np.where(idx < a, a - idx + 2, 3 - (idx - a))
    p = np.where(is_digit, p, -99)
    too_big = np.maximum.reduceat(p, lo) > 18
    val = np.where(is_digit, c - 48, 0).astype(np.uint64)
    # In uint64 (19 digits < 1e19 < 2**64): a 16-digit µs integer part reaches 1e19 ns, past int64, and must be
    # reported as bad, not wrap around.
    contrib = np.where(p >= 0, val * _POW10U[np.clip(p, 0, 18)], np.uint64(0))
    total = np.add.reduceat(contrib, lo, dtype=np.uint64)
    total += np.add.reduceat(np.where((p == -1) & (val >= 5), 1, 0).astype(np.uint64), lo, dtype=np.uint64)
    too_big |= total > np.uint64(2**63 - 1)
    total = np.where(too_big, 0, total).astype(np.int64)
    total = np.where(nminus > 0, -total, total)
    ok &= ~too_big
    out[:] = np.where(ok, total, 0)
    bad[:] = ~ok
