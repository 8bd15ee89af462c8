"""A run directory that `record` is still writing (issue 42, item 7): read as far as it is written, with one line
saying the recording is in progress (its manifest says so) — never that the worker "was killed".

GIVEN a copy of the committed switchback run (traces/samples/tiny-cpu-sequential) put back to how it looks while
`record` runs: the manifest as record writes it before its end (status ``ready`` or ``profiling``, ``ended`` and
``exit`` null; expo_prof/record/runner.py), no workload.json or analysis.json yet (record writes them at the end),
and the overlay's event log cut after its first 600 step lines — without a summary line (the worker writes it at
shutdown), optionally with half of the next line (the worker writing it as the log is read) — WHEN the real CLI
reads it THEN exit 0, exactly one warning line naming the run as in progress with the 600 step lines read, no
line saying "killed", and the figures of the same files read without the manifest. Before the fix the run got
"the worker was killed before it could write its summary (SIGKILL? …)" (or "killed while writing").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "traces" / "samples" / "tiny-cpu-sequential"
#: Step lines written so far (the sample has 1359).
WRITTEN = 600


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "COLUMNS": "1000"})


def warnings_of(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]


def _cut_log(lines: list[str], torn: bool, checkpoint: bool = False) -> str:
    """The event log's lines up to its WRITTEN-th step line, no summary line; ``torn``: then the first 100 bytes
    of the next step line (no newline); ``checkpoint``: with the checkpoint summary the writer adds while the
    process runs (``"final": false``, the sample's own, its counts those of the steps before it) after the
    first half of them."""
    out, steps, launched, used = [], 0, 0, 0
    (ckpt,) = [json.loads(ln) for ln in lines if json.loads(ln).get("final") is False]
    for ln in lines:
        obj = json.loads(ln)
        if obj["type"] == "summary":
            continue
        if obj["type"] == "step":
            if steps == WRITTEN:
                return "".join(out) + (ln[:100] if torn else "")
            if checkpoint and steps == WRITTEN // 2:
                out.append(json.dumps({**ckpt, "steps": steps, "launched": launched, "used": used}) + "\n")
            steps, launched, used = steps + 1, launched + (obj["launched"] is True), used + (obj["used"] is True)
        out.append(ln + "\n")
    raise AssertionError("the sample has fewer step lines than WRITTEN")


def live_run(top: Path, status: str, torn: bool, ended: bool = False, checkpoint: bool = False) -> Path:
    """``top/run``: the sample as `record` leaves it mid-run with manifest status ``status`` (``ended``: as it
    leaves it at its end instead, with that status)."""
    run = top / "run"
    shutil.copytree(SAMPLE, run, ignore=shutil.ignore_patterns("analysis.json", "workload.json"))
    (log,) = (run / "overlay").glob("expo-prof-events-*.jsonl")
    log.write_text(_cut_log(log.read_text().splitlines(), torn, checkpoint))
    m = json.loads((run / "manifest.json").read_text())
    for key in ("error", "overlay_summary", "metrics"):
        m.pop(key, None)
    m.update(status=status, ended=m["ended"] if ended else None, exit=m["exit"] if ended else None)
    (run / "manifest.json").write_text(json.dumps(m, indent=2))
    return run


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict:
    """`analyze --json` of the same files without a manifest (a plain folder ``run``: nothing says in progress)."""
    top = tmp_path_factory.mktemp("plain")
    run = live_run(top, "profiling", torn=False)
    (run / "manifest.json").unlink()
    proc = cli(top, "analyze", "run", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _in_progress_line(proc: subprocess.CompletedProcess, status: str) -> str:
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "killed" not in proc.stderr + proc.stdout, proc.stderr
    said = [w for w in warnings_of(proc) if "in progress" in w]
    assert len(said) == 1, proc.stderr
    assert said[0] == (f"warning: run: recording in progress (its manifest.json says {status!r}, not ended): read as "
                       f"far as written, {WRITTEN} step lines so far; analyse it again once `expo-prof record` has "
                       "ended"), said[0]
    return said[0]


@pytest.mark.parametrize(("status", "torn", "checkpoint"), [
    ("profiling", True, False), ("profiling", False, False), ("ready", True, False), ("profiling", False, True)])
def test_analyze_reads_a_run_being_recorded_as_far_as_written(tmp_path, plain, status, torn, checkpoint):
    """GIVEN the run mid-recording (status ``status``; the log's last line half written when ``torn``; a
    checkpoint summary half-way, step lines after it, when ``checkpoint``) WHEN
    `analyze run --json` THEN exit 0, one in-progress line with the 600 step lines read, nothing about a
    killed worker or an incomplete last line, and the ranks, steps and summary of the same log read as a plain
    folder without the manifest (the half line is not a step)."""
    run = live_run(tmp_path, status, torn, checkpoint=checkpoint)
    proc = cli(tmp_path, "analyze", "run", "--json")
    line = _in_progress_line(proc, status)
    assert "last line is incomplete" not in proc.stderr and "no summary line" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["warnings"][0] == line.removeprefix("warning: ")
    for key in ("summary", "ranks", "steps"):
        assert doc[key] == plain[key], key
    assert doc["summary"]["rank_steps"] > 0 and run.is_dir()


def test_report_says_in_progress_once(tmp_path):
    """GIVEN the run mid-profiling, its last line half written WHEN `report run -o r.html` THEN exit 0 and the
    same one in-progress line, no "killed"."""
    live_run(tmp_path, "profiling", torn=True)
    _in_progress_line(cli(tmp_path, "report", "run", "-o", "r.html"), "profiling")
    assert (tmp_path / "r.html").stat().st_size > 0


def test_a_run_that_ended_still_says_its_worker_was_killed(tmp_path):
    """GIVEN the same files but a manifest as record leaves it at its end (status ``interrupted``, ``ended``
    set) WHEN analysed THEN no in-progress line: the missing summary is the killed worker's, as before (the
    words depend on the manifest, not on the log alone)."""
    live_run(tmp_path, "interrupted", torn=True, ended=True)
    proc = cli(tmp_path, "analyze", "run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not [w for w in warnings_of(proc) if "in progress" in w]
    assert "the worker was killed while writing (its last line is cut)" in proc.stderr


def test_a_run_just_started_says_so_with_the_error(tmp_path):
    """GIVEN a run directory record has just created (status ``starting``, an empty overlay/ folder) WHEN
    analysed THEN the one in-progress line ("nothing usable is written yet"), then the usual one error line,
    exit 2 (no trace to read), no traceback."""
    run = live_run(tmp_path, "starting", torn=False)
    for f in (run / "overlay").iterdir():
        f.unlink()
    (run / "server.log").unlink()
    proc = cli(tmp_path, "analyze", "run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[0] == ("warning: run: recording in progress (its manifest.json says 'starting', not ended): nothing "
                        "usable is written yet; analyse it again once `expo-prof record` has ended"), lines
    assert len(lines) == 2 and lines[1].startswith("error: no recognisable trace in run"), lines
