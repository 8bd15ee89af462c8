"""The step itself (issue 33 item 5): step time, the critical path's share of it, prefill and decode apart, the
batch, and q's shape and dtype — per step, in the summary and in the worst-steps table.

Real inputs: the committed runs recorded by ``expo-prof record`` on the real vLLM CPU server (traces/samples/)
and a real vLLM CPU Kineto trace (../shared/realtraces). Every expected figure is read here from the source
files themselves (vLLM's step annotation names, the overlay log's lines), never from expo-prof's output.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from support.analyze_cli import analyze_out

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"
ON = SAMPLES / "tiny-cpu-off-on" / "02-on"
SWITCHBACK = SAMPLES / "tiny-cpu-switchback"
ANNOTATION = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)$")


def _annotations(run: Path) -> list[tuple[int, int, int, int, int]]:
    """vLLM's step annotations of the run's model trace, in time order: (ctx reqs, ctx tokens, gen reqs, gen tokens,
    dur ns)."""
    trace = next(p for p in (run / "profiler").glob("rank0.*.pt.trace.json.gz"))
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    found = sorted((e["ts"], e) for e in events if e.get("ph") == "X" and ANNOTATION.match(e.get("name", "")))
    out = []
    for _ts, e in found:
        m = ANNOTATION.match(e["name"])
        assert m is not None
        a, b, c, d = (int(g) for g in m.groups())
        out.append((a, b, c, d, int(e["dur"] * 1000)))
    return out


def _log_steps(run: Path) -> dict[int, dict]:
    log = next((run / "overlay").glob("expo-prof-events-*.jsonl"))
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return {x["step"]: x for x in lines if x["type"] == "step"}


def test_trace_steps_say_prefill_or_decode_batch_and_time(capsys):
    """GIVEN the real overlay-on run, its Kineto trace carrying vLLM's execute_context_N(T)_generation_M(T) step
    annotations WHEN analyze --json reads it THEN each step says prefill (a prompt request in the batch) or decode
    and its batch as the annotation of that step says, a step time at least the annotation's span and within the
    step's window, and its critical path's share of it; the summary counts prefill and decode steps apart, and
    q's shapes are those the run's overlay log launched."""
    doc = json.loads(analyze_out(capsys, str(ON), "--json"))
    ann = _annotations(ON)
    steps = doc["steps"]
    assert len(steps) == 33 and len(ann) >= 33  # a step that drew nothing has no row
    for s in steps:
        a, b, c, d, dur = ann[s["step"]]
        assert s["kind"] == ("prefill" if a > 0 else "decode")
        assert (s["reqs"], s["tokens"]) == (a + c, b + d)
        assert dur - 1000 <= s["own_ns"] <= s["end_ns"] - s["start_ns"]
        assert s["critical_share"] == pytest.approx(s["critical_ns"] / s["own_ns"])
    st = doc["summary"]["step_breakdown"]
    n_pre = sum(1 for s in steps if ann[s["step"]][0] > 0)
    assert 0 < n_pre < len(steps)  # the run holds both kinds
    assert (st["prefill"]["step_count"], st["decode"]["step_count"]) == (n_pre, len(steps) - n_pre)
    pre = [s for s in steps if s["kind"] == "prefill"]
    assert st["prefill"]["critical_share"] == pytest.approx(
        sum(s["critical_ns"] for s in pre) / sum(s["own_ns"] for s in pre))
    launched = Counter((x["rows"], x["vocab"], x["dtype"]) for x in _log_steps(ON).values() if x["rows"] > 0)
    assert {(q["rows"], q["vocab"], q["dtype"]): q["step_count"] for q in st["q"]} == dict(launched)
    assert st["q_from"] == "overlay-log"  # counted over the log's steps, not the trace's: said so
    assert st["missing"] == {}


def test_overlay_log_steps_carry_their_own_figures(capsys):
    """GIVEN the real switchback run's overlay event log (schema 2: reqs, tokens, host_end per step) WHEN analyze
    --json reads it THEN each step's time runs from its t0 to the end of its last part, prefill is a step whose
    forward computed more tokens than requests, and q is the shape and dtype the step launched."""
    doc = json.loads(analyze_out(capsys, str(SWITCHBACK), "--json"))
    log = _log_steps(SWITCHBACK)
    kinds = Counter()
    for s in doc["steps"]:
        x = log[s["step"]]
        ends = [x["host_end"]] + [x[k][1] for k in ("fwd", "exp", "wait", "sample") if x.get(k)]
        assert s["own_ns"] == max(ends)
        assert s["kind"] == ("prefill" if x["tokens"] > x["reqs"] else "decode")
        assert s["reqs"] == x["reqs"]
        assert (s["q_rows"], s["q_vocab"], s["q_dtype"]) == (x["rows"], x["vocab"], x["dtype"])
        nxt = log.get(s["step"] + 1)  # the cadence: to the very next step's t0 (None at the end or a gap)
        assert s["cadence_ns"] in (None, nxt and nxt["t0_ns"] - x["t0_ns"])
        kinds[s["kind"]] += 1
    timed = [s["cadence_ns"] for s in doc["steps"] if s["cadence_ns"] is not None]
    assert len(timed) > 0.9 * len(doc["steps"])  # only the last step and idle gaps lack one
    st = doc["summary"]["step_breakdown"]
    assert st["overall"]["cadence_ns"]["mean"] == pytest.approx(sum(timed) / len(timed))
    assert kinds["prefill"] > 0 and (st["prefill"]["step_count"], st["decode"]["step_count"]) == (kinds["prefill"],
                                                                                         kinds["decode"])


def test_text_shows_the_step_and_worst_steps_fit_80_columns(capsys, monkeypatch):
    """GIVEN the real overlay-on run WHEN analyze prints its tables at 80 columns THEN a "The step" block gives the
    step time p50, the critical path's share, prefill and decode rows with their counts, the batch and q; the
    worst-steps table gives each step's kind, batch, time and share as the JSON has them; no line passes 80
    columns and no figure is cut."""
    monkeypatch.setenv("COLUMNS", "80")
    doc = json.loads(analyze_out(capsys, str(ON), "--json"))
    out = analyze_out(capsys, str(ON))
    st = doc["summary"]["step_breakdown"]
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines) and "…" not in out
    block = lines[next(i for i, line in enumerate(lines) if line.startswith("The step")):]
    rows = {line.split()[0]: line.split() for line in block[:6]}
    assert rows["prefill"][1] == str(st["prefill"]["step_count"]) and rows["decode"][1] == str(st["decode"]["step_count"])
    assert rows["all"][-1] == f"{100 * st['overall']['critical_share']:.1f}%"
    assert any(line.startswith(f"batch: {st['batch']['p50']} requests p50") for line in block)
    assert any(line.startswith("q (all overlay-log steps)") and "652 float32" in line for line in block)
    by_step = {s["step"]: s for s in doc["steps"]}
    w = next(i for i, line in enumerate(lines) if line.startswith("Worst steps"))
    assert lines[w + 1].split()[:4] == ["rank", "step", "P/D", "reqs"]
    shown = 0
    for line in lines[w + 2:]:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        s = by_step[int(cells[1])]
        assert cells[2] == {"prefill": "P", "decode": "D"}[s["kind"]] and cells[3] == str(s["reqs"])
        assert cells[-1] == f"{100 * s['critical_share']:.1f}%"
        shown += 1
    assert shown == 10


def test_what_a_source_cannot_give_is_said_once_with_why(capsys, realtraces):
    """GIVEN a real vLLM CPU Kineto trace without an overlay log, and the overlay-on run read from its schema-1
    overlay log WHEN analyze prints them THEN the figure the source cannot give is named once with its reason
    (q's shape: a profiler trace does not record it; prefill / decode: a schema-1 log has no tokens), and the
    JSON's summary.step_breakdown.missing says the same."""
    trace = realtraces / "vllm-cpu" / "rank0-default-with-stack.pt.trace.json.gz"
    out = analyze_out(capsys, str(trace))
    assert out.count("q shape and dtype: not measured — a profiler trace does not record q's shape") == 1
    doc = json.loads(analyze_out(capsys, str(trace), "--json"))
    assert set(doc["summary"]["step_breakdown"]["missing"]) == {"q shape and dtype"}
    assert doc["summary"]["step_breakdown"]["prefill"]["step_count"] > 0  # its annotations still tell the kinds apart
    out = analyze_out(capsys, str(ON), "--source", "overlay-log")
    assert out.count("prefill / decode: not measured — the overlay log is schema 1") == 1
    doc = json.loads(analyze_out(capsys, str(ON), "--source", "overlay-log", "--json"))
    st = doc["summary"]["step_breakdown"]
    assert st["prefill"] is None and "schema 1" in st["missing"]["prefill / decode"]
    assert all(s["kind"] is None and s["own_ns"] for s in doc["steps"])


def test_bound_share_uses_the_step_table_time(capsys):
    """GIVEN the real overlay-off run (vLLM CPU's fused Gumbel op: the sampling bound) WHEN analyze --json reads
    it THEN the bound's step time is the mean of the steps' own step time, so its share and the step table's
    agree (one step time on the page, not the window to the next step beside the step's own)."""
    doc = json.loads(analyze_out(capsys, str(SAMPLES / "tiny-cpu-off-on" / "01-off"), "--json"))
    steps = [s for s in doc["steps"] if s["step"] is not None]
    bound = doc["recordings"][0]["bound"]
    assert bound["own_ns"] == pytest.approx(sum(s["own_ns"] for s in steps) / len(steps))
    assert bound["own_ns"] < sum(s["end_ns"] - s["start_ns"] for s in steps) / len(steps)


def test_readme_walkthrough_shows_the_real_step_block(capsys, monkeypatch):
    """GIVEN the README's walkthrough of the step breakdown WHEN analyze prints the committed run it names at 80
    columns THEN every line of the README's block is a line of that output, in order (real output, not invented)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### The step each figure belongs to"):]
    block = section[section.index("```\n") + 4:section.index("\n```", section.index("```\n") + 4)].splitlines()
    assert block[0].startswith("The step") and any(line.startswith("prefill") for line in block)
    monkeypatch.setenv("COLUMNS", "80")
    out = analyze_out(capsys, str(ON), "--top", "3").splitlines()
    start = out.index(block[0])
    assert out[start:start + len(block)] == block


def test_export_steps_track_carries_the_step_figures(tmp_path, capsys):
    """GIVEN the real overlay-on run WHEN it is exported to a Chrome trace THEN each slice of the added steps track
    carries the step's own time, prefill or decode and batch as vLLM's annotation of that step says (and as
    analyze --json gives them); steps that drew nothing too."""
    from expo_prof.cli.main import main

    out = tmp_path / "annotated.json"
    with pytest.raises(SystemExit) as ei:
        main(["export", str(ON), "-o", str(out)])
    err = capsys.readouterr().err
    assert ei.value.code == 0, err
    events = json.loads(out.read_text())["traceEvents"]
    slices = [e for e in events if e.get("cat") == "expo_prof" and e.get("name", "").startswith("step ")]
    ann = _annotations(ON)
    assert len(slices) == len(ann)
    doc = json.loads(analyze_out(capsys, str(ON), "--json"))
    by_step = {s["step"]: s for s in doc["steps"]}
    for e in slices:
        args = e["args"]
        a, b, c, d, _dur = ann[args["step"]]
        assert args["kind"] == ("prefill" if a > 0 else "decode") and args["reqs"] == a + c
        assert args["tokens"] == b + d and args["own_ns"] > 0
        if args["step"] in by_step:
            assert args["own_ns"] == by_step[args["step"]]["own_ns"]


def test_no_step_markers_is_said_once_with_why(capsys, realtraces):
    """GIVEN a real vLLM decode trace (CUDA graphs) without ProfilerStep#N or vLLM's step annotation WHEN analyze
    --op aten::mm prints it THEN the step figures it cannot give are named once, with the reason (no step
    markers), instead of an empty block; the JSON's steps have no step time and summary.step_breakdown.missing says why."""
    trace = realtraces / "tracelens/tests/traces/inference/vllm_decode_full/graph_execution.json.gz"
    out = analyze_out(capsys, str(trace), "--op", "aten::mm")
    assert out.count("not measured — no step markers in the") == 1
    assert "own time, prefill / decode, batch size: not measured" in out and "The step" not in out
    doc = json.loads(analyze_out(capsys, str(trace), "--op", "aten::mm", "--json"))
    assert all(s["own_ns"] is None and s["kind"] is None for s in doc["steps"])
    assert "no step markers" in doc["summary"]["step_breakdown"]["missing"]["own time"]
