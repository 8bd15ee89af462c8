"""The one path from the paths a user gives to a :class:`~expo_prof.pipeline.result.Result`.

    paths ──inputs──▶ files ──readers.load──▶ Timelines ──runs.group──▶ recordings
          ──analysis.analyze_parts (per recording)──▶ Result ──▶ tables / JSON / pages / export

Every command calls :func:`run`; nothing else reads traces for a figure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from expo_prof.analysis.rollup import analyze_parts
from expo_prof.analysis.cluster import cluster_view
from expo_prof.analysis.model import AnalysisResult, RecordingEntry
from expo_prof.analysis.saving.recording import savings_of, sequential_spec
from expo_prof.errors import BadInput, NothingFound
from expo_prof.pipeline.options import Options
from expo_prof.pipeline.result import RecordingResult, Result
from expo_prof.pipeline.token_gaps import switchback_arrival_of
from expo_prof.readers.detect import OVERLAY
from expo_prof.readers.overlay_log import NO_SUMMARY, one_per_run
from expo_prof.runs.manifest import (Manifest, in_progress_note, is_run_dir, is_session_dir, read_manifest,
                                     read_session)
from expo_prof.runs.recordings import Recording, group
from expo_prof.timeline import Timeline, overlay_log
from expo_prof.version import __version__

ProgressFn = Callable[[int, int], None]


def expand(paths: Sequence[str | Path]) -> list[Path]:
    """The user's paths with each session directory replaced by its run directories (BadInput when missing)."""
    if not paths:
        raise BadInput("no input path given (a trace file, a run directory or a folder of traces)")
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise BadInput(f"{p}: no such file or directory")
        if is_session_dir(p):
            runs = read_session(p).run_dirs()
            if not runs:
                raise BadInput(f"{p}: no run of the session is left on disk")
            out.extend(runs)
        else:
            out.append(p)
    return out


def _own_file(path: str, reason: str) -> str | None:
    """What kind of expected, self-written or duplicate file a skipped entry is (None: a real problem)."""
    name = Path(path).name
    if (".async_llm." in name and "no usable timed events" in reason) or "a vLLM front-end (API server) trace" in reason:
        return "vLLM front-end (async_llm) trace(s) without device or model work"
    if reason.startswith("same profile as"):
        return "duplicate export(s) of a profile read through another file"
    if "expo-prof run-directory file" in reason or name in ("timeline.html", "report.html", "server.log"):
        return "expo-prof run-directory file(s)"
    return None


def run(paths: Sequence[str | Path], options: Options | None = None, *,
        progress: ProgressFn | None = None) -> Result:
    """Read ``paths``, group them into recordings and analyse each (see the module docstring).

    Raises :class:`~expo_prof.errors.BadInput` (exit 2) when nothing is readable and
    :class:`~expo_prof.errors.NothingFound` (exit 1) when no recording holds a target instance; both
    carry the warnings gathered so far, which the CLI prints before the error line.
    """
    from expo_prof import readers

    opts = options or Options.make()
    if opts.ray is not None:
        # NODE:PATH inputs live on other nodes: checked there; here they are paths for labels and grouping.
        from expo_prof.pipeline.ray_exec import local_inputs

        if not paths:
            expand(paths)
        plist = [q for p in local_inputs(paths) for q in (expand([p]) if Path(p).exists() else [Path(p)])]
    else:
        plist = expand(paths)
    try:
        par = _read_elsewhere(list(paths) if opts.ray is not None else plist, opts, progress)
        loaded = readers.load(plist, max_bytes=opts.max_bytes, progress=progress) if par is None else par.loaded
    except (BadInput, NothingFound) as exc:
        # A run directory that record has only begun: the error comes with the line that says so.
        exc.warnings[:0] = [in_progress_note(p, m, None, read=False) for p, m in _recording_now(plist)]
        raise
    pre = None if par is None else par.analyses
    warnings = list(loaded.warnings)
    info: list[str] = []
    own: dict[str, int] = {}
    skipped: list[tuple[str, str]] = []
    for p, why in loaded.skipped:
        kind = _own_file(str(p), why)
        if kind is None:
            skipped.append((str(p), why))
        else:
            own[kind] = own.get(kind, 0) + 1
    if own:
        info.append("passed over: " + "; ".join(f"{n} {kind}" for kind, n in own.items()))
    warnings += [f"skipped {p}: {why}" for p, why in skipped]

    recordings = group(loaded.timelines, plist)
    warnings = _in_progress(recordings, loaded.timelines, warnings)
    several = len(recordings) > 1
    results: list[RecordingResult] = []
    last_miss: NothingFound | None = None
    for rec in recordings:
        tls = [loaded.timelines[i] for i in rec.members]
        window = rec.manifest.raw.get("load_window_ns") if rec.manifest is not None else None
        window = window if isinstance(window, list) and len(window) == 2 and all(
            isinstance(x, int) for x in window) else None
        sequential = sequential_spec(rec.manifest.raw if rec.manifest is not None else None)
        savings, natural = savings_of(tls, window, sequential) if opts.op is None else ([], [])
        arrived = switchback_arrival_of(rec, tls) if opts.op is None else None
        try:
            res, parts = analyze_parts(tls, op=opts.op, inputs=[rec.path], source=opts.source,
                                       analyses=[pre[i] for i in rec.members] if pre is not None else None)
        except NothingFound as exc:
            results.append(RecordingResult(rec, None, [], "; ".join([str(exc), *exc.details]), tls,
                                           savings, natural, arrived))
            last_miss = exc
            continue
        if several:
            for r in res.ranks:
                r.recording = rec.label
            for s in res.steps:
                s.recording = rec.label
        prefix = f"{rec.label}: " if several else ""
        warnings += [prefix + w for w in res.warnings if w not in loaded.warnings]
        info += [prefix + line for line in res.info]
        results.append(RecordingResult(rec, res, parts, timelines=tls, savings=savings, natural=natural,
                                       arrival=arrived))

    found = [r for r in results if r.analysis is not None]
    if not found:
        msg = str(last_miss) if len(results) == 1 else f"no target instance found in any of {len(results)} recordings"
        raise NothingFound(msg, warnings=warnings, details=last_miss.details if last_miss else [])
    sides = {r.recording.overlay for r in found} - {None}
    if sides == {"on", "off"}:
        info.append("the inputs hold overlay-off and overlay-on runs: each has its own figures, none combines "
                    "them; for the difference with its confidence interval run `expo-prof compare OFF ON`")
    # A run whose worker was killed before its summary: one warning for the run, not one per event log.
    warnings = one_per_run(warnings)
    document = _document(plist, opts, results, warnings, info, skipped)
    return Result(opts, [str(p) for p in plist], results, document, warnings, info)


def _recording_now(plist: list[Path]) -> list[tuple[Path, Manifest]]:
    """The inputs that are run directories ``record`` is still writing (their manifests say so)."""
    out = []
    for p in plist:
        if p.is_dir() and is_run_dir(p):
            try:
                m = read_manifest(p)
            except BadInput:
                continue
            if m.in_progress:
                out.append((p, m))
    return out


#: The start of the event-log reader's warning about a cut last line (expo_prof/readers/overlay_log.py): a
#: line still being written, in a run that ``record`` is still writing.
_TORN = "last line is incomplete"


def _in_progress(recordings: list[Recording], timelines: list[Timeline], warnings: list[str]) -> list[str]:
    """``warnings`` for runs that ``record`` is still writing (the manifest says so): their event logs have no
    summary line yet and may end in a line being written — not a killed worker. The reader's words for
    those give way to one line per run directory, first, saying the recording is in progress."""
    runs: dict[str, tuple[Manifest, int | None]] = {}
    ours: list[str] = []
    for rec in recordings:
        m = rec.manifest
        if m is None or not m.in_progress:
            continue
        logs = [timelines[i] for i in rec.members if timelines[i].fmt == OVERLAY]
        ours += [f"{tl.source}: " for tl in logs]
        steps = sum(len(ov.steps["step"]) for tl in logs if (ov := overlay_log(tl)) is not None) if logs else None
        before = runs.get(rec.path, (m, None))[1]
        runs[rec.path] = (m, steps if before is None else before + (steps or 0))
    if not runs:
        return warnings

    def theirs(w: str) -> bool:
        return any(w.startswith(head) and w[len(head):].startswith((f"{NO_SUMMARY}: ", _TORN)) for head in ours)

    return [*(in_progress_note(run, m, steps) for run, (m, steps) in runs.items()),
            *(w for w in warnings if not theirs(w))]


def _read_elsewhere(plist: list, opts: Options, progress: ProgressFn | None):
    """The read and per-file analysis on Ray (``--ray``) or in worker processes (``--jobs`` > 1);
    None: read here, serially (:mod:`expo_prof.pipeline.parallel`)."""
    if opts.ray is not None:
        from expo_prof.pipeline.ray_exec import read_on_ray

        return read_on_ray(plist, address=opts.ray, max_bytes=opts.max_bytes, op=opts.op, events=opts.events)
    if opts.jobs > 1:
        from expo_prof.pipeline.parallel import read_parallel

        return read_parallel(plist, jobs=opts.jobs, max_bytes=opts.max_bytes, op=opts.op, events=opts.events,
                             progress=progress)
    return None


def _entry(rr: RecordingResult) -> RecordingEntry:
    rec: Recording = rr.recording
    a = rr.analysis
    ranks = sorted({r.rank for r in a.ranks}) if a is not None else []
    return RecordingEntry(label=rec.label, path=rec.path, overlay=rec.overlay, ranks=ranks,
                    summary=a.summary if a is not None else None, error=rr.error,
                    headline=rr.headline, saving_line=rr.saving_line, savings=rr.savings, natural=rr.natural,
                    bound=rr.bound, measured_under=rr.measured_under, arrival=rr.arrival)


def _document(plist: list[Path], opts: Options, results: list[RecordingResult], warnings: list[str],
              info: list[str], skipped: list[tuple[str, str]]) -> AnalysisResult:
    found = [r.analysis for r in results if r.analysis is not None]
    return AnalysisResult(
        tool_version=__version__,
        op=opts.op,
        source=opts.source,
        inputs=[str(p) for p in plist],
        summary=found[0].summary if len(results) == 1 else None,
        ranks=[r for a in found for r in a.ranks],
        steps=[s for a in found for s in a.steps],
        recordings=[_entry(r) for r in results],
        warnings=warnings,
        info=info,
        skipped=[[p, why] for p, why in skipped],
        cluster=[v for v in (cluster_view(a.steps, a.steps[0].recording if a.steps else None) for a in found) if v],
    )
