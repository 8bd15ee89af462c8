"""Switchback's block on the committed switchback sample: one estimate per quantity, words that follow the CI,
every exclusion explained, the "to settle" row, the step broken down — under analyze and under record alike.

GIVEN the committed run (traces/samples/tiny-cpu-switchback: ``expo-prof record --overlay switchback`` on the
real vLLM CPU server, the tiny Llama, the fp64-Gumbel path)
WHEN ``analyze`` prints it, ``analyze --json`` gives it, and record's run summary (what ``record`` and ``ab``
print after the run) prints it
THEN the "What the overlay saves" block appears once, with a "to settle" row; each left-out reason comes with
what it means; the forward difference is stated once (no second "forward beside the draw" estimate) and
called contention only where its CI lies above zero; each arm's step is forward + sampler + rest, the parts'
differences being the paired changes the block states (issue 33, items 3 and 5).
"""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest
from support.analyze_cli import analyze_out

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "traces" / "samples" / "tiny-cpu-switchback"
TITLE = "What the overlay saves"


def flat(text: str) -> str:
    """The text with its table cells' wrapping undone (every run of whitespace as one space)."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def doc() -> dict:
    """``analyze --json`` of the sample (run in process)."""
    import io
    from contextlib import redirect_stdout

    from expo_prof.cli.main import main

    buf = io.StringIO()
    with redirect_stdout(buf), pytest.raises(SystemExit) as ei:
        main(["analyze", str(RUN), "--json"])
    assert ei.value.code == 0
    return json.loads(buf.getvalue())


def _check_block(text: str, sv: dict) -> None:
    """What the switchback block must say, whichever command printed it."""
    t = flat(text)
    # THEN one block, one saving line
    assert text.count(TITLE) == 1, text
    assert t.count("saving (switchback): ") == 1 and flat(sv["_line"]).split(" — ")[-1].split(" -- ")[-1] in t
    # AND a "to settle" row (the run is settled: both tests agree), never an infinite bound
    assert "to settle settled both tests significant at alpha 0.05" in t
    assert "inf" not in t.lower().replace("info", "")
    # AND each reason a step was left out, with its count and what it means (more than the bare key)
    reasons = {k: n for k, n in sv["dropped"].items() if n}
    assert {"outside_load", "washout", "unpaired"} <= set(reasons)
    for key, n in reasons.items():
        bare = key.replace("_", " ")
        after = t.split(f"left out {n} ", 1)[1].split(" left out ")[0].split(" to settle ")[0]
        assert len(after.split()) >= 5, (key, after)  # a clause, not the key alone ("64 outside load")
        assert after.split(":")[0] != bare or ":" in after, (key, after)
    # AND the forward difference once: the paired one, in words that follow its CI
    assert "forward beside the draw" not in t and t.count("forward, on − off") == 1
    lo, hi = sv["forward_change"]["ci_ns"]
    row = t.split("forward, on − off", 1)[1].split("sampler, on − off")[0]
    assert ("no difference shown (width" in row) == (lo <= 0 <= hi)
    assert ("contention" in row) == (lo > 0)


def test_analyze_prints_the_block_once_in_words_that_follow_its_ci(capsys, doc):
    (sv,) = doc["recordings"][0]["savings"]
    sv["_line"] = doc["recordings"][0]["saving_line"]
    # GIVEN the sample, whose forward change holds zero (the estimator's figures, not this test's choice)
    lo, hi = sv["forward_change"]["ci_ns"]
    assert lo < 0 < hi
    # WHEN analyze prints it
    _check_block(analyze_out(capsys, str(RUN)), sv)


def test_record_run_summary_prints_the_same_block_with_its_to_settle_row(capsys, doc, tmp_path):
    from expo_prof.cli.run_summary import summarize

    (sv,) = doc["recordings"][0]["savings"]
    sv["_line"] = doc["recordings"][0]["saving_line"]
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    # WHEN record's summary runs on the recorded run (what `record --overlay switchback` prints after it)
    assert summarize(run) is not None
    out = capsys.readouterr().out
    # THEN the same block, "to settle" row included
    _check_block(out, sv)


def test_each_arm_step_is_forward_plus_sampler_plus_rest(capsys, doc):
    (sv,) = doc["recordings"][0]["savings"]
    off, on = sv["baseline_parts"], sv["arm_parts"]
    # THEN each arm's parts add up to its step, which is the block's step figure
    for parts, step in ((off, sv["baseline_cadence_ns"]), (on, sv["arm_cadence_ns"])):
        assert parts["cadence_ns"] == step
        assert parts["forward_ns"] + parts["sampler_ns"] + parts["rest_ns"] == pytest.approx(step, rel=1e-12)
        assert 0 < parts["forward_ns"] < step and 0 < parts["sampler_ns"] < step and parts["rest_ns"] > 0
    # AND the parts' differences are the paired changes the block states: one estimate per quantity
    assert on["forward_ns"] - off["forward_ns"] == pytest.approx(sv["forward_change"]["mean_ns"], rel=1e-9)
    assert on["sampler_ns"] - off["sampler_ns"] == pytest.approx(sv["sampler_change"]["mean_ns"], rel=1e-9)
    # AND the wait is inside the on arm's sampler (the overlay's arm waits for q; vLLM's own path draws inline)
    assert on["log_wait_ns"] == sv["arm_log_wait_ns"] and 0 <= on["log_wait_ns"] < on["sampler_ns"]
    # AND the forward per arm is close to the plain mean of that arm's forward windows in the log (a check
    # independent of the pair weighting: both arms ran the same batches)
    (log,) = (RUN / "overlay").glob("expo-prof-events-*.jsonl")
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    for arm, parts in (("off", off), ("on", on)):
        fwd = [s["fwd"][1] - s["fwd"][0] for s in lines
               if s["type"] == "step" and s.get("phase") == arm and s.get("fwd") and s["reqs"] > 0]
        assert parts["forward_ns"] == pytest.approx(statistics.fmean(fwd), rel=0.15)
    # AND the text shows the breakdown under each arm's step
    t = flat(analyze_out(capsys, str(RUN)))
    for parts in (off, on):
        assert "forward " + _ns(parts["forward_ns"]) in t and "sampler " + _ns(parts["sampler_ns"]) in t
        assert "rest " + _ns(parts["rest_ns"]) in t


def _ns(x: float) -> str:
    from expo_prof.words import fmt_ns

    return fmt_ns(x)
