"""Bar: on every file in ../shared/realtraces, analyze gives a result or one clear line.

GIVEN each real file (and each source's directory, and the whole tree at
once), WHEN ``expo-prof analyze --json -`` runs on it (default target and
``--op nccl|hcom``), THEN it exits 0 with a valid document, or 1/2 with
exactly one ``error:`` line and nothing on stdout — never a traceback.
"""

from __future__ import annotations

import json

import pytest

from expo_prof.cli.main import main

from shared_paths import REALTRACES as ROOT  # noqa: E402  (tests/shared_paths.py)
FILES = sorted(p for p in ROOT.rglob("*") if p.is_file()) if ROOT.is_dir() else []
DIRS = sorted(p for p in ROOT.iterdir() if p.is_dir()) if ROOT.is_dir() else []


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ei:
        main(["analyze", *args, "--json"])
    out, err = capsys.readouterr()
    return ei.value.code, out, err


def _check(code: int, out: str, err: str) -> dict | None:
    assert "Traceback" not in err
    if code == 0:
        doc = json.loads(out)
        found = [r["summary"] for r in doc["recordings"] if r["summary"] is not None]
        assert found, doc["recordings"]
        # one recording: its summary is the top level; several: none combines them
        assert (doc["summary"] is not None) == (len(doc["recordings"]) == 1)
        for s in found:
            assert s["instances"] >= 1 and s["hidden_ns"] + s["exposed_ns"] == s["total_ns"]
            assert 0 <= s["hidden_ns"] <= s["total_ns"]
        return doc
    assert code in (1, 2), (code, err)
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("warning:", "info:", "  - "))]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert out == ""
    return None


def test_the_shared_traces_are_there(realtraces):
    assert len(FILES) >= 60 and len(DIRS) >= 5


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_every_real_file(capsys, realtraces, path):
    for op in (None, r"nccl|hcom_"):
        code, out, err = _run(capsys, str(path), *(["--op", op] if op else []))
        _check(code, out, err)


def test_every_source_directory_and_the_whole_tree(capsys, realtraces):
    results = {}
    for d in [*DIRS, ROOT]:
        code, out, err = _run(capsys, str(d), "--op", r"nccl|hcom_")
        results[d.name] = _check(code, out, err)
    # communication exists in the HTA, msinsight and msprof-analyze sets
    assert results["hta"] is not None and results["msinsight"] is not None
    whole = results[ROOT.name]
    # the whole tree is many unrelated recordings, each with its own figures, never one merged summary
    assert whole is not None and whole["summary"] is None
    assert sum(r["summary"] is not None for r in whole["recordings"]) >= 3
