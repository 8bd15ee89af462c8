"""Support code for the tests and the benchmarks (not shipped): imported as ``support.*`` with ``tests/`` on
``sys.path`` (pytest puts it there for ``tests/conftest.py``; bench scripts insert it themselves)."""
