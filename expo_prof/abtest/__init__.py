"""A/B triage: does the async exponential overlay help *this* model on *this* machine?

Pipeline (each step a module, pure functions except the loaders):

* :mod:`~expo_prof.abtest.inputs` — runs of each side from run / session
  directories, ``vllm bench serve`` result files, CSV / JSON tables;
* :mod:`~expo_prof.abtest.workloads` — refuse to compare different workloads;
* :mod:`~expo_prof.stats` — t and permutation tests, confidence
  intervals, runs needed (numpy only: no scipy at run time);
* :mod:`~expo_prof.abtest.flags` — warm-up and outlier runs;
* :mod:`~expo_prof.abtest.judge` — per-metric comparison and the verdict;
* :mod:`~expo_prof.abtest.mechanism` — *why*: exponential time hidden per step
  versus forward-pass slowdown under overlap;
* reporters: :mod:`~expo_prof.abtest.report_table` (rich),
  :mod:`~expo_prof.abtest.report_json`, :mod:`~expo_prof.abtest.report_html`.

The method is documented in ``docs/ab.md``.
"""

from expo_prof.abtest.judge import compare
from expo_prof.abtest.model import ComparisonResult

__all__ = ["ComparisonResult", "compare"]
