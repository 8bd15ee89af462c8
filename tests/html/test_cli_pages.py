"""The page commands from the command line: outputs, one-line errors, the output guard."""

from __future__ import annotations

import subprocess
import sys

import pytest
from html_helpers import page_data  # type: ignore[import-not-found]

from expo_prof.errors import EXIT_BAD_INPUT


def expo(*args, cwd=None):
    """The real CLI in a subprocess (what a user runs)."""
    code = "import sys; from expo_prof.cli.main import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_timeline_and_report_write_self_contained_pages(tmp_path, run_on):
    """GIVEN a recorded run WHEN timeline and report run THEN each writes one HTML file that references no
    external resource, with the data of the run inside."""
    for cmd in ("timeline", "report"):
        out = tmp_path / f"{cmd}.html"
        r = expo(cmd, str(run_on), "-o", str(out))
        assert r.returncode == 0, r.stderr
        html = out.read_text()
        assert "<script src" not in html and "<link" not in html and "<img" not in html
        assert "default-src 'none'" in html.split("</head>")[0].replace("&#x27;", "'")  # the browser enforces: no fetch
        d = page_data(html)
        assert d["kind"] == cmd


@pytest.mark.parametrize(
    "args, message",
    [
        (["timeline", "/no/such/run", "-o", "x.html"], "no such file or directory"),
        (["timeline", "README.md", "-o", "x.html"], "not a trace"),
        (["report", "{run}", "-o", "notes.md"], "ending in .html"),
        (["export", "{run}", "-o", "x.html"], "ending in .json"),
        (["timeline", "{run}", "-o", "x.html", "--op", "("], "not a valid regular expression"),
        (["timeline", "{run}", "-o", "x.html", "--max-bytes", "lots"], "--max-bytes"),
        (["timeline", "{session}", "-o", "x.html"], "draws one recording; the inputs hold 2"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, run_on, session_dir, args, message):
    """GIVEN bad input WHEN a page command runs THEN it exits 2 with one clear line on stderr and no traceback."""
    (tmp_path / "README.md").write_text("# not a trace\n")
    args = [a.format(run=run_on, session=session_dir) for a in args]
    r = expo(*args, cwd=tmp_path)
    assert r.returncode == EXIT_BAD_INPUT, r.stderr
    err = r.stderr.strip()
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1, err


def test_output_guard_never_overwrites_foreign_files(tmp_path, run_on):
    """GIVEN an existing file that expo-prof did not write (even one named .html, even mentioning expo-prof)
    WHEN a page is written over it THEN the command refuses (exit 2) and the file is unchanged;
    AND an earlier page of ours is replaced."""
    foreign = tmp_path / "notes.html"
    foreign.write_text("<!DOCTYPE html><p>expo-prof notes: keep me</p>")
    r = expo("report", str(run_on), "-o", str(foreign))
    assert r.returncode == EXIT_BAD_INPUT and "refusing to overwrite" in r.stderr
    assert foreign.read_text() == "<!DOCTYPE html><p>expo-prof notes: keep me</p>"
    ours = tmp_path / "report.html"
    assert expo("report", str(run_on), "-o", str(ours)).returncode == 0
    first = ours.stat().st_mtime_ns
    assert expo("report", str(run_on), "-o", str(ours)).returncode == 0
    assert ours.stat().st_mtime_ns >= first
    inp = run_on / "manifest.json"
    r = expo("export", str(run_on), "-o", str(inp))
    assert r.returncode == EXIT_BAD_INPUT and inp.read_text().startswith("{")
