"""``.nsys-rep`` input: exported with nsys into a cache (never over the user's files), or one line saying how.

nsys is not installed on the test machines: the missing-nsys path runs for real, and the nsys-present path
runs a FAKE ``nsys`` written by the test onto PATH, which logs its arguments and writes a GENERATED export
(tests/nsys_gen.py) where ``--output`` says.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nsys_gen import write_nsys_export  # type: ignore[import-not-found]
from shared_paths import REPO  # type: ignore[import-not-found]

from expo_prof.errors import BadInput
from expo_prof.readers import load
from expo_prof.readers.nsys.report import CACHE_ENV, NSYS_ENV

FAKE_NSYS = """#!{python}
# FAKE nsys (a test stand-in, not NVIDIA's): logs argv, then writes a GENERATED export to --output.
import json, shutil, sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
if {fail!r}:
    print("FAKE nsys: cannot export this report", file=sys.stderr)
    sys.exit(1)
shutil.copyfile({export!r}, args[args.index("--output") + 1])
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A cache in tmp, nsys looked up on a PATH that has none, and a report (its bytes do not matter here)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(NSYS_ENV, raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    assert shutil.which("nsys") is None, "a real nsys is on PATH: the missing-nsys test would not test it"
    rep = tmp_path / "data" / "run1.nsys-rep"
    rep.parent.mkdir()
    rep.write_bytes(b"NSYS-REPORT-BYTES (opaque to expo-prof)")
    return tmp_path, bin_dir, rep


def _fake_nsys(tmp_path: Path, bin_dir: Path, fail: bool = False) -> Path:
    export = tmp_path / "generated.sqlite"
    if not export.exists():
        write_nsys_export(export)
    log = tmp_path / "nsys-calls.jsonl"
    exe = bin_dir / "nsys"
    exe.write_text(FAKE_NSYS.format(python=sys.executable, log=str(log), export=str(export), fail=fail))
    exe.chmod(0o755)
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def test_without_nsys_one_line_says_how_to_export(env):
    # GIVEN a report and no nsys on PATH
    tmp_path, _, rep = env
    # WHEN it is loaded THEN one BadInput line naming the report and the export command to run
    with pytest.raises(BadInput) as ei:
        load([rep])
    msg = str(ei.value)
    assert "\n" not in msg and str(rep) in msg and "nsys is not on PATH" in msg
    assert f"nsys export --type sqlite --output {rep.with_suffix('.sqlite')} {rep}" in msg
    # AND nothing was written anywhere
    assert not (tmp_path / "cache").exists() and sorted(p.name for p in rep.parent.iterdir()) == ["run1.nsys-rep"]


def test_without_nsys_the_cli_exits_2_with_one_line(env):
    # GIVEN the same report WHEN `expo-prof analyze` runs as a subprocess (the real CLI)
    _, _, rep = env
    r = subprocess.run([sys.executable, "-m", "expo_prof", "analyze", str(rep)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    # THEN exit 2 (bad input) and exactly one error line, never a traceback
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "nsys export --type sqlite --output" in lines[0] and "Traceback" not in r.stderr


def test_with_nsys_the_report_is_exported_once_into_the_cache(env):
    # GIVEN a FAKE nsys on PATH
    tmp_path, bin_dir, rep = env
    log = _fake_nsys(tmp_path, bin_dir)
    before = rep.read_bytes()
    # WHEN the report is loaded
    (tl,) = load([rep]).timelines
    # THEN nsys was asked for a SQLite export of exactly that report into the cache, overwriting only that file
    (call,) = _calls(log)
    out = Path(call[call.index("--output") + 1])
    assert call[:7] == ["export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out)]
    assert call[7:] == [str(rep)]
    assert out.parent == tmp_path / "cache" / "nsys"
    cached = list((tmp_path / "cache" / "nsys").iterdir())
    assert len(cached) == 1 and cached[0].name.startswith("run1-") and cached[0].suffix == ".sqlite"
    # AND the Timeline is that export's, labelled with the report the user gave
    assert tl.fmt == "nsys" and tl.source == str(rep) and tl.meta["nsys_export"] == str(cached[0])
    # AND the user's folder and report are untouched
    assert rep.read_bytes() == before and sorted(p.name for p in rep.parent.iterdir()) == ["run1.nsys-rep"]
    # WHEN it is loaded again THEN the export is reused (nsys not run)
    load([rep])
    assert len(_calls(log)) == 1
    # WHEN the report is newer than the export (recorded again) THEN it is exported again
    later = time.time() + 5
    os.utime(rep, (later, later))
    load([rep])
    assert len(_calls(log)) == 2


def test_a_fresh_export_next_to_the_report_is_read_and_never_written(env):
    # GIVEN the user's own export X.sqlite beside X.nsys-rep, newer than it, and a FAKE nsys that must not run
    tmp_path, bin_dir, rep = env
    log = _fake_nsys(tmp_path, bin_dir)
    sibling = rep.with_suffix(".sqlite")
    write_nsys_export(sibling, schema="2024")
    data = sibling.read_bytes()
    # WHEN the report is loaded THEN that export is read as it is
    (tl,) = load([rep]).timelines
    assert tl.meta["nsys_export"] == str(sibling) and tl.meta["nsys"]["table"] == "META_DATA_EXPORT"
    assert _calls(log) == [] and sibling.read_bytes() == data
    # GIVEN the folder holding both WHEN loaded THEN the profile is read once, from the export
    res = load([rep.parent])
    assert len(res.timelines) == 1 and res.timelines[0].source == str(sibling)
    assert dict((p.name, why) for p, why in res.skipped)["run1.nsys-rep"] == "same profile as run1.sqlite (read that instead)"


def test_a_failing_export_is_one_line_and_leaves_no_file(env):
    # GIVEN a FAKE nsys that fails WHEN the report is loaded
    tmp_path, bin_dir, rep = env
    _fake_nsys(tmp_path, bin_dir, fail=True)
    with pytest.raises(BadInput) as ei:
        load([rep])
    # THEN one line with nsys's exit code and last message, and no half-written export in the cache
    msg = str(ei.value)
    assert "\n" not in msg and "nsys export failed (exit 1): FAKE nsys: cannot export this report" in msg
    assert list((tmp_path / "cache" / "nsys").iterdir()) == []
