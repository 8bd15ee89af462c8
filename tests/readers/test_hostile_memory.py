"""Bounded memory for any input (issue 27): hostile Chrome/Kineto traces cost what they hold that can count.

Every file here is GENERATED (tests/support/hostile.py): empty objects ``{}``
by the million around five real-looking events, and gzip bombs inflating to
gigabytes of whitespace, alone or around a valid trace. Each is read by the
real CLI (``python -m expo_prof analyze``) in a child process whose peak RSS is
measured: ``ru_maxrss`` of the CLI process (through a small wrapper, see
``_WRAPPER``), and ``VmHWM`` of every process below the wrapper sampled from
/proc while it runs (``-j`` workers forked from a fork server are not the CLI's
children, so its ``ru_maxrss`` does not see them; those forked from the CLI
itself are seen both ways).

The bound is docs/usage.md's (section "Memory"): peak RSS ≤ baseline + 2× the
decompressed size, and ≤ baseline + 256 MB when nothing in the file can count,
where the baseline is the same command on a five-event trace (the interpreter
and its imports: about 40 MB here). Before the fix, 5 million ``{}`` (15 MB)
took about 1 GB and a 4 GB whitespace bomb was read whole up to the cap; the
children run under RLIMIT_AS = 2 GB so that such a failure stays cheap on a
shared machine (it then fails as out of memory, which the tests also reject).
No time is asserted (docs/testing.md); bench/bench_ingest.py measures it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from expo_prof.readers.chrome.reader import read_chrome, read_chrome_file
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED, read_bytes
from expo_prof.timeline import Kind
from support.hostile import (
    DRAW_NS,
    EVENTS,
    HEAD,
    HIDDEN_NS,
    trace,
    write_blank_gzip,
    write_empty_objects,
    write_filler,
)

REPO = Path(__file__).resolve().parents[2]
MB = 1 << 20
#: What a file of content that can never count may cost over the baseline (docs/usage.md, "Memory").
NON_COUNTABLE_MB = 256
#: Address-space limit of the measured children: a regression fails at this, not at the machine's RAM.
_AS_LIMIT = 2 << 30


def _descendants(pid: int) -> list[int]:
    out, i = [pid], 0
    while i < len(out):
        try:
            for tid in os.listdir(f"/proc/{out[i]}/task"):
                with open(f"/proc/{out[i]}/task/{tid}/children") as f:
                    out.extend(int(x) for x in f.read().split())
        except OSError:
            pass
        i += 1
    return out


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Run:
    """One measured CLI run: exit status, output, and peak RSS (KB) of the child and of each process below it."""

    def __init__(self, rc: int, out: str, err: str, main_kb: int, tree_kb: dict[int, int]) -> None:
        self.rc, self.out, self.err, self.main_kb, self.tree_kb = rc, out, err, main_kb, tree_kb

    @property
    def peak_mb(self) -> float:
        """The largest peak of any one process of the run."""
        return max([self.main_kb, *self.tree_kb.values()]) / 1024


#: Runs its arguments as a child and writes the child's peak RSS (KB) to the file named first. ``wait4`` on the
#: CLI straight from this process would not do: Linux carries the pre-exec image's peak into ``ru_maxrss``, and
#: a child forked from pytest starts as a copy of it; this wrapper is a bare interpreter (about 10 MB), and it
#: starts the CLI with posix_spawn/vfork, so the CLI's ``ru_maxrss`` is its own.
_WRAPPER = """
import resource, subprocess, sys
try:
    rc = subprocess.run(sys.argv[2:], timeout=240).returncode
except subprocess.TimeoutExpired:  # the CLI was killed: no orphan, and the test says so
    rc = 124
with open(sys.argv[1], "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(rc)
"""


def cli(*args: str, tmp: Path, env: dict[str, str] | None = None) -> Run:
    """``python -m expo_prof analyze ARGS`` in a child process (this worktree's code), measured."""
    out, err, peak = tmp / "stdout.txt", tmp / "stderr.txt", tmp / "peak.txt"
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1", "COLUMNS": "200",
                **(env or {})}

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (_AS_LIMIT, _AS_LIMIT))

    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen([sys.executable, "-c", _WRAPPER, str(peak), sys.executable, "-m", "expo_prof",
                              "analyze", *args], stdout=o, stderr=e, env=full_env, cwd=REPO, preexec_fn=limit)
    tree: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:  # VmHWM only grows: the last sample of a process is its peak up to then
        while not done.is_set():
            for pid in _descendants(p.pid)[1:]:
                tree[pid] = max(tree.get(pid, 0), _hwm_kb(pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        p.wait(timeout=300)  # the wrapper stops the CLI after 240 s
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        done.set()
    sampler.join()
    return Run(p.returncode, out.read_text(), err.read_text(), int(peak.read_text()), tree)


@pytest.fixture(scope="module")
def baseline_mb(tmp_path_factory) -> float:
    """Peak RSS (MB) of ``analyze`` on the five events alone: the interpreter, its imports and a tiny trace."""
    d = tmp_path_factory.mktemp("baseline")
    p = d / "five.pt.trace.json"
    p.write_bytes(trace())
    run = cli(str(p), "--json", tmp=d)
    assert run.rc == 0, run.err
    return run.peak_mb


def _one_hidden_draw(run: Run) -> None:
    doc = json.loads(run.out)
    assert doc["summary"]["instances"] == 1
    assert doc["summary"]["total_ns"] == DRAW_NS and doc["summary"]["hidden_ns"] == HIDDEN_NS


N_EMPTY = 5_000_000


@pytest.mark.parametrize("sep,gz", [(b",", False), (b", ", True)], ids=["compact", "spaced-gzip"])
def test_empty_objects_cost_only_their_count(tmp_path, baseline_mb, sep, gz):
    """GIVEN a GENERATED Kineto trace of 5 million ``{}`` around five events (15–20 MB decompressed; written
    compactly, or with ", " and gzipped)
    WHEN ``expo-prof analyze`` reads it
    THEN it finds the one 30 µs draw, all hidden (from the construction), and its peak RSS stays within the
    baseline + min(2× the decompressed size, 256 MB); the reader counts every ``{}`` as an event without
    ``ph`` (``ph=?``), streaming or whole-file alike."""
    path = tmp_path / ("empty.pt.trace.json" + (".gz" if gz else ""))
    size = write_empty_objects(path, N_EMPTY, sep=sep, gz=gz)
    run = cli(str(path), "--json", tmp=tmp_path)
    assert run.rc == 0, run.err
    _one_hidden_draw(run)
    bound = baseline_mb + min(2 * size / MB, NON_COUNTABLE_MB)
    assert run.peak_mb <= bound, f"peak {run.peak_mb:.0f} MB > {bound:.0f} MB (baseline {baseline_mb:.0f} MB)"
    for tl in (read_chrome_file(path), read_chrome(read_bytes(path), path)):
        assert tl.meta["events_in_file"] == N_EMPTY + len(EVENTS)
        assert tl.meta["dropped_events"] == {"ph=?": N_EMPTY}
        assert sorted(tl.names[i] for i in tl.name) == sorted(
            ["ProfilerStep#1", "aten::mm", "aten::exponential_", "aten::add", "aten::argmax"])
        assert int((tl.kind == Kind.STEP).sum()) == 1


def test_empty_objects_counted_like_decoded_ones(tmp_path):
    """GIVEN GENERATED traces where ``{}`` come singly, in short runs, in irregularly spaced runs, at the start
    and the end of the array, and in one trailing-comma document
    WHEN read streaming and whole-file
    THEN both count exactly the ``{}`` the stdlib's json finds (each as ``ph=?``), keep the five events, and the
    trailing comma is reported as damage, not skipped over."""
    ev = EVENTS
    docs = {
        "single": b",".join([ev[0], b"{}", ev[1], b"{}", *ev[2:]]),
        "runs": b",".join([b"{}"] * 40 + [ev[0]] + [b"{}"] * 3 + list(ev[1:]) + [b"{}"] * 70),
        "irregular": b" ,".join([b"{}", b"{ }"] * 30) + b",\n" + b",".join(ev) + b"," + b", ".join([b"{}"] * 50),
        "only-empties-then-events": b",".join([b"{}"] * 5000) + b",\n  " + b",".join(ev),
    }
    for name, body in docs.items():
        p = tmp_path / f"{name}.pt.trace.json"
        p.write_bytes(b'{"traceEvents": [' + body + b'], "baseTimeNanoseconds": 0}')
        n = sum(1 for e in json.loads(p.read_bytes())["traceEvents"] if e == {})
        for tl in (read_chrome_file(p), read_chrome(read_bytes(p), p)):
            assert tl.meta["dropped_events"] == {"ph=?": n}, name
            assert tl.meta["events_in_file"] == n + len(ev), name
            assert len(tl) == len(ev), name
    cut = tmp_path / "trailing-comma.pt.trace.json"
    cut.write_bytes(b'{"traceEvents": [' + b",".join(ev) + b"," + b"{}," * 100 + b'], "x": 0}')
    tl = read_chrome_file(cut)
    assert any("JSON is malformed" in w for w in tl.warnings), tl.warnings


def test_cut_file_of_empty_objects_is_salvaged_within_twice_its_size(tmp_path, baseline_mb):
    """GIVEN a GENERATED Kineto trace of the five events, 5 million ``{}`` and a last event cut in its middle
    (damaged JSON: the reader takes the careful path, which holds the whole file to cut it back)
    WHEN ``expo-prof analyze`` reads it
    THEN it finds the one hidden draw, warns that the JSON is truncated, and its peak RSS stays within
    baseline + 2× the file's size (the document is closed in place for the salvaging decode, not copied)."""
    path = tmp_path / "cut.pt.trace.json"
    doc = HEAD + b",".join(EVENTS) + b"," + b"{}," * N_EMPTY + EVENTS[1][:40]
    path.write_bytes(doc)
    run = cli(str(path), "--json", tmp=tmp_path)
    assert run.rc == 0, run.err
    _one_hidden_draw(run)
    assert any("JSON is truncated" in w for w in json.loads(run.out)["warnings"]), run.out[-2000:]
    bound = baseline_mb + 2 * len(doc) / MB
    assert run.peak_mb <= bound, f"peak {run.peak_mb:.0f} MB > {bound:.0f} MB (baseline {baseline_mb:.0f} MB)"


#: Elements that are not events, six per unit: a number, null, a string, an array, a boolean, a float.
NOT_OBJECTS = b'1,null,"s",[],true,2.5,'
N_UNITS = 500_000


@pytest.mark.slow
def test_elements_that_are_not_objects_cost_only_their_count(tmp_path, baseline_mb):
    """GIVEN a GENERATED Kineto trace whose array holds 3 million elements that are not objects (numbers, null,
    strings, arrays, booleans: no ``}`` boundary anywhere among them) around the five events
    WHEN ``expo-prof analyze`` reads it
    THEN it finds the one hidden draw with peak RSS within baseline + min(2× the size, 256 MB), and every such
    element is counted as malformed (the stdlib's json counts them), the first reported in msgspec's words,
    streaming and whole-file alike."""
    path = tmp_path / "scalars.pt.trace.json"
    size = write_filler(path, NOT_OBJECTS, N_UNITS)
    run = cli(str(path), "--json", tmp=tmp_path)
    assert run.rc == 0, run.err
    _one_hidden_draw(run)
    bound = baseline_mb + min(2 * size / MB, NON_COUNTABLE_MB)
    assert run.peak_mb <= bound, f"peak {run.peak_mb:.0f} MB > {bound:.0f} MB (baseline {baseline_mb:.0f} MB)"
    n = sum(1 for e in json.loads(path.read_bytes())["traceEvents"] if not isinstance(e, dict))
    assert n == 6 * N_UNITS
    for tl in (read_chrome_file(path), read_chrome(read_bytes(path), path)):
        assert f"{n} malformed event(s) skipped (first: Expected `object`, got `int`)" in " ".join(tl.warnings)
        assert tl.meta["events_in_file"] == len(EVENTS) and len(tl) == len(EVENTS)


def test_objects_without_ph_cost_only_their_count(tmp_path, baseline_mb):
    """GIVEN a GENERATED Kineto trace of 2 million objects without ``ph`` (``{"a":1}``) around the five events
    WHEN ``expo-prof analyze`` reads it
    THEN it finds the one hidden draw with peak RSS within baseline + min(2× the size, 256 MB), and counts
    each such object as an event without ``ph``."""
    path = tmp_path / "no-ph.pt.trace.json"
    size = write_filler(path, b'{"a":1},', 2_000_000)
    run = cli(str(path), "--json", tmp=tmp_path)
    assert run.rc == 0, run.err
    _one_hidden_draw(run)
    bound = baseline_mb + min(2 * size / MB, NON_COUNTABLE_MB)
    assert run.peak_mb <= bound, f"peak {run.peak_mb:.0f} MB > {bound:.0f} MB (baseline {baseline_mb:.0f} MB)"
    tl = read_chrome_file(path)
    assert tl.meta["dropped_events"] == {"ph=?": 2_000_000} and tl.meta["events_in_file"] == 2_000_005


def test_filler_mixed_with_events_reads_alike_in_tiny_chunks(tmp_path, monkeypatch):
    """GIVEN a GENERATED trace mixing the five events with runs of ``{}`` (compact, spaced, irregular), numbers
    and null, objects without ``ph`` (one whose pid is an object), and long whitespace between tokens
    WHEN read streaming through tiny chunks and a tiny window, and whole-file with the default chunks
    THEN both give the same Timeline and counts, and the counts are the stdlib's: ``{}`` and ph-less objects as
    ``ph=?``, the other elements as malformed."""
    from expo_prof.readers.chrome import decode, window

    ev = EVENTS
    parts = [ev[0], *[b"{}"] * 3000, b'{"a": 1}', ev[1], *[b"{ }"] * 40, *[b"1", b"null"] * 2000,
             b'{"pid": {"x": 1}}', *[b'{"b":2}'] * 500, b" " * 70_000 + ev[2], *[b"{}"] * 700, *ev[3:],
             *[b"[]"] * 300]
    body = b",".join(parts[:3500]) + b", " + b", ".join(parts[3500:])
    p = tmp_path / "mixed.pt.trace.json"
    p.write_bytes(b'{"traceEvents": [' + body + b'], "baseTimeNanoseconds": 0}')
    elems = json.loads(p.read_bytes())["traceEvents"]
    no_ph = sum(1 for e in elems if isinstance(e, dict) and "ph" not in e)
    not_obj = sum(1 for e in elems if not isinstance(e, dict))
    whole = read_chrome(read_bytes(p), p)
    monkeypatch.setattr(decode, "CHUNK_BYTES", 2000)
    monkeypatch.setattr(window, "CAPACITY", 3000)
    monkeypatch.setattr(window, "PIECE", 777)
    small = read_chrome_file(p)
    for tl in (whole, small):
        assert tl.meta["dropped_events"] == {"ph=?": no_ph}
        assert tl.meta["events_in_file"] == no_ph + len(ev)
        assert f"{not_obj} malformed event(s) skipped" in " ".join(tl.warnings)
    for col in ("start", "dur", "lane", "name", "kind", "step"):
        assert (getattr(small, col) == getattr(whole, col)).all(), col
    assert small.names == whole.names and small.warnings == whole.warnings


@pytest.mark.slow
def test_whitespace_gzip_bomb_is_refused_at_bounded_memory(tmp_path, baseline_mb):
    """GIVEN a GENERATED gzip file of 4.4 MB that inflates to 4.4 GB of spaces (past the default cap)
    WHEN ``expo-prof analyze`` reads it
    THEN it exits 2 with the one-line size-cap error naming 4.29 GB, its peak RSS within baseline + 256 MB
    (nothing accumulates: whitespace is dropped as it is inflated)."""
    path = tmp_path / "bomb.pt.trace.json.gz"
    write_blank_gzip(path, DEFAULT_MAX_DECOMPRESSED + 100 * MB)
    assert path.stat().st_size < 10 * MB
    run = cli(str(path), tmp=tmp_path)
    assert run.rc == 2, run.err
    lines = [ln for ln in run.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "decompresses to more than 4.29 GB" in lines[0] and "--max-bytes" in lines[0], lines
    assert run.peak_mb <= baseline_mb + NON_COUNTABLE_MB, f"peak {run.peak_mb:.0f} MB, baseline {baseline_mb:.0f}"


#: 1.5× the 256 MB bound: a reader that held the blank run would peak at least this far above the baseline and
#: fail (the bound, not the size, is what is tested; each MB more only costs inflating time).
BLANK = 384 * MB
_PLACES = {
    # name: (prefix, suffix) around BLANK spaces
    "before-the-document": (b"", trace()),
    "after-the-array-bracket": (b'{"traceEvents": [', b",".join(EVENTS) + b'], "baseTimeNanoseconds": 0}'),
    "after-the-last-event": (b'{"traceEvents": [' + b",".join(EVENTS), b'], "baseTimeNanoseconds": 0}'),
    "before-a-comma": (b'{"traceEvents": [' + EVENTS[0], b"," + b",".join(EVENTS[1:]) + b"]}"),
    "after-a-comma": (b'{"traceEvents": [' + EVENTS[0] + b",", b",".join(EVENTS[1:]) + b"]}"),
    "after-the-array": (b'{"traceEvents": [' + b",".join(EVENTS) + b"]", b', "baseTimeNanoseconds": 0}'),
    "after-the-document": (trace(), b""),
    # (issue 34: inside a value of the top level after the array, a string's included, they were held whole)
    "in-a-list-after-the-array": (b'{"traceEvents": [' + b",".join(EVENTS) + b'], "deviceProperties": [',
                                  b'{"id": 0}], "baseTimeNanoseconds": 0}'),
    "in-a-string-after-the-array": (b'{"traceEvents": [' + b",".join(EVENTS) + b'], "traceName": "',
                                    b'", "baseTimeNanoseconds": 0}'),
}


@pytest.mark.parametrize("place", list(_PLACES))
def test_whitespace_anywhere_between_tokens_is_not_held(tmp_path, baseline_mb, place):
    """GIVEN a GENERATED gzip trace of the five events with 384 MB of spaces between two of its tokens
    (before or after the document, after ``[``, around a comma, after the last event or the array, inside a list
    or a string after the array)
    WHEN ``expo-prof analyze`` reads it
    THEN it finds the one hidden draw, with peak RSS within baseline + 256 MB (the whitespace is dropped
    as it is read, never held until the next token)."""
    prefix, suffix = _PLACES[place]
    path = tmp_path / "blank.pt.trace.json.gz"
    write_blank_gzip(path, BLANK, prefix=prefix, suffix=suffix)
    run = cli(str(path), "--json", tmp=tmp_path)
    assert run.rc == 0, run.err
    _one_hidden_draw(run)
    assert run.peak_mb <= baseline_mb + NON_COUNTABLE_MB, f"peak {run.peak_mb:.0f} MB, baseline {baseline_mb:.0f}"


def test_truncated_whitespace_bomb_is_refused_without_holding_it(tmp_path, baseline_mb):
    """GIVEN a GENERATED whitespace gzip bomb (384 MB of spaces) cut in the middle of its data
    WHEN ``expo-prof analyze`` reads it
    THEN it exits 2 with one line saying the file is empty (whitespace, then damaged gzip data), its peak RSS
    within baseline + 256 MB: the careful path, which would hold the whole file, is not taken for it."""
    whole = tmp_path / "whole.gz"
    write_blank_gzip(whole, BLANK)
    data = whole.read_bytes()
    path = tmp_path / "cut-bomb.pt.trace.json.gz"
    path.write_bytes(data[: len(data) * 3 // 4])
    run = cli(str(path), tmp=tmp_path)
    assert run.rc == 2, run.err
    lines = [ln for ln in run.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "empty file" in lines[0] and "whitespace" in lines[0], lines
    assert run.peak_mb <= baseline_mb + NON_COUNTABLE_MB, f"peak {run.peak_mb:.0f} MB, baseline {baseline_mb:.0f}"


def test_jobs_over_a_folder_of_bombs_do_not_multiply_memory(tmp_path, baseline_mb):
    """GIVEN a folder of two GENERATED whitespace gzip bombs (1.1 GB of spaces each) and the five-event trace
    WHEN ``expo-prof analyze -j 2 --max-bytes 1G`` reads it (workers even for small files)
    THEN the trace is analysed (one hidden draw), both bombs are skipped with the size-cap error, and no
    process of the run (the CLI, the fork server, each worker) peaks above baseline + 256 MB."""
    d = tmp_path / "ranks"
    d.mkdir()
    for i in range(2):
        write_blank_gzip(d / f"rank{i}.pt.trace.json.gz", 1100 * MB)
    (d / "rank2.pt.trace.json").write_bytes(trace())
    run = cli("-j", "2", "--max-bytes", "1G", str(d), "--json", tmp=tmp_path,
              env={"EXPO_PROF_PARALLEL_MIN_BYTES": "0"})
    assert run.rc == 0, run.err
    _one_hidden_draw(run)
    skipped = json.loads(run.out)["skipped"]
    assert len(skipped) == 2 and all("decompresses to more than 1.07 GB" in json.dumps(s) for s in skipped), skipped
    assert len(run.tree_kb) >= 2, "no worker process was seen"
    worst = run.peak_mb
    assert worst <= baseline_mb + NON_COUNTABLE_MB, f"peak {worst:.0f} MB in {run.tree_kb}, baseline {baseline_mb:.0f}"


def test_help_states_the_cap_default_and_unit():
    """GIVEN ``analyze --help`` at 80 columns WHEN the --max-bytes line is read THEN it says the unit (bytes, or
    K/M/G/T as powers of 1024) and the default, which is the reader's own default cap."""
    from expo_prof.cli.common import DEFAULT_MAX_BYTES
    from expo_prof.pipeline.options import parse_size

    out = subprocess.run([sys.executable, "-m", "expo_prof", "analyze", "--help"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO)}, cwd=REPO, check=True).stdout
    text = " ".join(out.split())
    m = re.search(r"--max-bytes SIZE (.*?) -j, --jobs", text)
    assert m is not None, text
    assert "powers of 1024" in m.group(1) and "K, M, G or T" in m.group(1)
    assert f"default {DEFAULT_MAX_BYTES}, i.e. 4.29 GB" in m.group(1)
    assert parse_size(DEFAULT_MAX_BYTES) == DEFAULT_MAX_DECOMPRESSED
