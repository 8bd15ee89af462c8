"""Where the tests find what lives outside the repository (one definition for every test module).

``../shared/realtraces`` holds real public profiler outputs, shared between
checkouts and never copied into the repo. ``EXPO_PROF_REALTRACES`` points
elsewhere, for runs from a copy of the tree (``make mutate`` runs the tests
from ``mutants/``).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REALTRACES = Path(os.environ.get("EXPO_PROF_REALTRACES") or (REPO / ".." / "shared" / "realtraces")).resolve()
