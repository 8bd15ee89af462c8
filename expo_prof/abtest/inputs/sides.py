"""Runs and sides: what the loaders produce and the comparison consumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Run:
    """One measured run of one side."""

    #: Short name for tables ("01-off", "row 3", a file stem).
    label: str
    #: Where it came from (path, and row for tables).
    source: str
    #: Metric name → value (known metrics only; see expo_prof/abtest/metrics.py).
    values: dict[str, float]
    #: Workload descriptor (model, num_prompts, input_len …) for the mismatch check.
    workload: dict[str, Any] = field(default_factory=dict)
    #: Keys of ``workload`` derived from averages (compared with a tolerance).
    derived: set[str] = field(default_factory=set)
    #: Wall-clock start when known (orders runs of a set of directories).
    started: str | None = None
    #: Facts about the run worth a footnote (forward_source, analysis rule …).
    info: dict[str, Any] = field(default_factory=dict)
    #: A run directory's manifest; None for table rows and result files, which carry none. The overlay state
    #: it records decides the run's side (loader.orient).
    manifest: dict[str, Any] | None = None
    #: What was read, whatever the spelling: (device, inode) of the run directory or file, and the row within
    #: it ("" for a whole file). Two runs with the same identity are one run given twice.
    identity: tuple = ()
    #: Inter-token gaps (s) of the run's measured requests, pooled: one per streamed chunk after the first, as
    #: the built-in load (``workload.json`` ``requests[].itl_s``) and ``vllm bench serve --save-detailed``
    #: (``itls``) keep them. None when the input keeps no gaps (tables, older or summary-only files): the
    #: token-arrival check (judging/flags.py) is then not measurable.
    itl_s: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass
class Side:
    """The runs of one side (A = baseline / overlay off, B = candidate / overlay on), in run order."""

    name: str
    runs: list[Run] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    #: "off" / "on" as the runs' manifests (or session.json) record it; None when no input of the side says.
    overlay: str | None = None


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
    #: The one-line note when the sides (and --labels) were swapped to follow the manifests; None when taken as given.
    reordered: str | None = None
