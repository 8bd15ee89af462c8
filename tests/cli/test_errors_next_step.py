"""Errors that name the right cause and the next step (issue 34, item 10): the real CLI in a subprocess on
the real vLLM CPU traces."""

from __future__ import annotations

import shutil
import subprocess
import sys

from shared_paths import REPO

ENV = {"COLUMNS": "300", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}


def cli(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=120,
                          env=ENV, cwd=cwd)


def test_the_front_end_trace_named_alone_says_to_pass_the_worker_trace(realtraces):
    """GIVEN vLLM's front-end (API server) trace, only Python calls, named alone
    WHEN analyze reads it
    THEN exit 2 and one line that says what it is and the next step: pass the rank-0 worker trace.
    Before the fix: only "no usable timed events (21475 events; dropped: python_function ×21458 …)"."""
    proc = cli("analyze", str(realtraces / "vllm-cpu" / "frontend-async-llm.pt.trace.json.gz"))
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "front-end (API server) trace" in err[0] and "pass the rank-0 worker trace" in err[0]


def test_the_front_end_trace_in_a_folder_is_passed_over_whatever_its_name(tmp_path, realtraces):
    """GIVEN a folder holding the front-end trace (under a name without vLLM's ``.async_llm.``) and a worker trace
    WHEN analyze reads the folder
    THEN exit 0, the front-end trace is passed over as a front-end trace (an info line), never a warning.
    Before the fix: recognised by its name only, so here "warning: skipped …: no usable timed events"."""
    shutil.copy(realtraces / "vllm-cpu" / "frontend-async-llm.pt.trace.json.gz", tmp_path / "api.pt.trace.json.gz")
    shutil.copy(realtraces / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz", tmp_path / "w.pt.trace.json.gz")
    proc = cli("analyze", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr
    assert "passed over: 1 vLLM front-end" in proc.stderr


def test_compare_of_a_missing_path_says_no_such_file(tmp_path):
    """GIVEN a path that does not exist
    WHEN compare is given it alone
    THEN exit 2 and "PATH: no such file or directory".
    Before the fix: "one input must be a session directory …", as if the path were there."""
    proc = cli("compare", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {tmp_path / 'missing'}: no such file or directory"


def test_a_small_size_cap_is_printed_in_a_unit_that_shows_it(realtraces):
    """GIVEN --max-bytes 10K (10,240 bytes) and a real trace larger than that
    WHEN analyze refuses it
    THEN the line gives the cap as 10.2 kB.
    Before the fix: "decompresses to more than 0.0 MB"."""
    proc = cli("analyze", "--max-bytes", "10K", str(realtraces / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz"))
    assert proc.returncode == 2
    assert "more than 10.2 kB" in proc.stderr and "0.0 MB" not in proc.stderr


def test_collect_into_a_missing_run_directory_names_the_directory(tmp_path):
    """GIVEN a run directory that does not exist
    WHEN collect is asked to copy into it
    THEN exit 2 and one line naming the directory, before any Ray is reached (nothing of Ray's own options).
    Before the fix: Ray's "Could not find any running Ray instance … `--address` flag" (an option expo-prof
    does not have)."""
    proc = cli("collect", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {tmp_path / 'missing'}: no such run directory (collect copies into the " \
        "run directory of a run made here)"
