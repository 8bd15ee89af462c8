"""expo_prof/analysis/arrays.py against numpy, and the import it spares a process."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof.analysis.arrays import distinct


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), max_size=60))
def test_distinct_is_np_unique(values):
    """GIVEN int64 values with repeats and extremes WHEN made distinct THEN exactly np.unique's values, in order,
    of the same dtype."""
    a = np.array(values, dtype=np.int64)
    got = distinct(a)
    assert got.dtype == np.int64 and np.array_equal(got, np.unique(a))


def test_analysing_a_rank_does_not_import_numpy_ma(realtraces):
    """GIVEN a real vLLM CPU trace WHEN analysed as `expo-prof analyze` does it, in a fresh interpreter
    THEN numpy.ma (imported by np.unique's first plain call: about 10 ms a process) is never imported."""
    code = (
        "import sys, msgspec\n"
        "from expo_prof.pipeline import Options, run\n"
        f"msgspec.json.encode(run([{str(realtraces / 'vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz')!r}], "
        "Options.make(jobs=1, events=False)).document)\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout
