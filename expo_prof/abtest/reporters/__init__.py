"""A comparison's result for people and programs: each reporter renders one
:class:`~expo_prof.abtest.model.ComparisonResult` and computes nothing.

* :mod:`~expo_prof.abtest.reporters.tables` — rich tables and the verdict panel (``compare``, ``ab``);
* :mod:`~expo_prof.abtest.reporters.json_reporter` — ``compare --json`` (schema in docs/ab.md);
* :mod:`~expo_prof.abtest.reporters.html_section` — the A/B section of the report page, and the
  self-contained page of ``compare --html``.
"""
