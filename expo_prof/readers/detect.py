"""Which reader a path needs, and which files of a directory tree to read.

A directory is walked recursively. Files are recognised by name (and, for
generic ``*.json[.gz]``, by their first bytes). Ascend outputs hold several
renderings of one profile (``trace_view.json``, ``kernel_details.csv``,
``ascend_pytorch_profiler_*.db``): per profile directory only the richest one
is read, and the others are listed as skipped with the reason.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from expo_prof.paths import under
from expo_prof.readers.file_bytes import _GZIP_MAGIC

# Reader names (also Timeline.fmt values).
KINETO = "kineto"
TRACE_VIEW = "ascend-trace-view"
KERNEL_CSV = "ascend-kernel-csv"
ASCEND_DB = "ascend-db"
MSPROF_JSON = "msprof"
MSPROF_OP_SUMMARY = "msprof-op-summary"
MSPROF_TASK_TIME = "msprof-task-time"
MSPROF_DB = "msprof-db"
OVERLAY = "overlay-log"
NSYS = "nsys"  # Nsight Systems SQLite export (by content)
NSYS_REP = "nsys-rep"  # Nsight Systems report, exported to SQLite first (readers/nsys/report.py)

#: Preference inside one profile directory (lower = richer, read first).
_RANK_IN_PROFILE = {
    TRACE_VIEW: 0,
    ASCEND_DB: 1,
    KERNEL_CSV: 2,
    MSPROF_JSON: 0,
    MSPROF_DB: 1,
    MSPROF_OP_SUMMARY: 2,
    MSPROF_TASK_TIME: 3,
}

LOOKED_FOR = (
    "*.pt.trace.json[.gz], trace_view.json, kernel_details.csv, ascend_pytorch_profiler*.db, "
    "PROF_*/mindstudio_profiler_output, expo-prof-events-*.jsonl, Nsight Systems *.nsys-rep / SQLite export"
)

#: Files that belong to profiler outputs but hold no timeline (explicit paths get this reason).
_NOT_TRACES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^step_trace_time\.csv$"), "per-step totals only (read together with its profile's trace)"),
    (re.compile(r"^op_statistic(_\d+)?\.csv$"), "op statistics summary, no timestamps"),
    (re.compile(r"^api_statistic(_\d+)?\.csv$"), "API statistics summary, no timestamps"),
    (re.compile(r"^operator_details\.csv$"), "operator summary, no timestamps"),
    (re.compile(r"^operator_memory\.csv$|^memory_record\.csv$|^npu_module_mem\.csv$"), "memory records, no timeline"),
    (re.compile(r"^communication(_matrix)?\.json$"), "communication statistics, no timeline"),
    (re.compile(r"^profiler_info(_\d+)?\.json$"), "profiler settings (read for the rank)"),
    (re.compile(r"^profiler_metadata\.json$"), "profiler metadata, no timeline"),
    (re.compile(r"^analysis\.db$"), "torch_npu analysis summary (StepTraceTime), no timeline"),
    (re.compile(r"^PROVENANCE\.md$|\.md$|\.txt$|\.log$"), "not a trace"),
    # expo-prof's own run-directory files (docs: expo_prof/runs/layout.py).
    (re.compile(r"^(manifest|workload|analysis|session|collected)\.json$"), "expo-prof run-directory file, no timeline"),
    (re.compile(r"\.html?$"), "HTML page, not a trace"),
]


# File-name patterns, compiled once (not on each file's first look).
_RE_OVERLAY = re.compile(r"expo-prof-events-.*\.jsonl")
_RE_KERNEL_CSV = re.compile(r"kernel_details(_\d+)?\.csv")
_RE_ASCEND_DB = re.compile(r"ascend_pytorch_profiler(_\d+)?\.db")
_RE_MSPROF_JSON = re.compile(r"msprof(_slice)?_[\w.-]*\.json")
_RE_MSPROF_DB = re.compile(r"msprof(_\d+)?\.db|msprof_[\w.-]*\.db")
_RE_OP_SUMMARY = re.compile(r"op_summary(_[\w.-]+)?\.csv")
_RE_TASK_TIME = re.compile(r"task_time(_[\w.-]+)?\.csv")
_RE_PROFILER_INFO = re.compile(r"profiler_info_(\d+)\.json")
_RE_RANK_DIR = re.compile(r"rank[_-]?(\d+)(_ascend_pt)?|.*_rank[_-]?(\d+)(_ascend_pt)?")
_RE_DEVICE_DIR = re.compile(r"device_(\d+)")
#: SQLite files of a directory walk whose content is looked at (an nsys export may have any of these names).
_SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
#: Nsight Systems reports (``.qdrep`` before nsys 2021.4).
_NSYS_REP_SUFFIXES = (".nsys-rep", ".qdrep")
_SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass
class Job:
    """One file to read with one reader."""

    path: Path
    reader: str
    rank_hint: int | None = None
    #: Companion files read into meta (step_trace_time.csv, analysis.db).
    companions: list[Path] = field(default_factory=list)


@dataclass
class Plan:
    jobs: list[Job] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    #: Directories given that contained nothing recognisable.
    empty_dirs: list[Path] = field(default_factory=list)


def classify_name(path: Path) -> str | None:
    """Reader for a file judged by its name alone (None: not recognised by name)."""
    n = path.name
    if _RE_OVERLAY.fullmatch(n):
        return OVERLAY
    if n == "trace_view.json":
        return TRACE_VIEW
    if _RE_KERNEL_CSV.fullmatch(n):
        return KERNEL_CSV
    if _RE_ASCEND_DB.fullmatch(n):
        return ASCEND_DB
    if _RE_MSPROF_JSON.fullmatch(n) and "mindstudio_profiler_output" in path.parts:
        return MSPROF_JSON
    if _RE_MSPROF_DB.fullmatch(n):
        return MSPROF_DB
    if _RE_OP_SUMMARY.fullmatch(n):
        return MSPROF_OP_SUMMARY
    if _RE_TASK_TIME.fullmatch(n):
        return MSPROF_TASK_TIME
    if n.endswith(".pt.trace.json") or n.endswith(".pt.trace.json.gz"):
        return KINETO
    if n.endswith(_NSYS_REP_SUFFIXES):
        return NSYS_REP
    return None


def sniff_sqlite(path: Path) -> tuple[str | None, str | None]:
    """Reader of a SQLite file by its tables (``(None, None)`` when it is not SQLite; ``(None, why)`` when it is
    SQLite but no trace, or cannot be read).

    Only nsys exports are recognised by content: the Ascend databases keep their file names.
    """
    try:
        with open(path, "rb") as f:
            if f.read(16) != _SQLITE_MAGIC:
                return None, None
    except OSError:
        return None, None
    import sqlite3

    from expo_prof.errors import BadInput
    from expo_prof.readers.nsys.tables import is_nsys_export
    from expo_prof.readers.sqlite_readonly import connect_readonly

    try:
        con = connect_readonly(path)
    except BadInput as exc:
        return None, str(exc).removeprefix(f"{path}: ")
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        return None, f"damaged SQLite database ({exc})" if isinstance(exc, sqlite3.Error) else "damaged SQLite database"
    finally:
        con.close()
    if is_nsys_export(tables):
        return NSYS, None
    return None, "a SQLite database without the tables of a known profiler (Nsight Systems export, torch_npu, msprof)"


def not_a_trace_reason(path: Path) -> str | None:
    for pat, why in _NOT_TRACES:
        if pat.search(path.name):
            return why
    return None


def sniff(path: Path) -> str | None:
    """Reader for a generic ``*.json[.gz]`` / ``*.jsonl`` by its first bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if head[:2] == _GZIP_MAGIC:
        import zlib

        try:
            head = zlib.decompressobj(wbits=31).decompress(head, 4096)
        except zlib.error:
            # Corrupt from the start: let the Kineto reader report it if the name says JSON.
            return KINETO if ".json" in path.name else None
    text = head.lstrip()
    if text.startswith(b"{"):
        if b'"type"' in text[:200] and b'"header"' in text[:400] and path.suffix == ".jsonl":
            return OVERLAY
        return KINETO
    if text.startswith(b"["):
        return TRACE_VIEW
    return None


def profile_dir(path: Path) -> Path | None:
    """The profile directory a file of an Ascend/msprof output belongs to."""
    for parent in path.parents:
        if parent.name in ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output"):
            return parent
    return None


def ascend_rank(path: Path) -> int | None:
    """Rank of an Ascend output: profiler_info_N.json (``rank_id``), else ``rank_N`` / ``rankN_ascend_pt`` names."""
    for parent in path.parents:
        infos = sorted(parent.glob("profiler_info*.json")) if parent.name.endswith("_ascend_pt") or (
            parent / "ASCEND_PROFILER_OUTPUT"
        ).is_dir() else []
        for info in infos:
            try:
                with open(info, "rb") as f:
                    data = json.loads(f.read(1 << 20))
                r = data.get("rank_id") if isinstance(data, dict) else None
                if isinstance(r, int) and r >= 0:
                    return r
            except (OSError, ValueError):
                pass
            m = _RE_PROFILER_INFO.fullmatch(info.name)
            if m:
                return int(m.group(1))
        m = _RE_RANK_DIR.fullmatch(parent.name)
        if m:
            return int(m.group(1) or m.group(3))
        if parent.name.startswith("PROF_") or parent.name.endswith("_ascend_pt"):
            break
    for parent in path.parents:
        m = _RE_DEVICE_DIR.fullmatch(parent.name)
        if m:
            return int(m.group(1))
    return None


def companions_of(path: Path) -> list[Path]:
    """step_trace_time.csv / analysis.db next to an Ascend source."""
    d = path.parent
    out = []
    for name in ("step_trace_time.csv", "analysis.db"):
        p = d / name
        if p.is_file():
            out.append(p)
    return out


#: Why a FIFO, socket or device is never opened: reading one can block forever or never end.
NOT_REGULAR = "not a regular file (a FIFO, socket or device): not read; save it to a file first"


#: Links followed at most when naming a loop (the kernel gives up after 40: ELOOP).
_LOOP_HOPS = 40


def link_loop(p: Path) -> list[str] | None:
    """The chain of a symbolic link that never reaches a file (``a -> b``, ``b -> a``; ``self -> self``) — each
    link's path as written, from ``p`` until one repeats — or None when ``p`` is no such loop. Resolving one
    raises (RuntimeError, ELOOP), so the OS is asked first."""
    try:
        os.stat(p)
        return None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            return None
    chain: list[str] = []
    here = os.path.normpath(p)
    while here not in chain and len(chain) < _LOOP_HOPS:
        chain.append(here)
        try:
            here = os.path.normpath(os.path.join(os.path.dirname(here), os.readlink(here)))
        except OSError:
            break  # a hop through a folder link: the chain is named as far as it reads
    else:
        chain.append(here)
    return chain


def loop_words(chain: list[str]) -> str:
    """A link loop for people: ``a symbolic link loop (d/a → d/b → d/a): not followed``."""
    return f"a symbolic link loop ({' → '.join(chain)}): not followed"


def folder_loop(p: Path, root: Path) -> str | None:
    """Why the symbolic link ``p`` to a folder, met in the walk's folder ``root``, is a loop — it leads back to
    ``root`` or a folder above it, so descending it would walk the same files again for ever — or None (a link
    to any other folder: not descended either, without a word)."""
    try:
        real, real_root = p.resolve(), root.resolve()
        to = os.readlink(p)
    except (OSError, RuntimeError):
        return None
    if not under(real_root, real):
        return None
    # The folder it leads back to, as the walk spells it (else its real path).
    back = next((str(a) for a in (root, *root.parents) if a.resolve() == real), str(real))
    where = "the folder it is in" if real == real_root else "a folder above it"
    return f"a symbolic link loop ({p} → {to}: back to {back}, {where}): not descended"


def not_walked(p: Path, top: Path, real_top: Path) -> str | None:
    """Why a file met in the walk of directory ``top`` (resolved: ``real_top``) is not read, or None: a
    symbolic link leading out of ``top`` is never followed (a run directory received from elsewhere may link
    anywhere), a link loop is never resolved, and a FIFO, socket or device is never opened (a read could
    block forever)."""
    if p.is_symlink():
        loop = link_loop(p)
        if loop is not None:
            return loop_words(loop)
        real = p.resolve()
        if not under(real, real_top):
            return f"a symbolic link leading out of {top} (to {real}): not followed"
    try:
        mode = p.stat().st_mode
    except OSError:
        return None  # a dangling link: the read names the error
    return None if stat.S_ISREG(mode) else NOT_REGULAR


def plan(paths: list[Path]) -> Plan:
    """Decide which files to read with which reader."""
    result = Plan()
    for p in paths:
        if p.is_dir():
            _plan_dir(p, result)
        elif p.exists() and not p.is_file():
            result.skipped.append((p, NOT_REGULAR))
        elif p.exists():
            _plan_file(p, result, explicit=True)
        else:
            result.skipped.append((p, "no such file or directory"))
    # A file named twice (directly and through its directory) is read once.
    seen: set[Path] = set()
    jobs = []
    for job in result.jobs:
        key = job.path.resolve()
        if key not in seen:
            seen.add(key)
            jobs.append(job)
    result.jobs = jobs
    return result


def _plan_file(p: Path, result: Plan, explicit: bool) -> bool:
    reader = classify_name(p)
    if reader is None:
        why = not_a_trace_reason(p)
        if why is not None:
            if explicit:
                result.skipped.append((p, why))
            return False
        why = None
        if p.name.endswith((".json", ".json.gz", ".gz", ".jsonl")) or explicit:
            reader = sniff(p)
        if reader is None and (p.name.endswith(_SQLITE_SUFFIXES) or explicit):
            reader, why = sniff_sqlite(p)
        if reader is None:
            if explicit:
                result.skipped.append((p, why or f"not a recognised trace (looked for {LOOKED_FOR})"))
            return False
    rank = ascend_rank(p) if reader not in (KINETO, OVERLAY, NSYS, NSYS_REP) else None
    comps = companions_of(p) if reader in (TRACE_VIEW, KERNEL_CSV, ASCEND_DB) else []
    result.jobs.append(Job(p, reader, rank, comps))
    return True


def _plan_dir(d: Path, result: Plan) -> None:
    found: list[Job] = []
    sub = Plan()
    real_top = d.resolve()
    in_loops: set[str] = set()  # the links of the loops named so far
    for root, dirs, files in os.walk(d):  # symbolic links to folders are not descended (followlinks=False)
        dirs.sort()
        for name in dirs:
            # A link back to this folder or one above it: a loop, named once (never descended anyway).
            link = Path(root) / name
            why = folder_loop(link, Path(root)) if link.is_symlink() else None
            if why is not None:
                result.skipped.append((link, why))
        for f in sorted(files):
            p = Path(root) / f
            loop = link_loop(p) if p.is_symlink() else None
            if loop is not None:
                # One warning per loop: its other links are named in it (a -> b -> a: a, not b as well).
                if os.path.normpath(p) not in in_loops:
                    result.skipped.append((p, loop_words(loop)))
                in_loops.update(loop)
                continue
            why = not_walked(p, d, real_top)
            if why is not None:
                result.skipped.append((p, why))
                continue
            _plan_file(p, sub, explicit=False)
    found = _reports_once(sub.jobs, result)
    if not found:
        result.empty_dirs.append(d)
        return
    # One source per profile directory: the richest.
    by_profile: dict[Path, list[Job]] = {}
    for job in found:
        pd = profile_dir(job.path) if job.reader in _RANK_IN_PROFILE else None
        if pd is None:
            result.jobs.append(job)
        else:
            by_profile.setdefault(pd, []).append(job)
    for _pd, jobs in by_profile.items():
        jobs.sort(key=lambda j: (_RANK_IN_PROFILE[j.reader], str(j.path)))
        best = _RANK_IN_PROFILE[jobs[0].reader]
        chosen = [j for j in jobs if _RANK_IN_PROFILE[j.reader] == best]
        # Several msprof json slices of one output are all read (merged later).
        if chosen[0].reader != MSPROF_JSON:
            chosen = chosen[:1]
        result.jobs.extend(chosen)
        for j in jobs:
            if j not in chosen:
                result.skipped.append((j.path, f"same profile as {chosen[0].path.name} (read that instead)"))


def _reports_once(jobs: list[Job], result: Plan) -> list[Job]:
    """Drop a ``X.nsys-rep`` whose export ``X.sqlite`` is in the same folder: the same profile, already read."""
    exports = {(j.path.parent, j.path.stem): j.path.name for j in jobs if j.reader == NSYS}
    out = []
    for j in jobs:
        export = exports.get((j.path.parent, j.path.stem)) if j.reader == NSYS_REP else None
        if export is not None:
            result.skipped.append((j.path, f"same profile as {export} (read that instead)"))
        else:
            out.append(j)
    return out
