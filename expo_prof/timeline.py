"""The one data model every reader produces and every analysis consumes.

A :class:`Timeline` holds the events of one rank of one run, column-wise:
numpy ``int64`` nanosecond start/duration arrays (exact: readers parse string
timestamps as integers, never via a float64 of epoch microseconds), interned
names, and a lane per device stream / CPU thread. Analysis modules only see
these columns; they know nothing of trace formats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np


class Kind(IntEnum):
    """What an event is, independent of the format it came from."""

    KERNEL = 0  # device compute kernel / Ascend task (AI_CORE, AI_VECTOR_CORE, AI_CPU, …)
    MEMCPY = 1  # device memcpy / memset / DMA
    COMM = 2  # collective communication kernel (nccl, hccl)
    CPU_OP = 3  # host operator (aten::…, cpu_op)
    ANNOTATION = 4  # user / gpu_user annotation (record_function, expo_prof::*)
    STEP = 5  # step marker (ProfilerStep#N, vLLM step annotations)
    RUNTIME = 6  # host runtime API (cudaLaunchKernel, aclrtLaunch…)
    OVERLAY = 7  # windows from the overlay event log (forward / exponential / wait)
    OTHER = 8


#: Name of the model's busy window an overlay event-log reader derives per step (forward start until the
#: sampler begins to wait for q): compute that covers the lane's draw (expo_prof/analysis/overlap/cover.py).
OVERLAY_MODEL_BUSY = "overlay model busy"


class LaneKind(IntEnum):
    STREAM = 0  # a device stream (CUDA stream, Ascend stream)
    THREAD = 1  # a host thread
    OVERLAY = 2  # a lane synthesised from the overlay event log
    #: A lane the profiler derived, not a hardware queue or host thread (Ascend
    #: HCCL communication-group ops, which span tasks that also appear on a
    #: device stream). Analysis must not count it as extra device busy time.
    LOGICAL = 3


@dataclass(frozen=True)
class Lane:
    """One row of the timeline: a device stream or a host thread of one rank."""

    kind: LaneKind
    device: str  # "cuda:0", "npu:3", "cpu"
    name: str  # "stream 7", "thread 1234 (python)", "overlay forward"
    pid: int = 0
    tid: int = 0


@dataclass
class Timeline:
    """Events of one rank of one run, column-wise.

    Columns (all of length ``n``): ``start`` and ``dur`` int64 ns, ``lane``
    int32 index into :attr:`lanes`, ``name`` int32 index into :attr:`names`,
    ``kind`` int8 :class:`Kind`. ``start`` is on the source's own clock
    (absolute epoch ns for Kineto/Ascend, host monotonic ns for the overlay
    log); within one Timeline all events share it.
    """

    rank: int
    source: str  # path (or description) it was read from
    fmt: str  # reader name: "kineto", "nsys", "ascend-trace-view", "ascend-kernel-csv", "ascend-db", "msprof",
    # "msprof-db", "msprof-op-summary", "msprof-task-time", "overlay-log" (docs/trace-formats.md)
    backend: str  # "cuda", "rocm", "npu", "cpu"
    lanes: list[Lane]
    names: list[str]
    start: np.ndarray  # int64 ns
    dur: np.ndarray  # int64 ns
    lane: np.ndarray  # int32
    name: np.ndarray  # int32
    kind: np.ndarray  # int8
    #: Optional step id per event (-1 = unknown); readers fill it when the format says so.
    step: np.ndarray | None = None
    #: Free-form metadata (device names, profiler version, overlay header, …).
    meta: dict = field(default_factory=dict)
    #: Recoverable problems met while reading (shown as warnings, never fatal).
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.start)
        for col in ("dur", "lane", "name", "kind"):
            if len(getattr(self, col)) != n:
                raise ValueError(f"Timeline column {col!r} has {len(getattr(self, col))} rows, expected {n}")

    def __len__(self) -> int:
        return len(self.start)

    @property
    def end(self) -> np.ndarray:
        return self.start + self.dur


class Interner:
    """Build the ``names`` list of a Timeline: one int per distinct string."""

    __slots__ = ("_ids", "names")

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self.names: list[str] = []

    def __call__(self, s: str) -> int:
        i = self._ids.get(s)
        if i is None:
            i = self._ids[s] = len(self.names)
            self.names.append(s)
        return i


def event_count(tl: Timeline) -> int:
    """Events the source held: ``len(tl)``, or what a :func:`compact` Timeline was reduced from."""
    n = tl.meta.get(COMPACT_KEY)
    return int(n["events"]) if n else len(tl)


def name_counts(tl: Timeline) -> np.ndarray:
    """Events per name id (length ``len(tl.names)``), also for a :func:`compact` Timeline."""
    n = tl.meta.get(COMPACT_KEY)
    if n:
        return n["name_counts"]
    return np.bincount(tl.name, minlength=len(tl.names)) if len(tl) else np.zeros(len(tl.names), np.int64)


#: meta key of a compact Timeline: ``{"events": n, "name_counts": array}`` of the full one.
COMPACT_KEY = "_compact"

#: meta key of an overlay event log's :class:`OverlayLog`; read it through :func:`overlay_log`.
OVERLAY_KEY = "overlay"


@dataclass(frozen=True)
class OverlayLog:
    """What an overlay event log says beside its events (docs/event-log.md): one typed view, filled by the
    reader (readers/overlay_log.py) and read through :func:`overlay_log` by everything else."""

    #: The header line as written (schema, pid, run_id, block_steps, arms, mono_ns, wall_ns, …).
    header: dict
    #: The summary line's counts, or :attr:`recomputed` where the log has no usable one.
    summary: dict
    #: True when :attr:`summary` is the file's own summary line.
    summary_from_file: bool
    #: False: the last summary is a checkpoint written while the process ran; None: no usable summary.
    summary_final: bool | None
    #: The summary's counts recomputed from the step lines.
    recomputed: dict
    #: The step lines, column-wise (step, t0_ns, the window columns, reqs, tokens, rows, vocab, dtype, phase, …).
    steps: dict
    #: The notices the overlay wrote (switch-offs, fallbacks), as read.
    notices: list
    #: The summary's q memory figures, None each where the log has none (older logs, no summary).
    q_memory: dict
    #: Add to a host monotonic time to get epoch ns (the clock Kineto uses); None without the header's pair.
    wall_minus_mono_ns: int | None

    def header_int(self, key: str) -> int | None:
        """A header field that must be an int (pid, block_steps, schema), None when absent or of another type."""
        v = self.header.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    @property
    def arms(self) -> list[str] | None:
        """The switchback arms the header names, None when it names none."""
        a = self.header.get("arms")
        return [str(x) for x in a] if isinstance(a, list) else None


def overlay_log(tl: Timeline) -> OverlayLog | None:
    """The overlay event log view of ``tl``; None for any Timeline not read from an overlay event log."""
    ov = tl.meta.get(OVERLAY_KEY) if isinstance(tl.meta, dict) else None
    return ov if isinstance(ov, OverlayLog) else None


def compact(tl: Timeline) -> Timeline:
    """``tl`` reduced to what grouping and roll-up read once the per-Timeline analysis is done: its lanes,
    names, metadata, warnings and time span (the earliest-starting and the latest-ending event), with the
    event and per-name counts of the full Timeline (:func:`event_count`, :func:`name_counts`).

    Parallel reading (``--jobs``, ``--ray``) sends this back from a worker instead of every event.
    """
    if len(tl) <= 2:
        return tl
    end = tl.start + tl.dur
    rows = np.unique(np.array([int(np.argmin(tl.start)), int(np.argmax(end))]))
    # Per-event side columns (launch correlation ids, flow arrows) serve drawing only: left behind.
    meta = {k: v for k, v in tl.meta.items() if k not in ("correlation", "flows")}
    meta[COMPACT_KEY] = {"events": len(tl), "name_counts": name_counts(tl)}
    return Timeline(
        rank=tl.rank, source=tl.source, fmt=tl.fmt, backend=tl.backend, lanes=tl.lanes, names=tl.names,
        start=tl.start[rows], dur=tl.dur[rows], lane=tl.lane[rows], name=tl.name[rows], kind=tl.kind[rows],
        step=tl.step[rows] if tl.step is not None else None, meta=meta, warnings=tl.warnings,
    )
