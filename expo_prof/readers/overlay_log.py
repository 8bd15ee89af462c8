"""Reader for the overlay's own event log (``expo-prof-events-*.jsonl``, docs/event-log.md).

Each ``step`` line becomes up to four events on the lanes ``overlay forward``,
``overlay exponential``, ``overlay wait`` and ``overlay sampler``
(:attr:`LaneKind.OVERLAY`, events of :attr:`Kind.OVERLAY` named
``expo_prof::forward`` / ``expo_prof::exponential`` / ``expo_prof::wait`` /
``expo_prof::sample``), at ``t0_ns + offset`` on the host monotonic clock, with
the step id in :attr:`Timeline.step`; and one ``overlay model busy`` window per
step on the lane ``overlay model`` (:func:`_model_busy`: what covers the draw).
The per-step records and the header /
summary lines go to one :class:`~expo_prof.timeline.OverlayLog` (``timeline.overlay_log(tl)``), the summary's q memory
figures to its ``q_memory`` (None where an older log lacks one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from expo_prof.errors import BadInput
from expo_prof.words import plural
from expo_prof.readers.builder import build_timeline
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED, Progress, _mb, read_pieces
from expo_prof.timeline import OVERLAY_KEY, OVERLAY_MODEL_BUSY, Interner, Kind, Lane, LaneKind, OverlayLog, Timeline
from overlay.contract import EVENT_LOG_SCHEMA, PHASE_NATIVE, PHASE_OFF, PHASE_ON, SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_SAMPLE, SPAN_WAIT

_WINDOWS = (("fwd", SPAN_FORWARD, "overlay forward"), ("exp", SPAN_EXPONENTIAL, "overlay exponential"),
            ("wait", SPAN_WAIT, "overlay wait"), ("sample", SPAN_SAMPLE, "overlay sampler"))
#: Schemas this reader knows: 1 (no phase, tokens, sampler window or host end: every step is "on"), 2 (two
#: switchback arms, no header ``arms``) and the overlay's current one (3: ``arms``, phase ``native``).
READABLE_SCHEMAS = (1, 2, EVENT_LOG_SCHEMA)
#: Every phase a step line may say.
PHASES = (PHASE_ON, PHASE_OFF, PHASE_NATIVE)
_DEC = msgspec.json.Decoder()


#: The summary's q memory figures (docs/event-log.md), oldest first: each is absent from logs written before it
#: existed (q_block_peak_bytes: before issue 32), read as None there, never as 0.
Q_MEMORY_KEYS = ("q_max_bytes", "q_peak_bytes", "q_reserved_bytes", "q_block_peak_bytes")

#: Integers beyond this are not times, counts or shapes the overlay writes (ns up to ~146 years); a
#: damaged line's huge number counts as missing instead of overflowing an int64 column (or a sum of two).
_INT_LIMIT = 2**62


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and -_INT_LIMIT < v < _INT_LIMIT else None


def _window(v: Any) -> tuple[int, int] | None:
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(_int(x) is not None for x in v) and v[1] >= v[0]:
        return int(v[0]), int(v[1])
    return None


def _short(v: Any) -> str:
    """A value from the file for a message: its repr, cut to 60 characters (a line may hold megabytes)."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _is_int(v: Any) -> bool:
    return _int(v) is not None


def _is_window(v: Any) -> bool:
    return v is None or _window(v) is not None


#: A step line's keys and the values they may hold (docs/event-log.md): a value of another type is a damaged
#: field, ignored (the line's other fields are kept) and counted in one warning.
_STEP_FIELDS: dict[str, Any] = {
    "step": _is_int, "rank": _is_int, "rows": _is_int, "vocab": _is_int, "reqs": _is_int, "tokens": _is_int,
    "t0_ns": _is_int, "launched": lambda v: isinstance(v, bool), "used": lambda v: isinstance(v, bool),
    "dtype": lambda v: isinstance(v, str), "fallback": lambda v: v is None or isinstance(v, str),
    "timing": lambda v: v in ("host", "device"), "phase": lambda v: v in PHASES,
    "block": lambda v: v is None or _is_int(v), "host_end": lambda v: v is None or _is_int(v),
    **{key: _is_window for key, _span, _lane in _WINDOWS},
}


def _bad_fields(step: dict[str, Any]) -> list[str]:
    """The keys of a step line whose values are not of their documented type."""
    return [k for k, ok in _STEP_FIELDS.items() if k in step and not ok(step[k])]


def _model_busy(win: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
    """The model's busy window of a step: forward start until the sampler begins to wait for q.

    In between the model computes the forward, the logits and the sampler's
    own work (softmax, top-k/top-p): all of it covers the lane's draw, not
    only the forward. Without a wait: until the forward, or the step's sampler,
    ended. None without a forward window.
    """
    fwd = win.get("fwd")
    if fwd is None:
        return None
    if "wait" in win:
        end = max(fwd[1], win["wait"][0])
    else:
        end = max(fwd[1], win["sample"][1]) if "sample" in win else fwd[1]
    return fwd[0], end


#: The start of the warning for a log without a usable summary line (:func:`one_per_run` gathers them).
NO_SUMMARY = "no summary line"
KILLED_BEFORE_SUMMARY = ("the worker was killed before it could write its summary (SIGKILL? a vLLM without "
                         "--shutdown-timeout kills it right after SIGTERM; expo-prof record passes one)")
KILLED_WHILE_WRITING = "the worker was killed while writing (its last line is cut)"


def killed_after_checkpoint(steps: int) -> str:
    """The reason when step lines follow the last checkpoint summary (``"final": false``)."""
    return (f"the worker was killed {plural(steps, 'step line')} after its last checkpoint summary, before it "
            "could write its final one")


def missing_why(final: bool | None, steps_after: int, torn: bool) -> str | None:
    """Why an event log has no usable summary line, or None when it has one (or no step line to count): the
    one rule of the reader and of :func:`missing_summary`. ``final``: its last summary line's ``final`` (None:
    no summary line at all); ``steps_after``: the step lines after that line (all of them without one);
    ``torn``: its last line is cut."""
    if final is not None:
        # A checkpoint ("final": false), then steps: the process was killed while it still stepped.
        return killed_after_checkpoint(steps_after) if final is False and steps_after else None
    if not steps_after:
        return None
    return KILLED_WHILE_WRITING if torn else KILLED_BEFORE_SUMMARY


def missing_summary(path: Path, tail_bytes: int = 1 << 16) -> str | None:
    """Why the event log at ``path`` has no usable summary line (the reader's words), or None when it ends
    with one or has no step line to count. Reads only the file's tail: ``record`` checks every log it kept."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - tail_bytes))
        tail = f.read()
    torn = bool(tail) and not tail.endswith(b"\n")
    steps_after = 0
    for raw in reversed(tail.split(b"\n")):
        try:
            obj = msgspec.json.decode(raw) if raw.strip() else None
        except msgspec.DecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        typ = obj.get("type")
        if typ == "summary":
            return missing_why(obj.get("final") is not False, steps_after, torn)
        if typ == "step":
            steps_after += 1
        elif typ == "header":
            break
    return missing_why(None, steps_after, torn)


def one_per_run(warnings: list[str]) -> list[str]:
    """The "no summary line" warnings of several event logs of one run directory as one line per run
    (reason, files and step lines together); every other warning unchanged, in order.

    Keyed by the directory holding the logs' ``overlay/`` folder (the run), else the logs' own folder.
    """
    pat = re.compile(rf"^(?P<path>.+?): {NO_SUMMARY}: (?P<why>.+); counts recomputed from (?P<n>\d+) step line")
    groups: dict[str, list[re.Match[str]]] = {}
    out: list[str | tuple[str]] = []
    for w in warnings:
        m = pat.match(w)
        if m is None:
            out.append(w)
            continue
        p = Path(m["path"])
        run = str(p.parent.parent if p.parent.name == "overlay" else p.parent)
        if run not in groups:
            groups[run] = []
            out.append((run,))
        groups[run].append(m)
    lines: list[str] = []
    for item in out:
        if isinstance(item, str):
            lines.append(item)
            continue
        ms = groups[item[0]]
        if len(ms) == 1:
            lines.append(ms[0].string)
            continue
        whys = list(dict.fromkeys(m["why"] for m in ms))
        steps = sum(int(m["n"]) for m in ms)
        lines.append(f"{item[0]}: {NO_SUMMARY} in {len(ms)} event logs ({', '.join(Path(m['path']).name for m in ms)}):"
                     f" {'; '.join(whys)}; counts recomputed from {plural(steps, 'step line')}")
    return lines


#: The longest line an event log may hold, newline excluded (bytes). The overlay writes step lines of ~340 bytes
#: and header, notice and summary lines of a few hundred; a longer line is not held: it is skipped, counted and
#: its length said (issue 42: a 3 GB line was held whole, 6.3 GB RSS).
MAX_LINE_BYTES = 8 << 20
#: The header line must start within this many bytes of the file (what a file without one is refused after:
#: NUL bytes or other binary are refused from this first window, whatever their size).
HEADER_WITHIN = MAX_LINE_BYTES


_NON_BLANK = re.compile(rb"\S")


class _NoHeaderYet(Exception):
    """The data went past :data:`HEADER_WITHIN` bytes without a header line."""


class _Lines:
    """The lines of an event log, a piece of the file at a time: ``(index, line, length)`` for each, the
    remainder after the last newline included (b"" when the data ends with one); the line is None when it is
    longer than :data:`MAX_LINE_BYTES` (its bytes were not kept). Once all are read, :attr:`count` is their
    number and :attr:`torn` says whether the last one lacks its newline (it is not blank).

    While :attr:`limit` is set (the caller clears it at the header line), reading past that many bytes raises
    :class:`_NoHeaderYet`.
    """

    def __init__(self, pieces: Iterable[bytes], limit: int | None = HEADER_WITHIN) -> None:
        self._pieces = pieces
        self.torn = False
        self.count = 0
        #: The length read of the line being read when :class:`_NoHeaderYet` was raised (:attr:`count` its index).
        self.cut = 0
        self.limit = limit
        #: The first byte of the data that is not blank (-1: none read yet).
        self.first = -1

    def __iter__(self) -> Iterator[tuple[int, bytes | None, int]]:
        parts: list[bytes] = []
        length = 0  # of the current line
        seen = 0  # bytes read
        i = 0
        for piece in self._pieces:
            if self.first < 0:
                m = _NON_BLANK.search(piece)
                self.first = -1 if m is None else piece[m.start()]
            segs = piece.split(b"\n")
            for k, seg in enumerate(segs):
                if length + len(seg) <= MAX_LINE_BYTES:
                    parts.append(seg)
                else:
                    parts.clear()  # too long: no longer kept, only measured
                length += len(seg)
                if k < len(segs) - 1:  # its newline was read: the line is whole
                    yield i, (b"".join(parts) if length <= MAX_LINE_BYTES else None), length
                    parts, length, i = [], 0, i + 1
            seen += len(piece)
            if self.limit is not None and seen > self.limit:
                self.count, self.cut = i, length
                raise _NoHeaderYet
        tail = b"".join(parts) if length <= MAX_LINE_BYTES else None
        # A file written to the end terminates its last line; a killed process may leave a torn one.
        self.torn = tail is None or tail.strip() != b""
        self.count = i + 1
        yield i, tail, length


def read_overlay_log_file(path: Path, *, max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
                          progress: Progress | None = None) -> Timeline:
    """:func:`read_overlay_log` on a file (plain or gzip), read a piece and a line at a time: no line longer
    than :data:`MAX_LINE_BYTES` is held. The reading's warnings (damaged gzip data) come first."""
    warnings: list[str] = []
    tl = _read(_Lines(read_pieces(path, max_bytes=max_bytes, progress=progress, warnings=warnings)), path)
    tl.warnings[:0] = warnings
    return tl


def read_overlay_log(data: bytes | bytearray, path: Path) -> Timeline:
    """Parse one overlay event log into a Timeline (see module docstring)."""
    return _read(_Lines([bytes(data)], limit=None), path)


def _read(lines: _Lines, path: Path) -> Timeline:
    """The Timeline of an event log's lines: the lines read and checked (:class:`_Scan`), the step lines made
    columns and events (:func:`_step_columns`), the header and summary made one
    :class:`~expo_prof.timeline.OverlayLog` (:func:`_overlay_log`)."""
    where = str(path)
    scan = _Scan(where)
    scan.read(lines)
    header = scan.checked(lines)
    warnings = scan.warnings
    rank = _int(header.get("rank")) or 0
    backend = str(header["backend"]) if header.get("backend") in ("cpu", "cuda", "npu") else "cpu"
    lanes = [Lane(LaneKind.OVERLAY, backend, lane_name) for _k, _span, lane_name in _WINDOWS]
    lanes.append(Lane(LaneKind.OVERLAY, backend, "overlay model"))
    names = Interner()
    cols, ev = _step_columns(scan.steps, header, names)
    if ev.missing_t0:
        warnings.append(f"{where}: {ev.missing_t0} step line(s) without t0_ns skipped")
    meta = {OVERLAY_KEY: _overlay_log(scan, header, cols, lines.torn)}
    return build_timeline(
        rank=rank,
        source=where,
        fmt="overlay-log",
        backend=backend,
        lanes=lanes,
        names=names,
        start=np.array(ev.start, dtype=np.int64),
        dur=np.array(ev.dur, dtype=np.int64),
        lane=np.array(ev.lane, dtype=np.int32),
        name=np.array(ev.name, dtype=np.int32),
        kind=np.full(len(ev.start), Kind.OVERLAY, dtype=np.int8),
        step=np.array(ev.step, dtype=np.int64),
        meta=meta,
        warnings=warnings,
    )


class _Scan:
    """The lines of one event log, read and sorted: the header, step, summary and notice lines, and what was
    wrong with the others (counted, the first named, for one warning each)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.warnings: list[str] = []
        self.header: dict[str, Any] | None = None
        self.summary: dict[str, Any] | None = None
        #: Step lines after the last summary line: a checkpoint summary ("final": false) does not count them.
        self.after_summary = 0
        self.notices: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        # Garbage lines (not JSON, not an object, no "type": binary junk, NUL bytes, invalid UTF-8, a cut line)
        # are counted and skipped, the first one named; the valid lines around them are kept.
        self.bad_lines = 0
        self.first_bad = 0
        # Step lines with a field of the wrong type: the field is ignored, the line kept.
        self.bad_field_lines = 0
        self.first_bad_field = ""
        # Lines longer than MAX_LINE_BYTES: skipped unread, the first named with its length.
        self.long_lines = 0
        self.first_long = ""
        # The last line that is not JSON, and whether a header came before it: the last line of the file is
        # torn rather than malformed (a process killed while writing), which is only known at the end.
        self.undecoded, self.header_before = -1, False
        self.text_lines = 0

    def read(self, lines: _Lines) -> None:
        """Read every line (:meth:`line`); BadInput when the data holds no header line where one must be."""
        try:
            for i, raw, length in lines:
                self.line(lines, i, raw, length)
        except _NoHeaderYet:
            raise BadInput(f"{self.where}: not an overlay event log: {self._no_header(lines)}") from None

    def line(self, lines: _Lines, i: int, raw: bytes | None, length: int) -> None:
        """Take line ``i`` (None: longer than :data:`MAX_LINE_BYTES`, ``length`` bytes): counted when it is
        blank, too long or no JSON object with a type, else sorted by its type (:meth:`_typed`)."""
        if raw is None:
            self.text_lines += 1
            self.long_lines += 1
            self.first_long = self.first_long or f"line {i + 1}: {length:,} bytes"
            return
        if not raw.strip():
            return
        self.text_lines += 1
        try:
            obj = _DEC.decode(raw)
        except msgspec.DecodeError:
            self.bad_lines += 1
            self.first_bad = self.first_bad or i + 1
            self.undecoded, self.header_before = i, self.header is not None
            return
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            self.bad_lines += 1
            self.first_bad = self.first_bad or i + 1
            return
        self._typed(lines, i, obj)

    def _typed(self, lines: _Lines, i: int, obj: dict[str, Any]) -> None:
        """A JSON object with a type: the header (the first only; its schema must be one this reader knows),
        then step, summary and notice lines; unknown types are ignored (forward compatible within one
        schema)."""
        where = self.where
        typ = obj.get("type")
        if typ == "header":
            if self.header is not None:
                self.warnings.append(f"{where}: second header line {i + 1} ignored")
                return
            schema = obj.get("schema")
            if schema not in READABLE_SCHEMAS or isinstance(schema, bool):
                raise BadInput(
                    f"{where}: event log schema {_short(schema)} is not supported "
                    f"(this expo-prof reads schemas {', '.join(map(str, READABLE_SCHEMAS))}; "
                    "use a matching expo-prof version)"
                )
            self.header = obj
            lines.limit = None
        elif self.header is None:
            raise BadInput(f"{where}: event log does not start with a header line (line {i + 1} is {_short(typ)})")
        elif typ == "step":
            bad = _bad_fields(obj)
            if bad:
                self.bad_field_lines += 1
                self.first_bad_field = self.first_bad_field or f"line {i + 1}: {', '.join(bad)}"
            self.steps.append(obj)
            self.after_summary += 1
        elif typ == "summary":
            self.summary = obj
            self.after_summary = 0
        elif typ == "notice":
            self.notices.append(obj)

    def _no_header(self, lines: _Lines) -> str:
        """Why the data that went past :data:`HEADER_WITHIN` bytes without a header line is no event log."""
        if lines.first == 0:
            return "NUL bytes from byte 0 (a file allocated but never written: a crash?)"
        if self.long_lines or lines.cut > MAX_LINE_BYTES:
            first_long = self.first_long or f"line {lines.count + 1}: {lines.cut:,} bytes and more"
            return f"no header line ({first_long}, longer than the {_mb(MAX_LINE_BYTES)} an event-log line may hold)"
        return (f"no header line in its first {_mb(HEADER_WITHIN)} ({plural(self.text_lines, 'line')}, none a JSON "
                "object with a type)")

    def checked(self, lines: _Lines) -> dict[str, Any]:
        """Once every line is read: the header line (BadInput when there is none), and one warning each for a
        torn last line, lines too long, malformed lines and step lines with fields of the wrong type."""
        where = self.where
        last = lines.count - 1 if lines.torn else lines.count - 2
        if self.undecoded == last and (lines.torn or last > 0) and self.header_before:
            self.bad_lines -= 1
            self.warnings.append(f"{where}: last line is incomplete (process killed while writing?); skipped it")
        if self.long_lines:
            self.warnings.append(f"{where}: {plural(self.long_lines, 'line')} longer than the {_mb(MAX_LINE_BYTES)} "
                                 f"an event-log line may hold skipped unread (the first: {self.first_long})")
        if self.header is None:
            if self.bad_lines:
                raise BadInput(f"{where}: not an overlay event log: none of its {self.text_lines} line(s) is a JSON "
                               "object with a type, and no header line (a damaged or foreign file?)")
            if self.long_lines:
                raise BadInput(f"{where}: not an overlay event log: no header line ({self.first_long}, longer than "
                               f"the {_mb(MAX_LINE_BYTES)} an event-log line may hold)")
            raise BadInput(f"{where}: empty event log (no header line)")
        if self.bad_lines:
            self.warnings.append(f"{where}: {self.bad_lines} malformed line(s) skipped (not a JSON object with a "
                                 f"type; the first: line {self.first_bad})")
        if self.bad_field_lines:
            self.warnings.append(f"{where}: {self.bad_field_lines} step line(s) with a field of the wrong type; "
                                 f"those fields ignored (the first: {self.first_bad_field})")
        return self.header


class _Events:
    """The overlay's events of a log, one list per column (the Timeline's ``start``, ``dur``, ``lane``, ``name``
    and ``step``), and the step lines skipped for want of a ``t0_ns``."""

    def __init__(self) -> None:
        self.start: list[int] = []
        self.dur: list[int] = []
        self.lane: list[int] = []
        self.name: list[int] = []
        self.step: list[int] = []
        self.missing_t0 = 0

    def add(self, start: int, dur: int, lane: int, name: int, step: int) -> None:
        self.start.append(start)
        self.dur.append(dur)
        self.lane.append(lane)
        self.name.append(name)
        self.step.append(step)


def _empty_columns(n: int) -> dict[str, Any]:
    """The per-step columns of ``n`` step lines, before they are filled (-1 / 0 / None: unknown)."""
    cols: dict[str, Any] = {
        "step": np.full(n, -1, dtype=np.int64),
        "rows": np.zeros(n, dtype=np.int64),
        "vocab": np.zeros(n, dtype=np.int64),
        "launched": np.zeros(n, dtype=bool),
        "used": np.zeros(n, dtype=bool),
        "fallback": np.empty(n, dtype=object),
        "dtype": np.empty(n, dtype=object),
        "timing": np.empty(n, dtype=object),
        "t0_ns": np.zeros(n, dtype=np.int64),
        # "on" / "off" (switchback blocks); schema 1 logs ran every step on the overlay.
        "phase": np.empty(n, dtype=object),
        # Requests in the batch (the rows vLLM samples), launched or not; schema 1: rows of q (0 when not launched).
        "reqs": np.zeros(n, dtype=np.int64),
        "tokens": np.zeros(n, dtype=np.int64),
        # Switchback block of the step (-1: not a switchback step).
        "block": np.full(n, -1, dtype=np.int64),
        # Host ns from t0 to the end of the step's last part (its sampler, else its forward); -1 unknown.
        "host_end_ns": np.full(n, -1, dtype=np.int64),
    }
    for key, _span, _lane in _WINDOWS:
        cols[f"{key}_start_ns"] = np.full(n, -1, dtype=np.int64)
        cols[f"{key}_ns"] = np.full(n, -1, dtype=np.int64)
    return cols


def _step_columns(steps: list[dict[str, Any]], header: dict[str, Any],
                  names: Interner) -> tuple[dict[str, Any], _Events]:
    """The per-step columns of the step lines (:func:`_step_fields`) and their events: up to four windows on the
    overlay lanes and the model's busy window (:func:`_step_events`); a step line without ``t0_ns`` has
    columns but no events."""
    name_ids = [names(span) for _k, span, _l in _WINDOWS]
    busy_name = names(OVERLAY_MODEL_BUSY)
    cols = _empty_columns(len(steps))
    ev = _Events()
    for j, s in enumerate(steps):
        _step_fields(cols, j, s, header)
        t0 = _int(s.get("t0_ns"))
        if t0 is None:
            ev.missing_t0 += 1
            continue
        cols["t0_ns"][j] = t0
        _step_events(cols, j, s, t0, ev, name_ids, busy_name)
    return cols, ev


def _step_fields(cols: dict[str, Any], j: int, s: dict[str, Any], header: dict[str, Any]) -> None:
    """Row ``j`` of the per-step columns from the step line ``s`` (a field of the wrong type reads as unknown)."""
    sid = _int(s.get("step"))
    cols["step"][j] = -1 if sid is None else sid
    cols["rows"][j] = _int(s.get("rows")) or 0
    cols["vocab"][j] = _int(s.get("vocab")) or 0
    cols["launched"][j] = s.get("launched") is True
    cols["used"][j] = s.get("used") is True
    fb = s.get("fallback")
    cols["fallback"][j] = fb if isinstance(fb, str) else None
    cols["dtype"][j] = s.get("dtype") if isinstance(s.get("dtype"), str) else None
    cols["timing"][j] = s.get("timing") if isinstance(s.get("timing"), str) else None
    phase = s.get("phase", PHASE_ON if header.get("schema") == 1 else None)
    cols["phase"][j] = phase if phase in PHASES else None
    cols["tokens"][j] = _int(s.get("tokens")) or 0
    cols["reqs"][j] = _int(s.get("reqs", s.get("rows"))) or 0
    block = _int(s.get("block"))
    cols["block"][j] = block if block is not None and block >= 0 else -1
    host_end = _int(s.get("host_end"))
    cols["host_end_ns"][j] = host_end if host_end is not None and host_end >= 0 else -1


def _step_events(cols: dict[str, Any], j: int, s: dict[str, Any], t0: int, ev: _Events, name_ids: list[int],
                 busy_name: int) -> None:
    """The events of step line ``s`` (row ``j``, at ``t0``): each of its windows on its lane (and in the
    columns), then the model's busy window (:func:`_model_busy`) on the lane after them."""
    win = {}
    for lane_i, (key, _span, _lane) in enumerate(_WINDOWS):
        w = _window(s.get(key))
        if w is None:
            continue
        win[key] = w
        a, b = w
        cols[f"{key}_start_ns"][j] = t0 + a
        cols[f"{key}_ns"][j] = b - a
        ev.add(t0 + a, b - a, lane_i, name_ids[lane_i], cols["step"][j])
    busy = _model_busy(win)
    if busy is not None:
        ev.add(t0 + busy[0], busy[1] - busy[0], len(_WINDOWS), busy_name, cols["step"][j])


def _overlay_log(scan: _Scan, header: dict[str, Any], cols: dict[str, Any], torn: bool) -> OverlayLog:
    """The log's :class:`~expo_prof.timeline.OverlayLog`: the header, the summary line (or the counts recomputed
    from the step lines where it is missing or stale: a warning says why), the per-step columns and notices;
    a warning for step lines the overlay left out of the file."""
    where, warnings = scan.where, scan.warnings
    n = len(scan.steps)
    summary = scan.summary
    fallbacks: dict[str, int] = {}
    for fb in cols["fallback"]:
        if fb is not None:
            fallbacks[fb] = fallbacks.get(fb, 0) + 1
    recomputed = {
        "steps": n,
        "launched": int(cols["launched"].sum()),
        "used": int(cols["used"].sum()),
        "fallbacks": fallbacks,
    }
    why = missing_why(None if summary is None else summary.get("final") is not False, scan.after_summary, torn)
    if why is not None:
        # No summary, or a checkpoint whose counts later steps made stale: the counts are the recomputed ones.
        summary = None
        warnings.append(f"{where}: {NO_SUMMARY}: {why}; counts recomputed from {n} step line(s)")
    # Additive summary keys (docs/event-log.md): step lines the overlay left out of the file.
    left_out = {k: _int(summary.get(k)) or 0 for k in ("sampled_out", "dropped")} if summary else {}
    if any(left_out.values()):
        warnings.append(
            f"{where}: {left_out['sampled_out']} step line(s) left out by the size cap (EXPO_PROF_LOG_MAX_MB) and "
            f"{left_out['dropped']} dropped (writer queue full); per-step figures cover the {n} written"
        )
    mono, wall = _int(header.get("mono_ns")), _int(header.get("wall_ns"))
    return OverlayLog(
        header=header,
        summary=summary if summary is not None else recomputed,
        summary_from_file=summary is not None,
        # False: the last summary is a checkpoint written while the process ran (it was not stopped cleanly,
        # but no step line came after it, so its counts are whole); None: no usable summary.
        summary_final=None if summary is None else summary.get("final", True) is not False,
        recomputed=recomputed,
        steps=cols,
        notices=scan.notices,
        q_memory={k: _int(summary.get(k)) if summary else None for k in Q_MEMORY_KEYS},
        wall_minus_mono_ns=(wall - mono) if mono is not None and wall is not None else None,
    )
