"""Fixtures of the HTML tests: recorded runs, real traces, and a real headless Chromium.

Chromium (Debian: ``apt-get install -y chromium``) is driven over the DevTools
protocol (``tests/support/headless.py``). Missing Chromium fails the browser
tests under ``CI=true`` and skips them elsewhere (``tests/conftest.py``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from html_helpers import require  # type: ignore[import-not-found]

HERE = Path(__file__).resolve().parent


def make_run(out: Path, overlay: str, *extra: str) -> Path:
    """Record a real run directory with tests/html/make_run.py (real torch profiler, CPU)."""
    r = subprocess.run(
        [sys.executable, str(HERE / "make_run.py"), str(out), "--overlay", overlay, *extra],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def torch_available() -> None:
    import importlib.util

    require(importlib.util.find_spec("torch") is not None, "torch (to record a profiled run)")


@pytest.fixture(scope="session")
def run_on(tmp_path_factory, torch_available) -> Path:
    """A recorded run: the draw on a spare thread during the forward (overlay on)."""
    return make_run(tmp_path_factory.mktemp("runs") / "02-on", "on")


@pytest.fixture(scope="session")
def run_off(tmp_path_factory, torch_available) -> Path:
    """A recorded run: the draw inline after the forward (overlay off)."""
    return make_run(tmp_path_factory.mktemp("runs") / "01-off", "off")


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory, run_off, run_on) -> Path:
    """A session directory (``record --overlay both`` layout) holding the off and on runs."""
    import json
    import shutil

    top = tmp_path_factory.mktemp("session")
    shutil.copytree(run_off, top / "01-off")
    shutil.copytree(run_on, top / "02-on")
    (top / "session.json").write_text(json.dumps({
        "schema": 1, "command": ["make_run.py"], "status": "ok",
        "runs": [{"dir": "01-off", "overlay": False, "status": "ok"}, {"dir": "02-on", "overlay": True, "status": "ok"}],
    }))
    return top


@pytest.fixture(scope="session")
def evil_run(tmp_path_factory, torch_available) -> Path:
    """A recorded run whose span names are markup (``<script>``, ``"><img onerror=…>``)."""
    return make_run(tmp_path_factory.mktemp("runs") / "evil", "on", "--evil-names", "--steps", "6")


@pytest.fixture(scope="session")
def vllm_cpu_trace(realtraces) -> Path:
    """Real vLLM 0.32 CPU trace with 32 ``aten::exponential_`` draws (fp64 gumbel path)."""
    p = realtraces / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz"
    require(p.is_file(), str(p))
    return p


@pytest.fixture(scope="session")
def nccl_trace(realtraces) -> Path:
    """Real A100 trace: NCCL kernels on stream 40 partly under compute on stream 7 (``--op nccl``)."""
    p = realtraces / "hta" / "tests" / "data" / "nccl_parser_config" / "nccl_data.json.gz"
    require(p.is_file(), str(p))
    return p


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the session."""
    from support.headless import Chromium, find_chromium

    require(find_chromium() is not None, "chromium (Debian: apt-get install -y chromium)")
    require(__import__("importlib").util.find_spec("websocket") is not None, "websocket-client")
    with Chromium() as c:
        yield c


@pytest.fixture
def open_page(chromium):
    """``open_page(path, offline=False)`` → a Page that loaded the file and whose script signalled ready."""
    pages = []

    def _open(path: Path, offline: bool = False, timeout: float = 60.0):
        page = chromium.new_page()
        pages.append(page)
        page.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        if offline:
            page.send("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0})
        page.navigate(path.resolve().as_uri(), timeout=timeout)
        deadline = time.monotonic() + timeout
        while not page.evaluate("document.body && document.body.dataset.ready === '1'"):
            assert time.monotonic() < deadline, f"page never became ready; errors: {page.errors()}"
            time.sleep(0.05)
        page.drain(0.2)
        return page

    yield _open
    for p in pages:
        p.close()
