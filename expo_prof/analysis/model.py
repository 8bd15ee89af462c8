"""The result data model of ``expo-prof analyze``: what every reporter renders.

Plain :mod:`msgspec` Structs, so the JSON reporter encodes them directly and
the schema in ``docs/json-output.md`` is this file. Bump :data:`SCHEMA` on any
incompatible change (a removed or renamed key, a changed meaning or unit);
adding keys is compatible.
"""

from __future__ import annotations

import msgspec

from expo_prof.analysis.saving.arrival import SwitchbackArrival
from expo_prof.analysis.bound import SamplingBound
from expo_prof.analysis.saving.natural import Natural
from expo_prof.analysis.saving.switchback import Saving
from expo_prof.analysis.saving.spread import Spread

#: Version of the ``analyze --json`` schema (docs/json-output.md).
SCHEMA = 2
SCHEMA_NAME = "expo-prof.analyze"


class Dist(msgspec.Struct, kw_only=True):
    """Distribution of one quantity (ns) over ``n`` values: mean, nearest-rank p50/p99, max."""

    n: int
    mean: float
    p50: int
    p99: int
    max: int


class Totals(msgspec.Struct, kw_only=True):
    """Sums over a set of instances (a step, a rank, the run)."""

    instances: int
    total_ns: int
    hidden_ns: int
    exposed_ns: int
    #: hidden_ns / total_ns; null when total_ns == 0.
    hidden_fraction: float | None
    #: Forward-pass time; null when the inputs hold nothing to measure it by.
    forward_ns: int | None
    #: The sampler's wait for q (overlay spans or event log); null when not measured (a plain trace).
    wait_ns: int | None
    #: What the noise costs the critical path: exposed_ns + wait_ns (exposed_ns alone when no wait was
    #: measured). Overlap is not saving: a hidden draw the sampler still waits for is paid here.
    critical_ns: int = 0


class StepResult(Totals, kw_only=True):
    #: The run this step belongs to (run directory, else input PATH); null when the result holds one run.
    run: str | None = None
    rank: int
    #: Step id (ProfilerStep#N → N, vLLM step annotations → their order, overlay → its counter); null = outside any step.
    step: int | None
    source: str
    start_ns: int
    end_ns: int
    #: The step's own time: its start to the end of its last part (marker, draws, sampler wait; an overlay log's
    #: host_end), without the time between steps; null when the source has no step markers (Summary.step.missing).
    step_ns: int | None = None
    #: critical_ns / step_ns; null without a step time.
    critical_share: float | None = None
    #: The step's start to the next step's start (vLLM's time between steps included): what the step costs
    #: throughput, switchback's "step"; null for the last step, before an idle gap, or without step markers.
    cadence_ns: int | None = None
    #: "prefill" (a request in its prompt, mixed batches included) or "decode"; null when the source cannot tell.
    kind: str | None = None
    #: Requests in the batch, and the tokens the forward computed; null when the source does not say.
    reqs: int | None = None
    tokens: int | None = None
    #: Shape (rows × vocab) and dtype of the q the step launched (the overlay event log); null otherwise.
    q_rows: int | None = None
    q_vocab: int | None = None
    q_dtype: str | None = None


class StepGroup(msgspec.Struct, kw_only=True):
    """Step time and critical path over a set of steps (all, prefill, decode)."""

    steps: int
    #: Step time (StepResult.step_ns) over the steps that have one; null when none has.
    step_ns: Dist | None
    critical_ns: Dist
    #: Sum of critical_ns / sum of step_ns over the steps with a step time; null without one.
    critical_share: float | None
    #: Cadence (StepResult.cadence_ns) over the steps that have one; null when none has.
    cadence_ns: Dist | None = None


class QShape(msgspec.Struct, kw_only=True):
    """One shape and dtype of q, and how many steps launched it."""

    rows: int
    vocab: int
    dtype: str | None
    steps: int


class StepBreakdown(msgspec.Struct, kw_only=True):
    """The step itself (analysis/steps/facts.py): its time, the critical path's share of it, prefill and decode
    steps apart, the batch, and q."""

    overall: StepGroup
    #: Steps with a prompt request (mixed batches included), and pure decode steps; null when no step was told.
    prefill: StepGroup | None
    decode: StepGroup | None
    #: Requests per step (counts, not ns), over the steps whose source says; null when none does.
    batch: Dist | None
    #: Each q shape and dtype launched, most steps first (from the overlay event log); empty when not recorded.
    q: list[QShape]
    #: Where q's shapes were counted: "steps" (the counted steps' own), "overlay-log" (a trace counted: every step
    #: of the same rank's overlay log, which may hold more steps than the trace); null when q is not known.
    q_from: str | None = None
    #: How the step time was measured, in words; null when it was not.
    time_source: str | None
    #: Figure ("step time", "prefill / decode", "batch size", "q shape and dtype") -> why the source cannot give it.
    missing: dict[str, str]


class InstanceDists(msgspec.Struct, kw_only=True):
    """Per-instance distributions."""

    total_ns: Dist
    hidden_ns: Dist
    exposed_ns: Dist


class StepDists(msgspec.Struct, kw_only=True):
    """Per-step distributions (over the steps that hold at least one instance)."""

    total_ns: Dist
    hidden_ns: Dist
    exposed_ns: Dist
    #: Null when not measured (see Totals).
    forward_ns: Dist | None
    wait_ns: Dist | None
    #: exposed + wait per step (Totals.critical_ns): what each step pays for the noise.
    critical_ns: Dist | None = None


class WallTotals(Totals, kw_only=True):
    """Adds the union view: time during which at least one instance ran, and how much of it was hidden."""

    wall_ns: int
    wall_hidden_ns: int
    #: wall_hidden_ns / wall_ns; null when wall_ns == 0.
    wall_hidden_fraction: float | None


class RankResult(WallTotals, kw_only=True):
    #: The run of this rank (run directory, else input PATH); null when the result holds one run.
    run: str | None = None
    rank: int
    backend: str
    fmt: str
    #: The source's own version line where its reader knows it (an nsys export: product and schema version).
    fmt_version: str | None = None
    sources: list[str]
    #: Which recognition rule found the instances (see docs/json-output.md).
    rule: str
    #: Where forward_ns comes from: a span name, or "compute-busy".
    forward_source: str
    steps: int
    names: dict[str, int]
    per_instance: InstanceDists
    per_step: StepDists
    #: The step itself: time, critical share, prefill / decode, batch, q (StepBreakdown).
    step: StepBreakdown | None = None


class Summary(WallTotals, kw_only=True):
    ranks: int
    steps: int
    per_instance: InstanceDists
    per_step: StepDists
    #: Where forward_ns comes from: the ranks' forward_source when they agree, "mixed" when they differ (each
    #: rank's is in ranks[].forward_source). Null only in documents written before this key was added.
    forward_source: str | None = None
    #: The step itself over every rank's steps (StepBreakdown).
    step: StepBreakdown | None = None


class RunEntry(msgspec.Struct, kw_only=True):
    """One recording (one profile window of one job) of the inputs, with its own summary."""

    #: The recording's label (run directory, input PATH, or the folder/file its sources share).
    label: str
    #: The run directory or input PATH it was found under.
    path: str
    #: "on" / "off" as the run's manifest says; null for plain traces.
    overlay: str | None
    ranks: list[int]
    #: Same keys as the top-level summary; null when nothing was found in this recording.
    summary: Summary | None
    #: Why there is no summary (e.g. no target instance found).
    error: str | None = None
    #: The one-line headline every command prints: "N instances, H % hidden; on the critical path C/step (…)".
    headline: str
    #: The line every command prints under it: what the overlay saves (switchback), or that nothing measured it.
    saving_line: str = ""
    #: Switchback's measurement of what the overlay saves, per rank (expo_prof/analysis/saving/switchback.py).
    saving: list[Saving] = []
    #: The load the saving was measured under, in words (requests in flight or their rate, the mean batch of the
    #: compared steps, the host's load average during the run); "" without a saving.
    measured_under: str = ""
    #: The forward with and without the lane, from steps that launched nothing, per rank.
    natural: list[Natural] = []
    #: Where the instances are whole fused sampling kernels (MRV2, FlashInfer, vLLM CPU's fused ops): their time on
    #: the critical path per step and share of the step, the most any async draw could save (analysis/bound.py);
    #: with ``noise`` false (vllm-ascend's categorical_sample) that time is a sampling cost, nothing to save.
    bound: SamplingBound | None = None
    #: A switchback run's inter-token gaps by arm (each in the arm of the step running when its token arrived) and
    #: whether one arm's tokens arrive in bursts (expo_prof/analysis/saving/arrival.py); null when not measurable: no
    #: switchback log, no built-in load's workload.json that places its tokens on the wall clock.
    arrival: SwitchbackArrival | None = None


class ClusterStep(msgspec.Struct, kw_only=True):
    """One step across the ranks of a recording (expo_prof/analysis/cluster.py)."""

    step: int
    #: Ranks that have this step.
    ranks: int
    #: The rank with the most exposed time, and that time: what bounds a synchronous (TP/EP) step.
    slowest_rank: int
    max_exposed_ns: int
    median_exposed_ns: int
    min_exposed_ns: int
    #: max_exposed_ns - min_exposed_ns.
    skew_exposed_ns: int
    #: The longest forward pass of the step and its rank; null when no rank measured it.
    max_forward_ns: int | None
    slowest_forward_rank: int | None
    #: Ranks flagged by the straggler rule (ClusterView.rule) in this step.
    stragglers: list[int]
    #: Means over the step's ranks (ns): a per-step figure across ranks that run in parallel is their mean or
    #: their maximum, never their sum. Forward and wait over the ranks that measured them (null: none did).
    #: Null only in documents written before these keys were added.
    mean_hidden_ns: float | None = None
    mean_exposed_ns: float | None = None
    mean_forward_ns: float | None = None
    mean_wait_ns: float | None = None


class ClusterView(msgspec.Struct, kw_only=True):
    """One recording's ranks side by side (recordings with at least two ranks with numbered steps)."""

    #: The recording (as in steps[].run); null when the result holds one run.
    run: str | None = None
    ranks: list[int]
    steps: list[ClusterStep]
    #: The straggler rule, in words.
    rule: str
    #: Sum over steps of the slowest rank's exposed time, and of the ranks' mean exposed time.
    exposed_bound_ns: int
    exposed_mean_ns: int
    #: Sum over steps of the longest forward; null when not measured.
    forward_bound_ns: int | None
    #: Median and maximum over steps of skew_exposed_ns.
    skew_p50_ns: int
    skew_max_ns: int
    #: Rank (as a string) → number of steps that flagged it; ranks never flagged are left out.
    straggler_steps: dict[str, int]


class AnalysisResult(msgspec.Struct, kw_only=True):
    """Top level of ``analyze --json``."""

    schema: int = SCHEMA
    schema_name: str = SCHEMA_NAME
    tool_version: str
    op: str | None
    #: Which source counted where a rank has both a trace and an overlay log: auto | trace | overlay-log.
    source: str = "auto"
    inputs: list[str]
    #: The recording's summary when the inputs hold one recording; null with several (see runs).
    summary: Summary | None
    ranks: list[RankResult]
    steps: list[StepResult]
    #: One entry per recording, in input order.
    runs: list[RunEntry] = []
    warnings: list[str]
    #: What was read and chosen, in one line each (sources chosen, expo-prof's own files passed over).
    info: list[str] = []
    skipped: list[list[str]]
    #: The cluster view of each recording with several ranks (ClusterView); empty otherwise.
    cluster: list[ClusterView] = []


#: Version of the document ``compare RUN --json`` writes for a switchback run (docs/ab.md, "Switchback").
SWITCHBACK_SCHEMA = 1
SWITCHBACK_SCHEMA_NAME = "expo-prof.switchback"


SWITCHBACK_RUNS_SCHEMA_NAME = "expo-prof.switchback-runs"


class SwitchbackRun(msgspec.Struct, kw_only=True):
    """One run of ``compare RUN1 RUN2 …`` of switchback runs: its line and its savings per rank."""

    run: str
    saving_line: str
    saving: list[Saving]


class SwitchbackRuns(msgspec.Struct, kw_only=True):
    """Top level of ``compare RUN1 RUN2 … --json`` of switchback runs (``ab --switchback --repeat N --json``):
    each run's saving and the spread between them (expo_prof/analysis/saving/spread.py)."""

    schema: int = SWITCHBACK_SCHEMA
    schema_name: str = SWITCHBACK_RUNS_SCHEMA_NAME
    tool_version: str
    runs: list[SwitchbackRun]
    #: The spread line (analysis.spread.spread_words), and its figures; null with fewer than 2 measured runs.
    spread_line: str
    spread: Spread | None
    warnings: list[str]


class SwitchbackResult(msgspec.Struct, kw_only=True):
    """Top level of ``compare RUN --json`` (and ``ab --switchback --json``) for a switchback run."""

    schema: int = SWITCHBACK_SCHEMA
    schema_name: str = SWITCHBACK_SCHEMA_NAME
    tool_version: str
    #: The run directory.
    run: str
    #: The one line every command prints for it (RunEntry.saving_line).
    saving_line: str
    #: Per rank: what the overlay saves (switchback), and the forward with / without the lane.
    saving: list[Saving]
    natural: list[Natural]
    #: The arms' token gaps (RunEntry.arrival); null when not measurable.
    arrival: SwitchbackArrival | None = None
    warnings: list[str]
