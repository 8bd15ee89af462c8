"""The event log keeps its summary when the process is killed after its steps (issue 33, item 7).

vLLM without ``--shutdown-timeout`` sends the engine process SIGTERM and SIGKILL at once, so nothing at exit
runs. The overlay's writer thread writes a checkpoint summary (``"final": false``) once the steps stop; these
tests kill a real EventLog's process with SIGKILL after it wrote the real step lines of the committed switchback
sample, and read the file with the real reader.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

from shared_paths import REPO  # type: ignore[import-not-found]  (tests/ is on sys.path)

from expo_prof.readers.overlay_log import NO_SUMMARY, missing_summary, read_overlay_log
from expo_prof.timeline import overlay_log
from overlay.events import EventLog

SAMPLE_LOG = next((REPO / "traces/samples/tiny-cpu-switchback/overlay").glob("expo-prof-events-*.jsonl"))

#: The child: an EventLog writes the sample's step lines, waits ``idle`` seconds, then kills itself (SIGKILL).
CHILD = """
import json, os, signal, sys, time
from overlay.events import EventLog
out, sample, idle = sys.argv[1], sys.argv[2], float(sys.argv[3])
log = EventLog(out, max_bytes=0)
log.configure(backend="cpu", lane="cpu-thread", rank=0)
for line in open(sample):
    obj = json.loads(line)
    if obj["type"] == "step":
        log.step(obj)
log.drain(10)
time.sleep(idle)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _sample_steps() -> int:
    return sum(1 for line in SAMPLE_LOG.read_text().splitlines() if '"type":"step"' in line)


def _kill_after(tmp_path: Path, idle: float) -> Path:
    r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(SAMPLE_LOG), str(idle)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    (path,) = tmp_path.glob("expo-prof-events-*.jsonl")
    return path


def test_sigkill_after_the_steps_stop_keeps_a_summary(tmp_path):
    """GIVEN a process whose event log wrote the real switchback sample's step lines WHEN it is killed with
    SIGKILL a second after its last step (what vLLM's --shutdown-timeout 0 does to the engine) THEN its file
    still ends with a summary line — a checkpoint ("final": false) counting every step — and the reader reads
    its counts from it, with no "no summary line" warning."""
    path = _kill_after(tmp_path, idle=1.0)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    n = _sample_steps()
    assert lines[-1]["type"] == "summary" and lines[-1]["final"] is False, lines[-1]
    assert lines[-1]["steps"] == n == sum(o["type"] == "step" for o in lines)
    assert missing_summary(path) is None
    tl = read_overlay_log(path.read_bytes(), path)
    assert not [w for w in tl.warnings if NO_SUMMARY in w], tl.warnings
    assert overlay_log(tl).summary_from_file and overlay_log(tl).summary_final is False


def test_steps_after_the_last_checkpoint_are_said(tmp_path):
    """GIVEN the checkpoint log of the test above with more step lines appended after its summary (a worker killed
    while it still stepped) WHEN read THEN the stale checkpoint is not taken as the summary: one warning says the
    worker was killed that many step lines after its last checkpoint, and record's check says the same."""
    path = _kill_after(tmp_path, idle=1.0)
    steps = [line for line in SAMPLE_LOG.read_text().splitlines() if '"type":"step"' in line][:3]
    with open(path, "a") as f:
        f.write("\n".join(steps) + "\n")
    why = missing_summary(path)
    assert why is not None and "killed 3 step lines after its last checkpoint summary" in why
    tl = read_overlay_log(path.read_bytes(), path)
    said = [w for w in tl.warnings if NO_SUMMARY in w]
    assert len(said) == 1 and why in said[0] and not overlay_log(tl).summary_from_file


def test_a_failing_checkpoint_turns_itself_off_with_one_warning(tmp_path, caplog, monkeypatch):
    """GIVEN an EventLog whose checkpoint summary raises WHEN steps are written and the log goes idle twice THEN
    one warning says checkpoints are off, the step lines keep coming, and the final summary is still written at
    close."""
    log = EventLog(str(tmp_path), max_bytes=0)
    log.configure(backend="cpu", lane="cpu-thread", rank=0)
    real = log.summary

    def broken(final: bool = True) -> dict:
        if not final:
            raise RuntimeError("FAKE checkpoint failure")
        return real(final)

    monkeypatch.setattr(log, "summary", broken)
    steps = [json.loads(line) for line in SAMPLE_LOG.read_text().splitlines() if '"type":"step"' in line]
    with caplog.at_level(logging.WARNING, logger="vllm.expo_prof"):
        for batch in (steps[:5], steps[5:10]):
            for s in batch:
                log.step(s)
            log.drain(10)
            time.sleep(0.8)  # past the writer's idle time: a checkpoint is tried
        log.close()
    said = [r for r in caplog.records if "checkpoint summaries off" in r.getMessage()]
    assert len(said) == 1
    lines = [json.loads(line) for line in Path(log.path).read_text().splitlines()]
    assert sum(o["type"] == "step" for o in lines) == 10
    assert [o["type"] for o in lines].count("summary") == 1 and lines[-1]["final"] is True
