"""Issue 34 item 3: a trace whose events all carry their own 10 KB name must not make the reader, `analyze --json`
or the JSON export hold or write 10 KB per event.

The trace is GENERATED here (Kineto JSON, 20 MB: 2,000 draws named
``aten::exponential_<i>`` + 10 KB, each beside an ``aten::mm`` on another
thread, in one step) — the issue's 100 k events scaled down to run in seconds.
Before the fix the reader kept every name whole (20 MB of names), ``analyze
--json`` and the export wrote each again.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from expo_prof.readers import read_file
from expo_prof.readers.long_names import KEEP, LONG, WHOLE_BUDGET
from expo_prof.words import is_cut_name
from shared_paths import REPO

N = 2_000
PAD = 10_240


def _name(i: int) -> str:
    return f"aten::exponential_{i:08d}" + "y" * PAD


@pytest.fixture(scope="module")
def distinct(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("long-names-reader") / "distinct.pt.trace.json"
    with open(path, "w") as f:
        f.write('{"traceEvents": [')
        f.write(json.dumps({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
                            "ts": 0, "dur": N * 10 + 100}))
        for i in range(N):
            f.write(f',{{"ph":"X","cat":"cpu_op","name":"{_name(i)}","pid":1,"tid":2,"ts":{10 + i * 10},"dur":5}}'
                    f',{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{10 + i * 10},"dur":3}}')
        f.write('], "baseTimeNanoseconds": 0}')
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, cwd=REPO,
                       env={"PYTHONPATH": str(REPO), "COLUMNS": "400", "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def test_reader_keeps_a_bounded_prefix_of_each_distinct_long_name(distinct):
    # GIVEN 2,000 draws each with its own 10 KB name (20 MB of names)
    # WHEN the trace is read
    tl = read_file(distinct)
    # THEN the names table holds the long-name budget plus at most LONG characters per distinct name, not 20 MB
    held = sum(len(n) for n in tl.names)
    assert held <= WHOLE_BUDGET + PAD + 100 + N * LONG
    # the first names are whole, each once; the later ones are cut, and different names stay apart
    long_names = [n for n in tl.names if n.startswith("aten::exponential_")]
    assert len(long_names) == N
    assert _name(0) in long_names
    cut = [n for n in long_names if is_cut_name(n)]
    assert len(cut) > N // 2
    assert all(len(n) <= LONG for n in cut)
    last = next(n for n in cut if n.startswith(_name(N - 1)[:KEEP]))
    assert f"… (+{len(_name(N - 1)) - KEEP:,} characters #" in last
    # every draw is still found by --op on the kept characters
    assert sum(tl.names[i].startswith("aten::exponential_") for i in tl.name.tolist()) == N
    # and one warning says what was cut
    said = [w for w in tl.warnings if "names longer than 256 characters cut" in w]
    assert len(said) == 1
    assert f"{len(cut):,} distinct names" in said[0]


def test_analyze_json_and_the_export_do_not_write_10kb_per_event(distinct, tmp_path):
    # GIVEN the same 20 MB trace
    # WHEN analysed to JSON and exported
    an = _cli("analyze", str(distinct), "--op", "exponential", "--json")
    out = tmp_path / "out.json"
    ex = _cli("export", str(distinct), "--op", "exponential", "-o", str(out))
    # THEN both stay far below the source's size: the budget plus a few hundred bytes per event
    bound = WHOLE_BUDGET + PAD + N * 1_500
    assert len(an.stdout.encode()) < bound
    assert out.stat().st_size < bound + N * 1_500  # the source events plus the added analysis tracks
    # the export is valid JSON whose source events carry the same cut names the reader gave, and says so
    doc = json.loads(out.read_text())
    src_names = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op"}
    assert sum(is_cut_name(n) for n in src_names) > N // 2
    assert "names longer than 256 characters cut" in ex.stderr
    # reading the export back finds every draw again
    back = _cli("analyze", str(out), "--op", "exponential", "--json")
    assert json.loads(back.stdout)["summary"]["instances"] == N


KCSV = "msinsight/test/data/pytorch/text/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"


def test_every_reader_cuts_long_names_the_same_way(rt, tmp_path):
    # GIVEN a real torch_npu kernel_details.csv whose kernels are renamed to distinct 10 KB names (GENERATED from it)
    src = rt / KCSV
    rows = list(csv.reader(src.read_text().splitlines()))
    col = rows[0].index("Name")
    for i, row in enumerate(rows[1:]):
        row[col] = f"{row[col]}_{i:05d}" + "z" * PAD
    hostile = tmp_path / "kernel_details.csv"
    with open(hostile, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    # WHEN both are read
    tl, plain = read_file(hostile), read_file(src)
    # THEN every kernel is there, the names table is bounded as the Chrome reader's is, and one warning says so
    assert len(tl) == len(plain) == len(rows) - 1
    assert sum(len(n) for n in tl.names) <= WHOLE_BUDGET + PAD + 100 + len(rows) * LONG
    cut = [n for n in tl.names if is_cut_name(n)]
    assert cut and all(len(n) <= LONG for n in cut)
    assert len(set(tl.names)) == len(tl.names)  # different names stay apart
    assert sum("names longer than 256 characters cut" in w for w in tl.warnings) == 1
