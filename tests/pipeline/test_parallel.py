"""``--jobs N``: reading and per-file analysis in worker processes gives the serial result, exactly.

Real inputs: the recorded session in traces/samples (two runs, overlay logs,
manifests), real vLLM CPU traces, torch_npu exports (CSV + SQLite + trace
view of the same ranks), HTA's traces with ``--op``, a trace whose sampler
wait comes only from the overlay event log, and inputs with no instance (the
error's message and similar names). ``EXPO_PROF_PARALLEL_MIN_BYTES=0`` makes
the small inputs go through the pool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from expo_prof.errors import NothingFound
from expo_prof.pipeline import Options, run
from expo_prof.pipeline.parallel import read_parallel

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


def test_the_pool_really_ran_and_sent_back_compact_timelines(realtraces):
    # GIVEN three real vLLM CPU traces
    plist = [realtraces / "vllm-cpu"]
    # WHEN read in parallel without events
    par = read_parallel(plist, jobs=2, events=False, force=True)
    # THEN two worker processes other than this one did the work
    assert par is not None and par.workers == 2
    assert par.peak_rss and str(os.getpid()) not in par.peak_rss
    # AND what came back is the span and counts of each file, not its events
    from expo_prof.timeline import event_count

    for tl, a in zip(par.loaded.timelines, par.analyses):
        assert len(tl) <= 2 < event_count(tl)
        assert a.tl is tl
    # AND with events kept (timeline, export) every event comes back
    full = read_parallel(plist, jobs=2, events=True, force=True)
    assert [len(t) for t in full.loaded.timelines] == [event_count(t) for t in par.loaded.timelines]


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
