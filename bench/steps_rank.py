"""Long vLLM ranks built by repeating the steps of a real trace (issue 41): many steps, few bytes per step.

The source is a real vLLM 0.32 CPU trace (../shared/realtraces,
``vllm-cpu/rank0-fp64-gumbel``: one thread, 36 step windows, each opened by an
``execute_context_…`` user annotation; 24 of them hold ``aten::exponential_``
draws). A step window runs from one annotation's ``ts`` to the next one's (the
last: to the end of its events). :func:`build_steps_rank` keeps the windows
that hold a draw and emits ``steps`` steps cycling over them, each copy
shifted in time so that the windows follow each other back to back as they do
in the source (the shift is the cumulative length of the windows emitted
before), with its correlation / ``External id`` args and ids offset per cycle
as ``bench_cluster.build`` does, so that links stay unique. Timestamps are
computed in integer ns and written as ns / 1000 µs (exact, as
``bench_cluster.build``), metadata events (``ph`` M) and the document's other
top-level keys are kept (``distributedInfo.rank`` / ``world_size`` set per
file); the trace-wide events around the steps (the profiler span, the
"Record Window End" instant) are stretched / moved to the end of the emitted
steps.

Of each window only the events at nesting depth 0 on their thread are kept (an
X event nested inside another X event of the same pid/tid is dropped; the
step's annotation and the draws are depth 0): about 23 events and 4 KB per
step instead of about 480 events and 60 KB. Why: what this input is for is
the analysis' cost *per step* (issue 41: ~75 µs per step, more than reading the
bytes), which depends on how many steps and draws a rank holds, not on how
many nested ops each step has. The nested ops add bytes to read but no busy
time: a thread's busy time is the union of its intervals, which is the union
of its top-level events. So 20,000 steps make a rank of about 90 MB whose
analysis has the same per-step work as a rank of the full events (181 MB).

    .venv/bin/python bench/steps_rank.py --steps 1000            # build (or reuse) and describe
    .venv/bin/python bench/steps_rank.py --steps 20000 --ranks 8 --gz
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("EXPO_PROF_REALTRACES") or (REPO / ".." / "shared" / "realtraces")).resolve()
SOURCE = "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"
STEP_PREFIX = "execute_context"
DRAW = "aten::exponential_"
DEFAULT_CACHE = REPO / ".bench"
_ID_ARGS = ("correlation", "External id")


def _ns(ts: int | float) -> int:
    """A µs timestamp as integer ns (exact for the ns-fraction floats Kineto writes)."""
    return ts * 1000 if isinstance(ts, int) else round(ts * 1000)


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _windows(events: list[dict]) -> tuple[list[list[int]], list[int], list[int], set[int], int]:
    """The step windows that hold a draw: (event indexes at depth 0 of each, its start ns, its length ns),
    the indexes of every X event from the first step on (kept or not), and the end ns of the source's steps."""
    steps = sorted((_ns(e["ts"]), i) for i, e in enumerate(events)
                   if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and str(e.get("name", "")).startswith(STEP_PREFIX) and _is_num(e.get("ts")))
    if not steps:
        raise SystemExit(f"{SOURCE}: no {STEP_PREFIX}… annotation")
    # Depth 0 per (pid, tid): sorted by start, longest first, an X event is top-level when it starts at or
    # after the end of the top-level event before it (else it lies inside it: nested).
    xs = sorted(((_ns(e["ts"]), -_ns(e.get("dur") or 0), i) for i, e in enumerate(events)
                 if e.get("ph") == "X" and _is_num(e.get("ts"))), key=lambda t: t[:2])
    top: set[int] = set()
    ends: dict[tuple, int] = {}
    for s, neg_dur, i in xs:
        key = (events[i].get("pid"), events[i].get("tid"))
        if s >= ends.get(key, -(1 << 62)):
            top.add(i)
            ends[key] = s - neg_dur
    lo = steps[0][0]
    starts = [s for s, _ in steps]
    members: list[list[int]] = [[] for _ in steps]
    last_end = lo
    for s, neg_dur, i in xs:
        if s < lo:
            continue  # a trace-wide span opened before the first step
        w = bisect.bisect_right(starts, s) - 1
        members[w].append(i)
        last_end = max(last_end, s - neg_dur)
    keep, start, length = [], [], []
    for w, idx in enumerate(members):
        if not any(events[i].get("name") == DRAW for i in idx):
            continue
        if w + 1 < len(starts):
            nxt = starts[w + 1]
        else:  # the last window: to the end of its events
            nxt = max(_ns(events[i]["ts"]) + _ns(events[i].get("dur") or 0) for i in idx)
        keep.append(sorted(i for i in idx if i in top))  # source order
        start.append(starts[w])
        length.append(nxt - starts[w])
    if not keep:
        raise SystemExit(f"{SOURCE}: no step window holds {DRAW}")
    stepped = {i for s, _, i in xs if s >= lo}
    return keep, start, length, stepped, last_end


def build_steps_rank(cache: Path, ranks: int, steps: int, gz: bool = False) -> Path:
    """``ranks`` Kineto trace files (``rank{r}.pt.trace.json``, ``.json.gz`` when ``gz``) of ``steps`` vLLM steps
    each under ``cache / "{ranks}x{steps}steps[-gz]"``, built by repeating the steps of a real trace (see the
    module docstring); reused when its COMPLETE marker is there (a JSON line: steps, draws, events per file)."""
    import orjson

    out = Path(cache) / f"{ranks}x{steps}steps{'-gz' if gz else ''}"
    done = out / "COMPLETE"
    if done.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    doc = orjson.loads(gzip.decompress((REAL / SOURCE).read_bytes()))
    events = doc["traceEvents"]
    keep, start, length, stepped, src_end = _windows(events)
    max_id = max([0] + [a[k] for e in events for a in [e.get("args") or {}] for k in _ID_ARGS
                        if isinstance(a.get(k), int)] + [e["id"] for e in events if isinstance(e.get("id"), int)])

    def shifted(e: dict, shift_ns: int, shift_id: int) -> dict:
        e = dict(e)
        if _is_num(e.get("ts")):
            e["ts"] = (_ns(e["ts"]) + shift_ns) / 1000
        if shift_id:
            a = e.get("args")
            if a and any(isinstance(a.get(x), int) for x in _ID_ARGS):
                a = dict(a)
                for x in _ID_ARGS:
                    if isinstance(a.get(x), int) and a[x] > 0:
                        a[x] += shift_id
                e["args"] = a
            if isinstance(e.get("id"), int):
                e["id"] += shift_id
        return e

    # The steps: window w = k % len(keep) of cycle k // len(keep), placed at the cursor.
    parts: list[bytes] = []
    cursor, out_end, draws, n_step_events = start[0], start[0], 0, 0
    n_win = len(keep)
    for k in range(steps):
        w, cycle = k % n_win, k // n_win
        shift_ns, shift_id = cursor - start[w], cycle * (max_id + 1)
        rep = [shifted(events[i], shift_ns, shift_id) for i in keep[w]]
        for i in keep[w]:
            e = events[i]
            draws += e.get("name") == DRAW
            out_end = max(out_end, _ns(e["ts"]) + shift_ns + _ns(e.get("dur") or 0))
        n_step_events += len(rep)
        parts.append(orjson.dumps(rep)[1:-1])
        cursor += length[w]
    # The events around the steps, in source order (metadata, the profiler span, instants): those after the
    # source's steps move to after the emitted ones; a span reaching past them is stretched as far.
    delta = out_end - src_end
    head: list[dict] = []
    tail: list[dict] = []
    first = min(stepped)  # the steps go where the source's were, between its head and its tail
    for i, e in enumerate(events):
        if i in stepped:
            continue  # in a step window: emitted above when kept
        if e.get("ph") != "M" and _is_num(e.get("ts")):
            s = _ns(e["ts"])
            if s >= src_end:
                e = shifted(e, delta, 0)
            elif _is_num(e.get("dur")) and s + _ns(e["dur"]) >= src_end:
                e = dict(e, dur=(_ns(e["dur"]) + delta) / 1000)
        (head if i < first else tail).append(e)
    body = b",".join(p for p in [orjson.dumps(head)[1:-1], *parts, orjson.dumps(tail)[1:-1]] if p)
    n_events = len(head) + n_step_events + len(tail)
    for r in range(ranks):
        d = {k: v for k, v in doc.items()}
        di = dict(d.get("distributedInfo") or {})
        di.update(rank=r, world_size=ranks)
        d["distributedInfo"] = di
        d["traceEvents"] = []  # keeps its place among the top-level keys
        pre, post = orjson.dumps(d).split(b'"traceEvents":[]', 1)
        data = pre + b'"traceEvents":[' + body + b"]" + post
        name = f"rank{r}.pt.trace.json"
        if gz:
            with gzip.open(out / (name + ".gz"), "wb", compresslevel=6) as f:
                f.write(data)
        else:
            (out / name).write_bytes(data)
    done.write_text(json.dumps({"source": SOURCE, "steps": steps, "windows": n_win, "draws": draws,
                                "events": n_events, "bytes": len(data)}) + "\n")
    return out


def describe(out: Path) -> dict:
    """What the COMPLETE marker of a built folder says (steps, draws, events and bytes per file)."""
    return json.loads((out / "COMPLETE").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--gz", action="store_true", help="write .json.gz files")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    a = ap.parse_args()
    import time

    t = time.perf_counter()
    out = build_steps_rank(a.cache, a.ranks, a.steps, a.gz)
    info = describe(out)
    files = sorted(p for p in out.iterdir() if p.name != "COMPLETE")
    print(f"{out} (ready in {time.perf_counter() - t:.1f} s): {len(files)} file(s), "
          f"{files[0].stat().st_size / 1e6:.2f} MB each on disk, {info['bytes'] / 1e6:.1f} MB of JSON, "
          f"{info['events']:,} events, {info['steps']:,} steps, {info['draws']:,} draws")
    return 0


if __name__ == "__main__":
    sys.exit(main())
