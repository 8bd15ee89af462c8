"""Inter-token gaps from what a run kept: the built-in load's ``workload.json`` and ``vllm bench serve`` results.

Both keep one gap per streamed chunk after the first, per request, in seconds: the built-in load as
``requests[].itl_s`` (expo_prof/serving/load.py: every request, with ``ok`` and ``warmup``), ``vllm bench serve
--save-result --save-detailed`` as ``itls`` (a list per request; a failed request's is empty). The gaps of a
run's measured requests are pooled into one array (:attr:`~expo_prof.abtest.inputs.sides.Run.itl_s`), which
the token-arrival check of :mod:`expo_prof.abtest.judging.flags` reads. An input without them (a table, a
result saved without ``--save-detailed``, a ``workload.json`` from a user's load command without its result
file) gives None: the check is then not measurable, and nothing is said about it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from expo_prof.pipeline.token_gaps import seconds_of


def _pooled(lists: list[Any]) -> np.ndarray | None:
    gaps = [g for lst in lists if isinstance(lst, list) for x in lst if (g := seconds_of(x)) is not None]
    return np.asarray(gaps, dtype=np.float64) if gaps else None


def from_workload(workload: Any) -> np.ndarray | None:
    """The gaps (s) of the measured requests (``ok``, not the warm-up) of a built-in load's ``workload.json``."""
    requests = workload.get("requests") if isinstance(workload, dict) else None
    if not isinstance(requests, list):
        return None
    return _pooled([r.get("itl_s") for r in requests
                    if isinstance(r, dict) and r.get("ok") is True and not r.get("warmup")])


def from_bench(data: Any) -> np.ndarray | None:
    """The gaps (s) of a ``vllm bench serve --save-detailed`` result (``itls``: a list per request)."""
    itls = data.get("itls") if isinstance(data, dict) else None
    return _pooled(itls) if isinstance(itls, list) else None
