"""Reading and per-file analysis side by side: ``--jobs N`` worker processes (or Ray, :mod:`.ray_exec`).

The serial path (:func:`expo_prof.readers.load`, then
:func:`~expo_prof.analysis.aggregate.analyze_parts` per recording) reads
every file in this process and keeps every event. Here the same reading
tasks (:func:`expo_prof.readers.tasks`: one file, or the msprof slices of one
profile folder) run in workers; each worker reads its file, analyses it
(:func:`~expo_prof.analysis.hidden.analyze_timeline`, a pure function of one
Timeline) and sends back a :class:`Unit`: that analysis and, unless the
command draws events, only a :func:`~expo_prof.timeline.compact` Timeline
(overlay event logs, small, whole).
Grouping into recordings and the roll-up then run here on those, so the
result is the serial one (tests/test_parallel.py compares the JSON documents).

Memory: a worker holds one task at a time — one file's bytes (capped by
``--max-bytes``) and its Timeline — and frees it before the next; this
process holds only the compact results. Workers start from a fork server
(``spawn`` where there is none): never a fork of a process holding traces.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from expo_prof.analysis.aggregate import compile_op
from expo_prof.analysis.hidden import TimelineAnalysis, analyze_timeline
from expo_prof.readers import LoadResult, Task, TaskOutput, assemble, read_task, tasks
from expo_prof.readers import detect
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED
from expo_prof.timeline import compact

ProgressFn = Callable[[int, int], None]

#: Below this many bytes on disk a pool costs more than it saves (workers take ~0.3 s to start):
#: read in this process. ``EXPO_PROF_PARALLEL_MIN_BYTES`` overrides it (the tests set 0).
PARALLEL_MIN_BYTES = 16 << 20


def cores() -> int:
    """CPU cores this process may run on (the ``--jobs`` default)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _min_bytes() -> int:
    raw = os.environ.get("EXPO_PROF_PARALLEL_MIN_BYTES", "")
    return int(raw) if raw.strip().isdigit() else PARALLEL_MIN_BYTES


@dataclass
class Unit:
    """What a worker sends back for one task."""

    output: TaskOutput
    analysis: TimelineAnalysis | None
    #: The worker's process id and peak resident memory so far (bytes), for the bench's per-worker report.
    pid: int = 0
    peak_rss: int = 0
    #: Where it ran (Ray: the node id; local: "").
    node: str = ""


def work(task: Task, max_bytes: int = DEFAULT_MAX_DECOMPRESSED, op: str | None = None, events: bool = False,
         node: str = "") -> Unit:
    """Read one task and analyse its Timeline (runs in a worker process or a Ray task)."""
    out = read_task(task, max_bytes=max_bytes)
    analysis = None
    # An export of several ranks is split into ranks (readers.assemble) and analysed per rank by collect().
    if out.timeline is not None and not out.timeline.meta.get("rank_pids"):
        analysis = analyze_timeline(out.timeline, compile_op(op))
        # Overlay event logs stay whole: the roll-up places their wait/forward windows onto a trace's steps
        # (expo_prof.analysis.logmap), and they are small (a few windows a step).
        if not events and out.timeline.fmt != "overlay-log":
            small = compact(out.timeline)
            analysis.tl = small
            out.timeline = small
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss *= 1 if sys.platform == "darwin" else 1024  # Linux reports KiB, macOS bytes
    return Unit(out, analysis, os.getpid(), rss, node)


@dataclass
class Parallel:
    """A parallel read: what :func:`expo_prof.readers.load` would return, with each Timeline's analysis."""

    loaded: LoadResult
    #: One per ``loaded.timelines`` entry, in order.
    analyses: list[TimelineAnalysis]
    workers: int
    #: Peak resident memory per worker process (bytes), by pid (Ray: by "node/pid").
    peak_rss: dict[str, int] = field(default_factory=dict)
    #: Where each Timeline was read, by its source (Ray: the node id; local: "").
    where: dict[str, str] = field(default_factory=dict)


def collect(plist: list[Path], plan: detect.Plan, units: Sequence[Unit], workers: int,
            op: str | None = None) -> Parallel:
    """Put the units (in task order) back together as a serial read would (:func:`expo_prof.readers.assemble`)."""
    by_tl = {id(u.output.timeline): u.analysis for u in units if u.output.timeline is not None}
    loaded = assemble(plist, plan, [u.output for u in units])
    # Timelines split out of a several-rank export were not analysed in the worker: analyse them here.
    # (An explicit None test: an analysis with no instances is falsy, and must not be done again.)
    analyses = [a if (a := by_tl.get(id(tl))) is not None else analyze_timeline(tl, compile_op(op))
                for tl in loaded.timelines]
    peaks: dict[str, int] = {}
    for u in units:
        key = f"{u.node}/{u.pid}" if u.node else str(u.pid)
        peaks[key] = max(peaks.get(key, 0), u.peak_rss)
    where = {u.output.timeline.source: u.node for u in units if u.output.timeline is not None}
    return Parallel(loaded, analyses, workers, peaks, where)


def _worker_init() -> None:
    """A worker ends quietly on Ctrl-C (SIGINT's default action), as a terminal sends it to the whole process
    group: no traceback of its own, idle or reading; the main process says "interrupted" once."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def read_parallel(plist: list[Path], *, jobs: int, max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
                  op: str | None = None, events: bool = True, progress: ProgressFn | None = None,
                  force: bool = False) -> Parallel | None:
    """Read and analyse ``plist`` with up to ``jobs`` worker processes; None when one process is the better
    choice (one job, one task, or fewer bytes than ``EXPO_PROF_PARALLEL_MIN_BYTES`` unless ``force``)."""
    plan = detect.plan(plist)
    ts = tasks(plan)
    sizes = [t.size for t in ts]
    total = sum(sizes)
    workers = min(jobs, len(ts))
    if workers <= 1 or (not force and total < _min_bytes()):
        return None
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    ctx = mp.get_context(method)
    if method == "forkserver":
        # Workers fork from a server that has already imported the readers and the analysis.
        ctx.set_forkserver_preload([__name__])
    units: list[Unit | None] = [None] * len(ts)
    done = 0
    # Largest first: the long files start early, the small ones fill the gaps at the end.
    order = sorted(range(len(ts)), key=lambda i: -sizes[i])
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init)
    try:
        futs = {pool.submit(work, ts[i], max_bytes, op, events): i for i in order}
        for fut in as_completed(futs):
            i = futs[fut]
            units[i] = fut.result()
            done += sizes[i]
            if progress is not None:
                progress(min(done, total), total)
    except BrokenProcessPool:
        # Workers that cannot start (a main module they cannot re-import, e.g. a script read from stdin)
        # or that died: the caller reads in this process instead.
        pool.shutdown(wait=True)
        return None
    except BaseException:
        # Ctrl-C (or any failure) here: stop the workers now rather than wait for the files they are reading
        # (a Ctrl-C sent to this process alone does not reach them); the interrupt goes on to the CLI's one line.
        # Then wait for the pool's own thread to see them gone: left running, it races the interpreter's exit
        # (concurrent.futures' atexit hook) and can print a traceback after the one line.
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return collect(plist, plan, units, workers, op)  # type: ignore[arg-type]
