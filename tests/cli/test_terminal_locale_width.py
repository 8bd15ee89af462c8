"""Text for people in any terminal (issue 34, items 7 and 8): the real CLI in a subprocess, piped, with
``COLUMNS`` set or a non-UTF-8 locale."""

from __future__ import annotations

import subprocess
import sys

from shared_paths import REPO

ON = REPO / "traces" / "samples" / "tiny-cpu-off-on" / "02-on"
BASE = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, timeout=120,
                          env={**BASE, **env})


def test_a_posix_locale_gets_ascii_units_not_a_traceback():
    """GIVEN the C/POSIX locale with Python's UTF-8 mode off (stdout's encoding is ASCII)
    WHEN analyze prints its tables for the sample overlay-on run
    THEN exit 0, no traceback, every byte of stdout and stderr is ASCII, and the units are written in ASCII
    (``us`` for microseconds, ``--`` for the dash of the table title).
    Before the fix: a UnicodeEncodeError traceback on the first ``—``, and exit 1 (the "nothing found" code)."""
    proc = cli("analyze", str(ON), env={"LC_ALL": "POSIX", "PYTHONUTF8": "0", "COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr.decode("ascii", "replace")
    out, err = proc.stdout.decode("ascii"), proc.stderr.decode("ascii")  # raises on any byte above 127
    assert "Traceback" not in err
    assert "Hidden vs exposed time -- exponential draw" in out
    assert " us/step" in out  # the headline: "critical path N us/step"
