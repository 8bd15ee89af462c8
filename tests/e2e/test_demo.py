"""``expo-prof demo``, the README's main-job command, run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


HEADLINE = re.compile(r"\d+ instances?, [\d.]+ % hidden; critical path (?:–|-?[\d.]+ (?:ns|µs|ms|s))/step")
#: The saving line of a switchback that decided as it ran (issue 39): one of the three decisions, the saving per
#: step with its 95 % confidence sequence, output tok/s, the margin in both units.
SAVING = re.compile(r"saving \(switchback\): (?:enable|keep off|no effect beyond the margin|undecided) — "
                    r"(?:saves|costs) [\d.]+ (?:ns|µs|ms)/step \(95% confidence sequence [^)]+\), output tok/s "
                    r"[+-][\d.]+%, margin ±[\d.]+ (?:ns|µs|ms)/step \(±[\d.]+% output tok/s\)")
#: The demo's last line: a decision — never "no difference shown" — with the saving and its confidence sequence.
ANSWER = re.compile(r"answer: (?:(?:enable|keep off): the overlay (?:saves|costs) [\d.]+ (?:ns|µs|ms)/step \(95% "
                    r"confidence sequence [^)]+\)(?:: output tok/s [+-][\d.]+% with it on)?"
                    r"|no effect beyond the margin ±[\d.]+ (?:ns|µs|ms)/step[^:]*: the saving's 95% confidence "
                    r"sequence [^ ]+ [^ ]+ to [^ ]+ [^ ]+ lies inside it).*$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: The console script, as a user runs it (installed next to this Python).
EXPO_PROF = [str(Path(sys.executable).parent / "expo-prof")]


def _run(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run([*EXPO_PROF, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_bad_option_is_one_line_and_exit_2(tmp_path):
    """GIVEN an out-of-range --output-len WHEN running demo THEN exit 2 with a
    usage error and no traceback, and no server was started (no run dir)."""
    res = _run(["demo", "--output-len", "0"], tmp_path, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "--output-len" in res.stderr
    assert not (tmp_path / "traces").exists()


def test_repeat_with_the_default_switchback_is_one_line_and_exit_2(tmp_path):
    """GIVEN demo's default (switchback: both sides in one run) WHEN asked for --repeat 2 THEN exit 2 with one
    line saying why, no traceback, and no server was started (no run dir)."""
    res = _run(["demo", "--repeat", "2"], tmp_path, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "--repeat" in res.stderr and "switchback" in res.stderr
    assert not (tmp_path / "traces").exists()


def test_demo_in_a_terminal_records_a_switchback_run_and_ends_with_the_measured_saving(tmp_path, vllm_available,
                                                                                        vllm_lock):
    """GIVEN a fresh directory and a terminal WHEN `expo-prof demo` runs as a user runs it, with no option (tiny
    model, real vLLM CPU server, switchback: blocks of steps with the overlay off and on) THEN the person sees, in
    order: waiting for the server, the server ready, the workload, where the run is, the analysis, the switchback
    table and the headline, and it ends with a MEASURED saving (per step, with its 95 % CI) and what it means for
    output tok/s — never "saving: not measured"; it exits 0 and creates one traces/<UTC>-demo/ run directory
    that describes itself completely (manifest, server log, event log with its final summary, workload) and
    analyses to the same saving.

    (demo is record on the built-in model: this is also `record --overlay switchback`'s live run and its
    terminal status; tests/record/test_record.py keeps the overlay off and on runs with the torch profiler.)"""
    import pexpect

    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm-256color"}
    with vllm_lock():
        child = pexpect.spawn(EXPO_PROF[0], ["demo"], cwd=str(tmp_path), timeout=900, dimensions=(30, 120),
                              encoding="utf-8", codec_errors="replace", env=env)
        child.expect(pexpect.EOF)
        child.close()
    out = ANSI.sub("", child.before or "")
    assert child.exitstatus == 0, out[-3000:]
    runs = sorted((tmp_path / "traces").glob("*-demo"))
    assert len(runs) == 1
    run = runs[0]
    # THEN the status came in order, the run's saving leads its tables (the answer first), and the answer ends it
    flat = out.replace("\r", "")
    order = [flat.find("waiting for the server"), flat.find("server ready at"), flat.find("workload: 4 requests in"),
             flat.find("run:"), flat.find("saving (switchback)"), flat.find("Hidden vs exposed time"),
             flat.find("What the overlay saves"), flat.find("answer:")]
    assert all(i >= 0 for i in order) and order == sorted(order), (order, flat[-3000:])
    assert HEADLINE.search(flat) and run.name in flat.replace("\n", "") and "Traceback" not in flat
    # AND the saving is a decision, against the engine as shipped: per step with its confidence sequence, and
    # the output tok/s it means; the load went on until it settled, inside the demo's 3-minute budget
    words = " ".join(flat.split())  # rich wraps long lines at spaces
    # (the answer and the saving line, that is: a forward or sampler row of the table may show no difference)
    said = [ln for ln in (SAVING.search(words), ANSWER.search(words)) if ln is not None]
    assert "not measured" not in words and not any("no difference shown" in m.group(0) for m in said), words[-2000:]
    assert "cadence, engine as shipped" in words and "switchback: " in words and "block pairs" in words
    assert SAVING.search(words), words[-2000:]
    answer = ANSWER.search(words)
    assert answer and words.rstrip().endswith(answer.group(0).rstrip()), words[-2000:]
    # AND the run directory describes itself completely
    m = json.loads((run / "manifest.json").read_text())
    assert m["status"] == "ok" and m["overlay"] == "switchback" and m["exit"]["leftover_pids"] == []
    assert m["switchback_block"] == 8 and m["profiler"] == "none" and "overlay_summary" not in m
    assert m["versions"]["vllm"] and m["versions"]["torch"] and m["device"] == "cpu"
    assert m["env_changed"]["EXPO_PROF_ASYNC_EXPONENTIAL"] == "switchback"
    assert m["launched_argv"].count("--shutdown-timeout") == 1
    assert (run / "server.log").stat().st_size > 0
    metrics = json.loads((run / "workload.json").read_text())["metrics"]
    assert metrics["completed"] >= 4 and metrics["total_output_tokens"] == metrics["completed"] * 192
    stopped = m["switchback"]["stopped"]
    assert m["switchback"]["sequential"] is True and m["switchback"]["budget"] == {"seconds": 180.0, "steps": None}
    assert stopped["why"] == "settled" and stopped["after_s"] <= 180 and stopped["decision"] != "undecided"
    (log,) = (run / "overlay").glob("expo-prof-events-*.jsonl")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(o["type"] == "step" for o in lines) >= 192 and {o.get("phase") for o in lines} >= {"off", "on"}
    assert lines[-1]["type"] == "summary" and lines[-1]["final"] is True
    # AND its analysis (the same as `analyze` gives) holds the saving with a CI from at least 2 block pairs
    analysis = json.loads((run / "analysis.json").read_text())
    again = subprocess.run([*EXPO_PROF, "analyze", str(run), "--json"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["summary"] == analysis["summary"] and doc["summary"]["instances"] >= 24
    (sv,) = doc["recordings"][0]["savings"]
    seq = sv["sequence"]
    assert seq["pairs"] == sv["pairs"] >= 6 and seq["decision"] == sv["decision"] != "undecided"
    assert seq["lo_ns"] <= seq["mean_ns"] <= seq["hi_ns"] and len(sv["pair_savings_ns"]) == sv["pairs"]
    # AND the analysis after the run agrees with the decision taken live (the sequence never widens)
    assert seq["decision"] == stopped["decision"] and seq["settled_at"] is not None
    assert doc["recordings"][0]["saving_line"].split(" — ")[0] in words
    # AND its token gaps by arm (each gap in the arm of the step running when its token arrived, docs/ab.md "Bursty
    # tokens") are the plain re-computation's from the same workload.json and event log, placed on the wall clock
    # by each request's own start; the block printed each arm's row
    from support.arrival_recompute import recompute  # tests/support: json, bisect, statistics, no expo_prof code

    wl = json.loads((run / "workload.json").read_text())
    assert all(isinstance(r["start_wall_ns"], int) for r in wl["requests"])
    want, got = recompute(run / "workload.json", log), doc["recordings"][0]["arrival"]
    assert got is not None and [a["name"] for a in got["arms"]] == [a for a in ("off", "on") if a in want["arms"]]
    for a in got["arms"]:
        w = want["arms"][a["name"]]
        assert a["gaps"] == w["gaps"] and abs(a["near_zero_share"] - w["near_zero_share"]) < 1e-12
        assert all(abs(a[k] - w[k]) <= 1e-9 * w[k] for k in ("mean_ms", "p50_ms", "p99_ms", "max_ms")), (a, w)
    assert (got["outside"], got["washout"], got["measured"]) == (want["outside"], want["washout"], want["measured"])
    assert got["bursts"] == (bool(want["bursty"]) if want["measured"] else None)
    total = sum(len(r["itl_s"]) for r in wl["requests"] if r["ok"] and not r["warmup"])
    assert sum(a["gaps"] for a in got["arms"]) + got["outside"] + got["washout"] == total
    assert "token gaps, engine as shipped" in words and "token gaps, overlay" in words
