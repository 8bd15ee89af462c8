"""bench/bench_cluster.py builds what it says and compares what it runs (no time is asserted: docs/testing.md).

GIVEN two ranks of about 3 MB each built from the real vLLM CPU trace, gzipped (``--gzip``) in a temporary
cache, WHEN the bench runs with 2 workers and HTA's row (``--hta``, where HTA is installed), THEN each rank file
is one gzip member holding the replicated trace with its own ``distributedInfo.rank`` (so the trailer states its
length: readers/file_bytes.work_size), the table has a row per configuration, and the 1- and 2-worker documents
are identical.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from expo_prof.readers.file_bytes import work_size

REPO = Path(__file__).resolve().parents[2]


def test_gzipped_ranks_and_the_table(tmp_path, realtraces):
    hta = importlib.util.find_spec("hta") is not None
    p = subprocess.run([sys.executable, str(REPO / "bench" / "bench_cluster.py"), "--ranks", "2", "--size", "3M",
                        "--gzip", "--jobs", "2", "--cache", str(tmp_path), *(["--hta"] if hta else [])],
                       capture_output=True, text=True, cwd=REPO, timeout=600,
                       env={**os.environ, "EXPO_PROF_REALTRACES": str(realtraces)})
    assert p.returncode == 0, p.stderr[-3000:]
    files = sorted(tmp_path.glob("2x*MB-gz/rank*.pt.trace.json.gz"))
    assert [f.name for f in files] == ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"]
    for r, f in enumerate(files):
        data = gzip.decompress(f.read_bytes())
        assert work_size(f) == len(data)
        doc = json.loads(data)
        assert doc["distributedInfo"]["rank"] == r and doc["distributedInfo"]["world_size"] == 2
        assert sum(e.get("name") == "aten::exponential_" for e in doc["traceEvents"]) >= 32
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith("| new")]
    assert [ln.split("|")[2].strip() for ln in rows] == ["1", "2", *(["1"] if hta else [])]
    assert "JSON documents identical (1 vs 2 workers): True" in p.stdout
    if hta:
        assert "| HTA 0.5 parse_trace_dataframe, rank 0 |" in p.stdout
