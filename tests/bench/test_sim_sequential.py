"""The sequential switchback's error under peeking, on real step series (a small, fast bench/sim_sequential.py).

GIVEN the committed real switchback run recorded on the vLLM CPU server (traces/samples/tiny-cpu-sequential), one
arm's step cadences resampled (circular block bootstrap) into runs with no effect WHEN each run looks after every
block pair THEN the confidence sequence's rate of a false enable / keep off stays at 5 % (binomial slack), while
the fixed-horizon CI looked at as often does not; AND with the on arm 10 % faster the sequence decides "enable"
in most runs.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from shared_paths import REPO

sys.path.insert(0, str(REPO / "bench"))
import sim_sequential as sim  # noqa: E402


@pytest.mark.slow  # ~3 s of a core: 150 bootstrapped runs
def test_peeking_holds_the_error_on_real_steps():
    (src, *_) = sim.sources([sim.SAMPLES / "tiny-cpu-sequential"])
    assert src.name.endswith(" off") and len(src.cadences) > 500
    runs = 150
    row = sim.simulate(src, runs, 100, 8, np.random.default_rng(7))
    slack = 2 * math.sqrt(0.05 * 0.95 / runs)
    assert row["null_sequence"] <= 0.05 + slack, row
    assert row["null_fixed_peeking"] > row["null_sequence"] + 0.1, row
    ten = row["effect_0.1"]
    assert ten["right"] >= 0.7 and ten["decided"] >= ten["right"], row
