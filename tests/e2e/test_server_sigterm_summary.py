"""A user's own vLLM server (no ``--shutdown-timeout``) stopped with SIGTERM keeps the overlay's summary
(issue 33, item 7): one real vLLM CPU server launch.

vLLM's default ``--shutdown-timeout 0`` makes the API server SIGTERM the engine process and SIGKILL it at once,
so the overlay's exit code never runs; its writer thread's checkpoint summary (``"final": false``), written when
the steps stopped, is what keeps the counts.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from expo_prof.readers.overlay_log import NO_SUMMARY, missing_summary
from overlay.contract import ENV_INSTRUMENT, ENV_OUT, ENV_SWITCH, ENV_SWITCH_ALIAS, EVENT_LOG_GLOB

EXPO_PROF = [str(Path(sys.executable).parent / "expo-prof")]


def test_sigterm_without_shutdown_timeout_keeps_the_summary(vllm_server, tmp_path):
    """GIVEN a real vLLM CPU server started as a user starts it — no --shutdown-timeout — with the overlay on,
    having served sampled requests WHEN it is stopped with SIGTERM (kill PID, systemd, docker stop) THEN every
    event log with step lines ends with a summary line counting them, record's check finds nothing missing,
    and `analyze` reads the counts from it with no "no summary line" warning."""
    out = tmp_path / "overlay"
    env = {ENV_SWITCH: "1", ENV_SWITCH_ALIAS: None, ENV_OUT: str(out), ENV_INSTRUMENT: None}
    with vllm_server(env=env, shutdown_timeout=None) as srv:
        assert "--shutdown-timeout" not in srv.argv
        for i in range(3):
            ans = srv.completion(f"prompt {i}", max_tokens=12, temperature=1.0, ignore_eos=True)
            assert ans["usage"]["completion_tokens"] == 12
        srv.proc.send_signal(signal.SIGTERM)  # the API server only, as `kill PID` does
        srv.proc.wait(timeout=120)
        log_text = srv.log_path.read_text(errors="replace")
    logs = {p: [json.loads(line) for line in p.read_text().splitlines()] for p in sorted(out.glob(EVENT_LOG_GLOB))}
    stepped = {p: lines for p, lines in logs.items() if any(o["type"] == "step" for o in lines)}
    assert stepped, (list(logs), log_text[-2000:])
    for path, lines in stepped.items():
        assert lines[-1]["type"] == "summary", (path.name, lines[-1], log_text[-2000:])
        assert lines[-1]["steps"] == sum(o["type"] == "step" for o in lines) >= 12
        assert missing_summary(path) is None
    res = subprocess.run([*EXPO_PROF, "analyze", str(out), "--json"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert not [w for w in json.loads(res.stdout)["warnings"] if NO_SUMMARY in w]
    print("final flags:", [lines[-1].get("final") for lines in stepped.values()])
    print("force kill said:", "force killing" in log_text)
