"""Agreement with msprof's own per-step totals for the torch_npu SQLite export (``ascend_pytorch_profiler_*.db``).

Next to each real ``.db`` export, torch_npu wrote ``analysis.db`` whose
``StepTraceTime`` table holds, per step and in µs with three decimals (= ns),
``computing`` (the union of the compute tasks), ``communication`` (the union of
the HCCL ops) and ``overlapped`` (their intersection). With ``--op ^hcom_``,
``expo-prof analyze`` measures the same: the HCCL ops of ``COMMUNICATION_OP``
as instances, hidden where compute kernels on the other streams cover them.

The .db holds more device tasks than those two sets: msprof also writes one
``AI_CORE`` task per HCCL op on the communication stream (spanning the whole
op; it shares the op's ``connectionId``), and a few kernel-typed tasks that
have no operator in ``COMPUTE_TASK_INFO``. Counted as compute, the first would
cover every op entirely (hidden fraction 1.0); the checks below pin that they
are not.

GIVEN the real level0 and level1 exports in ../shared/realtraces/msinsight,
WHEN ``expo-prof analyze DBDIR --op '^hcom_' --json`` runs as a subprocess,
THEN per step its communication and hidden time equal ``communication`` and
``overlapped`` to the nanosecond, and the compute kernels of the loaded
Timeline cover exactly ``computing``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from expo_prof.analysis import intervals as iv
from expo_prof.analysis.overlap.cover import busy_mask
from expo_prof.readers import load
from expo_prof.timeline import Kind, LaneKind


REPO = Path(__file__).resolve().parents[2]
DB = "msinsight/test/data/pytorch/db"
EXPORTS = {"level0": f"{DB}/level0/rank0_ascend_pt", "level1": f"{DB}/level1/rank0_ascend_pt"}


def _us_to_ns(v: float) -> int:
    # The µs values carry three decimals: through their repr, Decimal gives the exact ns.
    return int((Decimal(repr(v)) * 1000).to_integral_value())


def _step_trace_time(d: Path) -> dict[int, dict[str, int]]:
    """analysis.db's StepTraceTime, read with sqlite3 (read-only, immutable), in ns."""
    uri = f"file:{d / 'ASCEND_PROFILER_OUTPUT' / 'analysis.db'}?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True)
    try:
        cur = con.execute("SELECT step, computing, communication, overlapped FROM StepTraceTime")
        return {int(st): {"computing": _us_to_ns(c), "communication": _us_to_ns(m), "overlapped": _us_to_ns(o)}
                for st, c, m, o in cur}
    finally:
        con.close()


def _analyze_json(d: Path) -> dict:
    p = subprocess.run(
        [sys.executable, "-c", "from expo_prof.cli.main import main; main()", "analyze", str(d), "--op", "^hcom_",
         "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=dict(os.environ),
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("key", list(EXPORTS))
def test_db_overlapped_matches_step_trace_time(realtraces, key):
    d = realtraces / EXPORTS[key]
    want = _step_trace_time(d)
    doc = _analyze_json(d)
    # THEN the db (not another rendering of the profile) was analysed, one step per StepTraceTime row ...
    (rank,) = doc["ranks"]
    assert rank["fmt"] == "ascend-db"
    got = {s["step"]: s for s in doc["steps"]}
    assert set(got) == set(want)
    for step, cols in want.items():
        s = got[step]
        # ... with the communication time (union of the hcom_* ops) and the overlapped time to the ns
        assert s["total_ns"] == cols["communication"]
        assert s["hidden_ns"] == cols["overlapped"]
        # ... which is far from "all of it hidden" (the op-level AI_CORE tasks are communication)
        assert s["hidden_ns"] < s["total_ns"] / 10
    assert doc["summary"]["hidden_fraction"] < 0.1


@pytest.mark.parametrize("key", list(EXPORTS))
def test_db_compute_set_is_computing(realtraces, key):
    d = realtraces / EXPORTS[key]
    (step, cols), = _step_trace_time(d).items()
    db = next((d / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db"))
    tl = load([db]).timelines[0]
    # GIVEN the TASK rows the db links to no operator and no HCCL task, read with sqlite3
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        n_info = con.execute("SELECT count(*) FROM TASK WHERE globalTaskId IN "
                             "(SELECT globalTaskId FROM COMPUTE_TASK_INFO)").fetchone()[0]
        op_tasks = sorted(con.execute(
            "SELECT startNs, endNs - startNs FROM TASK WHERE connectionId IN (SELECT connectionId FROM COMMUNICATION_OP) "
            "AND globalTaskId NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)").fetchall())
    finally:
        con.close()
    # THEN the compute kernels are exactly the COMPUTE_TASK_INFO tasks, whose union is msprof's "computing"
    rows = np.flatnonzero(busy_mask(tl, LaneKind.STREAM))
    assert len(rows) == n_info
    assert iv.union(tl.start[rows], tl.start[rows] + tl.dur[rows]).measure == cols["computing"]
    # AND the op-level tasks on the HCCL stream (one per hcom_* op) are communication, not compute
    assert len(op_tasks) == 4
    comm = (tl.kind == Kind.COMM) & np.array([ln.kind == LaneKind.STREAM for ln in tl.lanes])[tl.lane]
    assert set(op_tasks) <= set(zip(tl.start[comm].tolist(), tl.dur[comm].tolist()))
    assert tl.meta["kernel_tasks_without_op_info"] > 0
