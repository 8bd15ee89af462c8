"""Trace readers: any supported profiler output → :class:`~expo_prof.timeline.Timeline` per rank.

Entry point: :func:`load`. It accepts files and directories (walked
recursively, many ranks at once), picks the reader from the file, and returns
one Timeline per rank per source plus warnings and the files it skipped. The
formats, how each is detected, and the quirks met in real files are in
docs/trace-formats.md.
"""

from __future__ import annotations

import sys

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from expo_prof.words import plural
from expo_prof.errors import BadInput
from expo_prof.readers import detect
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED, file_size, read_bytes
from expo_prof.timeline import Timeline

__all__ = ["DEFAULT_MAX_DECOMPRESSED", "LoadResult", "Task", "TaskOutput", "assemble", "load", "read_file", "read_task",
           "tasks"]

ProgressFn = Callable[[int, int], None]


@dataclass
class LoadResult:
    """What :func:`load` read."""

    #: One Timeline per rank per source, in input order.
    timelines: list[Timeline] = field(default_factory=list)
    #: Recoverable problems (one line each), including each Timeline's own warnings.
    warnings: list[str] = field(default_factory=list)
    #: Files not read, with the reason (one line each).
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def load(
    paths: Sequence[str | Path],
    *,
    max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
    progress: ProgressFn | None = None,
) -> LoadResult:
    """Read every trace found under ``paths``.

    ``max_bytes`` caps the decompressed size of each file (gzip bombs, traces
    too large for memory). ``progress(bytes_done, bytes_total)`` is called as
    on-disk bytes are consumed. Raises :class:`~expo_prof.errors.BadInput`
    with a one-line message when nothing usable remains.

    The work is split into :func:`tasks` read by :func:`read_task` and put back
    in order by :func:`assemble`; :mod:`expo_prof.pipeline.parallel` runs the same
    tasks in worker processes (or on Ray) with the same result.
    """
    plist = _paths(paths)
    p = detect.plan(plist)
    total = sum(file_size(j.path) for j in p.jobs)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(min(done, total), total)

    outs = [read_task(t, max_bytes=max_bytes, progress=tick if progress else None) for t in tasks(p)]
    return assemble(plist, p, outs)


def _paths(paths: Sequence[str | Path]) -> list[Path]:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    plist = [Path(p) for p in paths]
    if not plist:
        raise BadInput("no input path given")
    return plist


@dataclass
class Task:
    """One unit of reading: one file, or the msprof JSON slices of one profile folder (merged into one rank)."""

    #: (index in the plan, job) of each file.
    jobs: list[tuple[int, detect.Job]]

    @property
    def merged(self) -> bool:
        return self.jobs[0][1].reader == detect.MSPROF_JSON

    @property
    def size(self) -> int:
        return sum(file_size(j.path) for _, j in self.jobs)


@dataclass
class TaskOutput:
    """What :func:`read_task` read: the Timeline (None when every file failed) and the files it could not read."""

    timeline: Timeline | None
    #: (index in the plan, path, reason).
    skipped: list[tuple[int, Path, str]] = field(default_factory=list)
    #: Plan index of the first file read successfully (orders the merged msprof Timelines as a serial read does).
    first_ok: int = -1
    merged: bool = False


def tasks(p: detect.Plan) -> list[Task]:
    """The plan's jobs as independent reading tasks, in plan order (msprof slices of one folder together)."""
    out: list[Task] = []
    by_dir: dict[Path, Task] = {}
    for i, job in enumerate(p.jobs):
        if job.reader == detect.MSPROF_JSON:
            pd = detect.profile_dir(job.path) or job.path.parent
            t = by_dir.get(pd)
            if t is None:
                t = by_dir[pd] = Task([])
                out.append(t)
            t.jobs.append((i, job))
        else:
            out.append(Task([(i, job)]))
    return out


def read_task(task: Task, *, max_bytes: int = DEFAULT_MAX_DECOMPRESSED, progress=None) -> TaskOutput:
    """Read one task's files; problems become ``skipped`` lines (never an exception)."""
    out = TaskOutput(None, merged=task.merged)
    got: list[Timeline] = []
    for i, job in task.jobs:
        tl, why = read_job(job, max_bytes=max_bytes, progress=progress)
        if tl is None:
            out.skipped.append((i, job.path, why or ""))
            continue
        if out.first_ok < 0:
            out.first_ok = i
        got.append(tl)
    if got:
        if len(got) > 1:
            from expo_prof.readers.builder import merge_timelines

            out.timeline = merge_timelines(got)
        else:
            out.timeline = got[0]
    return out


def read_job(job: detect.Job, *, max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
             progress: Callable[[int], None] | None = None) -> tuple[Timeline | None, str | None]:
    """Read one file: its Timeline, or None and the one-line reason it was skipped."""
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        progress(n)  # type: ignore[misc]

    try:
        return read_file(job, max_bytes=max_bytes, progress=tick if progress else None), None
    except BadInput as exc:
        return None, one_line(_strip_path(str(exc), job.path))
    except MemoryError:
        return None, "out of memory while reading (lower --max-bytes or read fewer files)"
    except RecursionError:
        # msgspec (and json) decode nested values recursively, up to Python's recursion limit: a file nested
        # that deep (10^6 "[" at the top, in traceEvents or in args) is no profiler's output (issue 34).
        return None, f"JSON nested deeper than {sys.getrecursionlimit()} levels (not a profiler trace)"
    except Exception as exc:  # a reader bug must not become a traceback for the user
        return None, one_line(f"internal error while reading: {type(exc).__name__}: {exc}")
    finally:
        # Files read without progress callbacks (CSV, SQLite) still advance the bar.
        size = file_size(job.path)
        if progress is not None and done < size:
            progress(size - done)


def assemble(plist: list[Path], p: detect.Plan, outs: Sequence[TaskOutput]) -> LoadResult:
    """The :class:`LoadResult` of the tasks' outputs (in task order), exactly as a serial read gives it.

    Timelines in plan order, the merged msprof ones last; skipped files in plan order after the plan's own.
    """
    result = LoadResult(skipped=list(p.skipped))
    skipped = sorted((s for o in outs for s in o.skipped), key=lambda s: s[0])
    result.skipped += [(path, why) for _, path, why in skipped]
    result.timelines = [o.timeline for o in outs if o.timeline is not None and not o.merged]
    merged = sorted((o for o in outs if o.timeline is not None and o.merged), key=lambda o: o.first_ok)
    result.timelines += [o.timeline for o in merged]  # type: ignore[misc]
    if any(tl.meta.get("rank_pids") for tl in result.timelines):
        # An expo-prof export of several ranks: one Timeline per rank again.
        from expo_prof.readers.builder import split_ranks

        result.timelines = [part for tl in result.timelines
                            for part in (split_ranks(tl, tl.meta["rank_pids"]) if tl.meta.get("rank_pids") else [tl])]
    for tl in result.timelines:
        tl.warnings[:] = [one_line(w) for w in tl.warnings]
        result.warnings.extend(tl.warnings)
    if not result.timelines:
        raise BadInput(one_line(_nothing_message(plist, p, result), limit=800))
    return result


def read_file(job: detect.Job | str | Path, *, max_bytes: int = DEFAULT_MAX_DECOMPRESSED, progress=None) -> Timeline:
    """Read one file with the reader chosen for it (a :class:`~expo_prof.readers.detect.Job` or a path)."""
    if not isinstance(job, detect.Job):
        path = Path(job)
        pl = detect.plan([path])
        if not pl.jobs:
            reason = pl.skipped[0][1] if pl.skipped else "not a recognised trace"
            raise BadInput(f"{path}: {reason}")
        job = pl.jobs[0]
    r = job.reader
    if r in (detect.KINETO, detect.TRACE_VIEW, detect.MSPROF_JSON):
        from expo_prof.readers.chrome.reader import read_chrome_file

        tl = read_chrome_file(job.path, max_bytes=max_bytes, progress=progress,
                              fmt_hint=None if r == detect.KINETO else r, rank_hint=job.rank_hint)
    elif r == detect.OVERLAY:
        from expo_prof.readers.overlay_log import read_overlay_log_file

        tl = read_overlay_log_file(job.path, max_bytes=max_bytes, progress=progress)
    elif r in (detect.KERNEL_CSV, detect.MSPROF_OP_SUMMARY, detect.MSPROF_TASK_TIME):
        from expo_prof.readers.ascend.kernel_csv import read_kernel_csv

        loaded = read_bytes(job.path, max_bytes=max_bytes, progress=progress)
        tl = read_kernel_csv(loaded.take(), job.path, fmt=r, rank_hint=job.rank_hint)
        tl.warnings[:0] = loaded.warnings
    elif r in (detect.ASCEND_DB, detect.MSPROF_DB):
        from expo_prof.readers.ascend.profiler_db import read_profiler_db

        tl = read_profiler_db(job.path, fmt=r, rank_hint=job.rank_hint, max_bytes=max_bytes)
    elif r in (detect.NSYS, detect.NSYS_REP):
        from expo_prof.readers.nsys.tables import read_nsys_export

        export = job.path
        if r == detect.NSYS_REP:
            from expo_prof.readers.nsys.report import sqlite_for

            export = sqlite_for(job.path)
        tl = read_nsys_export(export, max_bytes=max_bytes, source=str(job.path))
        if export != job.path:
            tl.meta["nsys_export"] = str(export)
    else:  # pragma: no cover - plan() only yields known readers
        raise BadInput(f"{job.path}: no reader for {r}")
    if len(tl) == 0:
        raise BadInput(f"{job.path}: no usable events")
    if job.companions:
        from expo_prof.readers.ascend.kernel_csv import attach_companions

        attach_companions(tl, job.companions)
    if tl.backend == "npu":
        _name_npu_device(tl)
    return tl


def _name_npu_device(tl: Timeline) -> None:
    from expo_prof.readers.chrome.reader import relabel_lanes

    dev = tl.meta.get("device_id")
    if isinstance(dev, int):
        tl.lanes = relabel_lanes(tl.lanes, f"npu:{dev}")


def one_line(msg: str, limit: int = 400) -> str:
    """Collapse whitespace (SQL in sqlite errors, names with newlines) so a message stays one line."""
    text = " ".join(msg.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _strip_path(msg: str, path: Path) -> str:
    prefix = f"{path}: "
    return msg[len(prefix):] if msg.startswith(prefix) else msg


def _nothing_message(plist: list[Path], p: detect.Plan, result: LoadResult) -> str:
    if len(plist) == 1 and plist[0].is_dir() and not p.jobs and not p.skipped:
        return f"no recognisable trace in {plist[0]} (looked for {detect.LOOKED_FOR})"
    if len(result.skipped) == 1:
        path, why = result.skipped[0]
        return f"{path}: {why}"
    if result.skipped:
        path, why = result.skipped[0]
        return f"no usable trace in {plural(len(result.skipped), 'file')}; first: {path}: {why}"
    where = ", ".join(str(x) for x in plist[:3]) + (" …" if len(plist) > 3 else "")
    return f"no recognisable trace in {where} (looked for {detect.LOOKED_FOR})"
