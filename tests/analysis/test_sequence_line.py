"""The saving line of a sequential switchback says where it was decided when later pairs widened the sequence.

GIVEN the committed sequential sample's saving (a real vLLM CPU run that settled at block pair 7 of 72) WHEN its
sequence at the last pair is made to span zero (as a real run showed: pairs still in flight after the settling
look, a few stalled blocks among them, widened it) THEN the line keeps the first settling look's decision and says
"decided at block pair 7 (the pairs after it widened the sequence)"; while the last pair's sequence still
supports the decision (the sample as recorded), it says nothing of the kind.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from expo_prof.pipeline import run
from expo_prof.pipeline.result import saving_line

SAMPLE = Path(__file__).resolve().parents[2] / "traces" / "samples" / "tiny-cpu-sequential"


def test_a_widened_sequence_names_the_pair_that_decided():
    (sv,) = [s for rr in run([SAMPLE]).recordings for s in rr.savings]
    sq = sv.sequence
    assert sq is not None and sq.decision == "keep off" and sq.settled_at == 7 < sq.pairs
    assert "decided at block pair" not in saving_line([sv])
    wide = msgspec.structs.replace(sv, sequence=msgspec.structs.replace(sq, lo_ns=-500_000.0, hi_ns=300_000.0))
    line = saving_line([wide])
    assert line.startswith("saving (switchback): keep off — costs ")
    assert line.endswith(f"{sq.pairs} block pairs, decided at block pair 7 (the pairs after it widened the sequence)")
