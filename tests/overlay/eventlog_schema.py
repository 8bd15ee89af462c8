"""The event-log fields of docs/event-log.md, as checks for the tests.

Kept in the tests (not in ``overlay/``) so the documentation, not the writer,
is what the written lines are checked against.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from overlay.contract import EVENT_LOG_SCHEMA, FALLBACK_REASONS

NoneType = type(None)
WINDOW = (list, NoneType)

HEADER = {
    "type": str, "schema": int, "pid": int, "host": str, "rank": int, "backend": str,
    "lane": str, "instrument": bool, "run_id": (str, NoneType), "versions": dict,
    "clock": str, "mono_ns": int, "wall_ns": int, "mode": str, "block_steps": (int, NoneType),
    "arms": (list, NoneType),
}
STEP = {
    "type": str, "step": int, "rank": int, "rows": int, "vocab": int, "dtype": str,
    "launched": bool, "used": bool, "fallback": (str, NoneType), "t0_ns": int,
    "fwd": WINDOW, "exp": WINDOW, "wait": WINDOW, "timing": str,
    "sample": WINDOW, "host_end": (int, NoneType), "phase": str, "block": (int, NoneType), "reqs": int,
    "tokens": int,
}
NOTICE = {"type": str, "level": str, "code": str, "message": str, "t_ns": int}
SUMMARY = {"type": str, "final": bool, "steps": int, "launched": int, "used": int, "fallbacks": dict, "t_ns": int,
           "sampled_out": int, "dropped": int, "dropped_notices": int, "max_bytes": int}


def _check_fields(obj: dict[str, Any], fields: dict[str, Any]) -> None:
    missing = set(fields) - set(obj)
    assert not missing, f"{obj.get('type')} line lacks {sorted(missing)}: {obj}"
    for key, typ in fields.items():
        assert isinstance(obj[key], typ), f"{key}={obj[key]!r} is not {typ}"
        if typ is int:
            assert not isinstance(obj[key], bool), f"{key} must be an int, not a bool"


def _check_window(name: str, window: Any) -> None:
    if window is None:
        return
    assert len(window) == 2 and all(isinstance(v, int) for v in window), (name, window)
    assert window[0] <= window[1], f"{name} window ends before it starts: {window}"


def check_lines(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Validate a whole log against docs/event-log.md; returns lines by type."""
    assert lines, "empty event log"
    assert lines[0]["type"] == "header", "the header must be the first line"
    _check_fields(lines[0], HEADER)
    header = lines[0]
    assert header["schema"] == EVENT_LOG_SCHEMA
    assert header["backend"] in ("cpu", "cuda", "npu", "xpu")
    assert header["lane"] in ("thread", "stream")
    assert header["clock"] == "monotonic"
    assert header["mode"] in ("on", "switchback")
    assert (header["block_steps"] is not None) == (header["mode"] == "switchback")
    assert header["arms"] in ((["off", "on"], ["off", "on", "native"]) if header["mode"] == "switchback" else (None,))
    assert set(header["versions"]) >= {"expo_prof", "vllm", "torch", "torch_npu"}
    by_type: dict[str, list[dict[str, Any]]] = {"header": [header], "step": [], "notice": [], "summary": []}
    for obj in lines[1:]:
        kind = obj["type"]
        assert kind != "header", "exactly one header"
        by_type.setdefault(kind, []).append(obj)
        if kind == "step":
            _check_fields(obj, STEP)
            assert obj["rank"] == header["rank"]
            assert obj["dtype"] in ("float32", "float64")
            assert obj["timing"] in ("host", "device")
            assert obj["fallback"] is None or obj["fallback"] in FALLBACK_REASONS
            if obj["used"]:
                assert obj["launched"] and obj["fallback"] is None
            if not obj["launched"]:
                assert obj["rows"] == 0 and obj["vocab"] == 0 and not obj["used"]
            for name in ("fwd", "exp", "wait", "sample"):
                _check_window(name, obj[name])
            assert obj["phase"] in (header["arms"] or ["on"])
            assert (obj["block"] is not None) == (header["mode"] == "switchback")
            if obj["phase"] != "on":  # no overlay: nothing launched, nothing to fall back from but the batch
                assert header["mode"] == "switchback" and not obj["launched"]
                assert obj["fallback"] in (None, "all_greedy", "all_seeded")
            if obj["launched"]:
                assert obj["rows"] == obj["reqs"]
        elif kind == "notice":
            _check_fields(obj, NOTICE)
            assert obj["level"] in ("info", "warning", "error")
        elif kind == "summary":
            _check_fields(obj, SUMMARY)
    if by_type["summary"]:
        assert lines[-1]["type"] == "summary", "the summary must be the last line"
        # Checkpoints ("final": false, written while the process ran) come first, counting ever more steps;
        # the last summary line is the one that counts (docs/event-log.md).
        *checkpoints, summary = by_type["summary"]
        assert all(not c["final"] for c in checkpoints), "only the last summary may be final"
        counted = [c["steps"] for c in by_type["summary"]]
        assert counted == sorted(counted), counted
        steps = by_type["step"]
        # Every step is counted: in the file, left out by the size cap, or dropped (queue full).
        left_out = summary["sampled_out"] + summary["dropped"]
        assert summary["steps"] == len(steps) + left_out
        if not left_out:  # per-line counts only hold when every step line is in the file
            assert summary["launched"] == sum(s["launched"] for s in steps)
            assert summary["used"] == sum(s["used"] for s in steps)
            counts: dict[str, int] = {}
            for s in steps:
                if s["fallback"]:
                    counts[s["fallback"]] = counts.get(s["fallback"], 0) + 1
            assert summary["fallbacks"] == counts
    indices = [s["step"] for s in by_type["step"]]
    assert indices == sorted(indices) and len(set(indices)) == len(indices), indices
    return by_type


def read_log(directory: Path) -> tuple[Path, dict[str, list[dict[str, Any]]]]:
    """The single event log in ``directory``, validated."""
    files = sorted(directory.glob("expo-prof-events-*.jsonl"))
    assert len(files) == 1, files
    lines = [json.loads(line) for line in files[0].read_text().splitlines()]
    return files[0], check_lines(lines)
