"""What each step was: its time, prefill or decode, its batch, and the shape and dtype of ``q`` (pure functions).

The figures come from what the Timeline already holds, never from a guess:

* **step time** — from the step's start to the end of its last part: its own
  marker (``ProfilerStep#N``, vLLM's ``execute_context_…`` annotation, or the
  last event of a step column), its draws and the sampler's wait for ``q``;
  in an overlay event log from ``t0_ns`` to ``host_end`` (else the end of its
  last window). Not the window to the next step's start: the time between
  steps (scheduling, idle gaps) is not the step's.
* **prefill / decode and batch** — vLLM's step annotation
  ``execute_context_<reqs>(<tokens>)_generation_<reqs>(<tokens>)`` (a step with
  a prompt request is a prefill step, mixed batches included), or an overlay
  log's ``reqs`` and ``tokens`` (schema 2+; ``tokens > reqs``: a request
  computed more than one token). Padded tokens (CUDA / NPU graphs) would read
  as prefill, so a log off the CPU is not split.
* **cadence** — from the step's start to the next step's start (the very next step id), vLLM's time between
  steps included and idle gaps left out by switchback's rule (:func:`expo_prof.analysis.saving.switchback.cadence`):
  what a step costs throughput, and the "step" switchback breaks into forward, sampler and the rest.
* **q** — only the overlay event log records it (``rows`` × ``vocab``,
  ``dtype``) for the steps that launched it.

What a source cannot give is said once, with why (:attr:`StepFacts.missing`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from expo_prof.analysis.steps.windows import VLLM_BATCH_RE
from expo_prof.timeline import OverlayLog, Timeline, overlay_log


PREFILL, DECODE = "prefill", "decode"

#: A step's host time after its own work above IDLE_FACTOR × the run's median + IDLE_FLOOR_NS is an idle gap.
IDLE_FACTOR = 10
IDLE_FLOOR_NS = 1_000_000

#: Keys of :attr:`StepFacts.missing`: the figures a source may lack.
OWN_TIME, KIND, BATCH, Q = "own time", "prefill / decode", "batch size", "q shape and dtype"


@dataclass
class StepFacts:
    """Per step id of one Timeline: what :func:`step_facts` found (a step absent from a dict: not known)."""

    own_ns: dict[int, int] = field(default_factory=dict)
    #: Start to the next step's start, idle gaps left out (a step without a next step or before a gap: absent).
    cadence_ns: dict[int, int] = field(default_factory=dict)
    kind: dict[int, str] = field(default_factory=dict)
    reqs: dict[int, int] = field(default_factory=dict)
    tokens: dict[int, int] = field(default_factory=dict)
    #: (rows, vocab, dtype) of the q the step launched.
    q: dict[int, tuple[int, int, str | None]] = field(default_factory=dict)
    #: Where the step time was measured from, in words (null when not measured).
    time_source: str | None = None
    #: Figure (OWN_TIME, KIND, BATCH, Q) -> why this source cannot give it.
    missing: dict[str, str] = field(default_factory=dict)


def step_facts(tl: Timeline, steps, part_step: np.ndarray, part_end: np.ndarray) -> StepFacts:
    """The facts of each step of ``tl`` (``steps``: :class:`~expo_prof.analysis.overlap.hidden.Steps`);
    ``part_step`` / ``part_end``: the step id and end of the step's other parts (draws, waits)."""
    ov = overlay_log(tl)
    if ov is not None:
        return _from_log(tl, ov)
    f = StepFacts()
    if len(steps) == 0:
        f.missing[OWN_TIME] = ("no step markers in the trace (ProfilerStep#N, vLLM's execute_context "
                                "annotation, a step column)")
    else:
        mark_end = steps.mark_end if steps.mark_end is not None else steps.end
        end = mark_end.astype(np.int64).copy()
        ok = part_step >= 0
        idx = _index(steps.ids, part_step[ok])
        hit = idx >= 0
        np.maximum.at(end, idx[hit], part_end[ok][hit])
        f.own_ns = dict(zip(steps.ids.tolist(), (end - steps.start).tolist()))
        f.cadence_ns = _cadences(steps.ids, steps.start, end - steps.start)
        f.time_source = {"ProfilerStep": "ProfilerStep#N spans",
                         "vllm-annotation": "vLLM's execute_context annotation",
                         "step-column": "the step's first to last event"}.get(steps.source, steps.source)
        f.time_source += ", to its last draw or wait"
    names = steps.mark_name if len(steps) else None
    if names is not None:
        _batches(f, tl, steps.ids, names)
    if not f.kind:
        why = ("the trace has no vLLM step annotation naming the batch "
               "(execute_context_N(T)_generation_M(T), vLLM ≥ 0.11) and no overlay log was read for it")
        f.missing[KIND] = why
        f.missing[BATCH] = why
    f.missing[Q] = "a profiler trace does not record q's shape; the overlay event log does (rows × vocab, dtype)"
    return f


def _batches(f: StepFacts, tl: Timeline, ids: np.ndarray, names: np.ndarray) -> None:
    """Prefill / decode, requests and tokens of each step from its vLLM annotation's name (matched once per
    distinct name: a long run repeats a few hundred batch shapes over tens of thousands of steps)."""
    distinct, inverse = np.unique(np.asarray(names), return_inverse=True)
    parsed = [VLLM_BATCH_RE.match(tl.names[int(n)]) for n in distinct.tolist()]
    # Per distinct name: (matched, ctx reqs, ctx tokens, gen reqs, gen tokens); then one gather per step.
    g = np.array([(1, *(int(x) for x in m.groups())) if m else (0, 0, 0, 0, 0) for m in parsed],
                 dtype=np.int64).reshape(-1, 5)[inverse.reshape(-1)]
    has = g[:, 0] == 1
    sid = np.asarray(ids, dtype=np.int64)[has].tolist()
    ctx_r, ctx_t, gen_r, gen_t = g[has, 1], g[has, 2], g[has, 3], g[has, 4]
    f.kind.update(zip(sid, np.where(ctx_r > 0, PREFILL, DECODE).tolist()))
    f.reqs.update(zip(sid, (ctx_r + gen_r).tolist()))
    f.tokens.update(zip(sid, (ctx_t + gen_t).tolist()))


def _cadences(ids: np.ndarray, start: np.ndarray, own: np.ndarray) -> dict[int, int]:
    """Step id -> cadence (start to the very next step's start), idle gaps left out (switchback's rule)."""
    o = np.argsort(start, kind="stable")
    ids, start, own = np.asarray(ids)[o], np.asarray(start)[o], np.asarray(own)[o]
    cad, idle = cadence(ids, start, own)
    keep = (cad >= 0) & ~idle
    return dict(zip(ids[keep].tolist(), cad[keep].tolist()))


def _index(ids: np.ndarray, sids: np.ndarray) -> np.ndarray:
    """Position of each of ``sids`` in the step ids ``ids`` (any order), -1 when absent."""
    if len(ids) == 0:
        return np.full(len(sids), -1, np.int64)
    order = np.argsort(ids, kind="stable")
    k = np.clip(np.searchsorted(ids[order], sids), 0, len(ids) - 1)
    return np.where(ids[order][k] == sids, order[k], -1)


def _from_log(tl: Timeline, ov: OverlayLog) -> StepFacts:
    """The facts of an overlay event log's steps (reader columns, docs/event-log.md)."""
    c = ov.steps
    f = StepFacts(time_source="the overlay log: t0 to the step's host_end (else its last window)")
    schema1 = ov.header_int("schema") == 1
    split = not schema1 and tl.backend == "cpu"
    step = ints(c["step"])
    t0 = ints(c["t0_ns"])
    # The end of each line's last part: its windows' ends and its host_end (-inf where a part is not known).
    lowest = np.iinfo(np.int64).min
    ends = [np.where(ints(c[f"{k}_ns"]) >= 0, ints(c[f"{k}_start_ns"]) + ints(c[f"{k}_ns"]), lowest)
            for k in ("fwd", "exp", "wait", "sample")]
    ends.append(np.where(ints(c["host_end_ns"]) >= 0, t0 + ints(c["host_end_ns"]), lowest))
    last = np.max(np.vstack(ends), axis=0) if len(step) else np.empty(0, np.int64)
    line = step >= 0
    timed = line & (last != lowest) & (t0 > 0)
    f.own_ns = dict(zip(step[timed].tolist(), (last - t0)[timed].tolist()))
    reqs, tokens = ints(c["reqs"]), ints(c["tokens"])
    f.reqs = dict(zip(step[line & (reqs > 0)].tolist(), reqs[line & (reqs > 0)].tolist()))
    if split:
        both = line & (reqs > 0) & (tokens > 0)
        f.kind = dict(zip(step[both].tolist(), np.where(tokens[both] > reqs[both], PREFILL, DECODE).tolist()))
        f.tokens = dict(zip(step[both].tolist(), tokens[both].tolist()))
    launched = line & (ints(c["rows"]) > 0)
    f.q = dict(zip(step[launched].tolist(), zip(ints(c["rows"])[launched].tolist(), ints(c["vocab"])[launched].tolist(),
                                                 list(np.asarray(c["dtype"], dtype=object)[launched]))))
    # Each line's own time as the step's entry says it (a step id written twice: its last line's figure).
    keys = np.fromiter(f.own_ns.keys(), np.int64, len(f.own_ns))
    vals = np.fromiter(f.own_ns.values(), np.int64, len(f.own_ns))
    pos = _index(keys, step)
    own = np.where(pos >= 0, vals[np.clip(pos, 0, None)] if len(vals) else -1, -1)
    ok = line & (t0 > 0)
    f.cadence_ns = _cadences(step[ok], t0[ok], own[ok])
    if schema1:
        f.missing[KIND] = "the overlay log is schema 1: it records no tokens per step (prefill and decode look alike)"
    elif tl.backend != "cpu":
        f.missing[KIND] = (f"the overlay log's tokens are padded on {tl.backend} (graph sizes): a padded decode "
                           "step would read as prefill")
    if not f.own_ns:
        f.missing[OWN_TIME] = "the overlay log's steps have no timing windows (EXPO_PROF_INSTRUMENT=0?)"
    if not f.q:
        f.missing[Q] = "no step of the overlay log launched q"
    return f


def log_q(tl: Timeline) -> Counter[tuple[int, int, str | None]]:
    """Steps per q (rows, vocab, dtype) an overlay event log launched (empty for another Timeline)."""
    ov = overlay_log(tl)
    return Counter() if ov is None else Counter(_from_log(tl, ov).q.values())


def ints(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def cadence(step: np.ndarray, t0: np.ndarray, host_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per step line: its cadence (ns; -1 where none), and whether it was left out as an idle gap.

    A cadence needs the next line to be the very next step of the process.
    An idle gap: the host time after the step's own work (cadence − host_end,
    or the whole cadence when host_end is unknown) above IDLE_FACTOR × its
    median + IDLE_FLOOR_NS.
    """
    step, t0, host_end = ints(step), ints(t0), ints(host_end)
    n = len(step)
    cad = np.full(n, -1, dtype=np.int64)
    idle = np.zeros(n, dtype=bool)
    if n < 2:
        return cad, idle
    nxt = (step[1:] == step[:-1] + 1) & (t0[1:] >= t0[:-1])
    cad[:-1][nxt] = (t0[1:] - t0[:-1])[nxt]
    has = cad >= 0
    gap = np.where(host_end >= 0, cad - host_end, cad)
    if has.any():
        limit = IDLE_FACTOR * float(np.median(gap[has])) + IDLE_FLOOR_NS
        idle = has & (gap > limit)
    return cad, idle
