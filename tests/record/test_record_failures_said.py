"""``record`` keeps what it recorded and says why a run failed (issue 33 item 7).

A vLLM server that fails to start ends its log with ``RuntimeError: Engine core initialization failed. See root
cause above`` under a line of ``^^^^``: quoting the log's last lines showed only that. ``record`` names the
server's own cause. A user's own vLLM command without ``--shutdown-timeout`` had its workers killed before the
overlay's summary line: ``record`` adds the flag (once; the demo passed it twice).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from expo_prof.record.command import inject, parse_target
from expo_prof.serving.launch import free_port, vllm_argv

ENV = {"VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _count(argv: list[str], flag: str) -> int:
    return sum(a == flag or a.startswith(flag + "=") for a in argv)


def test_record_adds_shutdown_timeout_once(tmp_path):
    """GIVEN a user's own vLLM server command without --shutdown-timeout, and the demo's command (which has it)
    WHEN record builds the command it runs for vLLM 0.32 THEN each carries the flag exactly once, and the added
    one is said in a note; a vLLM older than the flag (0.17) gets nothing added."""
    user = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "M", "--port", "8000"]
    demo = vllm_argv("M", 8000, python=sys.executable)
    for argv, added in ((user, True), (demo, False)):
        inj = inject(parse_target(argv), run_dir=tmp_path, overlay=True, profiler="torch", vllm_version="0.32.0",
                     run_id="r")
        assert _count(inj.argv, "--shutdown-timeout") == 1, inj.argv
        assert any("--shutdown-timeout" in n for n in inj.notes) == added
    old = inject(parse_target(user), run_dir=tmp_path, overlay=True, profiler="torch", vllm_version="0.17.1",
                 run_id="r")
    assert _count(old.argv, "--shutdown-timeout") == 0


def test_server_failure_names_the_servers_own_cause(tiny_model, vllm_available, vllm_lock, tmp_path):
    """GIVEN the real vLLM CPU server asked for a KV cache far larger than the machine's memory (it fails at
    engine start) WHEN record runs it THEN it exits 3 and its message carries the server's own cause — the
    exception the engine core raised about memory — not only vLLM's pointer "See root cause above"."""
    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model), "--dtype",
           "float32", "--max-model-len", "256", "--port", str(port), "--enforce-eager"]
    with vllm_lock():
        proc = subprocess.run([sys.executable, "-m", "expo_prof", "record", "--out", str(tmp_path / "run"),
                               "--num-prompts", "2", "--", *cmd], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={**os.environ, **ENV, "VLLM_CPU_KVCACHE_SPACE": "100000"})
    assert proc.returncode == 3, proc.stderr[-2000:]
    log = (tmp_path / "run" / "server.log").read_text(errors="replace")
    assert "root cause above" in log  # the case: the log's last words only point back
    # the cause, then the log's last lines, each on its own line (expo_prof/cli/main.py prints a message of several lines as lines)
    assert proc.stderr.count("cause: ") == 1, proc.stderr[-3000:]
    cause = re.split(r"\\u000a|\n", proc.stderr.split("cause: ", 1)[1])[0]
    assert "root cause above" not in cause and "memory" in cause.lower(), proc.stderr[-3000:]
    assert cause.split(":")[0].endswith("Error")
    assert cause in log  # the server's own line, as it wrote it
    assert proc.stderr.index("cause: ") < proc.stderr.index("last lines")  # said before the tail


@pytest.mark.slow
def test_a_kept_event_log_without_summary_is_noted_in_the_manifest_and_warned_once(tmp_path):
    """GIVEN a launch script whose "worker" left an event log without a summary line in the run's overlay folder
    (a STAND-IN server; the log is the committed switchback sample's, cut as a worker killed at shutdown leaves
    it) WHEN `record` runs it THEN the manifest says "status": "ok" AND notes the missing summary with its reason
    (`overlay_summary`, a note), and the run's analysis warns about it once."""
    import json

    from shared_paths import REPO  # type: ignore[import-not-found]  (tests/ is on sys.path)

    (sample,) = (REPO / "traces/samples/tiny-cpu-switchback/overlay").glob("expo-prof-events-*.jsonl")
    cut = tmp_path / "killed.jsonl"
    cut.write_text("".join(line + "\n" for line in sample.read_text().splitlines() if '"type":"summary"' not in line))
    standin = REPO / "tests" / "support" / "openai_standin.py"
    port = free_port()
    script = tmp_path / "serve.sh"
    script.write_text(f'#!/bin/sh\ncp {cut} "$EXPO_PROF_OUT/expo-prof-events-vm-1.jsonl"\n'
                      f'exec {sys.executable} {standin} --max-model-len 256 "$@"\n')
    script.chmod(0o755)
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "expo_prof", "record", "--out", str(run), "--profiler", "none",
                           "--no-load", "--duration", "2", "--", str(script), "--port", str(port)],
                          cwd=tmp_path, env={**os.environ, **ENV, "COLUMNS": "200"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = json.loads((run / "manifest.json").read_text())
    assert m["status"] == "ok"
    assert m["overlay_summary"]["missing"] == ["overlay/expo-prof-events-vm-1.jsonl"]
    assert "killed before it could write its summary" in m["overlay_summary"]["why"]
    assert any("no summary line" in n and "expo-prof-events-vm-1.jsonl" in n for n in m["notes"])
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if "no summary line" in line]
    assert len(said) == 1, said


def test_a_burst_of_unanswered_requests_from_a_dying_server_is_its_death(tmp_path, monkeypatch):
    """GIVEN requests that got no answer (connection reset) while the server's process has not been reaped yet —
    a SIGKILLed server resets its connections before it can be waited for (stop 47's CI: "too many requests
    failed" for a killed server) — WHEN record asks whether they were the server dying THEN a process that exits
    within the wait is the server's death, one that stays up is not (the failures count as the share), and an HTTP
    refusal is never waited on: the server answered it."""
    from types import SimpleNamespace

    from expo_prof.record import runner
    from expo_prof.record.runner import Recorder, RecordOptions
    from expo_prof.serving.client import Client
    from expo_prof.serving.load import RequestResult

    monkeypatch.setattr(runner, "GONE_WAIT_S", 1.0)
    user = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "M", "--port", "8000"]
    rec = Recorder(user, tmp_path, RecordOptions(), quiet=True)
    policy = Client("http://127.0.0.1:8000", timeout_s=1.0)
    reset = policy.no_answer("POST /v1/completions", ConnectionResetError(104, "Connection reset by peer"))
    refused = policy.refused(500, "POST /v1/completions", b"Internal Server Error")
    unanswered = RequestResult(ok=False, prompt_len=1, error=str(reset))
    answered = RequestResult(ok=False, prompt_len=1, error=str(refused))
    dying = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    staying = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        rec.srv = SimpleNamespace(proc=dying)
        assert dying.poll() is None  # not yet exited when the burst is seen
        assert rec._exits_soon(unanswered)
        assert rec._exit_words() == "the server exited with code 0"
        rec.srv = SimpleNamespace(proc=staying)
        assert not rec._exits_soon(unanswered) and staying.poll() is None
        t0 = time.monotonic()
        assert not rec._exits_soon(answered)
        assert time.monotonic() - t0 < 0.5  # not waited on
    finally:
        staying.kill()
        staying.wait()
