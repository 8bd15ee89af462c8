"""The profiler window of ``expo-prof record`` holds the measured load: opened (``/start_profile`` answered) before
the load's first request, closed at ``--profile-seconds`` or at the load's end, whichever comes first.

Against a STAND-IN server (tests/support/openai_standin.py, not vLLM) that says each request as it arrives and
each profiler call as it answers (``--say-requests``), and whose ``/start_profile`` answers late
(``--start-profile-s``), as a busy vLLM does: on two cores, two records side by side, the real server ran the
load's first steps before its profiler started (CI, stop 48: 22 of 24 steps in the trace).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from expo_prof.serving.launch import free_port

from test_record import record, standin_cmd  # type: ignore[import-not-found]

SAID = "standin: "


def said(run: Path) -> list[str]:
    """What the stand-in said, in order (``arrived POST /v1/completions``, ``answered POST /start_profile`` …)."""
    return [ln.split(SAID, 1)[1] for ln in (run / "server.log").read_text().splitlines() if ln.startswith(SAID)]


def test_no_measured_request_is_sent_before_the_profiler_runs(tmp_path):
    # GIVEN a server that takes 1 s to start its profiler
    run = tmp_path / "run"
    # WHEN record drives its built-in load of 3 requests
    proc = record(["--out", str(run), "--num-prompts", "3", "--input-len", "8", "--output-len", "4", "--no-analyze",
                   "--", *standin_cmd(free_port(), "--start-profile-s", "1", "--say-requests")], tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [e for e in said(run) if "profile" in e or "completions" in e]  # not the record's /health looks
    asked, answered = events.index("arrived POST /start_profile"), events.index("answered POST /start_profile")
    # THEN nothing reached the server while its profiler started, and all 3 measured requests came after it ran
    assert events[asked + 1:answered] == [], events
    assert events[answered + 1:].count("arrived POST /v1/completions") == 3, events
    assert events.index("arrived POST /stop_profile") > max(i for i, e in enumerate(events) if "completions" in e)


def test_a_profile_seconds_window_opens_before_the_load_command_and_closes_on_time(tmp_path):
    # GIVEN a load command that sends one request at once and one 2 s later
    run = tmp_path / "run"
    send = ("import json, sys, time, urllib.request as u\n"
            "def one():\n"
            "    r = u.Request(sys.argv[1] + '/v1/completions', json.dumps({'model': 'standin-model', 'prompt': 'a',"
            " 'max_tokens': 2}).encode(), {'Content-Type': 'application/json'})\n"
            "    u.urlopen(r, timeout=30).read()\n"
            "one(); time.sleep(2); one()\n")
    (tmp_path / "load.py").write_text(send)
    # WHEN recorded with a 0.5 s profiler window
    proc = record(["--out", str(run), "--profile-seconds", "0.5", "--no-analyze",
                   "--load-cmd", f"{sys.executable} {tmp_path / 'load.py'} {{base_url}}",
                   "--", *standin_cmd(free_port(), "--say-requests")], tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [e for e in said(run) if "profile" in e or "completions" in e]
    # THEN the window opened before the load's first request and closed between its two (not after a window
    # spent waiting before the load started)
    assert events == ["arrived POST /start_profile", "answered POST /start_profile", "arrived POST /v1/completions",
                      "arrived POST /stop_profile", "answered POST /stop_profile", "arrived POST /v1/completions"], events


def test_a_load_that_ends_inside_its_profile_seconds_window_closes_it_at_once(tmp_path):
    # GIVEN a built-in load of well under a second and a 120 s profiler window
    run = tmp_path / "run"
    t0 = time.monotonic()
    done = record(["--out", str(run), "--num-prompts", "2", "--input-len", "8", "--output-len", "4",
                   "--profile-seconds", "120", "--no-analyze", "--", *standin_cmd(free_port(), "--say-requests")],
                  tmp_path, timeout=200)
    took = time.monotonic() - t0
    # THEN the window closed when the load ended (the run did not wait out the 120 s), after its requests
    assert done.returncode == 0, done.stderr[-2000:]
    assert took < 60, took
    events = said(run)
    assert events[-2:] == ["arrived POST /stop_profile", "answered POST /stop_profile"], events
