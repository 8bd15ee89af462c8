"""docs/api.md's worked example runs as written, on the real file it names, and says what it claims."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_the_worked_example_runs_and_prints_what_its_comments_say():
    # GIVEN the first python block of docs/api.md, run from the repository root (its path is a run directory
    # committed in the repository, so the example works for anyone who clones it)
    code = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S).group(1)
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(DOC.parents[1])
    try:
        with contextlib.redirect_stdout(out):
            ns: dict = {}
            exec(compile(code, str(DOC), "exec"), ns)  # noqa: S102 - our own documentation
    finally:
        os.chdir(cwd)
    lines = out.getvalue().splitlines()
    # THEN the headline printed is the one the comment shows, and the column sum equals the summary
    assert lines[0] == re.search(r'headline\)\s+# "([^"]+)"', code).group(1)
    assert lines[2] == "True"
    assert ns["s"].instances == 42 and len(ns["df"]) == 1
