"""Errors that name the right cause and the next step (issue 34, item 10): the real CLI in a subprocess on
the real vLLM CPU traces."""

from __future__ import annotations

import re
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
    # The worker trace's own warnings (its step windows without a draw, issue 33) are not about the front end.
    warnings = [n for n in re.split(r"^(?=warning:|info:)", proc.stderr, flags=re.M) if n.startswith("warning:")]
    assert not any("api.pt.trace" in w or "skipped" in w or "front-end" in w for w in warnings), warnings
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


def test_a_folder_of_traces_without_the_draw_lists_them_once_after_the_results(tmp_path, realtraces):
    """GIVEN a folder holding one real vLLM CPU worker trace and three real HTA test traces without any draw
    WHEN analyze prints its tables
    THEN the result comes first; after it one list of the three recordings without a target instance (one line
    each), what was looked for and the next step said once (--op NAME, greedy sampling, CUDA graphs), and a
    closing line "4 files read: 4 recordings, 1 with a result (above), 3 without".
    Before the fix: the 11-line "looked for" list once per recording, the results last, no closing line."""
    hta = realtraces / "hta" / "tests" / "data"
    for i, src in enumerate([hta / "trace_compare" / "base" / "base.json.gz",
                             hta / "trace_file_list" / "inference_rank_1.json.gz",
                             hta / "timeline_analysis" / "sampled_rank-0.json.gz"]):
        (tmp_path / f"other{i}").mkdir()
        shutil.copy(src, tmp_path / f"other{i}" / src.name)
    (tmp_path / "vllm").mkdir()
    shutil.copy(realtraces / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz", tmp_path / "vllm" / "w.pt.trace.json.gz")
    proc = cli("analyze", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("looked for:") == 1
    assert out.index("critical path") < out.index("No target instance in 3 recordings") < out.index("looked for:")
    assert "--op NAME" in out and "greedy sampling" in out.lower() and "CUDA graphs" in out
    assert out.rstrip().splitlines()[-1] == "4 files read: 4 recordings, 1 with a result (above), 3 without"


def test_analyze_help_names_the_nsight_inputs():
    """GIVEN analyze's --help
    WHEN it lists what PATH may be
    THEN it names Nsight Systems' .sqlite exports and .nsys-rep reports (read since issue 20), within 80 columns.
    Before the fix: the list stopped at Kineto, torch_npu, msprof, run directories and event logs."""
    proc = cli("analyze", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert ".sqlite" in text and ".nsys-rep" in text and "Nsight Systems" in text
    assert max(len(ln) for ln in proc.stdout.splitlines()) <= 80


def test_the_readmes_headline_is_the_one_analyze_prints():
    """GIVEN the README's quick start, which shows and explains the headline
    WHEN analyze prints the headline of the sample overlay-on run
    THEN it has the README's form (figures aside): "N instances, H % hidden; critical path C/step (exposed ∪ wait)",
    and docs/usage.md gives the same form.
    Before the fix: the README described it as "N instances, H % hidden, exposed X"."""
    import re

    readme = (REPO / "README.md").read_text()
    shown = re.search(r"```\n(\d+ instances, .*)\n```", readme)
    assert shown is not None, "the README's quick start shows no headline"
    form = re.escape(shown.group(1))
    form = re.sub(r"\d+(?:\\\.\d+)?", r"[\\d.]+", form).replace("µs", r"\S+")
    proc = cli("analyze", str(REPO / "traces" / "samples" / "tiny-cpu-off-on" / "02-on"))
    assert proc.returncode == 0, proc.stderr
    assert [ln for ln in proc.stdout.splitlines() if re.fullmatch(form, ln)], (form, proc.stdout[-400:])
    usage = " ".join((REPO / "docs" / "usage.md").read_text().split())
    assert "`N instances, H % hidden; critical path C/step (exposed ∪ wait)`" in usage
    assert "`N instances, H % hidden, exposed X`" not in usage + " ".join(readme.split())


def test_analyze_with_ray_says_what_it_waits_for_before_it_waits():
    """GIVEN analyze --ray (alone: RAY_ADDRESS, else the Ray running here, else a new local one, which takes
    half a minute to start) in an install where Ray cannot be imported (so that nothing is started here)
    WHEN it runs
    THEN its first line on stderr, before anything of Ray, says what it is connecting to and that without --ray
    the files are read on this machine.
    Before the fix: nothing was printed for the 37.7 s a new local Ray took to start."""
    code = ("import sys; sys.modules['ray'] = None\n"
            "from expo_prof.cli.main import main\n"
            "sys.argv = ['expo-prof', 'analyze', sys.argv[1], '--ray']; main()")
    proc = subprocess.run([sys.executable, "-c", code, str(REPO / "traces" / "samples" / "tiny-cpu-off-on" / "02-on")],
                          capture_output=True, text=True, timeout=120, cwd=REPO, env=ENV)
    assert proc.returncode == 2, proc.stderr
    first, *rest = proc.stderr.strip().splitlines()
    assert first.startswith("info: --ray: connecting to Ray (RAY_ADDRESS, else the one running here, else a new "
                            "local one: about 30 s)")
    assert "without --ray the files are read on this machine" in first
    assert rest and rest[-1].startswith("error: Ray is not installed")
