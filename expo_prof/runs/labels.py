"""Which run (directory or input PATH) each Timeline belongs to: the container a recording lies in.

Two runs can both have a rank 0 (``analyze off/ on/``); their numbers must
stay apart. A Timeline's run is the nearest directory above its source that
holds an expo-prof ``manifest.json`` (a run directory of ``expo-prof
record``), else the command-line PATH it was found under (see
:func:`run_labels` for files and overlay logs). The readers know nothing of
this: it is worked out here from the Timelines and the inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from expo_prof.clocks import OVERLAY_LOG, log_onto_trace
from expo_prof.paths import under
from expo_prof.runs.manifest import run_dir_of
from expo_prof.timeline import Timeline, overlay_log


def _log_pid(tl: Timeline) -> int | None:
    ov = overlay_log(tl)
    pid = ov.header_int("pid") if ov is not None else None
    return pid if pid is not None and pid > 0 else None


def same_process(log: Timeline, trace: Timeline) -> bool:
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
            inside = [(len(r.parts), i, g, r) for i, (g, r) in enumerate(tops) if under(src.resolve(), r)]
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
        runs = {keys[j] for j, t in enumerate(timelines) if t.fmt != OVERLAY_LOG and same_process(tl, t)}
        if len(runs) == 1:
            keys[i] = runs.pop()
    return [label_of[k] for k in keys]
