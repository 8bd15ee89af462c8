"""One truth in every command: recordings kept apart, one pipeline, the same numbers and words everywhere.

Real inputs: ``../shared/realtraces`` (two vLLM CPU rank-0 recordings side by
side, unrelated HTA traces, a two-rank torch_npu job) and the committed sample
``traces/samples/tiny-cpu-off-on`` (an overlay-off and an overlay-on run of
vLLM's CPU server recorded by ``expo-prof record``; 02-on has both a Kineto
trace and the overlay's event log of rank 0).
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import expo_prof
from expo_prof.cli.main import main

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "traces" / "samples" / "tiny-cpu-off-on"
ON = SESSION / "02-on"
HEADLINE = re.compile(r"^\d+ instances?, [\d.–]+ %? ?hidden; critical path (–|-?[\d.]+ (ns|µs|ms|s))/step \((exposed ∪ wait|exposed)\)$")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=600,
                          cwd=REPO, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


def analyze_json(capsys, *args) -> tuple[int, dict | None, str]:
    with pytest.raises(SystemExit) as ei:
        main(["analyze", *map(str, args), "--json"])
    out, err = capsys.readouterr()
    return ei.value.code, (json.loads(out) if ei.value.code == 0 else None), err


def headlines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if HEADLINE.match(ln.strip())]


def test_two_recordings_of_rank_0_are_never_merged(capsys, realtraces):
    """GIVEN the two real vLLM CPU traces of rank 0 (two recordings of different runs) in one folder
    WHEN analyze reads the folder, and each file alone
    THEN the JSON has no combined summary but one `runs` entry per recording, each with the summary the file
    gives alone; and the text prints one block per recording, each ending with that recording's headline."""
    folder = realtraces / "vllm-cpu"
    code, doc, _ = analyze_json(capsys, folder)
    assert code == 0 and doc["summary"] is None and len(doc["recordings"]) == 2
    for entry in doc["recordings"]:
        c, alone, _ = analyze_json(capsys, entry["label"])
        assert c == 0 and entry["summary"] == alone["summary"] and entry["ranks"] == [0]
        assert entry["headline"] == alone["recordings"][0]["headline"]
    text = cli("analyze", str(folder)).stdout
    assert headlines(text) == [e["headline"] for e in doc["recordings"]]


def test_the_ranks_of_one_job_are_one_recording(capsys, realtraces):
    """GIVEN a real two-rank torch_npu job (rank0_ascend_pt and rank1_ascend_pt of one window)
    WHEN analysed with --op hcom THEN it is one recording whose summary combines both ranks."""
    code, doc, _ = analyze_json(capsys, realtraces / "msinsight/test/data/pytorch/text/level1", "--op", "hcom")
    assert code == 0 and len(doc["recordings"]) == 1 and doc["recordings"][0]["ranks"] == [0, 1]
    assert doc["summary"]["ranks"] == 2 and doc["summary"]["instances"] == sum(r["instances"] for r in doc["ranks"])


def test_unrelated_traces_of_a_download_folder_stay_apart(capsys, realtraces):
    """GIVEN the HTA test-data folder (a dozen unrelated traces, several of them rank 0 or 1)
    WHEN analysed with --op nccl THEN every recording that finds instances reports what its file reports alone."""
    code, doc, _ = analyze_json(capsys, realtraces / "hta", "--op", "nccl")
    assert code == 0 and doc["summary"] is None
    found = [e for e in doc["recordings"] if e["summary"] is not None]
    assert len(found) >= 3
    for entry in found:
        _, alone, _ = analyze_json(capsys, entry["label"], "--op", "nccl")
        assert entry["summary"] == alone["summary"], entry["label"]


def test_off_and_on_runs_never_share_a_headline(capsys):
    """GIVEN the committed off/on session WHEN analysed THEN each run has its own headline (42 fused-op draws
    exposed, 33 overlay draws hidden), no summary combines them, and an info line points to compare."""
    code, doc, err = analyze_json(capsys, SESSION)
    assert code == 0 and doc["summary"] is None
    assert [(Path(e["label"]).name, e["overlay"]) for e in doc["recordings"]] == [("01-off", "off"), ("02-on", "on")]
    assert doc["recordings"][0]["headline"].startswith("42 instances, 0.0 % hidden")
    assert doc["recordings"][1]["headline"].startswith("33 instances, 100.0 % hidden")
    assert any("expo-prof compare" in line for line in doc["info"])
    assert "info:" in err and "expo-prof compare" in err


@pytest.mark.parametrize("source,n", [("auto", 33), ("trace", 33), ("overlay-log", 65)])
def test_every_command_counts_the_same(tmp_path, source, n):
    """GIVEN 02-on (a Kineto trace and the overlay log of the same rank) and a --source choice
    WHEN analyze, timeline, export and report run on it THEN each prints the same one-line headline with the
    same instance count, and names once which source counted."""
    outs = {
        "analyze": cli("analyze", str(ON), "--source", source),
        "timeline": cli("timeline", str(ON), "--source", source, "-o", str(tmp_path / "t.html")),
        "export": cli("export", str(ON), "--source", source, "-o", str(tmp_path / "e.json")),
        "report": cli("report", str(ON), "--source", source, "-o", str(tmp_path / "r.html")),
    }
    lines = {}
    for name, proc in outs.items():
        assert proc.returncode == 0, (name, proc.stderr)
        hl = headlines(proc.stdout)
        assert len(hl) == 1, (name, proc.stdout)
        lines[name] = hl[0]
        chosen = "kineto" if source != "overlay-log" else "overlay-log"
        assert re.search(rf"rank 0: {n} instances from {chosen}; the \S+ input\(s\) of the same rank not counted",
                         " ".join(proc.stderr.split())), (name, proc.stderr)
    assert len(set(lines.values())) == 1 and lines["analyze"].startswith(f"{n} instances")
    # AND each says the same saving line under it: nothing here measured what the overlay saves, and it names
    # the command that does (overlap is not saving)
    from expo_prof.pipeline.result import NOT_MEASURED

    for name, proc in outs.items():
        assert " ".join(NOT_MEASURED.split()) in " ".join(proc.stdout.split()), (name, proc.stdout)
    assert f"+ {n} instances" in " ".join(outs["export"].stdout.split())
    assert f"{n} instances" in " ".join(outs["timeline"].stdout.split())


def test_op_output_has_no_exponential_language_and_unmeasured_is_a_dash(capsys, realtraces):
    """GIVEN a real NCCL trace WHEN analysed with --op nccl THEN neither the tables nor the JSON speak of the
    exponential draw, the sampler or tok/s, and the wait (never measured on a plain trace) is null / absent,
    not 0."""
    nccl = realtraces / "hta/tests/data/nccl_parser_config/nccl_data.json.gz"
    proc = cli("analyze", str(nccl), "--op", "nccl")
    assert proc.returncode == 0, proc.stderr
    for word in ("exponential", "sampler", "tok/s"):
        assert word not in proc.stdout.lower(), word
    code, doc, _ = analyze_json(capsys, nccl, "--op", "nccl")
    assert doc["summary"]["wait_ns"] is None and doc["summary"]["per_step"]["wait_ns"] is None
    assert all(s["wait_ns"] is None for s in doc["steps"])
    # The draw on a plain CPU trace: the sampler wait is not measured there either, and says so.
    fp64 = realtraces / "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"
    text = cli("analyze", str(fp64)).stdout
    assert re.search(r"sampler wait\s+–\s+not measured", text)


def test_reading_warnings_are_printed_when_nothing_is_found(tmp_path, realtraces):
    """GIVEN a real trace without any exponential draw, its gzip stream cut short
    WHEN analysed THEN the warning gathered while reading ("gzip stream is truncated") is printed before the
    one error line, and the exit code is 1 (nothing found)."""
    src = (realtraces / "hta/tests/data/execution_trace/benchmark_simple_add_trace.json.gz").read_bytes()
    data = gzip.compress(gzip.decompress(src))
    cut = tmp_path / "cut.pt.trace.json.gz"
    cut.write_bytes(data[: int(len(data) * 0.8)])
    proc = cli("analyze", str(cut))
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and "no target instance found" in errors[0]
    warn_at = next(i for i, ln in enumerate(lines) if ln.startswith("warning:") and "gzip stream is truncated" in " ".join(lines[i:i + 2]))
    assert warn_at < lines.index(errors[0])


def test_own_files_are_one_info_line_not_warnings():
    """GIVEN a run directory holding vLLM's front-end (async_llm) trace, which has no model work
    WHEN analysed THEN no warning is printed for it (the run's warnings concern its counted trace's steps
    only); one info line says it was passed over."""
    proc = cli("analyze", str(ON))
    assert proc.returncode == 0
    # Each note starts a line with its kind; a warning's text runs until the next note.
    notes = re.split(r"^(?=warning:|info:)", proc.stderr, flags=re.M)
    warnings = [n for n in notes if n.startswith("warning:")]
    assert not any("async_llm" in w or "front-end" in w for w in warnings)
    assert proc.stderr.count("passed over: 1 vLLM front-end (async_llm) trace(s)") == 1


def test_python_api_returns_what_the_cli_prints(capsys, realtraces):
    """GIVEN a real trace WHEN analysed through `expo_prof.analyze` THEN the Result's document is the CLI's JSON,
    its tables are numpy columns adding up to the summary, and to_pandas gives the same rows."""
    import msgspec
    import numpy as np

    path = realtraces / "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"
    res = expo_prof.analyze(path)
    _, doc, _ = analyze_json(capsys, path)
    assert msgspec.to_builtins(res.document) == doc
    inst = res.instances()
    assert isinstance(inst["total_ns"], np.ndarray) and inst["total_ns"].dtype == np.int64
    assert int(inst["total_ns"].sum()) == doc["summary"]["total_ns"] and len(inst["name"]) == doc["summary"]["instances"]
    assert int(res.steps()["exposed_ns"].sum()) == sum(s["exposed_ns"] for s in doc["steps"])
    df = res.to_pandas("ranks")
    assert list(df["rank"]) == [r["rank"] for r in doc["ranks"]] and int(df["instances"].sum()) == doc["summary"]["instances"]
    from expo_prof.errors import BadInput

    with pytest.raises(BadInput):
        expo_prof.analyze(path, op="(")
