"""The global options (-q, -v, --no-progress, --version) work before the command's name and after it alike.

One definition (expo_prof/cli/base.py, GLOBAL_OPTIONS) gives them to the root and to every command; each test
shows the effect of the option placed after the command, next to a run without it (so the assertion can fail)
and, where it is cheap, the same option before the command.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pexpect
import pytest
from click.testing import CliRunner

from expo_prof.cli import compare as compare_cmd
from expo_prof.cli import export as export_cmd
from expo_prof.cli import report as report_cmd
from expo_prof.cli import timeline as timeline_cmd
from expo_prof.cli.base import GLOBAL_NOTE, Command, Group, Settings
from expo_prof.cli.main import cli as root
from expo_prof.version import __version__

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "traces" / "samples" / "tiny-cpu-off-on"
RUN = SESSION / "02-on"
TRACE = next((RUN / "profiler").glob("rank0*.pt.trace.json.gz"))
COMMANDS = ["analyze", "timeline", "report", "export", "record", "collect", "ab", "compare", "demo", "verify"]
GLOBAL_FLAGS = {"-q": "quiet", "-v": "verbose", "--no-progress": "no_progress"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


def in_terminal(*args: str) -> tuple[int, str]:
    """The command under a pseudo-terminal (rich draws its progress bar there), the bar shown from 1 byte on."""
    child = pexpect.spawn(sys.executable, ["-m", "expo_prof", *args], cwd=str(REPO), timeout=300,
                          dimensions=(30, 100), encoding="utf-8", codec_errors="replace",
                          env={**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color",
                               "EXPO_PROF_PROGRESS_MIN_BYTES": "1"})
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, ANSI.sub("", child.before or "")


def test_no_progress_after_analyze_hides_the_bar():
    """GIVEN a run analysed in a terminal, the progress threshold at 1 byte WHEN `analyze RUN` runs THEN the
    reading bar is drawn; WHEN `analyze RUN --no-progress` (or `--no-progress analyze RUN`) runs THEN no bar is
    drawn, and the tables are the same."""
    rc, shown = in_terminal("analyze", str(RUN))
    assert rc == 0 and "reading traces" in shown, shown[-2000:]
    tables = shown[shown.index("Hidden vs exposed time"):]
    for args in (["analyze", str(RUN), "--no-progress"], ["--no-progress", "analyze", str(RUN)]):
        rc, out = in_terminal(*args)
        assert rc == 0 and "reading traces" not in out, (args, out[-2000:])
        assert out[out.index("Hidden vs exposed time"):] == tables, args


def _spy(monkeypatch, module, name: str) -> list:
    """Record the settings object each call of ``module.name`` gets (its first argument, or ``settings=``)."""
    seen: list = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        seen.append(next(a for a in (*args, *kwargs.values()) if isinstance(a, Settings)))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return seen


@pytest.mark.parametrize("cmd,module,name,out", [
    ("timeline", timeline_cmd, "show_notes", "t.html"),
    ("report", report_cmd, "show_notes", "r.html"),
    ("export", export_cmd, "show_notes", "e.json"),
    ("compare", compare_cmd, "run_comparison", "c.json"),
])
def test_no_progress_after_the_command_reaches_its_settings(monkeypatch, tmp_path, cmd, module, name, out):
    """GIVEN timeline, report, export and compare run through the real root group WHEN `--no-progress` is
    given after the command's name THEN the settings the command works with say no progress, as they do for
    `--no-progress CMD`, and do not without the flag."""
    inputs = [str(SESSION)] if cmd == "compare" else [str(RUN)]
    extra = ["--json"] if cmd == "compare" else []
    seen = _spy(monkeypatch, module, name)
    for args, want in ([[cmd, *inputs, *extra, "-o", str(tmp_path / "a" / out)], False],
                       [[cmd, *inputs, *extra, "-o", str(tmp_path / "b" / out), "--no-progress"], True],
                       [["--no-progress", cmd, *inputs, *extra, "-o", str(tmp_path / "c" / out)], True]):
        Path(args[args.index("-o") + 1]).parent.mkdir()
        r = CliRunner().invoke(root, args, catch_exceptions=False)
        assert r.exit_code == 0, r.output
        assert seen[-1].no_progress is want, args
    assert len(seen) == 3


@pytest.mark.parametrize("cmd,out", [("analyze", None), ("timeline", "t.html"), ("report", "r.html"),
                                     ("export", "e.json"), ("compare", "c.json")])
def test_quiet_after_the_command_leaves_only_results(tmp_path, cmd, out):
    """GIVEN each analysing command and compare WHEN run without -q THEN it prints notes on stderr (compare: the
    line naming its output); WHEN run with -q after the command's name (or before it) THEN none of that: stderr
    is empty, compare prints nothing, and the result is still there (the tables, the file)."""
    inputs = [str(SESSION), "--json"] if cmd == "compare" else [str(RUN)]

    def run(*args: str, where: str) -> tuple[subprocess.CompletedProcess, Path | None]:
        (tmp_path / where).mkdir()
        target = tmp_path / where / out if out else None
        return cli(*[a.replace("OUT", str(target)) for a in args], cwd=tmp_path), target

    with_o = ["-o", "OUT"] if out else []
    loud, target = run(cmd, *inputs, *with_o, where="loud")
    assert loud.returncode == 0, loud.stderr
    if cmd == "compare":
        assert loud.stdout == f"json: {target}\n"
    else:
        assert "warning: rank 0: 33 steps counted" in loud.stderr
    for args in ([cmd, *inputs, *with_o, "-q"], ["-q", cmd, *inputs, *with_o]):
        quiet, target = run(*args, where="q-after" if args[0] == cmd else "q-before")
        assert quiet.returncode == 0 and quiet.stderr == "", (args, quiet.stderr)
        if cmd == "compare":
            assert quiet.stdout == "", args
        assert target.stat().st_size > 0 if target is not None else "Hidden vs exposed time" in quiet.stdout
    if cmd == "compare":
        assert json.loads((tmp_path / "q-after" / "c.json").read_text())["verdict"]["decision"] == "inconclusive"


@pytest.mark.parametrize("cmd,out", [("analyze", None), ("report", "r.html"), ("timeline", "t.html")])
def test_verbose_after_the_command_names_every_skipped_file(tmp_path, cmd, out):
    """GIVEN a trace beside four JSON files that are not traces WHEN analysed without -v THEN one warning
    counts the four; WHEN with -v after the command's name THEN each file is named on its own line."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / TRACE.name).write_bytes(TRACE.read_bytes())
    for i in range(4):
        (folder / f"junk{i}.json").write_text('{"a": 1}')
    with_o = ["-o", str(tmp_path / "x" / out), "--title", "t"] if out else []
    (tmp_path / "x").mkdir()
    counted = cli(cmd, str(folder), *with_o)
    assert counted.returncode == 0, counted.stderr
    assert "skipped 4 files" in counted.stderr and "junk2.json" not in counted.stderr
    if out:
        (tmp_path / "x" / out).unlink()
    named = cli(cmd, str(folder), *with_o, "-v")
    assert named.returncode == 0, named.stderr
    assert "skipped 4 files" not in named.stderr
    assert all(f"skipped {folder / f'junk{i}.json'}" in named.stderr for i in range(4)), named.stderr


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_takes_each_global_option_after_its_name(name):
    """GIVEN each command WHEN its --help is read THEN it lists every global option under "Global options"
    with the note on placement; WHEN a global flag is parsed after the command's name THEN it sets the one
    Settings the root made (and only that flag); WHEN `NAME --version` runs THEN it prints the version."""
    help_text = " ".join(cli(name, "--help").stdout.split())
    glob = help_text.split("Global options:")[1]
    assert " ".join(GLOBAL_NOTE.split()) in glob
    for flag in ("-q, --quiet", "-v, --verbose", "--no-progress", "--version"):
        assert flag in glob, flag
    assert "--no-progress" not in help_text.split("Global options:")[0]
    cmd = root.commands[name]
    required = ["--"] + ["x" for p in cmd.params if isinstance(p, click.Argument) and p.required]
    for flag, field in GLOBAL_FLAGS.items():
        with root.make_context("expo-prof", [name]) as ctx:
            cmd.make_context(name, [flag, *required], parent=ctx)
            assert isinstance(ctx.obj, Settings)
            assert {f: getattr(ctx.obj, f) for f in GLOBAL_FLAGS.values()} == \
                {f: f == field for f in GLOBAL_FLAGS.values()}, flag
    r = CliRunner().invoke(root, [name, "--version"])
    assert r.exit_code == 0 and r.output.strip() == f"expo-prof, version {__version__}"


def test_the_root_refuses_a_command_without_the_global_options():
    """GIVEN a plain click command WHEN added to the root THEN it is refused: every command must take the
    global options after its name too."""
    grp = Group("g")
    with pytest.raises(TypeError, match="global options"):
        grp.add_command(click.Command("plain", callback=lambda: None))
    grp.add_command(Command("ours", callback=lambda: None))
    assert "ours" in grp.commands
