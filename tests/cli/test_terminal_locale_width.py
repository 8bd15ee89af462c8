"""Text for people in any terminal (issue 34, items 7 and 8): the real CLI in a subprocess, piped, with
``COLUMNS`` set or a non-UTF-8 locale."""

from __future__ import annotations

import re
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


FIGURE_BROKEN = re.compile(r"\d\n\s*(ns|µs|ms|s|%)\b")


def test_piped_at_80_columns_no_figure_or_command_breaks_and_no_line_ends_in_spaces():
    """GIVEN analyze's tables of the sample overlay-on run, piped, at COLUMNS=80
    WHEN they are printed
    THEN no line is wider than 80 or ends in a space, no figure is parted from its unit across a line break,
    and the suggested command ``expo-prof record --overlay switchback -- CMD`` stands whole on one line.
    Before the fix: "`expo-prof record --overlay ⏎switchback -- CMD`", and the table lines padded with spaces."""
    proc = cli("analyze", str(ON), env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert all(len(ln) <= 80 for ln in out.splitlines()), max(out.splitlines(), key=len)
    assert [ln for ln in out.splitlines() if ln.endswith(" ")] == []
    assert not FIGURE_BROKEN.search(out)
    assert "`expo-prof record --overlay switchback -- CMD`" in out


def test_at_60_columns_no_figure_is_cut():
    """GIVEN analyze's tables of the sample overlay-on run, piped, at COLUMNS=60 (too narrow for the
    distributions' seven columns even with their headers wrapped)
    WHEN they are printed
    THEN no cell is cut short ("…"): every figure of the 200-column output is there whole, in the same order
    (a table too wide for 60 columns is printed as wide as it needs — docs/cli.md: none is dropped).
    Before the fix: "268.4 …" in place of "268.4 µs"."""
    narrow = cli("analyze", str(ON), env={"COLUMNS": "60"}).stdout.decode()
    wide = cli("analyze", str(ON), env={"COLUMNS": "200"}).stdout.decode()
    assert "…" not in narrow
    figure = re.compile(r"\d[\d.,]* (?:ns|µs|ms|s)\b")
    assert figure.findall(narrow) == figure.findall(wide)
