"""The "nothing found" error of ``analyze`` (analysis/rollup.py), word for word.

GIVEN hand-built timelines without any target instance, WHEN analysed, THEN
NothingFound carries one short line naming how many timelines and events were
searched, and as details (printed as a short list under it) what was looked
for (the built-in rules, or the --op pattern) and the similar names present —
long names cut to 120 characters (117 + "...") — or that none are.
"""

from __future__ import annotations

import pytest
from analysis_helpers import STREAM, THREAD  # type: ignore[import-not-found]

from expo_prof.analysis.rollup import analyze
from expo_prof.analysis.targets import LOOKED_FOR
from expo_prof.errors import NothingFound
from expo_prof.timeline import Kind

LANES = [(THREAD, "cpu", "thread 1"), (STREAM, "cuda:0", "stream 7")]
class _Head:
    @staticmethod
    def format(n: int, e: int) -> str:
        return f"no target instance found in {n} timeline{'' if n == 1 else 's'} ({e} events); looked for: "


HEAD = _Head


def _message(tls, op=None):
    """The error line and its details, joined as the JSON's per-recording ``error`` joins them."""
    with pytest.raises(NothingFound) as ei:
        analyze(tls, op=op)
    assert "; " not in str(ei.value)  # the line itself stays short: the rest are details
    return "; ".join([str(ei.value), *ei.value.details])


def test_similar_names_are_listed_most_frequent_first_and_long_ones_cut(make_tl):
    # GIVEN a 120-character uniform-kernel name (3 times), a 121-character one (twice) and a 130-character one
    n120 = "uniform_kernel_" + "x" * 105
    n121 = "sampler_" + "z" * 113
    n130 = "rand_fill_" + "y" * 120
    assert (len(n120), len(n121), len(n130)) == (120, 121, 130)
    tl1 = make_tl(LANES, [(1, 10 * i, 5, n120, Kind.KERNEL) for i in range(3)])
    tl2 = make_tl(LANES, [(1, 0, 5, n130, Kind.KERNEL), (0, 0, 5, "aten::add", Kind.CPU_OP),
                          (1, 10, 5, n121, Kind.KERNEL), (1, 20, 5, n121, Kind.KERNEL)])
    msg = _message([tl1, tl2])
    # THEN: 2 timelines, 7 events, the built-in rules, and the names (120 chars whole, longer ones cut to 120)
    shown = f"{n120!r}, {(n121[:117] + '...')!r}, {(n130[:117] + '...')!r}"
    assert msg == (HEAD.format(n=2, e=7) + "; ".join(LOOKED_FOR)
                   + f"; similar names present: {shown} (try --op REGEX)")


def test_no_similar_names_says_which_words_were_tried(make_tl):
    tl = make_tl(LANES, [(0, 0, 5, "aten::add", Kind.CPU_OP), (1, 0, 5, "gemm_kernel", Kind.KERNEL)])
    msg = _message([tl])
    assert msg == (HEAD.format(n=1, e=2) + "; ".join(LOOKED_FOR)
                   + "; no similar names (random/uniform/exponential/rand/gumbel/sampl) present"
                   # issue 34: and the next step (another name, greedy sampling, CUDA graphs)
                   + "; next: a draw under another name? --op NAME. Greedy sampling (temperature 0) draws no noise "
                   "at all: profile with temperature > 0. Under CUDA graphs the profiler does not see the kernels "
                   "inside a graph: profile with --enforce-eager")


def test_with_op_similar_means_similar_to_the_pattern(make_tl):
    # GIVEN --op NCCL (case-sensitive, so it matches nothing) and a host op "nccl:all_reduce"
    tl = make_tl(LANES, [(0, 0, 5, "nccl:all_reduce", Kind.CPU_OP), (1, 0, 5, "uniform_kernel", Kind.KERNEL)])
    msg = _message([tl], op="NCCL")
    # THEN the pattern is what was looked for, and the similar name is the nccl one (not the RNG kernel)
    assert msg == HEAD.format(n=1, e=2) + "--op 'NCCL'; similar names present: 'nccl:all_reduce' (try --op REGEX)"
    # AND with nothing similar to the pattern, the message says so without the built-in word list
    msg = _message([tl], op="zzz_not_there")
    assert msg == HEAD.format(n=1, e=2) + "--op 'zzz_not_there'; no similar names present"


@pytest.mark.parametrize("source,inputs,line", [
    ("overlay-log", ["trace"], "--source overlay-log: no overlay event log among the inputs"),
    ("trace", ["log"], "--source trace: no profiler trace among the inputs holds a draw"),
])
def test_a_source_that_leaves_out_every_draw_is_named_as_the_cause(source, inputs, line):
    """GIVEN the real sample run's trace (only) or its overlay event log (only) WHEN analysed with the --source
    that excludes it THEN the error names --source and the instances the other inputs hold — never `--op`,
    which would send the user after the wrong cause."""
    from pathlib import Path

    from expo_prof.readers import load

    run = Path(__file__).resolve().parents[2] / "traces" / "samples" / "tiny-cpu-off-on" / "02-on"
    path = next((run / "profiler").glob("rank0*.pt.trace.json.gz")) if inputs == ["trace"] else run / "overlay"
    tls = load([path]).timelines
    with pytest.raises(NothingFound) as ei:
        analyze(tls, source=source)
    assert str(ei.value).startswith(line), str(ei.value)
    assert "--op" not in str(ei.value) + " ".join(ei.value.details)
    assert "instances" in ei.value.details[0] and "leave out --source" in ei.value.details[0]
