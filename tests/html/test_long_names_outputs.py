"""Issue 34 item 3: long names must not blow up the pages or the exports.

The traces are GENERATED here (Kineto JSON, scaled down from the issue's 100 k
events with 10 KB names): a step, and ``N`` exponential draws each under an
``aten::mm`` of another thread, the draws named ``aten::exponential_`` + 10 KB —
either one name repeated on every draw, or all different. The same trace with
short names is the reference: a long name may add its 10 KB once (same name),
or the page's long-name budget plus a cut name per event (all different), never
10 KB per event. Measured on the real CLI's output files.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.html import names as names_mod
from expo_prof.html.names import CUT, LONG_BUDGET
from expo_prof.html.timeline_data import build_payload
from expo_prof.readers import read_file
from expo_prof.readers.long_names import WHOLE_BUDGET, WRITTEN_BUDGET
from expo_prof.words import is_cut_name
from shared_paths import REPO

N = 300
LONG = 10_240


def _name(mode: str, i: int) -> str:
    if mode == "short":
        return "aten::exponential_"
    if mode == "same":
        return "aten::exponential_" + "x" * LONG
    return f"aten::exponential_{i:08d}" + "y" * LONG


def _trace(path: Path, mode: str) -> Path:
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": N * 10 + 100}]
    for i in range(N):
        ev.append({"ph": "X", "cat": "cpu_op", "name": _name(mode, i), "pid": 1, "tid": 2, "ts": 10 + i * 10, "dur": 5})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10 + i * 10, "dur": 3})
    path.write_text(json.dumps({"traceEvents": ev, "baseTimeNanoseconds": 0}))
    return path


def _cli(tmp: Path, cmd: str, src: Path, out: str, *more: str) -> tuple[Path, str]:
    dest = tmp / out
    r = subprocess.run([sys.executable, "-m", "expo_prof", cmd, str(src), "--op", "exponential", "-o", str(dest), *more],
                       capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "COLUMNS": "200",
                                                                     "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 0, r.stderr
    return dest, r.stderr


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("long-names")
    return {m: _trace(d / f"{m}.pt.trace.json", m) for m in ("short", "same", "distinct")}


@pytest.mark.parametrize("cmd", ["timeline", "report"])
def test_one_long_name_on_every_draw_is_in_the_page_once(tmp_path, traces, cmd):
    # GIVEN 300 draws all named by one 10 KB name, and the same trace with a short name
    # WHEN the page is written of each
    short, _ = _cli(tmp_path, cmd, traces["short"], "short.html")
    page, err = _cli(tmp_path, cmd, traces["same"], "same.html")
    # THEN the full name is in the page exactly once, and it costs the page its length, not 10 KB per draw
    text = page.read_text()
    assert text.count(_name("same", 0)) == 1
    assert page.stat().st_size - short.stat().st_size < LONG + 2_000
    assert "cut" not in err


@pytest.mark.parametrize("cmd", ["timeline", "report"])
def test_all_different_long_names_stay_within_the_page_budget(tmp_path, traces, cmd):
    # GIVEN 300 draws each with its own 10 KB name (3 MB of names: more than the page's long-name budget)
    short, _ = _cli(tmp_path, cmd, traces["short"], "short.html")
    # WHEN the page is written
    page, err = _cli(tmp_path, cmd, traces["distinct"], "distinct.html")
    # THEN the page grows by at most the budget plus a cut name per draw, and no whole name is there twice
    grown = page.stat().st_size - short.stat().st_size
    assert grown < LONG_BUDGET + N * (CUT + 60)
    text = page.read_text()
    assert all(text.count(_name("distinct", i)) <= 1 for i in (0, N // 2, N - 1))
    if cmd == "timeline":
        # the names past the budget are cut with their count, and the command says so
        # (cut on reading first: the count and the hash of the whole name stay; expo_prof.readers.long_names)
        assert f"{_name('distinct', N - 1)[:CUT]}… (+{len(_name('distinct', N - 1)) - CUT:,} characters #" in text
        assert "names longer than 256 characters cut to 64" in err
        assert "names longer than 256 characters cut to 64" in text  # the page's own warnings


@pytest.mark.parametrize("mode", ["same", "distinct"])
def test_json_export_adds_no_long_name_per_draw(tmp_path, traces, mode):
    # GIVEN draws with 10 KB names
    src = traces[mode]
    # WHEN exported to Chrome JSON (a JSON trace has no table of names: the passed-through events' long names are
    # whole up to the reader's budget and WRITTEN_BUDGET characters, cut past them)
    out, err = _cli(tmp_path, "export", src, "out.json")
    # THEN the added tracks name each draw cut with a count, not whole again: the file is at most the source plus a
    # few hundred bytes per draw (was twice the source), and within the written budget plus as much
    assert out.stat().st_size < min(src.stat().st_size, WRITTEN_BUDGET + WHOLE_BUDGET) + N * 1_500
    doc = json.loads(out.read_text())
    names = [e["args"]["name"] for e in doc["traceEvents"] if e.get("cat") == "expo_prof" and e.get("name") == "instance"]
    assert len(names) == N
    whole = f"… (+{LONG + 18 + (8 if mode == 'distinct' else 0) - 256:,} characters)"
    if mode == "same":
        assert all(n.endswith(whole) for n in names)
        assert f"{N} instances' name arg cut to 256 characters" in err  # and the command says so
    else:  # names past the reader's budget were cut on reading (with a hash), the others here
        assert all(n.endswith(whole) or is_cut_name(n) for n in names)
        assert any(is_cut_name(n) for n in names) and any(n.endswith(whole) for n in names)
        assert "instances' name arg cut to 256 characters" in err
        assert "distinct names longer than 256 characters cut to their first 200" in err


def test_perfetto_export_holds_one_long_name_once(tmp_path, traces):
    # GIVEN 300 draws named by one 10 KB name
    # WHEN exported to Perfetto's protobuf
    out, err = _cli(tmp_path, "export", traces["same"], "out.pftrace", "--format", "perfetto")
    # THEN the name is interned once (the draws' debug annotations hold it cut): far below 10 KB per draw
    data = out.read_bytes()
    assert data.count(_name("same", 0).encode()) == 1
    assert len(data) < 3 * LONG + N * 1_000
    assert f"{N} instances' name arg cut to 256 characters" in err


def test_past_the_fold_cut_names_share_one_entry_of_the_page(traces, monkeypatch):
    # GIVEN 300 draws with distinct 10 KB names, about 200 of them cut on reading, and a page whose cut names may
    # hold 2,000 characters (FOLD_AFTER lowered from 4 Mi so that 300 draws pass it, as a million would)
    monkeypatch.setattr(names_mod, "FOLD_AFTER", 2_000)
    tl = read_file(traces["distinct"])
    # WHEN the timeline's payload is built
    payload = build_payload([analyze_timeline(tl, re.compile("exponential"))])
    # THEN the cut names past the fold share one entry that counts them, every draw still has a name, and the
    # page's warnings say so
    table = payload["names"]
    other = [n for n in table if n.startswith("other long names (")]
    assert len(other) == 1
    folded = int(other[0].removeprefix("other long names (").removesuffix(")").replace(",", ""))
    inst_names = [table[i] for i in payload["inst"]["name"].tolist()]
    assert len(inst_names) == N and inst_names.count(other[0]) == folded > N // 3
    assert sum(len(n) for n in table if is_cut_name(n)) < 2_000 + 200
    assert any(f"{folded:,} more share one entry" in w for w in payload["warnings"])
