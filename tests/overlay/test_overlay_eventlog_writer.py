"""The event log's writer thread and size cap (overlay/logwriter.py, overlay/events.py).

GIVEN real event logs in a temporary directory (and a real OS pipe nobody reads
as a stalled disk), WHEN steps are logged, THEN lines leave the step's path,
the size cap thins step lines instead of truncating them, every step is
counted in the summary, and a stalled writer never stalls the producer.
"""

from __future__ import annotations

import json
import os
import threading
import time

from eventlog_schema import read_log  # type: ignore[import-not-found]

from expo_prof.readers import load
from overlay.contract import ENV_LOG_MAX_MB
from overlay.events import DEFAULT_LOG_MAX_MB, EventLog, log_max_bytes
from overlay.logwriter import LineWriter
from expo_prof.timeline import overlay_log


def _step(i):
    return {"step": i, "rank": 0, "rows": 256, "vocab": 151936, "dtype": "float32", "launched": True, "used": True,
            "fallback": None, "t0_ns": 10_000_000 * (i + 1), "fwd": [0, 9_000_000], "exp": [1000, 600_000],
            "wait": [9_000_100, 9_000_200], "sample": [9_000_050, 9_000_400], "host_end": 9_000_450, "phase": "on",
            "block": None, "reqs": 256, "tokens": 256, "timing": "host"}


def _log(tmp_path, n, **kw):
    log = EventLog(str(tmp_path), **kw)
    log.configure(backend="cpu", lane="thread", rank=0)
    for i in range(n):
        log.step(_step(i))
    return log


def test_cap_thins_step_lines_and_the_summary_counts_every_step(tmp_path, monkeypatch):
    # GIVEN a tiny cap from the environment (20 kB: ~100 step lines of ~210 bytes)
    monkeypatch.setenv(ENV_LOG_MAX_MB, "0.02")
    # WHEN 2000 steps are logged and the log closed
    log = _log(tmp_path, 2000)
    log.close()
    path, lines = read_log(tmp_path)
    summary = lines["summary"][-1]
    ids = [s["step"] for s in lines["step"]]
    # THEN step lines never take the file past the cap (header, notices and summary aside)
    step_bytes = sum(len(json.dumps(s, separators=(",", ":"))) + 1 for s in lines["step"])
    assert summary["max_bytes"] == 20_000 and step_bytes <= 20_000
    assert os.path.getsize(path) < 20_000 + 2_000
    # AND every step is counted: written + sampled out == steps, with steps left out
    assert summary["steps"] == 2000 and summary["dropped"] == 0
    assert len(ids) + summary["sampled_out"] == 2000 and summary["sampled_out"] > 1500
    # AND the lines are thinned, not truncated: strides 1, then 2, 4, 8 … (doubling), reaching past the first lines
    gaps = [b - a for a, b in zip(ids, ids[1:])]
    assert ids[0] == 0 and gaps[0] == 1
    assert gaps == sorted(gaps) and all(g & (g - 1) == 0 for g in gaps), gaps
    assert len(set(gaps)) >= 4 and ids[-1] > 2 * len(ids)
    # AND the offline reader accepts the new summary keys and keeps them
    tl = load([path]).timelines[0]
    assert overlay_log(tl).summary["sampled_out"] == summary["sampled_out"]
    assert len(overlay_log(tl).steps["step"]) == len(ids)


def test_no_cap_writes_every_line_and_close_drains(tmp_path):
    # GIVEN a log without a cap, 3000 steps queued as fast as the producer can
    log = _log(tmp_path, 3000, max_bytes=0)
    writer = log._writer
    # WHEN it is closed at once (no explicit drain)
    log.close()
    # THEN close drained the queue and joined the thread: every line is there, the summary last
    assert not writer._thread.is_alive()
    _, lines = read_log(tmp_path)
    assert [s["step"] for s in lines["step"]] == list(range(3000))
    assert lines["summary"][-1]["sampled_out"] == 0 and lines["summary"][-1]["max_bytes"] == 0


def test_max_mb_setting_is_parsed_with_a_safe_default():
    # GIVEN values of EXPO_PROF_LOG_MAX_MB THEN 0 means no cap, MB are 10**6 bytes, junk means the default
    default = DEFAULT_LOG_MAX_MB * 1_000_000
    assert [log_max_bytes(v) for v in ("0", "0.5", "12", "", "abc", "-3", "nan")] == [
        0, 500_000, 12_000_000, default, default, default, default]


def test_stalled_writer_does_not_block_the_producer_and_drops_are_counted():
    # GIVEN a writer whose file is a pipe nobody reads (a stalled disk), a 4-line queue, 20 ms bounded wait
    r, w = os.pipe()
    wfile = os.fdopen(w, "w", encoding="utf-8", buffering=1)
    writer = LineWriter(wfile, queue_lines=4, put_wait_s=0.02)
    pad = "x" * 10_000  # a few lines fill the pipe's buffer
    # WHEN the producer puts 300 step lines
    t0 = time.monotonic()
    results = [writer.put({"type": "step", "step": i, "pad": pad}, step=True) for i in range(300)]
    elapsed = time.monotonic() - t0
    # THEN it never waited long: one bounded wait, then drop-and-count without waiting
    assert elapsed < 1.0, elapsed
    assert results.count(False) == writer.dropped and writer.dropped > 250
    # WHEN someone reads the pipe again
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(iter(lambda: os.read(r, 65536), b"")))
    reader.start()
    # THEN close drains what was queued and joins; every line is written or counted as dropped
    assert writer.close(timeout=30)
    wfile.close()
    reader.join(30)
    written = [json.loads(x) for x in b"".join(got).decode().splitlines()]
    assert len(written) == writer.step_lines and writer.step_lines + writer.dropped == 300
    assert [x["step"] for x in written] == [i for i, ok in enumerate(results) if ok]
    os.close(r)


def test_forked_child_gets_its_own_writer_and_file(tmp_path):
    # GIVEN a log whose writer thread runs in the parent
    log = _log(tmp_path / "p", 2, max_bytes=0)
    assert log.drain(10)
    parent_path = log.path
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # WHEN a forked child logs and closes
        code = 1
        try:
            log.out_dir = str(tmp_path / "c")
            log.step(_step(0))
            log.close()
            os.write(wfd, json.dumps({"path": log.path}).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    _, status = os.waitpid(pid, 0)
    child = json.loads(os.read(rfd, 4096) or b"{}")
    os.close(rfd)
    log.step(_step(2))
    log.close()
    # THEN the child wrote its own file with its own writer (one step), the parent's file has its own three
    assert os.waitstatus_to_exitcode(status) == 0 and child["path"] != parent_path
    _, child_lines = read_log(tmp_path / "c")
    _, parent_lines = read_log(tmp_path / "p")
    assert [s["step"] for s in child_lines["step"]] == [0] and child_lines["summary"][-1]["steps"] == 1
    assert [s["step"] for s in parent_lines["step"]] == [0, 1, 2] and parent_lines["summary"][-1]["steps"] == 3
