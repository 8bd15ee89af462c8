"""Nsight Systems reports (``.nsys-rep``): exported to SQLite with ``nsys`` first, never over the user's files.

A report is a binary format only ``nsys`` reads. Which export is read:

1. ``X.sqlite`` next to ``X.nsys-rep`` when it is an nsys export at least as new as the report (the user's own
   ``nsys export``, or ``record``'s) — read, never written;
2. else the cached export ``<cache>/nsys/<X>-<hash of the report's path>.sqlite`` when it is at least as new;
3. else ``nsys export --type sqlite`` writes that cache file (to a temporary name, renamed when complete);
   without ``nsys`` on PATH: one line (BadInput) with the command that exports it.

The cache is ``$EXPO_PROF_CACHE_DIR``, else ``$XDG_CACHE_HOME/expo-prof``, else ``~/.cache/expo-prof``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from expo_prof.errors import BadInput

#: The executable run to export reports (a path or a name looked up on PATH).
NSYS_ENV = "EXPO_PROF_NSYS"
CACHE_ENV = "EXPO_PROF_CACHE_DIR"
#: Seconds an export may take (a long serving run's report holds millions of kernels).
EXPORT_TIMEOUT_S = 3600


def export_argv(nsys: str, report: Path, out: Path) -> list[str]:
    """``nsys export`` of ``report`` to the SQLite file ``out`` (overwriting only ``out``)."""
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(report)]


def how_to_export(report: Path) -> str:
    """The command a user runs to export ``report`` by hand."""
    return f"nsys export --type sqlite --output {report.with_suffix('.sqlite')} {report}"


def cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache",
                                                     "expo-prof")
    return Path(base) / "nsys"


def _fresh(export: Path, report: Path) -> bool:
    try:
        return export.stat().st_mtime_ns >= report.stat().st_mtime_ns and export.stat().st_size > 0
    except OSError:
        return False


def nsys_executable() -> str | None:
    """The nsys to run: ``$EXPO_PROF_NSYS``, else ``nsys`` on PATH; None when there is none."""
    return shutil.which(os.environ.get(NSYS_ENV) or "nsys")


def sqlite_for(report: Path) -> Path:
    """The SQLite export to read for ``report`` (see the module docstring), exporting it when needed."""
    from expo_prof.readers.detect import NSYS, sniff_sqlite

    sibling = report.with_suffix(".sqlite")
    if _fresh(sibling, report) and sniff_sqlite(sibling)[0] == NSYS:
        return sibling
    key = hashlib.sha1(str(report.resolve()).encode()).hexdigest()[:16]
    cached = cache_dir() / f"{report.stem}-{key}.sqlite"
    if _fresh(cached, report):
        return cached
    nsys = nsys_executable()
    if nsys is None:
        raise BadInput(f"{report}: an Nsight Systems report, and nsys is not on PATH to export it; "
                       f"export it yourself and read the .sqlite: {how_to_export(report)}")
    export_sqlite(nsys, report, cached)
    return cached


def export_sqlite(nsys: str, report: Path, out: Path) -> None:
    """Run ``nsys export`` of ``report`` into ``out``: complete or not there at all (BadInput on failure)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.tmp.sqlite")
    try:
        proc = subprocess.run(export_argv(nsys, report, tmp), capture_output=True, text=True,
                              timeout=EXPORT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        tmp.unlink(missing_ok=True)
        raise BadInput(f"{report}: nsys export failed ({type(exc).__name__}: {exc})") from None
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        last = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise BadInput(f"{report}: nsys export failed (exit {proc.returncode}): {last[0]}")
    os.replace(tmp, out)
