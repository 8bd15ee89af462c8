"""Shared helpers that turn per-event Python lists into a sorted :class:`Timeline`."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from expo_prof.readers.long_names import LongNames
from expo_prof.timeline import Interner, Kind, Lane, Timeline


class LaneTable:
    """Interns lanes by a reader-specific key (e.g. ``(pid, tid)``)."""

    __slots__ = ("_ids", "lanes")

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self.lanes: list[Lane] = []

    def get(self, key: Hashable, make: Callable[..., Lane]) -> int:
        i = self._ids.get(key)
        if i is None:
            i = self._ids[key] = len(self.lanes)
            self.lanes.append(make())
        return i


def build_timeline(
    *,
    rank: int,
    source: str,
    fmt: str,
    backend: str,
    lanes: list[Lane],
    names: Interner | list[str],
    start: np.ndarray,
    dur: np.ndarray,
    lane: Sequence[int] | np.ndarray,
    name: Sequence[int] | np.ndarray,
    kind: Sequence[int] | np.ndarray,
    step: Sequence[int] | np.ndarray | None = None,
    meta: dict[str, Any] | None = None,
    warnings: list[str] | None = None,
    aligned: dict[str, np.ndarray] | None = None,
) -> Timeline:
    """Make a Timeline with events sorted by ``(start, lane)``.

    ``aligned`` holds extra per-event columns (e.g. Kineto correlation ids)
    that are permuted with the events and stored in ``meta`` under the same
    keys.
    """
    start = np.asarray(start, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    lane_a = np.asarray(lane, dtype=np.int32)
    name_a = np.asarray(name, dtype=np.int32)
    kind_a = np.asarray(kind, dtype=np.int8)
    step_a = None if step is None else np.asarray(step, dtype=np.int64)
    order = _order(start, lane_a)
    # Skip the copy when already sorted (common for CSV/DB sources).
    if order is not None:
        start, dur, lane_a, name_a, kind_a = start[order], dur[order], lane_a[order], name_a[order], kind_a[order]
        if step_a is not None:
            step_a = step_a[order]
        if aligned:
            aligned = {k: np.asarray(v)[order] for k, v in aligned.items()}
    warnings = list(warnings or [])
    if len(dur) and (dur < 0).any():
        # A negative duration (a "-" in a CSV cell, a broken DB row) would make
        # every interval sum below it wrong: the event is kept as an instant,
        # and said so, the way the Chrome reader treats its own.
        neg = int((dur < 0).sum())
        warnings.append(f"{source}: {neg} event(s) with a negative duration set to 0")
        dur = np.maximum(dur, 0)
    meta = dict(meta or {})
    if aligned:
        meta.update(aligned)
    # Every reader's names under the long-name budget (the Chrome readers fit them while decoding already, so that
    # the table never holds them whole: this changes nothing there).
    table = names.names if isinstance(names, Interner) else list(names)
    long_names = LongNames()
    table = long_names.fit_all(table)
    note = long_names.warning(source)
    if note:
        warnings.append(note)
    if long_names.seen:
        meta.setdefault("long_names", long_names.seen)
    return Timeline(
        rank=rank,
        source=source,
        fmt=fmt,
        backend=backend,
        lanes=lanes,
        names=table,
        start=start,
        dur=dur,
        lane=lane_a,
        name=name_a,
        kind=kind_a,
        step=step_a,
        meta=meta,
        warnings=warnings,
    )


def _order(start: np.ndarray, lane: np.ndarray) -> np.ndarray | None:
    """The permutation that sorts events by ``(start, lane)``, stably (``np.lexsort((lane, start))``); None when
    they are in that order already."""
    n = len(start)
    if n < 2:
        return None
    same = start[1:] == start[:-1]
    if ((start[1:] > start[:-1]) | (same & (lane[1:] >= lane[:-1]))).all():
        return None
    # One stable sort by start (half a lexsort's work), which is the lexsort's order unless two events of one start
    # came with their lanes out of order (then the lexsort itself).
    order = np.argsort(start, kind="stable")
    s, ln = start[order], lane[order]
    if ((s[1:] == s[:-1]) & (ln[1:] < ln[:-1])).any():
        return np.lexsort((lane, start))
    return order


def step_number(name: str) -> int:
    """``ProfilerStep#12`` → 12; -1 when the name carries no number."""
    _, sep, tail = name.partition("#")
    if sep and tail.isdigit():
        return int(tail)
    return -1


def empty_kinds() -> np.ndarray:
    return np.zeros(0, dtype=np.int8)


__all__ = ["LaneTable", "build_timeline", "step_number", "Kind", "empty_kinds"]


def merge_timelines(parts: list[Timeline]) -> Timeline:
    """Concatenate Timelines of one rank and source (e.g. msprof json slices) into one.

    Lanes are unified by ``(kind, device, name, pid, tid)``, names re-interned.
    """
    first = parts[0]
    lane_keys: dict[tuple, int] = {}
    lanes: list[Lane] = []
    names = Interner()
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("start", "dur", "lane", "name", "kind", "step")}
    warnings: list[str] = []
    for tl in parts:
        lmap = np.empty(len(tl.lanes), dtype=np.int32)
        for i, ln in enumerate(tl.lanes):
            key = (ln.kind, ln.device, ln.name, ln.pid, ln.tid)
            j = lane_keys.get(key)
            if j is None:
                j = lane_keys[key] = len(lanes)
                lanes.append(ln)
            lmap[i] = j
        nmap = np.array([names(s) for s in tl.names], dtype=np.int32)
        cols["start"].append(tl.start)
        cols["dur"].append(tl.dur)
        cols["lane"].append(lmap[tl.lane] if len(tl) else tl.lane)
        cols["name"].append(nmap[tl.name] if len(tl) else tl.name)
        cols["kind"].append(tl.kind)
        cols["step"].append(tl.step if tl.step is not None else np.full(len(tl), -1, dtype=np.int64))
        warnings.extend(tl.warnings)
    meta = dict(first.meta)
    meta["merged_from"] = [tl.source for tl in parts]
    meta.pop("correlation", None)
    meta.pop("flows", None)
    return build_timeline(
        rank=first.rank,
        source=str(Path(first.source).parent),
        fmt=first.fmt,
        backend=first.backend,
        lanes=lanes,
        names=names,
        start=np.concatenate(cols["start"]),
        dur=np.concatenate(cols["dur"]),
        lane=np.concatenate(cols["lane"]),
        name=np.concatenate(cols["name"]),
        kind=np.concatenate(cols["kind"]),
        step=np.concatenate(cols["step"]),
        meta=meta,
        warnings=warnings,
    )


def split_ranks(tl: Timeline, rank_pids: dict[int, int]) -> list[Timeline]:
    """One Timeline per rank of an ``expo-prof export`` of several ranks (its ``expoProf.rank_pids``).

    Lanes whose pid belongs to no rank (the export's analysis tracks) are left out; names are shared.
    """
    lane_rank = np.array([rank_pids.get(int(ln.pid), -1) for ln in tl.lanes], dtype=np.int64)
    ev_rank = lane_rank[tl.lane] if len(tl) else np.zeros(0, dtype=np.int64)
    out: list[Timeline] = []
    for r in sorted(set(rank_pids.values())):
        lanes_r = np.flatnonzero(lane_rank == r)
        sel = np.flatnonzero(ev_rank == r)
        if not len(sel):
            continue
        remap = np.full(len(tl.lanes), -1, dtype=np.int32)
        remap[lanes_r] = np.arange(len(lanes_r), dtype=np.int32)
        meta = {k: v for k, v in tl.meta.items() if k not in ("rank_pids", "flows")}
        meta["split_from"] = tl.source  # one rank of a file that holds several
        for k, v in tl.meta.items():
            if isinstance(v, np.ndarray) and len(v) == len(tl):  # per-event columns (correlation)
                meta[k] = v[sel]
        fl = tl.meta.get("flows")
        if isinstance(fl, dict) and "lane" in fl:
            lane = np.asarray(fl["lane"])
            keep = np.flatnonzero((lane >= 0) & (lane_rank[np.maximum(lane, 0)] == r)) if len(lane_rank) else lane[:0]
            meta["flows"] = {k: (np.asarray(v)[keep] if isinstance(v, np.ndarray) and len(v) == len(lane) else v)
                             for k, v in fl.items()}
            meta["flows"]["lane"] = remap[lane[keep]]
        out.append(Timeline(
            rank=r, source=tl.source, fmt=tl.fmt, backend=tl.backend, lanes=[tl.lanes[i] for i in lanes_r.tolist()],
            names=tl.names, start=tl.start[sel], dur=tl.dur[sel], lane=remap[tl.lane[sel]], name=tl.name[sel],
            kind=tl.kind[sel], step=tl.step[sel] if tl.step is not None else None, meta=meta,
            warnings=list(tl.warnings) if not out else [],
        ))
    return out or [tl]
