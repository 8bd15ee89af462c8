"""A/B triage: does the async exponential overlay help *this* model on *this* machine?

Three sub-packages by role, the way a comparison runs (pure functions except the loaders):

* :mod:`~expo_prof.abtest.inputs` — the two sides: runs from run / session directories, ``vllm bench
  serve`` result files, CSV / JSON tables (:mod:`~expo_prof.abtest.inputs.loader`), which side is which,
  and the workload check;
* :mod:`~expo_prof.abtest.judging` — the judgement: per-metric comparison and the verdict
  (:mod:`~expo_prof.abtest.judging.judge`, :mod:`~expo_prof.abtest.judging.verdict`), warm-up and outlier
  runs (:mod:`~expo_prof.abtest.judging.flags`), which rows are one measure on both sides
  (:mod:`~expo_prof.abtest.judging.likeness`: a row whose sides time different things shows no change), and
  *why* (:mod:`~expo_prof.abtest.judging.mechanism`: exponential time hidden per step versus forward-pass
  slowdown under overlap). The statistics themselves
  are :mod:`expo_prof.stats` (t and permutation tests, confidence intervals, runs needed; numpy only, no
  scipy at run time), shared with switchback and verify;
* :mod:`~expo_prof.abtest.reporters` — the result for people and programs: rich tables
  (:mod:`~expo_prof.abtest.reporters.tables`), ``--json``
  (:mod:`~expo_prof.abtest.reporters.json_reporter`) and the HTML section of the report page and of
  ``compare --html`` (:mod:`~expo_prof.abtest.reporters.html_section`).

Shared by the three: :mod:`~expo_prof.abtest.metrics` (the metrics a comparison knows) and
:mod:`~expo_prof.abtest.model` (the result every reporter renders). :mod:`~expo_prof.abtest.from_pipeline`
runs the comparison on the recordings of a pipeline Result (the report's A/B section).

The method is documented in ``docs/ab.md``.
"""

from expo_prof.abtest.judging.judge import compare
from expo_prof.abtest.model import ComparisonResult

__all__ = ["ComparisonResult", "compare"]
