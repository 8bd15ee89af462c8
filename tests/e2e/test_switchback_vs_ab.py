"""`ab` and switchback end to end on the real vLLM CPU server: one session of each, as the commands promise.

GIVEN the configuration of ``bench/switchback_proof.py`` where the overlay
should win (vLLM's fp64-Gumbel path, the lane on the free core), measured by
``expo-prof ab --repeat 2`` (four server launches, quiet, its JSON on stdout, as
the proof runs it) and by ``expo-prof ab --switchback`` (one launch, its tables
on the terminal as a user sees them) with the same built-in workload, THEN each
session is what its command promises: runs in alternating order, the tables, a
verdict with its uncertainty, numbers that are the runs' own, the mechanism; one
run that alternates blocks in the documented order, whose saving every command
states alike, and whose "What the overlay saves" block is printed once, whole.

Whether switchback's estimate agrees with ab's is an experiment, not a unit
test: ``make proof`` (the same ``bench/switchback_proof.py``, both
configurations, ``ab --repeat 3``) records it, and
``tests/bench/test_switchback_proof_record.py`` fails when that record is stale
or says they disagreed (docs/ab.md). This module holds the suite's real
``ab --switchback`` run (the smoke test of that code path; ``make demo``'s
``record`` run is tests/e2e/test_demo.py's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from support import server_cli  # noqa: E402
from switchback_proof import CONFIGS, ENV, WORKLOAD, Measured, _server, model_dir  # noqa: E402

#: Six server launches (ab 2 + 2, two switchback runs): ~6 min on an idle 2-core machine, past pytest-timeout's
#: 900 s default on a loaded one (the module fixture counts in the first test's time).
pytestmark = pytest.mark.timeout(1800)
#: ab's runs per side here (the proof's 3 are `make proof`'s): two pairs still pair, alternate and give a CI.
REPEAT = 2
#: ab --switchback's launches: two, so the spread between launches is measured (issue 39, item 4).
LAUNCHES = 2
CONFIG = "lane-free-fp64"
K = 8


def _expo_prof(args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    """``expo-prof ARGS`` in the proof's environment for CONFIG (tests/support/server_cli.py: no overlay switch
    of the caller's); the completed process and its wall time."""
    t0 = time.monotonic()
    proc = server_cli.expo_prof(*args, timeout=1800, env={**ENV, **CONFIGS[CONFIG]["env"]})
    assert proc.returncode == 0, (args[:3], proc.stderr[-3000:])
    return proc, time.monotonic() - t0


@pytest.fixture(scope="module")
def measured(vllm_available, vllm_lock, tmp_path_factory) -> tuple[Measured, str]:
    """The configuration measured both ways (one server at a time), and what ab --switchback printed."""
    from expo_prof.serving.launch import free_port

    model = model_dir()
    work = tmp_path_factory.mktemp("switchback-vs-ab")
    ab_dir, sb_dir = work / f"{CONFIG}-ab", work / f"{CONFIG}-switchback"
    args = CONFIGS[CONFIG]["args"]
    with vllm_lock(timeout_s=1800):
        ab, ab_s = _expo_prof(["-q", "ab", "--repeat", str(REPEAT), *WORKLOAD, "--session-dir", str(ab_dir),
                               "--json", "--", *_server(model, free_port(), args)])
        sb, sb_s = _expo_prof(["ab", "--switchback", "--repeat", str(LAUNCHES), "--block-steps", str(K),
                               "--budget", "45s", *WORKLOAD, "--session-dir", str(sb_dir), "--",
                               *_server(model, free_port(), args)])
    first = sb_dir / "01-on"  # the first launch: the run the tests below read as one switchback run
    doc = json.loads(_cli("compare", str(first), "--json").stdout)
    return Measured(CONFIG, json.loads(ab.stdout), doc, ab_s, sb_s, ab_dir, first, [ab.stderr, sb.stderr]), sb.stdout


def test_the_ab_session_is_what_ab_promises(measured):
    m, _ = measured
    session, result = m.ab_dir, m.ab
    # THEN the session holds off, on, off, on, all ok
    s = json.loads((session / "session.json").read_text())
    assert [(r["dir"], r["overlay"], r["status"]) for r in s["runs"]] == [
        (f"{i:02d}-{'on' if i % 2 == 0 else 'off'}", i % 2 == 0, "ok") for i in range(1, 2 * REPEAT + 1)]
    # AND the verdict states its uncertainty, paired over the 2 pairs
    v = result["verdict"]
    assert v["decision"] in ("enable", "keep off", "no significant difference")
    assert "95% CI" in v["statement"] and "paired t p=" in v["statement"] and f"{REPEAT} pairs" in v["statement"]
    assert result["design"]["paired"] is True and result["design"]["pairs"] == REPEAT
    # AND each run's value is the one the run recorded; the means and change are computed from them
    tput = m.ab_tput
    rec = {d: json.loads((session / d / "workload.json").read_text())["metrics"]["output_throughput"]
           for d in ("01-off", "02-on", "03-off", "04-on")}
    assert tput["a"]["values"] == [rec["01-off"], rec["03-off"]]
    assert tput["b"]["values"] == [rec["02-on"], rec["04-on"]]
    mean_a = np.mean(tput["a"]["values"])
    assert tput["change_pct"] == pytest.approx(100 * (np.mean(tput["b"]["values"]) - mean_a) / mean_a, rel=1e-12)
    assert tput["ci_pct"] is not None and min(tput["ci_pct"]) <= tput["change_pct"] <= max(tput["ci_pct"])
    # AND the workload is the one asked for, the same for all runs
    assert result["workload"]["num_prompts"] == 4 and result["workload"]["input_len"] == 32
    # AND the on runs' overlay logs gave the mechanism its per-step numbers, the wait counted
    by = {x["name"]: x for x in result["metrics"]}
    assert by["forward_us_per_step"]["b"]["n"] == REPEAT and by["critical_us_per_step"]["b"]["n"] == REPEAT
    assert result["mechanism"]["available"] is True
    assert result["mechanism"]["removed_basis"].startswith(("measured", "estimated"))
    assert all((session / d / "analysis.json").is_file() for d in ("02-on", "04-on"))
    # AND compare on the kept session prints both tables, the why line and the verdict, and gives the same
    # numbers as JSON again (what `ab --json -o FILE` wrote)
    out = _cli("compare", str(session)).stdout
    assert "each run" in out and "change of the means" in out and "why:" in out and "verdict:" in out
    again = json.loads(_cli("compare", str(session), "--json").stdout)
    assert {x["name"]: x for x in again["metrics"]}["output_throughput"] == tput
    assert not os.environ.get("EXPO_PROF_ASYNC_EXPONENTIAL")  # the switch never leaked into the test process


def _cli(*args: str) -> subprocess.CompletedProcess:
    proc = server_cli.expo_prof(*args, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_the_switchback_run_is_what_the_overlay_promises(measured):
    m, _ = measured
    run = m.switchback_dir
    # THEN one run, recorded as switchback with its block length
    manifest = json.loads((run / "manifest.json").read_text())
    assert (manifest["overlay"], manifest["switchback_block"], manifest["status"]) == ("switchback", K, "ok")
    # AND its event log alternates blocks in the documented order, off steps on vLLM's own path
    (log,) = (run / "overlay").glob("expo-prof-events-*.jsonl")
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines[0]["mode"] == "switchback" and lines[0]["block_steps"] == K
    steps = [x for x in lines if x["type"] == "step" and x["reqs"] > 0]
    from overlay.sampler import switchback_phase

    assert [x["phase"] for x in steps] == [switchback_phase(k, K) for k in range(len(steps))]
    assert all(not x["launched"] for x in steps if x["phase"] == "off")
    assert sum(x["used"] for x in steps if x["phase"] == "on") >= 0.9 * sum(x["phase"] == "on" for x in steps)
    # AND the saving figures come from enough of the run: most steps compared, pairs many
    # (of the steps inside the measured load: the manifest's load window, on the log's wall clock)
    lo, hi = manifest["load_window_ns"]
    shift = lines[0]["wall_ns"] - lines[0]["mono_ns"]
    loaded = [x for x in steps if lo <= x["t0_ns"] + shift <= hi]
    s = m.saving
    assert len(loaded) >= 150 and s["pairs"] >= 10 and s["baseline_steps"] + s["arm_steps"] >= 0.6 * len(loaded)
    assert s["dropped"]["outside_load"] >= len(steps) - len(loaded)
    # AND every command says the same saving line: compare (JSON), analyze (JSON and text)
    doc = json.loads(_cli("analyze", str(run), "--json").stdout)
    assert doc["recordings"][0]["saving_line"] == m.switchback["saving_line"]
    assert doc["recordings"][0]["savings"] == m.switchback["savings"]
    text = _cli("analyze", str(run)).stdout
    # (one forward estimate: switchback's paired change; no second "forward beside the draw" line)
    assert text.count("What the overlay saves") == 1 and "forward beside the draw" not in text
    assert "to settle" in text and "  forward" in text and "  rest" in text
    assert " ".join(m.switchback["saving_line"].split()) in " ".join(text.split())
    # AND the estimate comes with its CI and a decision among the three (not whether it is right: `make proof`)
    # (pairs >= 10 above, so a CI exists and "inconclusive", too little data, cannot be the answer)
    lo_ci, hi_ci = s["tokps_ci_pct"]
    assert lo_ci <= s["tokps_change_pct"] <= hi_ci
    assert s["decision"] in ("enable", "keep off", "no significant difference")


def test_ab_switchback_prints_its_block_once_with_the_step_broken_down(measured):
    """THEN on the terminal (not quiet) the "What the overlay saves" block and the saving line appear once each
    (the run summary printed them; the comparison after it did again, issue 33 item 3), the block holds its "to
    settle" row and every left-out reason with what it means, and each arm's step broken into forward, sampler
    and the rest (item 5), the same figures as ``compare RUN --json`` gives."""
    from expo_prof.words import fmt_ns

    m, out = measured
    flat = " ".join(out.split())
    # THEN the block and the saving line once per launch, and the spread between the launches once
    assert out.count("What the overlay saves") == LAUNCHES, out
    assert flat.count("saving (switchback): ") == LAUNCHES, out
    assert flat.count(f"between runs: {LAUNCHES} runs saved ") == 1, out
    # AND the block is whole: the to-settle row, and the step of each arm as forward + sampler + rest
    assert "to settle" in flat and "forward beside the draw" not in flat
    (sv,) = m.switchback["savings"]
    for parts in (sv["baseline_parts"], sv["arm_parts"]):
        assert parts["forward_ns"] + parts["sampler_ns"] + parts["rest_ns"] == pytest.approx(parts["cadence_ns"])
        for name in ("forward", "sampler", "rest"):
            assert f"{name} {fmt_ns(parts[name + '_ns'])}" in flat, (name, out)
    # AND every reason a step was left out is printed with its count and a clause saying what it means
    assert any(sv["dropped"].values())
    for key, n in sv["dropped"].items():
        if n:
            clause = flat.split(f"left out {n} ", 1)[1].split(" left out ")[0]
            assert len(clause.split()) >= 4, (key, clause)


def test_ab_switchback_launches_give_the_spread_between_them(measured):
    """THEN the launches of ``ab --switchback --repeat 2`` are compared with each other: each one's saving and
    standard error from its own CI, and whether they differ more than their intervals allow — Cochran's Q and its
    p-value, worked out here with scipy from the two runs' JSON."""
    from scipy import stats as sps

    m, _ = measured
    session = m.switchback_dir.parent
    s = json.loads((session / "session.json").read_text())
    assert [(r["dir"], r["status"]) for r in s["runs"]] == [(f"{i:02d}-on", "ok") for i in range(1, LAUNCHES + 1)]
    doc = json.loads(_cli("compare", str(session), "--json").stdout)
    assert doc["schema_name"] == "expo-prof.switchback-runs" and len(doc["runs"]) == LAUNCHES
    means, ses = [], []
    for r in doc["runs"]:
        sv = r["savings"][0]
        lo, hi = sorted(sv["saving"]["ci_ns"])
        means.append(sv["saving"]["mean_ns"])
        ses.append((hi - lo) / 2 / sps.t.ppf(0.975, sv["pairs"] - 1))
    w = 1 / np.square(ses)
    pooled = float(np.sum(w * means) / np.sum(w))
    q = float(np.sum(w * np.square(np.array(means) - pooled)))
    sp = doc["spread"]
    assert sp["cochran_q"] == pytest.approx(q, rel=1e-9) and sp["p"] == pytest.approx(sps.chi2.sf(q, 1), rel=1e-9)
    assert sp["differ"] == (sp["p"] < 0.05) and sp["sd_ns"] == pytest.approx(np.std(means, ddof=1), rel=1e-9)
    words = "differ more than their intervals allow" if sp["differ"] else "agree within their intervals"
    assert words in doc["spread_line"] and doc["spread_line"].startswith(f"between runs: {LAUNCHES} runs saved ")
