"""Overlap figures read back from the overlay's JSONL event log, shared by the overlay benchmarks."""

from __future__ import annotations

import json
from pathlib import Path


def overlap(a, b) -> int:
    """Length of the overlap of two ``[start, end]`` windows (0 when apart)."""
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def event_log_hidden(out_dir: str) -> tuple[float, float, int]:
    """Hidden fraction and mean wait (ms) from the event log the instrumented overlay wrote, and the steps used."""
    exp = hid = wait = n = 0
    for p in Path(out_dir).glob("expo-prof-events-*.jsonl"):
        for line in p.read_text().splitlines():
            o = json.loads(line)
            if o.get("type") == "step" and o.get("used") and o.get("exp") and o.get("fwd"):
                exp += o["exp"][1] - o["exp"][0]
                hid += overlap(o["exp"], o["fwd"])
                wait += o["wait"][1] - o["wait"][0]
                n += 1
    return (hid / exp if exp else float("nan")), (wait / n / 1e6 if n else float("nan")), n
