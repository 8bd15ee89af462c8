"""Three-arm switchback analysis: on vs off, native vs off, on vs native, each with its CI (docs/ab.md).

GIVEN an event log written by the real writer (overlay.events.EventLog) in
schema 3 with the header's ``arms`` = off, on, native and steps whose cadence
per arm and group of blocks is set by construction, WHEN read by the overlay-log
reader and analysed, THEN each of the three comparisons is the mean of its
per-group differences with the paired t CI of scipy on those differences, and
the saving line and tables say all three. A schema 2 log (no ``arms``) is still
read as two arms.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from expo_prof.analysis.saving.recording import savings_of
from expo_prof.pipeline.result import saving_line
from expo_prof.readers import load
from overlay.arms import switchback_phase
from overlay.contract import THREE_ARMS
from overlay.events import EventLog
from expo_prof.timeline import overlay_log

K = 3  # steps per block
OFF_NS = 20_000
#: Per group g: how much faster than off the native and the on block's steps are (ns).
NATIVE_GAIN = [1000, 1400, 600, 1200, 800, 1000, 1300, 700]
ON_GAIN = [2000, 2600, 1500, 2400, 1900, 2100, 2500, 1600]


def _write(tmp_path, arms, gains: dict[str, list[int]], *, schema: int | None = None) -> None:
    log = EventLog(str(tmp_path))
    log.configure(backend="cpu", lane="thread", rank=0, mode="switchback", block_steps=K, arms=arms)
    if schema is not None:
        log._header["schema"] = schema  # an older writer: same lines, its version
        if schema == 2:
            del log._header["arms"]
    groups = len(next(iter(gains.values())))
    t0 = 10**9
    for i in range(len(arms) * groups * K + 1):  # one step more: the last block's last step needs a next t0
        block = i // K
        phase = switchback_phase(i, K, arms)
        cadence = OFF_NS - gains.get(phase, [0] * groups)[min(block // len(arms), groups - 1)]
        log.step({"step": i, "rank": 0, "rows": 8 if phase == "on" else 0, "vocab": 100 if phase == "on" else 0,
                  "dtype": "float32", "launched": phase == "on", "used": phase == "on", "fallback": None,
                  "t0_ns": t0, "fwd": [100, 5000], "exp": None, "wait": None, "sample": [5100, 6000],
                  "host_end": 6000, "phase": phase, "block": block, "reqs": 8, "tokens": 8, "timing": "host"})
        t0 += cadence
    log.close()


def _ci(d) -> list[float]:
    half = sps.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / np.sqrt(len(d))
    return [float(np.mean(d) - half), float(np.mean(d) + half)]


def test_three_arms_give_three_comparisons_each_with_its_ci(tmp_path):
    # GIVEN a three-arm log: native steps NATIVE_GAIN[g] and on steps ON_GAIN[g] faster than off in group g
    _write(tmp_path, THREE_ARMS, {"native": NATIVE_GAIN, "on": ON_GAIN})
    # WHEN read and analysed
    savings, _natural = savings_of(load([tmp_path]).timelines)
    # THEN three comparisons, in the documented order, each on every group
    assert [s.compared for s in savings] == [["off", "on"], ["off", "native"], ["native", "on"]]
    assert all(s.arms == list(THREE_ARMS) and s.pairs == len(ON_GAIN) for s in savings)
    want = {("off", "on"): ON_GAIN, ("off", "native"): NATIVE_GAIN,
            ("native", "on"): [b - a for a, b in zip(NATIVE_GAIN, ON_GAIN, strict=True)]}
    for s in savings:
        d = want[tuple(s.compared)]
        # AND each saving is the mean of its group differences with scipy's paired CI
        assert s.saving.mean_ns == pytest.approx(np.mean(d))
        assert s.saving.ci_ns == pytest.approx(_ci(d))
        assert s.saving.t_p == pytest.approx(sps.ttest_1samp(d, 0.0).pvalue)
        assert s.decision == "enable"
        # AND only the steps of the two compared arms count (washout: one per block of each, and the extra
        # last step opens a block of its own)
        extra = switchback_phase(3 * len(ON_GAIN) * K, K, THREE_ARMS) in s.compared
        assert s.dropped["washout"] == 2 * len(ON_GAIN) + extra and s.baseline_steps == s.arm_steps == (K - 1) * len(ON_GAIN)
    # AND the saving line names each comparison with its verdict and saving
    line = saving_line(savings)
    assert line.startswith("saving (switchback, 3 arms): on vs off: enable — saves ")
    assert "; native vs off: enable — saves " in line and "; on vs native: enable — saves " in line


def test_the_tables_name_each_arm(tmp_path):
    # GIVEN the same three-arm log WHEN the tables are rendered
    from rich.console import Console

    from expo_prof.terminal.saving import render_saving

    _write(tmp_path, THREE_ARMS, {"native": NATIVE_GAIN, "on": ON_GAIN})
    savings, natural = savings_of(load([tmp_path]).timelines)
    con = Console(record=True, width=200)
    render_saving(con, savings, natural)
    text = con.export_text()
    # THEN each comparison has its table, the baseline and the arm named in words
    assert "on (overlay) against off (inline draw)" in text
    assert "native (engine as shipped) against off (inline draw)" in text
    assert "on (overlay) against native (engine as shipped)" in text


def test_a_schema_2_log_is_still_two_arms(tmp_path):
    # GIVEN a log of the previous schema (2: no header arms), on steps 2 µs faster in every pair
    _write(tmp_path, ("off", "on"), {"on": [2000, 2100, 1900, 2000]}, schema=2)
    # WHEN read and analysed THEN one comparison, on against off, as before
    res = load([tmp_path])
    assert overlay_log(res.timelines[0]).header["schema"] == 2
    savings, _ = savings_of(res.timelines)
    assert [s.compared for s in savings] == [["off", "on"]] and savings[0].arms == ["off", "on"]
    assert savings[0].saving.mean_ns == pytest.approx(2000)
    assert saving_line(savings).startswith("saving (switchback): enable — saves ")
