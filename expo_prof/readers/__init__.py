"""Trace readers: any supported profiler output → :class:`~expo_prof.timeline.Timeline` per rank.

Entry point: :func:`load`. It accepts files and directories (walked
recursively, many ranks at once), picks the reader from the file, and returns
one Timeline per rank per source plus warnings and the files it skipped. The
formats, how each is detected, and the quirks met in real files are in
docs/trace-formats.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from expo_prof.errors import BadInput
from expo_prof.readers import detect
from expo_prof.readers.source import DEFAULT_MAX_DECOMPRESSED, file_size, read_bytes
from expo_prof.timeline import Timeline

__all__ = ["DEFAULT_MAX_DECOMPRESSED", "LoadResult", "load", "read_file"]

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
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    plist = [Path(p) for p in paths]
    if not plist:
        raise BadInput("no input path given")
    p = detect.plan(plist)
    result = LoadResult(skipped=list(p.skipped))
    total = sum(file_size(j.path) for j in p.jobs)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(min(done, total), total)

    merged_msprof: dict[Path, list[Timeline]] = {}
    for job in p.jobs:
        before = done
        try:
            tl = read_file(job, max_bytes=max_bytes, progress=tick if progress else None)
        except BadInput as exc:
            result.skipped.append((job.path, one_line(_strip_path(str(exc), job.path))))
            continue
        except MemoryError:
            result.skipped.append((job.path, "out of memory while reading (lower --max-bytes or read fewer files)"))
            continue
        except Exception as exc:  # a reader bug must not become a traceback for the user
            result.skipped.append((job.path, one_line(f"internal error while reading: {type(exc).__name__}: {exc}")))
            continue
        finally:
            # Files read without progress callbacks (CSV, SQLite) still advance the bar.
            size = file_size(job.path)
            if progress is not None and done - before < size:
                tick(size - (done - before))
        if tl.meta.get("rank_pids"):  # an expo-prof export of several ranks: one Timeline per rank again
            from expo_prof.readers.builder import split_ranks

            result.timelines.extend(split_ranks(tl, tl.meta["rank_pids"]))
            continue
        if job.reader == detect.MSPROF_JSON:
            pd = detect.profile_dir(job.path) or job.path.parent
            merged_msprof.setdefault(pd, []).append(tl)
            continue
        result.timelines.append(tl)
    for tls in merged_msprof.values():
        from expo_prof.readers.builder import merge_timelines

        result.timelines.append(merge_timelines(tls) if len(tls) > 1 else tls[0])
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
        from expo_prof.readers.chrome import read_chrome_file

        tl = read_chrome_file(job.path, max_bytes=max_bytes, progress=progress,
                              fmt_hint=None if r == detect.KINETO else r, rank_hint=job.rank_hint)
    elif r == detect.OVERLAY:
        from expo_prof.readers.overlay_log import read_overlay_log

        loaded = read_bytes(job.path, max_bytes=max_bytes, progress=progress)
        tl = read_overlay_log(loaded.data, job.path)
        tl.warnings[:0] = loaded.warnings
    elif r in (detect.KERNEL_CSV, detect.MSPROF_OP_SUMMARY, detect.MSPROF_TASK_TIME):
        from expo_prof.readers.ascend_csv import read_kernel_csv

        loaded = read_bytes(job.path, max_bytes=max_bytes, progress=progress)
        tl = read_kernel_csv(loaded.data, job.path, fmt=r, rank_hint=job.rank_hint)
        tl.warnings[:0] = loaded.warnings
    elif r in (detect.ASCEND_DB, detect.MSPROF_DB):
        from expo_prof.readers.ascend_db import read_profiler_db

        tl = read_profiler_db(job.path, fmt=r, rank_hint=job.rank_hint, max_bytes=max_bytes)
    else:  # pragma: no cover - plan() only yields known readers
        raise BadInput(f"{job.path}: no reader for {r}")
    if len(tl) == 0:
        raise BadInput(f"{job.path}: no usable events")
    if job.companions:
        from expo_prof.readers.ascend_csv import attach_companions

        attach_companions(tl, job.companions)
    if tl.backend == "npu":
        _name_npu_device(tl)
    return tl


def _name_npu_device(tl: Timeline) -> None:
    from expo_prof.readers.chrome import relabel_lanes

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
    if len(plist) == 1 and plist[0].is_dir() and not p.jobs:
        return f"no recognisable trace in {plist[0]} (looked for {detect.LOOKED_FOR})"
    if len(result.skipped) == 1:
        path, why = result.skipped[0]
        return f"{path}: {why}"
    if result.skipped:
        path, why = result.skipped[0]
        return f"no usable trace in {len(result.skipped)} file(s); first: {path}: {why}"
    where = ", ".join(str(x) for x in plist[:3]) + (" …" if len(plist) > 3 else "")
    return f"no recognisable trace in {where} (looked for {detect.LOOKED_FOR})"
