"""Roll per-instance results up into steps, ranks and the run (:mod:`expo_prof.analysis.model`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from expo_prof.analysis.overlap.hidden import TimelineAnalysis, analyze_timeline
from expo_prof.analysis.overlap.logmap import attach_overlay_logs
from expo_prof.analysis.dists import dist, fraction
from expo_prof.analysis.steps.means import step_breakdown, step_dists
from expo_prof.analysis.steps.table import StepTable, concat, empty_table, step_rows, step_table
from expo_prof.analysis.steps.views import drawless_note, views_note
from expo_prof.analysis.model import (
    AnalysisResult,
    InstanceDists,
    RankResult,
    Summary,
)
from expo_prof.analysis.targets import LOOKED_FOR, similar_names
from expo_prof.errors import NothingFound
from expo_prof.timeline import Timeline, event_count
from expo_prof.version import __version__
from expo_prof.words import common_forward_source, plural

#: When one rank was read from several exports of the same run (torch_npu writes
#: trace_view.json, kernel_details.csv and a .db side by side), the first format
#: here that found instances is used and the others are reported as ignored.
FORMAT_PRIORITY = ("kineto", "nsys", "ascend-db", "ascend-trace-view", "msprof", "ascend-kernel-csv", "overlay-log")


def _fmt_priority(fmt: str) -> int:
    return FORMAT_PRIORITY.index(fmt) if fmt in FORMAT_PRIORITY else len(FORMAT_PRIORITY)


def _steps_differ(keep: list[TimelineAnalysis], other: list[TimelineAnalysis]) -> bool:
    """Whether two views of one rank's draws hold different numbers of steps (or of draws)."""
    from expo_prof.analysis.steps.views import counted_steps

    n_steps, n_inst = len(counted_steps(keep)), sum(len(a) for a in keep)
    for fmt in {a.tl.fmt for a in other}:
        same = [a for a in other if a.tl.fmt == fmt]
        if len(counted_steps(same)) != n_steps or sum(len(a) for a in same) != n_inst:
            return True
    return False


def _instance_dists(parts: list[TimelineAnalysis]) -> InstanceDists:
    cat = lambda f: np.concatenate([f(a) for a in parts]) if parts else np.empty(0, np.int64)  # noqa: E731
    return InstanceDists(
        total_ns=dist(cat(lambda a: a.total)),
        hidden_ns=dist(cat(lambda a: a.hidden)),
        exposed_ns=dist(cat(lambda a: a.exposed)),
    )


def _opt_sum(values) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _counted_wait(parts: list[TimelineAnalysis], steps: StepTable) -> int:
    """The sampler's wait in the rows of ``steps``, plus the wait in no step (the ``-1`` bucket: a log's windows
    outside the trace's steps) where no row holds it."""
    rows = int(steps.wait[steps.wait_known].sum())
    if steps.numbered.all():
        rows += sum(int(a.wait_by_step.get(-1, 0)) for a in parts)
    return int(rows)


def wait_source(parts: Sequence[TimelineAnalysis]) -> str | None:
    """Which source measured the parts' wait: "span", "log window", or both joined by "+"; None when none."""
    return joined_sources(a.wait_source for a in parts if a.wait_measured)


def joined_sources(sources) -> str | None:
    """Wait sources (each maybe "+"-joined already) as one: sorted, each once, joined by "+"; None for none."""
    return "+".join(sorted({p for s in sources if s for p in s.split("+")})) or None


def _names(parts: list[TimelineAnalysis]) -> dict[str, int]:
    """Instances per name, most first; ties in the order the names first appear (as Counter.most_common)."""
    c: dict[str, int] = {}
    for a in parts:
        ids, first, counts = np.unique(a.inst.name, return_index=True, return_counts=True)
        for k in np.argsort(first, kind="stable"):
            name = a.tl.names[int(ids[k])]
            c[name] = c.get(name, 0) + int(counts[k])
    return dict(sorted(c.items(), key=lambda kv: kv[1], reverse=True))


def analyze(timelines: Sequence[Timeline], **kw) -> AnalysisResult:
    """Analyse every Timeline and roll the results up per step, per rank and for the run.

    Takes the keyword arguments of :func:`analyze_parts`, which also returns the per-Timeline analyses it
    counted.
    """
    return analyze_parts(timelines, **kw)[0]


#: Where a rank has both: ``auto`` counts the trace when it found instances (else the log),
#: ``trace`` only traces, ``overlay-log`` only the overlay event log.
SOURCES = ("auto", "trace", "overlay-log")


def analyze_parts(
    timelines: Sequence[Timeline],
    *,
    op: str | None = None,
    inputs: Sequence[str] = (),
    warnings: Sequence[str] = (),
    skipped: Sequence[tuple[str, str]] = (),
    progress: Callable[[int, int], None] | None = None,
    runs: Sequence[str] | None = None,
    source: str = "auto",
    analyses: Sequence[TimelineAnalysis] | None = None,
) -> tuple[AnalysisResult, list[TimelineAnalysis]]:
    """Analyse every Timeline and roll the results up per step, per rank and for the run;
    also return the analyses that were counted (one source per rank, overlay-log waits attached).

    ``runs`` gives each Timeline's recording (:func:`expo_prof.runs.labels.run_labels`);
    ranks are grouped per (recording, rank), so rank 0 of two recordings gives two rows,
    each with its ``recording`` label. With one recording (or ``runs`` None) ``recording`` is
    null everywhere and the result is that of one recording.

    ``analyses``: the per-Timeline analyses already made (by the workers of a parallel read, one per
    Timeline, in order); the Timelines may then be :func:`~expo_prof.timeline.compact`.

    Raises :class:`NothingFound` (exit 1) when no Timeline holds a target
    instance, with the names looked for and similar names present.
    """
    # Options come validated (pipeline/options.py: one line each on bad input); here they are only used.
    if source not in SOURCES:
        raise ValueError(f"source {source!r}: expected one of {SOURCES}")
    pattern = re.compile(op) if op is not None else None
    analyses = _analyses(timelines, pattern, analyses, progress)
    # Runs: a label per Timeline (the CLI derives them from run directories and
    # input paths, expo_prof.runs); without labels everything is one run.
    run_of = list(runs) if runs is not None else [""] * len(analyses)
    if len(run_of) != len(analyses):
        raise ValueError(f"runs: {len(run_of)} labels for {len(analyses)} timelines")
    ch = _choose(analyses, run_of, source)
    if not ch.chosen:
        raise _source_left_nothing(analyses, source) or _nothing_found(timelines, op, pattern)
    ranks: list[RankResult] = []
    tables: list[StepTable] = []
    for key, parts in ch.chosen.items():
        run = ch.run_order[key[0]] if ch.several else None
        rank, table = _rank_result(key[1], parts, run, ch.rank_only_wait.get(key), ch.unused_logs[key])
        ranks.append(rank)
        tables.append(table)
    used = [a for parts in ch.chosen.values() for a in parts]
    all_steps = concat(tables)
    summary = _summary(ranks, all_steps, used, [lg for logs in ch.unused_logs.values() for lg in logs])
    result = AnalysisResult(
        tool_version=__version__,
        op=op,
        source=source,
        inputs=list(inputs),
        summary=summary,
        ranks=ranks,
        steps=step_rows(all_steps),
        warnings=list(warnings) + ch.warn,
        info=ch.info,
        skipped=[[str(p), str(r)] for p, r in skipped],
    )
    return result, used


def _analyses(timelines: Sequence[Timeline], pattern: re.Pattern | None,
              analyses: Sequence[TimelineAnalysis] | None,
              progress: Callable[[int, int], None] | None) -> list[TimelineAnalysis]:
    """One analysis per Timeline: those a parallel read made already, else made here (with progress)."""
    if analyses is not None:
        if len(analyses) != len(timelines):
            raise ValueError(f"analyses: {len(analyses)} for {len(timelines)} timelines")
        return list(analyses)
    out = []
    for i, tl in enumerate(timelines):
        out.append(analyze_timeline(tl, pattern))
        if progress is not None:
            progress(i + 1, len(timelines))
    return out


@dataclass
class _Choice:
    """What :func:`_choose` keeps per (recording, rank): the analyses counted, the wait known only per rank (an
    overlay log that could not be placed on the trace), the rank's overlay logs not counted, and what was said."""

    run_order: list[str]
    several: bool
    chosen: dict[tuple[int, int], list[TimelineAnalysis]] = field(default_factory=dict)
    rank_only_wait: dict[tuple[int, int], int] = field(default_factory=dict)
    unused_logs: dict[tuple[int, int], list[TimelineAnalysis]] = field(default_factory=dict)
    warn: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)


def _choose(analyses: list[TimelineAnalysis], run_of: list[str], source: str) -> _Choice:
    """Per (recording, rank): keep the best format that found instances (the same draws read through another
    export would count twice), attach the overlay log's waits where the trace has none, and say what was left
    out and why. Another recording's rank of the same number is another rank: never merged."""
    run_order = list(dict.fromkeys(run_of))
    ch = _Choice(run_order=run_order, several=len(run_order) > 1)
    by_rank: dict[tuple[int, int], list[TimelineAnalysis]] = defaultdict(list)
    for a, r in zip(analyses, run_of):
        by_rank[(run_order.index(r), a.tl.rank)].append(a)
    for key, parts in sorted(by_rank.items()):
        found = [a for a in parts if len(a)]
        if source == "trace":
            found = [a for a in found if a.tl.fmt != "overlay-log"]
        elif source == "overlay-log":
            found = [a for a in found if a.tl.fmt == "overlay-log"]
        if not found:
            continue
        who = f"{run_order[key[0]]}: rank {key[1]}" if ch.several else f"rank {key[1]}"
        keep = _choose_rank(ch, key, who, parts, found)
        ch.chosen[key] = keep
        ch.unused_logs[key] = [a for a in parts if a.tl.fmt == "overlay-log" and a not in keep]
    return ch


def _choose_rank(ch: _Choice, key: tuple[int, int], who: str, parts: list[TimelineAnalysis],
                 found: list[TimelineAnalysis]) -> list[TimelineAnalysis]:
    """One rank's counted analyses (see :func:`_choose`); its warnings and info lines go to ``ch``."""
    best = min(_fmt_priority(a.tl.fmt) for a in found)
    keep = [a for a in found if _fmt_priority(a.tl.fmt) == best]
    dropped = {a.tl.fmt for a in parts if len(a) and _fmt_priority(a.tl.fmt) != best}
    # The overlay log is the only source of the sampler's wait for traces without expo_prof::wait spans.
    logs = []
    if keep[0].tl.fmt != "overlay-log" and not any(a.wait_by_step for a in keep):
        logs = [a for a in parts if a.tl.fmt == "overlay-log" and a.wait_by_step]
    notes: list[str] = []
    if logs:
        att = attach_overlay_logs(keep, logs, who)
        keep, notes = att.parts, att.warnings
        ch.rank_only_wait[key] = att.rank_only_wait_ns
        dropped.discard("overlay-log")  # used for the wait: not ignored
    if dropped:
        n = sum(len(a) for a in keep)
        other = [a for a in parts if len(a) and a.tl.fmt in dropped]
        line = (f"{who}: {n} instance{'' if n == 1 else 's'} from {keep[0].tl.fmt}; the "
                f"{' and '.join(sorted(dropped))} input(s) of the same rank not counted "
                "(another view of the same draws would count each twice; choose with --source)")
        if _steps_differ(keep, other):
            # The views count different steps (a profiler window vs the whole run): a warning that says
            # which steps each holds and what each measures over the shared ones (issue 33).
            ch.warn.append(line + "; " + views_note(keep, other))
        else:
            ch.info.append(line)
    ch.warn.extend(notes)
    # Step windows without a draw are not counted; export's steps track shows them: said where counted.
    rank_logs = [a for a in parts if a.tl.fmt == "overlay-log" and a not in keep]
    if (note := drawless_note(who, keep, rank_logs)) is not None:
        ch.warn.append(note)
    return keep


def _rank_result(rank: int, parts: list[TimelineAnalysis], run: str | None, only_wait: int | None,
                 unused_logs: list[TimelineAnalysis]) -> tuple[RankResult, StepTable]:
    """One rank's roll-up and its step rows; ``only_wait``: its wait known per rank only (else None)."""
    wait_known = any(a.wait_measured for a in parts) or only_wait is not None
    fwd_known = any(a.forward_measured for a in parts)
    steps = concat([step_table(a, run, wait=wait_known, forward=fwd_known) for a in parts])
    steps = steps.take(np.lexsort((steps.step, steps.start)))  # by start, then step id (-1: outside any step)
    tot = int(sum(int(a.total.sum()) for a in parts))
    hid = int(sum(int(a.hidden.sum()) for a in parts))
    # Totals over the steps steps[] holds (those with a draw), as the per-step figures beside them: a
    # drawless window's forward or wait (switchback's off blocks, an empty step) is in neither.
    wait = _counted_wait(parts, steps) + (only_wait or 0) if wait_known else None
    fwd = int(steps.forward.sum()) if fwd_known else None
    wall = int(sum(a.wall for a in parts))
    wall_hid = int(sum(a.wall_hidden for a in parts))
    result = RankResult(
        recording=run,
        rank=rank,
        backend=parts[0].tl.backend,
        fmt=parts[0].tl.fmt,
        fmt_version=parts[0].tl.meta.get("fmt_version"),
        sources=[a.tl.source for a in parts],
        rule=_rule(parts),
        forward_source=parts[0].forward_source,
        step_count=int(steps.numbered.sum()),
        names=_names(parts),
        instances=int(sum(len(a) for a in parts)),
        total_ns=tot,
        hidden_ns=hid,
        exposed_ns=tot - hid,
        hidden_fraction=fraction(hid, tot),
        forward_ns=fwd,
        wait_ns=wait,
        critical_ns=int(steps.critical.sum()) + (only_wait or 0),
        wait_source=(wait_source(parts) or "log window") if wait_known else None,
        wall_ns=wall,
        wall_hidden_ns=wall_hid,
        wall_hidden_fraction=fraction(wall_hid, wall),
        per_instance=_instance_dists(parts),
        per_step=step_dists(steps if steps.numbered.any() else empty_table()),
        step_breakdown=step_breakdown(steps, parts, unused_logs),
    )
    return result, steps


def _summary(ranks: list[RankResult], steps: StepTable, used: list[TimelineAnalysis],
             unused_logs: list[TimelineAnalysis]) -> Summary:
    """The recording's roll-up over its ranks (totals add up rank-time; per-step figures pool rank-steps)."""
    tot = sum(r.total_ns for r in ranks)
    hid = sum(r.hidden_ns for r in ranks)
    if len(ranks) == 1:  # the rank's steps, analyses and logs are the recording's: its figures are these
        per_instance, per_step, breakdown = ranks[0].per_instance, ranks[0].per_step, ranks[0].step_breakdown
    else:
        per_instance = _instance_dists(used)
        per_step = step_dists(steps if steps.numbered.any() else empty_table())
        breakdown = step_breakdown(steps, used, unused_logs)
    return Summary(
        ranks=len(ranks),
        rank_steps=sum(r.step_count for r in ranks),
        instances=sum(r.instances for r in ranks),
        total_ns=tot,
        hidden_ns=hid,
        exposed_ns=tot - hid,
        hidden_fraction=fraction(hid, tot),
        forward_ns=_opt_sum(r.forward_ns for r in ranks),
        wait_ns=_opt_sum(r.wait_ns for r in ranks),
        critical_ns=sum(r.critical_ns for r in ranks),
        wait_source=joined_sources(r.wait_source for r in ranks),
        wall_ns=sum(r.wall_ns for r in ranks),
        wall_hidden_ns=sum(r.wall_hidden_ns for r in ranks),
        wall_hidden_fraction=fraction(sum(r.wall_hidden_ns for r in ranks), sum(r.wall_ns for r in ranks)),
        per_instance=per_instance,
        per_step=per_step,
        forward_source=common_forward_source(r.forward_source for r in ranks),
        step_breakdown=breakdown,
    )


def _rule(parts: list[TimelineAnalysis]) -> str:
    rules = sorted({r for a in parts for r in a.inst.rules} or {parts[0].inst.rule})
    return "+".join(rules)


def _source_left_nothing(analyses: Sequence[TimelineAnalysis], source: str) -> NothingFound | None:
    """The error when ``--source`` excluded every input that held instances (the cause to name, not ``--op``)."""
    if source == "auto":
        return None
    logs = [a for a in analyses if a.tl.fmt == "overlay-log"]
    others = [a for a in analyses if a.tl.fmt != "overlay-log"]
    chosen, other = (logs, others) if source == "overlay-log" else (others, logs)
    n_other = sum(len(a) for a in other)
    if any(len(a) for a in chosen) or not n_other:
        return None
    if source == "overlay-log":
        what = "no overlay event log" if not logs else "the overlay event logs hold no draw"
        msg = f"--source overlay-log: {what} among the inputs (expo-prof-events-*.jsonl, where EXPO_PROF_OUT points)"
    else:
        msg = "--source trace: no profiler trace among the inputs holds a draw"
    return NothingFound(msg, details=[f"the other inputs hold {plural(n_other, 'instance')}: leave out --source "
                                      "(auto), or add the inputs it names"])


#: What to try when a trace holds no draw: each is a common reason (docs/trace-formats.md).
NEXT_STEP = ("next: a draw under another name? --op NAME. Greedy sampling (temperature 0) draws no noise at all: "
             "profile with temperature > 0. Under CUDA graphs the profiler does not see the kernels inside a "
             "graph: profile with --enforce-eager")


def _nothing_found(timelines: Sequence[Timeline], op: str | None, pattern: re.Pattern | None) -> NothingFound:
    """The error for inputs without a target instance: one short line, and the details as a short list."""
    n_events = sum(event_count(t) for t in timelines)
    looked = f"--op {op!r}" if op is not None else "; ".join(LOOKED_FOR)
    similar = similar_names(list(timelines), pattern)
    msg = f"no target instance found in {plural(len(timelines), 'timeline')} ({plural(n_events, 'event')})"
    details = [f"looked for: {looked}"]
    if similar:
        shown = ", ".join(repr(s if len(s) <= 120 else s[:117] + "...") for s in similar)
        details.append(f"similar names present: {shown} (try --op REGEX)")
    elif op is None:
        details.append("no similar names (random/uniform/exponential/rand/gumbel/sampl) present")
        details.append(NEXT_STEP)
    else:
        details.append("no similar names present")
    return NothingFound(msg, details=details)
