"""``record`` when the engine dies, requests fail, the profiler is stuck or the user presses Ctrl-C (issue 42).

Every case runs the real CLI in a subprocess against the STAND-IN server (tests/support/openai_standin.py, not
vLLM: up in well under a second), made to misbehave as vLLM does: its "engine" dies (vLLM's HTTP 500
``EngineDeadError`` body, its error chunk in the streams in flight, its log lines), a child titled
``VLLM::EngineCore`` is killed with SIGKILL under an API server that goes on answering ``/health``, ``/health``
stops answering, ``/stop_profile`` writes the trace and then holds its answer (vLLM's op table), the process
ignores SIGINT and SIGTERM. What the real vLLM server does in these cases was measured by hand (docs/usage.md,
"Ending a run"); the real Ctrl-C case is tests/record/test_record.py's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from expo_prof.serving.launch import free_port
from shared_paths import REPO  # type: ignore[import-not-found]  (tests/ is on sys.path)

CLI = [sys.executable, "-m", "expo_prof"]
STANDIN = REPO / "tests" / "support" / "openai_standin.py"
ENV = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
#: A load that outlasts every case (the stand-in streams a token every 5 ms: 200 tokens, 1 s a request).
LONG_LOAD = ["--num-prompts", "400", "--input-len", "8", "--output-len", "200", "--max-concurrency", "4"]


def standin(port: int, *faults: str) -> list[str]:
    return [sys.executable, str(STANDIN), "--port", str(port), "--max-model-len", "256", *faults]


def manifest(run: Path) -> dict:
    try:
        return json.loads((run / "manifest.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}


def start(run: Path, args: list[str], server: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "record", "--out", str(run), *args, "--", *server], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(run: Path, status: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while manifest(run).get("status") != status:
        assert proc.poll() is None, f"record ended before {status!r}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"status {status!r} never reached"
        time.sleep(0.02)


def finish(proc: subprocess.Popen, run: Path, timeout: float) -> tuple[str, str, float]:
    """Wait at most ``timeout`` s for record to end: (stdout, stderr, seconds it took). One that does not end is
    killed with its server, and the test fails."""
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pid = manifest(run).get("server_pid")
        if pid:
            try:
                srv = psutil.Process(pid)
                for p in [*srv.children(recursive=True), srv]:
                    p.kill()
            except psutil.Error:
                pass
        pytest.fail(f"record did not end within {timeout} s: {err[-2000:]}")
    return out, err, time.monotonic() - t0


def errors(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("error:")]


def server_left(port: int) -> list[int]:
    """Live processes whose command line names the stand-in's port (the server and its engine child)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except psutil.Error:
            continue
        if f"--port {port}" in cmd and "expo_prof" not in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p.pid)
    return found


# ------------------------------------------------------------------------------------------ a dead engine


def test_a_dead_engine_stops_the_run_with_its_cause_and_no_verdict(tmp_path):
    """GIVEN `record --overlay switchback --fixed-length` of a server whose run directory holds a real switchback
    event log (the committed sample's, copied there by the launch script: the analysis after a run that ended
    well would print its saving and verdict) and whose engine dies at its 6th completion: the streams in flight
    end with vLLM's error chunk, every later request gets vLLM's HTTP 500 EngineDeadError body
    WHEN the built-in load of 40 requests runs
    THEN exit 3 with one error line saying the engine died, quoting the server log's EngineDeadError line as the
    cause; the load was stopped at once (far fewer than 40 requests sent); the manifest says "crashed" with its
    `failure` (why "engine dead", the cause as the log has it) and a note that no saving or verdict comes from
    the run; no analysis ran: no analysis.json, no timeline, no saving or verdict printed; workload.json keeps
    the requests that finished, the failed one counted.
    Before: exit 0, status ok, the failed requests only counted in workload.json, and the saving printed."""
    (sample,) = (REPO / "traces/samples/tiny-cpu-switchback/overlay").glob("expo-prof-events-*.jsonl")
    port = free_port()
    script = tmp_path / "serve.sh"
    script.write_text(f'#!/bin/sh\ncp {sample} "$EXPO_PROF_OUT/"\nexec {sys.executable} {STANDIN} --dead-after 6 "$@"\n')
    script.chmod(0o755)
    run = tmp_path / "run"
    proc = start(run, ["--overlay", "switchback", "--fixed-length", "--profiler", "none", "--num-prompts", "40",
                       "--input-len", "8", "--output-len", "20", "--max-concurrency", "4"],
                 [str(script), "--port", str(port)], tmp_path)
    out, err, _ = finish(proc, run, 60)
    assert proc.returncode == 3, err[-3000:]
    (line,) = errors(err)
    assert line.startswith("error: the engine died during the run: a request failed with vLLM's dead-engine error"), line
    assert "no saving or verdict is given" in line
    cause = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
    assert f"cause: {cause}" in line
    assert cause in (run / "server.log").read_text()  # quoted from the server's own log
    m = manifest(run)
    assert m["status"] == "crashed" and m["exit"]["leftover_pids"] == []
    assert m["failure"]["why"] == "engine dead" and m["failure"]["cause"].startswith(cause)
    assert any(n.startswith("no saving and no verdict from this run") for n in m["notes"])
    metrics = json.loads((run / "workload.json").read_text())["metrics"]
    assert metrics["failed"] >= 1 and metrics["completed"] + metrics["failed"] < 12, metrics
    assert not (run / "analysis.json").exists() and not (run / "timeline.html").exists()
    for word in ("saves", "enable", "keep off", "no effect", "verdict:"):
        assert word not in out, out


@pytest.mark.parametrize("fail_after,status", [(10, "crashed"), (20, "ok")], ids=["over-10%", "within-10%"])
def test_failed_requests_over_the_share_fail_the_run(tmp_path, fail_after, status):
    """GIVEN a server that refuses every completion after its N-th with HTTP 500 (not vLLM's dead-engine error)
    WHEN a built-in load of 20 measured requests (after 1 warm-up) runs: N=10 fails 11 of them, N=20 the last
    one only
    THEN over 10 % (the 3rd failure of 20: 3 > 2): the load is stopped there, exit 3, one line "too many
    requests failed: 3 of the … measured requests so far failed, more than 10 %", status crashed with
    failure.why "failed share"; within it (1 of 20): exit 0, status ok, and a note in the manifest and
    workload.json naming the failed request.
    Before: exit 0 and status ok in both, the 11 failures only counted."""
    port = free_port()
    run = tmp_path / "run"
    proc = start(run, ["--profiler", "none", "--num-prompts", "20", "--input-len", "8", "--output-len", "4"],
                 standin(port, "--fail-after", str(fail_after)), tmp_path)
    _, err, _ = finish(proc, run, 60)
    m = manifest(run)
    assert m["status"] == status, err[-3000:]
    failed = json.loads((run / "workload.json").read_text())["metrics"]["failed"]
    if status == "crashed":
        assert proc.returncode == 3
        (line,) = errors(err)
        assert line.startswith("error: too many requests failed: 3 of the "), line
        assert "more than 10 % of the run" in line and "answered HTTP 500" in line
        assert m["failure"]["why"] == "failed share" and m["failure"]["requests"]["failed"] == failed == 3
    else:
        assert proc.returncode == 0, err[-3000:]
        assert failed == 1
        note = "1 of 20 measured requests failed (within the 10 % a run may lose)"
        assert any(n.startswith(note) for n in m["notes"])
        assert any(n.startswith(note) for n in json.loads((run / "workload.json").read_text())["notes"])


def test_an_engine_process_killed_under_a_server_that_still_answers(tmp_path):
    """GIVEN a profiled record of a server with a child process titled VLLM::EngineCore (vLLM's engine core's
    title), whose death leaves the API server up: /health still answers 200, and the requests in flight and
    every later one are never answered (each may wait 600 s), and /stop_profile would hold its answer 120 s
    WHEN the engine process is killed with SIGKILL while the profiler window is open
    THEN record ends within seconds: exit 3, one line naming the engine process and its pid, the cause quoted
    from the server log ("engine core exited unexpectedly"); status crashed (failure.why "engine process
    gone"); /stop_profile skipped (a dead engine writes no trace), said in the manifest; the server and its
    children stopped, none left.
    Before: the load waited on its requests (600 s each)."""
    port = free_port()
    run = tmp_path / "run"
    proc = start(run, LONG_LOAD, standin(port, "--engine-child", "--dead-health", "200", "--dead-requests", "hang",
                                         "--stop-profile-s", "120"), tmp_path)
    wait_for(run, "profiling", proc)
    srv = psutil.Process(manifest(run)["server_pid"])
    (engine,) = [c for c in srv.children() if c.cmdline()[:1] == ["VLLM::EngineCore"]]
    engine.kill()
    _, err, took = finish(proc, run, 30)
    assert proc.returncode == 3, err[-3000:]
    assert took < 2 * 1.0 + 2.0, took  # a look a second (HEALTH_EVERY_S), then the short stop of a dead server
    (line,) = errors(err)
    assert f"vLLM's engine process VLLM::EngineCore (pid {engine.pid}) is gone" in line, line
    assert "cause: MPClient: engine core exited unexpectedly; starting cleanup" in line
    m = manifest(run)
    assert m["status"] == "crashed" and m["failure"]["why"] == "engine process gone"
    assert m["stop_profile"].startswith("skipped") and "stop_profile_s" not in m
    assert any("/stop_profile skipped" in n for n in m["notes"])
    assert m["exit"]["leftover_pids"] == [] and not server_left(port)


@pytest.mark.slow
def test_health_that_stops_answering_stops_the_run(tmp_path):
    """GIVEN a server (no engine process to watch) whose engine dies at its 8th completion so that no request
    and no /health is answered any more (what the issue saw with the profiler on)
    WHEN the built-in load runs
    THEN within HEALTH_MISSES looks of 1 s + a 2 s timeout each (≤ 9 s, and a short stop): exit 3, one line
    "/health failed 3 times in a row", status crashed (failure.why "health"), the cause from the server log.
    Before: the load waited on its requests (600 s each)."""
    port = free_port()
    run = tmp_path / "run"
    proc = start(run, [*LONG_LOAD, "--profiler", "none"],
                 standin(port, "--dead-after", "8", "--dead-health", "hang", "--dead-requests", "hang"), tmp_path)
    wait_for(run, "ready", proc)
    _, err, took = finish(proc, run, 60)
    assert proc.returncode == 3, err[-3000:]
    assert took < 1 + 3 * (1.0 + 2.0) + 3.0, took
    (line,) = errors(err)
    assert "/health failed 3 times in a row, 1 s apart (last: timed out)" in line, line
    assert "cause: vllm.v1.engine.exceptions.EngineDeadError" in line
    m = manifest(run)
    assert m["status"] == "crashed" and m["failure"]["why"] == "health" and not server_left(port)


# ------------------------------------------------------------------------------------------------ Ctrl-C


def test_ctrl_c_keeps_the_trace_without_waiting_for_the_profilers_table(tmp_path):
    """GIVEN a profiled record whose server writes the window's trace 0.5 s into /stop_profile and then holds the
    answer 120 s (vLLM prints its op table after the trace: on the tiny model 5 s, then 10 s more)
    WHEN the user presses Ctrl-C during the load
    THEN record ends about a second later (the trace 0.5 s into /stop_profile, then TRACE_STILL_S): exit 130,
    status interrupted, the trace kept in profiler/, the manifest saying /stop_profile ended as the traces were
    written and how long the end took (finish_s).
    Before: it waited for the answer (120 s)."""
    port = free_port()
    run = tmp_path / "run"
    proc = start(run, LONG_LOAD, standin(port, "--stop-profile-s", "120", "--trace-after", "0.5"), tmp_path)
    wait_for(run, "profiling", proc)
    proc.send_signal(signal.SIGINT)
    _, err, took = finish(proc, run, 30)
    assert proc.returncode == 130, err[-3000:]
    assert took < 3, took
    m = manifest(run)
    assert m["status"] == "interrupted" and m["stop_profile"].startswith("the traces were written")
    assert 0.5 <= m["finish_s"]["stop_profile"] < 2
    (trace,) = (run / "profiler").glob("rank0.*.pt.trace.json.gz")
    assert json.loads(__import__("gzip").decompress(trace.read_bytes()))["traceEvents"]
    assert m["exit"]["leftover_pids"] == [] and not server_left(port)


def test_a_second_ctrl_c_ends_at_once_and_reaps_the_server(tmp_path):
    """GIVEN a profiled record whose server never answers /stop_profile and ignores SIGINT and SIGTERM
    WHEN the user presses Ctrl-C during the load, and again a second later (while record waits on /stop_profile)
    THEN record ends within a second of the second Ctrl-C: exit 130, "interrupted", no traceback; the server was
    killed (SIGKILL: its return code -9) and reaped, nothing of it left; the manifest says /stop_profile was given
    up at the second Ctrl-C.
    Before: the second Ctrl-C was ignored: 120 s on /stop_profile, then 50 s on the server's stop."""
    port = free_port()
    run = tmp_path / "run"
    proc = start(run, LONG_LOAD, standin(port, "--stop-profile-s", "600", "--ignore-stop"), tmp_path)
    wait_for(run, "profiling", proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert proc.poll() is None  # still waiting for the profiler
    proc.send_signal(signal.SIGINT)
    _, err, took = finish(proc, run, 30)
    assert proc.returncode == 130, err[-3000:]
    assert took < 1.0, took
    assert "Traceback" not in err and errors(err) == ["error: interrupted by the user (Ctrl-C / SIGTERM)"]
    m = manifest(run)
    assert m["status"] == "interrupted" and m["stop_profile"] == "given up at a second Ctrl-C"
    assert m["exit"] == {"server_returncode": -9, "leftover_pids": []} and not server_left(port)


@pytest.mark.slow
def test_ctrl_c_with_a_stuck_profiler_and_server_is_bounded(tmp_path):
    """GIVEN a profiled record whose server never answers /stop_profile nor writes a trace, and ignores SIGINT and
    SIGTERM
    WHEN the user presses Ctrl-C once during the load
    THEN every wait of the end is bounded: /stop_profile given up after STOP_PROFILE_INTERRUPTED_S (9 s), the
    server's SIGINT 2 s and SIGTERM 1 s (STOP_S["interrupted"]), then SIGKILL: about 12 s in all, exit 130,
    nothing left, each phase's time in the manifest's finish_s.
    Before: 120 s on /stop_profile, then 40 + 10 s on the server's stop."""
    port = free_port()
    run = tmp_path / "run"
    proc = start(run, LONG_LOAD, standin(port, "--stop-profile-s", "600", "--ignore-stop"), tmp_path)
    wait_for(run, "profiling", proc)
    proc.send_signal(signal.SIGINT)
    _, err, took = finish(proc, run, 60)
    assert proc.returncode == 130, err[-3000:]
    m = manifest(run)
    assert m["stop_profile"] == "given up after 9 s"
    assert 9 <= m["finish_s"]["stop_profile"] < 9.5
    assert 3 <= m["finish_s"]["server_stop"] < 4
    assert took < 14, took
    assert m["exit"] == {"server_returncode": -9, "leftover_pids": []} and not server_left(port)


@pytest.mark.slow
def test_ctrl_c_waits_a_little_longer_for_a_trace_being_written(tmp_path):
    """GIVEN a profiled record whose server starts writing the window's trace 8 s into /stop_profile and holds
    the file open 2 s while it writes it (a large trace, as vLLM's on 2 busy cores), and never answers
    WHEN the user presses Ctrl-C during the load
    THEN record does not give the trace up at 9 s while the server still writes it (a signal then would cut it):
    it waits until the file is closed (about 10 s, within TRACE_GRACE_S more), keeps it whole, and ends:
    exit 130, the manifest saying the traces were written.
    Before: it waited for the answer (120 s)."""
    port = free_port()
    run = tmp_path / "run"
    proc = start(run, LONG_LOAD, standin(port, "--stop-profile-s", "600", "--trace-after", "8",
                                         "--trace-write-s", "2"), tmp_path)
    wait_for(run, "profiling", proc)
    proc.send_signal(signal.SIGINT)
    _, err, took = finish(proc, run, 60)
    assert proc.returncode == 130, err[-3000:]
    m = manifest(run)
    assert m["stop_profile"].startswith("the traces were written"), m["stop_profile"]
    assert 10 <= m["finish_s"]["stop_profile"] < 12
    (trace,) = (run / "profiler").glob("rank0.*.pt.trace.json.gz")
    assert json.loads(__import__("gzip").decompress(trace.read_bytes()))["traceEvents"]
    assert took < 14, took
