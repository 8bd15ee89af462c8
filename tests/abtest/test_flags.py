"""Warm-up and outlier flags: what is flagged, and what is deliberately not.

GIVEN small sets of run values (synthetic, chosen to sit on each side of the
rules in docs/ab.md) WHEN the flag rules run THEN only the runs the rules
describe are flagged.
"""

from __future__ import annotations

from expo_prof.abtest.judging import flags
from expo_prof.abtest.metrics import HIGHER, LOWER

RUNS = ["r1", "r2", "r3", "r4"]


def test_warmup_needs_the_first_run_far_worse_on_both_sides():
    # GIVEN first runs ~10% low on both sides THEN both are warm-up runs
    got = flags.warmup("off", RUNS, [900, 1000, 1004, 998], "on", RUNS, [915, 1020, 1023, 1018], "t", HIGHER)
    assert [(f.side, f.run, f.kind) for f in got] == [("off", "r1", "warm-up"), ("on", "r1", "warm-up")]
    assert got[0].reference == 1000 and got[0].robust_z < -3.5
    # GIVEN only one side starts low THEN it is not a warm-up pattern (no flag)
    assert flags.warmup("off", RUNS, [900, 1000, 1004, 998], "on", RUNS, [1019, 1020, 1023, 1018], "t", HIGHER) == []
    # GIVEN a first run that is *better* THEN it is not a warm-up either
    assert flags.warmup("off", RUNS, [1100, 1000, 1004, 998], "on", RUNS, [1120, 1020, 1023, 1018], "t", HIGHER) == []


def test_warmup_direction_follows_the_metric():
    # GIVEN a latency metric: a warm-up run is slower, i.e. *higher*
    got = flags.warmup("off", RUNS, [60.0, 40.0, 40.2, 39.9], "on", RUNS, [58.0, 38.0, 38.1, 37.9], "tpot", LOWER)
    assert len(got) == 2


def test_warmup_ignores_noise_and_short_runs():
    # GIVEN a first run low by only 0.3% (far in z, but below the 0.5% floor) THEN no flag
    assert flags.warmup("a", RUNS, [997.0, 1000.0, 1000.1, 999.9], "b", RUNS, [1017.0, 1020.0, 1020.1, 1019.9], "t", HIGHER) == []
    # GIVEN only 2 runs per side THEN there is nothing to judge the first run against
    assert flags.warmup("a", RUNS[:2], [800, 1000], "b", RUNS[:2], [810, 1020], "t", HIGHER) == []


def test_outliers_within_a_side():
    names = [f"r{i}" for i in range(6)]
    # GIVEN one run 8% off among five tight ones THEN only it is flagged
    got = flags.outliers("on", names, [1020, 1021, 940, 1019, 1022, 1020.5], "t")
    assert [(f.run, f.kind) for f in got] == [("r2", "outlier")]
    # GIVEN warm-up runs to skip THEN they are neither scored nor counted
    assert flags.outliers("on", names, [700, 1021, 1020, 1019, 1022, 1020.5], "t", skip={0}) == []
    # GIVEN only 4 runs THEN no outlier is called, however far
    assert flags.outliers("on", names[:4], [1020, 1021, 940, 1019], "t") == []
