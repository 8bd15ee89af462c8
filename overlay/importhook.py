"""Run a callback when a module is imported (or now, if it already is).

vLLM loads general plugins in every process — the API server among them —
long before it imports the model runner or the sampler. Importing those
modules from the plugin would load a large part of vLLM (and, on GPU
machines, device code) into processes that never run a model. Instead the
patches wait: a finder on ``sys.meta_path`` wraps the loader of the watched
modules and calls the patch right after the module body ran, before anyone
can use (or bind) what it defines.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]


class _PatchingLoader(importlib.abc.Loader):
    """Delegates to the real loader, then runs the callbacks."""

    def __init__(self, loader: Any, hook: _PostImportFinder) -> None:
        self._loader = loader
        self._hook = hook

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        # Tools (linecache, inspect, torch.compile) read the source through
        # __loader__; give them the real one back.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._hook.fire(module.__name__, module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self._busy = threading.local()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.callbacks:
            return None
        busy = getattr(self._busy, "names", None)
        if busy is None:
            busy = self._busy.names = set()
        if fullname in busy:
            return None
        busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, self)
        return spec

    def fire(self, name: str, module: ModuleType) -> None:
        for callback in self.callbacks.pop(name, []):
            callback(module)


_finder: _PostImportFinder | None = None


def when_imported(name: str, callback: Callback) -> None:
    """Call ``callback(module)`` once ``name`` is imported (now if it already is).

    Exceptions from the callback propagate to the importer; callers wrap their
    callbacks (see :mod:`overlay.plugin`) so vLLM never sees them.
    """
    global _finder
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    if _finder is None:
        _finder = _PostImportFinder()
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    _finder.callbacks.setdefault(name, []).append(callback)


def clear() -> None:
    """Forget every pending callback and take the finder off ``sys.meta_path``."""
    global _finder
    if _finder is not None:
        _finder.callbacks.clear()
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
    _finder = None
