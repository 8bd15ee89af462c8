"""Load the two sides of a comparison from whatever the user has.

Accepted for each side (several paths make a set):

* a run directory (``manifest.json``; metrics from ``workload.json``, the
  mechanism from ``analysis.json``);
* a directory of run directories or of result files (a *set*);
* a ``vllm bench serve --save-result`` JSON file, or JSON lines of them
  (``--append-result``);
* a CSV file or a JSON list of objects: one row per run, a column per metric.

A single argument may hold both sides: a session directory of ``expo-prof
ab`` / ``record --overlay both`` (its off and on runs, *paired* in run
order), or a table with a ``side`` / ``overlay`` column.

Which side is which comes from what the runs record, not from the argument
order: run directories' manifests (``"overlay": "off"`` / ``"on"``) and a
session's ``session.json``. Arguments given the other way round are swapped
(with a note); a side mixing off and on runs, a run directory recording no
usable state, a switchback run and the same run given twice are refused.
Tables and result files record nothing: they keep the argument order.

Modules, in the order a comparison reads its inputs:

* :mod:`~expo_prof.abtest.inputs.sides` — :class:`Run`, :class:`Side`, :class:`Loaded`: what the loaders
  produce and the judging consumes;
* :mod:`~expo_prof.abtest.inputs.run_dirs` — a run directory as one run;
* :mod:`~expo_prof.abtest.inputs.result_files` — result files and tables as runs;
* :mod:`~expo_prof.abtest.inputs.table_rows` — the rows of a plain table (CSV, JSON list) as runs;
* :mod:`~expo_prof.abtest.inputs.gaps` — the inter-token gaps a run kept (``workload.json``, ``vllm bench serve
  --save-detailed``), for the token-arrival check;
* :mod:`~expo_prof.abtest.inputs.loader` — both sides from the command line's paths (:func:`load`);
* :mod:`~expo_prof.abtest.inputs.workloads` — refuse to compare different workloads.
"""
