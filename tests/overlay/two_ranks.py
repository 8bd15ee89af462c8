"""Run a rank script as two real processes that join on a free port of 127.0.0.1 (gloo), and wait for both.

Used by test_overlay_lockstep.py (tensor parallel) and test_overlay_pp_reserve.py (pipeline parallel).
Each rank gets ``--rank R --port P --out <tmp>/rankR.json --log-dir <tmp>/logR`` plus ``extra``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from shared_paths import REPO

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_ranks(script: str, tmp_path: Path, extra: Sequence[str] = ()) -> list[str]:
    """Start ranks 0 and 1 of ``script`` (in tests/overlay), wait for both; asserts both exit 0, returns their output."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")])}
    procs = []
    for rank in (0, 1):
        (tmp_path / f"log{rank}").mkdir()
        cmd = [sys.executable, str(HERE / script), "--rank", str(rank), "--port", str(port),
               "--out", str(tmp_path / f"rank{rank}.json"), "--log-dir", str(tmp_path / f"log{rank}"), *extra]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    return outputs
