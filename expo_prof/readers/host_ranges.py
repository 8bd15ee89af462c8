"""The overlay's host ranges (mstx on Ascend, NVTX on CUDA) placed on the device streams they launched.

The overlay marks its windows with mstx host ranges on Ascend
(``torch_npu.npu.mstx.range_start`` / ``range_end``; ``expo_prof::*`` names,
see docs/overlay.md). A host range says when the model thread *launched* the
work; the analysis needs when the device *ran* it, as a torch trace's
``gpu_user_annotation`` gives on CUDA. msprof links the two: each device task
in ``TASK`` carries the ``connectionId`` of the ``CANN_API`` call that
launched it. So a range's device window, per stream, spans the tasks launched
by the CANN calls that start inside the range on the range's thread.

Nsight Systems links NVTX ranges the same way: CUDA runtime calls
(``CUPTI_ACTIVITY_KIND_RUNTIME``) and the kernels and copies they launched
share a ``correlationId`` (:mod:`expo_prof.readers.nsys.tables`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable

from overlay.contract import SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT

#: mstx messages that are the overlay's spans.
OVERLAY_SPANS = frozenset((SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT))


def device_windows(
    ranges: Iterable[tuple[int, int, int, str]],
    launches: Iterable[tuple[int, int, int]],
    tasks: Iterable[tuple[int, int, int, int]],
) -> list[tuple[int, int, int, str]]:
    """Device windows ``(start, end, stream lane, name)`` of host ``ranges``.

    ``ranges``: ``(globalTid, start, end, name)`` mstx ranges; ``launches``:
    ``(globalTid, start, connectionId)`` CANN API calls; ``tasks``:
    ``(connectionId, start, end, stream lane)`` device tasks. One window per
    range and stream: from the first launched task's start to the last one's
    end. A range that launched nothing has no window.
    """
    return [w[:4] for w in launched_windows(ranges, launches, tasks)]


def launched_windows(
    ranges: Iterable[tuple[int, int, int, str]],
    launches: Iterable[tuple[int, int, int]],
    tasks: Iterable[tuple[int, int, int, int]],
) -> list[tuple[int, int, int, str, int]]:
    """:func:`device_windows` with, last, the id of the first launch (by host time) that put work on the stream.

    The same projection serves Nsight Systems' NVTX ranges (CUDA runtime calls and kernels linked by
    ``correlationId``); the first launch's id lets the analysis place a window in the step it was launched in.
    """
    by_tid: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for tid, st, cid in launches:
        by_tid[tid].append((st, cid))
    starts = {}
    for tid, rows in by_tid.items():
        rows.sort()
        starts[tid] = [st for st, _ in rows]
    by_conn: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for cid, st, en, ln in tasks:
        by_conn[cid].append((st, en, ln))
    out: list[tuple[int, int, int, str, int]] = []
    for tid, st, en, name in ranges:
        rows = by_tid.get(tid, [])
        if not rows:
            continue
        lo, hi = bisect_left(starts[tid], st), bisect_right(starts[tid], en)
        per_lane: dict[int, list[int]] = {}
        for _, cid in rows[lo:hi]:
            for t_st, t_en, ln in by_conn.get(cid, ()):
                w = per_lane.setdefault(ln, [t_st, t_en, cid])
                w[0], w[1] = min(w[0], t_st), max(w[1], t_en)
        out.extend((w[0], w[1], ln, name, w[2]) for ln, w in sorted(per_lane.items()))
    return out
