"""Recordings: one profile window of one job, with its ranks — the unit every figure is about.

The paths a user gives can hold several recordings at once: vLLM's profiler
folder collects every ``/start_profile`` window side by side, a session
directory holds an overlay-off and an overlay-on run, a folder of downloaded
traces mixes unrelated jobs. A figure that adds them up describes none of
them, so the pipeline analyses each recording on its own.

How Timelines (one per source file and rank, from :mod:`expo_prof.readers`)
are grouped:

1. By *container*: the run directory the source lies in, else the input PATH
   it was found under (:func:`~expo_prof.runs.labels.run_labels`).
2. Within a container, by *time*: the ranks of one window run at the same
   time, so a trace joins a recording whose time span it overlaps and that has
   no trace of its rank yet (ranks of one job are written in one format). Two
   traces of the same rank are never merged — except two exports of one window
   (torch_npu writes trace_view.json, a kernel_details.csv and a .db of the
   same profile), recognised by another format in the same profile folder.
3. An overlay event log joins the recording whose trace of the same rank it
   overlaps in time (same process when the pid is known); otherwise logs are
   grouped by their run id (``EXPO_PROF_RUN_ID``), ranks apart as above.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from expo_prof.clocks import OVERLAY_LOG, log_onto_trace
from expo_prof.runs.labels import run_labels, same_process
from expo_prof.runs.manifest import Manifest, read_manifest, run_dir_of
from expo_prof.timeline import Timeline, overlay_log

#: Two exports of one window overlap by at least this share of the shorter span.
SAME_WINDOW_OVERLAP = 0.5


@dataclass
class Recording:
    """One profile window of one job: which loaded Timelines belong to it, and what it is."""

    label: str
    #: The run directory, or the input PATH (a file's folder) the recording was found under.
    path: str
    #: Indices into the Timelines the recording was grouped from.
    members: list[int] = field(default_factory=list)
    manifest: Manifest | None = None

    @property
    def overlay(self) -> str | None:
        """``"on"`` / ``"off"`` as the run's manifest says (None for plain traces)."""
        return self.manifest.overlay if self.manifest is not None else None


@dataclass
class _Window:
    members: list[int] = field(default_factory=list)
    fmts: dict[int, set[str]] = field(default_factory=dict)  # rank -> formats present
    start: int = 0
    end: int = 0
    run_id: str | None = None


def _span(tl: Timeline) -> tuple[int, int]:
    if len(tl) == 0:
        return 0, 0
    return int(tl.start.min()), int((tl.start + tl.dur).max())


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def _profile_root(source: str) -> Path:
    """The folder one profile's exports share: a torch_npu ``*_ascend_pt`` / msprof ``PROF_*`` folder, else the file's."""
    p = Path(source)
    for d in p.parents:
        if d.name.endswith("_ascend_pt") or d.name.startswith("PROF_"):
            return d
    return p.parent


def _fits(timelines: Sequence[Timeline], w: _Window, tl: Timeline, span: tuple[int, int]) -> bool:
    """``tl`` (a trace) belongs to window ``w``: mostly overlapping in time, and either a rank the window
    lacks (in the same format as its other ranks) or another export of one of its ranks (another format,
    in the same profile folder)."""
    if not w.members:
        return True
    shorter = max(1, min(w.end - w.start, span[1] - span[0]))
    if _overlap((w.start, w.end), span) < SAME_WINDOW_OVERLAP * shorter:
        return False
    have = w.fmts.get(tl.rank)
    if have is None:
        return tl.fmt in {f for fs in w.fmts.values() for f in fs}
    if tl.fmt in have:
        return False  # a second trace of the same rank: another window
    root = _profile_root(tl.source)
    return any(timelines[j].rank == tl.rank and _profile_root(timelines[j].source) == root for j in w.members)


def _add(w: _Window, i: int, tl: Timeline, span: tuple[int, int]) -> None:
    if not w.members:
        w.start, w.end = span
    else:
        w.start, w.end = min(w.start, span[0]), max(w.end, span[1])
    w.members.append(i)
    w.fmts.setdefault(tl.rank, set()).add(tl.fmt)


def _shared_depth(timelines: Sequence[Timeline], members: list[int], source: str) -> int:
    parts = Path(source).parts
    best = 0
    for j in members:
        other = Path(timelines[j].source).parts
        n = 0
        while n < min(len(parts), len(other)) and parts[n] == other[n]:
            n += 1
        best = max(best, n)
    return best


def _run_id(tl: Timeline) -> str | None:
    ov = overlay_log(tl)
    rid = ov.header.get("run_id") if ov is not None else None
    return rid if isinstance(rid, str) and rid else None


def _windows(timelines: Sequence[Timeline], idx: list[int]) -> list[_Window]:
    traces = sorted((i for i in idx if timelines[i].fmt != OVERLAY_LOG), key=lambda i: _span(timelines[i]))
    logs = [i for i in idx if timelines[i].fmt == OVERLAY_LOG]
    windows: list[_Window] = []
    for i in traces:
        tl, span = timelines[i], _span(timelines[i])
        # Of the windows it fits, the one whose sources share the deepest folder with it
        # (rank0_ascend_pt and rank1_ascend_pt of one level, not of another).
        fits = [w for w in windows if _fits(timelines, w, tl, span)]
        w = max(fits, key=lambda w: _shared_depth(timelines, w.members, tl.source), default=None)
        if w is None:
            w = _Window()
            windows.append(w)
        _add(w, i, tl, span)
    for i in logs:
        log = timelines[i]

        def matches(j: int, log: Timeline = log) -> bool:  # this iteration's log, bound
            t = timelines[j]
            if t.fmt == OVERLAY_LOG or t.rank != log.rank:
                return False
            return same_process(log, t) or log_onto_trace(log, t)[0] is not None

        w = next((w for w in windows if w.run_id is None and any(matches(j) for j in w.members)), None)
        if w is None:
            rid = _run_id(log) or ""
            w = next((w for w in windows if w.run_id == rid and log.rank not in w.fmts), None)
        if w is None:
            w = _Window(run_id=_run_id(log) or "")
            windows.append(w)
        w.members.append(i)
        w.fmts.setdefault(log.rank, set()).add(log.fmt)
    return windows


def _label(timelines: Sequence[Timeline], members: list[int], fallback: str) -> str:
    """A window's label: the deepest folder (or the one file) all its sources share."""
    sources = [timelines[i].source for i in members]
    try:
        common = os.path.commonpath(sources)
    except ValueError:
        return fallback
    return common or fallback


def group(timelines: Sequence[Timeline], inputs: Sequence[str | Path]) -> list[Recording]:
    """Group the Timelines read from ``inputs`` into recordings (see the module docstring), in input order."""
    labels = run_labels(timelines, inputs)
    containers: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        containers.setdefault(lab, []).append(i)
    out: list[Recording] = []
    cache: dict[str, bool] = {}
    for lab, idx in containers.items():
        run_dir = run_dir_of(timelines[idx[0]].source, cache)
        manifest = None
        if run_dir is not None and str(run_dir) == lab:
            try:
                manifest = read_manifest(run_dir)
            except Exception:  # noqa: BLE001 - a damaged manifest leaves a plain recording
                manifest = None
        windows = _windows(timelines, idx)
        for w in windows:
            label = lab if len(windows) == 1 else _label(timelines, w.members, lab)
            out.append(Recording(label, lab, sorted(w.members), manifest))
    return out


__all__ = ["Recording", "group"]
