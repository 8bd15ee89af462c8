"""The Ascend readers: kernel CSVs (:mod:`.kernel_csv`) and the profiler SQLite databases (:mod:`.profiler_db`).

Ascend's Chrome-trace JSON (``trace_view.json``, msprof ``msprof_*.json``) is
read by :mod:`expo_prof.readers.chrome`.
"""
