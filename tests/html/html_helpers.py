"""Helpers shared by the HTML tests (imported by module name; pytest puts this folder on sys.path)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Real recorded runs committed by the project (``expo-prof record`` / ``demo`` output).
SAMPLES = REPO / "traces" / "samples"
DATA_RE = re.compile(r'<script type="application/json" id="expo-data">(.*?)</script>', re.S)


def require(ok: bool, what: str) -> None:
    """Fail under CI=true, skip elsewhere, when a requirement is missing."""
    if not ok:
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on"):
            pytest.fail(f"missing requirement under CI=true: {what}")
        pytest.skip(f"missing requirement: {what}")


def page_data(html: str) -> dict:
    """The JSON payload embedded in a page (what the page's script reads)."""
    m = DATA_RE.search(html)
    assert m, "no data block in the page"
    data = json.loads(m.group(1))
    if data.get("kind") == "timeline":  # packed columns: decoded by the Python twin of the page's script
        from expo_prof.html.timeline_data import decode_page

        data = decode_page(data)
    return data


def wait_for(page, expr: str, timeout: float = 10.0):
    """Poll a JavaScript expression until it is truthy; returns its value."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        v = page.evaluate(expr)
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out waiting for {expr}"
        time.sleep(0.05)


def sample_runs() -> list[Path]:
    """Run directories under traces/samples (a session's runs included)."""
    if not SAMPLES.is_dir():
        return []
    return sorted(p.parent for p in SAMPLES.rglob("manifest.json"))


def to_precision3(x: float) -> str:
    """Python twin of JavaScript's ``x.toPrecision(3)`` (what the report prints for a p-value)."""
    import math

    if x == 0:
        return "0.00"
    e = math.floor(math.log10(abs(float(f"{x:.2e}"))))
    if e < -6 or e >= 3:
        mant, exp = f"{x:.2e}".split("e")
        return f"{mant}e{'+' if int(exp) >= 0 else '-'}{abs(int(exp))}"
    return f"{x:.{max(0, 2 - e)}f}"
