"""The result data model of ``expo-prof analyze``: what every reporter renders.

Plain :mod:`msgspec` Structs, so the JSON reporter encodes them directly and
the schema in ``docs/json-output.md`` is this file: every struct of the ``analyze``, switchback and
switchback-runs documents lives here, and computing modules import them (this module imports nothing of
expo_prof, so no import circle can pass through it). Bump :data:`SCHEMA` on any
incompatible change (a removed or renamed key, a changed meaning or unit);
adding keys is compatible.
"""

from __future__ import annotations

import msgspec


#: Version of the ``analyze --json`` schema (docs/json-output.md).
SCHEMA = 3
SCHEMA_NAME = "expo-prof.analyze"


#: The confidence sequence's method, level and defaults (analysis/saving/sequential.py computes with them; the
#: schema names them as the defaults of :class:`Sequence` and :class:`SequentialSpec`).
SEQUENCE_METHOD = "asymptotic confidence sequence (Waudby-Smith et al. 2024)"
SEQUENCE_ALPHA = 0.05
DEFAULT_OPTIMAL_PAIRS = 50
DEFAULT_MARGIN_SHARE = 0.01


class Dist(msgspec.Struct, kw_only=True):
    """Distribution of one quantity (ns) over ``n`` values: mean, nearest-rank p50/p99, max."""

    n: int
    mean: float
    p50: int
    p99: int
    max: int


class Totals(msgspec.Struct):
    """Sums over a set of instances (a step, a rank, the run).

    Not ``kw_only``, and no field has a default: a step's row (:class:`StepResult`) is then built positionally,
    six times faster than by keyword, which a long run's tens of thousands of rows feel (issue 41). Its
    subclasses' own fields stay keyword-only; every field keeps its place in the JSON document."""

    instances: int
    total_ns: int
    hidden_ns: int
    exposed_ns: int
    #: hidden_ns / total_ns; null when total_ns == 0.
    hidden_fraction: float | None
    #: Forward-pass time; null when the inputs hold nothing to measure it by.
    forward_ns: int | None
    #: The sampler's wait for q, by ``wait_source``; null when not measured (a plain trace).
    wait_ns: int | None
    #: What the noise costs the critical path (docs/glossary.md, "critical path"): the union of the exposed
    #: draw and the sampler's wait where both come from one source; their sum where the wait comes from another
    #: (an overlay log's windows mapped onto a trace cannot be overlapped with the trace's draws); exposed_ns
    #: alone when no wait was measured. Overlap is not saving: a hidden draw the sampler still waits for is paid.
    critical_ns: int
    #: Which source measured wait_ns: "span" (the trace's expo_prof::wait spans), "log window" (the overlay
    #: event log's wait windows), "span+log window" (a sum over both); null when no wait was measured.
    wait_source: str | None


class StepResult(Totals, gc=False):
    """One step of one rank (a row of the document's ``steps``), its fields in the document's order, built
    positionally (analysis/steps/table.py, ``step_rows``). Untracked by the garbage collector (``gc=False``):
    its fields are numbers, strings and None, so it can hold no cycle, and a long run's tens of thousands of
    rows made no collection pass over them (a quarter of building them, issue 41)."""

    #: The recording this step belongs to (its label, RecordingEntry.label); null when the result holds one.
    recording: str | None
    rank: int
    #: Step id (ProfilerStep#N → N, vLLM step annotations → their order, overlay → its counter); null = outside any step.
    step: int | None
    source: str
    start_ns: int
    end_ns: int
    #: The step's own time: its start to the end of its last part (marker, draws, sampler wait; an overlay log's
    #: host_end), without the time between steps; null when the source has no step markers
    #: (Summary.step_breakdown.missing).
    own_ns: int | None = None
    #: critical_ns / own_ns; null without an own time.
    critical_share: float | None = None
    #: The step's start to the next step's start (vLLM's time between steps included): what the step costs
    #: throughput, what switchback compares; null for the last step, before an idle gap, or without step markers.
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
    """Own time, cadence and critical path over a set of steps (all, prefill, decode)."""

    step_count: int
    #: Own time (StepResult.own_ns) over the steps that have one; null when none has.
    own_ns: Dist | None
    critical_ns: Dist
    #: Sum of critical_ns / sum of own_ns over the steps with an own time; null without one.
    critical_share: float | None
    #: Cadence (StepResult.cadence_ns) over the steps that have one; null when none has.
    cadence_ns: Dist | None = None


class QShape(msgspec.Struct, kw_only=True):
    """One shape and dtype of q, and how many steps launched it."""

    rows: int
    vocab: int
    dtype: str | None
    #: Steps that launched it.
    step_count: int


class StepBreakdown(msgspec.Struct, kw_only=True):
    """The step itself (analysis/steps/): its own time, cadence, the critical path's share of it, prefill and
    decode steps apart, the batch, and q."""

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
    #: How the own time was measured, in words; null when it was not.
    own_source: str | None
    #: Figure ("own time", "prefill / decode", "batch size", "q shape and dtype") -> why the source cannot give it.
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
    #: The critical path per step (Totals.critical_ns: exposed ∪ wait, docs/glossary.md): what each step pays for
    #: the noise. Null only in documents written before this key was added.
    critical_ns: Dist | None = None


class WallTotals(Totals, kw_only=True):
    """Adds the union view: time during which at least one instance ran, and how much of it was hidden."""

    wall_ns: int
    wall_hidden_ns: int
    #: wall_hidden_ns / wall_ns; null when wall_ns == 0.
    wall_hidden_fraction: float | None


class RankResult(WallTotals, kw_only=True):
    #: The recording of this rank (RecordingEntry.label); null when the result holds one.
    recording: str | None = None
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
    #: Numbered steps of this rank that hold a draw (the rows of steps[] with a step id).
    step_count: int
    names: dict[str, int]
    per_instance: InstanceDists
    per_step: StepDists
    #: The step itself: own time, cadence, critical share, prefill / decode, batch, q (StepBreakdown).
    step_breakdown: StepBreakdown | None = None


class Summary(WallTotals, kw_only=True):
    ranks: int
    #: Rank-steps: numbered steps summed over the ranks (a step of 4 ranks counts 4).
    rank_steps: int
    per_instance: InstanceDists
    per_step: StepDists
    #: Where forward_ns comes from: the ranks' forward_source when they agree, "mixed" when they differ (each
    #: rank's is in ranks[].forward_source). Null only in documents written before this key was added.
    forward_source: str | None = None
    #: The step itself over every rank's steps (StepBreakdown).
    step_breakdown: StepBreakdown | None = None


class RecordingEntry(msgspec.Struct, kw_only=True):
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
    #: Switchback's measurement of what the overlay saves, per rank and comparison (analysis/saving/switchback.py).
    savings: list[Saving] = []
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

    #: The recording (as in steps[].recording); null when the result holds one.
    recording: str | None = None
    ranks: list[int]
    steps: list[ClusterStep]
    #: The straggler rule, in words.
    straggler_rule: str
    #: Sum over steps of the slowest rank's exposed time, and of the ranks' mean exposed time.
    exposed_slowest_ns: int
    exposed_mean_ns: int
    #: Sum over steps of the longest forward; null when not measured.
    forward_slowest_ns: int | None
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
    recordings: list[RecordingEntry] = []
    warnings: list[str]
    #: What was read and chosen, in one line each (sources chosen, expo-prof's own files passed over).
    info: list[str] = []
    skipped: list[list[str]]
    #: The cluster view of each recording with several ranks (ClusterView); empty otherwise.
    cluster: list[ClusterView] = []


#: Version of the document ``compare RUN --json`` writes for a switchback run (docs/ab.md, "Switchback").
# ------------------------------------------------------------------------------------------------ the saving
class Sequence(msgspec.Struct, kw_only=True):
    """The confidence sequence on the per-step saving after ``pairs`` block pairs, and what it decides."""

    method: str = SEQUENCE_METHOD
    alpha: float
    #: Pairs the sequence is tightest at (``n*``) and the ρ² that gives it.
    optimal_pairs: int
    rho2: float
    #: Pairs seen, their mean difference (ns per step, positive: the overlay saves) and standard deviation.
    pairs: int
    mean_ns: float
    sd_ns: float | None
    #: The sequence's bounds after ``pairs``; null before MIN_PAIRS.
    lo_ns: float | None
    hi_ns: float | None
    #: ±margin (ns per step) of "no effect", and the share of the baseline's cadence it is.
    margin_ns: float
    margin_share: float | None
    #: enable / keep off / no effect beyond the margin / undecided (words.py): the first settling look's.
    decision: str
    #: The first number of pairs at which the sequence settled, the look that stops the run (null: not settled).
    settled_at: int | None
    #: Pairs still needed to settle, from the current mean and spread (null when settled, or beyond MAX_PAIRS).
    pairs_needed: int | None


class Interval(msgspec.Struct, kw_only=True):
    """A mean per-step difference (ns) with its 95 % confidence interval and the tests' p-values."""

    mean_ns: float
    ci_ns: list[float] | None
    #: Paired t-test and sign-flip permutation test of the pair differences; null with fewer than 2 pairs.
    t_p: float | None
    permutation_p: float | None
    significant: bool | None


class StepParts(msgspec.Struct, kw_only=True):
    """One arm's mean step (cadence) broken into its parts, weighted like the step itself (ns per step).

    ``cadence_ns`` = ``forward_ns`` + ``sampler_ns`` + ``rest_ns``: the sampler call includes its wait for ``q``
    (``log_wait_ns``, the overlay log's wait window, also shown alone); the rest is vLLM's host time outside both (scheduling, preparing the
    inputs, processing the outputs, between steps). Null parts: not measured in this arm's steps (the rest is
    then null too).
    """

    cadence_ns: float
    forward_ns: float | None
    sampler_ns: float | None
    log_wait_ns: float | None
    rest_ns: float | None


class Shape(msgspec.Struct, kw_only=True):
    """One batch shape (requests, forward tokens) of the compared steps."""

    reqs: int
    tokens: int
    #: Pairs in which both blocks ran this shape, and the steps compared on each side.
    pairs: int
    baseline_steps: int
    arm_steps: int
    #: Mean cadence of those steps in the baseline and in the arm.
    baseline_cadence_ns: float
    arm_cadence_ns: float


class Saving(msgspec.Struct, kw_only=True):
    """What the overlay saves per step on one rank, measured by switchback in one run."""

    method: str = "switchback"
    rank: int
    block_steps: int
    #: The run's arms (header ``arms``; ["off", "on"] for two-arm and older logs).
    arms: list[str] = msgspec.field(default_factory=lambda: ["off", "on"])
    #: [baseline, arm] of this comparison: the ``baseline_*`` fields below are the first's, the ``arm_*`` the
    #: second's (with three arms the baseline of on against native is native, not the off phase).
    compared: list[str] = msgspec.field(default_factory=lambda: ["off", "on"])
    #: Blocks seen (of the two compared arms), and pairs of blocks that could be compared (both with a shape in
    #: common; with three arms, the baseline's and the arm's block of one group).
    blocks: int
    pairs: int
    #: Steps compared (after washout, idle gaps and unmatched shapes), in the baseline and in the arm.
    baseline_steps: int
    arm_steps: int
    #: Step lines left out, by reason: outside_load (before or after the measured load: the warm-up),
    #: washout, idle, no_cadence (last step / a gap in the step numbers), unmatched_shape (its shape not in
    #: the other block of its pair), unpaired (its block has no partner).
    dropped: dict[str, int]
    #: Wall-clock (epoch ns) window the steps were taken from: the run's measured load (what its
    #: workload metrics cover); null = every step of the log.
    load_window_ns: list[int] | None = None
    #: Mean cadence of the compared steps, weighted like the differences.
    baseline_cadence_ns: float | None
    arm_cadence_ns: float | None
    #: baseline − arm per step: positive = the arm makes the step shorter (a saving), negative = it costs.
    saving: Interval | None
    #: Output tok/s change the saving implies (%, baseline / arm − 1), and its CI; a bound is null where it does
    #: not exist (a saving as large as the baseline's cadence would mean an arm step of zero time),
    #: ``tokps_ci_note`` says so.
    tokps_change_pct: float | None
    tokps_ci_pct: list[float | None] | None
    tokps_ci_note: str | None = None
    decision: str
    #: Steps (both phases together) that would give 80 % power at alpha 0.05 for the saving seen;
    #: null when settled, or when it would take more than 1000 pairs.
    steps_needed: int | None
    #: arm − baseline per step of the forward (contention with the lane), and of the sampler call (incl. the wait).
    forward_change: Interval | None
    sampler_change: Interval | None
    #: Mean sampler wait per compared arm step by the overlay log's wait window (ns); null when not measured.
    arm_log_wait_ns: float | None
    #: Each compared arm's mean step broken into forward, sampler (its wait included) and the rest, weighted as
    #: the cadence means are (``baseline_parts``, ``arm_parts``); their forward and sampler differences are
    #: ``forward_change`` and ``sampler_change`` (the same pairs, the same weights).
    baseline_parts: StepParts | None = None
    arm_parts: StepParts | None = None
    shapes: list[Shape]
    statement: str
    notes: list[str]
    #: Each usable pair's saving (baseline − arm, ns per step), in the order the pairs ran: what the paired
    #: tests and the confidence sequence read.
    pair_savings_ns: list[float] = msgspec.field(default_factory=list)
    #: A sequential run (``record --overlay switchback`` until settled): the confidence sequence on the saving
    #: and its decision, which is then ``decision`` (docs/ab.md, "Sequential switchback"); null for a run of a
    #: length fixed in advance, whose figure is the fixed-horizon ``saving`` CI.
    sequence: Sequence | None = None


class SequentialSpec(msgspec.Struct, kw_only=True, frozen=True):
    """How a sequential switchback decides (the run's manifest ``switchback``): its margin and level."""

    #: ±margin of "no effect": an absolute time (ns per step), else a share of the baseline's cadence.
    margin_ns: float | None = None
    margin_share: float = DEFAULT_MARGIN_SHARE
    alpha: float = SEQUENCE_ALPHA
    #: Pairs where the sequence is tightest.
    optimal_pairs: int = DEFAULT_OPTIMAL_PAIRS

    def margin_for(self, baseline_step_ns: float | None) -> tuple[float, float | None]:
        """(margin in ns per step, the share of the baseline's cadence it is) for a baseline step mean."""
        if self.margin_ns is not None:
            share = self.margin_ns / baseline_step_ns if baseline_step_ns else None
            return float(self.margin_ns), share
        return self.margin_share * float(baseline_step_ns or 0.0), self.margin_share


class Natural(msgspec.Struct, kw_only=True):
    """Forward time of steps that launched no ``q`` (the lane idle) against launched steps of the same shape."""

    rank: int
    #: Steps without a launch (all-greedy / all-seeded batches, or switchback off blocks) and with one.
    without_steps: int
    with_steps: int
    forward_without_ns: float | None
    forward_with_ns: float | None
    #: with − without (ns per step, matched by batch shape): the forward's slowdown beside the draw.
    slowdown: Interval | None
    #: Which steps count as "without": "no q launched (all greedy / all seeded / FlashInfer)" or "switchback off blocks".
    basis: str
    statement: str


class SamplingBound(msgspec.Struct, kw_only=True):
    """The fused sampling kernel's time on the critical path per step: the most an async draw could save (with
    ``noise``), else the sampling cost of a sampler that draws no noise, where nothing can be saved."""

    #: The recognition rule(s) that found the kernels (``RankResult.rule``: ``+``-joined when several).
    rule: str
    #: The engine and its kernel in words.
    engine: str
    #: "kernel" (device kernels) or "op" (CPU operators).
    what: str
    #: Whether the overlay can run on this engine, so ``expo-prof record --overlay switchback`` measures the saving.
    switchback: bool
    #: Mean over steps of the kernels' critical-path time (``summary.per_step.critical_ns.mean``: the headline's).
    critical_ns: float
    #: Mean own time of the numbered steps (``steps[].own_ns``, as the step table's), else of their windows
    #: (analysis/steps/means.py mean_own_ns); null when the trace has no step markers.
    own_ns: float | None
    #: critical_ns / own_ns: the share of the step the kernel holds; null without own_ns.
    share: float | None
    #: Whether any kernel found draws noise over the vocabulary, so critical_ns bounds what an async draw could
    #: save; false (vllm-ascend's categorical_sample: one uniform per row) makes critical_ns a sampling cost with
    #: nothing to save. Defaults to true: documents written before this field held only noise-drawing samplers.
    noise: bool = True


class RunSaving(msgspec.Struct, kw_only=True):
    """One run's saving as the spread sees it."""

    run: str
    decision: str
    mean_ns: float
    #: Fixed-horizon standard error (ns per step); null with fewer than 2 pairs.
    se_ns: float | None
    tokps_change_pct: float | None
    pairs: int


class Spread(msgspec.Struct, kw_only=True):
    """Several switchback runs of one configuration, side by side (module docstring)."""

    runs: list[RunSaving]
    #: Unweighted mean, standard deviation (ddof 1) and range of the runs' mean savings (ns per step).
    mean_ns: float
    sd_ns: float | None
    min_ns: float
    max_ns: float
    #: The same in output tok/s change (%), over the runs that have one.
    tokps_sd_pct: float | None
    tokps_range_pct: list[float] | None
    #: Cochran's Q over the runs with a standard error, its degrees of freedom, p-value and I² (null: < 2 such).
    cochran_q: float | None
    df: int
    p: float | None
    i2: float | None
    #: Whether the runs differ more than their intervals allow (p < ALPHA).
    differ: bool
    #: How many runs decided each way (enable / keep off / no effect … / undecided).
    decisions: dict[str, int]


class ArmGaps(msgspec.Struct, kw_only=True):
    """The shape of one side's (or one arm's) inter-token gaps."""

    #: The side or arm (``off`` / ``on`` / ``native`` in a switchback run).
    name: str
    gaps: int
    #: Mean gap (ms): the decode time per gap, which bursts leave as it is (the same tokens in the same time).
    mean_ms: float
    #: The near-zero threshold (ms): ``NEAR_ZERO_SHARE_OF_MEAN`` × ``mean_ms``.
    near_zero_ms: float
    #: Share of the gaps below ``near_zero_ms`` (0…1): tokens that came with the one before, no decode step between.
    near_zero_share: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    #: ``p99_ms / p50_ms``: how far the tail is from the typical gap; null when p50 is 0.
    tail_ratio: float | None


class BurstFlag(msgspec.Struct, kw_only=True):
    """One comparison of a switchback run in which one arm's tokens arrive in bursts."""

    #: The arm whose tokens arrive in bursts, and the arm it was compared with.
    arm: str
    against: str
    #: Which rule fired, with the figures.
    reasons: list[str]


class SwitchbackArrival(msgspec.Struct, kw_only=True):
    """A switchback run's inter-token gaps by arm (each gap in the arm of the step running when its token arrived),
    and the burst rule between the arms it compares (docs/ab.md, "Bursty tokens")."""

    #: Every compared arm kept at least ``min_gaps`` gaps in one comparison at least; false: not measurable.
    measured: bool
    #: Per arm with gaps, in the run's arm order.
    arms: list[ArmGaps]
    #: Gaps left out: their token arrived in no switchback step (before the first, after the last, in an idle
    #: gap), or in a block's first step (``washout``: that step holds the previous block's last gap).
    outside: int
    washout: int
    #: Whether one arm's tokens arrive in bursts (against the arm it is compared with); null when not measured.
    bursts: bool | None
    flags: list[BurstFlag]
    #: The finding in words (the flag's, "tokens arrive alike: …", or "not measurable: …").
    statement: str
    near_zero_share_of_mean: float
    share_rise: float
    shape_change: float
    min_gaps: int


SWITCHBACK_SCHEMA = 2
SWITCHBACK_SCHEMA_NAME = "expo-prof.switchback"


SWITCHBACK_RUNS_SCHEMA_NAME = "expo-prof.switchback-runs"


class SwitchbackRun(msgspec.Struct, kw_only=True):
    """One run of ``compare RUN1 RUN2 …`` of switchback runs: its line and its savings per rank."""

    run: str
    saving_line: str
    savings: list[Saving]


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
    #: The one line every command prints for it (RecordingEntry.saving_line).
    saving_line: str
    #: Per rank: what the overlay saves (switchback), and the forward with / without the lane.
    savings: list[Saving]
    natural: list[Natural]
    #: The arms' token gaps (RecordingEntry.arrival); null when not measurable.
    arrival: SwitchbackArrival | None = None
    warnings: list[str]
