"""Folders with symbolic-link loops (issue 42, item 4): each loop is skipped with one warning line naming it,
and the rest of the folder is read as if the loop were not there.

GIVEN a folder holding the committed switchback sample's event log (traces/samples/tiny-cpu-sequential) and, in
a second copy, real symbolic-link loops — a link to itself, two links to each other, a link to the folder itself,
a link in a subfolder back to the folder above — WHEN the real CLI walks it (analyze, report, timeline, export,
compare) THEN it exits as for the folder without the loop (0), prints no traceback, one warning line per loop
(naming it), and the same figures as for the copy without the loop. Before the fix a file-level loop was a
RuntimeError traceback from readers/detect.py with exit 1 (the "nothing found" code), and the folder loops were
passed over without a word.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "traces" / "samples" / "tiny-cpu-sequential"
SESSION = REPO / "traces" / "samples" / "tiny-cpu-off-on"


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "COLUMNS": "1000"})


def warnings_of(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]


def loops_said(proc: subprocess.CompletedProcess) -> list[str]:
    return [w for w in warnings_of(proc) if "symbolic link loop" in w]


def _folder(top: Path) -> Path:
    """``top/d``: the sample's event log at the top and a copy one folder down (two ranks' worth of files is not
    needed: the subfolder only has to be walked)."""
    d = top / "d"
    (d / "sub").mkdir(parents=True)
    (log,) = (RUN / "overlay").glob("expo-prof-events-*.jsonl")
    shutil.copy(log, d / log.name)
    return d


#: The loops, as a user's folder may hold them: (the link that names the loop, how it is made, words in its line).
LOOPS = {
    "itself": ("self", lambda d: (d / "self").symlink_to("self"), "d/self → d/self"),
    "pair": ("a", lambda d: ((d / "a").symlink_to("b"), (d / "b").symlink_to("a")), "d/a → d/b → d/a"),
    "dot": ("loop", lambda d: (d / "loop").symlink_to(".", target_is_directory=True),
            "d/loop → .: back to d, the folder it is in"),
    "up": ("sub/up", lambda d: (d / "sub" / "up").symlink_to("../../d", target_is_directory=True),
           "d/sub/up → ../../d: back to d, a folder above it"),
}


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[Path, dict]:
    """The folder without a loop, and its `analyze --json` document (the reference)."""
    top = tmp_path_factory.mktemp("clean")
    _folder(top)
    proc = cli(top, "analyze", "d", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return top, json.loads(proc.stdout)


def _figures(doc: dict) -> dict:
    """The document without what names skipped files (the warnings and the skipped list)."""
    return {k: v for k, v in doc.items() if k not in ("warnings", "skipped")}


@pytest.mark.parametrize("kind", sorted(LOOPS))
def test_analyze_skips_a_loop_with_one_warning_and_the_same_figures(tmp_path, clean, kind):
    """GIVEN the folder with one loop of ``kind`` WHEN `analyze d --json` THEN exit 0, no traceback, exactly one
    warning line about a link loop, naming its link (for two links to each other: once, both named), and a
    document equal to the loop-free folder's but for that one warning and its skipped entry."""
    name, make, words = LOOPS[kind]
    d = _folder(tmp_path)
    make(d)
    proc = cli(tmp_path, "analyze", "d", "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    said = loops_said(proc)
    assert len(said) == 1, proc.stderr
    assert said[0].startswith(f"warning: skipped d/{name}: a symbolic link loop (") and words in said[0], said[0]
    assert said[0].endswith("not descended" if kind in ("dot", "up") else "not followed"), said[0]
    doc = json.loads(proc.stdout)
    _, ref = clean
    assert _figures(doc) == _figures(ref)
    # The loop's warning is the only one added; its skipped entry the only one listed.
    assert [w for w in doc["warnings"] if "symbolic link loop" not in w] == ref["warnings"]
    assert [p for p, _why in doc["skipped"]] == [f"d/{name}"] and not ref["skipped"]


@pytest.mark.parametrize("command", ["report", "timeline", "export"])
def test_the_page_and_export_commands_skip_every_loop_once(tmp_path, clean, command):
    """GIVEN the folder with three loops at once (two links to each other, a link to the folder itself, a link
    in the subfolder back to it) WHEN report / timeline / export writes its output THEN exit 0, no traceback,
    three warning lines — one per loop, never one per link of a loop — and the same closing summary (counts,
    instances, the saving) as for the loop-free folder, its file size aside (a page shows its warnings)."""
    d = _folder(tmp_path)
    for kind in ("pair", "dot", "up"):
        LOOPS[kind][1](d)
    out = "out.json" if command == "export" else "out.html"
    proc = cli(tmp_path, command, "d", "-o", out)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    said = loops_said(proc)
    assert sorted(w.split(":", 2)[1].strip() for w in said) == ["skipped d/a", "skipped d/loop", "skipped d/sub/up"]
    assert any("d/a → d/b → d/a" in w for w in said) and not any("skipped d/b:" in w for w in warnings_of(proc))
    top, _ = clean
    ref = cli(top, command, "d", "-o", out)
    assert ref.returncode == 0, ref.stderr[-2000:]
    size = re.compile(r"\(\d+(\.\d+)? [kMG]?B;")
    assert size.sub("(SIZE;", proc.stdout) == size.sub("(SIZE;", ref.stdout)
    assert [w for w in warnings_of(proc) if "symbolic link loop" not in w] == warnings_of(ref)


def test_compare_reads_runs_holding_loops(tmp_path):
    """GIVEN two copies of the sample off/on session (analysis.json removed: the figures come from the traces),
    one with a loop of two links among the overlay-on run's event logs and a link to itself among the
    overlay-off run's profiler traces WHEN `compare --json` THEN exit 0, no traceback, and the same comparison as
    for the copy without loops (before: a RuntimeError traceback, exit 1)."""
    docs = []
    for name, loops in (("clean", False), ("loops", True)):
        top = tmp_path / name
        shutil.copytree(SESSION, top / "s", ignore=shutil.ignore_patterns("analysis.json"))
        if loops:
            (top / "s" / "02-on" / "overlay" / "x").symlink_to("y")
            (top / "s" / "02-on" / "overlay" / "y").symlink_to("x")
            (top / "s" / "01-off" / "profiler" / "self.pt.trace.json").symlink_to("self.pt.trace.json")
        proc = cli(top, "compare", "s", "--json")
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        docs.append(json.loads(proc.stdout))
    assert docs[1] == docs[0]


def test_collect_lists_no_link_of_a_loop(tmp_path):
    """GIVEN a run folder whose overlay/ holds the event log and a loop of two links WHEN collect lists the files
    a node would send (the walk each Ray task runs; the copy itself needs a cluster) THEN it lists the event log
    alone: links are never sent, a loop raises nothing."""
    from expo_prof.record.collect import list_files

    run = tmp_path / "run"
    (run / "overlay").mkdir(parents=True)
    (log,) = (RUN / "overlay").glob("expo-prof-events-*.jsonl")
    shutil.copy(log, run / "overlay" / log.name)
    (run / "overlay" / "x").symlink_to("y")
    (run / "overlay" / "y").symlink_to("x")
    (run / "overlay" / "back").symlink_to("..", target_is_directory=True)
    assert [rel for rel, _size, _sha in list_files(str(run))] == [f"overlay/{log.name}"]
