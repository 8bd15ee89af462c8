"""expo_prof.serving.launch: startup failures are clear, shutdown leaves no process behind.

Shutdown is exercised with real processes that resist it (ignore SIGINT and
SIGTERM, escape the process group); startup failure with a real vLLM that
cannot load its model.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time

import pytest

from expo_prof.errors import EXIT_RUN_FAILED
from expo_prof.serving.launch import ServerFailed, VllmServer, free_port, live_processes, server_env, vllm_argv

# A "server" that never serves: it ignores SIGINT/SIGTERM, starts a child that
# does the same, and a grandchild that leaves the process group with setsid().
_STUBBORN = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time, json
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    code = ("import signal,time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)")
    child = subprocess.Popen([sys.executable, "-c", code])
    escaper = subprocess.Popen([sys.executable, "-c", "import os,time; time.sleep(600)"], start_new_session=True)
    with open(sys.argv[1], "w") as f:
        json.dump([os.getpid(), child.pid, escaper.pid], f)
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_stop_escalates_and_leaves_no_orphan(tmp_path):
    """GIVEN a server process tree that ignores SIGINT and SIGTERM, with one
    grandchild outside the process group WHEN stop() runs THEN all of it is
    gone (SIGKILL in the end), within the grace periods."""
    pids_file = tmp_path / "pids.json"
    srv = VllmServer("unused", argv=[sys.executable, "-c", _STUBBORN, str(pids_file)], log_path=tmp_path / "log")
    srv.start()
    deadline = time.monotonic() + 30
    while not pids_file.exists() or not pids_file.read_text():
        assert time.monotonic() < deadline, srv.log_tail()
        time.sleep(0.1)
    time.sleep(0.3)
    pids = json.loads(pids_file.read_text())
    srv._remember_children()  # what wait_ready() does while polling
    assert all(_alive(p) for p in pids)
    t0 = time.monotonic()
    # (short SIGINT and SIGTERM waits: the tree ignores both, so each is waited out in full before SIGKILL)
    srv.stop(grace_s=1.0, term_s=1.0)
    took = time.monotonic() - t0
    assert not [p for p in pids if _alive(p)], "processes survived stop()"
    assert live_processes(srv.pid, srv.pid, set(pids)) == set()
    assert took < 1.0 + 1.0 + 10 + 5  # SIGINT grace + SIGTERM + SIGKILL waits, never a hang
    srv.stop()  # idempotent


def test_not_ready_in_time_is_a_clear_failure_and_kills_it(tmp_path):
    """GIVEN a command that never answers HTTP WHEN waiting with a 2 s timeout
    THEN ServerFailed (exit code 3) says 'not ready' and quotes the log, and
    the process is stopped."""
    code = "print('booting the pretend server', flush=True); import time; time.sleep(600)"
    srv = VllmServer("unused", argv=[sys.executable, "-c", code], log_path=tmp_path / "log", startup_timeout=2)
    with pytest.raises(ServerFailed) as exc:
        with srv:
            pass
    assert exc.value.exit_code == EXIT_RUN_FAILED
    assert "not ready after 2 s" in str(exc.value) and "booting the pretend server" in str(exc.value)
    assert not _alive(srv.pid)


def test_early_exit_is_reported_with_the_log_tail(tmp_path):
    """GIVEN a command that dies at once WHEN waiting for readiness THEN the
    failure comes at once (not after the timeout) with its exit code and output."""
    code = "import sys; print('ValueError: no such model', file=sys.stderr); sys.exit(7)"
    srv = VllmServer("unused", argv=[sys.executable, "-c", code], log_path=tmp_path / "log", startup_timeout=120)
    t0 = time.monotonic()
    with pytest.raises(ServerFailed, match=r"exited during startup \(exit code 7\)[\s\S]*no such model"):
        with srv:
            pass
    assert time.monotonic() - t0 < 30


def test_ready_server_answers_and_a_dead_one_is_named_with_its_log(tmp_path):
    """GIVEN the STAND-IN OpenAI server (tests/support/openai_standin.py) launched as the server's command, its
    /health answering 503 for its first second WHEN waited for THEN ready with its model id, and a greedy
    completion answers; GIVEN the process then killed WHEN asked again THEN ServerFailed says it died, with the
    log path."""
    import signal

    import support.openai_standin as standin  # type: ignore[import-not-found]  (tests/ is on sys.path)

    port = free_port()
    argv = [sys.executable, standin.__file__, "--port", str(port), "--ready-after", "1"]
    with VllmServer("unused", argv=argv, port=port, log_path=tmp_path / "log", startup_timeout=60) as srv:
        assert srv.model_id == standin.MODEL
        assert srv.completion("hi", max_tokens=2, temperature=0.0)["choices"][0]["token_ids"] == [0, 0]
        os.killpg(srv.pid, signal.SIGKILL)
        srv.proc.wait(timeout=10)
        with pytest.raises(ServerFailed, match=r"died during POST /v1/completions \(exit code -9\); log "):
            srv.completion("hi", max_tokens=1)


def test_env_defaults_overrides_and_removal():
    """GIVEN a base environment with an overlay switch WHEN building the server
    env with that switch mapped to None THEN it is removed, defaults are added,
    and explicit overrides win over defaults."""
    env = server_env({"EXPO_PROF_ASYNC_EXPONENTIAL": None, "VLLM_CPU_KVCACHE_SPACE": "2"},
                     base={"EXPO_PROF_ASYNC_EXPONENTIAL": "1", "PATH": "/bin"})
    assert "EXPO_PROF_ASYNC_EXPONENTIAL" not in env
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env["PATH"] == "/bin" and env["HF_HUB_OFFLINE"] == "1"


def test_argv_and_free_port():
    """GIVEN a model and a free port WHEN building the argv THEN it is the
    module entry point (not the broken console script) with the port, float32
    and eager mode."""
    port = free_port()
    argv = vllm_argv("/m", port)
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--port") + 1] == str(port) and "--enforce-eager" in argv
    assert argv[argv.index("--dtype") + 1] == "float32"
    assert argv[argv.index("--shutdown-timeout") + 1] == "10"  # draining stop: the event log gets its summary
    assert 0 < port < 65536 and os.path.isabs(argv[0])


def test_real_vllm_with_a_broken_model_fails_clearly(vllm_server, tmp_path):
    """GIVEN a real vLLM asked to serve a directory that is no model WHEN
    started THEN ServerFailed arrives early, with vLLM's own error in the tail."""
    bogus = tmp_path / "not-a-model"
    bogus.mkdir()
    (bogus / "config.json").write_text("{}")
    t0 = time.monotonic()
    with pytest.raises(ServerFailed, match="exited during startup"):
        with vllm_server(model=bogus):
            pass
    assert time.monotonic() - t0 < 240
