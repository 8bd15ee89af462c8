"""The data of a timeline page: analysed Timelines → one column-wise, string-interned payload.

Every Timeline becomes a *group* of lanes (rank → device stream / CPU thread /
overlay lane), topped by synthetic "forward pass" and "sampler wait" rows.
Events become flat integer columns (memray style): a ``names`` table and int
arrays, times in ns relative to the page's origin (exact in a JavaScript
double up to 104 days). The page's JavaScript draws them; nothing here emits
markup.

:func:`build_payload` returns these columns as plain arrays;
:func:`encode_for_page` packs them for the page (:func:`decode_page` is its
Python twin, the page's JavaScript the other): every ``start`` column holds
differences to the previous row, and the pieces, which tile their instance
almost always without gaps, become a signed length (``d`` > 0 hidden, < 0
exposed) and, sparsely (``gap_at``, ``gap``), the pieces that do not start where
the previous piece (or their instance) ended. A million pieces then take about
6 bytes each.

Columns (all sorted by lane, then start):

``inst``   every exponential instance: lane, start, dur, name, step, hidden, exposed, group, np (its pieces)
``piece``  its hidden/exposed sub-intervals: inst (row in ``inst``), start, dur, hidden (0/1)
``work``   other events drawn one by one: lane, start, dur, name, cat
``busy``   other events merged per lane (level of detail): lane, start, dur
``busy_cover`` exact busy ns per bin of the lanes whose gaps the level of detail closed
``fwd``    forward-pass windows: lane, start, dur, name
``wait``   the sampler's waits for ``q``: lane, start, dur, name
``step``   step windows per group: group, id, start, dur
``phase``  a switchback run's phase track: lane, start, dur, name (the arm's label), phase (index into
           ``phases``), first, last (step ids), n (steps) — one row per run of consecutive steps in one phase
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from expo_prof.analysis.saving.words import arm_words_of

from expo_prof.analysis.rollup import FORMAT_PRIORITY
from expo_prof.analysis.overlap.hidden import TimelineAnalysis, forward_span_rows
from expo_prof.analysis.steps.windows import Steps, step_windows
from expo_prof.analysis.overlap.hidden import wait_rows as sampler_wait_rows
from expo_prof.clocks import EPOCH_2001_NS as _EPOCH_2001_NS
from expo_prof.clocks import clock_offsets
from expo_prof.html import lod
from expo_prof.html.names import FOLD_AFTER, budget_names, fold_cut_names
from expo_prof.analysis.overlap.pieces import instance_pieces
from expo_prof.timeline import Interner, Kind, LaneKind, Timeline, overlay_log
from expo_prof.version import __version__
from expo_prof.words import forward_label

#: Payload layout version (the page's JavaScript reads it).
SCHEMA = 2
#: Work categories drawn in their own colours (index = ``work.cat``).
WORK_CATS = ("kernel / operator", "communication / copy", "annotation / runtime / other")
_CAT_OF_KIND = np.array(
    [0 if k in (Kind.KERNEL, Kind.CPU_OP) else 1 if k in (Kind.COMM, Kind.MEMCPY) else 2 for k in Kind], dtype=np.int8
)
_LANE_ORDER = {LaneKind.STREAM: 0, LaneKind.LOGICAL: 1, LaneKind.THREAD: 2, LaneKind.OVERLAY: 3}
_LANE_KIND_NAME = {LaneKind.STREAM: "stream", LaneKind.LOGICAL: "logical", LaneKind.THREAD: "thread", LaneKind.OVERLAY: "overlay"}


#: The phases a switchback step line may say (overlay.contract PHASE_*), in the order the page colours them.
PHASES = ("off", "on", "native")
def arm_label(phase: str, n_arms: int) -> str:
    """``off (engine as shipped)``: the phase and what its steps run, as the terminal's saving table names an arm
    (analysis/saving/words.py ``ARM_WORDS``)."""
    return f"{phase} ({arm_words_of(phase, n_arms)})"


def step_phases(tl: Timeline) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(step ids, phase per step — None where the step is in no switchback block —, number of arms) of a
    switchback run's overlay event log; None for any other Timeline (no step lines, or no step in a block)."""
    ov = overlay_log(tl)
    if ov is None or not ov.steps or "phase" not in ov.steps or "block" not in ov.steps:
        return None
    cols = ov.steps
    block = np.asarray(cols["block"], dtype=np.int64)
    phase = np.array(cols["phase"], dtype=object)  # a copy: the reader's column stays as read
    inside = (block >= 0) & np.isin(phase, PHASES)
    if not inside.any():
        return None
    # As the estimator reads the header (analysis/saving/recording.py): three arms only when it names all three.
    n_arms = 3 if sorted(ov.arms or []) == sorted(PHASES) else 2
    phase[~inside] = None
    return np.asarray(cols["step"], dtype=np.int64), phase, n_arms


@dataclass
class PhaseBlocks:
    """A switchback run's phase track on its overlay log's clock: per run of consecutive steps in one phase, the
    phase, its label, the first step's window start and the last step's window end, and its steps."""

    phase: list[str]
    label: list[str]
    start: np.ndarray
    end: np.ndarray
    first: np.ndarray
    last: np.ndarray
    n: np.ndarray

    def __len__(self) -> int:
        return len(self.phase)


def clipped_ends(steps: Steps) -> np.ndarray:
    """Each step window's end, clipped to the next step's start (windows may overlap their successor; one track
    holds them), never before its own start."""
    end = steps.end.copy()
    end[:-1] = np.minimum(end[:-1], steps.start[1:])
    return np.maximum(end, steps.start)


def phase_blocks(tl: Timeline, steps: Steps | None = None) -> PhaseBlocks | None:
    """The phase track of a switchback run's overlay log ``tl`` (None for any other Timeline): its step windows
    (``steps``, the analysis' own when ``tl`` was counted; else :func:`step_windows`, the same rule) in order, a
    block at every change of phase; steps outside the blocks (no phase) end a block and start none."""
    found = step_phases(tl)
    if found is None:
        return None
    ids, phase, n_arms = found
    st = steps if steps is not None else step_windows(tl)
    of = dict(zip(ids.tolist(), phase.tolist()))
    ph = [of.get(i) for i in st.ids.tolist()]
    end = clipped_ends(st)
    runs: list[tuple[int, int]] = []  # [first, last] window of each block
    for k, p in enumerate(ph):
        if p is not None and k and ph[k - 1] == p:
            runs[-1] = (runs[-1][0], k)
        elif p is not None:
            runs.append((k, k))
    a = np.array([r[0] for r in runs], dtype=np.int64)
    b = np.array([r[1] for r in runs], dtype=np.int64)
    phases = [str(ph[k]) for k in a.tolist()]
    return PhaseBlocks(phases, [arm_label(p, n_arms) for p in phases], st.start[a], end[b], st.ids[a], st.ids[b],
                       b - a + 1)


def phase_source(a: TimelineAnalysis, timelines: list[Timeline]) -> tuple[Timeline, Steps | None] | None:
    """Where part ``a``'s phase track comes from: its own Timeline when that is a switchback run's overlay log
    (with the analysis' steps), else the first such log of the same rank among ``timelines`` (a profiler trace
    counted, the log read beside it); None when the rank has none."""
    if step_phases(a.tl) is not None:
        return a.tl, a.steps
    log = next((t for t in timelines if t is not a.tl and t.rank == a.tl.rank and step_phases(t) is not None), None)
    return None if log is None else (log, None)


def forward_rows(a: TimelineAnalysis) -> np.ndarray:
    """Rows of the spans the analysis used as forward-pass windows (none for ``compute-busy``)."""
    if a.forward_source == "compute-busy" or len(a.tl) == 0:
        return np.empty(0, np.int64)
    return forward_span_rows(a.tl, a.forward_source)


def wait_rows(a: TimelineAnalysis) -> np.ndarray:
    """Rows of the sampler's wait spans (overlay spans / overlay-log windows)."""
    return sampler_wait_rows(a.tl) if len(a.tl) else np.empty(0, np.int64)


@dataclass
class _Cols:
    """Growing columns of one payload table."""

    names: tuple[str, ...]

    def __post_init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {n: [] for n in self.names}

    def add(self, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            self.parts[k].append(np.asarray(v, dtype=np.int64))

    def sorted_by(self, *keys: str) -> dict[str, np.ndarray]:
        cols = {k: (np.concatenate(v) if v else np.empty(0, np.int64)) for k, v in self.parts.items()}
        if keys and len(cols[keys[0]]):
            o = np.lexsort(tuple(cols[k] for k in reversed(keys)))
            cols = {k: v[o] for k, v in cols.items()}
        return cols


def _intern_used(names: Interner, tl: Timeline, used: np.ndarray) -> np.ndarray:
    """Page-wide name id of each of ``tl``'s names that ``used`` mentions (-1 for the others)."""
    out = np.full(len(tl.names), -1, dtype=np.int64)
    for i in np.unique(used).tolist():
        out[i] = names(tl.names[i])
    return out


def _order(tls: list[Timeline]) -> list[int]:
    def key(i: int) -> tuple:
        t = tls[i]
        f = FORMAT_PRIORITY.index(t.fmt) if t.fmt in FORMAT_PRIORITY else len(FORMAT_PRIORITY)
        return (t.rank, f, i)

    return sorted(range(len(tls)), key=key)


def build_payload(
    analyses: list[TimelineAnalysis],
    *,
    title: str = "expo-prof timeline",
    detail_budget: int = lod.DETAIL_BUDGET,
    busy_budget: int = lod.BUSY_BUDGET,
    warnings: list[str] | None = None,
    run: dict | None = None,
    timelines: list[Timeline] | None = None,
) -> dict:
    """The timeline page's data (see the module docstring). ``timelines``: every Timeline of the recording
    (``RecordingResult.timelines``), where a switchback run's overlay log read beside a counted profiler trace
    gives that rank its phase track."""
    place = _placed(analyses, timelines)
    tabs = _Tables()
    for gi in range(len(place.analyses)):
        _add_group(tabs, place, gi)
    t_end = max((int(t.end.max()) + o - place.origin for t, o in zip(place.tls, place.offs) if len(t)), default=0)
    detail, work, busy = _work_tables(tabs.work_all, t_end, detail_budget, busy_budget)
    ic, pc = _instance_tables(tabs.inst, tabs.piece)
    fwd_cols, wait_cols = tabs.fwd.sorted_by("lane", "start"), tabs.wait.sorted_by("lane", "start")
    phase_cols = _in_span(tabs.phase.sorted_by("lane", "start"), t_end)
    page_names, cut_note = _page_names(tabs.names, (ic, work, fwd_cols, wait_cols, phase_cols))
    return {
        "schema": SCHEMA,
        "kind": "timeline",
        "title": title,
        "tool": f"expo-prof {__version__}",
        "origin_ns": str(place.origin),
        "origin_is_epoch": place.origin > _EPOCH_2001_NS,
        "span_ns": t_end,
        "clock_note": place.clock_note,
        "lod": _lod_info(detail, detail_budget, busy_budget),
        "work_cats": list(WORK_CATS),
        "names": page_names,
        "lanes": tabs.lanes,
        "groups": tabs.groups,
        "inst": ic,
        "piece": pc,
        "work": work,
        "busy": busy,
        "busy_cover": {"bin_ns": int(detail.cover_bin_ns), "lanes": sorted(detail.cover),
                       "ns": [detail.cover[k] for k in sorted(detail.cover)]},
        "fwd": fwd_cols,
        "wait": wait_cols,
        "step": tabs.step.sorted_by("group", "start"),
        "phase": phase_cols,
        "phases": list(PHASES),
        # A switchback recording's header leads with the answer: the saving line every command prints.
        "answer": ((run or {}).get("saving_line") or None) if len(phase_cols["start"]) else None,
        "warnings": list(warnings or []) + ([cut_note] if cut_note else []),
        "run": run or {},
    }


@dataclass
class _Placed:
    """The groups of a page in their order (rank, then format), and where each sits on the page's clock."""

    analyses: list[TimelineAnalysis]
    tls: list[Timeline]
    #: Per group: ns to add to put its timeline on the common clock (:func:`clock_offsets`), and what was done.
    offs: list[int]
    clock_note: str | None
    #: Per group: its switchback overlay log and steps (:func:`phase_source`), or None.
    phase_src: list[tuple[Timeline, Steps | None] | None]
    #: {id(log): its offset} of the phase logs that can be placed (:func:`_log_offsets`).
    log_off: dict[int, int]
    #: The page's time 0 on the common clock: the earliest event.
    origin: int
    #: Timelines per rank: a rank read from several sources names the format in its lanes' labels.
    ranks_sources: dict[int, int]


def _placed(analyses: list[TimelineAnalysis], timelines: list[Timeline] | None) -> _Placed:
    """The groups of ``analyses`` ordered (:func:`_order`) and placed on one clock, with their phase logs."""
    order = _order([a.tl for a in analyses])
    analyses = [analyses[i] for i in order]
    tls = [a.tl for a in analyses]
    offs, clock_note = clock_offsets(tls)
    phase_src = [phase_source(a, list(timelines or [])) for a in analyses]
    log_off = _log_offsets(tls, offs, [src[0] for src in phase_src if src is not None])
    starts = [int(t.start.min()) + o for t, o in zip(tls, offs) if len(t)]
    ranks_sources: dict[int, int] = {}
    for t in tls:
        ranks_sources[t.rank] = ranks_sources.get(t.rank, 0) + 1
    return _Placed(analyses, tls, offs, clock_note, phase_src, log_off, min(starts) if starts else 0, ranks_sources)


class _Tables:
    """The page's tables while its groups are added: the names interned page-wide, the lanes, the groups, and
    the growing columns of each table (instances before sorting are numbered page-wide: ``inst_base``)."""

    def __init__(self) -> None:
        self.names = Interner()
        self.lanes: list[dict] = []
        self.groups: list[dict] = []
        self.inst = _Cols(("lane", "start", "dur", "name", "step", "hidden", "exposed", "group", "key"))
        self.piece = _Cols(("key", "start", "dur", "hidden"))
        self.work_all = _Cols(("lane", "start", "dur", "name", "cat"))
        self.fwd = _Cols(("lane", "start", "dur", "name"))
        self.wait = _Cols(("lane", "start", "dur", "name"))
        self.step = _Cols(("group", "id", "start", "dur"))
        self.phase = _Cols(("lane", "start", "dur", "name", "phase", "first", "last", "n"))
        self.inst_base = 0


@dataclass
class _Rows:
    """Which events of one group's timeline go to which table: forward spans, sampler waits, and the work
    (every other event but the instances and the steps)."""

    forward: np.ndarray
    wait: np.ndarray
    work: np.ndarray


def _rows_of(a: TimelineAnalysis) -> _Rows:
    """The forward, wait and work rows of ``a``'s timeline."""
    tl = a.tl
    f_rows, w_rows = forward_rows(a), wait_rows(a)
    special = np.zeros(len(tl), dtype=bool)
    special[a.inst.matched] = True
    special[f_rows] = True
    special[w_rows] = True
    special |= tl.kind == Kind.STEP
    return _Rows(f_rows, w_rows, np.flatnonzero(~special))


def _add_group(tabs: _Tables, place: _Placed, gi: int) -> None:
    """Group ``gi`` (one timeline) onto the page: its lanes, instances and pieces, forward, wait, work and steps,
    moved onto the page's clock (``shift``: its offset less the page's origin), and its entry in ``groups``."""
    a, tl = place.analyses[gi], place.tls[gi]
    shift = place.offs[gi] - place.origin
    rows = _rows_of(a)
    name_map = _intern_used(tabs.names, tl, np.concatenate((a.inst.name, tl.name[rows.forward], tl.name[rows.wait],
                                                             tl.name[rows.work])))
    lane0 = len(tabs.lanes)
    glane, f_lane, w_lane = _add_lanes(tabs, place, gi, rows)
    _add_instances(tabs, a, glane, name_map, shift, gi)
    for r, cols, ln in ((rows.forward, tabs.fwd, f_lane), (rows.wait, tabs.wait, w_lane)):
        if len(r):
            cols.add(lane=np.full(len(r), ln), start=tl.start[r] + shift, dur=tl.dur[r], name=name_map[tl.name[r]])
    if len(rows.work):
        tabs.work_all.add(
            lane=glane[tl.lane[rows.work]], start=tl.start[rows.work] + shift, dur=tl.dur[rows.work],
            name=name_map[tl.name[rows.work]], cat=_CAT_OF_KIND[tl.kind[rows.work]],
        )
    st = a.steps
    if len(st):
        s_end = st.end.copy()
        s_end[:-1] = np.minimum(s_end[:-1], st.start[1:])  # windows may overlap their successor
        tabs.step.add(group=np.full(len(st), gi), id=st.ids, start=st.start + shift, dur=np.maximum(s_end - st.start, 0))
    hid, tot = int(a.hidden.sum()), int(a.total.sum())
    tabs.groups.append({
        "rank": tl.rank, "fmt": tl.fmt, "backend": tl.backend, "source": tl.source, "lane0": lane0,
        "lane1": len(tabs.lanes), "rule": a.inst.rule, "forward_source": a.forward_source,
        "forward_label": forward_label(a.forward_source), "step_source": st.source,
        "instances": len(a.inst), "total_ns": tot, "hidden_ns": hid, "exposed_ns": tot - hid, "events": len(tl),
    })


def _add_lanes(tabs: _Tables, place: _Placed, gi: int, rows: _Rows) -> tuple[np.ndarray, int, int]:
    """Group ``gi``'s rows of the page, in order: its switchback phase row (with its blocks), forward pass,
    sampler wait, then each lane of the timeline that holds work or an instance (streams first). Returns the
    page's lane of each timeline lane (-1: not drawn) and the forward and wait rows' (-1: none)."""
    a, tl = place.analyses[gi], place.tls[gi]
    used = np.zeros(len(tl.lanes), dtype=bool)
    used[tl.lane[rows.work]] = True
    used[a.inst.lane] = True
    lane_ids = sorted(np.flatnonzero(used).tolist(), key=lambda i: (_LANE_ORDER.get(tl.lanes[i].kind, 9), i))
    prefix = f"rank {tl.rank}" + (f" · {tl.fmt}" if place.ranks_sources[tl.rank] > 1 else "")
    lanes = tabs.lanes
    src = place.phase_src[gi]
    blocks = phase_blocks(*src) if src is not None and id(src[0]) in place.log_off else None
    if src is not None and blocks:
        _add_phase_row(tabs.phase, tabs.names, lanes, blocks, place.log_off[id(src[0])] - place.origin, gi, prefix)
    f_lane = w_lane = -1
    if len(rows.forward):
        f_lane = len(lanes)
        lanes.append({"label": f"{prefix} · forward pass", "group": gi, "kind": "forward"})
    if len(rows.wait):
        w_lane = len(lanes)
        lanes.append({"label": f"{prefix} · sampler wait", "group": gi, "kind": "wait"})
    glane = np.full(len(tl.lanes), -1, dtype=np.int64)
    for li in lane_ids:
        ln = tl.lanes[li]
        label = ln.name if ln.kind != LaneKind.STREAM else f"{ln.device} {ln.name}"
        glane[li] = len(lanes)
        lanes.append({"label": f"{prefix} · {label}", "group": gi, "kind": _LANE_KIND_NAME.get(ln.kind, "other")})
    return glane, f_lane, w_lane


def _add_instances(tabs: _Tables, a: TimelineAnalysis, glane: np.ndarray, name_map: np.ndarray, shift: int,
                   gi: int) -> None:
    """Group ``gi``'s instances and their hidden/exposed pieces (key: the page-wide instance number before
    sorting, which :func:`_instance_tables` turns into the row of the sorted instance table)."""
    pcs = instance_pieces(a)
    n = len(a.inst)
    keys = tabs.inst_base + np.arange(n, dtype=np.int64)
    tabs.inst.add(
        lane=glane[a.inst.lane], start=a.inst.start + shift, dur=a.inst.end - a.inst.start,
        name=name_map[a.inst.name] if n else np.empty(0, np.int64), step=a.step, hidden=a.hidden,
        exposed=a.exposed, group=np.full(n, gi), key=keys,
    )
    tabs.piece.add(key=tabs.inst_base + pcs.inst, start=pcs.start + shift, dur=pcs.end - pcs.start, hidden=pcs.hidden)
    tabs.inst_base += n


def _work_tables(work_all: _Cols, t_end: int, detail_budget: int,
                 busy_budget: int) -> tuple[lod.Detail, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The level of detail (:func:`lod.choose`) over every work event, the work events of the lanes drawn in
    detail (sorted by lane, then start) and the busy intervals of the others."""
    w = work_all.sorted_by()
    detail = lod.choose(w["lane"], w["start"], w["start"] + w["dur"], detail_budget=detail_budget, busy_budget=busy_budget,
                        span_ns=t_end)
    keep = np.isin(w["lane"], list(detail.detailed_lanes)) if detail.detailed_lanes else np.zeros(len(w["lane"]), bool)
    work = {k: v[keep] for k, v in w.items()}
    o = np.lexsort((work["start"], work["lane"]))
    work = {k: v[o] for k, v in work.items()}
    busy = {"lane": detail.busy_lane, "start": detail.busy_start, "dur": detail.busy_end - detail.busy_start}
    return detail, work, busy


def _lod_info(detail: lod.Detail, detail_budget: int, busy_budget: int) -> dict:
    """What the page says of its level of detail: the sentence, the counts and the budgets."""
    return {
        "text": detail.describe(),
        "events": int(detail.events_in),
        "merged": int(detail.merged_events),
        "busy_intervals": int(len(detail.busy_start)),
        "gap_closed_ns": int(detail.gap_closed_ns),
        "detail_budget": detail_budget,
        "busy_budget": busy_budget,
    }


def _instance_tables(inst: _Cols, piece: _Cols) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The instance table sorted by lane and start (``np``: its pieces' count) and the piece table, each piece
    pointing at the row of its instance (``inst``) and sorted by it, then by start."""
    ic = inst.sorted_by("lane", "start")
    # Pieces point at rows of the sorted instance table.
    row_of_key = np.empty(len(ic["key"]), dtype=np.int64)
    row_of_key[ic["key"]] = np.arange(len(ic["key"]))
    pc = piece.sorted_by()
    pc["inst"] = row_of_key[pc.pop("key")] if len(pc["key"]) else pc.pop("key")
    o = np.lexsort((pc["start"], pc["inst"]))
    pc = {k: v[o] for k, v in pc.items()}
    ic.pop("key")
    ic["np"] = np.bincount(pc["inst"], minlength=len(ic["start"])).astype(np.int64)
    return ic, pc


def _page_names(names: Interner, tables: Sequence[dict[str, np.ndarray]]) -> tuple[list[str], str | None]:
    """The page's name table and the note on what was cut: long names cut within the page's budget, and past
    :data:`FOLD_AFTER` characters of cut names the later ones folded into one entry, the ``name`` column of each
    of ``tables`` renumbered to match (in place)."""
    # Interned, each name is held once; names that all differ cannot be interned: long ones share a budget.
    page_names, cut_note = budget_names(names.names, "timeline")
    # ... and past a cap the cut ones share one entry (a million distinct long names: one name, not a million).
    page_names, remap, folded = fold_cut_names(page_names)
    if remap is not None:
        for tab in tables:
            if len(tab["name"]):
                tab["name"] = remap[tab["name"]]
        cut_note = (f"{cut_note}; past {FOLD_AFTER >> 20} Mi characters of cut names, {folded:,} more share one "
                    f"entry, \"other long names ({folded:,})\", which search cannot tell apart")
    return page_names, cut_note


def _add_phase_row(cols: _Cols, names: Interner, lanes: list[dict], blocks: PhaseBlocks, shift: int, group: int,
                   prefix: str) -> None:
    """A group's phase row (its first: which arm each step ran) and its blocks, ``shift`` ns onto the page's clock;
    the labels interned like every other name."""
    cols.add(lane=np.full(len(blocks), len(lanes)), start=blocks.start + shift, dur=blocks.end - blocks.start,
             name=np.array([names(x) for x in blocks.label]), phase=np.array([PHASES.index(x) for x in blocks.phase]),
             first=blocks.first, last=blocks.last, n=blocks.n)
    lanes.append({"label": f"{prefix} · switchback phase", "group": group, "kind": "phase"})


def _log_offsets(tls: list[Timeline], offs: list[int], logs: list[Timeline]) -> dict[int, int]:
    """{id(log): ns to add to put it on the page's clock} for the phase logs: a counted one's own offset; one read
    beside a counted trace placed as :func:`clock_offsets` places sources, left out (no phase track) when adding
    it would move the counted sources (another clock)."""
    out = {id(t): o for t, o in zip(tls, offs)}
    extra = [t for t in logs if id(t) not in out]
    if extra:
        both, _ = clock_offsets(tls + extra)
        if both[: len(tls)] == offs:
            out.update({id(t): o for t, o in zip(extra, both[len(tls):])})
    return {id(t): out[id(t)] for t in logs if id(t) in out}


def _in_span(cols: dict[str, np.ndarray], t_end: int) -> dict[str, np.ndarray]:
    """The phase blocks that overlap the page's time range (a log read beside a trace outlasts its window)."""
    keep = (cols["start"] < t_end) & (cols["start"] + cols["dur"] > 0) if len(cols["start"]) else np.zeros(0, bool)
    return {k: v[keep] for k, v in cols.items()}


#: Tables whose ``start`` column the page receives as differences to the previous row.
DELTA_TABLES = ("inst", "work", "busy", "fwd", "wait")


def encode_for_page(payload: dict) -> dict:
    """The payload as the page receives it (see the module docstring): smaller, same information."""
    out = dict(payload)
    for t in DELTA_TABLES:
        cols = dict(payload[t])
        st = np.asarray(cols["start"], dtype=np.int64)
        cols["start"] = np.diff(st, prepend=0) if len(st) else st
        out[t] = cols
    pc, ic = payload["piece"], payload["inst"]
    inst = np.asarray(pc["inst"], dtype=np.int64)
    start = np.asarray(pc["start"], dtype=np.int64)
    dur = np.asarray(pc["dur"], dtype=np.int64)
    first = np.ones(len(inst), dtype=bool)
    first[1:] = inst[1:] != inst[:-1]
    prev_end = np.where(first, np.asarray(ic["start"], dtype=np.int64)[inst] if len(inst) else start,
                        np.concatenate(([0], start[:-1] + dur[:-1])))
    d = np.where(np.asarray(pc["hidden"]) > 0, dur, -dur)
    gap = start - prev_end
    at = np.flatnonzero(gap)  # sparse: pieces nearly always tile their instance
    out["piece"] = {"d": d, "gap_at": at, "gap": gap[at]}
    out["encoding"] = "delta-start, signed-piece"
    return out


def decode_page(data: dict) -> dict:
    """Inverse of :func:`encode_for_page` on the JSON a page holds (what the page's script rebuilds)."""
    out = dict(data)
    for t in DELTA_TABLES:
        cols = dict(data[t])
        cols["start"] = np.cumsum(np.asarray(cols["start"], dtype=np.int64)).tolist()
        out[t] = cols
    ic = out["inst"]
    npc = np.asarray(ic["np"], dtype=np.int64)
    inst = np.repeat(np.arange(len(npc), dtype=np.int64), npc)
    d = np.asarray(data["piece"]["d"], dtype=np.int64)
    gap = np.zeros(len(d), dtype=np.int64)
    gap[np.asarray(data["piece"]["gap_at"], dtype=np.int64)] = np.asarray(data["piece"]["gap"], dtype=np.int64)
    dur = np.abs(d)
    start = np.empty(len(d), dtype=np.int64)
    ist = np.asarray(ic["start"], dtype=np.int64)
    pos = 0
    for i in range(len(npc)):  # a loop: this is the tests' reference, kept obviously right
        at = int(ist[i])
        for k in range(pos, pos + int(npc[i])):
            at += int(gap[k])
            start[k] = at
            at += int(dur[k])
        pos += int(npc[i])
    out["piece"] = {"inst": inst.tolist(), "start": start.tolist(), "dur": dur.tolist(), "hidden": (d > 0).astype(int).tolist()}
    return out
