"""Typed views of a run directory's ``manifest.json`` and a session directory's ``session.json``.

``expo-prof record`` writes them (expo_prof/record/runner.py keeps the
manifest as a dict and rewrites it at every transition); everything that reads
run directories — analyze, the pages, compare — reads them through here, so
"is this a run directory" has one answer: a folder whose ``manifest.json`` is
a JSON object with an ``expo_prof`` key (a web app's ``manifest.json`` is not
a run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from expo_prof.errors import BadInput
from expo_prof.words import plural
from expo_prof.runs.layout import MANIFEST, SESSION, SESSION_SCHEMA, TRACE_DIRS, inside, write_json


#: The statuses ``record`` writes while it runs (expo_prof/record/runner.py rewrites the manifest at each step:
#: ``starting``, ``waiting`` for the server, ``ready``, ``profiling``; ``running`` is its module docstring's
#: word). At its end it writes ``ended`` and one of ``ok``, ``interrupted``, ``failed``, ``crashed``.
RECORDING = ("starting", "waiting", "ready", "profiling", "running")


def in_progress_note(run: str | Path, manifest: Manifest, step_lines: int | None, read: bool = True) -> str:
    """The one line for a run directory that ``record`` is still writing (:attr:`Manifest.in_progress`):
    what was read is what is written so far — its event logs have no summary line yet, their last line may
    be half written — not the leftovers of a killed worker. ``step_lines``: the event logs' step lines read
    (None: no event log); ``read``: False when nothing usable was read."""
    so_far = ("nothing usable is written yet" if not read
              else "read as far as written" + (f", {plural(step_lines, 'step line')} so far" if step_lines is not None
                                              else ""))
    return (f"{run}: recording in progress (its {MANIFEST} says {manifest.status!r}, not ended): {so_far}; "
            "analyse it again once `expo-prof record` has ended")


@dataclass
class Manifest:
    """A run's manifest: the typed fields the tools read, and the whole document in :attr:`raw`."""

    path: Path
    raw: dict[str, Any]

    @property
    def overlay(self) -> str | None:
        """``"on"`` / ``"off"`` / ``"switchback"`` (None when the manifest does not say)."""
        v = self.raw.get("overlay")
        return v if v in ("on", "off", "switchback") else None

    @property
    def status(self) -> str | None:
        v = self.raw.get("status")
        return v if isinstance(v, str) else None

    @property
    def in_progress(self) -> bool:
        """``record`` is still writing the run, as far as the manifest says: a status it writes on its way
        (:data:`RECORDING`) and no end yet."""
        return self.status in RECORDING and not self.raw.get("ended")

    @property
    def metrics(self) -> dict[str, Any]:
        """Workload metrics (``vllm bench serve`` names); empty when none."""
        m = self.raw.get("metrics")
        return m if isinstance(m, dict) else {}

    @property
    def workload(self) -> dict[str, Any] | None:
        w = self.raw.get("workload")
        return w if isinstance(w, dict) else None

    @property
    def command(self) -> list[str]:
        c = self.raw.get("command")
        return [str(a) for a in c] if isinstance(c, list) else []

    @property
    def model(self) -> str | None:
        """The served model's last path part, from the manifest or the command line."""
        model = self.raw.get("model")
        argv = self.command
        if not model:
            for flag in ("--served-model-name", "--model"):
                if flag in argv and argv.index(flag) + 1 < len(argv):
                    model = argv[argv.index(flag) + 1]
                    break
        return Path(str(model).rstrip("/")).name if model else None

    @property
    def trace_dirs(self) -> list[Path]:
        """The run's folders that hold traces (overlay logs, profiler output, msprof), existing and non-empty."""
        run = self.path.parent
        names = list(TRACE_DIRS)
        prof = self.raw.get("profiler_dir")
        if isinstance(prof, str) and prof and prof not in names and "/" not in prof and prof not in ("..", "."):
            names.insert(1, prof)
        return [run / n for n in names if _contained(run, n) and (run / n).is_dir() and any((run / n).rglob("*"))]


@dataclass
class SessionRun:
    """One run of a session: its folder (relative to the session), overlay setting and status."""

    dir: str
    overlay: bool | None
    status: str | None


@dataclass
class Session:
    """A session directory of several runs (``--repeat``, ``--overlay both``, ``expo-prof ab``)."""

    path: Path
    runs: list[SessionRun] = field(default_factory=list)
    status: str = "running"
    raw: dict[str, Any] = field(default_factory=dict)

    def run_dirs(self) -> list[Path]:
        """The session's run directories, in recorded order (those still present)."""
        return [self.path / r.dir for r in self.runs if is_run_dir(self.path / r.dir)]


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _contained(top: Path, name: str) -> bool:
    try:
        inside(top, name, name)
    except BadInput:
        return False
    return True


def is_run_dir(p: Path) -> bool:
    """``p`` holds an expo-prof manifest (a JSON object with an ``expo_prof`` key), or claims to: a
    ``manifest.json`` that is a symbolic link out of ``p`` is never read, and :func:`read_manifest` refuses it."""
    m = p / MANIFEST
    if m.is_symlink() and not _contained(p, MANIFEST):
        return True
    if not m.is_file():
        return False
    try:
        with open(m, "rb") as f:
            obj = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(obj, dict) and "expo_prof" in obj


def is_session_dir(p: Path) -> bool:
    return p.is_dir() and (p / SESSION).is_file()


def read_manifest(run_dir: Path) -> Manifest:
    """The manifest of a run directory (BadInput when missing, unreadable, not expo-prof's, or a symbolic link
    leading out of the run directory)."""
    p = inside(run_dir, MANIFEST, "its manifest")
    try:
        raw = _load(p)
    except FileNotFoundError:
        raise BadInput(f"{run_dir} is not a run directory (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise BadInput(f"{p}: unreadable manifest ({exc})") from None
    if not isinstance(raw, dict):
        raise BadInput(f"{p}: not a run manifest")
    return Manifest(p, raw)


def write_manifest(run_dir: Path, raw: dict[str, Any]) -> None:
    """Write (atomically) a run's manifest."""
    write_json(run_dir / MANIFEST, raw)


def read_session(session_dir: Path) -> Session:
    """The ``session.json`` of a session directory (BadInput when unreadable, listing no run, or naming a run
    folder outside the session directory: absolute, through ``..`` or a symbolic link leading out)."""
    p = inside(session_dir, SESSION, "its session file")
    try:
        raw = _load(p)
    except (OSError, ValueError) as exc:
        raise BadInput(f"{p}: unreadable session file ({exc})") from None
    runs = raw.get("runs") if isinstance(raw, dict) else None
    if not isinstance(runs, list) or not runs:
        raise BadInput(f"{p}: lists no runs")
    out = [SessionRun(str(r.get("dir", "")), r.get("overlay"), r.get("status")) for r in runs if isinstance(r, dict)]
    for r in out:
        inside(session_dir, r.dir, f"{SESSION} run folder")
    return Session(session_dir, out, str(raw.get("status", "")), raw)


def new_session(session_dir: Path, command: list[str], started: str) -> Session:
    """A session about to record its first run."""
    return Session(session_dir, [], "running", {"schema": SESSION_SCHEMA, "command": command, "started": started})


def write_session(session: Session) -> None:
    """Write (atomically) a session's ``session.json``."""
    raw = dict(session.raw)
    raw.update(runs=[{"dir": r.dir, "overlay": r.overlay, "status": r.status} for r in session.runs],
               status=session.status)
    write_json(session.path / SESSION, raw)


def run_dir_of(source: str | Path, cache: dict[str, bool] | None = None) -> Path | None:
    """The nearest directory at or above ``source`` (a file or a directory) that is a run directory.

    ``cache`` (directory → is a run directory) saves re-reading manifests for many sources.
    """
    seen = {} if cache is None else cache

    def is_run(d: Path) -> bool:
        k = str(d) or "."
        if k not in seen:
            seen[k] = is_run_dir(d)
        return seen[k]

    p = Path(source)
    here = p if p.is_dir() else p.parent
    # Walk the spelling the user gave first (labels read like the input), then the resolved path.
    for d in (here, *here.parents):
        if is_run(d):
            return d
    absolute = here.resolve()
    for d in (absolute, *absolute.parents):
        if is_run(d):
            return d
    return None
