"""The committed switchback sample (a real vLLM CPU run, traces/samples/tiny-cpu-switchback): every command says
the same saving, and the saving is what the documented method gives when worked out independently.

GIVEN the committed run, recorded by ``expo-prof record --overlay switchback`` on the real vLLM CPU server
(tiny 32k-vocabulary Llama, the fp64-Gumbel path, the lane on the free core)
WHEN analyze, compare, timeline, export and report read it
THEN each prints the same saving line under the same headline; and the saving per step, its 95 % CI and the
implied tok/s change equal a plain re-computation of docs/ab.md's method from the event log's JSON lines
(json + statistics + scipy's t quantile, no expo-prof code).
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from scipy import stats as sps

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "traces" / "samples" / "tiny-cpu-switchback"


def cli(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    return proc


def recompute(log: Path) -> dict:
    """docs/ab.md's switchback method, written out plainly over the log's step lines."""
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    k = lines[0]["block_steps"]
    lo, hi = json.loads((RUN / "manifest.json").read_text())["load_window_ns"]
    shift = lines[0]["wall_ns"] - lines[0]["mono_ns"]
    steps = [x for x in lines if x["type"] == "step"]
    cad: dict[int, int] = {}
    for a, b in zip(steps, steps[1:]):
        if b["step"] == a["step"] + 1:
            cad[a["step"]] = b["t0_ns"] - a["t0_ns"]
    gap = {s["step"]: cad[s["step"]] - (s["host_end"] or 0) for s in steps if s["step"] in cad}
    limit = 10 * statistics.median(gap.values()) + 1_000_000
    seen_blocks: set[int] = set()
    kept = []
    for s in steps:
        if s["block"] is None:
            continue
        first = s["block"] not in seen_blocks  # the block's first step, wherever the load window starts
        seen_blocks.add(s["block"])
        if not lo <= s["t0_ns"] + shift <= hi:  # outside the measured load (the warm-up request)
            continue
        c = cad.get(s["step"])
        if first or c is None or gap[s["step"]] > limit or s["reqs"] <= 0:
            continue
        kept.append((s["block"], s["phase"], (s["reqs"], s["tokens"]), c))
    blocks_with = {b for b, *_ in kept}
    kept = [x for x in kept if (x[0] ^ 1) in blocks_with]
    by_pair: dict[int, dict] = defaultdict(lambda: defaultdict(lambda: {"off": [], "on": []}))
    for b, phase, shape, c in kept:
        by_pair[b // 2][shape][phase].append(c)
    diffs, offs = [], []
    for p in sorted(by_pair):
        w_sum = off_sum = d_sum = 0.0
        for v in by_pair[p].values():
            if v["off"] and v["on"]:
                w = len(v["off"]) * len(v["on"]) / (len(v["off"]) + len(v["on"]))
                m_off, m_on = statistics.fmean(v["off"]), statistics.fmean(v["on"])
                w_sum += w
                off_sum += w * m_off
                d_sum += w * (m_off - m_on)
        if w_sum:
            diffs.append(d_sum / w_sum)
            offs.append(off_sum / w_sum)
    n = len(diffs)
    mean = statistics.fmean(diffs)
    half = sps.t.ppf(0.975, n - 1) * statistics.stdev(diffs) / math.sqrt(n)
    off = statistics.fmean(offs)
    return {"k": k, "pairs": n, "saving": mean, "ci": [mean - half, mean + half], "off": off,
            "tok": 100 * (off / (off - mean) - 1)}


def test_the_saving_is_the_documented_method_worked_out_by_hand():
    (log,) = (RUN / "overlay").glob("expo-prof-events-*.jsonl")
    want = recompute(log)
    doc = json.loads(cli("analyze", str(RUN), "--json").stdout)
    (s,) = doc["recordings"][0]["savings"]
    assert (s["block_steps"], s["pairs"]) == (want["k"], want["pairs"]) and want["pairs"] >= 10
    assert s["saving"]["mean_ns"] == pytest.approx(want["saving"], rel=1e-9)
    assert s["saving"]["ci_ns"] == pytest.approx(want["ci"], rel=1e-9)
    assert s["baseline_cadence_ns"] == pytest.approx(want["off"], rel=1e-9)
    assert s["tokps_change_pct"] == pytest.approx(want["tok"], rel=1e-9)
    # AND it is a clear win here (the fp64 draw leaves the critical path), said in ab's words
    assert s["decision"] == "enable" and s["saving"]["ci_ns"][0] > 0


def test_every_command_says_the_same_saving_line(tmp_path):
    doc = json.loads(cli("analyze", str(RUN), "--json").stdout)
    entry = doc["recordings"][0]
    line, head = entry["saving_line"], entry["headline"]
    assert line.startswith("saving (switchback): enable — saves ")
    flat = lambda p: " ".join(p.stdout.split())  # noqa: E731
    outs = {
        "analyze": cli("analyze", str(RUN)),
        "compare": cli("compare", str(RUN)),
        "timeline": cli("timeline", str(RUN), "-o", str(tmp_path / "t.html")),
        "export": cli("export", str(RUN), "-o", str(tmp_path / "e.json")),
        "report": cli("report", str(RUN), "-o", str(tmp_path / "r.html")),
    }
    for name, proc in outs.items():
        assert " ".join(line.split()) in flat(proc), name
        if name != "compare":  # compare speaks of the saving only
            assert " ".join(head.split()) in flat(proc), name
    # AND compare --json of the run is the same saving, in the documented switchback schema
    sb = json.loads(cli("compare", str(RUN), "--json").stdout)
    assert (sb["schema_name"], sb["saving_line"], sb["savings"]) == ("expo-prof.switchback", line, entry["savings"])


def test_the_answer_leads_the_terminal(tmp_path):
    """GIVEN the switchback sample WHEN analyze prints its tables THEN the first thing on stdout is the saving line
    (the measured decision with its interval), and every overlap figure (hidden, the critical path) comes after it."""
    doc = json.loads(cli("analyze", str(RUN), "--json").stdout)
    line = " ".join(doc["recordings"][0]["saving_line"].split())
    out = " ".join(cli("analyze", str(RUN)).stdout.split())
    assert out.startswith(line), out[:400]
    assert out.count(line) == 1  # said once: not again under the headline
    assert out.find("hidden") > len(line) and out.find("critical path") > len(line)
