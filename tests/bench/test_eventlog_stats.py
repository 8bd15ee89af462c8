"""The benchmarks' event-log figures (bench/eventlog_stats.py) on logs with windows known by construction."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from overlay.events import EventLog

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from eventlog_stats import event_log_hidden, overlap  # noqa: E402


def _log(out: Path, steps) -> None:
    log = EventLog(str(out))
    log.configure(backend="cpu", lane="thread", rank=0)
    for i, (fwd, exp, wait, used) in enumerate(steps):
        log.step({"step": i, "rank": 0, "rows": 4 if exp else 0, "vocab": 32 if exp else 0, "dtype": "float32",
                  "launched": exp is not None, "used": used,
                  "fallback": None if used else ("all_greedy" if exp is None else "not_consumed"),
                  "t0_ns": 10**9 + i * 10**7, "fwd": fwd, "exp": exp, "wait": wait, "timing": "host"})
    log.close()


@pytest.mark.parametrize("a,b,want", [((0, 10), (5, 20), 5), ((0, 10), (10, 20), 0), ((3, 4), (0, 10), 1),
                                      ((0, 10), (20, 30), 0), ((5, 20), (0, 10), 5)])
def test_overlap_of_two_windows(a, b, want):
    assert overlap(a, b) == want


def test_figures_equal_the_windows_written(tmp_path):
    # GIVEN three draws: fully under the forward, half under it, not under it; and a greedy step without a draw
    _log(tmp_path, [
        ([0, 1_000_000], [100_000, 300_000], [1_000_000, 1_000_500], True),   # 200 µs, all hidden
        ([0, 1_000_000], [900_000, 1_100_000], [1_000_000, 1_100_000], True),  # 200 µs, 100 µs hidden
        ([0, 1_000_000], [2_000_000, 2_400_000], [1_000_000, 2_400_000], True),  # 400 µs, none hidden
        ([0, 1_000_000], None, None, False),
    ])
    # WHEN the benchmarks' figures are read back
    hidden, wait_ms, n = event_log_hidden(str(tmp_path))
    # THEN 3 draws, (200 + 100) / 800 hidden, and the mean wait is (0.5 + 100 + 1400) µs / 3
    assert n == 3
    assert hidden == pytest.approx(300_000 / 800_000)
    assert wait_ms == pytest.approx((500 + 100_000 + 1_400_000) / 3 / 1e6)
