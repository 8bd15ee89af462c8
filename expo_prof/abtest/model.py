"""The result model of ``expo-prof compare`` / ``ab``: what every reporter renders.

msgspec Structs, encoded as-is by ``--json``; ``docs/ab.md`` documents this
schema. Bump :data:`SCHEMA` on any incompatible change (a key removed or
renamed, a meaning or unit changed); adding keys is compatible.
"""

from __future__ import annotations

from typing import Any

import msgspec

from expo_prof.pipeline import arrival as _arrival

SCHEMA = 1
SCHEMA_NAME = "expo-prof.compare"

#: Verdict decisions (expo_prof/words.py: the same words for switchback's saving).
from expo_prof.words import ENABLE, INCONCLUSIVE, KEEP_OFF, NO_DIFFERENCE  # noqa: E402,F401

#: Per-metric outcomes.
BETTER = "better"
WORSE = "worse"
SAME = "no significant difference"
UNTESTABLE = "not testable"
MISSING = "missing"
#: The outcome of an ITL p50 / mean row whose significant change comes with a change in how tokens arrive
#: (:class:`TokenArrival`): several tokens reach the client together after a longer wait, which moves these
#: figures without any token coming sooner — neither better nor worse (judging/flags.py, docs/ab.md "Bursty
#: tokens").
BURSTS = "tokens arrive in bursts"
#: The outcome of a row whose two sides measure different things (a different forward source; a fused sampler's
#: time on one side, the draw's on the other: judging/likeness.py): each side's values, no change —
#: ``MetricResult.not_compared`` says why.
NOT_COMPARED = "not compared"


class Test(msgspec.Struct, kw_only=True):
    """One significance test of the mean difference B − A."""

    name: str
    statistic: float | None
    df: float | None = None
    p: float | None
    exact: bool | None = None
    arrangements: int | None = None
    #: Smallest p the test can give with these run counts (permutation tests).
    min_p: float | None = None


class SideStats(msgspec.Struct, kw_only=True):
    """One side of one metric: each run's value (null where the run lacks it) and their summary."""

    runs: list[str]
    values: list[float | None]
    #: Per run: "" or "warm-up" / "outlier" / "excluded" (left out by --drop-warmup / --drop-outliers).
    flags: list[str]
    n: int
    mean: float | None
    sd: float | None


class MetricResult(msgspec.Struct, kw_only=True):
    """The comparison of one metric."""

    name: str
    label: str
    unit: str
    better: str  # "higher" | "lower"
    mechanism: bool
    a: SideStats
    b: SideStats
    #: mean(B) − mean(A), both means over the runs that have the metric.
    diff: float | None
    #: 100 · diff / mean(A).
    change_pct: float | None
    ci_diff: list[float] | None
    #: The CI of diff divided by mean(A) (mean(A) taken as exact: see docs/ab.md).
    ci_pct: list[float] | None
    paired: bool
    pairs: int
    t_test: Test | None
    permutation: Test | None
    significant: bool | None
    outcome: str
    #: Runs per side (pairs) that would give 80% power at alpha for the observed effect; null when settled / unknown.
    runs_needed: int | None
    notes: list[str]
    #: The test that judged: "t" (the t-test, as a rule), "permutation" (zero variance: the t-test degenerates,
    #: only the permutation test can judge a difference), null when none could.
    decided_by: str | None = "t"
    #: Why the two sides are not one measure (e.g. "forward by vLLM execute_context step span (off) vs
    #: expo_prof::forward span (on)"), with the outcome NOT_COMPARED: diff, change_pct, the CIs, the tests,
    #: significant and runs_needed are then null, the sides' values kept; null when the sides are alike.
    not_compared: str | None = None


class Flag(msgspec.Struct, kw_only=True):
    """A run that stands out: the warm-up (first run far below the rest on both sides) or an outlier."""

    kind: str  # "warm-up" | "outlier"
    side: str
    run: str
    metric: str
    value: float
    #: Median of the side's other runs.
    reference: float
    #: Iglewicz–Hoaglin modified z-score against the reference runs.
    robust_z: float


class Sensitivity(msgspec.Struct, kw_only=True):
    """The primary metric re-judged with some runs left out (or put back)."""

    what: str  # e.g. "without warm-up runs"
    runs: list[str]
    metric: str
    change_pct: float | None
    ci_pct: list[float] | None
    p: float | None
    decision: str
    changes_verdict: bool
    statement: str


class Verdict(msgspec.Struct, kw_only=True):
    decision: str  # ENABLE | KEEP_OFF | NO_DIFFERENCE
    metric: str | None
    change_pct: float | None
    ci_pct: list[float] | None
    p: float | None
    test: str | None
    runs_per_side: list[int]
    runs_needed: int | None
    statement: str
    caveats: list[str]

    @property
    def reason(self) -> str:
        """The statement without its leading ``decision:`` — for a heading that already says the decision
        ("verdict: inconclusive" above "one run per side …", never "inconclusive — inconclusive: …")."""
        head = f"{self.decision}: "
        return self.statement[len(head):] if self.statement.startswith(head) else self.statement


#: How the mechanism's note that the runs' forward sources differ begins: the terminal leaves it out where the
#: statement's "no cause named: …" already says so (one fact, said once).
MIXED_SOURCES_NOTE = "forward time comes from different sources in these runs"


class ArrivalSide(_arrival.ArmGaps, kw_only=True):
    """How one side's tokens reach the client: its inter-token gaps (one per streamed chunk after the first),
    pooled over the measured requests of its runs that kept them (the shape: analysis/saving/arrival.py ``ArmGaps``,
    the one definition a switchback's arms use too)."""

    #: Runs of the side whose inputs kept their gaps (of ``runs_total``).
    runs: int
    runs_total: int


class TokenArrival(msgspec.Struct, kw_only=True):
    """Whether the two sides' tokens arrive alike, or one side's in bursts (judging/flags.py; docs/ab.md
    "Bursty tokens")."""

    #: Both sides kept enough inter-token gaps to judge (``min_gaps`` each); false: not measurable, nothing said.
    measured: bool
    #: The flag: one side's gaps changed shape (near-zero share up, or p50 down while p99 up); null when not measured.
    bursts: bool | None
    #: The side whose tokens arrive in bursts (null when none).
    bursty_side: str | None
    #: Which rule fired, in words, with the figures.
    reasons: list[str]
    #: The metrics not to be read as a speed-up or a slow-down while the flag stands (ITL p50, ITL mean).
    metrics: list[str]
    a: ArrivalSide | None
    b: ArrivalSide | None
    #: The rules' thresholds: near zero below this share of the side's mean gap; a rise of the near-zero share by
    #: more than ``share_rise`` (0.25 = 25 points); p50 falling and p99 rising each by more than ``shape_change``
    #: of the other side's; at least ``min_gaps`` gaps per side.
    near_zero_share_of_mean: float
    share_rise: float
    shape_change: float
    min_gaps: int
    statement: str


class Mechanism(msgspec.Struct, kw_only=True):
    """Why: exponential time the overlay hides per step vs how much the forward pass slowed under overlap."""

    available: bool
    #: Exposed exponential time per step removed by the overlay (µs).
    exp_removed_us: float | None
    #: "measured (off − on exposed)" or "estimated (on runs' hidden time)".
    removed_basis: str | None
    forward_off_us: float | None
    forward_on_us: float | None
    #: forward_on − forward_off (µs per step; positive = slower under overlap).
    forward_slowdown_us: float | None
    forward_slowdown_pct: float | None
    forward_slowdown_significant: bool | None
    #: exp_removed − forward_slowdown (µs per step; positive = the overlay should gain).
    net_us: float | None
    #: Change of the mean time per output token (µs), for comparison with net_us.
    tpot_change_us: float | None
    statement: str
    notes: list[str]
    #: What is missing to name a cause (e.g. the sides' forward time measured by different spans); null when
    #: the cause is named from like measures (or nothing is known either way).
    cause_missing: str | None = None
    #: Where the critical path fell but TPOT rose: how much the rest of the step grew (µs per step,
    #: ``tpot_change_us + exp_removed_us``); null otherwise.
    rest_change_us: float | None = None
    #: The sentence saying how a falling critical path and slower steps both hold; null when they do not meet.
    reconcile: str | None = None
    #: How each side's tokens reach the client, and the "tokens arrive in bursts" flag (null: not looked at).
    token_arrival: TokenArrival | None = None


class Design(msgspec.Struct, kw_only=True):
    paired: bool
    reason: str
    pairs: int
    alpha: float
    confidence: float
    excluded: list[str]


class SideInfo(msgspec.Struct, kw_only=True):
    name: str
    sources: list[str]
    runs: list[str]
    #: "off" / "on" as the side's run manifests (or session.json) record it; null for tables and result files.
    overlay: str | None = None


class ComparisonResult(msgspec.Struct, kw_only=True):
    """Top level of ``compare --json``."""

    schema: int = SCHEMA
    schema_name: str = SCHEMA_NAME
    tool_version: str
    a: SideInfo
    b: SideInfo
    design: Design
    workload: dict[str, Any]
    primary_metric: str | None
    verdict: Verdict
    metrics: list[MetricResult]
    flags: list[Flag]
    sensitivity: list[Sensitivity]
    mechanism: Mechanism
    warnings: list[str]
    #: The note when the sides were swapped to follow the run manifests (and --labels with them); null when the
    #: inputs were taken in the order given.
    reordered: str | None = None

    def __post_init__(self) -> None:
        """The verdict says no speed-up where the tokens only arrive differently: its caveats (written before
        the token-arrival check) call an ITL p50 / mean change significantly better or worse, which the flag
        withdraws — such a caveat is said as the change and the reason instead, and a verdict on one of those
        metrics (``--primary median_itl_ms``) carries the flag as a caveat. Idempotent (also runs on decoding)."""
        arrival = self.mechanism.token_arrival
        if arrival is None or not arrival.bursts:
            return
        flagged = [r.label for r in self.metrics if r.name in arrival.metrics]
        why = f"{BURSTS} on the {arrival.bursty_side} side, a change in how tokens arrive, not a speed-up"
        caveats = []
        for c in self.verdict.caveats:
            # verdict_of's words: "<label> is significantly better: <change> (95% CI …)"
            label = next((lb for lb in flagged if c.startswith(f"{lb} is significantly ")), None)
            if label is not None:
                change = c.split(": ", 1)[1] if ": " in c else ""
                c = f"{label} {change}: {why}" if change else f"{label}: {why}"
            caveats.append(c)
        primary = next((r for r in self.metrics if r.name == self.verdict.metric), None)
        if primary is not None and primary.name in arrival.metrics:
            head = f"{primary.label}: {why}"
            if head not in caveats:
                caveats.append(head)
        self.verdict.caveats = caveats
