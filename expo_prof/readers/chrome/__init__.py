"""The Chrome-trace JSON reader (PyTorch profiler / Kineto, Ascend ``trace_view.json``, msprof ``msprof_*.json``).

:mod:`.reader` is the entry (:func:`~.reader.read_chrome_file`); it reads the
file through a small reused window (:mod:`.window`) while decoding it
(:mod:`.stream`), a chunk of the event array at a time (:mod:`.decode`), into
numpy column chunks (:mod:`.batch`) that are classified per file
(:mod:`.columns`). docs/trace-formats.md has the format and the speed notes.
"""
