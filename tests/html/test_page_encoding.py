"""The timeline page's packed columns decode to exactly the payload: delta starts, signed pieces, sparse gaps."""

from __future__ import annotations

import json

import numpy as np
from dense_trace import dense_cuda_timeline  # type: ignore[import-not-found]

from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.html.escape import json_for_script
from expo_prof.html.timeline_data import DELTA_TABLES, build_payload, decode_page, encode_for_page


def _roundtrip(payload: dict) -> dict:
    return decode_page(json.loads(json_for_script(encode_for_page(payload))))


def _same(payload: dict, back: dict) -> None:
    for t in DELTA_TABLES + ("piece",):
        for k, v in payload[t].items():
            assert np.asarray(v).tolist() == list(back[t][k]), (t, k)


def test_real_trace_pieces_and_starts_roundtrip(nccl_trace):
    """GIVEN the payload of a real A100 trace (NCCL kernels as instances, several members each)
    WHEN packed for the page, written as JSON and decoded THEN every column is exactly the payload's."""
    from expo_prof.html.build import timeline_document

    p = timeline_document([nccl_trace], op="nccl").payload
    assert len(p["piece"]["start"]) > len(p["inst"]["start"]) > 0
    _same(p, _roundtrip(p))


def test_gapped_and_adjacent_same_kind_pieces_roundtrip():
    """GIVEN an instance whose pieces leave gaps and repeat a kind back to back (two members), and a
    dense generated trace WHEN packed and decoded THEN the pieces come back exactly; the gaps are stored sparsely."""
    p = build_payload([analyze_timeline(dense_cuda_timeline(3))])
    p["piece"] = {"inst": np.array([0, 0, 0, 1, 2]), "start": np.array([p["inst"]["start"][0] + 5, p["inst"]["start"][0] + 9,
                                                                         p["inst"]["start"][0] + 30, p["inst"]["start"][1],
                                                                         p["inst"]["start"][2] + 1]),
                  "dur": np.array([4, 7, 2, 10, 3]), "hidden": np.array([1, 1, 0, 0, 1])}
    p["inst"] = dict(p["inst"], np=np.array([3, 1, 1]))
    enc = encode_for_page(p)
    assert enc["piece"]["gap_at"].tolist() == [0, 2, 4] and enc["piece"]["gap"].tolist() == [5, 14, 1]
    assert enc["piece"]["d"].tolist() == [4, 7, -2, -10, 3]
    _same(p, _roundtrip(p))
    dense = build_payload([analyze_timeline(dense_cuda_timeline(20))])
    assert len(encode_for_page(dense)["piece"]["gap_at"]) == 0  # one member per draw: pieces tile it
    _same(dense, _roundtrip(dense))
