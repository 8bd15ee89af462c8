"""Where a path lies: under a folder as written, or really (after resolving symbolic links). Shared by every
layer (like errors.py): the run directories, the readers' walk and the report's verify section all refuse a
link that leads out of the folder they were given."""

from __future__ import annotations

from pathlib import Path


def under(path: Path, top: Path) -> bool:
    """``path`` is ``top`` or lies below it, as written (no link resolved)."""
    return path == top or top in path.parents


def leads_out(path: Path, top: Path) -> bool:
    """``path``, its symbolic links resolved, lies outside ``top`` (resolved too)."""
    return not under(path.resolve(), top.resolve())
