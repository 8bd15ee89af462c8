"""The sequential switchback's live looks and its options (expo_prof/record/settle.py, expo_prof/pipeline/live.py).

GIVEN the committed real switchback run of the vLLM CPU server (traces/samples/tiny-cpu-sequential), its event log
cut as a live look finds it (mid-line), WHEN the settler looks at the measured load THEN it reads the whole lines
only and finds what the analysis after the run finds on the same steps; the progress line says the pairs, the
confidence sequence, the margin and the decision; and --budget / --margin read as documented.
"""

from __future__ import annotations

import json
import shutil

import pytest

from expo_prof.analysis.saving.recording import savings_of, sequential_spec
from expo_prof.errors import BadInput
from expo_prof.pipeline.live import Settler
from expo_prof.readers.overlay_log import read_overlay_log
from expo_prof.record.settle import Budget, parse_budget, parse_margin, progress_line
from shared_paths import REPO

RUN = REPO / "traces" / "samples" / "tiny-cpu-sequential"


@pytest.mark.parametrize(("text", "want"), [
    ("90s", Budget(seconds=90.0)), ("3m", Budget(seconds=180.0)), ("1h", Budget(seconds=3600.0)),
    ("120", Budget(seconds=120.0)), ("5000 steps", Budget(steps=5000)), ("1 step", Budget(steps=1)),
])
def test_budget_reads_a_time_or_steps(text, want):
    assert parse_budget(text) == want


@pytest.mark.parametrize(("text", "share", "ns"), [("1%", 0.01, None), ("2.5 %", 0.025, None),
                                                   ("20us", 0.01, 20_000.0), ("0.05ms", 0.01, 50_000.0),
                                                   ("800ns", 0.01, 800.0)])
def test_margin_reads_a_share_or_a_time(text, share, ns):
    spec = parse_margin(text)
    assert spec.margin_share == pytest.approx(share) and spec.margin_ns == ns


@pytest.mark.parametrize("text", ["", "soon", "-3m", "0s", "0 steps", "2 blocks"])
def test_bad_budgets_are_one_line_errors(text):
    with pytest.raises(BadInput) as err:
        parse_budget(text)
    assert "\n" not in str(err.value) and "--budget" in str(err.value)


def test_budget_spends_time_or_steps():
    assert Budget(seconds=10).spent(10.0, 0) and not Budget(seconds=10).spent(9.9, 10**9)
    assert Budget(steps=100).spent(0.0, 100) and not Budget(steps=100).spent(10**6, 99)


def test_a_live_look_reads_whole_lines_and_agrees_with_the_analysis_after(tmp_path):
    # GIVEN the run's event log as a look finds it while the overlay writes: cut in the middle of a step line
    manifest = json.loads((RUN / "manifest.json").read_text())
    spec = sequential_spec(manifest)
    assert spec is not None and spec.margin_share == 0.01
    (log,) = (RUN / "overlay").glob("*.jsonl")
    data = log.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 40
    live = tmp_path / "overlay"
    live.mkdir()
    (live / log.name).write_bytes(data[:cut])
    window = manifest["load_window_ns"]
    # WHEN the settler looks at the measured load
    look = Settler(live, spec).look(window)
    # THEN it reads the whole lines before the cut, and its comparison is what savings_of gives on them
    whole = data[: data.rfind(b"\n", 0, cut) + 1]
    (want, *_), _ = savings_of([read_overlay_log(whole, log)], window, spec)
    assert look.saving is not None and look.saving.compared == ["off", "on"]
    assert look.saving.pair_savings_ns == want.pair_savings_ns and look.saving.sequence == want.sequence
    assert look.steps == want.baseline_steps + want.arm_steps > 0
    # AND on the full log it finds the decision the run stopped with
    shutil.copy(log, live / log.name)
    full = Settler(live, spec).look(window)
    assert full.settled and full.saving.sequence.decision == manifest["switchback"]["stopped"]["decision"]
    # AND the progress line says the pairs, the sequence, the margin and the decision
    line = progress_line(full, 12.0, Budget(seconds=180))
    sq = full.saving.sequence
    assert line.startswith(f"switchback: {sq.pairs} block pairs, saving ") and "95% CS " in line
    assert "margin ±" in line and line.endswith(f": {sq.decision} (12 s of 180 s of load)")


def test_a_look_before_any_log_waits(tmp_path):
    look = Settler(tmp_path, parse_margin("1%")).look([0, 1])
    assert look.saving is None and look.steps == 0 and not look.settled
    assert progress_line(look, 3.0, Budget(steps=500)) == "switchback: waiting for block pairs (0 of 500 steps)"
