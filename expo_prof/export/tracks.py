"""The analysis as tracks: what both export formats add next to the source's events.

Per counted part (one rank's analysed Timeline): one ``steps`` track (args: the step's own time, prefill or
decode, batch and q where the source gives them: :func:`step_args`) and, for
each lane that holds instances, three tracks — ``instances`` (one slice per
draw; args: step, total/hidden/exposed ns), ``hidden`` and ``exposed`` (the
pieces of :func:`expo_prof.html.segments.instance_pieces`). A switchback run
adds a ``switchback phase`` track (:func:`phase_track`): one slice per block of
consecutive steps in one phase, named by what its arm runs, from the overlay
log of the rank (the counted part, or read beside a counted trace). Times stay
in the Timeline's own ns; each writer maps them onto its output clock.

The slices of one track never overlap (instances of one lane do not; step
windows are clipped to the next step's start), so every track is a proper
one-level slice track in Perfetto too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from expo_prof.analysis.overlap.hidden import TimelineAnalysis
from expo_prof.analysis.overlap.pieces import instance_pieces
from expo_prof.html.names import LONG
from expo_prof.html.timeline_data import phase_blocks, phase_source
from expo_prof.timeline import Timeline
from expo_prof.words import cut, plural

#: The category of every added slice; no target rule matches it or its names, so reading an export back
#: does not count them (the Kineto reader gives unknown categories the inert kind OTHER).
ADDED_CAT = "expo_prof"
#: The phase track's name, and its sort key (above the steps track, 1).
PHASE_TRACK = "switchback phase"
PHASE_SORT = 0


@dataclass
class Track:
    """One added track: its name, a sort key and its slices (ns on the Timeline's clock)."""

    name: str
    sort: int
    names: list[str]
    start: np.ndarray
    end: np.ndarray
    args: list[dict] = field(default_factory=list)


def analysis_tracks(a: TimelineAnalysis, op: str | None) -> tuple[list[Track], dict[str, int]]:
    """The added tracks of one analysed Timeline, and counts of what they hold."""
    tl = a.tl
    names = tl.names
    inst, pcs = a.inst, instance_pieces(a)
    out: list[Track] = []
    stats = {"instances": len(inst), "hidden": 0, "exposed": 0, "steps": 0, "steps_drawn": 0, "names_cut": 0}
    target = "exponential" if op is None else f"op {op}"
    st = a.steps
    if len(st):
        end = st.end.copy()
        end[:-1] = np.minimum(end[:-1], st.start[1:])  # one track: windows must not overlap
        ids = st.ids.tolist()
        out.append(Track("steps", 1, [f"step {int(s)}" for s in ids], st.start.copy(), np.maximum(end, st.start),
                         [step_args(a, int(s)) for s in ids]))
        stats["steps"] = len(st)
        # The windows that hold a draw: the steps every other command counts (summary.steps).
        stats["steps_drawn"] = int(np.isin(st.ids, a.step[a.step >= 0]).sum())
    for k, ln in enumerate(np.unique(inst.lane).tolist()):
        base = 10 * (k + 1)
        lname = tl.lanes[int(ln)].name
        sel = np.flatnonzero(inst.lane == ln)
        tot = a.total[sel]
        args = [
            {"instance": int(i), "name": cut(names[int(inst.name[i])], LONG), "step": int(a.step[i]), "total_ns": int(t),
             "hidden_ns": int(h), "exposed_ns": int(e), "hidden_fraction": (float(h) / float(t)) if t else None}
            for i, t, h, e in zip(sel.tolist(), tot.tolist(), a.hidden[sel].tolist(), a.exposed[sel].tolist())
        ]
        stats["names_cut"] += sum(len(names[int(inst.name[i])]) > LONG for i in sel.tolist())
        out.append(Track(f"{target} instances · {lname}", base, ["instance"] * len(sel), inst.start[sel].copy(),
                         inst.end[sel].copy(), args))
        in_lane = np.isin(pcs.inst, sel)
        for j, flag in ((1, True), (2, False)):
            m = np.flatnonzero(in_lane & (pcs.hidden == flag))
            what = "hidden" if flag else "exposed"
            pa = [{"instance": int(i), "step": int(a.step[i])} for i in pcs.inst[m].tolist()]
            out.append(Track(f"{target} {what} · {lname}", base + j, [what] * len(m), pcs.start[m].copy(),
                             pcs.end[m].copy(), pa))
            stats[what] += len(m)
    return out, stats


def phase_track(a: TimelineAnalysis, timelines: Sequence[Timeline]) -> tuple[Track, Timeline] | None:
    """Part ``a``'s switchback phase track (one slice per block, named by its arm: ``on (overlay)``; args: the
    phase, its first and last step and how many) and the Timeline whose clock its times are on — the overlay log,
    which is ``a.tl`` or a log of the same rank among ``timelines``; None when the rank ran no switchback."""
    src = phase_source(a, list(timelines))
    blocks = phase_blocks(*src) if src is not None else None
    if not blocks or src is None:
        return None
    args = [{"phase": p, "first_step": int(f), "last_step": int(la), "steps": int(n)}
            for p, f, la, n in zip(blocks.phase, blocks.first.tolist(), blocks.last.tolist(), blocks.n.tolist())]
    return Track(PHASE_TRACK, PHASE_SORT, list(blocks.label), blocks.start.copy(), blocks.end.copy(), args), src[0]


def step_args(a: TimelineAnalysis, sid: int) -> dict:
    """A step slice's args: its id and, where the source gives them (analysis/steps/facts.py), its own time, prefill
    or decode, batch and q — the figures ``analyze --json`` gives in ``steps[]`` (keys left out when unknown)."""
    f = a.facts
    args: dict = {"step": sid}
    for key, d in (("own_ns", f.own_ns), ("cadence_ns", f.cadence_ns), ("kind", f.kind), ("reqs", f.reqs), ("tokens", f.tokens)):
        if sid in d:
            args[key] = d[sid]
    if sid in f.q:
        args["q_rows"], args["q_vocab"], args["q_dtype"] = f.q[sid]
    return args


def names_cut_note(n: int) -> str:
    """The warning of an export whose instance slices name ``n`` draws cut (their ``name`` arg)."""
    return (f"export: {plural(n, 'instance')}' name arg cut to {LONG} characters with a count of the rest "
            "(the full name is in the file once: the source's event / the interned name)")
