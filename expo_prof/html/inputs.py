"""What the page commands were given: run directories, sessions, or plain traces.

``timeline``, ``report`` and ``export`` accept the same inputs:

* a **run directory** (``manifest.json``): its ``overlay/``, profiler and
  ``msprof/`` folders are read, and its manifest is shown;
* a **session directory** (``session.json``): its runs in order (``01-off``,
  ``02-on`` …) — the report compares them, the timeline wants one run;
* anything else the readers accept: a trace file or a folder of traces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from expo_prof.errors import BadInput
from expo_prof.record.rundir import MANIFEST, SESSION, read_manifest

#: Folders of a run directory that hold traces (the profiler folder is named in the manifest).
TRACE_DIRS = ("overlay", "profiler", "msprof")


@dataclass
class RunInput:
    """One run to read: where its traces are and what its manifest says."""

    path: Path
    label: str
    manifest: dict | None = None
    trace_paths: list[Path] = field(default_factory=list)

    @property
    def overlay(self) -> str | None:
        """``"on"`` / ``"off"`` from the manifest (None for plain traces)."""
        m = self.manifest or {}
        v = m.get("overlay")
        return v if v in ("on", "off") else None

    @property
    def metrics(self) -> dict:
        """Workload metrics of the run (``vllm bench serve`` names), empty when none."""
        m = (self.manifest or {}).get("metrics")
        return m if isinstance(m, dict) else {}


def is_run_dir(p: Path) -> bool:
    return p.is_dir() and (p / MANIFEST).is_file()


def is_session_dir(p: Path) -> bool:
    return p.is_dir() and (p / SESSION).is_file()


def run_input(p: Path) -> RunInput:
    """A run directory as a :class:`RunInput` (BadInput when it holds no trace)."""
    manifest = read_manifest(p)
    names = list(TRACE_DIRS)
    prof = manifest.get("profiler_dir")
    if isinstance(prof, str) and prof and prof not in names and "/" not in prof and prof not in ("..", "."):
        names.insert(1, prof)
    found = [p / n for n in names if (p / n).is_dir() and any((p / n).rglob("*"))]
    if not found:
        raise BadInput(f"{p}: run directory without traces (nothing in {', '.join(n + '/' for n in names)})")
    return RunInput(p, p.name, manifest, found)


def session_runs(p: Path) -> list[RunInput]:
    """The runs of a session directory, in recorded order (runs that left no trace are skipped)."""
    try:
        session = json.loads((p / SESSION).read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"{p / SESSION}: unreadable session file ({exc})") from None
    runs = session.get("runs") if isinstance(session, dict) else None
    if not isinstance(runs, list) or not runs:
        raise BadInput(f"{p / SESSION}: lists no runs")
    out = []
    for r in runs:
        d = p / str(r.get("dir", "")) if isinstance(r, dict) else None
        if d is None or not is_run_dir(d):
            continue
        try:
            out.append(run_input(d))
        except BadInput:
            continue
    if not out:
        raise BadInput(f"{p}: no run of the session holds traces")
    return out


def resolve(paths: list[Path], *, allow_session: bool = True) -> list[RunInput]:
    """Turn the command's PATH arguments into runs (a session expands to its runs).

    Plain trace files and folders given together form one run.
    """
    if not paths:
        raise BadInput("no input path given")
    runs: list[RunInput] = []
    loose: list[Path] = []
    for p in paths:
        if not p.exists():
            raise BadInput(f"{p}: no such file or directory")
        if is_session_dir(p):
            sub = session_runs(p)
            if not allow_session:
                names = ", ".join(str(r.path) for r in sub[:4])
                raise BadInput(f"{p} is a session of {len(sub)} runs; pass one run directory ({names})")
            runs.extend(sub)
        elif is_run_dir(p):
            runs.append(run_input(p))
        else:
            loose.append(p)
    if loose:
        label = loose[0].name if len(loose) == 1 else f"{loose[0].name} +{len(loose) - 1}"
        runs.append(RunInput(loose[0], label, None, loose))
    return runs


def load_run(run: RunInput, max_bytes: int | None = None):
    """Read every trace of ``run`` (:func:`expo_prof.readers.load`)."""
    from expo_prof import readers

    kwargs = {} if max_bytes is None else {"max_bytes": max_bytes}
    return readers.load(run.trace_paths, **kwargs)
