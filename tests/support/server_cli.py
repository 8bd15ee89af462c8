"""Run the ``expo-prof`` CLI in a subprocess beside a real vLLM CPU server (the e2e tests' one helper).

The environment is the test process's without any ``EXPO_PROF_*`` / ``VLLM_ASCEND_*`` switch (so a switch set
for the session never leaks into the recorded server), offline, with a small KV cache and wide tables.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def expo_prof(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m expo_prof ARGS`` from the repository root; the completed process (its output captured).
    ``env``: more variables for the command and the servers it starts (a configuration's pinning)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("EXPO_PROF_", "VLLM_ASCEND_"))}
    full.update({"COLUMNS": "200", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
                 "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO), **(env or {})})
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=full)
