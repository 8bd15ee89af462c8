"""Words for people: counts with the right plural. Shared by every layer (like errors.py)."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 run``, ``2 runs``, ``0 runs`` (``many`` for an irregular plural: ``plural(2, "ms", "ms")``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
