"""Figures on one page never contradict (issue 33, items 1 and 2), on the committed real runs.

``traces/samples/tiny-cpu-off-on``: an overlay-off and an overlay-on run of vLLM's CPU server recorded by
``expo-prof record``. The off run's forward is vLLM's ``execute_context`` step span, the on run's the overlay's
``expo_prof::forward`` span: two different measures. 02-on holds a Kineto trace (the profiler's window) and the
overlay's event log (every step). ``traces/samples/tiny-cpu-switchback``: a switchback run (overlay log only).
``../shared/realtraces/vllm-cpu/rank0-default-with-stack``: a real vLLM CPU trace with empty steps.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from expo_prof.words import fmt_ns

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "traces" / "samples" / "tiny-cpu-off-on"
OFF, ON = SESSION / "01-off", SESSION / "02-on"
SWITCHBACK = REPO / "traces" / "samples" / "tiny-cpu-switchback"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=600,
                          cwd=REPO, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


def flat(text: str) -> str:
    return " ".join(text.split())


def warnings_of(stderr: str) -> list[str]:
    """The warning notes of a command's stderr, each joined onto one line."""
    return [flat(n[len("warning:"):]) for n in re.split(r"^(?=warning:|info:)", stderr, flags=re.M)
            if n.startswith("warning:")]


def analysis(path: Path, *args: str) -> dict:
    proc = cli("analyze", str(path), "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _mechanism() -> dict:
    proc = cli("compare", str(OFF), str(ON), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["mechanism"]


def test_unlike_forward_measures_name_no_cause():
    """GIVEN the committed off/on pair, whose forward is vLLM's execute_context span off and the
    expo_prof::forward span on (each run's analysis says its source)
    WHEN compared, and the report page written
    THEN no forward slowdown, net or cause is stated ("contention" nowhere), the statement says what is missing
    to name one, naming both spans; and the page's forward-cost card says "not measured", not the difference."""
    off_src = analysis(OFF)["summary"]["forward_source"]
    on_src = analysis(ON)["summary"]["forward_source"]
    assert off_src != on_src  # the premise: two measures
    m = _mechanism()
    assert m["forward_slowdown_us"] is None and m["net_us"] is None
    assert "contention" not in m["statement"] and "outweighs" not in m["statement"]
    assert m["cause_missing"] and f"no cause named: {m['cause_missing']}" in m["statement"]
    assert "execute_context" in m["cause_missing"] and "expo_prof::forward" in m["cause_missing"]
    text = flat(cli("compare", str(OFF), str(ON)).stdout)
    assert "no cause named" in text and "contention" not in text


def test_report_page_names_no_forward_cost_from_unlike_measures(tmp_path):
    """GIVEN the committed session WHEN `report` writes its page THEN the A/B payload carries compare's
    cause_missing and the difference of the two forward measures is not shown as the cost of overlap."""
    out = tmp_path / "r.html"
    proc = cli("report", str(SESSION), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    m = _mechanism()
    assert json.dumps(m["cause_missing"])[1:-1] in page
    fwd_off, fwd_on = m["forward_off_us"], m["forward_on_us"]
    assert f"{fwd_on - fwd_off:+.1f} µs/step" not in page and "contention" not in page


def test_a_falling_critical_path_beside_unlike_measures_gives_no_reconcile_figure(tmp_path):
    """GIVEN the committed session, whose per-run lines say the critical path per step fell (off → on) while
    the runs' TPOT rose (workload.json) — but the off runs' critical path is vLLM's fused noise+argmax op and the
    on runs' the draw alone, and their forwards are measured by different spans
    WHEN compared, and reported
    THEN the mechanism takes no figure off the critical path and reconciles nothing (the two critical paths time
    different things); it says why, naming both measures; and `report` prints no "fell by" sentence."""
    crit = [analysis(r)["summary"]["per_step"]["critical_ns"]["mean"] for r in (OFF, ON)]
    tpot = [json.loads((r / "workload.json").read_text())["metrics"]["mean_tpot_ms"] for r in (OFF, ON)]
    assert crit[1] < crit[0] and tpot[1] > tpot[0]  # the premise: the figures that read as contradictory
    m = _mechanism()
    assert m["exp_removed_us"] is None and m["rest_change_us"] is None and m["reconcile"] is None
    why = m["cause_missing"]
    assert "_C::fused_gumbel_argmax (off) vs the exponential draw alone (on)" in why
    assert "the forward time is measured differently on the two sides" in why
    proc = cli("report", str(SESSION), "-o", str(tmp_path / "r.html"))
    assert proc.returncode == 0, proc.stderr
    assert "fell by" not in flat(proc.stdout)


def test_trace_and_log_views_that_count_different_steps_say_which_as_a_warning():
    """GIVEN 02-on: its Kineto trace (the profiler's window) and its overlay event log (every step) are two views
    of the same draws
    WHEN analysed with either source counted
    THEN each time a warning (not an info line) gives both counts, says which log steps the trace's are (the
    last ones: the profiler ran at the end), and the sampler wait per step of each view over those steps,
    computed here from the log file itself."""
    n_trace = analysis(ON, "--source", "trace")["summary"]["rank_steps"]
    n_log = analysis(ON, "--source", "overlay-log")["summary"]["rank_steps"]
    log = next((ON / "overlay").iterdir())
    steps = [json.loads(ln) for ln in log.read_text().splitlines() if '"type":"step"' in ln.replace(" ", "")]
    assert n_log == len(steps) and n_trace < n_log
    shared = steps[-n_trace:]
    log_wait = sum(s["wait"][1] - s["wait"][0] for s in shared) / len(shared)
    trace_wait = analysis(ON, "--source", "trace")["summary"]["per_step"]["wait_ns"]["mean"]
    for source in ("auto", "overlay-log"):
        proc = cli("analyze", str(ON), "--source", source)
        views = [w for w in warnings_of(proc.stderr) if "another view of the same draws" in w]
        assert len(views) == 1, proc.stderr
        assert f"kineto {n_trace} steps" in views[0] and f"overlay-log {n_log} steps" in views[0]
        if source == "overlay-log":  # the log counts: its numbering, the trace's steps as log steps
            assert f"log steps {shared[0]['step']}–{shared[-1]['step']}" in views[0]
        else:  # the trace counts: its numbering, the log's steps said by where they fall against the trace's
            assert f"the trace holds steps 0–{n_trace - 1}" in views[0] and "log steps" not in views[0]
            assert f"those {n_trace} of the trace's, {n_log - n_trace} before and 0 after them" in views[0]
        assert f"{fmt_ns(trace_wait)}/step by the trace's" in views[0] and f"{fmt_ns(log_wait)}/step by the log's" in views[0]
        assert proc.stderr.count("another view of the same draws") == 1  # said once, as the warning


def _export_windows(tmp_path: Path, path: Path) -> tuple[str, list[str], int]:
    out = tmp_path / "e.json"
    proc = cli("export", str(path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    n = sum(1 for e in events if e.get("cat") == "expo_prof" and re.fullmatch(r"step \d+", e.get("name", "")))
    return flat(proc.stdout), warnings_of(proc.stderr), n


def test_analyze_and_export_count_the_same_steps_of_the_switchback_sample(tmp_path):
    """GIVEN the switchback sample (its log marks every step; switchback's off blocks, the engine as shipped, draw nothing on the lane)
    WHEN analyze and export run on it
    THEN export's line counts the steps analyze counts (those with a draw) and names the step windows of its
    steps track apart; and a warning on both says the others are switchback's off-block steps, as many as the
    log's steps of phase "off"."""
    n = analysis(SWITCHBACK)["summary"]["rank_steps"]
    line, warns, windows = _export_windows(tmp_path, SWITCHBACK)
    log = next((SWITCHBACK / "overlay").iterdir())
    off = sum(1 for ln in log.read_text().splitlines() if json.loads(ln).get("phase") == "off")
    assert windows == n + off
    assert f"{n} steps with a draw, of {windows} step windows on the steps track" in line
    for ws in (warns, warnings_of(cli("analyze", str(SWITCHBACK)).stderr)):
        note = [w for w in ws if "step windows the inputs mark" in w]
        assert len(note) == 1 and f"{n} steps counted" in note[0]
        assert f"switchback's off blocks (the engine sampled as shipped; the overlay drew none): {off} steps" in note[0]


@pytest.mark.slow
def test_analyze_and_export_count_the_same_steps_of_a_real_cpu_trace(tmp_path, realtraces):
    """GIVEN a real vLLM CPU trace whose step annotations include steps with no token scheduled
    WHEN analyze and export run on it
    THEN both count the same steps; export names its other windows apart, and the warning counts the empty
    steps as the trace's own annotations do."""
    trace = realtraces / "vllm-cpu/rank0-default-with-stack.pt.trace.json.gz"
    n = analysis(trace)["summary"]["rank_steps"]
    line, warns, windows = _export_windows(tmp_path, trace)
    raw = json.loads(gzip.decompress(trace.read_bytes()))
    empty = sum(1 for e in raw["traceEvents"] if e.get("name") == "execute_context_0(0)_generation_0(0)"
                and e.get("ph") == "X")
    assert windows > n and f"{n} steps with a draw, of {windows} step windows" in line
    note = [w for w in warns if "step windows the inputs mark" in w]
    assert len(note) == 1 and f"{n} steps counted" in note[0]
    assert f"no token scheduled (execute_context_0(0)_generation_0(0)): {empty} steps" in note[0]


def test_every_command_counts_the_steps_analyze_counts(tmp_path):
    """GIVEN 02-on (its trace marks one step window without a draw) WHEN analyze, export and report run THEN
    export's step count and the report's page carry the step count analyze prints."""
    source = "auto"
    n = analysis(ON, "--source", source)["summary"]["rank_steps"]
    proc = cli("export", str(ON), "--source", source, "-o", str(tmp_path / "e.json"))
    assert re.search(rf"\b{n} steps?( with a draw|\))", flat(proc.stdout)), proc.stdout
    page = tmp_path / "r.html"
    assert cli("report", str(ON), "--source", source, "-o", str(page)).returncode == 0
    assert f'"rank_steps":{n}' in page.read_text().replace(" ", "")
