"""What the pipeline returns: per recording, the analysis and what was counted; and the versioned document.

Every command renders from a :class:`Result`: ``analyze`` (tables, JSON),
``timeline`` / ``export`` (the counted analyses, drawn or annotated),
``report`` (per recording), ``record``'s summary and compare's mechanism. The
Python API (:func:`expo_prof.analyze`) returns it too, with numpy tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from expo_prof.analysis.model import SwitchbackArrival
from expo_prof.analysis.bound import noise_free, sampling_bound
from expo_prof.analysis.model import SamplingBound
from expo_prof.analysis.overlap.hidden import TimelineAnalysis
from expo_prof.analysis.model import AnalysisResult, Summary
from expo_prof.analysis.model import Natural
from expo_prof.analysis.model import Saving
from expo_prof.analysis.saving.words import saving_line_part
from expo_prof.pipeline.options import Options
from expo_prof.runs.recordings import Recording
from expo_prof.words import fmt_ns, plural


def headline(summary: Summary | None) -> str:
    """The one line every command prints for a recording.

    ``N instances, H % hidden; critical path C/step (exposed ∪ wait)`` — overlap (hidden) beside what each
    step still pays for the noise: the mean over steps of the exposed draw and the sampler's wait for q,
    time in both counted once (``Totals.critical_ns``). Without a measured wait: ``(exposed)``.
    """
    if summary is None:
        return "no instance found"
    frac = "–" if summary.hidden_fraction is None else f"{100 * summary.hidden_fraction:.1f} %"
    ps = summary.per_step
    waited = ps.wait_ns is not None and summary.wait_ns is not None
    what = "exposed ∪ wait" if waited else "exposed"
    # A per-step figure needs steps: a trace without step markers has instances but no step to divide them by.
    head = f"{plural(summary.instances, 'instance')}, {frac} hidden"
    if ps.critical_ns is None or not ps.critical_ns.n:
        return f"{head}; no steps, so no critical path per step ({what})"
    return f"{head}; critical path {fmt_ns(ps.critical_ns.mean)}/step ({what})"


#: What the saving line says where nothing measured it (names the command that does).
_UNMEASURED = "saving: not measured — overlap is not saving; "
#: The command that measures it (said only where the overlay can run).
SWITCHBACK_ADVICE = "`expo-prof record --overlay switchback -- CMD` measures it in one run (`expo-prof ab` over several)"
NOT_MEASURED = _UNMEASURED + SWITCHBACK_ADVICE


#: Where no overlay can run, so switchback cannot measure anything (the engine is named after it).
NO_SWITCHBACK = "saving: no switchback on this engine — "


#: Where the sampler draws no noise over the vocabulary: nothing for an async draw to take off the step.
NOTHING_TO_SAVE = "so no async draw can save anything"


def share_words(b: SamplingBound) -> str:
    """The kernel's share of the step, or why it is unknown."""
    return f"{100 * b.share:.1f} % of the step" if b.share is not None else "share of the step unknown: no step markers"


def bound_words(b: SamplingBound) -> str:
    """The bound in one clause: the sampling kernel's critical-path time per step and its share of the step."""
    words = (f"the sampling {b.what} holds the critical path {fmt_ns(b.critical_ns)}/step ({share_words(b)}): the "
             f"most any async draw could save, since the noise is only part of that {b.what}")
    if noise_free(b):
        # Kernels without noise count in the figure too: still an upper bound, never a tight one.
        words += "; it counts the kernels named above that draw no noise too, so it is a looser bound"
    return words


def cost_words(b: SamplingBound) -> str:
    """A noise-free sampler's figure in one clause: what sampling costs the step's critical path, and its share."""
    return f"sampling costs {fmt_ns(b.critical_ns)}/step on the critical path ({share_words(b)})"


def cost_line(b: SamplingBound) -> str:
    """The saving line of a sampler that draws no noise over the vocabulary (``b.noise`` false): nothing to save,
    the sampling cost, and where the exponential draw can be measured instead."""
    instead = "; ".join(k.instead for k in noise_free(b) if k.instead)
    tail = f" — {instead}" if instead else ""
    return f"{NO_SWITCHBACK}{b.engine}, {NOTHING_TO_SAVE}; {cost_words(b)}{tail}"


def measured_under(sv: Saving | None, manifest: dict | None) -> str:
    """The load a saving was measured under, in words: requests in flight or their rate, the batch the compared
    steps ran (mean requests), and the host's load average during the run (its manifest's ``switchback.stopped``).

    A switchback's interval holds for this load on this machine; another run under another load may measure
    another size (docs/ab.md, 'What an answer holds under'), which is why every answer names it.
    """
    if sv is None:
        return ""
    words = []
    m = manifest if isinstance(manifest, dict) else {}
    w = m.get("workload") or {}
    if w.get("builtin"):
        rate = w.get("request_rate")
        words.append(f"{w.get('max_concurrency') or w.get('num_prompts')} requests in flight"
                     + ("" if rate in (None, "inf") else f" at {rate} req/s"))
    elif w.get("load_cmd"):
        words.append("your load command")
    steps = sum(sh.baseline_steps + sh.arm_steps for sh in sv.shapes)
    if steps:
        words.append(f"batch {sum(sh.reqs * (sh.baseline_steps + sh.arm_steps) for sh in sv.shapes) / steps:.1f} requests "
                     "on average")
    stopped = (m.get("switchback") or {}).get("stopped") or {}
    la = stopped.get("loadavg")
    if isinstance(la, list) and len(la) == 3:
        words.append(f"host load average {la[0]:g}–{la[2]:g}")
    return ", ".join(words)


def saving_line(savings: list[Saving], op: str | None = None, bound: SamplingBound | None = None,
                under: str = "") -> str:
    """The line under the headline: what the overlay saves per step (switchback), or that nothing measured it.

    Empty for ``--op`` targets (the overlay is about the exponential draw). With several ranks the lowest
    rank's saving is said, naming it (each rank's is in the JSON and the tables). Where the instances are a
    fused sampling kernel (``bound``) the line states its bound; it names switchback only where the overlay
    can run on that engine, and otherwise says that no switchback exists there. Where that kernel draws no noise
    over the vocabulary (``bound.noise`` false) there is no bound: the line says nothing can be saved and gives
    the sampling cost (:func:`cost_line`). ``under``: the load it was measured under (:func:`measured_under`),
    said at the end of a measured saving.
    """
    if op is not None:
        return ""
    if not savings:
        if bound is None:
            return NOT_MEASURED
        if not bound.noise:
            return cost_line(bound)
        if not bound.switchback:
            return f"{NO_SWITCHBACK}{bound.engine}, where no overlay can run; {bound_words(bound)}"
        return f"{_UNMEASURED}{bound_words(bound)}; {SWITCHBACK_ADVICE}"
    first = [s for s in savings if s.rank == savings[0].rank]
    ranks = len({s.rank for s in savings})
    who = f", rank {first[0].rank} of {ranks}" if ranks > 1 else ""
    tail = f"; measured under {under}" if under else ""
    if len(first[0].arms) == 2:
        return f"saving (switchback{who}): " + saving_line_part(first[0]) + tail
    # Three arms: each comparison, baseline last ("on vs off: ...").
    return f"saving (switchback, {len(first[0].arms)} arms{who}): " + "; ".join(
        f"{s.compared[1]} vs {s.compared[0]}: {saving_line_part(s)}" for s in first) + tail


@dataclass
class RecordingResult:
    """One recording: what it is, its analysis (None when nothing was found in it) and what was counted."""

    recording: Recording
    analysis: AnalysisResult | None
    #: The per-Timeline analyses that were counted (one source per rank): what pages draw and exports annotate.
    parts: list[TimelineAnalysis] = field(default_factory=list)
    error: str | None = None
    #: Every Timeline grouped into the recording, counted or not (an overlay log read for the wait, another
    #: format of the same rank): what ``export`` writes out besides the counted parts.
    timelines: list = field(default_factory=list)
    #: What the overlay saves per rank (switchback runs), and the forward with / without the lane.
    savings: list[Saving] = field(default_factory=list)
    natural: list[Natural] = field(default_factory=list)
    #: A switchback run's inter-token gaps by arm (analysis/saving/arrival.py); None when not measurable.
    arrival: SwitchbackArrival | None = None

    @property
    def label(self) -> str:
        return self.recording.label

    @property
    def headline(self) -> str:
        return headline(self.analysis.summary if self.analysis is not None else None)

    @property
    def bound(self) -> SamplingBound | None:
        """The fused sampling kernel's bound (analysis/bound.py) when its instances are one; else None."""
        return sampling_bound(self.analysis)

    @property
    def measured_under(self) -> str:
        """The load the lowest rank's saving was measured under (:func:`measured_under`); "" without a saving."""
        man = self.recording.manifest
        return measured_under(self.savings[0] if self.savings else None, man.raw if man is not None else None)

    @property
    def saving_line(self) -> str:
        return saving_line(self.savings, self.analysis.op if self.analysis is not None else None, self.bound,
                           self.measured_under)

    @property
    def lines(self) -> list[str]:
        """The headline and the saving line: what every command prints for the recording."""
        return [line for line in (self.headline, self.saving_line) if line]


@dataclass
class Result:
    """The pipeline's result for some inputs and options (see the module docstring)."""

    options: Options
    inputs: list[str]
    recordings: list[RecordingResult]
    #: The versioned ``analyze --json`` document (docs/json-output.md).
    document: AnalysisResult
    #: Warnings gathered while reading and analysing (always shown).
    warnings: list[str] = field(default_factory=list)
    #: One line each on what was read and chosen (sources, expo-prof's own files passed over).
    info: list[str] = field(default_factory=list)

    @property
    def found(self) -> list[RecordingResult]:
        """The recordings in which instances were found."""
        return [r for r in self.recordings if r.analysis is not None]

    # -- tables for notebooks (numpy columns; pandas optional) ------------------------------

    def instances(self) -> dict[str, np.ndarray]:
        """One row per counted instance: recording, rank, step, start, total / hidden / exposed ns, name."""
        cols: dict[str, list[Any]] = {k: [] for k in ("recording", "rank", "step", "start_ns", "total_ns",
                                                      "hidden_ns", "exposed_ns", "name")}
        for rr in self.found:
            for a in rr.parts:
                n = len(a)
                cols["recording"] += [rr.label] * n
                cols["rank"] += [a.tl.rank] * n
                cols["step"].append(a.step)
                cols["start_ns"].append(a.inst.start)
                cols["total_ns"].append(a.total)
                cols["hidden_ns"].append(a.hidden)
                cols["exposed_ns"].append(a.exposed)
                cols["name"] += [a.tl.names[int(i)] for i in a.inst.name]
        out: dict[str, np.ndarray] = {}
        for k, v in cols.items():
            if k in ("recording", "name"):
                out[k] = np.array(v, dtype=object)
            elif k == "rank":
                out[k] = np.array(v, dtype=np.int64)
            else:
                out[k] = np.concatenate(v).astype(np.int64) if v else np.zeros(0, np.int64)
        return out

    def steps(self) -> dict[str, np.ndarray]:
        """One row per step with instances: the document's ``steps`` as columns (None → -1 for unmeasured)."""
        return _columns([(rr.label, s) for rr in self.found for s in rr.analysis.steps],  # type: ignore[union-attr]
                        ("rank", "step", "start_ns", "end_ns", "instances", "total_ns", "hidden_ns", "exposed_ns",
                         "forward_ns", "wait_ns"))

    def ranks(self) -> dict[str, np.ndarray]:
        """One row per rank: the document's ``ranks`` as columns."""
        return _columns([(rr.label, r) for rr in self.found for r in rr.analysis.ranks],  # type: ignore[union-attr]
                        ("rank", "instances", "total_ns", "hidden_ns", "exposed_ns", "forward_ns", "wait_ns",
                         "wall_ns", "wall_hidden_ns", "step_count"))

    def to_pandas(self, table: str = "steps") -> Any:
        """``table`` ("instances", "steps" or "ranks") as a pandas DataFrame (pandas is not a dependency)."""
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError("to_pandas() needs pandas (pip install pandas); the numpy tables need nothing") from None
        getter = {"instances": self.instances, "steps": self.steps, "ranks": self.ranks}.get(table)
        if getter is None:
            raise ValueError(f"table {table!r}: expected instances, steps or ranks")
        return pd.DataFrame(getter())


def _columns(rows: list[tuple[str, Any]], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {"recording": np.array([lab for lab, _ in rows], dtype=object)}
    for k in keys:
        vals = [getattr(r, k) for _, r in rows]
        out[k] = np.array([-1 if v is None else v for v in vals], dtype=np.int64)
    return out
