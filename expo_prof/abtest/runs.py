"""Runs and sides: what the loaders produce and the comparison consumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Run:
    """One measured run of one side."""

    #: Short name for tables ("01-off", "row 3", a file stem).
    label: str
    #: Where it came from (path, and row for tables).
    source: str
    #: Metric name → value (known metrics only; see metrics.py).
    values: dict[str, float]
    #: Workload descriptor (model, num_prompts, input_len …) for the mismatch check.
    workload: dict[str, Any] = field(default_factory=dict)
    #: Keys of ``workload`` derived from averages (compared with a tolerance).
    derived: set[str] = field(default_factory=set)
    #: Wall-clock start when known (orders runs of a set of directories).
    started: str | None = None
    #: Facts about the run worth a footnote (forward_source, analysis rule …).
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Side:
    """The runs of one side (A = baseline / overlay off, B = candidate / overlay on), in run order."""

    name: str
    runs: list[Run] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


@dataclass
class Loaded:
    """Both sides, and how (or whether) their runs pair up."""

    a: Side
    b: Side
    #: Index pairs (into a.runs, b.runs) when the runs were interleaved or declared paired; None = unpaired.
    pairs: list[tuple[int, int]] | None
    #: Why the design is paired / unpaired (shown and saved).
    design_reason: str
    warnings: list[str] = field(default_factory=list)
