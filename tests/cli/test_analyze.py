"""``expo-prof analyze`` end to end through the real CLI and the real readers.

GIVEN the real traces in ../shared/realtraces (or broken copies of them in a
temporary directory), WHEN ``expo-prof analyze`` runs (in-process through
``main()`` or as a subprocess), THEN it prints tables or the documented JSON,
or exactly one error line with the documented exit code — never a traceback.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import orjson
import pytest

from expo_prof.analysis.model import SCHEMA, AnalysisResult
from expo_prof.cli.main import main
from expo_prof.errors import EXIT_BAD_INPUT, EXIT_NOT_FOUND, EXIT_OK

REPO = Path(__file__).resolve().parents[2]
FP64 = "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"
NCCL = "hta/tests/data/nccl_parser_config/nccl_data.json.gz"


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ei:
        main(["analyze", *map(str, args)])
    out, err = capsys.readouterr()
    return ei.value.code, out, err


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("  - ")]  # details: a short list
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


def test_json_on_stdout_matches_an_independent_count(capsys, realtraces):
    # GIVEN the real vLLM 0.32 CPU trace run with --use-fp64-gumbel (inline exponential_ draws)
    path = realtraces / FP64
    # WHEN analysed with --json (a flag: the document on stdout)
    code, out, _err = run(capsys, path, "--json")
    assert code == EXIT_OK
    doc = json.loads(out)
    # THEN the documented top level is there
    assert doc["schema"] == SCHEMA and doc["schema_name"] == "expo-prof.analyze"
    assert {"summary", "ranks", "steps", "warnings"} <= set(doc)
    s = doc["summary"]
    assert {"instances", "total_ns", "hidden_ns", "exposed_ns", "hidden_fraction"} <= set(s)
    # AND the numbers equal a count made straight from the JSON (orjson, no expo_prof code)
    raw = orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    exp = [e for e in raw if e.get("name") == "aten::exponential_" and e.get("ph") == "X"]
    assert s["instances"] == len(exp) == 32
    assert s["total_ns"] == sum(round(e["dur"] * 1000) for e in exp)
    # the inline sampler runs on the only thread: nothing is hidden
    assert (s["hidden_ns"], s["exposed_ns"], s["hidden_fraction"]) == (0, s["total_ns"], 0.0)
    # one step per vLLM step annotation that holds a draw
    anns = sorted(e["ts"] for e in raw if str(e.get("name", "")).startswith("execute_context_"))
    assert len(doc["steps"]) == len({_last_before(anns, e["ts"]) for e in exp})
    # AND the document validates against the result model (the schema in docs/json-output.md)
    assert msgspec.json.decode(out.encode(), type=AnalysisResult).summary.instances == 32


def _last_before(sorted_ts: list[float], t: float) -> float:
    return max(x for x in sorted_ts if x <= t)


def test_json_file_tables_file_and_a_page(capsys, realtraces, tmp_path):
    # GIVEN --json -o FILE and --op for the NCCL kernels of a real HTA sample trace
    out_file = tmp_path / "r.json"
    code, out, err = run(capsys, realtraces / NCCL, "--op", "nccl", "--json", "-o", out_file)
    # THEN the JSON goes to the file (stdout says where), and says what the tables say
    assert code == EXIT_OK, err
    doc = json.loads(out_file.read_text())
    assert doc["op"] == "nccl" and doc["summary"]["instances"] == 21
    code, out, err = run(capsys, realtraces / NCCL, "--op", "nccl", "--top", "2")
    assert "Per rank" in out and "Worst steps by critical path (exposed; top 2)" in out
    assert f"{100 * doc['summary']['hidden_fraction']:.1f}%" in out
    # AND the tables go to a text file the same way, the page to an .html file
    txt, page = tmp_path / "r.txt", tmp_path / "r.html"
    assert run(capsys, realtraces / NCCL, "--op", "nccl", "--top", "2", "-o", txt)[0] == EXIT_OK
    assert txt.read_text().splitlines()[-1].strip() == doc["recordings"][0]["headline"]
    assert run(capsys, realtraces / NCCL, "--op", "nccl", "--format", "html", "-o", page)[0] == EXIT_OK
    assert page.read_text().startswith("<!DOCTYPE html>")
    # AND rerunning may overwrite its own earlier output
    code, _o, err = run(capsys, realtraces / NCCL, "--op", "nccl", "--json", "-o", out_file)
    assert code == EXIT_OK, err


def test_output_never_overwrites_an_input_or_a_foreign_file(capsys, realtraces, tmp_path):
    # GIVEN a copy of a real trace given as -o (and as the input), and a foreign notes file
    trace = tmp_path / "t.json.gz"
    trace.write_bytes((realtraces / FP64).read_bytes())
    before = trace.read_bytes()
    code, _out, err = run(capsys, trace, "--json", "-o", trace)
    # THEN one error line, exit 2, and the trace is untouched
    assert code == EXIT_BAD_INPUT
    assert "-o" in one_error_line(err) and "input" in err
    assert trace.read_bytes() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    code, _out, err = run(capsys, realtraces / FP64, "-o", notes)
    assert code == EXIT_BAD_INPUT and notes.read_text() == "my notes" and "refusing" in one_error_line(err)
    # AND --json is a plain flag: it never swallows the input path that follows it
    code, out, _err = run(capsys, "--json", realtraces / FP64)
    assert code == EXIT_OK and json.loads(out)["summary"]["instances"] == 32


def test_nothing_found_exits_1_with_names(capsys, realtraces):
    # GIVEN a real trace with a uniform RNG kernel but no exponential draw
    path = realtraces / "hta/tests/data/execution_trace/benchmark_simple_add_trace.json.gz"
    code, _out, err = run(capsys, path)
    line = one_error_line(err)
    # THEN exit 1: one short error line, then what was looked for and the similar names present as a short list
    assert code == EXIT_NOT_FOUND and line.startswith("error: no target instance found in 1 timeline (") and len(line) < 100
    details = [ln for ln in err.splitlines() if ln.startswith("  - ")]
    assert details[0].startswith("  - looked for:") and "aten::exponential_" in details[0] and "exponential_kernel" in details[0]
    assert "aten::uniform_" in details[1] and "distribution_elementwise_grid_stride_kernel" in details[1]


@pytest.mark.parametrize(
    "case",
    ["missing", "empty-dir", "nothing-recognisable", "bad-regex", "bad-size", "over-cap", "empty-file", "no-paths"],
)
def test_bad_input_is_one_line_exit_2(capsys, realtraces, tmp_path, case):
    # GIVEN one kind of bad input
    args: list[str | Path]
    if case == "missing":
        args = [tmp_path / "nope.json"]
    elif case == "empty-dir":
        args = [tmp_path]
    elif case == "nothing-recognisable":
        (tmp_path / "notes.txt").write_text("hello")
        (tmp_path / "data.csv").write_text("a,b\n1,2\n")
        args = [tmp_path]
    elif case == "bad-regex":
        args = [realtraces / FP64, "--op", "("]
    elif case == "bad-size":
        args = [realtraces / FP64, "--max-bytes", "lots"]
    elif case == "over-cap":  # a decompression cap far below the trace's size
        args = [realtraces / FP64, "--max-bytes", "64K"]
    elif case == "empty-file":
        (tmp_path / "x.pt.trace.json").write_bytes(b"")
        args = [tmp_path / "x.pt.trace.json"]
    else:
        args = []
    code, out, err = run(capsys, *args)
    # THEN exit 2 with one line on stderr, nothing on stdout
    assert code == EXIT_BAD_INPUT, (out, err)
    line = one_error_line(err)
    assert out == ""
    if case == "over-cap":
        assert "cap" in line or "max-bytes" in line


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    code = "from expo_prof.cli.main import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "analyze", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )


def test_subprocess_broken_inputs_never_traceback(realtraces, tmp_path):
    # GIVEN a truncated gzip, invalid JSON and a trace with a raw control byte in a name, made from a real trace
    raw = gzip.decompress((realtraces / FP64).read_bytes())
    (tmp_path / "trunc.pt.trace.json.gz").write_bytes(gzip.compress(raw)[: len(gzip.compress(raw)) // 2])
    (tmp_path / "invalid.pt.trace.json").write_bytes(b'{"traceEvents": [{"ph": "X", "name": ')
    i = raw.index(b'"aten::exponential_"')
    (tmp_path / "ctrl.pt.trace.json").write_bytes(raw[: i + 5] + b"\x01\xff" + raw[i + 5 :])
    done = {}
    for name in ("trunc.pt.trace.json.gz", "invalid.pt.trace.json", "ctrl.pt.trace.json"):
        p = done[name] = _cli(str(tmp_path / name), "--json")
        # THEN a result (exit 0/1, with warnings) or one error line (exit 2): never a traceback
        assert p.returncode in (EXIT_OK, EXIT_NOT_FOUND, EXIT_BAD_INPUT), p.stderr
        assert "Traceback" not in p.stderr
        if p.returncode == EXIT_OK:
            doc = json.loads(p.stdout)
            assert doc["summary"]["instances"] >= 1
        else:
            one_error_line(p.stderr)
    # AND the control byte case keeps every draw but the damaged name and says so
    p = done["ctrl.pt.trace.json"]
    assert p.returncode == EXIT_OK, p.stderr
    assert json.loads(p.stdout)["summary"]["instances"] >= 31


def test_progress_bar_only_on_a_terminal(realtraces):
    # GIVEN stderr attached to a pseudo-terminal and the size threshold lowered to 1 byte
    import pty

    code = "from expo_prof.cli.main import main; main()"
    env = {**os.environ, "EXPO_PROF_PROGRESS_MIN_BYTES": "1", "COLUMNS": "100", "TERM": "xterm"}
    pid, fd = pty.fork()
    if pid == 0:  # child: stdout to /dev/null, stderr is the pty
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.chdir(REPO)
        os.execve(sys.executable, [sys.executable, "-c", code, "analyze", str(realtraces / FP64)], env)
    chunks = []
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    text = b"".join(chunks).decode("utf-8", "replace")
    # THEN the bar was drawn there and the command still succeeded
    assert os.waitstatus_to_exitcode(status) == EXIT_OK, text
    assert "reading traces" in text
    # AND without a terminal (captured pipes) no bar is drawn
    p = _cli(str(realtraces / FP64), env={"EXPO_PROF_PROGRESS_MIN_BYTES": "1"})
    assert p.returncode == EXIT_OK and "reading traces" not in p.stderr


def test_names_from_traces_are_escaped(capsys, realtraces, tmp_path):
    # GIVEN a real trace whose draw is renamed to contain rich markup
    raw = gzip.decompress((realtraces / FP64).read_bytes())
    raw = raw.replace(b'"aten::exponential_"', b'"[bold red]aten::exponential_[/]"')
    p = tmp_path / "markup.pt.trace.json"
    p.write_bytes(raw)
    code, out, err = run(capsys, p, "--op", re.escape("[bold red]aten::exponential_[/]"))
    # THEN the name is printed literally, markup and all
    assert code == EXIT_OK, err
    assert "[bold red]aten::exponential_" in out
