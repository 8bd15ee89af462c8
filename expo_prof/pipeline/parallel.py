"""Reading and per-file analysis side by side: ``--jobs N`` worker processes (or Ray, :mod:`.ray_exec`).

The serial path (:func:`expo_prof.readers.load`, then
:func:`~expo_prof.analysis.rollup.analyze_parts` per recording) reads
every file in this process and keeps every event. Here the same reading
tasks (:func:`expo_prof.readers.tasks`: one file, or the msprof slices of one
profile folder) run in workers; each worker reads its file, analyses it
(:func:`~expo_prof.analysis.overlap.hidden.analyze_timeline`, a pure function of one
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

from expo_prof.pipeline.options import compile_op
from expo_prof.analysis.overlap.hidden import TimelineAnalysis, analyze_timeline
from expo_prof.errors import signals_held
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
        # (expo_prof.analysis.overlap.logmap), and they are small (a few windows a step).
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
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _QUIET)  # blocked while the fork server started (_start_server)


#: Signals a helper process must not die of while it starts (a Ctrl-C then prints "Fatal Python error" from
#: inside its ``import site``): the main process gets them and ends the helpers itself (:func:`_end_helpers`).
_QUIET = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _start_server(ctx) -> None:
    """Start the fork server with the ending signals blocked, as CPython starts its resource tracker: it and
    what it forks inherit the mask; the server ignores SIGINT itself and each worker unblocks (:func:`_worker_init`)."""
    from multiprocessing import forkserver, resource_tracker

    # The tracker first: its own start blocks SIGINT and SIGTERM and then UNBLOCKS them, which would undo ours.
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _QUIET)
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _become_subreaper() -> None:
    """Linux: workers orphaned when the fork server ends are handed to this process (not to PID 1, which in a
    container may never reap them), so :func:`_end_helpers` can wait for every one of them."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def _descendants() -> list[int]:
    """Every living process under this one (Linux ``/proc``; empty elsewhere), children before grandchildren."""
    parents: dict[int, list[int]] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:  # pragma: no cover - not Linux
        return []
    for e in entries:
        try:
            with open(f"/proc/{e}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if rest and rest[0] != b"Z":
            parents.setdefault(int(rest[1]), []).append(int(e))
    out, todo = [], [os.getpid()]
    while todo:
        kids = parents.get(todo.pop(0), [])
        out += kids
        todo += kids
    return out


def _end_helpers(timeout: float = 5.0) -> None:
    """After an interrupt: end every process the pool left — the fork server, and a worker it forked that the
    interrupt caught before the pool knew it (it waits forever for its start-up data) — then multiprocessing's
    own clean-up and its resource tracker, and reap every child: nothing of the command, not even a zombie,
    outlives it (left alone the helpers end only after this process, as orphans: zombies where PID 1 does not
    reap). ``_stop`` is CPython's own (its tests use it); where it is missing the tracker ends at exit as before."""
    import time
    from multiprocessing import resource_tracker, util

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    spare = {getattr(tracker, "_pid", None)}
    for pid in _descendants():
        if pid not in spare:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    try:
        util._run_finalizers()  # type: ignore[attr-defined]  # what exit would do (unlink the pool's semaphores), before the tracker goes
        tracker._stop()  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - best effort on the way out: never mask the interrupt
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no child left
        if pid == 0:
            time.sleep(0.01)


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
    units: list[Unit | None] = [None] * len(ts)
    done = 0
    # Largest first: the long files start early, the small ones fill the gaps at the end.
    order = sorted(range(len(ts)), key=lambda i: -sizes[i])
    from concurrent.futures.process import BrokenProcessPool

    pool = None
    try:
        _become_subreaper()
        if method == "forkserver":
            # Workers fork from a server that has already imported the readers and the analysis.
            ctx.set_forkserver_preload([__name__])
            _start_server(ctx)
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init)
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
        if pool is not None:
            pool.shutdown(wait=True)
        return None
    except BaseException:
        # Ctrl-C, SIGTERM, SIGHUP (expo_prof.cli.main raises KeyboardInterrupt for each) or any failure here:
        # stop the workers now rather than wait for the files they are reading (a signal sent to this process
        # alone does not reach them); the interrupt goes on to the CLI's one line. Then wait for the pool's own
        # thread to see them gone: left running, it races the interpreter's exit (concurrent.futures' atexit
        # hook) and can print a traceback after the one line. Then end what is left (_end_helpers).
        with signals_held():  # a second Ctrl-C must not stop the clean-up half-way
            if pool is not None:
                for proc in list((getattr(pool, "_processes", None) or {}).values()):
                    proc.terminate()
                pool.shutdown(wait=True, cancel_futures=True)
            _end_helpers()
        raise
    assert pool is not None
    pool.shutdown(wait=True)
    return collect(plist, plan, units, workers, op)  # type: ignore[arg-type]
