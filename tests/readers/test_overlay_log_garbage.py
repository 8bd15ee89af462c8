"""Overlay event logs with garbage lines (issue 27): counted and skipped in one note, the valid lines kept.

GIVEN a real event log (written by the overlay's own ``EventLog``) with GENERATED garbage lines between its lines
— binary junk, NUL bytes, invalid UTF-8, truncated JSON, JSON that is not an object or has no type, a 5 MB line,
a step line with fields of the wrong type — WHEN the real CLI analyses it THEN every valid step is counted, the
garbage is named in one warning line each kind, exit 0 and no traceback; a file that is all garbage is one clear
error with exit 2.
"""

from __future__ import annotations

import json
import subprocess
import sys

from overlay.events import EventLog

GARBAGE = [
    b"\x00\x01\x02\xfe\xff binary junk \x80\x81",
    b"\x00" * 64,
    b'{"type": "notice", "level": "info", "code": "x", "message": "\xc3\x28 invalid UTF-8"}',
    b'{"type": "step", "step": 99, "t0_',
    b"[1, 2, 3]",
    b'"just a string"',
    b"42",
    b"null",
    b'{"step": 7, "t0_ns": 1}',
    b'{"type": 5}',
    b'{"type": "step", "pad": "' + b"x" * 5_000_000,
]


def _steps(n: int) -> list[dict]:
    return [{"step": i, "rank": 0, "rows": 4, "vocab": 2048, "dtype": "float32", "launched": True, "used": True,
             "fallback": None, "t0_ns": 1_000_000 * (i + 1), "fwd": [100, 50_000], "exp": [200, 1_200],
             "wait": [50_100, 50_200], "timing": "host"} for i in range(n)]


def _analyze(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", "analyze", str(path), "--json"], capture_output=True,
                          text=True, timeout=120)


def test_garbage_lines_are_counted_and_skipped_and_the_valid_steps_kept(tmp_path):
    """GIVEN 6 valid step lines with the 11 GARBAGE lines woven in after the header, and one step line whose
    `fwd`, `launched` and `phase` have the wrong type (its `exp` window and `t0_ns` sound) WHEN analysed THEN
    all 7 draws are counted (the damaged step's bad fields ignored, the line kept), one warning counts the 11
    garbage lines naming the first (line 2), one counts the damaged step line naming its fields; exit 0
    (before: 9 — the two objects without a string type went unsaid — and the wrong types unsaid)."""
    log = EventLog(str(tmp_path))
    log.configure(backend="cpu", lane="thread", rank=0)
    for rec in _steps(6):
        log.step(rec)
    log.close()
    lines = open(log.path, "rb").read().split(b"\n")  # header, 6 steps, summary, "" (the file ends in "\n")
    damaged = {"type": "step", **_steps(7)[6], "fwd": "soon", "launched": "yes", "phase": ["on"]}
    out = [lines[0], *GARBAGE, *lines[1:-2], json.dumps(damaged).encode(), lines[-2]]
    open(log.path, "wb").write(b"\n".join(out) + b"\n")
    proc = _analyze(log.path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["summary"]["instances"] == 7
    mine = [w for w in doc["warnings"] if w.startswith(log.path)]
    assert mine == [
        f"{log.path}: 11 malformed line(s) skipped (not a JSON object with a type; the first: line 2)",
        f"{log.path}: 1 step line(s) with a field of the wrong type; those fields ignored "
        f"(the first: line {len(out) - 1}: launched, phase, fwd)",
    ], doc["warnings"]


def test_a_log_that_is_all_garbage_is_one_clear_error(tmp_path):
    """GIVEN an event-log file holding only GARBAGE lines WHEN analysed THEN exit 2 with one line saying it is not
    an overlay event log and how many lines it holds (before: "empty event log", for a file of 11 lines)."""
    p = tmp_path / "expo-prof-events-host-1.jsonl"
    p.write_bytes(b"\n".join(GARBAGE) + b"\n")
    proc = _analyze(p)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == [f"error: {p}: not an overlay event log: none of its 11 line(s) is a JSON object with a type, "
                     "and no header line (a damaged or foreign file?)"], proc.stderr
