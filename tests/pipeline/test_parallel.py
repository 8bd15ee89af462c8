"""``--jobs N``: reading and per-file analysis in worker processes gives the serial result, exactly.

Real inputs: the recorded session in traces/samples (two runs, overlay logs,
manifests), real vLLM CPU traces, torch_npu exports (CSV + SQLite + trace
view of the same ranks), HTA's traces with ``--op``, a trace whose sampler
wait comes only from the overlay event log, and inputs with no instance (the
error's message and similar names). ``EXPO_PROF_PARALLEL_MIN_BYTES=0`` makes
the small inputs go through the pool; ``EXPO_PROF_WORKER_START`` starts the
workers either way (forked from this process, or from a fork server).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from expo_prof.errors import NothingFound
from expo_prof.pipeline import Options, run
from expo_prof.pipeline.parallel import (PARALLEL_MIN_BYTES, SERVER_MIN_BYTES, START_ENV, read_parallel,
                                         task_work)
from expo_prof.readers import detect, tasks

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "traces" / "samples" / "tiny-cpu-off-on"


@pytest.fixture(autouse=True)
def _pool_even_for_small_inputs(monkeypatch):
    monkeypatch.setenv("EXPO_PROF_PARALLEL_MIN_BYTES", "0")


def _doc(paths, **kw) -> dict:
    return msgspec.to_builtins(run(paths, Options.make(**kw)).document)


def _cases(realtraces: Path) -> list[tuple[list[Path], dict]]:
    return [
        ([SESSION], {}),
        ([realtraces / "vllm-cpu"], {}),
        ([realtraces / "msinsight"], {"op": "MatMul|Add|Mul"}),
        ([realtraces / "hta"], {"op": "nccl|Memcpy"}),
        ([realtraces / "vllm-cpu", SESSION / "02-on"], {"source": "overlay-log"}),
    ]


@pytest.mark.slow
def test_jobs_give_the_serial_document(realtraces):
    # GIVEN real inputs of every kind (several recordings, formats, ranks, overlay logs)
    for paths, kw in _cases(realtraces):
        # WHEN analysed in one process and with 2 and 3 workers (events not kept, as analyze does)
        serial = _doc(paths, **kw)
        for jobs in (2, 3):
            par = _doc(paths, jobs=jobs, events=False, **kw)
            # THEN the versioned document is the same, field for field
            assert par == serial, (paths, kw, jobs)
        assert serial["ranks"], paths  # and there was something to compare


@pytest.mark.parametrize("how", ["fork", "forkserver"])
def test_the_pool_really_ran_and_sent_back_compact_timelines(realtraces, monkeypatch, how):
    # GIVEN three real vLLM CPU traces, and workers forked from this process or from a fork server
    monkeypatch.setenv(START_ENV, how)
    plist = [realtraces / "vllm-cpu"]
    # WHEN read in parallel without events
    par = read_parallel(plist, jobs=2, events=False, force=True)
    # THEN two worker processes other than this one did the work, started as asked
    assert par is not None and par.workers == 2 and par.method == how
    assert par.peak_rss and str(os.getpid()) not in par.peak_rss
    # AND what came back is the span and counts of each file, not its events
    from expo_prof.timeline import event_count

    for tl, a in zip(par.loaded.timelines, par.analyses):
        assert len(tl) <= 2 < event_count(tl)
        assert a.tl is tl
    # AND with events kept (timeline, export) every event comes back
    full = read_parallel(plist, jobs=2, events=True, force=True)
    assert [len(t) for t in full.loaded.timelines] == [event_count(t) for t in par.loaded.timelines]


@pytest.mark.parametrize("how", ["fork", "forkserver"])
def test_either_start_gives_the_serial_document(realtraces, monkeypatch, how):
    # GIVEN the recorded session and the real vLLM CPU traces, workers forked from this process or a fork server
    monkeypatch.setenv(START_ENV, how)
    for paths in ([SESSION], [realtraces / "vllm-cpu"]):
        # WHEN analysed in one process and with 2 workers THEN the documents are the same
        assert _doc(paths, jobs=2, events=False) == _doc(paths), (paths, how)


def test_workers_fork_from_a_process_with_one_thread_else_from_a_fork_server():
    # GIVEN a fresh process on Linux (no thread but the main one) WHEN asked how workers start THEN fork;
    # AND with another thread running (a progress bar's, a notebook kernel's): a fork server;
    # AND EXPO_PROF_WORKER_START chooses, where the platform has that method
    if not sys.platform.startswith("linux"):
        pytest.skip("fork is chosen on Linux only")
    code = """
import threading
from expo_prof.pipeline.parallel import start_method
alone = start_method()
stop = threading.Event()
t = threading.Thread(target=stop.wait)
t.start()
busy = start_method()
stop.set()
t.join()
print(alone, busy, start_method())
"""
    env = {k: v for k, v in os.environ.items() if k != START_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True)
    assert out.stdout.split() == ["fork", "forkserver", "fork"]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True,
                         env={**env, START_ENV: "spawn"})
    assert out.stdout.split() == ["spawn"] * 3


def test_the_pool_starts_by_the_work_the_files_hold_not_by_their_bytes_on_disk(realtraces, monkeypatch):
    # GIVEN three real gzipped vLLM CPU traces: 5 MB on disk, 82 MB of JSON
    plist = [realtraces / "vllm-cpu"]
    ts = tasks(detect.plan(plist))
    on_disk, work = sum(t.size for t in ts), sum(task_work(t) for t in ts)
    assert work == sum(len(gzip.decompress(f.read_bytes())) for f in plist[0].glob("*.gz"))
    assert work > 10 * on_disk
    # WHEN the threshold lies between the two THEN workers start (their JSON is the work)
    monkeypatch.setenv("EXPO_PROF_PARALLEL_MIN_BYTES", str(2 * on_disk))
    par = read_parallel(plist, jobs=2, events=False)
    assert par is not None and par.workers == 2
    # AND above the JSON they hold: one process reads them
    monkeypatch.setenv("EXPO_PROF_PARALLEL_MIN_BYTES", str(work + 1))
    assert read_parallel(plist, jobs=2, events=False) is None
    # AND by default, forked workers start for their 82 MB of JSON (the 5 MB on disk would not have started them)
    monkeypatch.delenv("EXPO_PROF_PARALLEL_MIN_BYTES")
    assert on_disk < PARALLEL_MIN_BYTES <= work < SERVER_MIN_BYTES
    monkeypatch.setenv(START_ENV, "fork")
    par = read_parallel(plist, jobs=2, events=False)
    assert par is not None and par.method == "fork"
    # AND a fork server, slower to start, is not worth it for that little
    monkeypatch.setenv(START_ENV, "forkserver")
    assert read_parallel(plist, jobs=2, events=False) is None


def test_instance_tables_match(realtraces):
    # GIVEN the recorded session WHEN read serially and with 2 workers
    a = run([SESSION], Options.make()).instances()
    b = run([SESSION], Options.make(jobs=2, events=False)).instances()
    # THEN the per-instance table (names from the compact Timelines' name tables) is the same
    assert a.keys() == b.keys()
    for k in a:
        assert list(a[k]) == list(b[k]), k
    assert len(a["name"]) > 10


def test_overlay_log_wait_is_attached_the_same_way(tmp_path):
    # GIVEN a real trace without its wait spans and the real overlay log of the same process
    sys.path.insert(0, str(REPO / "tests" / "analysis"))
    from test_overlay_log_steps import copy_log, copy_trace_without

    from expo_prof.analysis.targets import SPAN_WAIT

    copy_trace_without(tmp_path, {SPAN_WAIT})
    copy_log(tmp_path)
    # WHEN analysed serially and with 2 workers
    serial = _doc([tmp_path])
    par = _doc([tmp_path], jobs=2, events=False)
    # THEN the wait placed from the log onto the trace's steps is the same
    assert par == serial
    assert serial["summary"]["wait_ns"] and serial["summary"]["wait_ns"] > 0


def test_nothing_found_says_the_same(realtraces):
    # GIVEN traces without the exponential draw (Kineto samples; HTA's, which hold aten::randn)
    for d in ("kineto", "hta"):
        msgs = []
        for jobs in (1, 2):
            # WHEN analysed with 1 and 2 workers
            with pytest.raises(NothingFound) as exc:
                run([realtraces / d], Options.make(jobs=jobs, events=False))
            msgs.append((str(exc.value), exc.value.details, exc.value.warnings))
        # THEN the error, its event count and the similar names are the same
        assert msgs[0] == msgs[1], d


def test_cli_jobs_option(realtraces, tmp_path):
    # GIVEN the CLI WHEN analyze runs with --jobs 2 and with -j 1 on the same real traces
    env = dict(os.environ, EXPO_PROF_PARALLEL_MIN_BYTES="0", PYTHONPATH=str(REPO))
    outs = []
    for j in ("2", "1"):
        p = subprocess.run([sys.executable, "-m", "expo_prof", "analyze", str(realtraces / "vllm-cpu"), "--json",
                            "--jobs", j], capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr
        outs.append(json.loads(p.stdout))
    # THEN the documents are the same
    assert outs[0] == outs[1]
    # AND a bad count is one line and exit 2
    p = subprocess.run([sys.executable, "-m", "expo_prof", "analyze", str(realtraces / "vllm-cpu"), "--jobs", "0"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "--jobs" in p.stderr
