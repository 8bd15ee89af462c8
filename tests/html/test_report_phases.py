"""A switchback run's phases in the report page's per-step data (issue 39, item 8: per-step lines break at block
changes instead of joining across them).

GIVEN the committed real switchback runs on the vLLM CPU server (traces/samples/tiny-cpu-switchback, a run of a
fixed length; tiny-cpu-sequential, one that decided as it went) WHEN ``expo-prof report``'s page is built THEN its
per-step columns carry each step's phase — the phase of that step's line in the overlay event log, read here with
``json`` (not the reader) —, the arm each phase runs in the terminal's words, a run index that changes exactly
where the log's phase changes between two plotted steps (an off block without draws has no row, yet the steps
on either side of it are in different runs), and the log's blocks for the chart's phase band. A run that is no
switchback (traces/samples/tiny-cpu-off-on) has none of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from html_helpers import SAMPLES, page_data  # type: ignore[import-not-found]

from expo_prof.html.build import report_document

SWITCHBACK_RUNS = ("tiny-cpu-switchback", "tiny-cpu-sequential")
PHASES = ("off", "on", "native")
#: What each arm of a two-arm switchback runs, as the terminal's saving table words it.
ARMS = {"off": "off (engine as shipped)", "on": "on (overlay)"}
PHASE_KEYS = ("phase", "phase_run", "phases", "arms", "phase_blocks")


def the_log(d: Path) -> Path:
    (log,) = (d / "overlay").glob("expo-prof-events-*.jsonl")
    return log


def log_phases(log: Path) -> dict[int, str | None]:
    """{step id: its phase} from the event log's step lines, read with ``json``: a step in no block (``block``
    < 0 or absent, or no phase word) has None (docs/event-log.md)."""
    out: dict[int, str | None] = {}
    for line in log.read_text().splitlines():
        if not line.strip():
            continue
        x = json.loads(line)
        if x.get("type") != "step":
            continue
        inside = isinstance(x.get("block"), int) and x["block"] >= 0 and x.get("phase") in PHASES
        out[int(x["step"])] = x["phase"] if inside else None
    return out


def breaks(phase_of: dict[int, str | None], a: int, b: int) -> bool:
    """Whether a line from step ``a`` to step ``b`` would join steps across a change of phase: the log's steps
    ``a`` … ``b`` are not all in one phase."""
    return len({p for s, p in phase_of.items() if a <= s <= b}) > 1


def log_blocks(phase_of: dict[int, str | None]) -> list[list]:
    """[first, last, phase] of each run of consecutive log steps (by id) in one phase, steps in no block left out."""
    out: list[list] = []
    prev: object = object()
    for s in sorted(phase_of):
        p = phase_of[s]
        if p is not None and p == prev:
            out[-1][1] = s
        elif p is not None:
            out.append([s, s, p])
        prev = p
    return out


@pytest.mark.parametrize("name", SWITCHBACK_RUNS)
def test_report_steps_carry_the_logs_phases(name):
    d = SAMPLES / name
    phase_of = log_phases(the_log(d))
    # WHEN the report page is built (its data as the page reads it)
    data = page_data(report_document([d]).text)
    (entry,) = data["recordings"]
    st = entry["steps"]
    assert len(st["step"]) > 100 and set(st["rank"]) == {0}
    # THEN each row's phase is its step's phase in the log, and each phase names its arm as the terminal does
    assert [st["phases"][k] for k in st["phase"]] == [phase_of[s] for s in st["step"]]
    assert dict(zip(st["phases"], st["arms"])) == ARMS
    # AND the run index changes between two plotted steps exactly where the log's phase changes between them
    pairs = list(zip(st["step"], st["step"][1:], st["phase_run"], st["phase_run"][1:]))
    assert all(b > a for a, b, *_ in pairs)
    got = [r1 != r2 for _, _, r1, r2 in pairs]
    assert got == [breaks(phase_of, a, b) for a, b, *_ in pairs]
    # (the rows are all 'on' steps — off blocks draw nothing — so every break is an off block between rows)
    assert set(st["phase"]) == {st["phases"].index("on")} and sum(got) >= 10
    # AND the phase band's blocks are the log's runs of one phase, off blocks included
    assert [[f, la, st["phases"][p]] for r, f, la, p in st["phase_blocks"] if r == 0] == log_blocks(phase_of)


def test_report_of_a_run_without_switchback_has_no_phases():
    d = SAMPLES / "tiny-cpu-off-on"
    data = page_data(report_document([d]).text)
    assert len(data["recordings"]) == 2
    for entry in data["recordings"]:
        st = entry["steps"]
        assert len(st["step"]) > 20
        assert {k: st[k] for k in PHASE_KEYS} == dict.fromkeys(PHASE_KEYS)
