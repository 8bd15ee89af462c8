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


def observe_init(patcher: Patcher, cls: Any, check: Any) -> None:
    """Wrap ``cls.__init__`` so that, while the overlay is active, ``check(self)`` runs on each new instance.

    Used to look at what vLLM actually built (a sampler or model runner that
    bypasses the patched path); an exception in ``check`` disables the
    overlay through :mod:`overlay.guard`, never the vLLM constructor.
    """
    import functools

    from overlay import guard
    from overlay.sampler import active

    original_init = cls.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if active() is not None:
            try:
                check(self)
            except Exception as exc:  # noqa: BLE001 - never break vLLM's constructor
                guard.failed(exc)

    patcher.set(cls, "__init__", __init__)
