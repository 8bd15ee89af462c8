"""Which run each Timeline belongs to, so ranks of different runs are never merged.

Two runs can both have a rank 0 (``analyze off/ on/``); their numbers must
stay apart. A Timeline's run is the nearest directory above its source that
holds an expo-prof ``manifest.json`` (a run directory of ``expo-prof
record``), else the command-line PATH it was found under (see
:func:`run_labels` for files and overlay logs). The readers know nothing of
this: it is worked out here from the Timelines and the inputs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from expo_prof.clocks import OVERLAY_LOG, log_onto_trace
from expo_prof.record.rundir import MANIFEST
from expo_prof.timeline import Timeline


def _is_run_dir(d: str) -> bool:
    """``d`` holds an expo-prof manifest (not any file called manifest.json: web apps have those too)."""
    p = os.path.join(d, MANIFEST)
    if not os.path.isfile(p):
        return False
    try:
        with open(p, "rb") as f:
            obj = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(obj, dict) and "expo_prof" in obj


def run_dir_of(source: str | Path, cache: dict[str, bool] | None = None) -> Path | None:
    """The nearest directory at or above ``source`` (a file or a directory) that is a run directory.

    ``cache`` (directory → is a run directory) saves re-reading manifests for many sources.
    """
    seen = {} if cache is None else cache

    def is_run(d: str) -> bool:
        if d not in seen:
            seen[d] = _is_run_dir(d)
        return seen[d]

    p = Path(source)
    here = p if p.is_dir() else p.parent
    # Walk the spelling the user gave first (labels read like the input), then the resolved path.
    for d in (here, *here.parents):
        if is_run(str(d) or "."):
            return d
    absolute = here.resolve()
    for d in (absolute, *absolute.parents):
        if is_run(str(d)):
            return d
    return None


def _under(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def _log_pid(tl: Timeline) -> int | None:
    pid = ((tl.meta.get("overlay") or {}).get("header") or {}).get("pid")
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def _same_process(log: Timeline, trace: Timeline) -> bool:
    """``log`` is the overlay event log of a process that ``trace`` profiled: same rank and pid, times overlap."""
    pid = _log_pid(log)
    return (pid is not None and trace.rank == log.rank and any(ln.pid == pid for ln in trace.lanes)
            and log_onto_trace(log, trace)[0] is not None)


def run_labels(timelines: Sequence[Timeline], inputs: Sequence[str | Path]) -> list[str]:
    """One run label per Timeline: its run directory, else the outermost input PATH it lies under.

    A file given as a PATH stands for its folder, as a folder given as a PATH
    does: the files of one run side by side (``analyze trace.json.gz
    events.jsonl``, torch_npu's exports) stay one run. An overlay event log
    outside any run directory joins the run of the trace that profiled its
    process (same rank and pid, overlapping times): the log and the profiler
    output of one server often go to different folders (``EXPO_PROF_OUT`` and
    the profiler's directory), given as two PATHs.

    Labels are paths as the user spelled them; two spellings of one directory
    get the first one's label. A source under no input (a caller that gave
    none) is its own run, labelled by its folder.
    """
    tops = [(Path(i), Path(i).resolve()) for i in inputs]
    tops = [(g.parent, r.parent) if r.is_file() else (g, r) for g, r in tops]
    cache: dict[str, bool] = {}
    keys: list[Path] = []
    label_of: dict[Path, str] = {}
    from_manifest: list[bool] = []
    for tl in timelines:
        src = Path(tl.source)
        run = run_dir_of(src, cache)
        if run is not None:
            key, label = run.resolve(), str(run)
        else:
            inside = [(len(r.parts), i, g, r) for i, (g, r) in enumerate(tops) if _under(src.resolve(), r)]
            if inside:
                _n, _i, given, key = min(inside)
                label = str(given)
            else:
                folder = src if src.is_dir() else src.parent
                key, label = folder.resolve(), str(folder)
        keys.append(key)
        label_of.setdefault(key, label)
        from_manifest.append(run is not None)
    for i, tl in enumerate(timelines):
        if tl.fmt != OVERLAY_LOG or from_manifest[i]:
            continue
        runs = {keys[j] for j, t in enumerate(timelines) if t.fmt != OVERLAY_LOG and _same_process(tl, t)}
        if len(runs) == 1:
            keys[i] = runs.pop()
    return [label_of[k] for k in keys]
