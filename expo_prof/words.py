"""Words for people: counts with the right plural, and the verdict's words. Shared by every layer (like errors.py)."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 run``, ``2 runs``, ``0 runs`` (``many`` for an irregular plural: ``plural(2, "ms", "ms")``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


#: The verdict's words, the same wherever a saving or an A/B change is judged (compare, ab, switchback).
ENABLE = "enable"
KEEP_OFF = "keep off"
NO_DIFFERENCE = "no significant difference"
#: Too little data for any test (one run per side, fewer than two block pairs): nothing can be said either way.
INCONCLUSIVE = "inconclusive"
