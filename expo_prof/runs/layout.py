"""Run and session directories on disk: names, creation, atomic JSON writes.

A run directory is self-describing: every later command (analyze, timeline,
compare) reads it without being told how it was made. Layout::

    traces/<UTC timestamp>-<name>/
        manifest.json      how the run was made and how it ended (schema below)
        server.log         the command's stdout+stderr
        overlay/           overlay event logs (expo-prof-events-*.jsonl)
        profiler/          torch / torch_npu profiler traces of every rank
        msprof/            msprof output (with --profiler msprof)
        workload.json      per-request results and metrics of the built-in load
        analysis.json      `expo-prof analyze --json` of the run

With ``--repeat`` / ``--overlay both`` a *session* directory holds one run
directory per run (``01-off``, ``02-on`` …) and a ``session.json`` listing
them in order.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
from datetime import datetime, timezone
from pathlib import Path

from expo_prof.errors import BadInput
from expo_prof.paths import leads_out

MANIFEST = "manifest.json"
SESSION = "session.json"
MANIFEST_SCHEMA = 1
SESSION_SCHEMA = 1
#: Folders of a run directory that hold traces (the profiler folder is also named in the manifest).
TRACE_DIRS = ("overlay", "profiler", "msprof")


def inside(top: Path, rel: str | Path, what: str) -> Path:
    """``top / rel`` when it stays inside ``top``; BadInput otherwise (and nothing is read).

    A run or session directory names its own files (``manifest.json``, ``session.json``'s run folders,
    ``workload.json`` …); one received from elsewhere may name anything. Refused: an absolute path, a ``..``
    part, and a symbolic link anywhere on the way that leads out of ``top`` (compared after resolving both).
    """
    r = Path(rel)
    shown = repr(str(rel)) if len(str(rel)) <= 80 else repr(str(rel)[:77] + "...")
    if not str(rel).strip() or r.is_absolute() or ".." in r.parts:
        raise BadInput(f"{top}: {what} {shown} is not a path inside it (absolute paths and '..' are refused)")
    p = top / r
    if leads_out(p, top):
        raise BadInput(f"{p}: {what} leads out of {top} (a symbolic link to {p.resolve()}); not followed")
    return p


def utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def short_name(argv: list[str]) -> str:
    """A file-name-safe hint of what ran: the model's last path part, else the program."""
    name = None
    for flag in ("--model", "--served-model-name"):
        for i, a in enumerate(argv):
            if a == flag and i + 1 < len(argv):
                name = argv[i + 1]
            elif a.startswith(flag + "="):
                name = a.split("=", 1)[1]
        if name:
            break
    if name is None and len(argv) > 2 and os.path.basename(argv[0]) == "vllm" and argv[1] == "serve":
        name = argv[2]
    if name is None:
        name = os.path.basename(argv[0]) if argv else "run"
    name = os.path.basename(name.rstrip("/")) or "run"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)[:40].strip("-") or "run"


def new_dir(parent: Path, name: str) -> Path:
    """Create ``parent/<stamp>-<name>`` (or ``-2``, ``-3`` …): never reuses an existing one."""
    parent.mkdir(parents=True, exist_ok=True)
    stamp = utc_stamp()
    for i in range(1, 1000):
        cand = parent / (f"{stamp}-{name}" if i == 1 else f"{stamp}-{name}-{i}")
        try:
            cand.mkdir()
            return cand
        except FileExistsError:
            continue
    raise BadInput(f"cannot create a new run directory under {parent}")


def claim_out_dir(path: Path) -> Path:
    """``--out`` given: it must not exist yet or be empty (a second record never overwrites a first)."""
    if path.exists():
        if not path.is_dir():
            raise BadInput(f"--out {path} exists and is not a directory")
        if any(path.iterdir()):
            raise BadInput(f"--out {path} already holds a recording; choose a new directory")
    path.mkdir(parents=True, exist_ok=True)
    return path


def host_info() -> dict:
    """Where the run happened."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def write_json(path: Path, data: dict) -> None:
    """Write atomically (temp file + rename), so an interrupted write never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)
