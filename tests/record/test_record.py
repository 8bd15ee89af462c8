"""``expo-prof record`` against a real vLLM CPU server: complete run directories, and every fault ends cleanly
(where only a misbehaving process matters, a STAND-IN server: tests/support/openai_standin.py).

Each test runs the real CLI in a subprocess (as a user would) on the tiny
model, with the server lock held so servers never overlap.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from expo_prof.serving.launch import free_port


CLI = [sys.executable, "-m", "expo_prof"]
#: What the test servers need on a 2-core box with no internet (record itself adds none of it).
ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}
SMALL_LOAD = ["--num-prompts", "6", "--input-len", "64", "--output-len", "24", "--temperature", "1.0"]


#: A STAND-IN server (tests/support/openai_standin.py: not vLLM; up in well under a second) for fault paths that
#: need only a process that serves and then misbehaves; the real-server fault tests here keep one per path.
STANDIN = Path(__file__).resolve().parents[1] / "support" / "openai_standin.py"


def standin_cmd(port: int, *extra: str) -> list[str]:
    return [sys.executable, str(STANDIN), "--port", str(port), "--max-model-len", "256", *extra]


def server_cmd(model: Path, port: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--dtype", "float32", "--max-model-len", "256", "--port", str(port), "--enforce-eager", *extra,
    ]


def processes_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line mentions ``marker``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state not in ("Z", "X") and "pytest" not in cmd:
            found.append(int(pid))
    return found


def record(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        CLI + ["record", *args], cwd=cwd, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=timeout
    )


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def wait_for_status(run: Path, wanted: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"record ended early: {proc.returncode}"
        try:
            if manifest(run)["status"] == wanted:
                return
        except (FileNotFoundError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"status {wanted!r} never reached")


@pytest.fixture(scope="module")
def recorded(tiny_model, vllm_available, vllm_lock, tmp_path_factory) -> dict[str, tuple[Path, int, subprocess.CompletedProcess]]:
    """GIVEN the tiny model served by a real vLLM CPU server under `record`, WHEN a short built-in workload is
    recorded with the overlay off and, at the same time, on (two records side by side: their server starts —
    three interpreters importing torch and vLLM, one core each — overlap instead of leaving a core idle; what
    is asserted is each run's completeness, not its speed): per mode, (run, port, the finished record)."""
    work = tmp_path_factory.mktemp("record")
    runs: dict[str, tuple[Path, int, subprocess.Popen]] = {}
    with vllm_lock():
        for mode in ("off", "on"):
            port, run = free_port(), work / f"run-{mode}"
            cmd = CLI + ["record", "--out", str(run), "--overlay", mode, *SMALL_LOAD, "--", *server_cmd(tiny_model, port)]
            runs[mode] = run, port, subprocess.Popen(cmd, cwd=work, env={**os.environ, **ENV}, stdout=subprocess.PIPE,
                                                     stderr=subprocess.PIPE, text=True)
        done = {}
        try:
            for mode, (run, port, proc) in runs.items():
                out, err = proc.communicate(timeout=600)
                done[mode] = run, port, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        finally:
            for run, _, proc in runs.values():
                _reap(proc, run)
    return done


@pytest.mark.parametrize("mode", ["off", "on"])  # switchback: tests/e2e/test_demo.py (the default demo)
def test_record_produces_a_complete_run_that_analyses(mode, recorded):
    run, port, proc = recorded[mode]
    # THEN it succeeds and the run directory describes itself completely
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = manifest(run)
    assert m["status"] == "ok" and m["overlay"] == mode and m["exit"]["leftover_pids"] == []
    assert m["versions"]["vllm"] and m["versions"]["torch"] and m["device"] == "cpu"
    assert m["env_changed"]["EXPO_PROF_ASYNC_EXPONENTIAL"] == ("1" if mode == "on" else "0")
    assert "--profiler-config" in m["launched_argv"]
    assert (run / "server.log").stat().st_size > 0
    metrics = json.loads((run / "workload.json").read_text())["metrics"]
    assert metrics["completed"] == 6 and metrics["total_output_tokens"] == 6 * 24
    traces = list((run / "profiler").glob("rank*.pt.trace.json.gz"))
    assert traces, list((run / "profiler").iterdir())
    logs = list((run / "overlay").glob("expo-prof-events-*.jsonl"))
    if mode == "on":
        assert logs and sum(1 for line in logs[0].read_text().splitlines() if '"type":"step"' in line) >= 24
    else:
        assert not logs  # overlay off: nothing installed, nothing written
    # AND analyze finds the exponential instances with hidden/exposed time in it
    out = subprocess.run(CLI + ["analyze", str(run), "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)["summary"]
    assert summary["instances"] >= 24
    assert summary["hidden_ns"] + summary["exposed_ns"] == summary["total_ns"] > 0
    assert not processes_with(f"--port {port}")


def test_command_not_found_is_one_clear_line(tmp_path):
    # GIVEN a command that does not exist WHEN recorded
    proc = record(["--out", str(tmp_path / "r"), "--", "no-such-vllm-binary", "serve", "x"], tmp_path, timeout=60)
    # THEN one clear line, exit 2, no traceback, nothing created
    assert proc.returncode == 2
    assert "command not found: no-such-vllm-binary" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args,needle", [
    (["--overlay", "switchback", "--repeat", "2"], "--overlay switchback measures both sides in one run"),
    (["--overlay", "switchback", "--block-steps", "1"], "--block-steps must be at least 2"),
    (["--overlay", "on", "--block-steps", "8"], "--block-steps only applies with --overlay switchback"),
    (["--overlay", "on", "--margin", "2%"], "--margin only applies with --overlay switchback"),
    (["--overlay", "on", "--budget", "3m"], "--budget only applies with --overlay switchback"),
    (["--overlay", "switchback", "--budget", "soon"], "--budget 'soon' is neither a time (90s, 3m, 1h) nor a number"),
    (["--overlay", "switchback", "--budget", "0 steps"], "--budget '0 steps': at least 1 step"),
    (["--overlay", "switchback", "--margin", "150%"], "--margin '150%' must be between 0 and 100 %"),
    (["--overlay", "switchback", "--margin", "fast"], "--margin 'fast' is neither a share of the step (1%) nor a time"),
    (["--overlay", "switchback", "--fixed-length", "--budget", "3m"], "--fixed-length judges the run's own length"),
    (["--overlay", "switchback", "--no-load", "--margin", "2%"], "--margin / --budget need a load that expo-prof drives"),
])
def test_switchback_options_that_do_not_fit_are_one_line(tmp_path, args, needle):
    # GIVEN switchback options that contradict each other WHEN recorded
    proc = record(["--out", str(tmp_path / "r"), *args, "--", sys.executable, "-m",
                   "vllm.entrypoints.openai.api_server", "--model", "m"], tmp_path, timeout=60)
    # THEN one clear line, exit 2, nothing created or launched
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr
    assert not (tmp_path / "r").exists()


def test_port_already_in_use(tiny_model, tmp_path):
    # GIVEN something already listening on the command's port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        run = tmp_path / "run"
        # WHEN recording a server that wants that port
        proc = record(["--out", str(run), *SMALL_LOAD, "--", *server_cmd(tiny_model, port)], tmp_path, timeout=120)
    # THEN it refuses clearly before launching, and the run directory says so
    assert proc.returncode == 3, proc.stderr
    assert f"port {port} is already in use" in proc.stderr and "Traceback" not in proc.stderr
    assert manifest(run)["status"] == "failed"
    assert not processes_with(f"--port {port}")


def test_server_crash_at_start(vllm_available, vllm_lock, tmp_path):
    # GIVEN a server command that dies while starting (no such model directory)
    port = free_port()
    run = tmp_path / "run"
    with vllm_lock():
        proc = record(
            ["--out", str(run), *SMALL_LOAD, "--", *server_cmd(tmp_path / "missing-model", port)], tmp_path, timeout=300
        )
    # THEN a clear message with the log's last lines, exit 3, run directory kept with the log
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "exited with code" in proc.stderr and "before it was ready" in proc.stderr
    assert "Traceback (most recent call last)" not in proc.stderr.splitlines()[0]
    m = manifest(run)
    assert m["status"] in ("failed", "crashed") and m["exit"]["leftover_pids"] == []
    assert (run / "server.log").stat().st_size > 0
    assert not processes_with(f"--port {port}")


def test_readiness_timeout(tiny_model, vllm_available, vllm_lock, tmp_path):
    # GIVEN a real server and a readiness timeout far shorter than its start-up
    port = free_port()
    run = tmp_path / "run"
    with vllm_lock():
        proc = record(
            ["--out", str(run), "--ready-timeout", "3", *SMALL_LOAD, "--", *server_cmd(tiny_model, port)],
            tmp_path, timeout=300,
        )
    # THEN it stops the server, says it was not ready in time, exit 3, no orphan
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "not ready after 3 s" in proc.stderr
    assert manifest(run)["status"] == "failed"
    assert not processes_with(f"--port {port}")


def _disturb_while_profiling(server: list[str], port: int, tmp_path: Path, lock, act,
                             settle_s: float) -> tuple[Path, int, subprocess.Popen, str, float]:
    """Record a long workload on ``server``; once the profiler window is open, call ``act(proc, run)``; wait.
    Returns the run, the port, the record, its stderr and the seconds it took to end after ``act``."""
    run = tmp_path / "run"
    args = [
        "--out", str(run), "--num-prompts", "400", "--input-len", "32", "--output-len", "200",
        "--max-concurrency", "4", "--", *server,
    ]
    with lock():
        proc = subprocess.Popen(
            CLI + ["record", *args], cwd=tmp_path, env={**os.environ, **ENV},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            wait_for_status(run, "profiling", proc)
            time.sleep(settle_s)
            act(proc, run)
            t0 = time.monotonic()
            _, err = proc.communicate(timeout=300)
            took = time.monotonic() - t0
        finally:
            _reap(proc, run)
    return run, port, proc, err, took


def _reap(proc: subprocess.Popen, run: Path) -> None:
    """A record that did not end in time: kill it and its server (in a session of its own), never leave them."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        _kill_server(run)


def _kill_server(run: Path) -> None:
    import psutil

    try:
        srv = psutil.Process(manifest(run)["server_pid"])
        for p in [*srv.children(recursive=True), srv]:
            p.kill()
    except (FileNotFoundError, ValueError, KeyError, psutil.Error):
        pass


@pytest.mark.slow
def test_server_crash_mid_run(tmp_path):
    # GIVEN a recording in its profiled workload (a STAND-IN server: what matters is a process that dies)
    # WHEN the server dies under it
    port = free_port()
    run, port, proc, err, _ = _disturb_while_profiling(
        standin_cmd(port), port, tmp_path, contextlib.nullcontext,
        lambda p, r: os.kill(manifest(r)["server_pid"], signal.SIGKILL), settle_s=1,
    )
    # THEN record says the server crashed (not a share of failed requests: the requests refused after it died
    # are not the server's answers), exits 3, keeps the run, leaves no orphan
    assert proc.returncode == 3, err[-2000:]
    assert "error: the server exited with code -9 during the run" in err, err[-2000:]
    m = manifest(run)
    assert m["status"] == "crashed" and m["failure"]["why"] == "server exited"
    assert m["exit"]["leftover_pids"] == []
    assert not processes_with(f"--port {port}")


def test_ctrl_c_mid_profile_keeps_everything(tiny_model, vllm_available, vllm_lock, tmp_path):
    # GIVEN a recording with the profiler window open
    # WHEN the user presses Ctrl-C (SIGINT to expo-prof only)
    port = free_port()
    run, port, proc, err, took = _disturb_while_profiling(
        server_cmd(tiny_model, port), port, tmp_path, vllm_lock, lambda p, r: p.send_signal(signal.SIGINT), settle_s=2
    )
    # THEN a clean stop: exit 130, run marked interrupted, captured data kept, no orphan
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err
    m = manifest(run)
    assert m["status"] == "interrupted" and m["ended"] and m["exit"]["leftover_pids"] == []
    assert list((run / "overlay").glob("expo-prof-events-*.jsonl"))
    traces = list((run / "profiler").glob("rank*.pt.trace.json.gz"))
    assert traces, "profiler trace of the open window was lost"
    # AND within 15 s (issue 42: 171 s before): /stop_profile waited for until the trace is written, not for vLLM's
    # op table after it (docs/usage.md, "Ending a run"), and the trace is whole
    assert took < 15, (took, m["finish_s"], m.get("stop_profile"))
    assert m["stop_profile"] in ("answered", "the traces were written (vLLM's op table, printed after them, "
                                             "not waited for)"), m["stop_profile"]
    import gzip

    assert all(json.loads(gzip.decompress(t.read_bytes()))["traceEvents"] for t in traces)
    requests = json.loads((run / "workload.json").read_text())["requests"]
    assert any(r["ok"] for r in requests)
    assert not processes_with(f"--port {port}")


@pytest.mark.slow
def test_wrapper_script_with_no_load_and_duration(tmp_path):
    # GIVEN a wrapper script that starts a server with its own arguments ("$@") (a STAND-IN server: what matters
    # is the launch script, its port and the fixed duration)
    port = free_port()
    script = tmp_path / "serve.sh"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {STANDIN} --max-model-len 256 \"$@\"\n")
    script.chmod(0o755)
    run = tmp_path / "run"
    # WHEN recorded with no built-in load for a fixed duration, profiler off
    proc = record(
        ["--out", str(run), "--profiler", "none", "--no-load", "--duration", "3", "--",
         str(script), "--port", str(port), "--enforce-eager"],
        tmp_path, timeout=300,
    )
    # THEN the port came from the wrapper's arguments, the run ends by itself, and is complete
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = manifest(run)
    assert m["status"] == "ok" and m["target"] == {"kind": "other", "url": f"http://127.0.0.1:{port}"}
    assert m["profiler"] == "none" and m["workload"]["builtin"] is False
    assert not (run / "workload.json").exists()
    assert m["exit"]["leftover_pids"] == [] and not processes_with(f"--port {port}")
