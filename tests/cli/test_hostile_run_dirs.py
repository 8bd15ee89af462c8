"""Run and session directories that point outside themselves (issue 27): refused, or skipped, and never read.

GIVEN copies of the committed sample session (traces/samples/tiny-cpu-off-on) altered the way a directory
received from elsewhere could be — a session.json naming run folders through ``..``, by absolute path or through
a symbolic link out of the session; a run whose overlay log, workload.json or manifest.json is a symbolic link
out of the run; a FIFO among a run's traces — WHEN the real CLI reads them THEN a session or manifest that leads
out is one clear error line (exit 2), a data file that leads out is skipped with one warning line and the rest
analysed as if it were absent, and nothing outside is read (docs/cli.md, "What a run directory may name").
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
SAMPLE = REPO / "traces" / "samples" / "tiny-cpu-off-on"


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"})


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture
def session(tmp_path) -> Path:
    """A copy of the sample session (its analysis.json files removed: every figure comes from the traces), and
    beside it ``outside/`` holding a copy of its overlay-on run."""
    top = tmp_path / "session"
    shutil.copytree(SAMPLE, top)
    for a in top.glob("*/analysis.json"):
        a.unlink()
    (tmp_path / "outside").mkdir()
    shutil.copytree(top / "02-on", tmp_path / "outside" / "02-on")
    return top


def _name_run(session: Path, entry: str) -> None:
    raw = json.loads((session / "session.json").read_text())
    raw["runs"][1]["dir"] = entry
    (session / "session.json").write_text(json.dumps(raw))


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_session_naming_a_run_outside_it_is_refused(session, how):
    """GIVEN the session's overlay-on entry naming ../outside/02-on, its absolute path, or a folder 02-on that is a
    symbolic link to it WHEN analysed, compared or reported THEN one line refuses the session, exit 2 (before:
    the outside run was read and analysed as the session's own)."""
    outside = session.parent / "outside" / "02-on"
    if how == "dotdot":
        _name_run(session, "../outside/02-on")
        needle = "session.json run folder '../outside/02-on' is not a path inside it"
    elif how == "absolute":
        _name_run(session, str(outside))
        # the message shows a long path cut to 80 characters ("...") — tmp paths differ in length by runner
        shown = repr(str(outside)) if len(str(outside)) <= 80 else repr(str(outside)[:77] + "...")
        needle = f"session.json run folder {shown} is not a path inside it"
    else:
        shutil.rmtree(session / "02-on")
        (session / "02-on").symlink_to(outside, target_is_directory=True)
        needle = f"{session / '02-on'}: session.json run folder leads out of {session} (a symbolic link to {outside})"
    for args in (["analyze", str(session)], ["compare", str(session)],
                 ["report", str(session), "-o", str(session.parent / "r.html")]):
        one_line(cli(*args), needle)


def test_data_files_linking_out_of_a_run_are_skipped_and_never_read(session, tmp_path):
    """GIVEN the overlay-on run whose overlay log is a symbolic link to a copy outside, and whose workload.json is
    a symbolic link to an outside copy claiming 1000× the throughput WHEN analysed THEN the log is skipped with
    its reason and the figures are those of the run without that log; AND compare takes the run's throughput
    from its manifest, saying workload.json was left out (before: the outside log was read, and compare judged
    the outside workload.json's 626,364 tok/s)."""
    run = session / "02-on"
    bare = tmp_path / "bare-02-on"  # the same run with the log simply gone: what the analysis must equal
    shutil.copytree(run, bare)
    log = next((run / "overlay").glob("expo-prof-events-*.jsonl"))
    next((bare / "overlay").glob("expo-prof-events-*.jsonl")).unlink()
    ext = tmp_path / "outside" / "events.jsonl"
    shutil.move(log, ext)
    log.symlink_to(ext)
    wl = json.loads((run / "workload.json").read_text())
    true_tput = wl["metrics"]["output_throughput"]
    assert json.loads((run / "manifest.json").read_text())["metrics"]["output_throughput"] == true_tput
    wl["metrics"]["output_throughput"] = true_tput * 1000
    (tmp_path / "outside" / "workload.json").write_text(json.dumps(wl))
    (run / "workload.json").unlink()
    (run / "workload.json").symlink_to(tmp_path / "outside" / "workload.json")

    got = cli("analyze", str(run), "--json")
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    why = f"a symbolic link leading out of {run} (to {ext}): not followed"
    why_wl = f"a symbolic link leading out of {run} (to {tmp_path / 'outside' / 'workload.json'}): not followed"
    assert doc["skipped"] == [[str(run / "workload.json"), why_wl], [str(log), why]]  # walk order: the run's top first
    assert f"warning: skipped {log}: {why}" in got.stderr
    ref = json.loads(cli("analyze", str(bare), "--json").stdout)
    def where_free(steps: list[dict]) -> list[dict]:
        return [{k: v for k, v in st.items() if k != "source"} for st in steps]

    assert doc["summary"] == ref["summary"] and where_free(doc["steps"]) == where_free(ref["steps"])

    cmp = cli("compare", str(session / "01-off"), str(run), "--json")
    assert cmp.returncode == 0, cmp.stderr
    out = json.loads(cmp.stdout)
    tput = {m["name"]: m for m in out["metrics"]}["output_throughput"]
    assert tput["b"]["values"] == [true_tput]
    assert (f"{run / 'workload.json'}: workload.json leads out of {run} (a symbolic link to "
            f"{tmp_path / 'outside' / 'workload.json'}); not followed; left out") in out["warnings"]


def test_a_manifest_linking_out_of_its_run_is_never_read(session, tmp_path):
    """GIVEN the overlay-on run whose manifest.json is a symbolic link to a copy outside WHEN compared THEN one line
    refuses the run (its side is what the manifest says: compare cannot go on without it); AND analyze skips the
    link with a warning and analyses the traces as a plain recording (no overlay state: the manifest was not
    read) (before: the outside manifest was read as the run's own, side and all)."""
    run = session / "02-on"
    ext = tmp_path / "outside" / "manifest.json"
    shutil.move(run / "manifest.json", ext)
    (run / "manifest.json").symlink_to(ext)
    one_line(cli("compare", str(session / "01-off"), str(run)),
             f"{run / 'manifest.json'}: its manifest leads out of {run} (a symbolic link to {ext}); not followed")
    got = cli("analyze", str(run), "--json")
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert [str(run / "manifest.json"), f"a symbolic link leading out of {run} (to {ext}): not followed"] in doc["skipped"]
    assert [r["overlay"] for r in doc["recordings"]] == [None] and doc["summary"]["instances"] > 0


def test_a_fifo_among_the_traces_is_not_opened(session):
    """GIVEN a FIFO named like an overlay event log among the run's traces (nothing ever writes to it) WHEN the run
    is analysed THEN it is skipped with its reason and the rest analysed, in seconds (before: the read blocked
    forever); AND a FIFO given as the input is one line, exit 2."""
    fifo = session / "02-on" / "overlay" / "expo-prof-events-host-9.jsonl"
    os.mkfifo(fifo)
    got = cli("analyze", str(session / "02-on"), "--json", timeout=60)
    assert got.returncode == 0, got.stderr
    assert [str(fifo), "not a regular file (a FIFO, socket or device): not read; save it to a file first"] in \
        json.loads(got.stdout)["skipped"]
    one_line(cli("analyze", str(fifo), timeout=60), f"{fifo}: not a regular file")
    one_line(cli("compare", str(fifo), str(session / "01-off"), timeout=60), f"{fifo}: not a regular file or directory")
