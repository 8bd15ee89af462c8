"""Which steps a count counts, and why two counts of one run differ (issue 33, item 2).

Every command counts the steps that *hold a draw* (``summary.rank_steps``: the
rows of ``steps[]``). Two things make other counts of the same run differ,
and both are said, as warnings, where the count is printed:

* **Step windows without a draw.** The trace's step markers (vLLM's
  ``execute_context_…`` annotations, ``ProfilerStep#N``) or the overlay log's
  step lines also mark steps in which nothing was drawn: vLLM ran the model
  with no token scheduled (``execute_context_0(0)_generation_0(0)``), a
  step of switchback's off blocks (vLLM drew inline; the overlay did not), a
  step whose requests draw no noise. :func:`drawless_note` names them; export
  draws every window on its steps track and says how many hold a draw.
* **Two views of one rank's draws** (a profiler trace and the overlay event
  log): only one counts (``--source``). The trace holds the steps the
  profiler recorded, the log every step of the run; and the trace's
  ``expo_prof::wait`` span encloses the log's wait window and the span's own
  entry and exit under the profiler, so its critical path per step is longer.
  :func:`views_note` says which steps each view counts and what each
  measures over the steps both hold.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from expo_prof.analysis.overlap.hidden import TimelineAnalysis

from expo_prof.analysis.steps.windows import assign_steps
from expo_prof.analysis.steps.windows import VLLM_EMPTY_STEP
from expo_prof.clocks import log_onto_trace
from expo_prof.words import fmt_ns, plural
from expo_prof.timeline import Timeline, overlay_log
from expo_prof.analysis.arrays import distinct

def id_ranges(ids: Sequence[int]) -> str:
    """Step ids as runs: ``0–31, 40, 42–44`` (``none`` when empty)."""
    xs = sorted(set(int(i) for i in ids))
    if not xs:
        return "none"
    out, lo, prev = [], xs[0], xs[0]
    for x in xs[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(f"{lo}" if lo == prev else f"{lo}–{prev}")
        if x is not None:
            lo = prev = x
    return ", ".join(out)


def counted_steps(parts: Sequence[TimelineAnalysis]) -> set[int]:
    """The step ids that hold a draw in ``parts`` (what ``summary.rank_steps`` counts)."""
    return {int(s) for a in parts for s in distinct(a.step).tolist() if s >= 0}


def _shipped_words(tl: Timeline | None, phase: str) -> str:
    """Why a switchback block other than ``on`` holds no draw, naming what that arm runs (docs/overlay.md)."""
    ov = overlay_log(tl) if tl is not None else None
    three = ov is not None and len(ov.arms or []) > 2
    if phase == "off" and three:
        return "switchback's off blocks (the inline draw after the forward; no lane draw to count)"
    return f"switchback's {phase} blocks (the engine sampled as shipped; the overlay drew none)"


def arm_log(logs: Sequence[TimelineAnalysis]) -> Timeline | None:
    """The switchback log among a rank's overlay logs (the first with step phases); None when none has them."""
    return next((lg.tl for lg in logs if (ov := overlay_log(lg.tl)) is not None and "phase" in ov.steps), None)


def _trace_arms(a: TimelineAnalysis, ids: list[int], log: Timeline | None) -> dict[int, str]:
    """Trace step id -> the switchback arm its step ran, from the rank's switchback ``log`` placed on the trace's
    clock (each log step's launch time, t0, falls in one trace window); empty without a log or a clock."""
    ov = overlay_log(log) if log is not None and ids else None
    if log is None or ov is None:
        return {}
    off, _ = log_onto_trace(log, a.tl)
    if off is None:
        return {}
    sid = assign_steps(a.steps, np.asarray(ov.steps["t0_ns"], dtype=np.int64) + off)
    out: dict[int, str] = {}
    for s, ph in zip(sid.tolist(), list(ov.steps["phase"])):
        if s >= 0 and ph is not None:
            out.setdefault(int(s), str(ph))
    return out


def _why_drawless(a: TimelineAnalysis, ids: list[int], logs: Sequence[TimelineAnalysis] = ()) -> list[str]:
    """The reasons the windows ``ids`` of ``a`` hold no draw, each with its steps."""
    tl = a.tl
    ov = overlay_log(tl)
    cols = ov.steps if ov is not None else None
    groups: dict[str, list[int]] = {}
    if a.steps.source == "step-column" and cols:
        by_id = {int(s): i for i, s in enumerate(cols["step"])}
        phase = cols.get("phase")
        phase = [None] * len(cols["step"]) if phase is None else list(phase)
        for sid in ids:
            i = by_id.get(sid)
            if i is not None and phase[i] in ("off", "native"):
                why = _shipped_words(tl, phase[i])
            elif i is not None and not cols["launched"][i]:
                why = "the overlay launched no draw"
            else:
                why = "no draw in the step"
            groups.setdefault(why, []).append(sid)
    elif a.steps.empty is not None:
        empty = dict(zip(a.steps.ids.tolist(), a.steps.empty.tolist()))
        log = arm_log(logs)  # found once for all the rank's drawless windows
        arm = _trace_arms(a, ids, log)
        for sid in ids:
            if empty.get(sid):
                why = f"vLLM ran the model with no token scheduled ({VLLM_EMPTY_STEP})"
            elif arm.get(sid) in ("off", "native"):
                why = _shipped_words(log, arm[sid])
            else:
                why = "tokens scheduled but no draw found (e.g. greedy requests draw no noise)"
            groups.setdefault(why, []).append(sid)
    else:
        groups["no draw in the step"] = list(ids)
    # "1 step (step 42)", "4 steps (steps 8, 17, 26, 35)": the count, then which steps, never a bare id after it
    return [f"{why}: {plural(len(v), 'step')} ({'step' if len(v) == 1 else 'steps'} {id_ranges(v)})"
            for why, v in groups.items()]


def drawless(parts: Sequence[TimelineAnalysis]) -> tuple[int, list[int]]:
    """How many step windows ``parts`` mark, and the ids of those without a draw."""
    none = [np.empty(0, np.int64)]
    windows = distinct(np.concatenate([np.asarray(a.steps.ids, dtype=np.int64) for a in parts] or none))
    drawn = np.concatenate([np.asarray(a.step, dtype=np.int64) for a in parts] or none)
    # (np.setdiff1d's np.unique would import numpy.ma; both sides are distinct already)
    drawn = distinct(drawn[drawn >= 0])
    return len(windows), windows[~np.isin(windows, drawn, assume_unique=True)].tolist()


def drawless_note(who: str, parts: Sequence[TimelineAnalysis], logs: Sequence[TimelineAnalysis] = ()) -> str | None:
    """The warning of a rank whose step markers mark more steps than hold a draw; None when all do. ``logs``: the
    rank's overlay logs not counted, which say the switchback arm of a trace's windows."""
    n_windows, ids = drawless(parts)
    if not ids:
        return None
    reasons: list[str] = []
    for a in parts:
        mine = sorted(set(ids) & {int(i) for i in a.steps.ids.tolist()})
        if mine:
            reasons.extend(_why_drawless(a, mine, logs))
    n = n_windows - len(ids)
    return (f"{who}: {plural(n, 'step')} counted, those holding a draw, of {n_windows} step windows the inputs mark "
            f"(export's steps track shows all {n_windows}); without a draw: {'; '.join(reasons)}")


def _per_step_mean(by_step: dict[int, int], ids: Sequence[int]) -> float | None:
    return sum(by_step.get(i, 0) for i in ids) / len(ids) if ids else None


def views_note(counted: Sequence[TimelineAnalysis], other: Sequence[TimelineAnalysis]) -> str:
    """What the two views of a rank's draws (a trace and the overlay log), one counted, each hold: the steps each
    counts and, where the log can be placed on the trace's clock, which log steps the trace's steps are and each
    view's sampler wait per step over those steps. The rest of the line that names the counted view."""
    logs = [a for a in (*counted, *other) if a.tl.fmt == "overlay-log"]
    traces = [a for a in (*counted, *other) if a.tl.fmt != "overlay-log"]
    views = [(counted[0].tl.fmt, len(counted_steps(counted)))]
    views += [(f, len(counted_steps([a for a in other if a.tl.fmt == f]))) for f in sorted({a.tl.fmt for a in other})]
    head = "the views count different steps: " + ", ".join(f"{f} {plural(n, 'step')}" for f, n in views)
    if not logs or not traces:
        return head
    log, trace = logs[0], next((t for t in traces if len(t.steps)), traces[0])
    off, why = log_onto_trace(log.tl, trace.tl)
    log_ids = sorted(counted_steps([log]))
    if off is None:
        return f"{head}; the overlay log holds steps {id_ranges(log_ids)}; which of them the trace holds is unknown: {why}"
    # Each log draw goes to the trace step that holds its midpoint (host clock; logmap places waits the same way).
    mid = log.inst.start + (log.inst.end - log.inst.start) // 2 + off
    in_trace = assign_steps(trace.steps, mid)
    pairs = {int(ls): int(ts) for ls, ts in zip(log.step.tolist(), in_trace.tolist()) if ls >= 0 and ts >= 0}
    trace_ids = counted_steps([trace])
    shared = sorted(ls for ls, ts in pairs.items() if ts in trace_ids)
    if counted[0].tl.fmt == "overlay-log":
        # The log counts: its numbering is the one every table and warning of this rank uses.
        text = (f"{head}; the overlay log holds steps {id_ranges(log_ids)} (every step the overlay logged), the trace's "
                f"steps are log steps {id_ranges(shared)} (the steps the profiler recorded)")
    else:
        # The trace counts: its numbering is the one every table and warning uses, so the log's steps are said by
        # where they fall against the trace's, never by the log's own counter.
        lo, hi = (min(pairs[s] for s in shared), max(pairs[s] for s in shared)) if shared else (None, None)
        before = sum(1 for ls in log_ids if ls not in pairs or (lo is not None and pairs[ls] < lo))
        after = len(log_ids) - len(shared) - before
        text = (f"{head}; the trace holds steps {id_ranges(sorted(trace_ids))} (the steps the profiler recorded), the "
                f"overlay log {plural(len(log_ids), 'step')} (every step the overlay logged): those "
                f"{len(shared)} of the trace's, {before} before and {after} after them")
    w_log = _per_step_mean(log.wait_by_step, shared)
    w_trace = _per_step_mean(trace.wait_by_step, sorted({pairs[s] for s in shared}))
    if trace.wait_measured and log.wait_measured and w_log is not None and w_trace is not None:
        text += (f"; over those {plural(len(shared), 'step')} the sampler waits {fmt_ns(w_trace)}/step by the "
                 f"trace's expo_prof::wait spans and {fmt_ns(w_log)}/step by the log's wait windows (over all "
                 f"{len(log_ids)}: {fmt_ns(_per_step_mean(log.wait_by_step, log_ids))}/step): the span encloses the "
                 "log's window and its own entry and exit under the profiler")
    return text
