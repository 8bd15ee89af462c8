"""One CLI: every command shares its help layout, exit codes, -q, error style and output-option shapes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "traces" / "samples" / "tiny-cpu-off-on"
TRACE = next((SESSION / "02-on" / "profiler").glob("rank0*.pt.trace.json.gz"))
COMMANDS = ["analyze", "timeline", "report", "export", "record", "collect", "ab", "compare", "demo", "verify"]


def cli(*args: str, cwd: Path = REPO, columns: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={"COLUMNS": str(columns), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


def test_the_command_list_shows_every_summary_whole():
    """GIVEN `expo-prof --help` WHEN read THEN each command has a summary line that ends a sentence (click used
    to cut "Run CMD (e.g." at the period), and the exit codes are named."""
    out = cli("--help").stdout
    listed = re.findall(r"^  (\w+)\s+(.+(?:\n {12,}.+)*)", out.split("Commands:")[1], re.M)
    assert sorted(name for name, _ in listed) == sorted(COMMANDS)
    for name, text in listed:
        summary = " ".join(text.split())
        assert summary.endswith((".", "?")) and "..." not in summary and "(e.g." not in summary, (name, summary)
    assert "Exit codes" in out


@pytest.mark.parametrize("name", COMMANDS)
def test_every_help_has_examples_exit_codes_and_quiet(name):
    """GIVEN each command's --help WHEN read THEN it has -q, examples that start with `expo-prof NAME`, and the
    same exit-code table as every other command."""
    out = cli(name, "--help").stdout
    assert "-q, --quiet" in out
    examples = out.split("Examples:")[1].split("Exit codes")[0]
    assert re.search(rf"^\s+expo-prof {name}\b", examples, re.M)
    table = out.split("Exit codes (every command):")[1]
    for code in ("0 ", "1 ", "2 ", "3 ", "130"):
        assert re.search(rf"^\s+{code}", table, re.M), code
    assert out.split("Exit codes (every command):")[1] == cli("analyze", "--help").stdout.split("Exit codes (every command):")[1]


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_every_help_fits_80_columns(name):
    """GIVEN a terminal of 80 columns (and a wide one, where click would otherwise widen the layout)
    WHEN any --help is printed THEN no line is wider than 80 (docs/cli.md), and every example is still there:
    a long one becomes a comment line and a command continued with ``\\``, never cut."""
    for columns in (80, 200):
        out = cli(*([name] if name else []), "--help", columns=columns).stdout
        wide = [ln for ln in out.splitlines() if len(ln) > 80]
        assert not wide, (name, columns, wide)


def test_a_long_example_is_folded_never_cut():
    """GIVEN an example longer than the help's width, with a comment WHEN laid out THEN the comment is a line of
    its own above the command, every line fits, and the command's words joined back are the command."""
    from expo_prof.cli.base import example_lines

    cmd = "expo-prof ab --repeat 2 --num-prompts 8 -- python -m vllm.entrypoints.openai.api_server " + "--x y " * 12
    lines = example_lines(cmd.strip() + "   # why this example")
    assert lines[0] == "  # why this example" and all(len(ln) <= 78 for ln in lines) and len(lines) >= 3
    assert all(ln.endswith(" \\") for ln in lines[1:-1]) and not lines[-1].endswith("\\")
    assert " ".join(w for ln in lines[1:] for w in ln.split() if w != "\\") == " ".join(cmd.split())
    assert example_lines("expo-prof demo") == ["  expo-prof demo"]


@pytest.mark.parametrize("args,needle", [
    (["analyze", "--bogus"], "No such option '--bogus'"),
    (["compare", "a", "b", "--paired", "--unpaired"], "--paired and --unpaired contradict each other"),
    (["record", "--no-load", "--num-prompts", "5", "--", "vllm", "serve", "m"], "--no-load cannot be combined with --num-prompts"),
    (["analyze", "x", "--json", "--format", "text"], "--json cannot be combined with --format text"),
    (["analyze", str(SESSION), "--format", "html"], "-o FILE.html"),
    # -o onto the input: that is the cause named, whatever the input's suffix
    (["analyze", str(TRACE), "-o", str(TRACE)], "would overwrite an input"),
    (["analyze", str(TRACE), "-o", "tables.html.txt.json"], "text tables can only be written to a file ending in"),
])
def test_bad_options_are_one_error_line_and_exit_2(tmp_path, args, needle):
    """GIVEN an unknown or conflicting option WHEN run THEN exit 2 and exactly one stderr line, `error: …`
    naming it (click's own "Usage:/Error:" style never shows), and nothing is created."""
    proc = cli(*args, cwd=tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert "Usage:" not in proc.stderr and not (tmp_path / "traces").exists()


def test_quiet_at_the_command_level_and_plurals():
    """GIVEN a run directory WHEN analysed with `analyze -q` THEN no info/warning line, and the table counts
    with the right plural ("1 rank, 33 steps")."""
    proc = cli("analyze", "-q", str(SESSION / "02-on"))
    assert proc.returncode == 0 and proc.stderr.strip() == ""
    assert "1 rank, 33 steps" in proc.stdout and "rank(s)" not in proc.stdout


def test_compare_at_80_columns_keeps_every_column_and_says_inconclusive():
    """GIVEN the committed off/on session (one run per side) WHEN compared at 80 columns THEN the change table
    still has its p column, and the verdict is "inconclusive", not "no significant difference"."""
    proc = cli("compare", str(SESSION), columns=80)
    assert proc.returncode == 0, proc.stderr
    head = next(ln for ln in proc.stdout.splitlines() if ln.split()[:1] == ["metric"] and "change" in ln)
    assert head.split()[-1] == "p"
    assert max(len(ln) for ln in proc.stdout.splitlines()) <= 80
    assert "verdict: inconclusive" in proc.stdout and "no significant difference can" not in proc.stdout
    doc = json.loads(cli("compare", str(SESSION), "--json").stdout)
    assert doc["verdict"]["decision"] == "inconclusive"
    # AND the decision is said once: the panel's title says it, its body starts with the reason (the JSON's
    # statement keeps the whole sentence)
    body = proc.stdout.split("verdict: inconclusive")[1].splitlines()[1].strip("│ ")
    assert body.startswith("one run per side") and doc["verdict"]["statement"].startswith("inconclusive: one run")


@pytest.mark.parametrize("cmd,out", [("analyze", None), ("timeline", "t.html"), ("report", "r.html"), ("export", "e.json")])
def test_nothing_found_is_exit_1_in_every_command(tmp_path, realtraces, cmd, out):
    """GIVEN a real trace with a uniform RNG kernel but no exponential draw WHEN each analysing command runs
    THEN every one exits 1 with the same short error line and detail list, and writes no file."""
    path = realtraces / "hta/tests/data/execution_trace/benchmark_simple_add_trace.json.gz"
    proc = cli(cmd, str(path), *(["-o", str(tmp_path / out)] if out else []), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert errors == ["error: no target instance found in 1 timeline (55 events)"]
    assert any(ln.startswith("  - looked for:") for ln in proc.stderr.splitlines())
    assert list(tmp_path.iterdir()) == []


def test_collect_without_ray_names_ray_not_the_option(tmp_path):
    """GIVEN Ray unimportable (a laptop without the extra) WHEN `collect DIR` runs without --ray (its default
    address) THEN one line says Ray is missing and how to get it, exit 2 — not that an option the user never
    gave needs it."""
    code = ("import sys; sys.modules['ray'] = None\n"
            "from expo_prof.cli.main import main\n"
            "sys.argv = ['expo-prof', 'collect', sys.argv[1]]; main()")
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    proc = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: Ray is not installed") and "expo-prof[ray]" in line and "--ray needs" not in line


def test_the_laptop_install_analyses_and_draws_and_names_the_extras_it_lacks(tmp_path):
    """GIVEN the laptop install — the optional extras' modules (aiohttp: "serve"; plotly: "compare-html")
    unimportable WHEN analyze, timeline, report and export read the committed runs THEN they work (the pages
    inline the vendored plotly.js bundle); and record's built-in load and compare's HTML page each stop with
    one line naming the extra, exit 2, before anything is launched or written."""
    code = ("import sys; sys.modules['aiohttp'] = None; sys.modules['plotly'] = None\n"
            "from expo_prof.cli.main import main\n"
            "sys.argv = ['expo-prof', *sys.argv[1:]]; main()")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})

    run_dir = SESSION / "02-on"
    for args in (["analyze", str(run_dir)], ["timeline", str(run_dir), "-o", "t.html"],
                 ["report", str(SESSION), "-o", "r.html"], ["export", str(run_dir), "-o", "e.json"]):
        proc = run(*args)
        assert proc.returncode == 0, (args, proc.stderr[-2000:])
    assert (tmp_path / "t.html").stat().st_size > 1_000_000 and (tmp_path / "r.html").is_file()
    rec = run("record", "-o", "run", "--", sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m")
    assert rec.returncode == 2, rec.stderr
    assert rec.stderr.strip().splitlines()[-1] == ("error: the built-in load (--load-cmd CMD drives your own) needs "
                                                   "aiohttp, an optional extra: pip install 'expo-prof[serve]'")
    assert not (tmp_path / "run").exists()
    page = run("compare", str(SESSION), "--format", "html", "-o", "c.html")
    assert page.returncode == 2 and "pip install 'expo-prof[compare-html]'" in page.stderr, page.stderr
    assert not (tmp_path / "c.html").exists()
