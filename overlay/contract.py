"""The contract between the in-engine overlay and the offline tool.

Stdlib only, no imports beyond it: both halves import this module, and nothing
else crosses between them. The event-log format itself is documented in
``docs/event-log.md``.
"""

from __future__ import annotations

#: Switch for the async exponential overlay: 0/1, true/false, on/off, yes/no.
ENV_SWITCH = "EXPO_PROF_ASYNC_EXPONENTIAL"
#: vllm-ascend's original name for the same switch, honoured as an alias.
ENV_SWITCH_ALIAS = "VLLM_ASCEND_ENABLE_ASYNC_EXPONENTIAL"
#: Directory the overlay writes its JSON-lines event logs into.
ENV_OUT = "EXPO_PROF_OUT"
#: 0 disables the per-step instrumentation (the overlay still runs).
ENV_INSTRUMENT = "EXPO_PROF_INSTRUMENT"
#: Size cap of one event-log file in MB (10**6 bytes; 0 = none). Past half of
#: it step lines are sampled, the skipped ones counted in the summary.
ENV_LOG_MAX_MB = "EXPO_PROF_LOG_MAX_MB"
#: Free-form run label copied into each log header (set by ``expo-prof record``).
ENV_RUN_ID = "EXPO_PROF_RUN_ID"

#: Version of the event-log schema written by the overlay. Bump on any
#: incompatible change; the reader refuses versions it does not know.
#: 2: switchback mode (``phase`` per step: steps of vLLM's own path are in
#: the log too), ``tokens``, the ``sample`` window and ``host_end``.
#: 3: three-arm switchback (header ``arms``; ``phase`` may be ``native``).
EVENT_LOG_SCHEMA = 3
#: File name pattern of the event logs inside ``EXPO_PROF_OUT``.
EVENT_LOG_GLOB = "expo-prof-events-*.jsonl"
#: Span names emitted as profiler annotations (record_function), so torch /
#: torch_npu traces carry the same windows as the event log.
SPAN_EXPONENTIAL = "expo_prof::exponential"
SPAN_FORWARD = "expo_prof::forward"
SPAN_WAIT = "expo_prof::wait"
#: The sampler call's window (event log only: never a profiler span, whose
#: time would count as compute covering the lane's draw).
SPAN_SAMPLE = "expo_prof::sample"

TRUE_WORDS = ("1", "true", "on", "yes")
#: The switch's third value: alternate blocks of steps between the overlay and
#: vLLM's own sampling path in one server run (docs/overlay.md, "Switchback").
MODE_SWITCHBACK = "switchback"
#: Steps per switchback block (an integer >= 2; default DEFAULT_SWITCHBACK_BLOCK).
ENV_SWITCHBACK_BLOCK = "EXPO_PROF_SWITCHBACK_BLOCK"
DEFAULT_SWITCHBACK_BLOCK = 8
#: ``phase`` of a step line: the overlay drew q (on), or vLLM's own path ran (off).
PHASE_ON = "on"
PHASE_OFF = "off"
#: Third switchback arm: the engine's own sampling path as shipped (vllm-ascend: its native
#: side-stream draw), beside ``off`` = the exponential drawn inline after the forward.
PHASE_NATIVE = "native"
#: Switchback arms: ``off,on`` (default; ``off`` = the engine as shipped) or ``off,on,native``
#: (``off`` = drawn inline on the compute stream / thread after the forward, ``native`` = as shipped).
ENV_SWITCHBACK_ARMS = "EXPO_PROF_SWITCHBACK_ARMS"
TWO_ARMS = (PHASE_OFF, PHASE_ON)
THREE_ARMS = (PHASE_OFF, PHASE_ON, PHASE_NATIVE)
FALSE_WORDS = ("0", "false", "off", "no", "")

#: Every ``fallback`` value a ``step`` line may carry (docs/event-log.md).
FALLBACK_REASONS = (
    "all_greedy",
    "all_seeded",
    "flashinfer",
    "rows_mismatch",
    "vocab_mismatch",
    "dtype_mismatch",
    "device_mismatch",
    "not_consumed",
    "no_pending",
    "rng_moved",
    "error",
)
#: ``notice`` codes written by the overlay.
NOTICE_NOT_APPLICABLE = "not_applicable"
NOTICE_DISABLED = "disabled"
NOTICE_LANE_ERROR = "lane_error"
NOTICE_PARTLY_APPLICABLE = "partly_applicable"
#: CPUs for the CPU lane's worker thread: ``auto`` (default: the CPUs not
#: used by the forward's pinned threads), ``inherit`` (no placement), or a
#: list such as ``1`` / ``2-3,6``.
ENV_LANE_CPUS = "EXPO_PROF_LANE_CPUS"
NOTICE_LANE_PLACEMENT = "lane_placement"
