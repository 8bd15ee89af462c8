"""Bookkeeping for reversible attribute patches (used by every patch module)."""

from __future__ import annotations

from typing import Any

_MISSING = object()


class Patcher:
    """Sets attributes and remembers exactly what was there, to undo it.

    Restoring puts back the very object found in the owner's ``__dict__``
    (a ``staticmethod`` stays a ``staticmethod``), or deletes the attribute
    when the owner only inherited it.
    """

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, vars(owner).get(name, _MISSING)))
        setattr(owner, name, value)

    def owns(self, owner: Any, name: str) -> bool:
        """Whether ``owner`` defines ``name`` itself (not inherited)."""
        return name in vars(owner)

    @property
    def applied(self) -> bool:
        return bool(self._saved)

    def undo(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            if original is _MISSING:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, original)
