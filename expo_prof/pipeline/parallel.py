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
process holds only the compact results.

Starting workers (:func:`start_method`): on Linux, in a process with no other
thread, they are forked from this process when the pool starts, before any
trace is read here (a few ms; the objects this process holds are frozen out
of the workers' garbage collector, so their pages stay shared). Elsewhere
(another thread runs: a progress bar, a notebook's kernel; macOS) they come
from a fork server, which first imports the readers and the analysis
(about 0.3 s), or ``spawn`` where there is none. ``EXPO_PROF_WORKER_START``
(fork, forkserver or spawn) chooses one (the tests run both).

Whether to start workers at all: by the work the files hold, their
decompressed bytes (:func:`expo_prof.readers.file_bytes.work_size`: a
gzip file's trailer says it), not by bytes on disk; below
:data:`PARALLEL_MIN_BYTES` (forked workers) or :data:`SERVER_MIN_BYTES`
(a fork server's) one process reads them.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from expo_prof.pipeline.options import compile_op
from expo_prof.analysis.overlap.hidden import TimelineAnalysis, analyze_timeline
from expo_prof.errors import signals_held
from expo_prof.readers import LoadResult, Task, TaskOutput, assemble, read_task, tasks
from expo_prof.readers import detect
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED, work_size
from expo_prof.timeline import compact

ProgressFn = Callable[[int, int], None]

#: Below this much work, in decompressed bytes (:func:`task_work`: a gzipped file counts the JSON it holds,
#: not its bytes on disk), forked workers cost more than they save: read in this process. Measured with
#: bench/bench_cluster.py on 2 cores: 4 ranks of 21 MB of JSON in all (0.13 s in one process) take 1.15× less
#: time with 2 forked workers. ``EXPO_PROF_PARALLEL_MIN_BYTES`` overrides it and :data:`SERVER_MIN_BYTES`, in
#: the same unit (the tests set 0: a pool for any input).
PARALLEL_MIN_BYTES = 16 << 20

#: The same for workers from a fork server (or spawned), which imports the readers and the analysis first
#: (about 0.2 s more): on the same 2 cores 32 MiB of JSON took 1.5× longer with them than in one process.
SERVER_MIN_BYTES = 96 << 20

#: Environment variable choosing how workers start: fork, forkserver or spawn (:func:`start_method`).
START_ENV = "EXPO_PROF_WORKER_START"


def cores() -> int:
    """CPU cores this process may run on (the ``--jobs`` default)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _min_bytes(method: str) -> int:
    """The least work (decompressed bytes) for which workers started by ``method`` pay."""
    raw = os.environ.get("EXPO_PROF_PARALLEL_MIN_BYTES", "")
    if raw.strip().isdigit():
        return int(raw)
    return PARALLEL_MIN_BYTES if method == "fork" else SERVER_MIN_BYTES


def task_work(task: Task) -> int:
    """The bytes a task's readers will parse: each file's decompressed size, as its gzip trailer states it
    (:func:`~expo_prof.readers.file_bytes.work_size`: nothing is decompressed to know it)."""
    return sum(work_size(j.path) for _, j in task.jobs)


def start_method() -> str:
    """How workers start: ``$EXPO_PROF_WORKER_START`` where this platform has it; else ``fork`` on Linux when
    this is the main thread and no other Python thread runs (a fork copies only the calling thread: with a
    progress bar's or a notebook kernel's threads running, a lock one of them holds would stay locked in the
    worker); else a fork server (``spawn`` where there is none)."""
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    want = os.environ.get(START_ENV, "").strip().lower()
    if want in methods:
        return want
    if (sys.platform.startswith("linux") and "fork" in methods and threading.active_count() == 1
            and threading.current_thread() is threading.main_thread()):
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


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
    #: How the workers started (:func:`start_method`); empty on Ray.
    method: str = ""


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
    group: no traceback of its own, idle or reading; the main process says "interrupted" once. SIGTERM and
    SIGHUP get their default action too: a forked worker inherits the command's handlers, which raise
    KeyboardInterrupt (expo_prof.cli.main); one ignored when the command started (``nohup``) stays ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    for sig in _QUIET - {signal.SIGINT}:
        if signal.getsignal(sig) not in (signal.SIG_IGN, signal.SIG_DFL):
            signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _QUIET)  # blocked while the fork server or the workers started


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


@contextmanager
def _forking() -> Iterator[None]:
    """Around forking the workers from this process: the ending signals blocked (a worker unblocks them in
    :func:`_worker_init`, after setting their default actions; one that reaches this process meanwhile is
    delivered when the block ends), and every object this process holds frozen out of the garbage collector
    (``gc.freeze``), so a collection in a worker does not write to, and so copy, the pages it shares with this
    process. Python 3.12+ warns (DeprecationWarning) on a fork from a process with more than one thread of the
    operating system's: numpy's OpenBLAS keeps idle threads, which its own fork handlers stop and restart; no
    Python thread runs (:func:`start_method`), so that warning is not shown."""
    import gc
    import warnings

    old = signal.pthread_sigmask(signal.SIG_BLOCK, _QUIET)
    gc.freeze()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)
            yield
    finally:
        gc.unfreeze()
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
    choice (one job, one task, or less work, in decompressed bytes, than :func:`_min_bytes` unless ``force``)."""
    plan = detect.plan(plist)
    ts = tasks(plan)
    sizes = [t.size for t in ts]  # on disk: what progress counts
    works = [task_work(t) for t in ts]  # decompressed: what the readers parse
    total = sum(sizes)
    workers = min(jobs, len(ts))
    method = start_method()
    if workers <= 1 or (not force and sum(works) < _min_bytes(method)):
        return None
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = mp.get_context(method)
    units: list[Unit | None] = [None] * len(ts)
    done = 0
    # Most work first: the long files start early, the small ones fill the gaps at the end.
    order = sorted(range(len(ts)), key=lambda i: -works[i])
    from concurrent.futures.process import BrokenProcessPool

    pool = None
    try:
        _become_subreaper()
        if method == "forkserver":
            # Workers fork from a server that has already imported the readers and the analysis.
            ctx.set_forkserver_preload([__name__])
            _start_server(ctx)
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init)
        if method == "fork":
            # The first submit forks every worker, here and now (before anything is read in this process).
            with _forking():
                first = pool.submit(work, ts[order[0]], max_bytes, op, events)
            futs = {first: order[0], **{pool.submit(work, ts[i], max_bytes, op, events): i for i in order[1:]}}
        else:
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
    par = collect(plist, plan, units, workers, op)  # type: ignore[arg-type]
    par.method = method
    return par
